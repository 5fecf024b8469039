"""Year-end consolidation (seeds 000/001/002).

Working -> episodic -> semantic / procedural, then pruning.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from governed_broker.memory.episodic import EpisodicStore
from governed_broker.memory.item import MemoryItem
from governed_broker.memory.procedural import ProceduralMemory
from governed_broker.memory.protocol import MemoryEngine
from governed_broker.memory.semantic import SemanticMemory


@dataclass(frozen=True)
class ConsolidationReport:
    """What one year-end consolidation did (counts)."""

    year: float
    new_items: int
    kept_long_term: int
    forgotten: int
    stored_episodes: int
    facts_added: int
    heuristics_discovered: int
    pruned_episodes: int


def session_of(year: float) -> str:
    """Session id of a year (``"3"`` for year 3.0, ``"3.5"`` otherwise)."""
    return str(int(year)) if float(year).is_integer() else f"{year:g}"


def episode_record(item: MemoryItem, *, long_term: bool) -> dict[str, Any]:
    """The episodic-store record of a memory item (importance capped at 1, raw kept)."""
    return {
        "content": item.content, "user_id": item.agent_id, "session_id": session_of(item.year),
        "timestamp": item.year, "importance": min(1.0, item.importance),
        "memory_type": item.kind, "episode_id": f"{item.agent_id}:{item.id}",
        "context": {"emotion": item.emotion, "source": item.source, "long_term": long_term},
        "metadata": {**item.metadata, "memory_id": item.id, "raw_importance": item.importance},
    }


def consolidate(
    engine: MemoryEngine,
    year: float,
    *,
    store: EpisodicStore | None = None,
    semantic: SemanticMemory | None = None,
    procedural: ProceduralMemory | None = None,
    forget_policy: Mapping[str, Any] | None = None,
) -> ConsolidationReport:
    """Run the year-end process for one agent.

    1. ``engine.end_year(year)``: working memory -> long-term (seeded, docs/memory.md);
    2. every item created since the last consolidation (kept, forgotten or evicted; insights
       too) is written to the episodic ``store`` with ``context.long_term`` telling its fate;
    3. facts the items carry in ``metadata["facts"]`` (``[source, relation, target]``) enter
       the agent's ``semantic`` memory with the year and the item id as evidence;
    4. ``procedural.discover(year)`` turns repeated successes into heuristics;
    5. ``store.forget(**forget_policy, user_id=agent)`` prunes the store when a policy is set.
    """
    new = engine.drain_new()
    kept = engine.end_year(year)
    kept_ids = {m.id for m in kept}
    long_ids = {m.id for m in engine.long_term()}
    stored = 0
    if store is not None and new:
        store.add_many(episode_record(m, long_term=m.id in long_ids) for m in new)
        stored = len(new)
    facts = 0
    if semantic is not None:
        for item in new:
            for fact in item.metadata.get("facts", ()):
                semantic.add_fact(*fact, year=item.year, evidence=item.id)
                facts += 1
    discovered = len(procedural.discover(year)) if procedural is not None else 0
    pruned = 0
    if store is not None and forget_policy:
        pruned = store.forget(**dict(forget_policy), user_id=engine.agent_id)
    events = [m for m in new if m.kind != "insight"]
    return ConsolidationReport(
        year=float(year), new_items=len(new), kept_long_term=len(kept),
        forgotten=sum(1 for m in events if m.id not in kept_ids), stored_episodes=stored,
        facts_added=facts, heuristics_discovered=discovered, pruned_episodes=pruned)
