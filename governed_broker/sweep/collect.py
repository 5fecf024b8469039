"""The index ``sweep_runs.csv`` and the combined tables of a sweep directory.

``sweep_runs.csv`` has one row per planned run: ``run_id, index, replicate, seed,
sample_method, param.<path>..., status, attempts, started_at, finished_at, duration_s, host,
task_id, run_dir, error``. The combined tables hold the rows of every *done* run, in plan
order (a run shared by coinciding sampler points appears once), with leading columns
``run_id, replicate, seed, param.<path>...``:
``sweep_agents_yearly.parquet`` (from each ``agents_yearly.csv``), ``sweep_model_yearly.csv``
(from each ``model_yearly.csv``) and, when runs have institutions,
``sweep_institutions_yearly.csv`` (from the runs' ``institutions_yearly.csv``). All files are
written atomically.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from governed_broker.sweep.plan import PARAM_PREFIX, SweepPlan
from governed_broker.sweep.state import DONE, RunState, SweepDir, write_atomic

INDEX_FILE = "sweep_runs.csv"
AGENTS_FILE = "sweep_agents_yearly.parquet"
MODEL_FILE = "sweep_model_yearly.csv"
INSTITUTIONS_FILE = "sweep_institutions_yearly.csv"


def load_plan(sweep_dir: SweepDir) -> SweepPlan:
    """The plan of the last submission into ``sweep_dir``."""
    return SweepPlan.from_json(sweep_dir.read_plan_json())


def index_frame(sweep_dir: SweepDir, plan: SweepPlan) -> pd.DataFrame:
    """One row per planned run with its parameters and current state."""
    rows = []
    for run in plan.runs:
        state = sweep_dir.read_state(run.run_id)
        status = sweep_dir.status(run.run_id, state)
        info = asdict(state) if state else asdict(RunState(status))
        if status == DONE:
            info["error"] = None
        elif sweep_dir.has_manifest(run.run_id):  # published, its outputs changed since
            info["error"] = sweep_dir.output_problem(run.run_id)
        elif state is not None and state.status == DONE:  # its directory went away
            info["error"] = f"{run.run_id}/manifest.json is missing; re-submit to run it again"
        row = {
            "run_id": run.run_id,
            "index": run.index,
            "replicate": run.replicate,
            "seed": run.seed,
            "sample_method": run.sample_method,
        }
        for name in plan.parameter_names:
            value = run.params.get(name)
            is_nested = isinstance(value, list | dict)
            row[PARAM_PREFIX + name] = json.dumps(value) if is_nested else value
        row.update(
            status=status,
            attempts=info["attempts"],
            started_at=info["started_at"],
            finished_at=info["finished_at"],
            duration_s=info["duration_s"],
            host=info["host"],
            task_id=info["task_id"],
            run_dir=run.run_id if status == DONE else "",
            error=info["error"] or (run.error if status != DONE else None),
        )
        rows.append(row)
    return pd.DataFrame(rows)


def write_index(sweep_dir: SweepDir, plan: SweepPlan) -> pd.DataFrame:
    """Write ``sweep_runs.csv``; returns the index."""
    frame = index_frame(sweep_dir, plan)
    write_atomic(sweep_dir.root / INDEX_FILE, frame.to_csv(index=False))
    return frame


def _combined(sweep_dir: SweepDir, index: pd.DataFrame, filename: str,
              optional: bool = False) -> pd.DataFrame:
    """The rows of ``filename`` of every done run (``optional``: of the runs that have one)."""
    params = [c for c in index.columns if c.startswith(PARAM_PREFIX)]
    lead = ["run_id", "replicate", "seed", *params]
    frames = []
    done = index[index["status"] == DONE].drop_duplicates("run_id")  # shared sampler points
    for _, row in done.iterrows():
        path = sweep_dir.run_dir(row["run_id"]) / filename
        if optional and not path.is_file():
            continue
        table = pd.read_csv(path)
        for position, column in enumerate(lead):
            table.insert(position, column, row[column])
        frames.append(table)
    if not frames:
        return pd.DataFrame(columns=lead)
    combined = pd.concat(frames, ignore_index=True)
    # A column can be all-empty (float NaN) in one run and text in another: store such
    # mixed columns as nullable strings so Parquet gets one type per column.
    for column in combined.columns:
        if combined[column].dtype == object:
            combined[column] = combined[column].astype("string")
    return combined


def _write_parquet(frame: pd.DataFrame, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        frame.to_parquet(tmp, engine="pyarrow", index=False)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def collect(
    sweep_dir: SweepDir, plan: SweepPlan | None = None, *, force: bool = True
) -> pd.DataFrame:
    """Write ``sweep_runs.csv`` and the combined tables from the runs done so far.

    Args:
        sweep_dir: The sweep directory.
        plan: The plan (default: the stored one).
        force: Rewrite the combined tables even when they already hold exactly the done runs
            (``_sweep/collected.json`` records which runs they hold).

    Returns:
        The index (one row per planned run).
    """
    plan = plan or load_plan(sweep_dir)
    index = write_index(sweep_dir, plan)
    done_ids = list(dict.fromkeys(str(r) for r in index.loc[index["status"] == DONE, "run_id"]))
    marker = sweep_dir.meta / "collected.json"
    outputs = [sweep_dir.root / AGENTS_FILE, sweep_dir.root / MODEL_FILE]
    if not force and marker.is_file() and all(p.is_file() for p in outputs):
        if json.loads(marker.read_text(encoding="utf-8")) == done_ids:
            return index
    agents = _combined(sweep_dir, index, "agents_yearly.csv")
    model = _combined(sweep_dir, index, "model_yearly.csv")
    institutions = _combined(sweep_dir, index, "institutions_yearly.csv", optional=True)
    _write_parquet(agents, sweep_dir.root / AGENTS_FILE)
    write_atomic(sweep_dir.root / MODEL_FILE, model.to_csv(index=False))
    if len(institutions):
        write_atomic(sweep_dir.root / INSTITUTIONS_FILE, institutions.to_csv(index=False))
    write_atomic(marker, json.dumps(done_ids) + "\n")
    return index


def summary(index: pd.DataFrame) -> Counter:
    """Runs by status."""
    return Counter(index["status"]) if len(index) else Counter()
