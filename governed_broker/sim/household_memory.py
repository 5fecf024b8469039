"""The flood world's adapter of memory.

One ``HouseholdMemory`` per household, one writer per run (``RunMemoryWriter``).

The world calls, each year and in this order: ``record_flood`` or ``record_no_flood``
(impacts, with the cover and elevation in force: the world's insurance timing, never a copy of
it), ``record_neighbours`` (what the household saw last year), ``retrieve`` (memories
for the decision), ``record_decision`` (after execution) and ``end_year`` (consolidation).
Memory texts are plain first-person sentences from ``memory.texts_file``
(``configs/prompts/memory.yaml``, rendered by ``memory.texts.MemoryTexts``), so the keyword
categories of the ``memory:`` section encode them. Where keywords would mislead (a sentence
saying that *no* flood came, a routine renewal, doing nothing, neighbour statistics) the adapter
passes the category
explicitly; the categories chosen are visible in every item and in ``memory.sqlite``.

Outcome learning: the protection chosen in year t is judged by what happens in year t+1.
Insurance pays off when the home floods and the policy pays; elevation when the home floods;
doing nothing when it does not flood. Each judgement updates the procedural memory (situation
at decision time -> action -> success) and the metacognitive record.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from governed_broker.config.memory import MemoryConfig, MemoryParams
from governed_broker.contracts.effects import NO_EFFECT, EffectTraits, traits_of
from governed_broker.memory.consolidation import ConsolidationReport, consolidate
from governed_broker.memory.embedding import Embedder
from governed_broker.memory.engine import make_engine, restore_engine
from governed_broker.memory.episodic import EpisodicStore
from governed_broker.memory.export import export_markdown
from governed_broker.memory.item import MemoryItem
from governed_broker.memory.metacognition import MetacognitiveRecord
from governed_broker.memory.procedural import ProceduralMemory
from governed_broker.memory.protocol import MemoryEngine
from governed_broker.memory.semantic import SemanticMemory
from governed_broker.memory.texts import MemoryTexts
from governed_broker.seeding import child_rng


class HouseholdMemory:
    """One household's memory: engine, semantic/procedural memory, metacognitive record.

    Args:
        agent_id: The household id.
        engine: Its memory engine (``.engine``).
        semantic: Its knowledge graph copy (None: no semantic memory).
        procedural: Its heuristics (default: a new ``ProceduralMemory``).
        metacognition: Its strategy record (default: a new one).
        action_effects: Action id -> effect name (``contracts.effects.EFFECTS``) of the
            experiment's domain: what a decision means for memory is read from the effect's
            traits, never from the action id.
        texts: The sentences memories are written in (``memory.texts_file``).
        store: The run's episodic store (set by ``RunMemoryWriter.attach``).
    """

    def __init__(self, agent_id: int | str, engine: MemoryEngine, *,
                 action_effects: Mapping[str, str], texts: MemoryTexts,
                 semantic: SemanticMemory | None = None,
                 procedural: ProceduralMemory | None = None,
                 metacognition: MetacognitiveRecord | None = None,
                 store: EpisodicStore | None = None) -> None:
        self.agent_id = agent_id
        self.engine = engine
        self.semantic = semantic
        self.procedural = procedural if procedural is not None else ProceduralMemory()
        self.metacognition = metacognition if metacognition is not None else \
            MetacognitiveRecord()
        self.action_effects = dict(action_effects)
        self.texts = texts
        self.store = store
        self.forget_policy: dict[str, Any] | None = None
        self.insured = False  # coverage in force this year
        self.elevated = False
        self.flooded_this_year = False
        self._pending: dict[str, Any] | None = None  # last decision awaiting its outcome
        self._reported: list[Any] | None = None  # own fields as ``changes()`` last gave them

    @classmethod
    def from_config(cls, agent_id: int | str, params: MemoryParams | None,
                    config: MemoryConfig, seed: int, *,
                    action_effects: Mapping[str, str], texts: MemoryTexts,
                    semantic: SemanticMemory | None = None) -> HouseholdMemory | None:
        """Build from the ``memory:`` params and the experiment's ``MemoryConfig``.

        The engine's generator is ``child_rng(seed, "agent", agent_id, "memory")``; the
        semantic memory is a private copy of ``semantic``. Returns None for engine ``none``.
        """
        rng = child_rng(seed, "agent", agent_id, "memory")
        engine = make_engine(params, config, rng=rng, agent_id=agent_id)
        if engine is None:
            return None
        return cls(agent_id, engine, semantic=None if semantic is None else semantic.copy(),
                   action_effects=action_effects, texts=texts)

    def set_status(self, *, insured: bool, elevated: bool) -> None:
        """Protection in force at the start (initial population) or after a restore."""
        self.insured, self.elevated = bool(insured), bool(elevated)

    # ----------------------------------------------------------------------------- impacts
    def record_flood(self, year: int, depth_m: float, damage_usd: float, payout_usd: float,
                     insured: bool, elevated: bool, *,
                     damage_avoided_usd: float | None = None) -> MemoryItem:
        """The home flooded this year (``depth_m`` before elevation, metres)."""
        self.insured, self.elevated, self.flooded_this_year = bool(insured), bool(elevated), True
        said = self.texts.flood(year, depth_m, damage_usd, payout_usd, insured=insured,
                                elevated=elevated)
        facts = [["home", "experienced", "flood"]]
        if insured and payout_usd > 0:
            facts.append(["flood_insurance", "pays_for", "flood_damage"])
        if elevated:
            facts.append(["house_elevation", "reduces", "flood_damage"])
        item = self.engine.add(said.text, year, kind="event", metadata={
            "summary": said.summary, "gist": said.gist, "facts": facts,
            "depth_m": depth_m, "damage_usd": damage_usd, "payout_usd": payout_usd,
            "insured": bool(insured), "elevated": bool(elevated)})
        self._judge(year, flooded=True, damage_usd=damage_usd, payout_usd=payout_usd,
                    damage_avoided_usd=damage_avoided_usd)
        return item

    def record_no_flood(self, year: int, *, insured: bool, elevated: bool) -> MemoryItem:
        """No flood reached the home this year (a routine memory, category given).

        With the cover and elevation in force.
        """
        self.insured, self.elevated, self.flooded_this_year = bool(insured), bool(elevated), False
        text, gist = self.texts.quiet_year(year)
        item = self.engine.add(text, year, kind="observation", emotion="routine",
                               metadata={"gist": gist})
        self._judge(year, flooded=False, damage_usd=0.0, payout_usd=0.0)
        return item

    def _judge(self, year: int, *, flooded: bool, damage_usd: float, payout_usd: float,
               damage_avoided_usd: float | None = None) -> None:
        """Judge the decision of the previous year by this year's outcome."""
        pending, self._pending = self._pending, None
        if pending is None or pending["year"] != year - 1:
            return
        effect = self._traits(pending["action"])
        if effect.insures:
            paid_off = flooded and payout_usd > 0
        elif effect.elevates:
            if not flooded:
                return  # not tested yet
            paid_off = True
        elif not effect.protective:
            paid_off = not flooded or damage_usd <= 0
        else:
            return  # e.g. leaving: no later outcome to judge it by
        self.procedural.record(pending["situation"], pending["action"], paid_off)
        self.metacognition.record_outcome(
            pending["action"], paid_off=paid_off, flooded=flooded, damage_usd=damage_usd,
            payout_usd=payout_usd, damage_avoided_usd=damage_avoided_usd)

    # ----------------------------------------------------------------------------- social
    def record_neighbours(self, year: int, shares: Mapping[str, float]) -> MemoryItem | None:
        """Shares (0..1) of neighbours insured / elevated / relocated last year."""
        text = self.texts.neighbours(shares)
        if text is None:
            return None
        return self.engine.add(text, year, kind="observation", emotion="routine",
                               source="neighbour", metadata={"shares": dict(shares)})

    # ----------------------------------------------------------------------------- decisions
    def record_decision(self, year: int, action: str, status: str, cost_usd: float, *,
                        executed: bool = True) -> MemoryItem:
        """What the household decided, after execution.

        ``executed`` is False when the world refused it or the broker fell back. Protective changes
        are strategic memories, renewals and doing nothing are routine.
        """
        effect = self._traits(action)
        situation = {"flooded_this_year": self.flooded_this_year, "insured": self.insured,
                     "elevated": self.elevated}
        emotion = None
        if not executed:
            key, emotion = "decision_refused", "strategic"
        elif effect.insures and effect.elevates:
            key = "decision_elevated_insured"
        elif effect.insures and self.insured:
            key, emotion = "decision_renewed", "routine"
        elif effect.insures:
            key = "decision_insured"
        elif effect.elevates:
            key = "decision_elevated"
        elif effect.leaves:
            key = "decision_left"
        elif effect.protective:
            key = "decision_protective"
        else:
            key, emotion = "decision_none", "routine"
        text = self.texts.decision(key, action, cost_usd, status)
        item = self.engine.add(text, year, kind="decision", emotion=emotion, metadata={
            "action": action, "status": status, "cost_usd": cost_usd, "executed": executed,
            "gist": self.texts.decision_gist(year, action, executed=executed)})
        done = action if executed else next(
            (a for a, e in self.action_effects.items() if e == NO_EFFECT), action)
        self.metacognition.record_choice(action, executed=executed, cost_usd=cost_usd)
        self._pending = {"year": year, "action": done, "situation": situation}
        return item

    def _traits(self, action: str) -> EffectTraits:
        """The effect of ``action``.

        An id outside the domain (a refused proposal) does nothing.
        """
        return traits_of(self.action_effects.get(action, NO_EFFECT))

    def add_insight(self, content: str, year: int, *, salience: float = 1.0,
                    sources: Sequence[str] = ()) -> MemoryItem:
        """A reflection insight.

        Importance ``insight_importance`` x salience, own retrieval slots.
        """
        return self.engine.add_insight(content, year, salience=salience, sources=sources)

    # ----------------------------------------------------------------------------- yearly
    def retrieve(self, year: int) -> list[MemoryItem]:
        """Memories for this year's decision (the engine's ``retrieve``)."""
        return self.engine.retrieve(year)

    def end_year(self, year: int) -> ConsolidationReport:
        """Consolidate (working -> long-term and the run's store; facts; heuristics)."""
        report = consolidate(self.engine, year, store=self.store, semantic=self.semantic,
                             procedural=self.procedural, forget_policy=self.forget_policy)
        self.flooded_this_year = False
        return report

    # ----------------------------------------------------------------------------- state
    def state(self) -> dict[str, Any]:
        """JSON-serialisable state (checkpoints)."""
        return {
            "agent_id": self.agent_id, "engine": self.engine.state(),
            "procedural": self.procedural.state(), "metacognition": self.metacognition.state(),
            "semantic_learned": None if self.semantic is None else self.semantic.learned_state(),
            "action_effects": self.action_effects, "insured": self.insured,
            "elevated": self.elevated, "flooded_this_year": self.flooded_this_year,
            "pending": self._pending, "forget_policy": self.forget_policy,
        }

    def _own(self) -> list[Any]:
        return [self.insured, self.elevated, self.flooded_this_year, self._pending,
                self.forget_policy]

    def changes(self) -> dict[str, Any] | None:
        """What changed since the last call (or since it was built), JSON-serialisable.

        None when nothing did. Checkpoints append it to their memory log; ``apply_changes`` replays
        it on a household memory built the same way.

        The engine reports its own changes when it can (``changes`` / ``apply_changes``, as
        the shipped engines do); an engine without them is written whole every time.
        """
        out: dict[str, Any] = {}
        if hasattr(self.engine, "changes"):
            engine = self.engine.changes()
            if engine is not None:
                out["engine"] = engine
        else:
            out["engine_state"] = self.engine.state()
        for name, part in (("procedural", self.procedural),
                           ("metacognition", self.metacognition), ("semantic", self.semantic)):
            found = None if part is None else part.changes()
            if found is not None:
                out[name] = found
        own = self._own()
        if own != self._reported:
            out["own"] = self._reported = own
        return out or None

    def apply_changes(self, changes: Mapping[str, Any]) -> None:
        """Replay one ``changes()`` on this memory.

        Which must be in the state it had when they were taken.
        """
        if "engine" in changes:
            self.engine.apply_changes(changes["engine"])
        if "engine_state" in changes:
            self.engine = restore_engine(changes["engine_state"])
        for name in ("procedural", "metacognition", "semantic"):
            if name in changes:
                getattr(self, name).apply_changes(changes[name])
        if "own" in changes:
            own = list(changes["own"])
            if len(own) == 6:  # logged before the world passed the cover in force each year
                del own[3]
            self._reported = own
            (self.insured, self.elevated, self.flooded_this_year, self._pending,
             self.forget_policy) = own

    @classmethod
    def from_state(cls, state: Mapping[str, Any], *, texts: MemoryTexts,
                   semantic: SemanticMemory | None = None) -> HouseholdMemory:
        """Inverse of ``state``.

        ``semantic`` is the base graph the learned facts go on and ``texts`` the run's memory
        sentences (not part of the state: they come with the experiment, whose hash a resume
        checks).
        """
        sem = None
        if state.get("semantic_learned") is not None:
            sem = (semantic or SemanticMemory.from_yaml()).copy()
            sem.restore_learned(state["semantic_learned"])
        hm = cls(state["agent_id"], restore_engine(state["engine"]),
                 semantic=sem, procedural=ProceduralMemory.from_state(state["procedural"]),
                 metacognition=MetacognitiveRecord.from_state(state["metacognition"]),
                 action_effects=state["action_effects"], texts=texts)
        hm.insured, hm.elevated = state["insured"], state["elevated"]
        hm.flooded_this_year = state["flooded_this_year"]
        hm._pending = state["pending"]
        hm.forget_policy = state["forget_policy"]
        return hm


