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
        points: One row per parameter point, in the design's order: the parameters
            (``param.*``), ``sample_method`` (when the sweep records it), ``n_runs``,
            ``max_implausibility``, ``rmse_<series>``, ``plausible``; with a training
            window also ``test_max_implausibility``, ``test_rmse_<series>``,
            ``test_plausible`` (the years after the window) and the same with ``all_``
            (every year: the in-sample fit).
        scores: Point number (row of ``points``) -> its full score.
        measures: Point number -> the measures of its runs (for plots).
        region: Parameter -> ``{"low", "high"}`` (numbers) or ``{"values"}`` (categories)
            over the plausible points, with ``"sampled"`` the design's span.
        best: Row number in ``points`` of the smallest ``max_implausibility`` (None: no
            computable point).
        targets: The targets scored against (the training window's, when there is one).
        validation: With a training window: the windows and the out-of-sample summary
            (``out_of_sample_summary``); None without one.
        sensitivity: SALib indices of the scores to the parameters
            (``calibration.sensitivity.calibration_sensitivity``; set by ``calibrate``).
        wave: A refocused wave's origin and bounds (``calibration.refocus.Wave.summary``);
            None for a first wave.
    """

    points: pd.DataFrame
    scores: dict[int, HindcastScore]
    measures: dict[int, list[RunMeasures]]
    region: dict[str, dict]
    best: int | None
    targets: HindcastTargets
    validation: dict | None = None
    sensitivity: pd.DataFrame | None = None
    wave: dict | None = None

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
            "region": self.region, "best": best, "validation": self.validation,
            "wave": self.wave, "notice": self.targets.notice,
        }

    @property
    def parameters(self) -> list[str]:
        """The ``param.*`` columns."""
        return [c for c in self.points.columns if c.startswith(PARAM_PREFIX)]


def history_match(sweep_dir: Path, index: pd.DataFrame, targets: HindcastTargets,
                  train: tuple[int, int] | None = None) -> CalibrationResult:
    """Score every parameter point of a finished sweep and find the plausible region.

    Args:
        sweep_dir: The sweep directory (run directories by run id).
        index: ``sweep_runs.csv`` as a table (status, replicate, ``param.*``).
        targets: The hindcast targets.
        train: A training window (first, last calendar year): the region is fitted on it
            alone (``targets.within``; runs measured up to its last year), and every point
            is also scored on the observed years after it (out of sample) and on every year
            (the in-sample fit), side by side in ``validation``.

    Raises:
        AnalysisInputError: no finished run, a run's table lacks a column, or the window
            leaves nothing to fit or to test.
    """
    params = [c for c in index.columns if c.startswith(PARAM_PREFIX)]
    done = index[index["status"] == "done"]
    if done.empty:
        raise AnalysisInputError(f"{sweep_dir}: no finished run to score")
    fit, test = (targets, None) if train is None else _windows(targets, train)
    keys = done[params].astype(str).agg("|".join, axis=1) if params else pd.Series(
        "", index=done.index)
    rows, scores, measures = [], {}, {}
    for number, (_, group) in enumerate(done.groupby(keys, sort=False)):
        tables = [read_hindcast_agents(Path(sweep_dir) / r / "agents_yearly.csv")
                  for r in dict.fromkeys(group["run_id"].astype(str))]
        runs = [run_measures(t, fit) for t in tables]
        score = score_measures(runs, fit)
        scores[number], measures[number] = score, runs
        row = {p: group[p].iloc[0] for p in params}
        if "sample_method" in group.columns:
            row["sample_method"] = group["sample_method"].iloc[0]
        row.update(n_runs=len(runs), max_implausibility=score.max_implausibility,
                   **{f"rmse_{k}": v for k, v in score.rmse.items()},
                   plausible=score.plausible)
        if test is not None:
            whole = [run_measures(t, targets) for t in tables]
            for prefix, window in (("test_", test), ("all_", targets)):
                other = score_measures(whole, window)
                row.update({f"{prefix}max_implausibility": other.max_implausibility,
                            **{f"{prefix}rmse_{k}": v for k, v in other.rmse.items()},
                            f"{prefix}plausible": other.plausible})
        rows.append(row)
    points = pd.DataFrame(rows)
    finite = points["max_implausibility"].dropna()
    best = int(finite.idxmin()) if len(finite) else None
    region = _region(points, params)
    validation = None if test is None else out_of_sample_summary(points, best, train, test)
    return CalibrationResult(points, scores, measures, region, best, fit, validation)


def _windows(targets: HindcastTargets,
             train: tuple[int, int]) -> tuple[HindcastTargets, HindcastTargets]:
    """The training window's targets and those of the observed years after it."""
    first, last = train
    try:
        fit = targets.within(first, last)
        test = targets.within(last + 1, max(targets.observed_years))
    except ValueError as exc:
        raise AnalysisInputError(f"training window {first}-{last}: {exc}") from exc
    return fit, test


def out_of_sample_summary(points: pd.DataFrame, best: int | None, train: tuple[int, int],
                          test: HindcastTargets) -> dict:
    """The fit on the training window beside its implausibility after it and the in-sample fit.

    Plain numbers (every year in-sample) for ``summary.json`` and the CLI.
    """
    plausible = points[points["plausible"]]
    test_i = plausible["test_max_implausibility"].dropna()
    in_sample = points["all_max_implausibility"].dropna()
    years = sorted({y for s in test.series for y in s.policies})
    return {
        "train": list(train), "test": [years[0], years[-1]],
        "n_plausible_train": int(len(plausible)),
        "test_max_implausibility_of_plausible": (
            {"min": _plain(test_i.min()), "median": _plain(test_i.median()),
             "max": _plain(test_i.max())} if len(test_i) else None),
        "n_plausible_train_and_test": int(plausible["test_plausible"].sum()),
        "best_train_point": None if best is None else {
            "point": best,
            "train_max_implausibility": _plain(points.loc[best, "max_implausibility"]),
            "test_max_implausibility": _plain(points.loc[best, "test_max_implausibility"]),
            "train_rmse": _rmse(points, best, "rmse_"),
            "test_rmse": _rmse(points, best, "test_rmse_")},
        "in_sample": {
            "n_plausible": int(points["all_plausible"].sum()),
            "best_point": int(in_sample.idxmin()) if len(in_sample) else None,
            "best_max_implausibility": _plain(in_sample.min()) if len(in_sample) else None,
            "best_rmse": _rmse(points, int(in_sample.idxmin()), "all_rmse_")
            if len(in_sample) else None},
    }


def _rmse(points: pd.DataFrame, row: int, prefix: str) -> dict:
    return {c[len(prefix):]: _plain(points.loc[row, c])
            for c in points.columns if c.startswith(prefix)}


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
