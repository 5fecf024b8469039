"""A vignette that describes a household of a run gets the situation the run gave it.

For every policy setting of the world (the lender's requirement, the banded premiums and their
loss history, aid certificates, elevation grants with and without a budget, buyouts with and
without a budget, risk-based premiums, institutions that set the levers, a policy change), a
run records each household's situation; a vignette is then written from what the run knew of a
household (its own facts, this year's flood, the neighbours, its state in every instrument and,
where a budget decides who is served, the offers it was made) and built in the world of the
year's settings. The two situations must be equal field for field: the vignettes are priced,
offered and told by the world's own code, not by a copy of it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from governed_broker.config.resolved import resolve_experiment
from governed_broker.contracts.decision import Decision, HouseholdSituation
from governed_broker.sim import FloodModel
from governed_broker.validity.battery import VignetteSpec
from governed_broker.validity.situations import SituationBuilder

FLOODY = ["years=6", "population.size=40", "hazard.zones.high.annual_probability=0.3",
          "population.generate.zone_shares={high: 0.7, low: 0.3}"]
BUYOUT = ("buyout={source: test, min_floods: 1, substantial_damage_share: 0.3, "
          "price_share: 1.0, allocation: by_need")
#: Policy setting -> overrides of the small baseline world, and a fact of the situations
#: that must turn up in it (so that the setting is exercised, not only allowed).
SETTINGS: dict[str, tuple[list[str], str]] = {
    "lender, banded premiums, certificates": ([], "lender"),
    "no programmes": (["insurance.mandatory_purchase=null", "insurance.preferred_risk=null",
                       "finance.aid.group_policy=null", "elevation.subsidy_share=0"], "none"),
    "grants within a budget": (["elevation.subsidy_budget_usd=80000",
                                "elevation.subsidy_allocation=first_come"], "grant"),
    "buyouts": ([BUYOUT + "}"], "buyout"),
    "buyouts within a budget": ([BUYOUT + ", annual_budget_usd: 300000}"], "buyout"),
    "risk-based premiums": (["insurance.pricing=risk_based"], "lender"),
    "institutions": (["institutions.government.appropriation_per_household_usd=3000",
                      BUYOUT + "}"], "buyout"),
    "policy change": (["policy_change={description: t, from_year: 3, settings: {buyout: "
                       "{source: t, min_floods: 1, price_share: 1.0}, "
                       "elevation.subsidy_budget_usd: 40000}}"], "buyout"),
}


class Recorder:
    """Decides ``do_nothing`` and records what the world knew at each decision.

    It insures every few years, so that policies lapse and start, and keeps, per year, each
    situation and what the world knew of the household then.
    """

    name = "recorder"

    def __init__(self) -> None:
        self.model: FloodModel | None = None
        self.seen: list[tuple[HouseholdSituation, VignetteSpec | None, Any]] = []

    def decide(self, situations: Sequence[HouseholdSituation]) -> list[Decision]:
        model = self.model
        for j, s in enumerate(situations):
            self.seen.append((s, vignette_of(model, j, s), model.config))
        act = "buy_insurance" if model.year % 3 == 1 else "do_nothing"
        return [Decision(s.agent_id, act, act, "baseline") for s in situations]

    def end_year(self, year, households) -> None:
        pass


def vignette_of(model: FloodModel, j: int, s: HouseholdSituation) -> VignetteSpec | None:
    """The vignette of household ``j`` of this year.

    Or None where a vignette cannot say what the world knows (loans, unrepaired damage, negative
    savings, a flood history that does not fit in the years before).
    """
    c = model.current
    i = int(c.idx[j])
    if s.debt_usd or s.unrepaired_damage_usd or s.savings_usd < 0:
        return None
    earlier = s.floods_experienced - int(s.flooded)
    first = 1 if s.flooded else s.years_since_flood
    if earlier and (first is None or first + earlier - 1 >= s.year):
        return None
    config = model.config
    state: dict[str, Any] = {name: a[i].item() for inst in model.instruments
                             for name, a in inst.arrays.items()}
    if config.elevation.subsidy_budget_usd is not None:
        state["subsidy_offered"] = bool(c.subsidy_offered[j])
    if config.buyout is not None and config.buyout.annual_budget_usd is not None:
        state.update(buyout_offered=bool(c.buyout_offered[j]),
                     buyout_price_usd=float(c.buyout_price_usd[j]))
    return VignetteSpec.model_validate({
        "tenure": s.tenure, "flood_zone": s.flood_zone, "income_usd": s.income_usd,
        "savings_usd": s.savings_usd, "structure_value_usd": s.structure_value_usd,
        "contents_value_usd": s.contents_value_usd, "insured": s.insured,
        "elevated": s.elevated, "trust_insurance": s.trust_insurance,
        "trust_neighbours": s.trust_neighbours, "year": s.year, "flood_depth_m": s.depth_m,
        "earlier_floods": [{"years_ago": first + k, "depth_m": 0.3} for k in range(earlier)],
        "neighbours": dict(s.neighbour_shares), "programme_state": state,
    })


def institutions_section() -> dict[str, Any]:
    """``experiments/institutions.yaml``'s rule-decided government and insurer."""
    root = Path(__file__).resolve().parents[2]
    section = yaml.safe_load((root / "experiments" / "institutions.yaml").read_text())[
        "institutions"]
    section.update(domain=str(root / "institutions.yaml"),
                   prompts=str(root / "configs" / "institutions" / "prompts.yaml"))
    return section


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_a_vignette_of_a_household_gets_the_situation_the_world_gave_it(
        experiments, setting: str) -> None:
    overrides, expect = SETTINGS[setting]
    data = experiments.data()
    if setting == "institutions":
        data["institutions"] = institutions_section()
    config = experiments.config([*FLOODY, *overrides], data=data)
    recorder = Recorder()
    model = FloodModel(config, recorder)
    recorder.model = model
    for _ in range(config.years):
        model.step()
    compared, builders = [], {}
    for world, spec, year_config in recorder.seen:
        if spec is None:
            continue
        key = id(year_config)
        if key not in builders:
            builders[key] = SituationBuilder(resolve_experiment(year_config), config.seed)
        vignette = builders[key].build(spec, world.agent_id)
        assert dataclasses.asdict(vignette) == dataclasses.asdict(world), (
            f"{setting}: household {world.agent_id}, year {world.year}")
        compared.append(world)
    assert len(compared) >= 100, f"{setting}: only {len(compared)} households compared"
    told = {f.name for s in compared for f in dataclasses.fields(s.facts)
            if getattr(s.facts, f.name)}
    placed = any(s.facts.premium_usd["do_nothing"] > 0 for s in compared)
    seen = {"lender": placed and {"insurance_required", "group_policy"} <= told,
            "grant": any(s.action_costs_usd["elevate_house"] < config.elevation.cost_usd
                         for s in compared),
            "buyout": "buyout_offer_usd" in told,
            "none": not placed and "insurance_required" not in told}
    assert seen[expect], f"{setting}: no compared situation shows {expect!r}"


