"""Hindcast measures on hand-made agent tables, with values computed by hand."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.hindcast import (
    HindcastTargets,
    half_life_after,
    half_life_censored_at,
    load_targets,
    run_measures,
    score_measures,
    spike_after,
    takeup_series,
    tenure_censored_at,
    tenure_median,
)

REPO = Path(__file__).resolve().parents[2]


def targets(**changes) -> HindcastTargets:
    data = {
        "version": "t", "name": "test", "start_year": 2000, "initial_year": 2000,
        "series": [
            {"id": "in_a", "name": "zone a", "zone": "a", "denominator": 10,
             "denominator_source": "s", "policies": {2000: 5, 2001: 6, 2002: 4}, "sd": 0.1,
             "sd_source": "s"},
            {"id": "all", "name": "all", "zone": None, "denominator": 10,
             "denominator_source": "s", "policies": {2000: 5, 2001: 6, 2002: 4}, "sd": 0.1,
             "sd_source": "s"},
        ],
        "series_source": "s", "floods": [2000],
        "spike": {"range": [0.0, 0.6], "source": "s"},
        "tenure": {"range": [1.0, 4.0], "source": "s"},
    }
    data.update(changes)
    return HindcastTargets.model_validate(data)


def agents(insured: dict[int, list[bool]], zones: list[str]) -> pd.DataFrame:
    """Rows for households 1..n over the years of ``insured``.

    Year -> flags per household; None drops the household's row: it has relocated.
    """
    rows = []
    for year, flags in insured.items():
        for i, flag in enumerate(flags):
            if flag is not None:
                rows.append({"year": year, "agent_id": i + 1, "flood_zone": zones[i],
                             "insured_before": flag})
    return pd.DataFrame(rows)


def test_takeup_counts_policies_in_force_over_the_zones_initial_households() -> None:
    table = agents({1: [True, False, True, False], 2: [True, True, None, False],
                    3: [False, True, None, True]}, ["a", "a", "a", "b"])
    series = takeup_series(table, targets()).set_index(["series", "calendar_year"])["takeup"]
    assert series[("in_a", 2000)] == pytest.approx(2 / 3)
    assert series[("in_a", 2001)] == pytest.approx(2 / 3)   # the relocated one counts as not
    assert series[("all", 2002)] == pytest.approx(2 / 4)


def test_spike_and_half_life_by_hand() -> None:
    takeup = pd.Series({2000: 0.10, 2001: 0.14, 2002: 0.13, 2003: 0.11, 2004: 0.10})
    assert spike_after(takeup, 2000) == pytest.approx(0.4)
    # excess 0.04 at its 2001 peak; 0.03 in 2002, 0.01 in 2003: halves (0.02) at 2002.5
    assert half_life_after(takeup, 2000, None) == pytest.approx(1.5)
    assert math.isnan(half_life_after(takeup, 2000, 2003))  # not halved before the next flood
    # ... so at least the year from the 2001 peak to 2002, the last year before that flood
    assert half_life_censored_at(takeup, 2000, 2003) == pytest.approx(1.0)
    assert math.isnan(half_life_censored_at(takeup, 2000, None))  # measured: no bound
    assert math.isnan(half_life_after(pd.Series({2000: 0.1, 2001: 0.09}), 2000, None))
    assert math.isnan(spike_after(takeup, 2004))


def test_tenure_is_the_kaplan_meier_median_of_new_policies() -> None:
    # h1 insured years 2-3 (lapses in 4: 2 years), h2 years 2-5 (censored at the end, 4),
    # h3 years 3 (lapses in 4: 1 year), h4 insured from the start (not a new policy)
    table = agents({1: [False, False, False, True], 2: [True, True, False, True],
                    3: [True, True, True, True], 4: [False, True, False, False],
                    5: [False, True, False, False]}, ["a"] * 4)
    # event times 1 (1 of 3 at risk: S = 2/3) and 2 (1 of 2 at risk: S = 1/3)
    assert tenure_median(table) == 2.0
    never = agents({1: [False], 2: [True], 3: [True]}, ["a"])
    assert math.isnan(tenure_median(never))
    assert tenure_censored_at(never) == 2.0  # the one policy ran 2 years to the end
    assert math.isnan(tenure_censored_at(table))


def test_implausibility_combines_the_sd_and_the_spread_of_the_runs() -> None:
    t = targets(spike=None, tenure=None, floods=[])
    run_a = agents({1: [True] * 5 + [False] * 5, 2: [True] * 7 + [False] * 3,
                    3: [True] * 4 + [False] * 6}, ["a"] * 10)
    run_b = agents({1: [True] * 5 + [False] * 5, 2: [True] * 5 + [False] * 5,
                    3: [True] * 4 + [False] * 6}, ["a"] * 10)
    score = score_measures([run_measures(run_a, t), run_measures(run_b, t)], t)
    row = score.table.set_index(["target", "calendar_year"]).loc[("in_a", 2001)]
    # simulated mean 0.6, observed 0.6: I = 0; 2002: mean 0.4 = observed
    assert row["simulated"] == pytest.approx(0.6) and row["implausibility"] == pytest.approx(0)
    single = score_measures([run_measures(run_b, t)], t)
    row = single.table.set_index(["target", "calendar_year"]).loc[("in_a", 2001)]
    assert row["implausibility"] == pytest.approx(abs(0.5 - 0.6) / 0.1)
    assert single.rmse["in_a"] == pytest.approx(math.sqrt((0.1**2 + 0**2) / 2))
    assert single.max_implausibility == pytest.approx(1.0) and single.plausible
    initial = single.table.set_index(["target", "calendar_year"]).loc[("in_a", 2000)]
    assert np.isnan(initial["implausibility"])  # the initial condition is not scored


def test_the_passaic_targets_load_and_a_bad_file_is_named(tmp_path) -> None:
    passaic = load_targets(REPO / "configs" / "hindcast" / "passaic.yaml")
    assert [s.id for s in passaic.series] == ["takeup_sfha", "takeup_non_sfha", "takeup_all"]
    assert passaic.series[2].takeup()[2011] == pytest.approx(8263 / 49494)
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: x\nname: y\nstart_year: 2011\nseries: []\nseries_source: s\n")
    with pytest.raises(AnalysisInputError, match="bad.yaml"):
        load_targets(bad)


def test_a_window_keeps_its_years_and_measures_a_training_run_only_to_its_end() -> None:
    t = targets(half_life={"range": [1.0, 3.0], "source": "s"})
    train, test = t.within(2000, 2001), t.within(2002, 2002)
    assert train.series[0].policies == {2000: 5, 2001: 6} and train.floods == [2000]
    assert train.last_year == 2001 and train.tenure is not None and train.half_life is not None
    assert test.series[0].policies == {2002: 4} and test.floods == []
    assert test.tenure is None and test.half_life is None and test.last_year is None
    # a run insured 4/10 in 2000, 6/10 in 2001, 10/10 in 2002: the training fit never sees 2002
    run = agents({1: [True] * 4 + [False] * 6, 2: [True] * 6 + [False] * 4,
                  3: [True] * 10}, ["a"] * 10)
    measured = run_measures(run, train)
    assert measured.takeup["calendar_year"].max() == 2001
    assert measured.spikes[2000] == pytest.approx(0.5)
    assert score_measures([run_measures(run, test)], test).table.set_index(
        "target").loc["in_a", "simulated"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no observed year to score"):
        t.within(2003, 2005)


def test_a_duration_not_reached_counts_at_its_bound_not_as_missing() -> None:
    t = targets(spike=None, tenure=None, half_life={"range": [1.0, 3.0], "source": "s"})
    base = run_measures(agents({2000: [True], 2001: [True]}, ["a"]), t)

    def half_life_row(*runs):
        measures = [replace(base, half_life=h, half_life_at_least=b) for h, b in runs]
        score = score_measures(measures, t)
        return score, score.table.set_index("target").loc["half_life"]

    # never halved within 4 and 5 years: the mean is at least 4.5 against 2 +- 1/3
    score, row = half_life_row((math.nan, 4.0), (math.nan, 5.0))
    assert row["implausibility"] == pytest.approx(2.5 / math.sqrt((1 / 3) ** 2 + 0.5 / 2))
    assert not row["met"] and "2 of 2 runs censored" in row["note"]
    assert "lower bound" in row["note"] and not score.plausible
    # one measured (3 years), one censored at 5
    _, row = half_life_row((3.0, math.nan), (math.nan, 5.0))
    assert row["simulated"] == pytest.approx(4.0) and "1 of 2 runs censored" in row["note"]
    # censored below the observed 2 years: it could lie on either side, so not scored
    _, row = half_life_row((math.nan, 1.0), (math.nan, 1.5))
    assert math.isnan(row["implausibility"]) and row["met"] is None
    assert "not scored" in row["note"]
