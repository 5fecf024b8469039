"""Sensitivity of run outcomes to swept parameters: first-order (and total) Sobol indices.

``run_outcomes`` turns a sweep into one row per run with scalar outcomes. ``sobol_indices``
estimates, for one outcome, how much of its variance each parameter explains:

* ``salib-sobol``: SALib's Sobol analysis (S1 and ST with confidence intervals). Valid only
  for a Saltelli sample in SALib's row order: N*(D+2) points, or N*(2D+2) with second order.
* ``salib-rbd_fast``: SALib's RBD-FAST first-order indices, valid for any sample
  (Latin hypercube, random, grid) of the parameters ("given data"); M = min(10, (N // 2 - 1) // 2)
  harmonics for N points (SALib's bootstrap on N/2 points requires N/2 > 2M).
* ``binned``: our own given-data estimator of the first-order index, used when SALib is not
  installed: split parameter i into ``n_bins`` equal-count bins and compute
  ``S1_i = Var_bins(mean(y | bin)) / Var(y)`` (the correlation ratio, weighting bins by their
  size; population variances). It needs no special sampling design.

``method="auto"`` uses ``salib-sobol`` when the sweep records a Saltelli/Sobol sample
(``sample_method`` column of ``sweep_runs.csv``), else ``salib-rbd_fast`` when SALib is
installed, else ``binned``. The method used is a column of the result. Replicates (runs with
the same sample point, ``replicate`` 0, 1, ... in plan order) are averaged before the analysis.
"""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd

from governed_broker.analysis.benchmarks import fit_to_benchmarks, load_benchmarks
from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.loaders import SweepData
from governed_broker.analysis.version import stamp

#: Outcome columns produced by ``run_outcomes`` (fractions 0..1 unless the name says USD).
OUTCOMES = (
    "final_share_insured",
    "final_share_elevated",
    "final_share_relocated",
    "final_share_no_measure",
    "total_damage_usd",
    "total_payout_usd",
    "benchmark_score",
)


def run_outcomes(sweep: SweepData) -> pd.DataFrame:
    """One row per completed run: parameters, seed and scalar outcomes.

    Outcomes: the last year's ``share_*`` of ``model_yearly.csv`` (``final_share_*``), the
    damage and payouts summed over all years (USD), and the benchmark score of the run
    (``benchmark_score``; NaN when no target is computable).
    """
    model = sweep.model.sort_values(["run_id", "year"])
    last = model.groupby("run_id").tail(1).set_index("run_id")
    totals = model.groupby("run_id")[["total_damage_usd", "total_payout_usd"]].sum()
    out = pd.DataFrame(index=last.index)
    for share in ("insured", "elevated", "relocated", "no_measure"):
        out[f"final_share_{share}"] = last[f"share_{share}"]
    out = out.join(totals)
    bench = load_benchmarks()
    scores = {}
    for run_id, agents in sweep.agents.groupby("run_id"):
        score = fit_to_benchmarks(agents.drop(columns="run_id"), bench).score
        scores[str(run_id)] = np.nan if score is None else score
    out["benchmark_score"] = pd.Series(scores)
    extra = [c for c in ("replicate", "seed", "sample_method") if c in sweep.runs.columns]
    keep = ["run_id", *sweep.parameters, *extra]
    return stamp(sweep.runs[keep].merge(out.reset_index(), on="run_id", how="inner"))


def first_order_binned(x: Sequence[float], y: Sequence[float], n_bins: int = 5) -> float:
    """First-order sensitivity index of y to x by the binned correlation ratio.

    Args:
        x: Parameter values (one per sample point).
        y: Outcome values.
        n_bins: Number of equal-count bins of x (ties stay in one bin).

    Returns:
        Var(E[y | bin(x)]) / Var(y), between 0 and 1 (NaN when y is constant).
    """
    frame = pd.DataFrame({"x": np.asarray(x, float), "y": np.asarray(y, float)})
    if len(frame) < 2 * n_bins:
        raise AnalysisInputError(
            f"binned first-order index needs at least {2 * n_bins} runs, got {len(frame)}"
        )
    total = frame["y"].var(ddof=0)
    if total == 0:
        return float("nan")
    bins = pd.qcut(frame["x"].rank(method="dense"), q=n_bins, labels=False, duplicates="drop")
    means = frame.groupby(bins)["y"].agg(["mean", "size"])
    between = (means["size"] * (means["mean"] - frame["y"].mean()) ** 2).sum() / len(frame)
    return float(between / total)


def _average_replicates(
    outcomes: pd.DataFrame, parameters: Sequence[str], output: str
) -> pd.DataFrame:
    """One row per sample point, in sweep order, with the output averaged over replicates.

    Replicates of a point follow each other in plan order, replicate 0 first (the sweep's
    ``replicate`` column); without that column every row is its own point. Points are never
    merged by equal parameter values: a Saltelli design may repeat a point on purpose.
    """
    if "replicate" not in outcomes.columns:
        return outcomes[[*parameters, output]].reset_index(drop=True)
    point = (outcomes["replicate"].astype(int) == 0).cumsum().rename("_point")
    grouped = outcomes.groupby(point, sort=False)
    averaged = grouped[list(parameters)].first()
    averaged[output] = grouped[output].mean()
    return averaged.reset_index(drop=True)


