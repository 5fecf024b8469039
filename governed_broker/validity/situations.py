"""A vignette as the world of an experiment would state it: a ``HouseholdSituation``.

A vignette is put into the world of the experiment being validated as its one household
(``sim.world_of_one.WorldOfOne``) and its situation is built by the code the flood model runs:
the zone's flood probability and typical depth from its hazard map, this year's damage from its
depth-damage table (after elevation) and the payout from its insurance terms, every policy
instrument's offers and requirements (the banded premiums, the lender's policy, an aid
certificate, the elevation grant, a buyout offer), each action's cost, premium and loss of a
typical flood after it, whether it is open and affordable within the spending room, and, when
the experiment has a memory engine, what the household remembers of its flood history,
retrieved by that engine (``sim.memory_bridge.WorldMemory``). A vignette household owes no
loans and has no unrepaired damage; its state in the programmes is that of a household new to
the run unless its ``programme_state`` says otherwise. The history a vignette gives its memory
is its floods, its quiet years and what the neighbours did each year (past decisions are not
recorded); a vignette with ``memory_fidelity`` shows every memory at that fidelity, whatever
its age.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from governed_broker.config.base import ConfigError
from governed_broker.config.experiment import ExperimentConfig
from governed_broker.config.loader import fixed_events, hazard_with_paths
from governed_broker.config.resolved import ResolvedExperiment
from governed_broker.contracts.decision import HouseholdSituation
from governed_broker.sim.hazard import Hazard, make_hazard
from governed_broker.sim.world_of_one import Household, WorldOfOne
from governed_broker.validity.battery import VignetteSpec


class SituationBuilder:
    """Builds the situations of vignettes in the world of one experiment.

    Args:
        experiment: The experiment being validated.
        seed: Seed of the memory engines (the battery's seed).
    """

    def __init__(self, experiment: ResolvedExperiment, seed: int) -> None:
        self.config: ExperimentConfig = experiment.config.model_copy(update={"seed": seed})
        self.domain = experiment.domain
        #: The experiment with the battery's seed (its config hash is not the run's).
        self.experiment = dataclasses.replace(experiment, config=self.config)
        self._zones: dict[str, Hazard] = {}
        self._recalled: dict[str, dict[str, Any] | None] = {}

    def build(self, spec: VignetteSpec, agent_id: int,
              order: tuple[str, ...] | None = None) -> HouseholdSituation:
        """The situation of ``spec``; ``order`` lists the allowed actions in another order."""
        situation = self._world(spec).situation(
            order=order, recall=lambda allowed: self._recall(spec, allowed))
        return dataclasses.replace(situation, agent_id=agent_id)

    def _world(self, spec: VignetteSpec) -> WorldOfOne:
        """The experiment's world with the vignette's household in it, in its year."""
        ago = [f.years_ago for f in spec.earlier_floods]
        flooded = spec.flood_depth_m > 0
        household = Household(
            year=spec.year, depth_m=spec.flood_depth_m,
            neighbour_shares=spec.neighbours.model_dump(), damage_factor=spec.damage_factor,
            price_factor=spec.cost_factor, tenure=spec.tenure, flood_zone=spec.flood_zone,
            income_usd=spec.income_usd, savings_usd=spec.savings_usd,
            structure_value_usd=spec.structure_value_usd,
            contents_value_usd=spec.contents_value_usd, elevated=spec.elevated,
            insured=spec.insured, trust_insurance=spec.trust_insurance,
            trust_neighbours=spec.trust_neighbours,
            years_since_flood=0 if flooded else (min(ago) if ago else None),
            floods_experienced=len(ago) + int(flooded), programme_state=spec.programme_state)
        try:
            return WorldOfOne(self.experiment, self._zone(spec.flood_zone), household)
        except ValueError as exc:
            raise ConfigError(f"validity vignette: {exc}") from exc

    # -- world facts ----------------------------------------------------------------------
    def _zone(self, name: str) -> Hazard:
        """The experiment's hazard map for zone ``name`` alone."""
        if name not in self._zones:
            known = _known_zones(self.config)
            if known is not None and name not in known:
                raise ConfigError(f"validity vignette: flood_zone {name!r} is not a zone of the "
                                  f"experiment's hazard (zones: {', '.join(sorted(known))})")
            self._zones[name] = make_hazard(hazard_with_paths(self.config), [name],
                                            self.config.seed, self.config.years,
                                            fixed_events(self.config))
        return self._zones[name]

    def _recall(self, spec: VignetteSpec, allowed: tuple[str, ...]) -> dict[str, Any] | None:
        """What the experiment's memory engine retrieves after the vignette's history.

        The same for every replicate and arm of a vignette.
        """
        if self.config.memory.engine == "none":
            return None
        key = spec.model_dump_json()
        if key not in self._recalled:
            self._recalled[key] = self._remember(spec, allowed)
        return self._recalled[key]

    def _remember(self, spec: VignetteSpec, allowed: tuple[str, ...]) -> dict[str, Any]:
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
        now = self._world(spec)
        for year in range(1, spec.year + 1):
            depth = floods.get(year, 0.0)
            if depth > 0:
                damage, payout = now.losses(depth)
                memory.record_flood(year, depth, damage, payout, insured=spec.insured,
                                    elevated=spec.elevated)
            else:
                memory.record_no_flood(year, insured=spec.insured, elevated=spec.elevated)
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
    """The experiment's zones and their annual flood probabilities as households are told them.

    Empty for a hazard mode whose zones are not listed.
    """
    zones = _known_zones(experiment.config)
    if not zones:
        return {}
    builder = SituationBuilder(experiment, experiment.config.seed)
    return {z: float(builder._zone(z).probability[0]) for z in sorted(zones)}