def test_a_vignette_names_only_instrument_states_and_offers(experiments) -> None:
    from governed_broker.config.base import ConfigError

    experiment = resolve_experiment(experiments.config(FLOODY))
    spec = VignetteSpec.model_validate({
        "tenure": "owner", "flood_zone": "high", "income_usd": 50000, "savings_usd": 1000,
        "structure_value_usd": 200000, "contents_value_usd": 50000, "insured": False,
        "elevated": False, "trust_insurance": 0.3, "trust_neighbours": 0.3, "year": 3,
        "flood_depth_m": 0.5, "neighbours": {"insured": 0.1, "elevated": 0, "relocated": 0}})
    builder = SituationBuilder(experiment, 1)
    required = builder.build(spec.model_copy(update={
        "programme_state": {"insurance_required": True}}), 1)
    assert required.facts.insurance_required and not builder.build(spec, 1).facts.insurance_required
    with pytest.raises(ConfigError, match="unknown name.*'insurance_requried'"):
        builder.build(spec.model_copy(update={"programme_state": {"insurance_requried": True}}),
                      1)
    with pytest.raises(ConfigError, match="group_policy_years: 1.5 is not a whole number"):
        builder.build(spec.model_copy(update={"programme_state": {"group_policy_years": 1.5}}),
                      1)
    assert np.isfinite(required.facts.spending_room_usd)
