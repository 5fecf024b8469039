"""History matching of a sweep against hindcast targets.

Which parameter points are not ruled out by the observed series.

Every parameter point of the sweep (its replicate runs together) is scored with
``governed_broker.analysis.hindcast.score_measures``; its implausibility is the largest over
the targets (Vernon, Goldstein & Bower 2010, Bayesian Analysis 5(4):619-670; the design is the
sweep's SALib sample). Points with ``max I <= cutoff`` form the *plausible region*, reported per
parameter as the range (numbers) or the set of values (categories) its points span, with the
share of the design it holds. The point of smallest ``max I`` is reported as the best fit, a
reference inside the region, not as "the" calibrated value: with a stochastic model and this
much observation error many points fit about equally well.

No emulator is fitted: the runs are the model itself, which the rule-based baseline makes
cheap; for expensive (LLM) runs use a smaller design and replicates, or re-score an existing
sweep (the response cache makes re-running calls free).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.hindcast import (
    HindcastScore,
    HindcastTargets,
    RunMeasures,
    read_hindcast_agents,
    run_measures,
    score_measures,
)
from governed_broker.sweep.plan import PARAM_PREFIX


@dataclass(frozen=True)
class CalibrationResult:
    """The scored design and the region it leaves.

    Attributes:
        points: One row per parameter point: the parameters (``param.*``), ``n_runs``,
            ``max_implausibility``, ``rmse_<series>``, ``plausible``.
        scores: Point number (row of ``points``) -> its full score.
        measures: Point number -> the measures of its runs (for plots).
        region: Parameter -> ``{"low", "high"}`` (numbers) or ``{"values"}`` (categories)
            over the plausible points, with ``"sampled"`` the design's span.
        best: Row number in ``points`` of the smallest ``max_implausibility`` (None: no
            computable point).
        targets: The targets scored against.
    """

    points: pd.DataFrame
    scores: dict[int, HindcastScore]
    measures: dict[int, list[RunMeasures]]
    region: dict[str, dict]
    best: int | None
    targets: HindcastTargets

    @property
    def n_plausible(self) -> int:
        """Points not ruled out."""
        return int(self.points["plausible"].sum())

    def summary(self) -> dict:
        """A JSON-ready summary: cutoff, counts, region, best point and its score."""
        best = None
        if self.best is not None:
            row = self.points.loc[self.best]
            score = self.scores[self.best]
            best = {
                "parameters": {k[len(PARAM_PREFIX):]: _plain(row[k]) for k in self.parameters},
                "max_implausibility": _plain(row["max_implausibility"]),
                "rmse": {k: _plain(v) for k, v in score.rmse.items()},
                "targets": json.loads(score.table.to_json(orient="records")),
            }
        return {
            "targets": self.targets.name, "targets_version": self.targets.version,
            "method": "history matching: max implausibility over targets <= cutoff, "
                      "no emulator (every design point simulated)",
            "cutoff": self.targets.cutoff, "n_points": len(self.points),
            "n_plausible": self.n_plausible,
            "plausible_share": self.n_plausible / len(self.points) if len(self.points) else 0.0,
            "region": self.region, "best": best, "notice": self.targets.notice,
        }

    @property
    def parameters(self) -> list[str]:
        """The ``param.*`` columns."""
        return [c for c in self.points.columns if c.startswith(PARAM_PREFIX)]


def history_match(sweep_dir: Path, index: pd.DataFrame,
                  targets: HindcastTargets) -> CalibrationResult:
    """Score every parameter point of a finished sweep and find the plausible region.

    Args:
        sweep_dir: The sweep directory (run directories by run id).
        index: ``sweep_runs.csv`` as a table (status, replicate, ``param.*``).
        targets: The hindcast targets.

    Raises:
        AnalysisInputError: no finished run, or a run's table lacks a column.
    """
    params = [c for c in index.columns if c.startswith(PARAM_PREFIX)]
    done = index[index["status"] == "done"]
    if done.empty:
        raise AnalysisInputError(f"{sweep_dir}: no finished run to score")
    keys = done[params].astype(str).agg("|".join, axis=1) if params else pd.Series(
        "", index=done.index)
    rows, scores, measures = [], {}, {}
    for number, (_, group) in enumerate(done.groupby(keys, sort=False)):
        runs = [run_measures(read_hindcast_agents(Path(sweep_dir) / r / "agents_yearly.csv"),
                             targets) for r in dict.fromkeys(group["run_id"].astype(str))]
        score = score_measures(runs, targets)
        scores[number], measures[number] = score, runs
        row = {p: group[p].iloc[0] for p in params}
        row.update(n_runs=len(runs), max_implausibility=score.max_implausibility,
                   **{f"rmse_{k}": v for k, v in score.rmse.items()},
                   plausible=score.plausible)
        rows.append(row)
    points = pd.DataFrame(rows)
    finite = points["max_implausibility"].dropna()
    best = int(finite.idxmin()) if len(finite) else None
    region = _region(points, params)
    return CalibrationResult(points, scores, measures, region, best, targets)


def _region(points: pd.DataFrame, params: list[str]) -> dict[str, dict]:
    plausible = points[points["plausible"]]
    region: dict[str, dict] = {}
    for p in params:
        name = p[len(PARAM_PREFIX):]
        numeric = pd.to_numeric(points[p], errors="coerce")
        if numeric.notna().all():
            values = numeric[points["plausible"]]
            region[name] = {
                "low": _plain(values.min()) if len(values) else None,
                "high": _plain(values.max()) if len(values) else None,
                "sampled": [_plain(numeric.min()), _plain(numeric.max())],
            }
        else:
            region[name] = {"values": sorted(map(str, plausible[p].unique())),
                            "sampled": sorted(map(str, points[p].unique()))}
    return region


def _plain(value):
    """Numbers as plain Python (NaN as None) for JSON."""
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return None if math.isnan(value) else float(value)
    return value