def _salib_available() -> bool:
    return importlib.util.find_spec("SALib") is not None


def _problem(points: pd.DataFrame, parameters: Sequence[str]) -> dict:
    bounds = [[float(points[p].min()), float(points[p].max())] for p in parameters]
    return {"num_vars": len(parameters), "names": list(parameters), "bounds": bounds}


def _second_order(n: int, d: int, given: bool | None) -> bool:
    fits = {False: n % (d + 2) == 0, True: n % (2 * d + 2) == 0}
    if given is not None:
        if not fits[given]:
            size = "N*(2D+2)" if given else "N*(D+2)"
            raise AnalysisInputError(f"salib-sobol: {n} points is not {size} for D={d}")
        return given
    if fits[True] and fits[False]:
        raise AnalysisInputError(
            f"salib-sobol: {n} points fits both N*(D+2) and N*(2D+2) for D={d}; "
            "pass second_order=True or False (the sweep's sampler.second_order)"
        )
    if not (fits[True] or fits[False]):
        raise AnalysisInputError(f"salib-sobol needs a Saltelli sample, got {n} points for D={d}")
    return fits[True]


def sobol_indices(
    outcomes: pd.DataFrame,
    parameters: Sequence[str],
    output: str,
    method: str = "auto",
    n_bins: int = 5,
    second_order: bool | None = None,
) -> pd.DataFrame:
    """Sensitivity indices of one outcome to each parameter.

    Args:
        outcomes: ``run_outcomes(sweep)`` (or any table with the parameter and output columns).
        parameters: Numeric parameter columns (at least one).
        output: The outcome column to analyse.
        method: ``auto``, ``salib-sobol``, ``salib-rbd_fast`` or ``binned`` (module docstring).
        n_bins: Bins per parameter for ``binned``.
        second_order: For ``salib-sobol``: whether the Saltelli sample includes second-order
            points (N*(2D+2) rows) or not (N*(D+2)); None infers it from the row count and
            raises when both are possible.

    Returns:
        One row per parameter: ``parameter, S1, S1_conf, ST, ST_conf, method, n_points, output``
        (``*_conf`` are SALib's 95 % half-widths; NaN where the method gives none).
    """
    if not parameters:
        raise AnalysisInputError("sensitivity analysis needs at least one swept parameter")
    missing = [c for c in [*parameters, output] if c not in outcomes.columns]
    if missing:
        raise AnalysisInputError(f"run outcomes have no column(s) {missing}")
    points = _average_replicates(outcomes, parameters, output).dropna(subset=[output])
    if method == "auto":
        saltelli = "sample_method" in outcomes.columns and outcomes["sample_method"].astype(
            str
        ).str.lower().isin({"sobol", "saltelli"}).all()
        if saltelli and _salib_available():
            method = "salib-sobol"
        else:
            method = "salib-rbd_fast" if _salib_available() else "binned"
    y = points[output].to_numpy(float)
    rows = []
    if method == "salib-sobol":
        from SALib.analyze import sobol

        second = _second_order(len(y), len(parameters), second_order)
        res = sobol.analyze(_problem(points, parameters), y, calc_second_order=second)
        for i, name in enumerate(parameters):
            rows.append((name, res["S1"][i], res["S1_conf"][i], res["ST"][i], res["ST_conf"][i]))
    elif method == "salib-rbd_fast":
        from SALib.analyze import rbd_fast

        if len(y) < 8:
            raise AnalysisInputError(f"salib-rbd_fast needs at least 8 points, got {len(y)}")
        x = points[list(parameters)].to_numpy(float)
        # SALib needs N > 2M, and its bootstrap uses N/2 points: keep 2M < N/2.
        harmonics = min(10, (len(y) // 2 - 1) // 2)
        with warnings.catch_warnings():
            # a bootstrap resample with constant output gives 0/0: its interval becomes NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            res = rbd_fast.analyze(_problem(points, parameters), x, y, M=harmonics, seed=0)
        for i, name in enumerate(parameters):
            rows.append((name, res["S1"][i], res["S1_conf"][i], np.nan, np.nan))
    elif method == "binned":
        for name in parameters:
            s1 = first_order_binned(points[name], y, n_bins)
            rows.append((name, s1, np.nan, np.nan, np.nan))
    else:
        raise ValueError(f"unknown method {method!r}")
    out = pd.DataFrame(rows, columns=["parameter", "S1", "S1_conf", "ST", "ST_conf"])
    out["method"] = method
    out["n_points"] = len(points)
    out["output"] = output
    return stamp(out)
