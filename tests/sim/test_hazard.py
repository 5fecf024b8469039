"""Hazard sampling: fixed schedules, stochastic frequencies, partial floods.

And what households are told (the declared map, never the schedule).
"""

from __future__ import annotations

import numpy as np
import pytest

from governed_broker.config.world import FixedEvent, HazardConfig
from governed_broker.sim.hazard import make_hazard

MAP = {"high": {"annual_probability": 0.02, "median_depth_m": 0.3},
       "low": {"annual_probability": 0.002, "median_depth_m": 0.2}}


def stochastic(p_high=0.2, p_low=0.01, household_sigma=0.0, share=1.0) -> HazardConfig:
    return HazardConfig(
        source="t", mode="stochastic", household_sigma=household_sigma,
        zones={"high": {"annual_probability": p_high, "median_depth_m": 0.8, "event_sigma": 0.5,
                        "flooded_share": share},
               "low": {"annual_probability": p_low, "median_depth_m": 0.3,
                       "flooded_share": share}},
    )


def fixed(events, zones=None) -> HazardConfig:
    return HazardConfig(source="t", mode="fixed", events=events, zones=zones or MAP)


def test_fixed_schedule() -> None:
    events = [FixedEvent(year=3, depth_m={"high": 0.8, "low": 0.3}),
              FixedEvent(year=9, depth_m={"high": 1.2})]
    hz = make_hazard(fixed(events), ["high", "low"], 1, 10)
    np.testing.assert_allclose(hz.zone_depths(3), [0.8, 0.3])
    np.testing.assert_allclose(hz.zone_depths(9), [1.2, 0.0])
    assert not hz.zone_depths(4).any()
    np.testing.assert_allclose(hz.household_depths(3, np.array([0, 1, 1])), [0.8, 0.3, 0.3])


@pytest.mark.parametrize("years", [2, 4, 10, 100])
def test_a_fixed_schedule_never_changes_the_stated_chance(years) -> None:
    # floods in years 1 and 2 of a 2-year run once told households "1 in 1"; the chance and
    # depth they are told are the declared map's, whatever the schedule and the run length
    many = [FixedEvent(year=y, depth_m={"high": 2.0, "low": 1.0}) for y in range(1, 100)]
    for events in ([], [FixedEvent(year=1, depth_m={"high": 0.5})], many):
        hz = make_hazard(fixed(events), ["high", "low"], 1, years)
        np.testing.assert_allclose(hz.probability, [0.02, 0.002])
        np.testing.assert_allclose(hz.typical_depth_m, [0.3, 0.2])


def test_fixed_and_stochastic_modes_need_the_map() -> None:
    with pytest.raises(ValueError, match="needs 'zones', the hazard map"):
        HazardConfig(source="t", mode="fixed", events=[{"year": 1, "depth_m": {"high": 1}}])


def test_an_event_reaches_its_share_of_homes_and_each_home_keeps_the_map_chance() -> None:
    hz = make_hazard(stochastic(p_high=0.06, p_low=0.0, share=0.3), ["high", "low"], 5, 3000)
    zones = np.zeros(400, dtype=int)
    reached = np.array([hz.household_depths(y, zones) > 0 for y in range(1, 3001)])
    events = reached.any(axis=1)
    assert events.mean() == pytest.approx(0.06 / 0.3, abs=0.02)  # the zone's event chance
    assert reached[events].mean() == pytest.approx(0.3, abs=0.01)  # partial floods
    assert reached.mean() == pytest.approx(0.06, abs=0.005)  # each home: the map's chance
    assert 0 < reached[events].mean(axis=1).min() and reached[events].mean(axis=1).max() < 1
    with pytest.raises(ValueError, match="exceeds flooded_share"):
        stochastic(p_high=0.5, share=0.3)


def test_stochastic_frequencies_match_probabilities() -> None:
    hz = make_hazard(stochastic(), ["high", "low"], seed=5, years=4000)
    floods = np.array([hz.zone_depths(y) > 0 for y in range(1, 4001)])
    assert floods[:, 0].mean() == pytest.approx(0.2, abs=0.02)
    assert floods[:, 1].mean() == pytest.approx(0.01, abs=0.006)
    assert np.all(floods[:, 0] | ~floods[:, 1])  # one event: a low-zone flood floods high too


def test_stochastic_is_seeded_and_year_local() -> None:
    a = make_hazard(stochastic(household_sigma=0.3), ["high", "low"], seed=5, years=30)
    b = make_hazard(stochastic(household_sigma=0.3), ["high", "low"], seed=5, years=30)
    c = make_hazard(stochastic(household_sigma=0.3), ["high", "low"], seed=6, years=30)
    zones = np.array([0, 0, 1, 0])
    seq_a = [a.household_depths(y, zones) for y in range(1, 31)]
    assert all(np.array_equal(x, b.household_depths(y, zones)) for y, x in enumerate(seq_a, 1))
    assert not all(np.array_equal(x, c.household_depths(y, zones))
                   for y, x in enumerate(seq_a, 1))
    # asking for a year twice gives the same answer (resumable)
    assert np.array_equal(a.household_depths(7, zones), a.household_depths(7, zones))


def test_household_variation_only_where_flooded() -> None:
    hz = make_hazard(stochastic(p_high=1.0, p_low=0.0, household_sigma=0.3), ["high", "low"], 1, 5)
    d = hz.household_depths(1, np.array([0] * 200 + [1] * 5))
    assert np.all(d[:200] > 0) and np.all(d[200:] == 0) and d[:200].std() > 0


def test_fixed_schedule_from_file_drives_the_world(experiments, repo_root) -> None:
    from governed_broker.config.loader import fixed_events
    from governed_broker.config.resolved import resolve_experiment
    from governed_broker.runner import build_decision_maker
    from governed_broker.sim import FloodModel

    data = experiments.data()
    data["hazard"] = {"source": "t", "mode": "fixed", "zones": MAP,
                      "file": str(repo_root / "configs/hazards/benchmark_years_3_4_9.yaml")}
    config = experiments.config(["years=4"], data=data)
    assert [e.year for e in fixed_events(config)] == [3, 4, 9]
    maker = build_decision_maker(resolve_experiment(config), experiments.tmp_path)
    model = FloodModel(config, maker)
    flooded = []
    for _ in range(4):
        model.step()
        flooded.append(model.last_model_row["flood_occurred"])
    assert flooded == [False, False, True, True]
