"""A vignette as the world of an experiment would state it: a ``HouseholdSituation``.

The facts a vignette does not fix are worked out the way the world works them out, from the
experiment being validated: the zone's flood probability and typical depth from its hazard, this
year's damage from its depth-damage table (after elevation), the payout from its insurance terms,
each action's out-of-pocket cost and premium, whether it is open to the household and
affordable within its spending room (``sim.finance``; a vignette household owes no loans and
has no unrepaired damage), and the loss of a typical flood after it, from the world's effect
table (``sim.effects``), and, when the
experiment has a memory engine, what the household remembers of its flood history, retrieved by
that engine (``sim.memory_bridge.WorldMemory``). The history a vignette gives its memory is its
floods, its quiet years and what the neighbours did each year (past decisions are not recorded);
a vignette with ``memory_fidelity`` shows every memory at that fidelity, whatever its age.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from governed_broker.config.base import ConfigError
from governed_broker.config.damage import DamageTable, load_damage_table
from governed_broker.config.experiment import ExperimentConfig
from governed_broker.config.loader import fixed_events, hazard_with_paths
from governed_broker.config.resolved import ResolvedExperiment
from governed_broker.contracts.decision import HouseholdSituation
from governed_broker.sim import finance, money
from governed_broker.sim.damage import damages_usd
from governed_broker.sim.effects import OptionBatch, price
from governed_broker.sim.hazard import make_hazard
from governed_broker.validity.battery import VignetteSpec


@dataclass(frozen=True)
class _Zone:
    probability: float
    typical_depth_m: float


class SituationBuilder:
    """Builds the situations of vignettes in the world of one experiment.

    Args:
        experiment: The experiment being validated.
        seed: Seed of the memory engines (the battery's seed).
    """

    def __init__(self, experiment: ResolvedExperiment, seed: int) -> None:
        self.config: ExperimentConfig = experiment.config.model_copy(update={"seed": seed})
        self.domain = experiment.domain
        self.damage_table: DamageTable = load_damage_table(
            self.config.resolve_path(self.config.damage.table))
        self._zones: dict[str, _Zone] = {}
        self._recalled: dict[str, dict[str, Any] | None] = {}

    def build(self, spec: VignetteSpec, agent_id: int,
              order: tuple[str, ...] | None = None) -> HouseholdSituation:
        """The situation of ``spec``; ``order`` lists the allowed actions in another order."""
        zone = self._zone(spec.flood_zone)
        owner = np.array([spec.tenure == "owner"])
        structure = np.array([spec.structure_value_usd if spec.tenure == "owner" else 0.0])
        contents = np.array([spec.contents_value_usd])
        damage, payout = self._impact(spec, spec.flood_depth_m, owner, structure, contents)
        prp = self.config.insurance.preferred_risk
        # a vignette has no payment history (its earlier floods do not say what was paid), so
        # in a zone of the banded premiums it is quoted them whatever its loss history
        batch = OptionBatch(self.config, self.damage_table, owner, structure, contents,
                            np.array([spec.elevated]), np.array([zone.typical_depth_m]),
                            np.array([zone.probability]),
                            preferred=prp is not None and spec.flood_zone in prp.zones)
        costs, allowed, affordable, extra = self._options(spec, batch)
        memory = self._recall(spec, allowed, owner, structure, contents)
        if order is not None:  # only the listing changes: what is remembered and known stays
            allowed = tuple(a for a in order if a in allowed)
        ago = [f.years_ago for f in spec.earlier_floods]
        flooded = spec.flood_depth_m > 0
        extra["typical_flood"] = {"depth_m": zone.typical_depth_m,
                                  "damage_usd": float(batch.damage_here_usd()[0])}
        if memory is not None:
            extra["knowledge_facts"] = memory["knowledge_facts"]
            extra["heuristics"] = memory["heuristics"]
        return HouseholdSituation(
            agent_id=agent_id, year=spec.year, tenure=spec.tenure, flood_zone=spec.flood_zone,
            income_usd=spec.income_usd, savings_usd=spec.savings_usd,
            structure_value_usd=float(structure[0]), contents_value_usd=spec.contents_value_usd,
            elevated=spec.elevated, insured=spec.insured, flooded=flooded,
            depth_m=spec.flood_depth_m, damage_usd=damage, payout_usd=payout,
            years_since_flood=0 if flooded else (min(ago) if ago else None),
            floods_experienced=len(ago) + int(flooded),
            flood_probability=zone.probability,
            neighbour_shares=spec.neighbours.model_dump(),
            action_costs_usd=costs, affordable=affordable, allowed_actions=allowed,
            trust_insurance=spec.trust_insurance, trust_neighbours=spec.trust_neighbours,
            debt_usd=0.0, unrepaired_damage_usd=0.0,
            memories=() if memory is None else tuple(memory["memories"]), extra=extra,
        )

    # -- world facts ----------------------------------------------------------------------
    def _zone(self, name: str) -> _Zone:
        if name not in self._zones:
            known = _known_zones(self.config)
            if known is not None and name not in known:
                raise ConfigError(f"validity vignette: flood_zone {name!r} is not a zone of the "
                                  f"experiment's hazard (zones: {', '.join(sorted(known))})")
            model = make_hazard(hazard_with_paths(self.config), [name], self.config.seed,
                                self.config.years, fixed_events(self.config))
            self._zones[name] = _Zone(float(model.probability[0]),
                                      float(model.typical_depth_m[0]))
        return self._zones[name]

    def _impact(self, spec: VignetteSpec, depth_m: float, owner: np.ndarray,
                structure: np.ndarray, contents: np.ndarray) -> tuple[float, float]:
        """Damage (dollars, after elevation, times ``damage_factor``, capped at the home's
        value) and insurance payout of a flood ``depth_m`` deep."""
        if depth_m <= 0:
            return 0.0, 0.0
        lift = self.config.elevation.height_m if spec.elevated else 0.0
        d_s, d_c = damages_usd(self.damage_table, np.array([max(0.0, depth_m - lift)]),
                               structure, contents)
        d_s = np.minimum(d_s * spec.damage_factor, structure)
        d_c = np.minimum(d_c * spec.damage_factor, contents)
        pay = money.payout_usd(self.config.insurance, d_s, d_c, owner, np.array([spec.insured]))
        return float(d_s[0] + d_c[0]), float(pay[0])

    def _options(self, spec: VignetteSpec, batch: OptionBatch
                 ) -> tuple[dict[str, float], tuple[str, ...], dict[str, bool], dict[str, Any]]:
        """Per action its cost, whether it is open and affordable, and the world's facts about
        it (``extra``: loss of a typical flood after it, premium, the spending room)."""
        fin = self.config.finance
        income, savings = np.array([spec.income_usd]), np.array([spec.savings_usd])
        no_loan = np.zeros(1)  # a vignette household owes nothing this year
        costs, affordable, loss, premium, allowed = {}, {}, {}, {}, []
        for action, act in self.domain.actions.items():
            priced = price(act.effect, batch)
            factor = spec.cost_factor.get(act.effect, 1.0)
            cost = float(priced.cost_usd[0]) * factor
            costs[action] = cost
            premium[action] = float(priced.premium_usd[0]) * factor
            affordable[action] = bool(finance.affordable(fin, np.array([cost]), savings, income,
                                                         no_loan)[0])
            loss[action] = float(priced.loss_usd[0])
            if spec.tenure in act.tenure and bool(priced.open_to[0]):
                allowed.append(action)
        room = float(finance.spending_room_usd(fin, savings, income, no_loan)[0])
        extra = {"loss_if_flood_usd": loss, "premium_usd": premium, "spending_room_usd": room}
        return costs, tuple(allowed), affordable, extra

    def _recall(self, spec: VignetteSpec, allowed: tuple[str, ...], owner: np.ndarray,
                structure: np.ndarray, contents: np.ndarray) -> dict[str, Any] | None:
        """What the experiment's memory engine retrieves after the vignette's history (the
        same for every replicate and arm of a vignette)."""
        if self.config.memory.engine == "none":
            return None
        key = spec.model_dump_json()
        if key not in self._recalled:
            self._recalled[key] = self._remember(spec, allowed, owner, structure, contents)
        return self._recalled[key]

    def _remember(self, spec: VignetteSpec, allowed: tuple[str, ...], owner: np.ndarray,
                  structure: np.ndarray, contents: np.ndarray) -> dict[str, Any]:
        # One world memory of one household, built afresh for every vignette (its memory
        # engine's seeded generator included), so a vignette's memories never depend on the
        # other vignettes of the battery.
        from governed_broker.sim.memory_bridge import WorldMemory

        world = WorldMemory(self.config, self.domain, np.array([False]), np.array([False]),
                            run_dir=None)
        memory, idx = world.memory_of(1), np.array([0])
        memory.set_status(insured=spec.insured, elevated=spec.elevated)
        floods = {spec.year - f.years_ago: f.depth_m for f in spec.earlier_floods}
        floods[spec.year] = spec.flood_depth_m
        shares = spec.neighbours.model_dump()
        for year in range(1, spec.year + 1):
            depth = floods.get(year, 0.0)
            if depth > 0:
                damage, payout = self._impact(spec, depth, owner, structure, contents)
                memory.record_flood(year, depth, damage, payout, insured=spec.insured,
                                    elevated=spec.elevated)
            else:
                memory.record_no_flood(year)
            if year == spec.year:
                break
            memory.record_neighbours(year, shares)
            world.end_year(year, idx)
        arrays = {k: np.array([v]) for k, v in shares.items()}
        recalled = world.perceive(spec.year, idx, arrays, [allowed])[0]
        if spec.memory_fidelity is not None:  # the same words whatever the memory's age
            recalled["memories"] = tuple(
                m if m.kind == "insight" else dataclasses.replace(m, fidelity=spec.memory_fidelity)
                for m in recalled["memories"])
        return recalled


def _known_zones(config: ExperimentConfig) -> set[str] | None:
    """Zones a vignette may live in (None: a hazard mode whose zones are not listed)."""
    hazard = config.hazard
    if hazard.mode in ("stochastic", "raster"):  # raster: the zones households are told of
        return set(hazard.zones)
    if hazard.mode == "fixed":
        zones = {z for e in fixed_events(config) for z in e.depth_m}
        if config.population.generate is not None:
            zones |= set(config.population.generate.zone_shares)
        return zones
    return None


def zone_probabilities(experiment: ResolvedExperiment) -> dict[str, float]:
    """The experiment's zones and their annual flood probabilities as households are told
    them (empty for a hazard mode whose zones are not listed)."""
    zones = _known_zones(experiment.config)
    if not zones:
        return {}
    builder = SituationBuilder(experiment, experiment.config.seed)
    return {z: builder._zone(z).probability for z in sorted(zones)}
