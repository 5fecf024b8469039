"""The memory item shared by every store (docs/memory.md) and its fidelity levels (seed 002)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

MemoryKind = Literal["event", "decision", "observation", "insight", "seed"]
Fidelity = Literal["detailed", "summary", "gist"]

MEMORY_KINDS: tuple[str, ...] = ("event", "decision", "observation", "insight", "seed")
FIDELITY_LEVELS: tuple[str, ...] = ("detailed", "summary", "gist")


@dataclass(slots=True)
class MemoryItem:
    """One memory of one agent.

    Attributes:
        id: Unique within the agent (e.g. ``"m000012"``).
        agent_id: Owner of the memory.
        year: Simulation year in which it was formed (may be fractional).
        content: The detailed text (first person for household memories).
        emotion: Emotion category name (``W_emotion`` from the ``memory:`` section).
        source: Source category name (``W_source``).
        importance: ``W_emotion * W_source`` unless given explicitly (insights: 10).
        kind: ``event``, ``decision``, ``observation``, ``insight`` or ``seed``.
        metadata: JSON-serialisable extras (e.g. ``summary``/``gist`` texts, world facts).
        access_count: How often it has been retrieved.
        last_access_year: Year of the last retrieval (None: never retrieved).
        fidelity: Version the agent currently recalls: ``detailed``, ``summary`` or ``gist``.
        w_emotion: ``W_emotion`` used by the decay rate (stored so decay never depends on a
            later change of the keyword table).
    """

    id: str
    agent_id: str
    year: float
    content: str
    emotion: str
    source: str
    importance: float
    kind: str = "event"
    metadata: dict[str, Any] = field(default_factory=dict)
    access_count: int = 0
    last_access_year: float | None = None
    fidelity: str = "detailed"
    w_emotion: float = 0.1

    def text(self, fidelity: str | None = None) -> str:
        """The text at a fidelity level (default: the item's current level).

        ``summary`` and ``gist`` come from ``metadata`` when the writer supplied them, else
        they are derived from ``content`` (first clause; first clause cut to 12 words).
        """
        level = fidelity or self.fidelity
        if level == "detailed":
            return self.content
        if level == "summary":
            return str(self.metadata.get("summary") or first_clause(self.content))
        if level == "gist":
            return str(self.metadata.get("gist") or _cut_words(first_clause(self.content), 12))
        raise ValueError(f"unknown fidelity {level!r}; allowed: {FIDELITY_LEVELS}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable dict (for checkpoints and the episodic store)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemoryItem:
        """Inverse of ``to_dict``."""
        return cls(**data)

    def to_row(self) -> list[Any]:
        """The fields as a list in ``ITEM_FIELDS`` order.

        Checkpoint logs: compact, and no deep copy; ``metadata`` is the item's own dict, to be
        serialised at once.
        """
        return [self.id, self.agent_id, self.year, self.content, self.emotion, self.source,
                self.importance, self.kind, self.metadata, self.access_count,
                self.last_access_year, self.fidelity, self.w_emotion]

    @classmethod
    def from_row(cls, row: list[Any]) -> MemoryItem:
        """Inverse of ``to_row``."""
        return cls(*row)


#: Field order of ``MemoryItem.to_row``.
ITEM_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(MemoryItem))


def first_clause(text: str) -> str:
    """The text up to the first ``;`` or sentence end, with a closing full stop."""
    cut = len(text)
    for sep in (";", ". ", "! ", "? "):
        pos = text.find(sep)
        if pos != -1:
            cut = min(cut, pos)
    clause = text[:cut].strip().rstrip(".")
    return clause + "." if clause else text.strip()


def _cut_words(text: str, n: int) -> str:
    words = text.split()
    return text if len(words) <= n else " ".join(words[:n]).rstrip(".,;") + "..."


def fidelity_for_age(age_years: float, detailed_years: float, summary_years: float) -> str:
    """Fidelity level of a memory of a given age (seed 002 ladder, docs/memory.md).

    ``detailed`` while ``age <= detailed_years``, ``summary`` while ``age <= summary_years``,
    else ``gist``.
    """
    if age_years <= detailed_years:
        return "detailed"
    if age_years <= summary_years:
        return "summary"
    return "gist"
