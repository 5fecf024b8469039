"""The runs of a sweep directory, for picking one to explore.

A running (or interrupted) sweep is listed from its plan and state files
(``governed_broker.sweep.collect.index_frame``), so runs appear as they start; a collected
sweep without its plan (e.g. copied without ``_sweep/``) from ``sweep_runs.csv``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.loaders import SWEEP_INDEX_FILE
from governed_broker.config.base import ConfigError
from governed_broker.explore.files import SWEEP_META, read_csv_complete
from governed_broker.run_dir import partial_dir


def sweep_runs(sweep_dir: Path) -> pd.DataFrame:
    """One row per run: ``run_id``, ``status``, the swept parameters, and ``path``.

    Its run directory, finished or running; empty when the sweep kept none.
    """
    if (sweep_dir / SWEEP_META / "plan.json").is_file():
        from governed_broker.sweep.collect import index_frame, load_plan
        from governed_broker.sweep.state import SweepDir

        sweep = SweepDir(sweep_dir, record_checks=False)  # the explorer writes nothing
        try:
            index = index_frame(sweep, load_plan(sweep))
        except (ConfigError, ValueError, KeyError) as exc:
            raise AnalysisInputError(f"{sweep_dir / SWEEP_META}: unreadable sweep state ({exc})"
                                     ) from exc
    else:
        index = read_csv_complete(sweep_dir / SWEEP_INDEX_FILE)
        if index is None or not {"run_id", "status"} <= set(index.columns):
            raise AnalysisInputError(f"{sweep_dir / SWEEP_INDEX_FILE}: needs the columns "
                                     "run_id and status")
    index = index.copy()
    index["path"] = [_run_path(sweep_dir, str(r)) for r in index["run_id"]]
    keep = ["run_id", "status", *[c for c in index.columns if c.startswith("param.")], "path"]
    return index[keep].reset_index(drop=True)


def _run_path(sweep_dir: Path, run_id: str) -> str:
    run = sweep_dir / run_id
    if run.is_dir() or partial_dir(run).is_dir():
        return str(run)
    return ""
