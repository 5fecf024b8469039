"""The Mesa flood world: ``FloodModel`` and ``HouseholdAgent``.

One step is one year, in the phases of docs/ARCHITECTURE.md ("Yearly loop"), each a short
method so that memory recording and checkpoints can hook into them. Household state lives in
numpy arrays on the model (``model.hh``), indexed by ``agent.index = agent.unique_id - 1``;
``HouseholdAgent`` is the Mesa agent whose properties read those arrays. This keeps every
per-year computation vectorised (10,000 households x 30 years in seconds) and all state
serialisable (arrays and plain attributes; generators come from ``governed_broker.seeding``).

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

from governed_broker.config.agent_types import AgentTypesConfig
from governed_broker.config.damage import DamageTable, load_damage_table
from governed_broker.config.experiment import ExperimentConfig
from governed_broker.config.institutions import InstitutionsDomain
from governed_broker.config.loader import (
    fixed_events,
    hazard_with_paths,
    load_agent_types,
    load_institutions,
)
from governed_broker.config.world import GroupPolicyConfig
from governed_broker.contracts.columns import AGENT_YEARLY, names
from governed_broker.contracts.columns import model_columns as model_column_table
from governed_broker.contracts.decision import (
    Decision,
    DecisionMaker,
    HouseholdSituation,
    ReflectionTarget,
)
from governed_broker.contracts.effects import traits_of
from governed_broker.contracts.institutions import InstitutionMaker
from governed_broker.memory.episodic import EpisodicStore
from governed_broker.memory.household import HouseholdMemory
from governed_broker.seeding import child_rng
from governed_broker.sim import finance, money
from governed_broker.sim.buyout import buyout_offers, eligible_for_buyout
from governed_broker.sim.damage import damages_usd
from governed_broker.sim.effects import OptionBatch, Priced, execute, price
from governed_broker.sim.fastbuild import build
from governed_broker.sim.group_policy import aid_eligible, capped_payouts, new_certificates
from governed_broker.sim.hazard import make_hazard
from governed_broker.sim.households import HouseholdArrays
from governed_broker.sim.institutions import Institutions
from governed_broker.sim.mandatory import draw_required, lender_adds_insurance, with_insurance
from governed_broker.sim.memory_bridge import WorldMemory
from governed_broker.sim.network import NeighbourIndex, build_graph
from governed_broker.sim.population import Population, load_population
from governed_broker.sim.reporters import YearView, agent_columns, model_row
from governed_broker.sim.subsidy import subsidy_offers
from governed_broker.sim.trust import update_trust
from governed_broker.sim.year_state import YearState

#: Name prefix of what neighbours saw last year in ``FloodModel.state()``.
PREV_PREFIX = "prev/"

#: Columns of ``agents_yearly.csv`` (``governed_broker.contracts.columns``).
AGENT_COLUMNS = names(AGENT_YEARLY)


def model_columns(action_ids: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Headers of ``model_yearly.csv`` for a domain: one ``n_<action>`` count per action id
    of ``agent_types.yaml``, in its order, between the fixed columns."""
    return names(model_column_table(action_ids))


class HouseholdAgent(mesa.Agent):
    """A household (owner or renter); its state is in the model's arrays at ``self.index``."""

    def __init__(self, model: FloodModel, index: int) -> None:
        super().__init__(model)
        self.index = index

    def _get(self, name: str) -> Any:
        return getattr(self.model.hh, name)[self.index].item()

    @property
    def tenure(self) -> str:
        """``"owner"`` or ``"renter"``."""
        return "owner" if self._get("is_owner") else "renter"

    @property
    def flood_zone(self) -> str:
        """Zone name."""
        return self.model.zones[self._get("zone_index")]

    @property
    def active(self) -> bool:
        """False once the household has relocated."""
        return not self._get("relocated")

    @property
    def insured(self) -> bool:
        """Whether a policy is in force (for this year's flood, or bought for next year's)."""
        return bool(self._get("insured"))

    @property
    def elevated(self) -> bool:
        """Whether the home is elevated."""
        return bool(self._get("elevated"))

    @property
    def savings_usd(self) -> float:
        """Current savings (dollars; negative means debt)."""
        return float(self._get("savings_usd"))

    @property
    def memory(self) -> HouseholdMemory | None:
        """This household's memory (None when the experiment's memory engine is ``none``)."""
        wm = self.model.world_memory
        return None if wm is None else wm.memory_of(self.unique_id)


