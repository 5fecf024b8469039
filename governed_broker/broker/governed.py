"""The governed broker: the LLM proposes, the rules dispose, the world executes.

For each household of a year: build the PMT context -> ask the LLM (schema-constrained) -> parse
(tolerantly, every repair recorded) -> evaluate the governance rules -> on an ERROR re-ask with
the violated rules explained (``governance.max_retries``), on an unreadable reply re-ask with
the parse error (``governance.max_parse_retries``, a separate budget) -> return the approved
action, or the default action with status ``rejected`` / ``parse_failed``. Whatever the profile,
an action the household may not take or cannot afford is never returned as the action to
execute. The broker never touches the world: it returns ``Decision`` objects, and the world
executes them. Every decision's full story goes to ``decisions.jsonl``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from governed_broker import progress
from governed_broker.broker.aio import LoopThread
from governed_broker.broker.rules import RuleOutcome, RuleSet
from governed_broker.broker.skills import SkillRegistry
from governed_broker.cognition.context import ContextBuilder, Prompt
from governed_broker.cognition.repair import ParseResult, parse_decision
from governed_broker.cognition.schema import DecisionReply
from governed_broker.config.base import ConfigError
from governed_broker.config.broker import GovernanceConfig
from governed_broker.contracts.decision import (
    FALLBACK_STATUSES,
    Decision,
    HouseholdSituation,
    ReflectionTarget,
)
from governed_broker.contracts.jsonl import JsonlWriter
from governed_broker.llm.base import LLMBackend, LLMRequest, LLMResponse, Sampling
from governed_broker.seeding import child_seed

if TYPE_CHECKING:  # pragma: no cover
    from governed_broker.cognition.reflection import ReflectionEngine


@dataclass(frozen=True)
class RequestSettings:
    """Sampling settings of decision requests (the ``llm:`` section over the model's
    catalogue defaults: ``llm.sampling.resolve_sampling``)."""

    sampling: Sampling = Sampling()
    max_tokens: int = 256
    num_ctx: int = 4096


@dataclass
class _Conversation:
    """The evolving state of one household's decision."""

    situation: HouseholdSituation
    prompt: Prompt
    messages: list[dict[str, str]]
    seed_path: tuple[Any, ...]  # request seeds: child_seed(seed, *seed_path, attempt)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    retries: dict[str, int] = field(default_factory=lambda: {"format": 0, "governance": 0})
    first_proposal: str | None = None
    last_reply: DecisionReply | None = None
    last_errors: list[RuleOutcome] = field(default_factory=list)
    last_parse_error: str | None = None
    next_kind: str = "initial"


def state_before(s: HouseholdSituation) -> dict[str, Any]:
    """What the audit records of a household's situation before its decision."""
    return {
        "tenure": s.tenure,
        "flood_zone": s.flood_zone,
        "elevated": s.elevated,
        "insured": s.insured,
        "savings_usd": s.savings_usd,
        "flooded": s.flooded,
        "depth_m": s.depth_m,
        "damage_usd": s.damage_usd,
        "payout_usd": s.payout_usd,
    }