_SAFE_ID = re.compile(r"^[A-Za-z0-9_.-]+$")


class RunMemoryWriter:
    """Writes a run's memories.

    Every item into ``<run_dir>/memory.sqlite`` (user_id = agent id, session_id = year) and one
    ``<run_dir>/memories/<agent_id>.md`` per household.

    Args:
        run_dir: The run's output directory (must exist).
        embedder: Embedder for the store's vector index (None: keyword search only; the
            engine itself never needs embeddings).
    """

    def __init__(self, run_dir: str | Path, embedder: Embedder | None = None) -> None:
        self.run_dir = Path(run_dir)
        if not self.run_dir.is_dir():
            raise FileNotFoundError(f"run directory {self.run_dir} does not exist")
        self.store = EpisodicStore(self.run_dir / "memory.sqlite", embedder)

    def attach(self, memory: HouseholdMemory) -> HouseholdMemory:
        """Make a household's consolidation write to this run's store."""
        memory.store = self.store
        return memory

    def write_markdown(self, memories: Iterable[HouseholdMemory],
                       year: float | None = None) -> list[Path]:
        """Write ``memories/<agent_id>.md`` for each household (ids must be file-safe)."""
        out = []
        for mem in memories:
            name = str(mem.agent_id)
            if not _SAFE_ID.match(name) or name in (".", ".."):
                raise ValueError(f"agent id {name!r} cannot be used as a file name")
            out.append(export_markdown(mem, self.run_dir / "memories" / f"{name}.md", year))
        return out

    def close(self) -> None:
        """Commit and close ``memory.sqlite``."""
        self.store.close()

    def abandon(self) -> None:
        """Close ``memory.sqlite`` without committing (a failed run)."""
        self.store.abandon()