class FloodModel(mesa.Model):
    """Households facing yearly floods and deciding how to adapt.

    Args:
        config: The validated experiment.
        decision_maker: Decides for every active household each year.
        rng: Seed of Mesa's generator (defaults to ``config.seed``).
        agent_types: The action domain (loaded from ``config.agent_types`` when omitted).
        run_dir: The run's working directory, where household memories are stored
            (``memory.sqlite``); None keeps memories in this process only.
        institutions_domain: The institutions' domain (loaded from
            ``config.institutions.domain`` when omitted; unused without institutions).
        institution_makers: Makers of the institutions an LLM decides for (the others get
            their rule maker; ``sim.institutions``).
    """

    def __init__(
        self,
        config: ExperimentConfig,
        decision_maker: DecisionMaker,
        *,
        rng: int | None = None,
        agent_types: AgentTypesConfig | None = None,
        run_dir: Path | None = None,
        institutions_domain: InstitutionsDomain | None = None,
        institution_makers: Mapping[str, InstitutionMaker] | None = None,
    ) -> None:
        super().__init__(rng=config.seed if rng is None else rng)
        self.config = config
        #: The settings before and from ``policy_change.from_year`` (``config.policy``).
        self._configs = (config, config.with_policy_change())
        self.seed = config.seed
        self.decision_maker = decision_maker
        self.domain = agent_types or load_agent_types(config.resolve_path(config.agent_types))
        self.action_ids = list(self.domain.actions)
        self.model_columns = model_columns(self.action_ids)
        self.default_action = self.domain.default_action
        self.damage_table: DamageTable = load_damage_table(config.resolve_path(config.damage.table))
        population = load_population(config.population, config.seed, config.resolve_path)
        self.zones = sorted(set(population.zone.tolist()))
        self.hh = self._arrays_from(population)
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
        self.world_memory = (
            None if config.memory.engine == "none"
            else WorldMemory(config, self.domain, self.hh.insured, self.hh.elevated, run_dir)
        )
        #: The government and the insurer (None: the experiment's policy settings hold).
        self.institutions: Institutions | None = None
        if config.institutions is not None:
            domain = institutions_domain or load_institutions(
                config.resolve_path(config.institutions.domain))
            self.institutions = Institutions(self, domain, institution_makers)
        self.last_institution_row: dict[str, Any] = {}

    # ----------------------------------------------------------------------------------------
    # set-up helpers
    # ----------------------------------------------------------------------------------------

    def _arrays_from(self, pop: Population) -> HouseholdArrays:
        zone_lookup = {z: i for i, z in enumerate(self.zones)}
        return HouseholdArrays(
            is_owner=pop.is_owner.astype(bool),
            zone_index=np.array([zone_lookup[z] for z in pop.zone], dtype=np.int64),
            income_usd=pop.income_usd.astype(float),
            savings_usd=pop.savings_usd.astype(float),
            structure_value_usd=pop.structure_value_usd.astype(float),
            contents_value_usd=pop.contents_value_usd.astype(float),
            elevated=pop.elevated.astype(bool),
            insured=pop.insured.astype(bool),
            relocated=np.zeros(pop.size, dtype=bool),
            trust_insurance=pop.trust_insurance.astype(float),
            trust_neighbours=pop.trust_neighbours.astype(float),
            years_since_flood=np.full(pop.size, np.nan),
            floods_experienced=np.zeros(pop.size, dtype=np.int64),
            debt_usd=np.zeros(pop.size),
            loan_payment_usd=np.zeros(pop.size),
            unrepaired_usd=np.zeros(pop.size),
            sold=np.zeros(pop.size, dtype=bool),
            insurance_required=draw_required(self.config.insurance.mandatory_purchase, pop.zone,
                                             pop.is_owner, self.config.seed),
            group_policy_years=np.zeros(pop.size, dtype=np.int64),
            group_insured=np.zeros(pop.size, dtype=bool),
            aid_requires_insurance=np.zeros(pop.size, dtype=bool),
            flood_payments=np.zeros(pop.size, dtype=np.int64),
            large_flood_payments=np.zeros(pop.size, dtype=np.int64),
            taken_once={
                a: np.zeros(pop.size, dtype=bool)
                for a, spec in self.domain.actions.items() if spec.duration == "once"
            },
        )

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

        ``arrays``: every household array (``HouseholdArrays.arrays``) and what neighbours
        saw at the end of the year (``prev/<name>``). ``meta`` (JSON-able): the year and the
        states of Mesa's and Python's generators. Household memories are not part of it (their
        size grows with the run): checkpoints log ``memory_changes()`` year by year instead.
        ``restore`` on a freshly built model of the same experiment undoes it exactly.
        """
        arrays = self.hh.arrays()
        arrays.update({PREV_PREFIX + k: v for k, v in self.prev_state.items()})
        meta = {"year": self.year, "mesa_rng": self.rng.bit_generator.state,
                "python_random": _lists(self.random.getstate())}
        if self.institutions is not None:
            meta["institutions"] = self.institutions.state()
        return arrays, meta

    def memory_changes(self) -> list[list[Any]] | None:
        """What household memories changed since the last call (``WorldMemory.changes``;
        None without memory)."""
        return None if self.world_memory is None else self.world_memory.changes()

    def restore(self, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any],
                memory_changes: Iterable[list[list[Any]]] = ()) -> None:
        """Put this freshly built model into a ``state()`` (see there), replaying every
        ``memory_changes()`` up to it, in order."""
        self.hh.load(arrays)
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

    def hazard_phase(self) -> None:
        """1. Flood depth at each active home (metres, before elevation)."""
        c = self.current
        zone_depths = self.hazard.zone_depths(self.year)
        c.depth_m = self.hazard.household_depths(self.year, self.hh.zone_index)[c.idx]
        c.flood_occurred, c.flooded = bool(np.any(zone_depths > 0)), c.depth_m > 0

    def impacts_phase(self) -> None:
        """2. Damage after elevation, insurance payouts, repairs and their financing (aid,
        savings, loans, left unrepaired); flood experience."""
        c, hh, idx = self.current, self.hh, self.current.idx
        c.effective_depth_m = np.maximum(0.0, c.depth_m - np.where(
            c.elevated_before, self.config.elevation.height_m, 0.0))
        c.damage_structure_usd, c.damage_contents_usd = damages_usd(
            self.damage_table, c.effective_depth_m, hh.structure_value_usd[idx],
            hh.contents_value_usd[idx])
        pay_s, pay_c = money.payouts_usd(self.config.insurance, c.damage_structure_usd,
                                         c.damage_contents_usd, hh.is_owner[idx],
                                         c.insured_before)
        group = self.config.finance.aid.group_policy
        if group is not None:
            pay_s, pay_c = capped_payouts(group.coverage_usd, pay_s, pay_c,
                                          hh.group_insured[idx])
        c.payout_usd = pay_s + pay_c
        c.out_of_pocket_usd = c.damage_usd - c.payout_usd
        aid_draw = child_rng(self.seed, "finance", self.year, "aid").random(self.n)[idx]
        eligible = aid_eligible(group, hh.aid_requires_insurance[idx], c.insured_before)
        c.repairs = repairs = finance.finance_repairs(
            self.config.finance, c.damage_structure_usd - pay_s, c.damage_contents_usd - pay_c,
            hh.savings_usd[idx], hh.income_usd[idx], c.payment_due_usd, aid_draw, eligible)
        self._aid_certificates(group, repairs.aid_usd)
        self._count_flood_payments(repairs)
        hh.savings_usd[idx] -= repairs.from_savings_usd
        hh.structure_value_usd[idx] -= repairs.unrepaired_structure_usd
        hh.contents_value_usd[idx] -= repairs.unrepaired_contents_usd
        hh.unrepaired_usd[idx] += repairs.unrepaired_structure_usd
        ysf = hh.years_since_flood[idx] + 1.0
        hh.years_since_flood[idx] = np.where(c.flooded, 0.0, ysf)
        hh.floods_experienced[idx] += c.flooded
        if self.world_memory is not None:
            self.world_memory.record_impacts(self.year, c)

    def _count_flood_payments(self, repairs: finance.Repairs) -> None:
        """Add this year's claim, aid grant and disaster loan to each home's flood payments
        (counted only where the banded premiums have a loss-history rule)."""
        prp = self.config.insurance.preferred_risk
        if prp is None or prp.loss_history is None:
            return
        c, hh = self.current, self.hh
        paid, large = money.flood_payments(prp.loss_history.large_payment_usd, c.payout_usd,
                                           repairs.aid_usd, repairs.loan_usd)
        hh.flood_payments[c.idx] += paid
        hh.large_flood_payments[c.idx] += large

    def _aid_certificates(self, group: GroupPolicyConfig | None, aid_usd: np.ndarray) -> None:
        """The group policy's consequences of this year's aid (``sim.group_policy``): new
        certificates and the requirement to keep insurance."""
        c, hh, idx = self.current, self.hh, self.current.idx
        if group is None:
            c.certificate_premium_usd = np.zeros(len(idx))
            return
        in_zones = self._in_zones(idx, group.zones)
        given = new_certificates(group, in_zones, aid_usd, c.insured_before,
                                 hh.aid_requires_insurance[idx])
        hh.group_policy_years[idx] = np.where(given, group.term_years,
                                              hh.group_policy_years[idx])
        c.certificate_premium_usd = np.where(given, group.premium_usd, 0.0)
        hh.aid_requires_insurance[idx] |= in_zones & (aid_usd > 0.0)

    def institutions_phase(self) -> None:
        """2b. The government, then the insurer, decide this year's levers (``sim.institutions``);
        they are the year's settings from here on."""
        if self.institutions is not None:
            self.config = self.config.with_settings(self.institutions.decide(self.config))

    def accounts_phase(self) -> None:
        """5b. The institutions settle the year: grants and buyouts paid, premiums and claims."""
        if self.institutions is not None:
            self.institutions.settle()

    def expected_payouts_usd(self, idx: np.ndarray) -> np.ndarray:
        """Expected annual payout of a policy on each home as it stands (dollars; the hazard
        map's annual chance times the payout of a typical flood of the zone)."""
        hh = self.hh
        return OptionBatch(
            self.config, self.damage_table, hh.is_owner[idx], hh.structure_value_usd[idx],
            hh.contents_value_usd[idx], hh.elevated[idx],
            self.hazard.typical_depth_m[hh.zone_index[idx]],
            self.hazard.probability[hh.zone_index[idx]]).expected_payout_usd

    def _in_zones(self, idx: np.ndarray, zones: list[str]) -> np.ndarray:
        """Which of the households ``idx`` live in one of ``zones``."""
        return np.isin(np.asarray(self.zones, dtype=object)[self.hh.zone_index[idx]], zones)

    def _preferred(self, idx: np.ndarray) -> np.ndarray:
        """Households offered the banded premiums: in a zone of ``insurance.preferred_risk``
        and, with its ``loss_history`` rule, not made ineligible by their flood payments."""
        prp = self.config.insurance.preferred_risk
        if prp is None:
            return np.zeros(len(idx), dtype=bool)
        offered = self._in_zones(idx, prp.zones)
        if prp.loss_history is not None:
            offered &= ~money.preferred_ineligible(prp.loss_history, self.hh.flood_payments[idx],
                                                   self.hh.large_flood_payments[idx])
        return offered

    def action_options(self, idx: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
        """Per action: ``cost`` and ``premium`` (dollars), ``allowed`` and ``affordable``
        masks, ``loss``, ``lender_placed``.

        ``loss`` is the out-of-pocket loss of a typical flood of the household's zone (the
        hazard map's typical depth) next year if the household takes the action.
        ``lender_placed``: taking the action, the household would be insured by its lender's
        requirement (``sim.mandatory``; cost, premium and loss then include the policy).
        """
        hh, c = self.hh, self.current
        owner = hh.is_owner[idx]
        c.certificate = certificate = hh.group_policy_years[idx] > 0
        c.subsidy_offered = self._subsidy_offers(idx)
        c.buyout_offered, c.buyout_price_usd = self._buyout_offers(idx)
        batch = OptionBatch(
            self.config, self.damage_table, owner, hh.structure_value_usd[idx],
            hh.contents_value_usd[idx], hh.elevated[idx],
            self.hazard.typical_depth_m[hh.zone_index[idx]],
            self.hazard.probability[hh.zone_index[idx]], certificate=certificate,
            subsidised=c.subsidy_offered, buyout_offered=c.buyout_offered,
            buyout_price_usd=c.buyout_price_usd, preferred=self._preferred(idx))
        effects = {spec.effect for spec in self.domain.actions.values()}
        priced = {e: price(e, batch) for e in effects}
        placed = {e: np.zeros(len(idx), dtype=bool) for e in effects}
        required = hh.insurance_required[idx] & ~certificate
        if required.any():
            for e in filter(lender_adds_insurance, effects):
                insured = price(with_insurance(e), batch)
                placed[e] = required & finance.affordable(
                    self.config.finance, insured.cost_usd, hh.savings_usd[idx],
                    hh.income_usd[idx], c.payment_due_usd)
                priced[e] = _where(placed[e], insured, priced[e])
        out: dict[str, dict[str, np.ndarray]] = {}
        for a, spec in self.domain.actions.items():
            p = priced[spec.effect]
            allowed = self._open_by_tenure(a, idx) & p.open_to
            affordable = finance.affordable(self.config.finance, p.cost_usd, hh.savings_usd[idx],
                                            hh.income_usd[idx], c.payment_due_usd)
            out[a] = {"cost": p.cost_usd, "premium": p.premium_usd, "allowed": allowed,
                      "affordable": affordable, "loss": p.loss_usd,
                      "lender_placed": placed[spec.effect]}
        c.typical_damage_usd = batch.damage_here_usd()
        protective = [a for a, spec in self.domain.actions.items()
                      if traits_of(spec.effect).protective]
        c.could_protect = np.zeros(len(idx), dtype=bool)
        for a in protective:
            c.could_protect |= out[a]["allowed"] & out[a]["affordable"]
        return out

    def _open_by_tenure(self, action: str, idx: np.ndarray) -> np.ndarray:
        """Households the action is open to by its tenure and, if taken once, not yet taken."""
        owner = self.hh.is_owner[idx]
        spec = self.domain.actions[action]
        allowed = np.zeros(len(idx), dtype=bool)
        for tenure in spec.tenure:
            allowed |= owner if tenure == "owner" else ~owner
        if action in self.hh.taken_once:
            allowed &= ~self.hh.taken_once[action][idx]
        return allowed

    def _subsidy_offers(self, idx: np.ndarray) -> np.ndarray:
        """Households offered the elevation grant this year (``sim.subsidy``): those whose home
        is not elevated and to whom an elevating action is open."""
        eligible = np.zeros(len(idx), dtype=bool)
        for a, spec in self.domain.actions.items():
            if traits_of(spec.effect).elevates:
                eligible |= self._open_by_tenure(a, idx)
        eligible &= ~self.hh.elevated[idx]
        rng = child_rng(self.seed, "elevation_subsidy", self.year)
        return subsidy_offers(self.config.elevation, eligible, self.hh.income_usd[idx], rng)

    def buyout_candidates(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Households the buyout programme's rules make eligible this year and the price it
        would offer each (``sim.buyout``): owners with repetitive or substantial losses to whom
        an action that sells to the programme is open; none without a programme."""
        hh, programme = self.hh, self.config.buyout
        if programme is None:
            return np.zeros(len(idx), dtype=bool), np.zeros(len(idx))
        may_sell = np.zeros(len(idx), dtype=bool)
        for a, spec in self.domain.actions.items():
            if traits_of(spec.effect).bought_out:
                may_sell |= self._open_by_tenure(a, idx)
        pre_flood = hh.structure_value_usd[idx] + hh.unrepaired_usd[idx]
        eligible = may_sell & eligible_for_buyout(
            programme, hh.is_owner[idx], hh.floods_experienced[idx],
            self.current.damage_structure_usd, pre_flood)
        return eligible, programme.price_share * pre_flood

    def _buyout_offers(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Households offered a buyout this year and the price offered: the eligible ones
        (``buyout_candidates``) the programme's budget and allocation reach."""
        programme = self.config.buyout
        eligible, offer_usd = self.buyout_candidates(idx)
        if programme is None:
            return eligible, offer_usd
        rng = child_rng(self.seed, "buyout", self.year)
        offered = buyout_offers(programme, eligible, offer_usd, self.hh.income_usd[idx], rng)
        return offered, np.where(offered, offer_usd, 0.0)

    def perception_phase(self) -> list[HouseholdSituation]:
        """3. One frozen situation per active household (agent-id order)."""
        c, hh, idx = self.current, self.hh, self.current.idx
        c.neighbour_shares = {k: self.neighbours.share(v)[idx]
                              for k, v in self.prev_state.items()}
        c.options = self.action_options(idx)
        c.trust_insurance = hh.trust_insurance[idx].copy()
        c.trust_neighbours = hh.trust_neighbours[idx].copy()
        allowed = self._allowed_actions()
        recalled = (self.world_memory.perceive(self.year, idx, c.neighbour_shares, allowed)
                    if self.world_memory is not None else None)
        acts = self.action_ids
        loss, premium = (np.column_stack([c.options[a][key] for a in acts]).tolist()
                         for key in ("loss", "premium"))
        depth = self.hazard.typical_depth_m[hh.zone_index[idx]].tolist()
        damage = c.typical_damage_usd.tolist()
        required = hh.insurance_required[idx].tolist()
        aid_terms = self._aid_terms(idx)
        offer = c.buyout_price_usd.tolist()
        room = finance.spending_room_usd(self.config.finance, hh.savings_usd[idx],
                                         hh.income_usd[idx], c.payment_due_usd).tolist()
        situations = []
        for j, fields in enumerate(self._stated_facts()):
            memory = None if recalled is None else recalled[j]
            fields.update(allowed_actions=allowed[j],
                          memories=() if memory is None else memory["memories"],
                          extra=self._extra({
                              "loss_if_flood_usd": dict(zip(acts, loss[j], strict=True)),
                              "premium_usd": dict(zip(acts, premium[j], strict=True)),
                              "typical_flood": {"depth_m": depth[j], "damage_usd": damage[j]},
                              "spending_room_usd": room[j],
                              "insurance_required": required[j],
                              **aid_terms[j],
                              # only with an offer: situations without one stay as they were
                              **({"buyout_offer_usd": offer[j]} if offer[j] else {}),
                          }, memory))
            situations.append(build(HouseholdSituation, fields))
        return situations

    def _aid_terms(self, idx: np.ndarray) -> list[dict[str, Any]]:
        """Per active household, what the group policy holds for it (``sim.group_policy``):
        ``group_policy`` (years of floods its certificate still covers and the coverage) and
        ``aid_requires_insurance``; empty where neither applies, so that those situations stay
        as they were."""
        group = self.config.finance.aid.group_policy
        if group is None:
            return [{} for _ in idx]
        years = self.hh.group_policy_years[idx].tolist()
        keep = (self.hh.aid_requires_insurance[idx] & group.keep_insured).tolist()
        return [{**({"group_policy": {"years": n, "coverage_usd": group.coverage_usd}}
                    if n else {}),
                 **({"aid_requires_insurance": True} if k else {})}
                for n, k in zip(years, keep, strict=True)]

    def _allowed_actions(self) -> list[tuple[str, ...]]:
        """Per active household, the actions open to it (in the domain's order)."""
        acts = self.action_ids
        allowed = np.column_stack([self.current.options[a]["allowed"] for a in acts])
        # a few distinct allowed sets: build each tuple once
        patterns, key = np.unique(allowed, axis=0, return_inverse=True)
        tuples = [tuple(a for a, ok in zip(acts, row, strict=True) if ok)
                  for row in patterns.tolist()]
        return [tuples[k] for k in key.reshape(-1).tolist()]

    def _stated_facts(self) -> list[dict[str, Any]]:
        """Per active household, the ``HouseholdSituation`` fields the world states, by name."""
        c, hh, idx, acts = self.current, self.hh, self.current.idx, self.action_ids
        columns = {
            "agent_id": idx + 1, "tenure": np.where(hh.is_owner[idx], "owner", "renter"),
            "flood_zone": np.asarray(self.zones, dtype=object)[hh.zone_index[idx]],
            "income_usd": hh.income_usd[idx], "savings_usd": hh.savings_usd[idx],
            "structure_value_usd": hh.structure_value_usd[idx],
            "contents_value_usd": hh.contents_value_usd[idx],
            "elevated": c.elevated_before, "insured": c.insured_before, "flooded": c.flooded,
            "depth_m": c.depth_m, "damage_usd": c.damage_usd, "payout_usd": c.payout_usd,
            "floods_experienced": hh.floods_experienced[idx],
            "flood_probability": self.hazard.probability[hh.zone_index[idx]],
            "trust_insurance": c.trust_insurance, "trust_neighbours": c.trust_neighbours,
            "debt_usd": c.debt_before_usd + c.repairs.loan_usd,
            "unrepaired_damage_usd": hh.unrepaired_usd[idx],
        }
        values = [v.tolist() for v in columns.values()]
        share_names = list(c.neighbour_shares)
        shares = zip(*(v.tolist() for v in c.neighbour_shares.values()), strict=True)
        cost, afford = (np.column_stack([c.options[a][key] for a in acts]).tolist()
                        for key in ("cost", "affordable"))
        values += [
            [None if np.isnan(v) else int(v) for v in hh.years_since_flood[idx].tolist()],
            [dict(zip(share_names, s, strict=True)) for s in shares],
            [dict(zip(acts, row, strict=True)) for row in cost],
            [dict(zip(acts, row, strict=True)) for row in afford],
        ]
        names = [*columns, "years_since_flood", "neighbour_shares", "action_costs_usd",
                 "affordable", "year"]
        year = self.year
        return [dict(zip(names, (*row, year), strict=True))
                for row in zip(*values, strict=True)]

    @staticmethod
    def _extra(extra: dict[str, Any], recalled: dict[str, Any] | None) -> dict[str, Any]:
        if recalled is not None:
            extra["knowledge_facts"] = recalled["knowledge_facts"]
            extra["heuristics"] = recalled["heuristics"]
        return extra

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
        """5. Re-check feasibility, execute in agent-id order, pay, lapse, relocate; the
        year's savings and loan payments; forced sales.

        Each household's execution touches only its own state, so the vectorised update below
        equals executing the decisions one by one in agent-id order.
        """
        c, hh, idx = self.current, self.hh, self.current.idx
        opt = c.options
        pos = {a: k for k, a in enumerate(self.action_ids)}
        wanted = np.array([pos.get(d.action, -1) for d in decisions], dtype=np.int64)
        known = wanted >= 0
        feasible_m = np.column_stack(
            [opt[a]["allowed"] & opt[a]["affordable"] for a in self.action_ids])
        rows = np.arange(len(idx))
        feasible = known & feasible_m[rows, np.where(known, wanted, 0)]
        executed = np.where(feasible, wanted, pos[self.default_action])
        cost_m, premium_m, placed_m = (np.column_stack([opt[a][key] for a in self.action_ids])
                                       for key in ("cost", "premium", "lender_placed"))
        done = execute([self.domain.actions[a].effect for a in self.action_ids], executed,
                       cost_m[rows, executed], premium_m[rows, executed])
        c.lender_placed = placed_m[rows, executed]
        c.subsidy_usd = np.where(done.elevated & c.subsidy_offered,
                                 money.elevation_grant_usd(self.config.elevation), 0.0)
        c.buyout_usd = np.where(done.bought_out, c.buyout_price_usd, 0.0)
        hh.elevated[idx] |= done.elevated
        own_policy = done.insured | c.lender_placed  # un-renewed insurance lapses
        certified = (hh.group_policy_years[idx] > 0) & ~own_policy & ~done.relocated
        hh.insured[idx] = own_policy | certified
        hh.group_insured[idx] = certified
        # a year of the certificate's term is used; an own policy ends it
        hh.group_policy_years[idx] = np.where(certified, hh.group_policy_years[idx] - 1, 0)
        hh.relocated[idx] |= done.relocated
        for a, taken in hh.taken_once.items():
            taken[idx] |= executed == pos[a]
        self._year_end_finance(done.premium_usd + done.action_cost_usd, done.relocated)
        c.decisions, c.feasible = decisions, feasible
        c.executed = np.asarray(self.action_ids, dtype=object)[executed]
        c.premium_usd, c.action_cost_usd = done.premium_usd, done.action_cost_usd
        if self.world_memory is not None:
            self.world_memory.record_decisions(self.year, idx, decisions, c.executed, feasible,
                                               c.premium_usd + c.action_cost_usd)

    def _year_end_finance(self, spent_usd: np.ndarray, left: np.ndarray) -> None:
        """Savings, loan payments and new loans; households that must sell leave."""
        c, hh, idx, fin = self.current, self.hh, self.current.idx, self.config.finance
        cash = finance.year_end(fin, hh.savings_usd[idx], hh.income_usd[idx], spent_usd,
                                c.debt_before_usd, hh.loan_payment_usd[idx], c.payment_due_usd,
                                c.repairs)
        hh.savings_usd[idx] = cash.savings_usd
        hh.debt_usd[idx], hh.loan_payment_usd[idx] = cash.debt_usd, cash.payment_usd
        sold = ~left & finance.forced_sale(fin, hh.unrepaired_usd[idx],
                                           hh.structure_value_usd[idx], cash.savings_usd,
                                           hh.is_owner[idx])
        hh.sold[idx] |= sold
        hh.relocated[idx] |= sold
        hh.insured[idx] &= ~sold  # the policy ends with the sale
        c.forced_sale = sold

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
        if self.world_memory is None:
            return []
        hh = self.hh
        return [ReflectionTarget(i + 1, "owner" if hh.is_owner[i] else "renter",
                                 self.zones[hh.zone_index[i]],
                                 self.world_memory.memory_of(i + 1).engine)
                for i in self.active_index.tolist()]

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
        self.last_agent_columns = agent_columns(view)
        self.last_model_row = model_row(view)
        if self.institutions is not None:
            self.last_institution_row = self.institutions.row()


def _where(mask: np.ndarray, chosen: Priced, other: Priced) -> Priced:
    """``chosen``'s prices where ``mask`` holds, ``other``'s elsewhere (open as ``other``)."""
    return Priced(cost_usd=np.where(mask, chosen.cost_usd, other.cost_usd),
                  premium_usd=np.where(mask, chosen.premium_usd, other.premium_usd),
                  loss_usd=np.where(mask, chosen.loss_usd, other.loss_usd),
                  open_to=other.open_to)


def _lists(value: Any) -> Any:
    """Tuples (Python's generator state) as JSON lists."""
    return [_lists(v) for v in value] if isinstance(value, tuple | list) else value


def _tuples(value: Any) -> Any:
    """JSON lists back to tuples."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value