class GovernedBroker:
    """The LLM ``DecisionMaker`` with governance, retries and audit.

    Args:
        backend: The LLM backend (with cache / call log wrappers as configured).
        context: Builds each household's prompt.
        registry: The skill registry (known actions, default action).
        rules: The rule table under the experiment's profile.
        governance: Retry budgets, fallback action and audit options.
        seed: The experiment seed; request seeds derive from (seed, "decision", agent, year,
            attempt).
        run_id: Identifies the run in every audit record.
        request: Sampling settings.
        audit_path: Where to stream ``decisions.jsonl`` (None: keep records only in
            ``Decision.audit``).
        reflection: Optional end-of-year reflection engine.
    """

    def __init__(
        self,
        backend: LLMBackend,
        context: ContextBuilder,
        registry: SkillRegistry,
        rules: RuleSet,
        governance: GovernanceConfig,
        seed: int,
        run_id: str = "",
        request: RequestSettings | None = None,
        audit_path: Path | None = None,
        reflection: ReflectionEngine | None = None,
    ) -> None:
        self.backend = backend
        self.context = context
        self.registry = registry
        self.rules = rules
        self.governance = governance
        self.seed = seed
        self.run_id = run_id
        self.request = request or RequestSettings()
        self.reflection = reflection
        self.name = f"llm:{backend.kind}/{backend.model_id}"
        self.fallback_action = governance.fallback_action or registry.default_action
        if self.fallback_action not in registry:
            raise ConfigError(
                f"governance.fallback_action {self.fallback_action!r} is not an action of the "
                f"skill registry ({', '.join(registry.ids)})"
            )
        self._audit = JsonlWriter(audit_path) if audit_path is not None else None
        self._loop = LoopThread()

    @property
    def loop(self) -> LoopThread:
        """The event loop the backend's requests run on (the institutions' LLM makers share
        it with the backend)."""
        return self._loop

    # -- DecisionMaker API ------------------------------------------------------------------
    def decide(self, situations: Sequence[HouseholdSituation]) -> list[Decision]:
        """Decide for every household of one year (concurrently); results in input order."""
        progress.phase("decisions", len(situations))
        decisions = self._loop.run(self.adecide(situations))
        self.backend.flush()
        if self._audit is not None:
            self._audit.write_many(d.audit for d in decisions)
        return decisions

    def end_year(self, year: int, households: Sequence[ReflectionTarget]) -> None:
        """Run the reflection engine (when configured) over the households."""
        if self.reflection is not None:
            self._loop.run(self.reflection.areflect_due(households, year))
            self.backend.flush()

    def provenance(self) -> dict[str, Any]:
        """The model's identity and this process's call and cache statistics (and the
        knowledge base's statistics when there is one), for the manifest."""
        info = {"backend": self.backend.describe(),
                "sampling": asdict(self.request.sampling),
                "stats": self.backend.stats()}
        if self.context.knowledge is not None:
            info["knowledge_base"] = self.context.knowledge.stats()
        return info

    def close(self) -> None:
        """Flush the audit, release the backend and the event loop."""
        if self._audit is not None:
            self._audit.close()
        if self.reflection is not None:
            self.reflection.close()
        self._loop.run(self.backend.aclose())
        self._loop.close()

    # -- async core -------------------------------------------------------------------------
    async def adecide(self, situations: Sequence[HouseholdSituation]) -> list[Decision]:
        """Decide concurrently, at most ``backend.max_concurrency`` households in flight."""
        semaphore = asyncio.Semaphore(max(1, int(self.backend.max_concurrency)))

        async def one(situation: HouseholdSituation) -> Decision:
            async with semaphore:
                decision = await self.decide_one(situation)
            progress.advance()
            return decision

        try:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(one(s)) for s in situations]
        except ExceptionGroup as eg:  # the first failure is the one to report
            raise eg.exceptions[0] from None
        return [t.result() for t in tasks]

    async def decide_one(self, situation: HouseholdSituation,
                         sample: int | None = None) -> Decision:
        """The full context -> LLM -> parse -> validate -> retry loop for one household.

        Args:
            situation: The household's situation.
            sample: In cohort mode, which of the cohort's conversations this is: its request
                seeds derive from (seed, "cohort", agent, year, sample, attempt) instead of
                (seed, "decision", agent, year, attempt).
        """
        if self.fallback_action not in situation.allowed_actions:
            raise ValueError(
                f"household {situation.agent_id}: the fallback action {self.fallback_action!r} "
                f"is not among its allowed actions {situation.allowed_actions}"
            )
        prompt = await self.context.abuild(situation)
        seed_path = (("decision", situation.agent_id, situation.year) if sample is None else
                     ("cohort", situation.agent_id, situation.year, sample))
        conv = _Conversation(situation, prompt, [dict(m) for m in prompt.messages], seed_path)
        status = await self._converse(conv)
        return self._finish(conv, status)

    async def _converse(self, conv: _Conversation) -> str:
        """Ask until approved or a budget is exhausted; returns the provisional status."""
        budget = self.governance
        while True:
            seed = child_seed(self.seed, *conv.seed_path, len(conv.attempts))
            response, cleaned = (await self._ask(conv, seed)).sanitised()
            result = parse_decision(
                response.text,
                self.registry.ids,
                self.context.scale,
                self.context.max_reason_chars,
                response.parsed if isinstance(response.parsed, dict) else None,
            )
            record = self._attempt_record(conv, seed, response, result)
            record["repairs"] = cleaned + record["repairs"]
            if not result.ok:
                conv.last_parse_error = result.error
                if conv.retries["format"] >= budget.max_parse_retries:
                    return "parse_failed"
                self._reask(conv, "format", response, self.context.feedback_format(result.error))
                continue
            reply = result.reply
            conv.last_reply = reply
            conv.first_proposal = conv.first_proposal or reply.decision
            outcomes = self.rules.evaluate(conv.situation, reply)
            record["rules"] = [o.to_json() for o in outcomes]
            conv.last_errors = [o for o in outcomes if o.fired and o.severity == "ERROR"]
            if not conv.last_errors:
                return "retry_approved" if conv.retries["governance"] else "approved"
            if conv.retries["governance"] >= budget.max_retries:
                return "unresolved" if self.rules.keeps(conv.last_errors) else "rejected"
            issues = [(o.rule_id, o.message) for o in conv.last_errors]
            feedback = self.context.feedback_governance(issues[: budget.max_reports_per_retry])
            self._reask(conv, "governance", response, feedback)

    async def _ask(self, conv: _Conversation, seed: int) -> LLMResponse:
        request = LLMRequest.of(
            conv.messages,
            json_schema=conv.prompt.json_schema,
            **self.request.sampling.request_fields(),
            seed=seed,
            max_tokens=self.request.max_tokens,
            num_ctx=self.request.num_ctx,
            tag="decision",
        )
        return await self.backend.achat(request)

    def _attempt_record(
        self, conv: _Conversation, seed: int, response: LLMResponse, result: ParseResult
    ) -> dict[str, Any]:
        record = {
            "attempt": len(conv.attempts),
            "kind": conv.next_kind,
            "seed": seed,
            "raw": response.text,
            "parsed": result.reply.to_json() if result.reply is not None else None,
            "repairs": list(result.repairs),
            "parse_error": result.error,
            "rules": [],
            "prompt_tokens": response.prompt_tokens,
            "completion_tokens": response.completion_tokens,
            "latency_s": round(response.latency_s, 4),
            "cached": response.cached,
            "llm": dict(response.extra),
        }
        conv.attempts.append(record)
        return record

    def _reask(
        self, conv: _Conversation, kind: str, response: LLMResponse, feedback: str
    ) -> None:
        # The conversation keeps the original prompt (a cacheable prefix), the rejected reply
        # and the feedback; earlier rejected turns are dropped to bound the prompt.
        conv.retries[kind] += 1
        conv.next_kind = kind
        conv.messages = [dict(m) for m in conv.prompt.messages] + [
            {"role": "assistant", "content": response.text},
            {"role": "user", "content": feedback},
        ]

    # -- outcome ----------------------------------------------------------------------------
    def _infeasibility(self, s: HouseholdSituation, action: str) -> str | None:
        if action not in s.allowed_actions:
            return f"{action} is not among this household's allowed actions"
        if not bool(s.affordable.get(action, True)):
            return f"{action} costs more than this household's savings"
        return None

    def _finish(self, conv: _Conversation, status: str) -> Decision:
        s, reply = conv.situation, conv.last_reply
        backstop = None
        if status in ("approved", "retry_approved", "unresolved"):
            assert reply is not None
            backstop = self._infeasibility(s, reply.decision)
            action = self.fallback_action if backstop else reply.decision
            status = "rejected" if backstop else status
        else:
            action = self.fallback_action
        reason = self._reason(conv, status, backstop)
        retries = conv.retries["format"] + conv.retries["governance"]
        audit = self._audit_record(conv, status, action, reason, backstop)
        return Decision(
            agent_id=s.agent_id,
            proposed_action=conv.first_proposal,
            action=action,
            status=status,
            threat_label=reply.threat_appraisal.label if reply else None,
            coping_label=reply.coping_appraisal.label if reply else None,
            retries=retries,
            reason=reason,
            decision_maker=self.name,
            audit=audit,
        )

    def _reason(self, conv: _Conversation, status: str, backstop: str | None) -> str:
        if backstop:
            return f"rejected: {backstop}; executed {self.fallback_action}"
        if status == "parse_failed":
            return (
                f"no readable reply after {len(conv.attempts)} attempt(s) "
                f"({conv.last_parse_error}); executed {self.fallback_action}"
            )
        ids = ", ".join(o.rule_id for o in conv.last_errors)
        if status == "rejected":
            return (
                f"still violated {ids} after {conv.retries['governance']} re-ask(s); "
                f"executed {self.fallback_action}"
            )
        if status == "unresolved":
            assert conv.last_reply is not None
            return (f"kept its proposal against {ids} after {conv.retries['governance']} "
                    f"re-ask(s) (the rules declare on_exhausted: keep): {conv.last_reply.reason}")
        assert conv.last_reply is not None
        return conv.last_reply.reason

    def _audit_record(
        self,
        conv: _Conversation,
        status: str,
        action: str,
        reason: str,
        backstop: str | None,
    ) -> dict[str, Any]:
        s, p, reply = conv.situation, conv.prompt, conv.last_reply
        fired = [
            {"attempt": a["attempt"], "id": r["id"], "severity": r["severity"]}
            for a in conv.attempts
            for r in a["rules"]
            if r["fired"]
        ]
        record: dict[str, Any] = {
            "run_id": self.run_id,
            "year": s.year,
            "agent_id": s.agent_id,
            "decision_maker": self.name,
            "profile": self.rules.profile,
            "context_hash": p.context_hash,
            "estimated_prompt_tokens": p.estimated_tokens,
            "memory_ids": list(p.memory_ids),
            "memory_fidelity": list(p.memory_fidelity),
            "knowledge_sources": list(p.knowledge_sources),
            "knowledge_retrieval": p.knowledge_retrieval,
            "state_before": state_before(s),
            "allowed_actions": list(s.allowed_actions),
            "action_costs_usd": dict(s.action_costs_usd),
            "affordable": dict(s.affordable),
            "proposed_action": conv.first_proposal,
            "final_proposal": reply.decision if reply else None,
            "executed_action": action,
            "status": status,
            "fallback": status in FALLBACK_STATUSES,
            "unresolved_rules": [o.rule_id for o in conv.last_errors]
            if status == "unresolved" else [],
            "backstop": backstop,
            "threat_label": reply.threat_appraisal.label if reply else None,
            "coping_label": reply.coping_appraisal.label if reply else None,
            "reason": reason,
            "retries": conv.retries["format"] + conv.retries["governance"],
            "retries_by_kind": {
                **conv.retries,
                # transport retries happen inside the backend; counted when it reports them
                "transport": sum(int(a["llm"].get("transport_retries", 0)) for a in conv.attempts),
            },
            "rules_fired": fired,
            "attempts": conv.attempts,
            "prompt_tokens": sum(a["prompt_tokens"] for a in conv.attempts),
            "completion_tokens": sum(a["completion_tokens"] for a in conv.attempts),
            "latency_s": round(sum(a["latency_s"] for a in conv.attempts), 4),
            "cache_hits": sum(1 for a in conv.attempts if a["cached"]),
        }
        if self.governance.audit.prompts:
            record["prompt"] = [dict(m) for m in p.messages]
        return record
