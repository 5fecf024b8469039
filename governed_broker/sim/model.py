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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mesa
import numpy as np

from governed_broker.config.agent_types import AgentTypesConfig
from governed_broker.config.damage import DamageTable, load_damage_table
from governed_broker.config.experiment import ExperimentConfig
from governed_broker.config.loader import fixed_events, load_agent_types
from governed_broker.contracts.columns import AGENT_YEARLY, names
from governed_broker.contracts.columns import model_columns as model_column_table
from governed_broker.contracts.decision import (
    Decision,
    DecisionMaker,
    HouseholdSituation,
    ReflectionTarget,
)
from governed_broker.memory.household import HouseholdMemory
from governed_broker.sim import money
from governed_broker.sim.damage import damages_usd
from governed_broker.sim.effects import WORLD_EFFECTS, OptionBatch, execute
from governed_broker.sim.fastbuild import build
from governed_broker.sim.hazard import make_hazard
from governed_broker.sim.memory_bridge import WorldMemory
from governed_broker.sim.network import NeighbourIndex, build_graph
from governed_broker.sim.population import Population, load_population

#: Columns of ``agents_yearly.csv`` (``governed_broker.contracts.columns``).
AGENT_COLUMNS = names(AGENT_YEARLY)


def model_columns(action_ids: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Headers of ``model_yearly.csv`` for a domain: one ``n_<action>`` count per action id
    of ``agent_types.yaml``, in its order, between the fixed columns."""
    return names(model_column_table(action_ids))


@dataclass
class HouseholdArrays:
    """The state of every household, one entry per household (index = agent id - 1)."""

    is_owner: np.ndarray
    zone_index: np.ndarray
    income_usd: np.ndarray
    savings_usd: np.ndarray
    structure_value_usd: np.ndarray
    contents_value_usd: np.ndarray
    elevated: np.ndarray
    insured: np.ndarray  # policy in force for this year's flood
    relocated: np.ndarray
    trust_insurance: np.ndarray
    trust_neighbours: np.ndarray
    years_since_flood: np.ndarray  # float; NaN = never flooded
    floods_experienced: np.ndarray
    taken_once: dict[str, np.ndarray] = field(default_factory=dict)


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
    """

    def __init__(
        self,
        config: ExperimentConfig,
        decision_maker: DecisionMaker,
        *,
        rng: int | None = None,
        agent_types: AgentTypesConfig | None = None,
        run_dir: Path | None = None,
    ) -> None:
        super().__init__(rng=config.seed if rng is None else rng)
        self.config = config
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
        self.n = population.size
        self.hazard = make_hazard(config.hazard, self.zones, config.seed, config.years,
                                  fixed_events(config))
        self.graph = build_graph(config.network, self.n, config.seed)
        self.neighbours = NeighbourIndex(self.graph, self.n)
        self.year = 0
        self.prev_state = self._neighbour_state()
        self.current: dict[str, Any] = {}
        self.last_agent_columns: dict[str, Any] = {}
        self.last_model_row: dict[str, Any] = {}
        for i in range(self.n):
            HouseholdAgent(self, i)
        self.world_memory = (
            None if config.memory.engine == "none"
            else WorldMemory(config, self.domain, self.hh.insured, self.hh.elevated, run_dir)
        )

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
        situations = self.perception_phase()
        decisions = self.decision_phase(situations)
        self.execution_phase(decisions)
        self.reflection_phase()
        self.collect_phase()

    def begin_year(self) -> None:
        """Snapshot the state households start the year with."""
        idx = self.active_index
        hh = self.hh
        self.current = {
            "idx": idx,
            "savings_before": hh.savings_usd[idx].copy(),
            "elevated_before": hh.elevated[idx].copy(),
            "insured_before": hh.insured[idx].copy(),
        }

    def hazard_phase(self) -> None:
        """1. Flood depth at each active home (metres, before elevation)."""
        idx = self.current["idx"]
        zone_depths = self.hazard.zone_depths(self.year)
        depth = self.hazard.household_depths(self.year, self.hh.zone_index)[idx]
        self.current.update(
            flood_occurred=bool(np.any(zone_depths > 0)), depth=depth, flooded=depth > 0
        )

    def impacts_phase(self) -> None:
        """2. Damage after elevation, insurance payouts, savings; flood experience."""
        c, hh, idx = self.current, self.hh, self.current["idx"]
        eff = np.maximum(0.0, c["depth"] - np.where(
            c["elevated_before"], self.config.elevation.height_m, 0.0))
        d_s, d_c = damages_usd(
            self.damage_table, eff, hh.structure_value_usd[idx], hh.contents_value_usd[idx]
        )
        payout = money.payout_usd(
            self.config.insurance, d_s, d_c, hh.is_owner[idx], c["insured_before"]
        )
        out_of_pocket = d_s + d_c - payout
        hh.savings_usd[idx] -= out_of_pocket
        flooded = c["flooded"]
        ysf = hh.years_since_flood[idx] + 1.0
        hh.years_since_flood[idx] = np.where(flooded, 0.0, ysf)
        hh.floods_experienced[idx] += flooded
        c.update(effective_depth=eff, damage_structure=d_s, damage_contents=d_c,
                 payout=payout, out_of_pocket=out_of_pocket)
        if self.world_memory is not None:
            self.world_memory.record_impacts(self.year, idx, c)

    def action_options(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        """Per action: out-of-pocket cost, allowed and affordable masks, loss if flooded.

        ``loss_if_flood`` is the out-of-pocket loss of a typical flood of the household's zone
        (zone median / mean scheduled depth) next year if the household takes the action.
        """
        hh = self.hh
        owner, savings = hh.is_owner[idx], hh.savings_usd[idx]
        batch = OptionBatch(
            self.config, self.damage_table, owner, hh.structure_value_usd[idx],
            hh.contents_value_usd[idx], hh.elevated[idx],
            self.hazard.typical_depth_m[hh.zone_index[idx]])
        priced = {e: (WORLD_EFFECTS[e].cost_usd(batch), WORLD_EFFECTS[e].loss_if_flood_usd(batch),
                      WORLD_EFFECTS[e].open_to(batch))
                  for e in {spec.effect for spec in self.domain.actions.values()}}
        out: dict[str, dict[str, np.ndarray]] = {}
        for a, spec in self.domain.actions.items():
            cost, lost, open_to = priced[spec.effect]
            allowed = np.zeros(len(idx), dtype=bool)
            for tenure in spec.tenure:
                allowed |= owner if tenure == "owner" else ~owner
            allowed &= open_to
            if a in hh.taken_once:
                allowed &= ~hh.taken_once[a][idx]
            out[a] = {"cost": cost, "allowed": allowed,
                      "affordable": money.affordable(cost, savings), "loss": lost}
        return {"actions": out}

    def perception_phase(self) -> list[HouseholdSituation]:
        """3. One frozen situation per active household (agent-id order)."""
        c, hh, idx = self.current, self.hh, self.current["idx"]
        shares = {k: self.neighbours.share(v)[idx] for k, v in self.prev_state.items()}
        options = self.action_options(idx)
        c.update(options=options, shares=shares,
                 trust_insurance=hh.trust_insurance[idx].copy(),
                 trust_neighbours=hh.trust_neighbours[idx].copy())
        acts = self.action_ids
        opt = options["actions"]
        cost = np.column_stack([opt[a]["cost"] for a in acts]).tolist()
        allowed = np.column_stack([opt[a]["allowed"] for a in acts])
        # a few distinct allowed sets: build each tuple once
        patterns, allowed_key = np.unique(allowed, axis=0, return_inverse=True)
        allowed_key = allowed_key.reshape(-1).tolist()
        allowed_tuples = [tuple(a for a, ok in zip(acts, row, strict=True) if ok)
                          for row in patterns.tolist()]
        afford = np.column_stack([opt[a]["affordable"] for a in acts]).tolist()
        loss = np.column_stack([opt[a]["loss"] for a in acts]).tolist()
        prob = self.hazard.probability[hh.zone_index[idx]].tolist()
        ysf = hh.years_since_flood[idx]
        ysf_list = [None if np.isnan(v) else int(v) for v in ysf.tolist()]
        cols = [x.tolist() for x in (
            idx + 1, hh.is_owner[idx], hh.zone_index[idx], hh.income_usd[idx], hh.savings_usd[idx],
            hh.structure_value_usd[idx], hh.contents_value_usd[idx], c["elevated_before"],
            c["insured_before"], c["flooded"], c["depth"],
            c["damage_structure"] + c["damage_contents"], c["payout"],
            hh.floods_experienced[idx], shares["insured"], shares["elevated"],
            shares["relocated"], c["trust_insurance"], c["trust_neighbours"],
        )]
        allowed_per = [allowed_tuples[k] for k in allowed_key]
        recalled = (self.world_memory.perceive(self.year, idx, shares, allowed_per)
                    if self.world_memory is not None else None)
        situations = []
        year, zones = self.year, self.zones
        for j, (aid, own, z, inc, sav, sv, cv, el, ins, fl, dep, dmg, pay, nfl, s_i, s_e, s_r,
                t_i, t_n) in enumerate(zip(*cols, strict=True)):
            situations.append(build(HouseholdSituation, {
                "agent_id": aid, "year": year, "tenure": "owner" if own else "renter",
                "flood_zone": zones[z], "income_usd": inc, "savings_usd": sav,
                "structure_value_usd": sv, "contents_value_usd": cv, "elevated": el,
                "insured": ins, "flooded": fl, "depth_m": dep, "damage_usd": dmg,
                "payout_usd": pay, "years_since_flood": ysf_list[j], "floods_experienced": nfl,
                "flood_probability": prob[j],
                "neighbour_shares": {"insured": s_i, "elevated": s_e, "relocated": s_r},
                "action_costs_usd": dict(zip(acts, cost[j], strict=True)),
                "affordable": dict(zip(acts, afford[j], strict=True)),
                "allowed_actions": allowed_tuples[allowed_key[j]],
                "trust_insurance": t_i, "trust_neighbours": t_n,
                "memories": () if recalled is None else recalled[j]["memories"],
                "extra": self._extra(dict(zip(acts, loss[j], strict=True)),
                                     None if recalled is None else recalled[j]),
            }))
        return situations

    @staticmethod
    def _extra(loss: dict[str, float], recalled: dict[str, Any] | None) -> dict[str, Any]:
        extra: dict[str, Any] = {"loss_if_flood_usd": loss}
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
        """5. Re-check feasibility, execute in agent-id order, pay, lapse, relocate.

        Each household's execution touches only its own state, so the vectorised update below
        equals executing the decisions one by one in agent-id order.
        """
        c, hh, idx = self.current, self.hh, self.current["idx"]
        opt = c["options"]["actions"]
        pos = {a: k for k, a in enumerate(self.action_ids)}
        wanted = np.array([pos.get(d.action, -1) for d in decisions], dtype=np.int64)
        known = wanted >= 0
        feasible_m = np.column_stack(
            [opt[a]["allowed"] & opt[a]["affordable"] for a in self.action_ids])
        rows = np.arange(len(idx))
        feasible = known & feasible_m[rows, np.where(known, wanted, 0)]
        executed = np.where(feasible, wanted, pos[self.default_action])
        cost_m = np.column_stack([opt[a]["cost"] for a in self.action_ids])
        done = execute([self.domain.actions[a].effect for a in self.action_ids], executed,
                       cost_m[rows, executed])
        premium, action_cost = done.premium_usd, done.action_cost_usd
        hh.elevated[idx] |= done.elevated
        hh.insured[idx] = done.insured  # un-renewed insurance lapses
        hh.relocated[idx] |= done.relocated
        for a, taken in hh.taken_once.items():
            taken[idx] |= executed == pos[a]
        hh.savings_usd[idx] += (
            self.config.population.annual_saving_share * hh.income_usd[idx] - premium - action_cost
        )
        c.update(decisions=decisions, feasible=feasible,
                 executed=np.asarray(self.action_ids, dtype=object)[executed],
                 premium=premium, action_cost=action_cost)
        if self.world_memory is not None:
            self.world_memory.record_decisions(self.year, idx, decisions, c["executed"],
                                               feasible, premium + action_cost)

    def reflection_phase(self) -> None:
        """6. Decision maker's end of year; trust updates; what neighbours see next year."""
        # reflection sees the year's memories before they consolidate
        self.decision_maker.end_year(self.year, self.reflection_targets())
        if self.world_memory is not None:
            self.world_memory.end_year(self.year, self.current["idx"])
        self.update_trust()
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

    def update_trust(self) -> None:
        """Trust dynamics of domain_defaults section 5, clamped to [0, 1]."""
        t, c, hh, idx = self.config.trust, self.current, self.hh, self.current["idx"]
        ins, fl = c["insured_before"], c["flooded"]
        delta_i = np.select(
            [ins & fl, ins & ~fl, ~ins & fl],
            [t.insurance_insured_flooded, t.insurance_insured_safe, t.insurance_uninsured_flooded],
            t.insurance_uninsured_safe,
        )
        hh.trust_insurance[idx] = np.clip(hh.trust_insurance[idx] + delta_i, 0.0, 1.0)
        rate = float(np.mean((hh.elevated & ~hh.relocated) | hh.relocated))
        if rate > t.high_action_rate:
            delta_n = np.full(len(idx), t.neighbours_high_action)
        else:
            low = rate < t.low_action_rate
            delta_n = np.where(fl & low, t.neighbours_flooded_low_action, t.neighbours_otherwise)
        hh.trust_neighbours[idx] = np.clip(hh.trust_neighbours[idx] + delta_n, 0.0, 1.0)

    def collect_phase(self) -> None:
        """7. The year's rows for ``agents_yearly.csv`` and ``model_yearly.csv``."""
        self.last_agent_columns = self.agent_columns()
        self.last_model_row = self.model_row()

    # ----------------------------------------------------------------------------------------
    # data collection
    # ----------------------------------------------------------------------------------------

    def agent_columns(self) -> dict[str, Any]:
        """This year's agent rows as columns (arrays or lists), keyed by output column."""
        c, hh, idx = self.current, self.hh, self.current["idx"]
        decisions: list[Decision] = c["decisions"]
        n = len(idx)

        def audit_score(key: str) -> np.ndarray:
            return np.array([d.audit.get(key, np.nan) if d.audit else np.nan for d in decisions],
                            dtype=float)

        return {
            "year": np.full(n, self.year), "agent_id": idx + 1,
            "tenure": np.where(hh.is_owner[idx], "owner", "renter"),
            "flood_zone": np.asarray(self.zones, dtype=object)[hh.zone_index[idx]],
            "income_usd": hh.income_usd[idx], "savings_before_usd": c["savings_before"],
            "elevated_before": c["elevated_before"], "insured_before": c["insured_before"],
            "flooded": c["flooded"], "depth_m": c["depth"],
            "effective_depth_m": c["effective_depth"],
            "damage_structure_usd": c["damage_structure"],
            "damage_contents_usd": c["damage_contents"],
            "damage_usd": c["damage_structure"] + c["damage_contents"],
            "payout_usd": c["payout"], "out_of_pocket_usd": c["out_of_pocket"],
            "years_since_flood": hh.years_since_flood[idx],
            "floods_experienced": hh.floods_experienced[idx],
            "neighbour_insured_share": c["shares"]["insured"],
            "neighbour_elevated_share": c["shares"]["elevated"],
            "neighbour_relocated_share": c["shares"]["relocated"],
            "trust_insurance": c["trust_insurance"], "trust_neighbours": c["trust_neighbours"],
            "threat_score": audit_score("threat_score"),
            "coping_score": audit_score("coping_score"),
            "threat_label": [d.threat_label or "" for d in decisions],
            "coping_label": [d.coping_label or "" for d in decisions],
            "proposed_action": [d.proposed_action or "" for d in decisions],
            "executed_action": c["executed"],
            "status": [d.status for d in decisions],
            "retries": np.array([d.retries for d in decisions], dtype=np.int64),
            "feasible": c["feasible"], "action_cost_usd": c["action_cost"],
            "premium_usd": c["premium"], "elevated_after": hh.elevated[idx].copy(),
            "insured_after": hh.insured[idx].copy(), "relocated_after": hh.relocated[idx].copy(),
            "savings_after_usd": hh.savings_usd[idx].copy(),
            "decision_maker": [d.decision_maker for d in decisions],
        }

    def model_row(self) -> dict[str, Any]:
        """This year's row of ``model_yearly.csv`` (shares of the initial population)."""
        c, hh, n = self.current, self.hh, self.n
        stay = ~hh.relocated
        insured, elevated = hh.insured & stay, hh.elevated & stay
        executed = c["executed"]
        statuses = [d.status for d in c["decisions"]]
        flooded = c["flooded"]
        return {
            "year": self.year, "n_households": n, "n_active": len(c["idx"]),
            "n_flooded": int(flooded.sum()), "flood_occurred": c["flood_occurred"],
            "share_insured": insured.sum() / n, "share_elevated": elevated.sum() / n,
            "share_relocated": hh.relocated.sum() / n,
            "share_insured_and_elevated": (insured & elevated).sum() / n,
            "share_no_measure": (stay & ~insured & ~elevated).sum() / n,
            "total_damage_usd": float(np.sum(c["damage_structure"] + c["damage_contents"])),
            "total_payout_usd": float(np.sum(c["payout"])),
            "total_premiums_usd": float(np.sum(c["premium"])),
            "total_action_costs_usd": float(np.sum(c["action_cost"])),
            "mean_depth_flooded_m": float(c["depth"][flooded].mean()) if flooded.any() else np.nan,
            **{f"n_{a}": int(np.sum(executed == a)) for a in self.action_ids},
            "n_rejected": statuses.count("rejected"),
            "n_retries": int(sum(d.retries for d in c["decisions"])),
            "n_infeasible": int((~c["feasible"]).sum()),
        }
