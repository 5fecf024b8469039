"""Paired arm differences: hand-computed means, a reproducible bootstrap, and clear errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.policy import paired_arm_differences


def _outcomes() -> pd.DataFrame:
    # seeds 1-4 in both arms (listed in another order), seed 5 only in "grants"
    rows = [("status_quo", s, v) for s, v in ((1, 0.10), (2, 0.20), (3, 0.30), (4, 0.40))]
    rows += [("grants", s, v) for s, v in ((4, 0.45), (3, 0.36), (2, 0.27), (1, 0.18), (5, 9.0))]
    return pd.DataFrame(rows, columns=["param.case", "seed", "final_share_elevated"])


def test_differences_are_paired_by_seed() -> None:
    table = paired_arm_differences(_outcomes(), "status_quo",
                                   outcome_columns=["final_share_elevated"])
    (row,) = table.to_dict("records")
    # pairs (0.18-0.10, 0.27-0.20, 0.36-0.30, 0.45-0.40): mean 0.065; seed 5 has no pair
    assert row["arm"] == "grants" and row["n_pairs"] == 4
    assert row["mean_difference"] == pytest.approx(0.065)
    assert row["mean_reference"] == pytest.approx(0.25)
    assert row["mean_arm"] == pytest.approx(0.315)
    assert 0.05 <= row["ci_low"] <= row["mean_difference"] <= row["ci_high"] <= 0.08
    again = paired_arm_differences(_outcomes(), "status_quo",
                                   outcome_columns=["final_share_elevated"])
    assert again.equals(table)  # seeded bootstrap


def test_a_constant_difference_has_a_zero_width_interval_and_one_pair_none() -> None:
    frame = pd.DataFrame({"param.case": ["a", "a", "b", "b"], "seed": [1, 2, 1, 2],
                          "x": [1.0, 2.0, 1.5, 2.5]})
    (row,) = paired_arm_differences(frame, "a", outcome_columns=["x"]).to_dict("records")
    assert row["ci_low"] == row["ci_high"] == pytest.approx(0.5)
    (single,) = paired_arm_differences(frame.iloc[[0, 2]], "a",
                                       outcome_columns=["x"]).to_dict("records")
    assert single["n_pairs"] == 1 and np.isnan(single["ci_low"]) and np.isnan(single["ci_high"])


def test_undefined_outcomes_drop_out_of_the_pairs() -> None:
    frame = pd.DataFrame({"param.case": ["a", "a", "b", "b"], "seed": [1, 2, 1, 2],
                          "x": [1.0, np.nan, 2.0, 3.0]})
    (row,) = paired_arm_differences(frame, "a", outcome_columns=["x"]).to_dict("records")
    assert row["n_pairs"] == 1 and row["mean_difference"] == 1.0


def test_a_missing_reference_or_arm_column_is_an_error() -> None:
    with pytest.raises(AnalysisInputError, match="reference arm 'nope'"):
        paired_arm_differences(_outcomes(), "nope", outcome_columns=["final_share_elevated"])
    with pytest.raises(AnalysisInputError, match="param.case"):
        paired_arm_differences(pd.DataFrame({"seed": [1]}), "a")


def test_the_report_of_a_policy_sweep_compares_its_arms(experiments, tmp_path) -> None:
    """End to end: a real (collected) sweep of two arms x 2 seeds, and its report."""
    from governed_broker.analysis.loaders import load_sweep
    from governed_broker.analysis.report import write_report
    from governed_broker.analysis.sensitivity import run_outcomes
    from governed_broker.sweep import run_sweep

    data = experiments.data()
    data.update(years=4)
    data["population"]["size"] = 10
    data["sweep"] = {"cases": {
        "status_quo": {"policy_change": None},
        "no_aid": {"policy_change": {"from_year": 3, "settings": {"finance.aid.probability": 0}}},
    }, "replicates": 2, "executor": "local", "max_workers": 1}
    out = tmp_path / "sweep"
    run_sweep(experiments.write(data), out_dir=out, progress=False)
    outcomes = run_outcomes(load_sweep(out))
    table = paired_arm_differences(outcomes, "status_quo")
    assert set(table["arm"]) == {"no_aid"} and set(table["n_pairs"]) == {2}
    text = write_report(out, tmp_path / "report.html").read_text()
    assert "Policy arms: paired differences against status_quo" in text
    assert "no_aid" in text
