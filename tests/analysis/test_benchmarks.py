"""Fit to empirical targets and failure-signature flags on a hand-built run."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from analysis_helpers import make_agents

from governed_broker.analysis.benchmarks import fit_to_benchmarks, load_benchmarks
from governed_broker.analysis.errors import AnalysisInputError


def _run():
    # 5 households, 2 years. Zone high = SFHA: households 1, 2, 3; zone low: 4, 5.
    year1 = [
        {"agent_id": 1, "insured_after": True, "flooded": True, "executed_action": "buy_insurance"},
        {"agent_id": 2, "flooded": True, "executed_action": "do_nothing"},
        {"agent_id": 3, "elevated_after": True, "executed_action": "elevate_house"},
        {"agent_id": 4, "flood_zone": "low"},
        {"agent_id": 5, "flood_zone": "low", "relocated_after": True,
         "executed_action": "relocate"},
    ]
    year2 = [
        {"agent_id": 1, "insured_before": True, "insured_after": True, "flooded": True,
         "floods_experienced": 2, "executed_action": "buy_insurance"},
        {"agent_id": 2, "flooded": True, "floods_experienced": 2, "executed_action": "do_nothing"},
        {"agent_id": 3, "elevated_before": True, "elevated_after": True},
        {"agent_id": 4, "flood_zone": "low"},
    ]
    rows = [{"year": 1, **r} for r in year1] + [{"year": 2, **r} for r in year2]
    return make_agents(rows)


def test_values_by_hand():
    fit = fit_to_benchmarks(_run(), load_benchmarks())
    v = fit.table.set_index("id")["value"]
    assert v["B1"] == pytest.approx(1 / 3)  # SFHA end owners 1, 2, 3: only 1 insured
    assert v["B2"] == pytest.approx(0.0)  # outside the SFHA: household 4, uninsured
    assert v["B3"] == pytest.approx(1 / 4)  # owner 3 elevated
    assert v["B4"] == pytest.approx(1 / 5)  # household 5 of 5 relocated
    assert v["B5"] == pytest.approx(2 / 4)  # flooded: 1, 2 (y1), 1, 2 (y2); 2 did nothing twice
    assert math.isnan(v["B6"])
    assert v["B7"] == pytest.approx(3 / 4)  # flooded: 1, 2 (y1), 1 insured, 2 (y2)
    assert v["B8"] == pytest.approx(0.0)  # one voluntary policy in force (1, y2), renewed
    # zone high in year 2 (a flood): 1 voluntary policy in force, 1 for next year: no rise
    assert v["T1"] == pytest.approx(0.0)
    assert v[["T2a", "T2b", "T2c"]].isna().all()  # the run ends before any curve point
    assert math.isnan(v["T3"])  # the one policy bought outlasts the run


def test_score_and_status_by_hand():
    fit = fit_to_benchmarks(_run(), load_benchmarks())
    table = fit.table.set_index("id")
    status = table["status"]
    # scored: B1 0.33 in [.29,.50]; B2 0 out; B4 0.2 out; B7 0.75 in; B8 0 out; T1 0 out;
    # T2a-c, T3 not computable. Unscored B3 (out), B5 (in), B6 (not computable): shown only.
    assert status["B6"] == "not_computable"
    assert list(status[status == "in_range"].index) == ["B1", "B5", "B7"]
    assert not table.loc[["B3", "B5", "B6"], "scored"].any()
    assert "not scored:" in table.loc["B5", "note"]
    in_weight = 1.0 + 1.0
    computable = 1.0 + 0.8 + 0.8 + 1.0 + 1.0 + 1.0
    assert fit.computable_weight == pytest.approx(computable)
    assert fit.score == pytest.approx(in_weight / computable)
    assert fit.passed is False


def test_failure_flags_by_hand():
    flags = fit_to_benchmarks(_run(), load_benchmarks()).flags.set_index("signature")
    assert bool(flags.loc["elevation_above_B3", "flagged"]) is True  # 0.25 > 0.12, unscored
    assert bool(flags.loc["insurance_below_B1", "flagged"]) is False
    assert bool(flags.loc["insurance_below_B2", "flagged"]) is True  # 0 < 0.01
    assert bool(flags.loc["post_flood_inaction_outside_B5", "flagged"]) is False
    # all are owners; non-relocated owners each year are 1-4, of whom only 3 is elevated
    assert flags.loc["elevation_saturating", "value"] == pytest.approx(1 / 4)
    assert bool(flags.loc["elevation_saturating", "flagged"]) is False


def test_voluntary_measures_leave_out_required_policies_and_aid_certificates():
    from governed_broker.analysis.benchmarks import MEASURES

    # 1: required by its lender, insured throughout; 2: buys in year 1, renews in 2, lapses
    # in 3; 3: an aid certificate covers year 2, then nothing
    rows = []
    for year in (1, 2, 3):
        rows += [
            {"year": year, "agent_id": 1, "insurance_required": True, "insured_before": year > 1,
             "insured_after": True},
            {"year": year, "agent_id": 2, "insured_before": year > 1, "insured_after": year < 3},
            {"year": year, "agent_id": 3, "insured_before": year == 2,
             "insured_after": year == 1, "group_certificate": year == 1},
        ]
    agents = make_agents(rows)
    bench = load_benchmarks()
    assert MEASURES["annual_lapse_voluntary"](agents, bench).value == pytest.approx(1 / 2)
    # all policies: 1 (y2, y3) and 2 (y2) renew, 2 (y3) and 3 (y2) lapse
    assert MEASURES["annual_lapse"](agents, bench).value == pytest.approx(2 / 5)


def test_the_event_study_curve_is_the_share_of_the_first_year_rise_left():
    from governed_broker.analysis.benchmarks import post_flood_excess

    # zone high, flood in year 1; voluntary policies in force: 2, 4, 3, 2, 2, 2 (years 1-6)
    in_force = {1: 2, 2: 4, 3: 3, 4: 2, 5: 2, 6: 2}
    rows = [{"year": y, "agent_id": i + 1, "insured_before": i < n, "flooded": y == 1}
            for y, n in in_force.items() for i in range(6)]
    agents = make_agents(rows)
    # rise in year 2: 4 / 2 - 1 = 1; left in year 3 (k = 2): 3 / 2 - 1 = 0.5; year 4: 0
    assert post_flood_excess(agents, 2).value == pytest.approx(0.5)
    assert post_flood_excess(agents, 3).value == pytest.approx(0.0)
    assert post_flood_excess(agents, 5).value == pytest.approx(0.0)
    # a second flood before year 1 + k censors the point
    again = make_agents([{**r, "flooded": r["year"] in (1, 3)} for r in rows])
    assert post_flood_excess(again, 2).value is None


def test_mg_gap_when_attribute_present():
    agents = _run()
    agents["marginalised"] = agents["agent_id"].isin([4, 5])
    v = fit_to_benchmarks(agents, load_benchmarks()).table.set_index("id")["value"]
    # NMG 1, 2, 3: adapted 1 (ins), 3 (elev) -> 2/3; MG 4, 5: 5 relocated -> 1/2
    assert v["B6"] == pytest.approx(2 / 3 - 1 / 2)


def test_invalid_benchmarks_file(tmp_path: Path):
    data = yaml.safe_load(Path(load_benchmarks.__globals__["DEFAULT_BENCHMARKS"]).read_text())
    data["targets"][0]["range"] = [0.6, 0.2]
    bad = tmp_path / "b.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(AnalysisInputError, match="low <= high"):
        load_benchmarks(bad)
    data["targets"][0]["range"] = [0.2, 0.6]
    data["targets"][0]["measure"] = "nonsense"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(AnalysisInputError, match="nonsense"):
        load_benchmarks(bad)


def test_replicates_summarised_with_intervals():
    from governed_broker.analysis.benchmarks import fit_replicates, mean_interval

    fit = fit_replicates([_run(), _run(), _run()], load_benchmarks())
    single = fit_to_benchmarks(_run(), load_benchmarks())
    assert fit.scores == pytest.approx([single.score] * 3)
    assert fit.score_mean == pytest.approx(single.score)
    assert fit.score_ci == pytest.approx((single.score, single.score))  # no spread
    row = fit.table.set_index("id").loc["B1"]
    assert row["n"] == 3 and row["mean"] == pytest.approx(1 / 3) and row["status"] == "in_range"
    assert fit.table.set_index("id").loc["B6", "status"] == "not_computable"
    mean, low, high = mean_interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and (low, high) == pytest.approx((2 - 2.4843, 2 + 2.4843), abs=1e-3)
    assert math.isnan(mean_interval([1.0])[1])


def test_paired_difference_is_the_mean_of_seed_by_seed_differences(fixtures_dir: Path):
    from governed_broker.analysis import load_run
    from governed_broker.analysis.benchmarks import mean_interval, paired_fit_difference

    seeds = (15, 17, 31)
    arms = {g: [load_run(fixtures_dir / "ablation" / g / f"seed_{s}").agents for s in seeds]
            for g in ("baseline", "no_elevation_subsidy")}
    diff = paired_fit_difference(arms["baseline"], arms["no_elevation_subsidy"]).set_index("id")
    bench = load_benchmarks()
    fits = {g: [fit_to_benchmarks(a, bench) for a in tables] for g, tables in arms.items()}
    by_seed = [a.score - b.score for a, b in zip(fits["baseline"],
                                                 fits["no_elevation_subsidy"], strict=True)]
    assert diff.loc["score", "pairs"] == 3
    assert diff.loc["score", "mean"] == pytest.approx(sum(by_seed) / 3)
    assert diff.loc["score", "ci_low"] == pytest.approx(mean_interval(by_seed)[1])
    assert diff.loc["score", "higher"] == sum(d > 0 for d in by_seed)
    b3 = [a.table.set_index("id").loc["B3", "value"] - b.table.set_index("id").loc["B3", "value"]
          for a, b in zip(fits["baseline"], fits["no_elevation_subsidy"], strict=True)]
    assert diff.loc["B3", "mean"] == pytest.approx(sum(b3) / 3)
    assert set(diff.index) == {"score"} | {t.id for t in bench.targets}
    with pytest.raises(AnalysisInputError, match="same seeds in both arms"):
        paired_fit_difference(arms["baseline"], arms["no_elevation_subsidy"][:2])


@pytest.mark.parametrize("text", ["password: hunter2-secret\n", "hunter2-secret line\n",
                                  "a: 1\na: hunter2-secret\n", "a: [hunter2-secret\n"])
def test_a_benchmarks_file_that_is_no_such_file_is_refused_without_quoting_it(
        tmp_path, text) -> None:
    path = tmp_path / "secret.txt"
    path.write_text(text)
    with pytest.raises(AnalysisInputError) as info:
        load_benchmarks(path)
    assert str(path) in str(info.value) and "hunter2" not in str(info.value)
