"""The yearly loop: phase order, feasibility re-check, insurance timing and lapse, relocation."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from governed_broker.contracts.decision import Decision, HouseholdSituation
from governed_broker.sim import FloodModel, HouseholdAgent

POP_HEADER = ("tenure,flood_zone,income_usd,savings_usd,structure_value_usd,contents_value_usd,"
              "elevated,insured,trust_insurance,trust_neighbours")
POP_ROWS = [
    "owner,high,60000,100000,200000,100000,False,False,0.3,0.5",   # agent 1
    "renter,high,40000,20000,0,50000,False,False,0.3,0.5",         # agent 2
    "owner,high,60000,1000,200000,100000,False,False,0.3,0.5",     # agent 3: poor
    "owner,low,60000,100000,200000,100000,False,True,0.3,0.5",     # agent 4: insured at start
]


class Scripted:
    """Decides from a script {(year, agent_id): action}; default ``do_nothing``."""

    name = "scripted"

    def __init__(self, script: dict[tuple[int, int], str]) -> None:
        self.script = script
        self.seen: list[list[HouseholdSituation]] = []
        self.ended: list[int] = []
        self.reflecting: list[list[int]] = []

    def decide(self, situations: Sequence[HouseholdSituation]) -> list[Decision]:
        self.seen.append(list(situations))
        return [Decision(agent_id=s.agent_id,
                         proposed_action=self.script.get((s.year, s.agent_id), "do_nothing"),
                         action=self.script.get((s.year, s.agent_id), "do_nothing"),
                         status="approved", decision_maker="scripted") for s in situations]

    def end_year(self, year: int, households) -> None:
        self.ended.append(year)
        self.reflecting.append([h.agent_id for h in households])

    def provenance(self) -> None:
        return None

    def close(self) -> None:
        pass


@pytest.fixture
def world(experiments):
    """Build a 4-household world with a fixed hazard: floods in years 2 (high) and 4 (both)."""
    (experiments.tmp_path / "pop.csv").write_text(
        "# synthetic test population\n" + POP_HEADER + "\n" + "\n".join(POP_ROWS) + "\n")

    def make(script: dict[tuple[int, int], str], years: int = 4,
             memory: str = "none") -> tuple[FloodModel, Scripted]:
        data = experiments.data()
        data["years"] = years
        data["memory"]["engine"] = memory
        data["population"] = {"source": "test", "file": "pop.csv"}
        data["hazard"] = {"source": "test", "mode": "fixed", "events": [
            {"year": 2, "depth_m": {"high": 1.0}},
            {"year": 4, "depth_m": {"high": 2.0, "low": 1.0}}],
            "zones": {"high": {"annual_probability": 0.02, "median_depth_m": 0.3},
                      "low": {"annual_probability": 0.002, "median_depth_m": 0.2}}}
        data["network"] = {"kind": "ring", "k": 2}
        maker = Scripted(script)
        return FloodModel(experiments.config(data=data), maker), maker

    return make


def run(model: FloodModel, years: int) -> list[dict]:
    out = []
    for _ in range(years):
        model.step()
        cols = model.last_agent_columns
        out.append({int(a): {k: v[i] for k, v in cols.items()}
                    for i, a in enumerate(cols["agent_id"])})
    return out


def test_phases_run_in_the_documented_order(world, monkeypatch) -> None:
    model, maker = world({})
    calls: list[str] = []
    for phase in ("begin_year", "hazard_phase", "impacts_phase", "perception_phase",
                  "decision_phase", "execution_phase", "reflection_phase", "collect_phase"):
        original = getattr(model, phase)

        def wrapped(*args, _name=phase, _orig=original):
            calls.append(_name)
            return _orig(*args)

        monkeypatch.setattr(model, phase, wrapped)
    model.step()
    assert calls == ["begin_year", "hazard_phase", "impacts_phase", "perception_phase",
                     "decision_phase", "execution_phase", "reflection_phase", "collect_phase"]
    assert maker.ended == [1]


def test_situations_see_damage_before_deciding(world) -> None:
    model, maker = world({})
    rows = run(model, 2)
    s = {x.agent_id: x for x in maker.seen[1]}[1]  # year 2 flood, agent 1 (uninsured owner)
    assert s.flooded and s.depth_m == 1.0 and s.damage_usd > 0 and s.payout_usd == 0
    r = rows[1][1]
    assert s.savings_usd == pytest.approx(r["savings_before_usd"] - r["repaired_from_savings_usd"])
    assert s.debt_usd == pytest.approx(r["loan_usd"])
    # the repair need is paid by aid, savings and a loan, or left unrepaired
    assert r["out_of_pocket_usd"] == pytest.approx(
        r["aid_usd"] + r["repaired_from_savings_usd"] + r["loan_usd"] + r["unrepaired_usd"])
    assert s.years_since_flood == 0 and s.floods_experienced == 1
    assert "elevate_house" not in {x.agent_id: x for x in maker.seen[1]}[2].allowed_actions


def test_infeasible_actions_fall_back_to_default(world) -> None:
    model, _ = world({(1, 2): "elevate_house", (1, 3): "elevate_house", (1, 1): "fly_away"})
    rows = run(model, 1)[0]
    for agent in (1, 2, 3):  # unknown action, renter cannot elevate, cannot afford
        assert not rows[agent]["feasible"]
        assert rows[agent]["executed_action"] == "do_nothing"
        assert not rows[agent]["elevated_after"]
    assert rows[2]["proposed_action"] == "elevate_house"
    assert model.last_model_row["n_infeasible"] == 3


def test_insurance_timing_and_lapse(world) -> None:
    model, _ = world({(1, 1): "buy_insurance", (3, 1): "buy_insurance"})
    rows = run(model, 4)
    a = [r[1] for r in rows]
    assert a[0]["premium_usd"] > 0 and a[0]["insured_after"] and not a[0]["insured_before"]
    assert a[1]["insured_before"] and a[1]["payout_usd"] > 0  # bought in year 1, flood year 2
    assert not a[1]["insured_after"]  # not renewed in year 2: lapses
    assert not a[2]["insured_before"] and a[2]["insured_after"]
    assert a[3]["insured_before"] and a[3]["payout_usd"] > 0
    # agent 4 starts insured, never renews: covered in year 1 only
    assert rows[0][4]["insured_before"] and not rows[1][4]["insured_before"]
    assert rows[3][4]["flooded"] and rows[3][4]["payout_usd"] == 0


def test_elevation_lowers_effective_depth(world) -> None:
    model, _ = world({(1, 1): "elevate_house", (3, 1): "elevate_house"})
    rows = run(model, 4)
    h = model.config.elevation.height_m
    assert rows[0][1]["elevated_after"] and rows[0][1]["action_cost_usd"] > 0
    assert rows[3][1]["effective_depth_m"] == pytest.approx(max(0.0, 2.0 - h))
    assert not rows[2][1]["feasible"]  # once only


def test_relocation_makes_households_inactive(world) -> None:
    model, _ = world({(1, 2): "relocate"})
    rows = run(model, 2)
    assert rows[0][2]["relocated_after"] and 2 not in rows[1]
    assert model.last_model_row["n_active"] == 3
    assert model.last_model_row["share_relocated"] == pytest.approx(0.25)
    agent = next(a for a in model.agents if a.unique_id == 2)
    assert isinstance(agent, HouseholdAgent) and not agent.active
    # ring k=2: agents 1 and 3 neighbour agent 2 and see it relocated last year
    assert rows[1][1]["neighbour_relocated_share"] == pytest.approx(0.5)
    assert rows[0][1]["neighbour_relocated_share"] == 0


def test_year_end_hands_over_the_memories_of_the_households_still_here(world) -> None:
    model, maker = world({(1, 2): "relocate"}, memory="humancentric")
    run(model, 2)
    assert maker.reflecting == [[1, 3, 4], [1, 3, 4]]  # agent 2 left in year 1
    target = model.reflection_targets()[0]
    assert (target.tenure, target.flood_zone) == ("owner", "high")
    assert target.engine is model.world_memory.memory_of(1).engine


def test_without_memory_year_end_hands_over_no_households(world) -> None:
    model, maker = world({}, memory="none")
    run(model, 1)
    assert maker.reflecting == [[]]


def test_neighbour_shares_lag_one_year(world) -> None:
    # ring k=2: agent 1's neighbours are agents 2 and 4; agent 4 starts insured and lapses
    # after year 1; agent 2 buys in year 1 and lets it lapse in year 2.
    model, _ = world({(1, 2): "buy_insurance"})
    rows = run(model, 3)
    shares = [r[1]["neighbour_insured_share"] for r in rows]
    assert shares == pytest.approx([0.5, 0.5, 0.0])


def test_savings_bookkeeping(world) -> None:
    model, _ = world({(1, 1): "elevate_and_insure", (2, 1): "buy_insurance"})
    rows = run(model, 4)
    fin = model.config.finance
    for r in (rows[0][1], rows[1][1], rows[2][1], rows[3][1]):
        spent = r["premium_usd"] + r["action_cost_usd"]
        beyond_budget = max(0.0, spent - fin.protection_budget_share * r["income_usd"])
        expected = (r["savings_before_usd"] - r["repaired_from_savings_usd"]
                    + fin.saving_share * r["income_usd"] - r["loan_payment_usd"] - beyond_budget)
        assert r["savings_after_usd"] == pytest.approx(expected)
        assert r["savings_after_usd"] >= 0
    assert rows[0][1]["insured_after"] and rows[0][1]["elevated_after"]  # one year, both
    assert rows[0][1]["premium_usd"] > 0 and rows[0][1]["action_cost_usd"] > 0
    assert rows[1][1]["insured_before"] and rows[1][1]["effective_depth_m"] == 0  # raised
    r = rows[1][1]
    assert r["damage_usd"] == pytest.approx(r["damage_structure_usd"] + r["damage_contents_usd"])


def test_trust_updates_follow_the_rules(world) -> None:
    model, _ = world({})
    run(model, 2)
    # year 1 no flood: uninsured -0.02, insured (agent 4) +0.02; year 2 agent 1 flooded
    # uninsured +0.05; agent 4 (low zone, dry, uninsured in year 2) -0.02
    np.testing.assert_allclose(model.hh.trust_insurance, [0.33, 0.33, 0.33, 0.30])


def test_wrong_number_of_decisions_is_an_error(world) -> None:
    model, maker = world({})
    maker.decide = lambda situations: []
    with pytest.raises(RuntimeError, match="one per situation"):
        model.step()
