"""The buyout arm of experiments/policy_buyout.yaml against New Jersey's Blue Acres.

Small default worlds with the rule-based baseline households, one deep flood in the year the
programme opens: the eligible owners apply in the flood's year, the programme makes its offers
to the applicants a year later (the arm's ``offer_delay_years``), each open for the arm's three
years. Acceptance (owners who accepted / owners offered, all applicants) is a check of the
decision makers, never a setting of the programme: Blue Acres had 46 % of its offers accepted by
January 2014, 62 % by May 2014 and 75 % by January 2016 (the sources named in the arm's
``buyout.source``: published_findings nj_blueacres_2014_01, _2014_05, _2016_01).

Measured 2026-11-28, 4,000 households, seeds 5-9 pooled: 50 of 108 offers accepted within their
three years (0.463, Wilson 95 % interval 0.37-0.56), at the low end of that range; Blue Acres'
0.75 came about two and a half years after its first offers, so at a matched horizon the
baseline's owners still accept less (their threat falls below the relocation gate as the flood
recedes). Before owners applied (an offer to every eligible owner in the flood's year) the same
worlds accepted 190 of 1,092 (0.174): Blue Acres' rates are of offers to applicants.
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
SEEDS = (5, 6, 7, 8, 9)


@pytest.fixture(scope="module")
def buyout_runs(tmp_path_factory) -> list[pd.DataFrame]:
    """Agents' tables of the buyout arm at 4,000 households, a 2 m flood in zone high in year 11.

    Without the arm's annual budget (illustrative, not sourced), so that every applicant is
    offered and acceptance is measured on enough offers; one table per seed of ``SEEDS``.
    """
    experiment = REPO / "experiments" / "policy_buyout.yaml"
    tables = []
    for seed in SEEDS:
        overrides = ["population.size=4000", "years=14", f"seed={seed}", "memory.engine=none",
                     "outputs.plots=false", "hazard.mode=fixed",
                     f"hazard.events=[{{year: {FLOOD_YEAR}, depth_m: {{high: 2.0}}}}]"]
        arm = load_experiment(experiment, overrides).sweep.cases["buyout"]["policy_change"]
        arm["settings"]["buyout"]["annual_budget_usd"] = None
        config = load_experiment(experiment, [*overrides, f"policy_change={json.dumps(arm)}"])
        out = run_experiment(config, tmp_path_factory.mktemp(f"buyout{seed}") / "run",
                             progress=False).out_dir
        tables.append(pd.read_csv(out / "agents_yearly.csv"))
    return tables


def _offered_and_accepted(agents: pd.DataFrame) -> tuple[pd.DataFrame, set]:
    offers = agents[agents["buyout_offered"].astype(bool)]
    accepted = set(offers.loc[offers["buyout_usd"] > 0, "agent_id"])
    return offers, accepted


def test_applicants_are_offered_the_year_after_and_offers_stay_open(buyout_runs) -> None:
    for agents in buyout_runs:
        offers, _ = _offered_and_accepted(agents)
        first = offers.groupby("agent_id")["year"].min()
        assert len(first) >= 10  # the flood leaves many substantially damaged owners
        assert (first == FLOOD_YEAR + 1).all()  # offered after the appraisal year, no later
        flood_year = agents[agents["year"] == FLOOD_YEAR].set_index("agent_id")
        # only applicants: owners who chose the buyout in the flood's year and stayed
        assert (flood_year.loc[first.index, "proposed_action"] == "accept_buyout").all()
        assert (flood_year.loc[first.index, "executed_action"] == "do_nothing").all()
        # an offer not taken stays open for the term's three years (or until accepted)
        years_open = offers.groupby("agent_id")["year"].nunique()
        assert years_open.max() == 3


def test_acceptance_is_within_blue_acres_range(buyout_runs) -> None:
    offered = accepted = 0
    for agents in buyout_runs:
        offers, took = _offered_and_accepted(agents)
        offered += offers["agent_id"].nunique()
        accepted += len(took)
    low, high = BLUE_ACRES_ACCEPTANCE
    assert low <= accepted / offered <= high, f"acceptance {accepted} / {offered}"
