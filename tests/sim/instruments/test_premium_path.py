"""The premium path (``insurance.premium_path``): the legacy index and the renewal's cap.

And the risk-based arm of experiments/risk_rating.yaml (Risk Rating 2.0): it raises the mean
premium per policy, each renewal within the cap.
"""

from __future__ import annotations

import numpy as np
import pytest

from governed_broker.config import ConfigError, load_experiment
from governed_broker.config.world import PremiumPathConfig
from governed_broker.sim import FloodModel
from tests.sim.test_model import Scripted, run

REPO = __import__("pathlib").Path(__file__).resolve().parents[3]


def test_the_legacy_index_steps_from_the_years_it_names() -> None:
    path = PremiumPathConfig(source="t", legacy_index={3: 1.2, 5: 0.9})
    assert [path.legacy_factor(y) for y in range(1, 7)] == [1.0, 1.0, 1.2, 1.2, 0.9, 0.9]


def test_a_bad_index_is_a_configuration_error(experiments) -> None:
    with pytest.raises(ConfigError, match="legacy_index"):
        experiments.config(['insurance.premium_path={source: t, legacy_index: {2: -1}}'])


def _dry_world(experiments, path: dict, years: int = 4):
    data = experiments.data()
    data["years"] = years
    data["memory"]["engine"] = "none"
    data["hazard"]["mode"] = "fixed"
    data["hazard"]["events"] = []  # no flood: every home keeps its value and rated premium
    for zone in data["hazard"]["zones"].values():
        zone.pop("event_sigma"), zone.pop("flooded_share")
    data["hazard"]["household_sigma"] = 0.0
    del data["insurance"]["mandatory_purchase"]
    data["insurance"]["premium_path"] = {"source": "t", **path}
    return data


def test_a_renewal_rises_at_most_the_cap_and_a_new_policy_pays_in_full(experiments) -> None:
    data = _dry_world(experiments, {"legacy_index": {2: 1.5}, "max_increase_share": 0.18})
    script = {(y, a): "buy_insurance" for y in range(1, 5) for a in range(1, 21)}
    script[(2, 1)] = "do_nothing"  # agent 1 lapses in year 2 and buys again in year 3
    rows = run(FloodModel(experiments.config(data=data), Scripted(script)), 4)
    for agent in range(2, 21):
        first = rows[0][agent]["premium_usd"]
        assert [rows[y][agent]["premium_usd"] / first for y in range(4)] == pytest.approx(
            [1.0, 1.18, 1.18**2, 1.5])
    first = rows[0][1]["premium_usd"]
    assert rows[1][1]["premium_usd"] == 0 and rows[2][1]["premium_usd"] == pytest.approx(
        1.5 * first)


def test_a_decrease_applies_at_once(experiments) -> None:
    data = _dry_world(experiments, {"legacy_index": {2: 0.5}, "max_increase_share": 0.18})
    script = {(y, a): "buy_insurance" for y in range(1, 3) for a in range(1, 21)}
    rows = run(FloodModel(experiments.config(data=data), Scripted(script)), 2)
    for agent in range(1, 21):
        assert rows[1][agent]["premium_usd"] == pytest.approx(0.5 * rows[0][agent]["premium_usd"])


def test_without_a_path_premiums_are_as_rated(experiments) -> None:
    data = _dry_world(experiments, {})  # a path that neither indexes nor caps
    script = {(y, a): "buy_insurance" for y in range(1, 3) for a in range(1, 21)}
    with_path = run(FloodModel(experiments.config(data=data), Scripted(script)), 2)
    del data["insurance"]["premium_path"]
    without = run(FloodModel(experiments.config(data=data), Scripted(script)), 2)
    assert repr(with_path) == repr(without)  # NaN-aware: the same numbers, printed


def _risk_rating_arm(overrides: list[str]):
    """experiments/risk_rating.yaml with its risk_based arm's policy change."""
    config = load_experiment(REPO / "experiments" / "risk_rating.yaml", overrides)
    arm = config.sweep.cases["risk_based"]["policy_change"]
    return load_experiment(REPO / "experiments" / "risk_rating.yaml", [
        *overrides, f"policy_change={arm}".replace("'", '"')])


def test_the_risk_based_arm_raises_the_mean_premium_per_policy_within_the_cap() -> None:
    # no flood: every home keeps its value, and its policy's premium moves with the pricing only
    config = _risk_rating_arm(["population.size=400", "years=14", "memory.engine=none",
                               "hazard.mode=fixed", "hazard.events=[]"])
    maker = Scripted({})
    model = FloodModel(config, maker)
    holders = np.flatnonzero(model.hh.insured) + 1  # the policies in force at the start renew
    maker.script = {(y, int(a)): "buy_insurance" for y in range(1, 15) for a in holders}
    rows = run(model, 14)
    premium = np.array([[rows[y][a]["premium_usd"] for a in holders] for y in range(14)])
    kept = (premium > 0).all(axis=0)  # a household that could not pay a year drops out
    assert kept.mean() > 0.8
    premium = premium[:, kept]
    mean = premium.mean(axis=1)
    assert mean[9] == pytest.approx(mean[0])  # legacy premiums stay put
    assert mean[10] > mean[9] and mean[11] > mean[10] and mean[12] > mean[11]  # phased in
    assert mean[12] > 1.25 * mean[9]
    rise = premium[1:] / premium[:-1]
    assert rise.max() <= 1.18 + 1e-9  # no renewal rises more than the cap
    assert (rise[9] < 1).any()  # year 11: some homes' full-risk premium is below the legacy one
