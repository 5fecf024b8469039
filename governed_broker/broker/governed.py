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
import dataclasses
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from governed_broker import progress
from governed_broker.broker.aio import LoopThread
from governed_broker.broker.conversation import (
    Channel,
    Conversation,
    Reading,
    RequestSettings,
    converse,
)
from governed_broker.broker.rules import RuleSet
from governed_broker.broker.skills import SkillRegistry
from governed_broker.cognition.context import ContextBuilder, Prompt
from governed_broker.cognition.repair import parse_decision
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
from governed_broker.contracts.rules import RuleOutcome
from governed_broker.llm.base import LLMBackend, LLMResponse

if TYPE_CHECKING:  # pragma: no cover
    from governed_broker.cognition.reflection import ReflectionEngine


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
        """The event loop the backend's requests run on.

        The institutions' LLM makers share it with the backend.
        """
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
        """The model's identity and this process's call and cache statistics, for the manifest.

        And the knowledge base's statistics when there is one.
        """
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
        conv = Conversation(prompt.messages, prompt.json_schema, seed_path, "decision")
        house = _Household(self, situation, prompt)
        status = await converse(conv, house, Channel(self.backend, self.request,
                                                     self.governance, self.seed))
        return self._finish(house, conv, status)

    # -- outcome ----------------------------------------------------------------------------
    def _infeasibility(self, s: HouseholdSituation, action: str) -> str | None:
        if action not in s.allowed_actions:
            return f"{action} is not among this household's allowed actions"
        if not bool(s.affordable.get(action, True)):
            return f"{action} costs more than this household's savings"
        return None

    def _finish(self, house: _Household, conv: Conversation, status: str) -> Decision:
        s, reply = house.situation, conv.proposal
        backstop = None
        if status in ("approved", "retry_approved", "unresolved"):
            assert reply is not None
            backstop = self._infeasibility(s, reply.decision)
            action = self.fallback_action if backstop else reply.decision
            status = "rejected" if backstop else status
        else:
            action = self.fallback_action
        decision = Decision(
            agent_id=s.agent_id,
            proposed_action=conv.first_proposal.decision if conv.first_proposal else None,
            action=action,
            status=status,
            threat_label=reply.threat_appraisal.label if reply else None,
            coping_label=reply.coping_appraisal.label if reply else None,
            retries=conv.retry_count,
            reason=self._reason(conv, status, backstop),
            decision_maker=self.name,
        )
        return dataclasses.replace(decision,
                                   audit=self._audit_record(house, conv, decision, backstop))

    def _reason(self, conv: Conversation, status: str, backstop: str | None) -> str:
        if backstop:
            return f"rejected: {backstop}; executed {self.fallback_action}"
        if status == "parse_failed":
            return (
                f"no readable reply after {len(conv.attempts)} attempt(s) "
                f"({conv.parse_error}); executed {self.fallback_action}"
            )
        ids = ", ".join(o.rule_id for o in conv.errors)
        if status == "rejected":
            return (
                f"still violated {ids} after {conv.retries['governance']} re-ask(s); "
                f"executed {self.fallback_action}"
            )
        assert conv.proposal is not None
        if status == "unresolved":
            return (f"kept its proposal against {ids} after {conv.retries['governance']} "
                    f"re-ask(s) (the rules declare on_exhausted: keep): {conv.proposal.reason}")
        return conv.proposal.reason

    def _audit_record(self, house: _Household, conv: Conversation, decision: Decision,
                      backstop: str | None) -> dict[str, Any]:
        s, p, reply, status = house.situation, house.prompt, conv.proposal, decision.status
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
            "proposed_action": decision.proposed_action,
            "final_proposal": reply.decision if reply else None,
            "executed_action": decision.action,
            "status": status,
            "fallback": status in FALLBACK_STATUSES,
            "unresolved_rules": [o.rule_id for o in conv.errors]
            if status == "unresolved" else [],
            "backstop": backstop,
            "threat_label": decision.threat_label,
            "coping_label": decision.coping_label,
            "reason": decision.reason,
            "retries": conv.retry_count,
            "retries_by_kind": conv.retries_by_kind(),
            "rules_fired": conv.rules_fired(),
            "attempts": conv.attempts,
            **conv.usage(),
        }
        if self.governance.audit.prompts:
            record["prompt"] = [dict(m) for m in p.messages]
        return record


class _Household:
    """The household's side of a governed conversation (``broker.conversation.Decider``)."""

    def __init__(self, broker: GovernedBroker, situation: HouseholdSituation,
                 prompt: Prompt) -> None:
        self.broker = broker
        self.situation = situation
        self.prompt = prompt

    def read(self, response: LLMResponse) -> Reading:
        """The decision reply, repaired where it can be (``cognition.repair``)."""
        b = self.broker
        result = parse_decision(response.text, b.registry.ids, b.context.scale,
                                b.context.max_reason_chars,
                                response.parsed if isinstance(response.parsed, dict) else None)
        return Reading(result.reply, result.error,
                       result.reply.to_json() if result.reply is not None else None,
                       result.repairs)

    def check(self, reply: DecisionReply) -> list[RuleOutcome]:
        """The governance rules of the profile on this reply."""
        return self.broker.rules.evaluate(self.situation, reply)

    def feedback_format(self, error: str) -> str:
        """The re-ask after an unreadable reply."""
        return self.broker.context.feedback_format(error)

    def feedback_governance(self, issues: Sequence[tuple[str, str]]) -> str:
        """The re-ask after broken rules."""
        return self.broker.context.feedback_governance(issues)

    def exhausted(self, errors: Sequence[RuleOutcome]) -> str:
        """``unresolved`` when the broken rules keep their proposal, else ``rejected``."""
        return "unresolved" if self.broker.rules.keeps(list(errors)) else "rejected"
