"""What the rest of the package needs of a memory engine: the ``MemoryEngine`` protocol.

Engines are registered by name in ``governed_broker.config.memory.MEMORY_ENGINES`` and built
by ``governed_broker.memory.engine.make_engine``; ``HumanCentricMemoryEngine`` and
``WindowMemoryEngine`` are the shipped ones. The protocol lists exactly what code outside
``memory/engine.py`` uses: the household adapter (``memory/household.py``), year-end
consolidation (``memory/consolidation.py``), the Markdown export (``memory/export.py``),
reflection (``cognition/reflection.py``) and checkpoints (through ``HouseholdMemory.state``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from governed_broker.memory.item import MemoryItem


class MemoryEngine(Protocol):
    """One household's memory engine.

    Construction: ``make_engine`` builds the class registered under ``memory.engine`` as
    ``klass(params, rng=rng, agent_id=agent_id)``: the ``memory:`` section (after
    ``memory.overrides``) whole, a ``config.memory.MemoryParams``, the household's seeded
    ``numpy.random.Generator`` (``child_rng(seed, "agent", agent_id, "memory")``) and its id.
    A checkpoint is restored with ``klass.from_state(engine.state())``, ``klass`` looked up by
    ``state["variant"]`` (so ``variant`` must be the engine's ``MEMORY_ENGINES`` name). An
    engine may also offer ``changes() -> dict | None`` (what changed since the last call) and
    ``apply_changes(changes)`` (replay them); checkpoints then log only those each year
    (``HouseholdMemory.changes``) instead of the whole ``state()``.

    Attributes:
        variant: The engine's name in ``MEMORY_ENGINES`` (shown in the Markdown export and
            recorded in ``state()``).
        agent_id: The owner's id (as a string); prunes the owner's episodic-store rows.
        decay_rate: Base forgetting rate per year (shown in the Markdown export).
        window_size: Working-memory capacity (shown in the Markdown export).
        top_k_significant: Long-term memories retrieved per year (Markdown export).
        top_k_insights: Insights retrieved per year (Markdown export).
        min_score: Lowest score retrieved (Markdown export).
    """

    variant: str
    agent_id: str
    decay_rate: float
    window_size: int
    top_k_significant: int
    top_k_insights: int
    min_score: float

    def add(
        self,
        content: str,
        year: float,
        *,
        kind: str = "event",
        emotion: str | None = None,
        source: str | None = None,
        importance: float | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> MemoryItem:
        """Encode a memory of ``year`` and return it (categories not given are inferred)."""
        ...

    def add_insight(self, content: str, year: float, *, salience: float = 1.0,
                    sources: Sequence[str] = ()) -> MemoryItem:
        """Store a reflection insight and return it.

        Importance ``insight_importance`` times ``salience`` (the highest importance among the
        memories ``sources`` it was drawn from).
        """
        ...

    def retrieve(self, year: float) -> list[MemoryItem]:
        """Memories shown for a decision in ``year`` (retrieval may strengthen them)."""
        ...

    def score(self, item: MemoryItem, year: float) -> float:
        """Retrieval score of ``item`` at ``year``."""
        ...

    def end_year(self, year: float) -> list[MemoryItem]:
        """Year-end consolidation; returns the items kept in long-term memory."""
        ...

    def drain_new(self) -> list[MemoryItem]:
        """Items created since the last call (for the run's episodic store)."""
        ...

    def items(self) -> list[MemoryItem]:
        """Every item the engine holds (working, then long-term)."""
        ...

    def working(self) -> list[MemoryItem]:
        """Working items of the current year."""
        ...

    def long_term(self) -> list[MemoryItem]:
        """Long-term items, in the order they were consolidated."""
        ...

    def insights(self) -> list[MemoryItem]:
        """Reflection insights held."""
        ...

    def state(self) -> dict[str, Any]:
        """The whole engine as a JSON-serialisable dict with ``"variant"`` (checkpoints)."""
        ...

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> MemoryEngine:
        """Rebuild an engine from ``state()`` (generator state included)."""
        ...
