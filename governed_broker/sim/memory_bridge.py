"""The world's side of household memory: who remembers what, and when.

``WorldMemory`` owns one ``HouseholdMemory`` per household (when the experiment's memory engine
is not ``none``) and translates the yearly phases of ``FloodModel`` into memory calls:

* impacts -> ``record_flood`` / ``record_no_flood`` with the coverage and elevation in force;
* perception -> ``record_neighbours`` (last year's shares), then ``retrieve`` for the decision,
  plus the facts the household knows about each allowed measure (semantic memory) and its
  matching learned heuristics (procedural memory);
* execution -> ``record_decision`` (executed, or refused / rejected and not executed);
* end of year -> consolidation, after the decision maker's reflection so that the year's
  working memories are still there to reflect on.

Every memory is also written to ``<run_dir>/memory.sqlite`` and, at the end of the run, to
``<run_dir>/memories/<agent_id>.md`` (``outputs.memory_markdown``).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from governed_broker.contracts.decision import Heuristic, ReflectionTarget
from governed_broker.memory.semantic import SemanticMemory
from governed_broker.memory.texts import MemoryTexts
from governed_broker.sim.household_memory import HouseholdMemory, RunMemoryWriter
from governed_broker.sim.households import HouseholdArrays
from governed_broker.sim.year_state import YearState

if TYPE_CHECKING:  # pragma: no cover
    from governed_broker.config.agent_types import AgentTypesConfig
    from governed_broker.config.experiment import ExperimentConfig
    from governed_broker.contracts.decision import Decision

#: Relations that only place a concept in the taxonomy; they tell a household nothing about
#: what a measure does, so they are not recalled as knowledge.
_TAXONOMY = frozenset({"is_a", "part_of"})


class WorldMemory:
    """Memories of every household of one model.

    Args:
        config: The experiment (memory settings, seed, concepts file).
        domain: The action domain (effects, concepts, memory parameters).
        insured: Whether each household (agent ids 1..n, in order) starts insured.
        elevated: Whether each household starts elevated.
        run_dir: Where ``memory.sqlite`` and ``memories/`` go (None: nothing is written,
            e.g. a model built in a notebook).
        max_heuristics: Learned heuristics shown per decision (best success rate first).
    """

    def __init__(self, config: ExperimentConfig, domain: AgentTypesConfig, insured: np.ndarray,
                 elevated: np.ndarray, run_dir: Path | None, max_heuristics: int = 3) -> None:
        self.semantic = SemanticMemory.from_yaml(config.resolve_path(config.memory.concepts_file))
        self.texts = MemoryTexts.from_file(config.resolve_path(config.memory.texts_file))
        self.max_heuristics = max_heuristics
        effects = {a: s.effect for a, s in domain.actions.items()}
        self.concepts = {a: s.concept for a, s in domain.actions.items() if s.concept}
        self.writer = RunMemoryWriter(run_dir) if run_dir is not None else None
        # (graph id, version, concept) -> (graph, facts)
        self._facts_cache: dict[tuple[int, int, str], tuple[Any, list[str]]] = {}
        self.households: dict[int, HouseholdMemory] = {}
        for i in range(len(insured)):
            agent_id = i + 1
            hm = HouseholdMemory.from_config(agent_id, domain.memory, config.memory, config.seed,
                                             semantic=self.semantic,
                                             action_effects=effects, texts=self.texts)
            if hm is None:  # engine "none" is decided by config, identically for everyone
                raise ValueError("WorldMemory needs a memory engine; memory.engine is 'none'")
            hm.set_status(insured=bool(insured[i]), elevated=bool(elevated[i]))
            self._attach(hm)
            self.households[agent_id] = hm

    def _attach(self, hm: HouseholdMemory) -> None:
        if self.writer is not None:
            self.writer.attach(hm)

    def memory_of(self, agent_id: int) -> HouseholdMemory:
        """The memory of household ``agent_id``."""
        return self.households[agent_id]

    # ------------------------------------------------------------------------------ phases
    def record_impacts(self, year: int, state: YearState) -> None:
        """Step 2: what the flood (or its absence) did to each active household."""
        damage = state.damage_usd
        for j, i in enumerate(state.idx.tolist()):
            hm = self.households[i + 1]
            if state.flooded[j]:
                hm.record_flood(year, float(state.depth_m[j]), float(damage[j]),
                                float(state.payout_usd[j]),
                                insured=bool(state.insured_before[j]),
                                elevated=bool(state.elevated_before[j]))
            else:
                hm.record_no_flood(year, insured=bool(state.insured_before[j]),
                                   elevated=bool(state.elevated_before[j]))

    def perceive(self, year: int, idx: np.ndarray, shares: dict[str, np.ndarray],
                 allowed: Sequence[tuple[str, ...]]) -> list[dict[str, Any]]:
        """Step 3: per active household, retrieved memories, known facts and heuristics."""
        out = []
        for j, i in enumerate(idx.tolist()):
            hm = self.households[i + 1]
            hm.record_neighbours(year, {k: float(v[j]) for k, v in shares.items()})
            out.append({
                "memories": tuple(hm.retrieve(year)),
                "knowledge_facts": tuple(self._facts(hm, allowed[j])),
                "heuristics": self._heuristics(hm),
            })
        return out

    def _facts(self, hm: HouseholdMemory, allowed: tuple[str, ...]) -> list[str]:
        semantic = hm.semantic or self.semantic
        facts = []
        # each concept once: several actions may name one (elevate_house, elevate_and_insure)
        for concept in dict.fromkeys(self.concepts.get(a) for a in allowed):
            if concept is not None:
                facts.extend(self._concept_facts(semantic, concept))
        return facts

    def _concept_facts(self, semantic: SemanticMemory, concept: str) -> list[str]:
        """What a graph says a concept does (its non-taxonomy relations).

        Cached per graph and version: households share their graph until they learn something.
        """
        graph = semantic.graph
        key = (id(graph), semantic.version, concept)
        cached = self._facts_cache.get(key)
        if cached is None:
            found = []
            if concept in graph:
                for _, target, data in sorted(graph.out_edges(concept, data=True)):
                    if data["relation"] not in _TAXONOMY:
                        found.append(" ".join(x.replace("_", " ")
                                              for x in (concept, data["relation"], target)))
            # the entry holds the graph, so its id is not reused while the entry exists
            cached = self._facts_cache[key] = (graph, found)
        return cached[1]

    def _heuristics(self, hm: HouseholdMemory) -> tuple[Heuristic, ...]:
        situation = {"flooded_this_year": hm.flooded_this_year, "insured": hm.insured,
                     "elevated": hm.elevated}
        found = hm.procedural.match(situation)[: self.max_heuristics]
        return tuple(Heuristic(h.describe(), h.success_rate) for h in found)

    def record_decisions(self, year: int, idx: np.ndarray, decisions: Sequence[Decision],
                         executed: np.ndarray, feasible: np.ndarray, paid: np.ndarray) -> None:
        """Step 5: what each household did (or wanted to do and could not)."""
        for j, i in enumerate(idx.tolist()):
            hm, d = self.households[i + 1], decisions[j]
            refused = (not feasible[j]) or d.status in ("rejected", "parse_failed")
            if refused:
                wanted = d.proposed_action or d.action
                hm.record_decision(year, wanted, d.status if feasible[j] else "infeasible",
                                   0.0, executed=False)
            else:
                hm.record_decision(year, str(executed[j]), d.status, float(paid[j]))

    def end_year(self, year: int, idx: np.ndarray) -> None:
        """Step 6: consolidation of each active household's year (one store transaction)."""
        with self.writer.store.batch() if self.writer is not None else nullcontext():
            for i in idx.tolist():
                self.households[i + 1].end_year(year)

    def reflection_targets(self, hh: HouseholdArrays, zones: list[str],
                           idx: np.ndarray) -> list[ReflectionTarget]:
        """The households ``idx`` as year-end reflection sees them, in order."""
        return [ReflectionTarget(i + 1, "owner" if hh.is_owner[i] else "renter",
                                 zones[hh.zone_index[i]], self.memory_of(i + 1).engine)
                for i in idx.tolist()]

    def finish(self, year: int, markdown: bool) -> None:
        """End of run: readable exports and the store closed."""
        if self.writer is None:
            return
        if markdown:
            self.writer.write_markdown(self.households.values(), year=year)
        self.writer.close()

    def abandon(self) -> None:
        """A failed run: the store closed at once, without committing.

        So that nothing is written into ``memory.sqlite`` later, when the world is collected.
        """
        if self.writer is not None:
            self.writer.abandon()

    # ------------------------------------------------------------------------------ state
    def changes(self) -> list[list[Any]]:
        """``[agent_id, changes]`` of every household whose memory changed.

        Since the last call (``HouseholdMemory.changes``), in agent-id order: what a checkpoint
        appends to its memory log. Its size follows the year's events, not the length of the run.
        """
        out = []
        for agent_id, hm in self.households.items():
            found = hm.changes()
            if found is not None:
                out.append([agent_id, found])
        return out

    def apply_changes(self, changes: list[list[Any]]) -> None:
        """Replay one ``changes()`` on memories in the state they had when it was taken.

        A freshly built ``WorldMemory`` for the first.
        """
        for agent_id, found in changes:
            self.households[int(agent_id)].apply_changes(found)
