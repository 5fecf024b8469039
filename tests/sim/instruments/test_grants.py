"""The elevation grant programme.

Every household that may elevate is told the grant; those that choose to elevate apply, and a
budget funds the applications in the declared order (first come or by need), up to what it
funds and never more; an unfunded application goes ahead without the elevation.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governed_broker.config.world import ElevationConfig
from governed_broker.sim import FloodModel
from governed_broker.sim.instruments.grants import (
    funded_applications,
    grants_funded,
    without_elevation,
)
from tests.sim.instruments.small_world import scripted, small_world
from tests.sim.test_model import run

#: Five owners who may elevate (incomes 90k, 30k, 60k, 20k, 45k) and a renter.
POP_ROWS = [
    "owner,high,90000,100000,200000,100000,False,False,0.3,0.5",   # 1
    "owner,high,30000,100000,200000,100000,False,False,0.3,0.5",   # 2
    "owner,low,60000,100000,200000,100000,False,False,0.3,0.5",    # 3
    "owner,high,20000,100000,200000,100000,False,False,0.3,0.5",   # 4
    "owner,high,45000,100000,200000,100000,True,False,0.3,0.5",    # 5: already elevated
    "renter,high,15000,20000,0,50000,False,False,0.3,0.5",         # 6: renter
]
GRANT_USD = 40_000.0  # 50 % of $80,000


def _elevation(**kw) -> ElevationConfig:
    return ElevationConfig(**{"source": "t", "height_m": 1.5, "cost_usd": 80_000,
                              "subsidy_share": 0.5, **kw})


@pytest.fixture
def world(experiments):
    def make(script: dict[tuple[int, int], str], years: int = 2, **elevation):
        data = small_world(experiments, POP_ROWS, years)
        data["elevation"].update(elevation)
        return scripted(experiments, data, script)

    return make


ALL_ELEVATE = {(1, a): "elevate_house" for a in (1, 2, 3, 4)}


def test_everyone_who_may_elevate_is_told_the_grant(world) -> None:
    model, maker = world({}, years=1, subsidy_budget_usd=2.5 * GRANT_USD)
    rows = run(model, 1)[0]
    # the elevated owner and the renter cannot elevate
    assert [a for a in rows if rows[a]["subsidy_offered"]] == [1, 2, 3, 4]
    seen = {s.agent_id: s.action_costs_usd["elevate_house"] for s in maker.seen[0]
            if "elevate_house" in s.allowed_actions}
    assert seen == {a: GRANT_USD for a in (1, 2, 3, 4)}
    assert not any(r["subsidy_applied"] for r in rows.values())
    assert model.last_model_row["total_subsidy_usd"] == 0  # nobody applied


def test_by_need_funds_the_lowest_incomes_among_the_applicants(world) -> None:
    model, _ = world(ALL_ELEVATE, years=1, subsidy_budget_usd=2.5 * GRANT_USD,
                     subsidy_allocation="by_need")
    rows = run(model, 1)[0]
    assert [a for a in rows if rows[a]["subsidy_applied"]] == [1, 2, 3, 4]
    funded = [a for a in rows if rows[a]["subsidy_usd"] > 0]
    assert funded == [2, 4]  # incomes 30k and 20k
    for a in funded:
        assert rows[a]["elevated_after"] and rows[a]["action_cost_usd"] == GRANT_USD
    for a in (1, 3):  # unfunded: the application does not go ahead this year
        assert rows[a]["executed_action"] == "do_nothing" and not rows[a]["elevated_after"]
        assert rows[a]["action_cost_usd"] == 0
    # the budget is spent as far as it funds whole grants, never beyond
    assert model.last_model_row["total_subsidy_usd"] == 2 * GRANT_USD


def test_the_budget_goes_to_the_households_that_apply(world) -> None:
    model, _ = world({(1, 3): "elevate_house"}, years=1, subsidy_budget_usd=2 * GRANT_USD,
                     subsidy_allocation="by_need")
    rows = run(model, 1)[0]
    # not among the two lowest incomes, but the only applicant
    assert rows[3]["subsidy_usd"] == GRANT_USD and rows[3]["elevated_after"]
    assert model.last_model_row["total_subsidy_usd"] == GRANT_USD


def test_an_unfunded_application_keeps_the_rest_of_the_choice(world) -> None:
    script = {(1, 1): "elevate_and_insure", (1, 4): "elevate_house"}
    model, _ = world(script, years=1, subsidy_budget_usd=GRANT_USD,
                     subsidy_allocation="by_need")
    rows = run(model, 1)[0]
    assert rows[4]["subsidy_usd"] == GRANT_USD  # the lower income is funded
    assert rows[1]["executed_action"] == "buy_insurance" and rows[1]["insured_after"]
    assert not rows[1]["elevated_after"] and rows[1]["subsidy_applied"]
    assert without_elevation("elevate+insure") == "insure"
    assert without_elevation("elevate") == "none"


def test_without_a_budget_every_application_is_funded(world) -> None:
    model, _ = world({**ALL_ELEVATE, (2, 5): "do_nothing"}, years=2)
    first, second = run(model, 2)
    assert [a for a in first if first[a]["subsidy_usd"] == GRANT_USD] == [1, 2, 3, 4]
    assert not second[3]["subsidy_offered"]  # elevated now


def test_first_come_order_is_seeded(world) -> None:
    def funded(seed_model: FloodModel) -> list[int]:
        rows = run(seed_model, 1)[0]
        return [a for a in rows if rows[a]["subsidy_usd"] > 0]

    a = funded(world(ALL_ELEVATE, years=1, subsidy_budget_usd=GRANT_USD)[0])
    assert a == funded(world(ALL_ELEVATE, years=1, subsidy_budget_usd=GRANT_USD)[0])
    assert len(a) == 1 and a[0] in (1, 2, 3, 4)


def test_a_zero_share_offers_nothing(world) -> None:
    model, maker = world({(1, 1): "elevate_house"}, years=1, subsidy_share=0.0)
    rows = run(model, 1)[0]
    assert not any(r["subsidy_offered"] or r["subsidy_applied"] for r in rows.values())
    assert rows[1]["subsidy_usd"] == 0 and rows[1]["action_cost_usd"] == 80_000.0


@settings(max_examples=200, deadline=None)
@given(budget=st.floats(0, 1e6), share=st.floats(0.01, 1), incomes=st.lists(
    st.floats(0, 5e5), min_size=1, max_size=60), applied_bits=st.integers(0, 2**60),
    by_need=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_the_funded_grants_never_exceed_the_budget(budget, share, incomes, applied_bits,
                                                   by_need, seed) -> None:
    elev = _elevation(subsidy_share=share, subsidy_budget_usd=budget,
                      subsidy_allocation="by_need" if by_need else "first_come")
    n = len(incomes)
    applied = np.array([(applied_bits >> i) & 1 == 1 for i in range(n)])
    funded = funded_applications(elev, applied, np.array(incomes), np.random.default_rng(seed))
    assert not funded[~applied].any()
    assert funded.sum() * elev.cost_usd * share <= budget + 1e-6
    # the budget funds applications while there are any and it can pay a whole grant
    assert funded.sum() == min(grants_funded(elev), int(applied.sum()))
    if by_need and funded.any() and (applied & ~funded).any():
        assert np.array(incomes)[funded].max() <= np.array(incomes)[applied & ~funded].min()
