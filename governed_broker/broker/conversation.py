"""The governed conversation: ask, read, check the rules, re-ask with feedback, give up.

One decision, a household's (``broker.governed``) or an institution's (``broker.institutions``),
is one ``Conversation``: the prompt's messages, the messages of the next request, every
attempt's record, the re-asks by kind and the ERROR rules that fired last. ``converse`` runs it
until a reply is approved or a budget is exhausted (``governance.max_retries`` for re-asks
after broken rules, ``governance.max_parse_retries`` for re-asks after unreadable replies, two
separate budgets) and returns the status: ``approved``, ``retry_approved``, ``parse_failed``, or
what the decider says of a proposal that still breaks a rule (``rejected``; a household's rules
may keep it, ``unresolved``). What a reply means and which rules apply is the decider's
(``Decider``); the loop, the seeds, the requests and the records are the same for both.

Each request is seeded ``child_seed(seed, *seed_path, attempt)`` and keeps the original prompt
(a cacheable prefix); a re-ask adds only the rejected reply and the feedback (earlier rejected
turns are dropped to bound the prompt).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from governed_broker.config.broker import GovernanceConfig
from governed_broker.contracts.rules import RuleOutcome
from governed_broker.llm.base import LLMBackend, LLMRequest, LLMResponse, Sampling
from governed_broker.seeding import child_seed


@dataclass(frozen=True)
class RequestSettings:
    """Sampling settings of decision requests.

    The ``llm:`` section over the model's catalogue defaults: ``llm.sampling.resolve_sampling``.
    """

    sampling: Sampling = Sampling()
    max_tokens: int = 256
    num_ctx: int = 4096


@dataclass(frozen=True)
class Channel:
    """Where a conversation's requests go, and how far it may re-ask.

    Attributes:
        backend: The LLM backend (with the run's response cache and call log).
        request: Sampling settings of the requests.
        budgets: The governance settings (``max_retries``, ``max_parse_retries``,
            ``max_reports_per_retry``).
        seed: The experiment seed; request seeds derive from it.
    """

    backend: LLMBackend
    request: RequestSettings
    budgets: GovernanceConfig
    seed: int


@dataclass(frozen=True)
class Reading:
    """What a decider read in a reply.

    Attributes:
        value: The proposal (None: the reply could not be read).
        error: Why it could not be read (None when it was).
        audit: The proposal as the attempt's record shows it (``parsed``).
        repairs: What was repaired to read it.
    """

    value: Any = None
    error: str | None = None
    audit: Any = None
    repairs: Sequence[str] = ()


class Decider(Protocol):
    """What a conversation needs of the one deciding.

    How to read a reply, which rules a proposal breaks, the feedback of a re-ask, and the status of
    a proposal still breaking a rule when the re-asks are spent.
    """

    def read(self, response: LLMResponse) -> Reading:
        """What the reply proposes, or why it cannot be read."""
        ...

    def check(self, value: Any) -> list[RuleOutcome]:
        """The rules evaluated on a readable proposal."""
        ...

    def feedback_format(self, error: str) -> str:
        """The re-ask after an unreadable reply."""
        ...

    def feedback_governance(self, issues: Sequence[tuple[str, str]]) -> str:
        """The re-ask after broken rules: ``(rule id, message)`` pairs."""
        ...

    def exhausted(self, errors: Sequence[RuleOutcome]) -> str:
        """The status of a proposal still breaking ``errors`` when the re-asks are spent."""
        ...


@dataclass
class Conversation:
    """The evolving state of one governed decision.

    Attributes:
        prompt: The prompt's messages (every request starts with them).
        schema: The reply's JSON schema.
        seed_path: Request seeds are ``child_seed(seed, *seed_path, attempt)``.
        tag: The call log's tag of its requests.
        messages: The next request's messages.
        attempts: Every attempt's record (the audit's ``attempts``).
        retries: Re-asks so far, by kind (``format``, ``governance``).
        proposal: The last readable proposal (None: none yet).
        first_proposal: The first readable proposal.
        errors: The ERROR rules that fired on the last readable proposal.
        parse_error: Why the last unreadable reply could not be read.
    """

    prompt: Sequence[Mapping[str, str]]
    schema: Mapping[str, Any]
    seed_path: tuple[Any, ...]
    tag: str
    messages: list[dict[str, str]] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    retries: dict[str, int] = field(default_factory=lambda: {"format": 0, "governance": 0})
    proposal: Any = None
    first_proposal: Any = None
    errors: list[RuleOutcome] = field(default_factory=list)
    parse_error: str | None = None
    next_kind: str = "initial"

    def __post_init__(self) -> None:
        if not self.messages:
            self.messages = [dict(m) for m in self.prompt]

    @property
    def retry_count(self) -> int:
        """Re-asks of every kind."""
        return self.retries["format"] + self.retries["governance"]

    def retries_by_kind(self) -> dict[str, int]:
        """Re-asks by kind, and the transport retries the backend reported."""
        transport = sum(int(a["llm"].get("transport_retries", 0)) for a in self.attempts)
        return {**self.retries, "transport": transport}

    def rules_fired(self) -> list[dict[str, Any]]:
        """Every rule that fired, attempt by attempt."""
        return [{"attempt": a["attempt"], "id": r["id"], "severity": r["severity"]}
                for a in self.attempts for r in a["rules"] if r["fired"]]

    def usage(self) -> dict[str, Any]:
        """Tokens, time and cache hits over the attempts."""
        return {"prompt_tokens": sum(a["prompt_tokens"] for a in self.attempts),
                "completion_tokens": sum(a["completion_tokens"] for a in self.attempts),
                "latency_s": round(sum(a["latency_s"] for a in self.attempts), 4),
                "cache_hits": sum(1 for a in self.attempts if a["cached"])}

    def reask(self, kind: str, response: LLMResponse, feedback: str) -> None:
        """The next request: the prompt, the rejected reply and the feedback."""
        self.retries[kind] += 1
        self.next_kind = kind
        self.messages = [dict(m) for m in self.prompt] + [
            {"role": "assistant", "content": response.text},
            {"role": "user", "content": feedback}]


async def converse(conv: Conversation, decider: Decider, channel: Channel) -> str:
    """Ask until a proposal is approved or a budget is exhausted.

    Returns the status (module documentation).
    """
    backend, request, budgets, seed = (channel.backend, channel.request, channel.budgets,
                                       channel.seed)
    while True:
        attempt = len(conv.attempts)
        request_seed = child_seed(seed, *conv.seed_path, attempt)
        response, cleaned = (await backend.achat(LLMRequest.of(
            conv.messages, json_schema=conv.schema, **request.sampling.request_fields(),
            seed=request_seed, max_tokens=request.max_tokens, num_ctx=request.num_ctx,
            tag=conv.tag))).sanitised()
        reading = decider.read(response)
        record = {"attempt": attempt, "kind": conv.next_kind, "seed": request_seed,
                  "raw": response.text, "parsed": reading.audit,
                  "repairs": [*cleaned, *reading.repairs], "parse_error": reading.error,
                  "rules": [], "prompt_tokens": response.prompt_tokens,
                  "completion_tokens": response.completion_tokens,
                  "latency_s": round(response.latency_s, 4), "cached": response.cached,
                  "llm": dict(response.extra)}
        conv.attempts.append(record)
        if reading.error is not None:
            conv.parse_error = reading.error
            if conv.retries["format"] >= budgets.max_parse_retries:
                return "parse_failed"
            conv.reask("format", response, decider.feedback_format(reading.error))
            continue
        conv.proposal = reading.value
        if conv.first_proposal is None:
            conv.first_proposal = reading.value
        outcomes = decider.check(reading.value)
        record["rules"] = [o.to_json() for o in outcomes]
        conv.errors = [o for o in outcomes if o.fired and o.severity == "ERROR"]
        if not conv.errors:
            return "retry_approved" if conv.retries["governance"] else "approved"
        if conv.retries["governance"] >= budgets.max_retries:
            return decider.exhausted(conv.errors)
        issues = [(o.rule_id, o.message) for o in conv.errors]
        conv.reask("governance", response,
                   decider.feedback_governance(issues[: budgets.max_reports_per_retry]))
