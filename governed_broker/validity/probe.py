"""Asking the experiment's model about the battery's vignettes, through the experiment's broker.

The battery decides its vignettes with the governed broker a run of the experiment would build
(``broker.factory.build_decision_maker``): the same backend with the response cache and a call
log, the same context builder and templates, the same rules, retries and audit format. Only the
seed differs: a thin layer in front of the cache (``BatteryBackend``) gives every request of
replicate ``r`` of every vignette the same seed (``plan.common_seed``: common random numbers,
derived from the battery's own seed, so a card does not depend on the experiment seed; the
audit keeps the broker's own seed of each attempt and records the one sent as
``battery_seed``). The ``synonyms`` arm is decided by the same broker with a context builder
whose action descriptions are the battery's synonyms; the ``trigger`` arm's first proposal is
the battery's scripted rule-breaking reply, given by the same layer (never sent to the model,
never cached, not a logged call), so that the broker's rules block it and the model answers the
re-ask.

``Prober.ask`` returns one ``Reply`` per (vignette, replicate): the first readable proposal
(labels, action, reason), whether the rules blocked it, and the outcome after governance.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from governed_broker.broker.factory import CALL_LOG_FILE, build_decision_maker
from governed_broker.broker.governed import GovernedBroker
from governed_broker.cognition.context import ContextBuilder
from governed_broker.config.base import ConfigError
from governed_broker.config.resolved import ResolvedExperiment, resolve_experiment
from governed_broker.contracts.decision import Decision, HouseholdSituation
from governed_broker.llm.base import LLMBackend, LLMError, LLMRequest, LLMResponse
from governed_broker.llm.wrappers import BackendWrapper
from governed_broker.seeding import child_seed
from governed_broker.validity.plan import (
    ARMS,
    BatteryPlan,
    Vignette,
    common_seed,
    trigger_reply,
)
from governed_broker.validity.situations import SituationBuilder

#: Marks a scripted first proposal in the audit (``attempts[0].llm``).
TRIGGER_MARK = "validity_trigger"
#: The seed a battery request was sent with, in the audit (``attempts[i].llm``).
COMMON_SEED_MARK = "battery_seed"


@dataclass(frozen=True)
class Reply:
    """What one decision of the battery came to.

    Attributes:
        vignette: The vignette's key. replicate: Its replicate. agent_id: Household id.
        threat / coping / action / reason: The first readable proposal (None: none readable);
            for a trigger, the scripted proposal.
        blocked: Whether an ERROR rule fired on that proposal.
        status: The broker's status. final_action: The last readable proposal.
        final_threat / final_coping: Its labels.
        allowed: The actions offered (the reply schema's enum).
        context_hash: The hash of the first prompt.
    """

    vignette: str
    replicate: int
    agent_id: int
    threat: str | None
    coping: str | None
    action: str | None
    reason: str | None
    blocked: bool
    status: str
    final_action: str | None
    final_threat: str | None
    final_coping: str | None
    allowed: tuple[str, ...] = ()
    context_hash: str = ""

    @classmethod
    def from_audit(cls, vignette: str, replicate: int, audit: Mapping[str, Any]) -> Reply:
        """Read a reply from the broker's audit record of the decision."""
        first = next((a for a in audit["attempts"] if a["parsed"] is not None), None)
        parsed = first["parsed"] if first else None
        return cls(
            vignette=vignette, replicate=replicate, agent_id=int(audit["agent_id"]),
            threat=parsed["threat_appraisal"]["label"] if parsed else None,
            coping=parsed["coping_appraisal"]["label"] if parsed else None,
            action=parsed["decision"] if parsed else None,
            reason=parsed["reason"] if parsed else None,
            blocked=bool(first) and any(r["fired"] and r["severity"] == "ERROR"
                                        for r in first["rules"]),
            status=str(audit["status"]), final_action=audit["final_proposal"],
            final_threat=audit["threat_label"], final_coping=audit["coping_label"],
            allowed=tuple(audit.get("allowed_actions", ())),
            context_hash=str(audit.get("context_hash", "")),
        )


class BatteryBackend(BackendWrapper):
    """In front of the cache.

    Answers the first attempt of trigger decisions with their scripted proposal, and sends every
    other request with the common seed of its replicate (what the broker derived is mapped by
    ``share``); a request with a seed it was not told of is an error, never sent with the broker's
    seed.
    """

    def __init__(self, inner: LLMBackend) -> None:
        super().__init__(inner)
        self.scripted: dict[int, str] = {}
        self.common: dict[int, int] = {}

    def add(self, seed: int, reply: Mapping[str, Any]) -> None:
        """Answer the first request with ``seed`` (one with no assistant turn) by ``reply``."""
        self.scripted[seed] = json.dumps(reply)

    def share(self, seed: int, common: int) -> None:
        """Send a request the broker seeded with ``seed`` with the seed ``common`` instead."""
        self.common[seed] = common

    async def achat(self, request: LLMRequest) -> LLMResponse:
        """The scripted trigger reply of a first request with a triggered seed, else the model's."""
        first = not any(m.get("role") == "assistant" for m in request.messages)
        if first and request.seed in self.scripted:
            text = self.scripted[request.seed]
            return LLMResponse(text=text, parsed=json.loads(text), backend="validity",
                               model="scripted-trigger", extra={TRIGGER_MARK: True})
        common = self.common.get(request.seed)
        if common is None:
            raise LLMError(f"validity battery: a request with seed {request.seed} that no "
                           "planned decision derives (more attempts than the governance "
                           "budgets allow?)")
        response = await self.inner.achat(replace(request, seed=common))
        return replace(response, extra={**response.extra, COMMON_SEED_MARK: common})


def battery_experiment(experiment: ResolvedExperiment, seed: int) -> ResolvedExperiment:
    """The experiment as the battery runs it.

    The battery's seed, no reflection (a battery decides single years; it never reaches a year's
    end).
    """
    config = experiment.config.model_copy(update={
        "seed": seed,
        "reflection": experiment.config.reflection.model_copy(update={"enabled": False})})
    return resolve_experiment(config)


def synonym_context(context: ContextBuilder, synonyms: Mapping[str, str]) -> ContextBuilder:
    """``context`` with the action descriptions of ``synonyms`` (others kept)."""
    return ContextBuilder(context.templates, {**context.action_descriptions, **synonyms},
                          context.scale, token_budget=context.token_budget,
                          max_memories=context.max_memories,
                          max_reason_chars=context.max_reason_chars,
                          appraisal_order=context.appraisal_order, knowledge=context.knowledge)


@contextmanager
def _showing(broker: GovernedBroker, context: ContextBuilder) -> Iterator[None]:
    """The broker builds its prompts with ``context`` for a while."""
    before, broker.context = broker.context, context
    try:
        yield
    finally:
        broker.context = before


class Prober:
    """Decides a battery plan's vignettes with the experiment's broker.

    Args:
        experiment: The experiment being validated.
        plan: The battery's vignettes.
        work_dir: Where the broker writes ``decisions.jsonl`` and ``llm_calls.sqlite``.
        backend: A ready backend (tests); by default the experiment's, with its response cache
            and a call log in ``work_dir``.
    """

    def __init__(self, experiment: ResolvedExperiment, plan: BatteryPlan, work_dir: Path,
                 backend: LLMBackend | None = None) -> None:
        self.plan = plan
        self.seed = plan.battery.tests.seed
        self.experiment = battery_experiment(experiment, self.seed)
        self.situations = SituationBuilder(self.experiment, self.seed)
        if backend is None:
            from governed_broker.llm import backend_from_config

            config = self.experiment.config
            backend = backend_from_config(config.llm, call_log_path=work_dir / CALL_LOG_FILE,
                                          base_dir=config.base_dir)
        self.backend = BatteryBackend(backend)
        self.broker = build_decision_maker(self.experiment, work_dir, backend=self.backend)
        #: The model identity and the call and cache statistics, once ``ask`` has run.
        self.provenance: dict[str, Any] = {}
        self._built: dict[str, HouseholdSituation] = {}

    def situation(self, vignette: Vignette, replicate: int) -> HouseholdSituation:
        """The situation of one replicate of a vignette (its arm's action order).

        Built once per vignette, the replicates differing only in their household id.
        """
        built = self._built.get(vignette.key)
        if built is None:
            order = (tuple(reversed(self.experiment.domain.actions))
                     if vignette.arm == "reversed_order" else None)
            built = self._built[vignette.key] = self.situations.build(
                vignette.spec, vignette.agent_id(0), order)
        return replace(built, agent_id=vignette.agent_id(replicate))

    def ask(self, batch_size: int = 8) -> list[Reply]:
        """Decide every (vignette, replicate) of the plan; replies in plan order."""
        try:
            asks = list(self.plan.asks())
            by_id = {v.agent_id(r): (v, r) for v, r in asks}
            self._share_seeds(asks)
            synonyms = synonym_context(self.broker.context, self.plan.battery.vignettes.synonyms)
            decisions: list[Decision] = []
            for arm in ARMS:
                batch = [self.situation(v, r) for v, r in asks if v.arm == arm]
                if arm == "trigger":
                    self._script_triggers(batch, by_id)
                context = synonyms if arm == "synonyms" else self.broker.context
                with _showing(self.broker, context):
                    decisions += self._decide(batch, batch_size)
            replies = {d.agent_id: Reply.from_audit(by_id[d.agent_id][0].key,
                                                    by_id[d.agent_id][1], d.audit)
                       for d in decisions}
            self.provenance = self.broker.provenance()
            return [replies[v.agent_id(r)] for v, r in asks]
        finally:
            self.broker.close()

    def _share_seeds(self, asks: list[tuple[Vignette, int]]) -> None:
        """Map every seed the broker can derive for a decision to its replicate's common seed."""
        governance = self.experiment.config.governance
        attempts = 1 + governance.max_retries + governance.max_parse_retries
        for v, r in asks:
            for attempt in range(attempts):
                self.backend.share(child_seed(self.seed, "decision", v.agent_id(r), v.spec.year,
                                              attempt), common_seed(self.seed, r, attempt))

    def _script_triggers(self, batch: list[HouseholdSituation],
                         by_id: Mapping[int, tuple[Vignette, int]]) -> None:
        domain = self.experiment.domain
        for s in batch:
            vignette = by_id[s.agent_id][0]
            assert vignette.trigger is not None
            try:
                reply = trigger_reply(vignette.trigger, domain, s.allowed_actions)
            except ValueError as exc:
                raise ConfigError(f"{self.plan.battery.directory / 'tests.yaml'}: trigger "
                                  f"{vignette.uses}: {exc}") from exc
            self.backend.add(child_seed(self.seed, "decision", s.agent_id, s.year, 0), reply)

    def _decide(self, batch: list[HouseholdSituation], size: int) -> list[Decision]:
        out: list[Decision] = []
        size = max(size, 4 * int(self.backend.max_concurrency))
        for start in range(0, len(batch), size):
            out += self.broker.decide(batch[start:start + size])
        return out
