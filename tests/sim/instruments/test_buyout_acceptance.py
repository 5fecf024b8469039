"""The buyout arm of experiments/policy_buyout.yaml against New Jersey's Blue Acres.

A small default world with the rule-based baseline households, one deep flood in the year the
programme opens, offers open for the arm's three years. Acceptance (owners who accepted /
owners offered) is a check of the decision makers, never a setting of the programme: Blue Acres
had 46 % of its offers accepted by January 2014, 62 % by May 2014 and 75 % by January 2016
(the sources named in the arm's ``buyout.source``: published_findings nj_blueacres_2014_01,
_2014_05, _2016_01).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from governed_broker.config import load_experiment
from governed_broker.runner import run_experiment

REPO = Path(__file__).resolve().parents[3]
#: Accepted / offered, Blue Acres 1-3 years after its first offers (see the module docstring).
BLUE_ACRES_ACCEPTANCE = (0.46, 0.75)
FLOOD_YEAR = 11  # the arm's from_year: the programme opens with the flood


@pytest.fixture(scope="module")
def buyout_run(tmp_path_factory) -> pd.DataFrame:
    """Agents' table of the buyout arm at 600 households, a 2 m flood in zone high in year 11.

    Without the arm's annual budget (illustrative, not sourced), so that every substantially
    damaged owner is offered and acceptance is measured on enough offers.
    """
    experiment = REPO / "experiments" / "policy_buyout.yaml"
    overrides = ["population.size=600", "years=14", "seed=5", "memory.engine=none",
                 "outputs.plots=false", "hazard.mode=fixed",
                 f"hazard.events=[{{year: {FLOOD_YEAR}, depth_m: {{high: 2.0}}}}]"]
    arm = load_experiment(experiment, overrides).sweep.cases["buyout"]["policy_change"]
    arm["settings"]["buyout"]["annual_budget_usd"] = None
    config = load_experiment(experiment, [*overrides, f"policy_change={json.dumps(arm)}"])
    out = run_experiment(config, tmp_path_factory.mktemp("buyout") / "run",
                         progress=False).out_dir
    return pd.read_csv(out / "agents_yearly.csv")


def _offered_and_accepted(agents: pd.DataFrame) -> tuple[pd.DataFrame, set]:
    offers = agents[agents["buyout_offered"].astype(bool)]
    accepted = set(offers.loc[offers["buyout_usd"] > 0, "agent_id"])
    return offers, accepted


def test_offers_follow_the_substantial_damage_and_stay_open(buyout_run) -> None:
    offers, _ = _offered_and_accepted(buyout_run)
    first = offers.groupby("agent_id")["year"].min()
    assert len(first) >= 10  # the flood leaves many substantially damaged owners
    assert (first == FLOOD_YEAR).all()  # offered in the flood's year, no later
    # an offer not taken stays open for the term's three years (or until the owner accepts)
    years_open = offers.groupby("agent_id")["year"].nunique()
    assert years_open.max() == 3


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=(
    "Measured: 7 of the 38 owners offered accept within the three years (0.18): the "
    "baseline's threat is below its relocation gate (0.8) for 19 of them in the flood's year "
    "and for most of the rest the year after, and its implementation delay holds some. A "
    "check of the decision makers, not tuned: the day it passes, this mark must go"))
def test_acceptance_is_within_blue_acres_range(buyout_run) -> None:
    offers, accepted = _offered_and_accepted(buyout_run)
    acceptance = len(accepted) / offers["agent_id"].nunique()
    low, high = BLUE_ACRES_ACCEPTANCE
    assert low <= acceptance <= high, f"acceptance {acceptance:.2f}"
