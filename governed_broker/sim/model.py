"""The Mesa flood world: ``FloodModel`` and ``HouseholdAgent``.

One step is one year, in the phases of docs/ARCHITECTURE.md ("Yearly loop"), each a short
method so that memory recording and checkpoints can hook into them; the phases' work is done
by the modules they name (``impacts``, ``quote``, ``perception``, ``execution``) and by the
policy instruments the world composes (``sim.instruments``: premium pricing, the mandatory
purchase requirement, aid certificates, elevation grants, buyouts), called at each phase in
registry order. Household state lives in numpy arrays on the model (``model.hh``), indexed by
``agent.index = agent.unique_id - 1``; ``HouseholdAgent`` is the Mesa agent whose properties
read those arrays. This keeps every per-year computation vectorised (10,000 households x 30
years in seconds) and all state serialisable (arrays and plain attributes; generators come
from ``governed_broker.seeding``).

Relocated households stay in ``model.agents`` but are marked inactive (``agent.active`` is
False): they take no further part, keep counting in the population shares, and are visible to
neighbours as "relocated".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import mesa
import numpy as np

from governed_broker.config.experiment import ExperimentConfig
from governed_broker.config.loader import fixed_events, hazard_with_paths
from governed_broker.config.resolved import ResolvedExperiment, resolve_experiment
from governed_broker.contracts.decision import (
    Decision,
    DecisionMaker,
    HouseholdSituation,
    RanksInitialPolicyholders,
    ReflectionTarget,
)
from governed_broker.contracts.institutions import InstitutionMaker
from governed_broker.memory.episodic import EpisodicStore
from governed_broker.sim import finance
from governed_broker.sim.agents import HouseholdAgent
from governed_broker.sim.execution import execute_decisions
from governed_broker.sim.hazard import make_hazard
from governed_broker.sim.households import HouseholdArrays
from governed_broker.sim.impacts import apply_impacts
from governed_broker.sim.institutions import Institutions
from governed_broker.sim.instruments.base import Instrument, make_instruments
from governed_broker.sim.instruments.mandatory import (
    MandatoryPurchase,
    holders_by_score,
    zone_tenure_groups,
)
from governed_broker.sim.memory_bridge import WorldMemory
from governed_broker.sim.network import NeighbourIndex, build_graph
from governed_broker.sim.perception import allowed_actions, situations
from governed_broker.sim.population import load_population
from governed_broker.sim.quote import quote
from governed_broker.sim.reporters import YearView, agent_columns, model_columns, model_row
from governed_broker.sim.trust import update_trust
from governed_broker.sim.year_state import YearState

#: Name prefix of what neighbours saw last year in ``FloodModel.state()``.
PREV_PREFIX = "prev/"

class FloodModel(mesa.Model):
    """Households facing yearly floods and deciding how to adapt.

    Args:
        experiment: The resolved experiment (its settings, domain, damage table and
            institutions' domain); a bare ``ExperimentConfig`` is resolved here (scripts and
            tests).
        decision_maker: Decides for every active household each year.
        rng: Seed of Mesa's generator (defaults to ``config.seed``).
        run_dir: The run's working directory, where household memories are stored
            (``memory.sqlite``); None keeps memories in this process only.
        institution_makers: Makers of the institutions an LLM decides for (the others get
            their rule maker; ``sim.institutions``).
    """

    def __init__(
        self,
        experiment: ResolvedExperiment | ExperimentConfig,
        decision_maker: DecisionMaker,
        *,
        rng: int | None = None,
        run_dir: Path | None = None,
        institution_makers: Mapping[str, InstitutionMaker] | None = None,
    ) -> None:
        if isinstance(experiment, ExperimentConfig):
            experiment = resolve_experiment(experiment)
        config = experiment.config
        super().__init__(rng=config.seed if rng is None else rng)
        self.config = config
        #: The settings before and from ``policy_change.from_year`` (``config.policy``).
        self._configs = (config, config.with_policy_change())
        self.seed = config.seed
        self.decision_maker = decision_maker
        self.domain = experiment.domain
        self.action_ids = list(self.domain.actions)
        self.model_columns = model_columns(self.action_ids)
        self.default_action = self.domain.default_action
        self.damage_table = experiment.damage_table
        population = load_population(config.population, config.seed, config.resolve_path)
        self.zones = sorted(set(population.zone.tolist()))
        self.hh = HouseholdArrays.from_population(population, self.zones, self.domain)
        #: Marginalised group membership per household (None: the population does not say).
        self.marginalised = population.marginalised
        self.n = population.size
        self.hazard = make_hazard(hazard_with_paths(config), self.zones, config.seed,
                                  config.years, fixed_events(config))
        self.hazard.place_households(self.hh.zone_index, population.x, population.y)
        self.graph = build_graph(config.network, self.n, config.seed)
        self.neighbours = NeighbourIndex(self.graph, self.n)
        self.year = 0
        self.prev_state = self._neighbour_state()
        self.current: YearState | None = None
        self.last_agent_columns: dict[str, Any] = {}
        self.last_model_row: dict[str, Any] = {}
        for i in range(self.n):
            HouseholdAgent(self, i)
        #: The policy instruments, in registry order (``config.world.INSTRUMENTS``).
        self.instruments: list[Instrument] = make_instruments(self)
        for instrument in self.instruments:
            instrument.start()
        self._initial_policies_by_score()
        self.world_memory = (
            None if config.memory.engine == "none"
            else WorldMemory(config, self.domain, self.hh.insured, self.hh.elevated, run_dir)
        )
        #: The government and the insurer (None: the experiment's policy settings hold).
        self.institutions: Institutions | None = None
        if experiment.institutions is not None:
            self.institutions = Institutions(self, experiment.institutions, institution_makers)
        self.last_institution_row: dict[str, Any] = {}

    def _initial_policies_by_score(self) -> None:
        """The start's voluntary policies go to the households the maker ranks first.

        Only for a maker that ranks them (``RanksInitialPolicyholders``; the baseline with
        ``initial_policies: by_perception``): within each zone and tenure the count of policies
        stays, the required households keep theirs (``holders_by_score``).
        """
        maker = self.decision_maker
        if not isinstance(maker, RanksInitialPolicyholders):
            return
        scores = maker.initial_policy_scores(range(1, self.n + 1))
        if scores is None:
            return
        hh = self.hh
        required = self.instrument(MandatoryPurchase.name).arrays["insurance_required"]
        hh.insured[...] = holders_by_score(hh.insured, required, zone_tenure_groups(hh),
                                           np.asarray(scores))

    def instrument(self, name: str) -> Instrument:
        """The instrument registered as ``name``."""
        return next(i for i in self.instruments if i.name == name)

    def _neighbour_state(self) -> dict[str, np.ndarray]:
        """End-of-year states neighbours see next year."""
        hh = self.hh
        return {
            "insured": hh.insured & ~hh.relocated,
            "elevated": hh.elevated & ~hh.relocated,
            "relocated": hh.relocated.copy(),
        }

    # ----------------------------------------------------------------------------------------
    # state, for checkpoints
    # ----------------------------------------------------------------------------------------

    def state(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """The model after a completed year: ``(arrays, meta)``.

        ``arrays``: every household array (``HouseholdArrays.arrays``, then each instrument's
        ``arrays``) and what neighbours saw at the end of the year (``prev/<name>``).
        ``meta`` (JSON-able): the year and the states of Mesa's and Python's generators.
        Household memories are not part of it (their size grows with the run): checkpoints
        log ``memory_changes()`` year by year instead. ``restore`` on a freshly built model of
        the same experiment undoes it exactly.
        """
        arrays = self.hh.arrays()
        for instrument in self.instruments:
            arrays.update(instrument.arrays)
        arrays.update({PREV_PREFIX + k: v for k, v in self.prev_state.items()})
        meta = {"year": self.year, "mesa_rng": self.rng.bit_generator.state,
                "python_random": _lists(self.random.getstate())}
        if self.institutions is not None:
            meta["institutions"] = self.institutions.state()
        return arrays, meta

    def memory_changes(self) -> list[list[Any]] | None:
        """What household memories changed since the last call.

        ``WorldMemory.changes``; None without memory.
        """
        return None if self.world_memory is None else self.world_memory.changes()

    def restore(self, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any],
                memory_changes: Iterable[list[list[Any]]] = ()) -> None:
        """Put this freshly built model into a ``state()`` (see there).

        Replaying every ``memory_changes()`` up to it, in order.
        """
        self.hh.load(arrays)
        for instrument in self.instruments:
            instrument.load(arrays)
        self.prev_state = {k[len(PREV_PREFIX):]: np.array(v) for k, v in arrays.items()
                           if k.startswith(PREV_PREFIX)}
        self.year = int(meta["year"])
        self.rng.bit_generator.state = meta["mesa_rng"]
        self.random.setstate(_tuples(meta["python_random"]))
        if self.institutions is not None:
            self.institutions.restore(meta["institutions"])
        if self.world_memory is not None:
            for changes in memory_changes:
                self.world_memory.apply_changes(changes)

    @property
    def memory_store(self) -> EpisodicStore | None:
        """The run's episodic store (``memory.sqlite``; None without memory or run directory)."""
        wm = self.world_memory
        return None if wm is None or wm.writer is None else wm.writer.store

    @property
    def active_index(self) -> np.ndarray:
        """Indices of households that have not relocated (agent-id order)."""
        return np.flatnonzero(~self.hh.relocated)

    # ----------------------------------------------------------------------------------------
    # the yearly loop
    # ----------------------------------------------------------------------------------------

    def step(self) -> None:
        """Simulate one year (phases in docs/ARCHITECTURE.md order)."""
        self.year += 1
        self.begin_year()
        self.hazard_phase()
        self.impacts_phase()
        self.institutions_phase()
        situations = self.perception_phase()
        decisions = self.decision_phase(situations)
        self.execution_phase(decisions)
        self.accounts_phase()
        self.reflection_phase()
        self.collect_phase()

    def begin_year(self) -> None:
        """Put the year's policy in force; snapshot the state households start the year with."""
        change = self._configs[0].policy_change
        self.config = self._configs[int(change is not None and self.year >= change.from_year)]
        idx, hh = self.active_index, self.hh
        debt = hh.debt_usd[idx].copy()
        self.current = YearState(idx, savings_before_usd=hh.savings_usd[idx].copy(),
                                 elevated_before=hh.elevated[idx].copy(),
                                 insured_before=hh.insured[idx].copy(), debt_before_usd=debt,
                                 payment_due_usd=finance.payment_due(
                                     self.config.finance, debt, hh.loan_payment_usd[idx]))
        for instrument in self.instruments:
            instrument.begin_year()

    def hazard_phase(self) -> None:
        """1. Flood depth at each active home (metres, before elevation)."""
        c = self.current
        zone_depths = self.hazard.zone_depths(self.year)
        c.depth_m = self.hazard.household_depths(self.year, self.hh.zone_index)[c.idx]
        c.flood_occurred, c.flooded = bool(np.any(zone_depths > 0)), c.depth_m > 0

    def impacts_phase(self) -> None:
        """2. Damage after elevation, insurance payouts.

        Repairs and their financing (aid, savings, loans, left unrepaired); flood experience
        (``sim.impacts``).
        """
        apply_impacts(self, self.instruments)
        if self.world_memory is not None:
            self.world_memory.record_impacts(self.year, self.current)

    def institutions_phase(self) -> None:
        """2b. The government, then the insurer, decide this year's levers (``sim.institutions``).

        They are the year's settings from here on.
        """
        if self.institutions is not None:
            self.config = self.config.with_settings(self.institutions.decide(self.config))

    def perception_phase(self) -> list[HouseholdSituation]:
        """3. Every action's terms (``sim.quote``) and one frozen situation per active household.

        Agent-id order; ``sim.perception``.
        """
        c, hh, idx = self.current, self.hh, self.current.idx
        c.neighbour_shares = {k: self.neighbours.share(v)[idx]
                              for k, v in self.prev_state.items()}
        c.options = quote(self, self.instruments)
        c.trust_insurance = hh.trust_insurance[idx].copy()
        c.trust_neighbours = hh.trust_neighbours[idx].copy()
        allowed = allowed_actions(c.options)
        recalled = (self.world_memory.perceive(self.year, idx, c.neighbour_shares, allowed)
                    if self.world_memory is not None else None)
        return situations(self, self.instruments, allowed, recalled)

    def decision_phase(self, situations: list[HouseholdSituation]) -> list[Decision]:
        """4. The decision maker decides for the whole batch at once."""
        decisions = list(self.decision_maker.decide(situations))
        expected = [s.agent_id for s in situations]
        got = [d.agent_id for d in decisions]
        if got != expected:
            raise RuntimeError(
                f"decision maker {self.decision_maker.name!r} returned decisions for agents "
                f"{got[:5]}... but was asked about {expected[:5]}... (one per situation, in order)"
            )
        return decisions

    def execution_phase(self, decisions: list[Decision]) -> None:
        """5. Re-check feasibility, execute in agent-id order, pay, lapse, relocate.

        The year's savings and loan payments; forced sales (``sim.execution``).
        """
        execute_decisions(self, self.instruments, decisions, self.default_action)
        c = self.current
        if self.world_memory is not None:
            self.world_memory.record_decisions(self.year, c.idx, decisions, c.executed,
                                               c.feasible, c.premium_usd + c.action_cost_usd)

    def accounts_phase(self) -> None:
        """5b. The institutions settle the year: grants and buyouts paid, premiums and claims."""
        if self.institutions is not None:
            self.institutions.settle()

    def reflection_phase(self) -> None:
        """6. Decision maker's end of year; trust updates; what neighbours see next year."""
        # reflection sees the year's memories before they consolidate
        self.decision_maker.end_year(self.year, self.reflection_targets())
        if self.world_memory is not None:
            self.world_memory.end_year(self.year, self.current.idx)
        update_trust(self.config.trust, self.hh, self.current)
        self.prev_state = self._neighbour_state()

    def reflection_targets(self) -> list[ReflectionTarget]:
        """Active households with a memory, in agent-id order (empty without memory)."""
        wm = self.world_memory
        return [] if wm is None else wm.reflection_targets(self.hh, self.zones,
                                                           self.active_index)

    def release(self) -> None:
        """Let this finished world be garbage-collected.

        Mesa 3.3 numbers agents with a class-level counter keyed by the model
        (``mesa.Agent._ids``), which keeps every model a process ever built alive, households,
        memories and all (mesa/mesa#3179, fixed in Mesa 3.4): a notebook or test process that
        runs many experiments grew with each, and its garbage collector slowed down. The
        runner calls this when a run ends; nothing of the model may be used afterwards
        except what was already read from it.
        """
        ids = getattr(mesa.Agent, "_ids", None)
        if isinstance(ids, dict):  # absent in Mesa >= 3.4, which numbers agents in the model
            ids.pop(self, None)

    def collect_phase(self) -> None:
        """7. The year's rows for ``agents_yearly.csv`` and ``model_yearly.csv``."""
        view = YearView(self.year, self.current, self.hh, self.zones, self.action_ids,
                        self.marginalised)
        self.last_agent_columns = agent_columns(view, {
            k: v for i in self.instruments for k, v in i.report(view).items()})
        self.last_model_row = model_row(view)
        if self.institutions is not None:
            self.last_institution_row = self.institutions.row()


def _lists(value: Any) -> Any:
    """Tuples (Python's generator state) as JSON lists."""
    return [_lists(v) for v in value] if isinstance(value, tuple | list) else value


def _tuples(value: Any) -> Any:
    """JSON lists back to tuples."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value
