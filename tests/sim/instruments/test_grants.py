"""The elevation subsidy programme.

A budget funds a fixed number of grants a year, offered before households decide (first come or by
need), priced into what each household is told, and never exceeded whatever the households choose.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governed_broker.config.world import ElevationConfig
from governed_broker.sim import FloodModel
from governed_broker.sim.instruments.grants import grants_funded, subsidy_offers
from tests.sim.test_model import POP_HEADER, Scripted, run

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
    (experiments.tmp_path / "pop.csv").write_text(
        "# synthetic test population\n" + POP_HEADER + "\n" + "\n".join(POP_ROWS) + "\n")

    def make(script: dict[tuple[int, int], str], years: int = 2, **elevation):
        data = experiments.data()
        data["years"] = years
        data["memory"]["engine"] = "none"
        data["population"] = {"source": "test", "file": "pop.csv"}
        data["network"] = {"kind": "ring", "k": 2}
        data["insurance"].pop("mandatory_purchase", None)
        data["elevation"].update(elevation)
        maker = Scripted(script)
        return FloodModel(experiments.config(data=data), maker), maker

    return make


def test_by_need_offers_the_funded_grants_to_the_lowest_incomes(world) -> None:
    model, maker = world({}, years=1, subsidy_budget_usd=2.5 * GRANT_USD,
                         subsidy_allocation="by_need")
    rows = run(model, 1)[0]
    # two grants funded; the elevated owner and the renter cannot elevate
    assert [a for a in rows if rows[a]["subsidy_offered"]] == [2, 4]
    seen = {s.agent_id: s.action_costs_usd["elevate_house"] for s in maker.seen[0]
            if "elevate_house" in s.allowed_actions}
    assert seen == {1: 80_000.0, 2: 40_000.0, 3: 80_000.0, 4: 40_000.0}


def test_grants_are_paid_only_to_offered_households_that_elevate(world) -> None:
    script = {(1, 1): "elevate_house", (1, 4): "elevate_house", (1, 2): "do_nothing"}
    model, _ = world(script, years=1, subsidy_budget_usd=2 * GRANT_USD,
                     subsidy_allocation="by_need")
    rows = run(model, 1)[0]
    assert rows[4]["subsidy_usd"] == GRANT_USD and rows[4]["action_cost_usd"] == GRANT_USD
    assert rows[1]["subsidy_usd"] == 0 and rows[1]["action_cost_usd"] == 80_000.0
    assert rows[1]["elevated_after"] and rows[4]["elevated_after"]
    assert model.last_model_row["total_subsidy_usd"] == GRANT_USD  # 2's grant lapses


def test_without_a_budget_everyone_who_may_elevate_is_offered(world) -> None:
    model, _ = world({(1, 3): "elevate_house"}, years=2)
    first, second = run(model, 2)
    assert [a for a in first if first[a]["subsidy_offered"]] == [1, 2, 3, 4]
    assert first[3]["subsidy_usd"] == GRANT_USD and first[3]["action_cost_usd"] == GRANT_USD
    assert not second[3]["subsidy_offered"]  # elevated now


def test_first_come_order_is_seeded_and_varies_by_year(world) -> None:
    def offered(seed_model: FloodModel) -> list[list[int]]:
        years = run(seed_model, 2)
        return [[a for a in y if y[a]["subsidy_offered"]] for y in years]

    a = offered(world({}, subsidy_budget_usd=GRANT_USD)[0])
    assert a == offered(world({}, subsidy_budget_usd=GRANT_USD)[0])
    assert all(len(year) == 1 and year[0] in (1, 2, 3, 4) for year in a)


def test_a_zero_share_offers_nothing(world) -> None:
    model, maker = world({(1, 1): "elevate_house"}, years=1, subsidy_share=0.0)
    rows = run(model, 1)[0]
    assert not any(r["subsidy_offered"] for r in rows.values())
    assert rows[1]["subsidy_usd"] == 0 and rows[1]["action_cost_usd"] == 80_000.0


@settings(max_examples=200, deadline=None)
@given(budget=st.floats(0, 1e6), share=st.floats(0, 1), incomes=st.lists(
    st.floats(0, 5e5), min_size=1, max_size=60), eligible_bits=st.integers(0, 2**60),
    by_need=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_the_offered_grants_never_exceed_the_budget(budget, share, incomes, eligible_bits,
                                                     by_need, seed) -> None:
    elev = _elevation(subsidy_share=share, subsidy_budget_usd=budget,
                      subsidy_allocation="by_need" if by_need else "first_come")
    n = len(incomes)
    eligible = np.array([(eligible_bits >> i) & 1 == 1 for i in range(n)])
    offered = subsidy_offers(elev, eligible, np.array(incomes), np.random.default_rng(seed))
    assert not offered[~eligible].any()
    assert offered.sum() * elev.cost_usd * share <= budget + 1e-6
    funded = grants_funded(elev)
    if share > 0:
        # every funded grant is offered while there are households to take it
        assert offered.sum() == min(funded, int(eligible.sum()))
    if by_need and offered.any() and (eligible & ~offered).any():
        assert np.array(incomes)[offered].max() <= np.array(incomes)[eligible & ~offered].min()
