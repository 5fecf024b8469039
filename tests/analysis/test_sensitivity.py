"""Sensitivity indices: the binned estimator by hand, and SALib methods on known functions."""

from __future__ import annotations

import importlib.util

import numpy as np
import pandas as pd
import pytest

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.sensitivity import first_order_binned, sobol_indices


def test_binned_index_by_hand():
    # x = 1..10 in 2 equal-count bins {1..5}, {6..10}.
    # y: bin 1 = 0,2,0,2,0 (mean 0.8); bin 2 = 2,4,2,4,2 (mean 2.8); overall mean 1.8.
    # Between-bin variance = (1.0**2 + 1.0**2) / 2 = 1.
    # Total variance: three 0s (3 * 3.24) + five 2s (5 * 0.04) + two 4s (2 * 4.84) = 19.6 / 10
    # = 1.96.  S1 = 1 / 1.96.
    x = list(range(1, 11))
    y = [0, 2, 0, 2, 0, 2, 4, 2, 4, 2]
    assert first_order_binned(x, y, n_bins=2) == pytest.approx(1 / 1.96)


def test_binned_index_extremes():
    x = np.arange(20)
    assert first_order_binned(x, x * 2.0, n_bins=4) > 0.9  # y determined by x
    assert first_order_binned(x, np.ones(20), n_bins=4) != first_order_binned(x, x, 4)
    with pytest.raises(AnalysisInputError, match="at least"):
        first_order_binned([1, 2], [1, 2], n_bins=5)


def _outcomes(n: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
    return pd.DataFrame({"a": a, "b": b, "y": 4 * a + 0.1 * b})


def test_binned_ranks_parameters():
    out = sobol_indices(_outcomes(), ["a", "b"], "y", method="binned").set_index("parameter")
    assert out.loc["a", "S1"] > 0.8 > out.loc["b", "S1"]
    assert (out["method"] == "binned").all()


@pytest.mark.skipif(importlib.util.find_spec("SALib") is None, reason="SALib not installed")
def test_salib_rbd_fast_and_auto():
    out = sobol_indices(_outcomes(), ["a", "b"], "y", method="auto").set_index("parameter")
    assert (out["method"] == "salib-rbd_fast").all()
    assert out.loc["a", "S1"] > 0.8 and out.loc["b", "S1"] < 0.2


@pytest.mark.skipif(importlib.util.find_spec("SALib") is None, reason="SALib not installed")
def test_salib_sobol_on_saltelli_sample():
    from SALib.sample import sobol as sobol_sample

    problem = {"num_vars": 2, "names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}
    x = sobol_sample.sample(problem, 256, calc_second_order=False, seed=1)
    frame = pd.DataFrame(x, columns=["a", "b"]).assign(y=lambda f: 4 * f["a"] + 0.1 * f["b"])
    frame["sample_method"] = "sobol"
    out = sobol_indices(frame, ["a", "b"], "y", second_order=False).set_index("parameter")
    assert (out["method"] == "salib-sobol").all()
    assert out.loc["a", "ST"] > 0.9 and out.loc["b", "S1"] < 0.05


def test_unknown_output():
    with pytest.raises(AnalysisInputError, match="no column"):
        sobol_indices(_outcomes(), ["a"], "zzz")


@pytest.mark.skipif(importlib.util.find_spec("SALib") is None, reason="SALib not installed")
def test_salib_sobol_second_order_inference():
    from SALib.sample import sobol as sobol_sample

    problem = {"num_vars": 2, "names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}
    x = sobol_sample.sample(problem, 64, calc_second_order=True, seed=1)  # 64 * 6 = 384 rows
    frame = pd.DataFrame(x, columns=["a", "b"]).assign(y=lambda f: f["a"] + f["b"] ** 2)
    frame["sample_method"] = "sobol"
    # 384 = 96 * 4 = 64 * 6 fits both designs: the caller must say which
    with pytest.raises(AnalysisInputError, match="second_order"):
        sobol_indices(frame, ["a", "b"], "y")
    out = sobol_indices(frame, ["a", "b"], "y", second_order=True)
    assert out["ST"].notna().all()


def test_replicates_are_averaged_per_point():
    frame = pd.DataFrame({"a": [0.1, 0.1, 0.9, 0.9, 0.1, 0.1], "replicate": [0, 1] * 3,
                          "y": [1.0, 3.0, 5.0, 7.0, 0.0, 2.0]})
    from governed_broker.analysis.sensitivity import _average_replicates

    points = _average_replicates(frame, ["a"], "y")
    # three points (the third repeats a = 0.1 and is kept apart): means 2, 6, 1
    assert points["y"].tolist() == [2.0, 6.0, 1.0]
    assert points["a"].tolist() == [0.1, 0.9, 0.1]
