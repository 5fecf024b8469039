"""One household's years: what it lived through and every step of each decision, joined.

A year of the timeline joins the household's row of ``agents_yearly.csv`` (flood, damage,
payout, savings, proposed and executed action), its record of ``decisions.jsonl`` (each attempt:
the reply, the parse, the rules evaluated and fired, the feedback), the memories the prompt
showed (from ``memory.sqlite``, with importance and the fidelity recorded in the audit), the
exact messages of each attempt (from ``llm_calls.sqlite``, or the audit when it kept prompts)
and the household's reflection at the end of the year (``reflections.jsonl``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from governed_broker.explore.run_view import Memory, RunView

#: Where an attempt's messages came from.
FROM_CALL_LOG, FROM_AUDIT = "llm_calls.sqlite", "decisions.jsonl"


@dataclass(frozen=True)
class Attempt:
    """One attempt of a decision (the first ask or a re-ask).

    Attributes:
        number: 0 for the first ask.
        kind: ``initial``, ``format`` (re-ask after an unreadable reply) or ``governance``.
        raw: The model's reply as received.
        parsed: The reply after parsing (None when it could not be read).
        parse_error: Why it could not be read.
        repairs: Repairs the parser made.
        rules: Every rule evaluated on this attempt (``id``, ``severity``, ``fired``,
            ``message``, ``category``).
        messages: The messages sent (None when the run recorded none).
        messages_source: ``llm_calls.sqlite`` or ``decisions.jsonl`` (None without messages).
        cached: The reply came from the response cache.
    """

    number: int
    kind: str
    raw: str
    parsed: dict[str, Any] | None
    parse_error: str | None
    repairs: list[Any]
    rules: list[dict[str, Any]]
    messages: list[dict[str, str]] | None
    messages_source: str | None
    cached: bool

    @property
    def fired(self) -> list[dict[str, Any]]:
        """The rules that fired on this attempt."""
        return [r for r in self.rules if r.get("fired")]

    @property
    def feedback(self) -> str | None:
        """For a re-ask, the message that told the model why its last reply was refused."""
        if self.number == 0 or not self.messages or self.messages[-1].get("role") != "user":
            return None
        return self.messages[-1].get("content")


@dataclass(frozen=True)
class RecalledMemory:
    """A memory shown in a decision's prompt, with the fidelity it was recalled at."""

    memory: Memory | None
    id: str
    fidelity: str | None


@dataclass
class YearEntry:
    """One year of one household.

    Attributes:
        year: Simulation year.
        row: The household's row of ``agents_yearly.csv`` (column -> value).
        decision: Its ``decisions.jsonl`` record (None for baseline decisions).
        attempts: The decision's attempts, in order.
        memories: The memories its prompt showed, in prompt order.
        reflection: Its end-of-year reflection record (None when it did not reflect).
    """

    year: int
    row: dict[str, Any]
    decision: dict[str, Any] | None
    attempts: list[Attempt] = field(default_factory=list)
    memories: list[RecalledMemory] = field(default_factory=list)
    reflection: dict[str, Any] | None = None

    @property
    def rules_fired(self) -> list[dict[str, Any]]:
        """``rules_fired`` of the audit (attempt, id, severity), [] without an audit."""
        return list((self.decision or {}).get("rules_fired") or [])


def household_timeline(view: RunView, agent_id: int) -> list[YearEntry]:
    """Every complete year of household ``agent_id``, first year first.

    Raises:
        KeyError: the run has no household with this id.
    """
    rows = view.agents[view.agents["agent_id"] == agent_id]
    if rows.empty:
        raise KeyError(f"household {agent_id} is not in {view.path}")
    memories = {m.id: m for m in view.memories(agent_id)}
    entries = []
    for row in rows.to_dict("records"):
        year = int(row["year"])
        decision = view.decisions.get((agent_id, year))
        entries.append(YearEntry(
            year=year, row=row, decision=decision,
            attempts=_attempts(view, decision) if decision else [],
            memories=_recalled(decision, memories) if decision else [],
            reflection=view.reflections.get((agent_id, year))))
    return entries


def _attempts(view: RunView, decision: dict[str, Any]) -> list[Attempt]:
    out = []
    for raw in decision.get("attempts") or []:
        number = int(raw.get("attempt", len(out)))
        messages, source = _messages(view, decision, raw, number)
        out.append(Attempt(
            number=number, kind=str(raw.get("kind", "")), raw=str(raw.get("raw") or ""),
            parsed=raw.get("parsed"), parse_error=raw.get("parse_error"),
            repairs=list(raw.get("repairs") or []), rules=list(raw.get("rules") or []),
            messages=messages, messages_source=source, cached=bool(raw.get("cached"))))
    return out


def _messages(view: RunView, decision: dict[str, Any], attempt: dict[str, Any],
              number: int) -> tuple[list[dict[str, str]] | None, str | None]:
    seed = attempt.get("seed")
    call = view.call(int(seed)) if seed is not None else None
    if call is not None:
        return call.messages, FROM_CALL_LOG
    if number == 0 and decision.get("prompt"):
        return list(decision["prompt"]), FROM_AUDIT
    return None, None


def _recalled(decision: dict[str, Any], memories: dict[str, Memory]) -> list[RecalledMemory]:
    ids = [str(i) for i in decision.get("memory_ids") or []]
    fidelity = decision.get("memory_fidelity") or [None] * len(ids)
    return [RecalledMemory(memories.get(i), i, f) for i, f in zip(ids, fidelity, strict=False)]


#: Shown where an attempt has no messages: what the run kept and how to keep them next time.
PROMPT_MISSING = ("this run kept no prompts: it has no llm_calls.sqlite and "
                  "governance.audit.prompts was false; run with governance.audit.prompts: true "
                  "(or keep llm_calls.sqlite) to see them here")
