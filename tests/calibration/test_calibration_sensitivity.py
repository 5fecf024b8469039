"""SALib indices of a calibration's scores to its parameters.

On made-up designs whose answer is known: the score depends on one parameter only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from governed_broker.calibration.sensitivity import calibration_sensitivity


def _points(x: np.ndarray, method: str) -> pd.DataFrame:
    return pd.DataFrame({"param.a": x[:, 0], "param.b": x[:, 1], "sample_method": method,
                         "n_runs": 1, "max_implausibility": 1.0 + 4.0 * x[:, 0],
                         "rmse_all": 0.1 * x[:, 0] ** 2, "plausible": x[:, 0] < 0.5})


def test_a_latin_hypercube_gets_rbd_fast_first_order_indices() -> None:
    from SALib.sample import latin

    x = latin.sample({"num_vars": 2, "names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}, 200,
                     seed=1)
    table = calibration_sensitivity(_points(x, "lhs")).set_index(["output", "parameter"])
    assert set(table["method"]) == {"salib-rbd_fast"}
    assert table.loc[("max_implausibility", "a"), "S1"] > 0.8
    assert abs(table.loc[("max_implausibility", "b"), "S1"]) < 0.2
    assert "plausible" not in table.index.get_level_values("output")


def test_a_saltelli_design_gets_sobol_first_and_total_indices() -> None:
    from SALib.sample import sobol

    problem = {"num_vars": 2, "names": ["a", "b"], "bounds": [[0, 1], [0, 1]]}
    x = sobol.sample(problem, 256, calc_second_order=False, seed=1)
    table = calibration_sensitivity(_points(x, "sobol"), second_order=False)
    row = table.set_index(["output", "parameter"]).loc[("max_implausibility", "a")]
    assert row["method"] == "salib-sobol" and row["S1"] == pytest.approx(1.0, abs=0.1)
    assert row["ST"] == pytest.approx(1.0, abs=0.1)
    # a score missing at one point would break the sample's structure: it is skipped
    holes = _points(x, "sobol")
    holes.loc[3, "rmse_all"] = np.nan
    assert "rmse_all" not in set(calibration_sensitivity(holes, second_order=False)["output"])


def test_too_few_points_give_an_empty_table() -> None:
    x = np.random.default_rng(0).random((5, 2))
    assert calibration_sensitivity(_points(x, "lhs")).empty
