"""The governed LLM maker of an institution (``institutions.<name>.maker: llm``).

For the government or the insurer, once a year: build the prompt from the institution's facts,
levers and limits (``institutions.yaml``, ``configs/institutions/prompts.yaml``) -> ask the LLM
for a JSON object (schema-constrained: a short assessment first, then a number for every
lever, then a reason) -> parse -> evaluate the institution's rules under the profile
(``sim.institution_rules``) -> on an ERROR re-ask with the violated rules explained
(``governance.max_retries``), on an unreadable reply re-ask with the parse error
(``governance.max_parse_retries``) -> return the approved levers, or, when a budget is
exhausted, the fallback: last year's levers brought within the limits (status ``rejected`` or
``parse_failed``). The world checks every limit again before anything takes effect. Requests
are seeded from (seed, "institution", name, year, attempt), go through the run's response cache
and call log (tag ``institution:<name>``), and every attempt is recorded in the decision's audit
(``institutions.jsonl``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from governed_broker import progress
from governed_broker.broker.aio import LoopThread
from governed_broker.broker.conversation import (
    Channel,
    Conversation,
    Reading,
    RequestSettings,
    converse,
)
from governed_broker.broker.governed import GovernedBroker
from governed_broker.cognition.sentences import hard_cap, whole_sentences
from governed_broker.config.base import ConfigError
from governed_broker.config.broker import GovernanceConfig
from governed_broker.config.institutions import (
    INSTITUTION_TEMPLATE_EXTRAS,
    INSTITUTION_TEMPLATES,
    InstitutionDomain,
    InstitutionsDomain,
)
from governed_broker.config.resolved import ResolvedExperiment
from governed_broker.config.templates import TemplateSet, load_templates
from governed_broker.contracts.decision import DecisionMaker
from governed_broker.contracts.institutions import (
    FACTS,
    InstitutionDecision,
    InstitutionMaker,
    InstitutionSituation,
    format_value,
    lever_value,
)
from governed_broker.contracts.rules import RuleOutcome
from governed_broker.llm.base import LLMBackend, LLMResponse
from governed_broker.llm.reliability import parse_json_reply
from governed_broker.llm.sampling import resolve_sampling
from governed_broker.sim.institution_rules import evaluate, statements, within_limits

#: Length an institution's assessment and reason are asked to keep to (characters): one
#: short sentence, as households' reasons (``governance.context.max_reason_chars``'s default).
MAX_TEXT_CHARS = 100
#: The reply's text fields, around the levers: appraise first, choose, then give the reason.
TEXT_FIELDS = ("assessment", "reason")


class InstitutionBroker:
    """An institution's ``InstitutionMaker`` backed by an LLM through the governed loop.

    Args:
        institution: ``government`` or ``insurer``.
        domains: The institutions' domain (this institution's levers and rules; the others'
            levers, to word what they decided before it).
        templates: The prompt templates (``INSTITUTION_TEMPLATES``).
        backend: The LLM backend (with the run's cache and call log).
        loop: The event loop the backend's requests run on (shared with the households'
            broker when there is one).
        governance: Retry budgets and whether prompts go into the audit.
        profile: Which rule severities apply (``institutions.profile``).
        seed: The experiment seed.
        run_id: The run's id, in every record.
        request: Sampling settings.
        owns_backend: Close the backend and the loop on ``close`` (False when they belong to
            the households' broker).
    """

    def __init__(self, institution: str, domains: InstitutionsDomain, templates: TemplateSet,
                 backend: LLMBackend, loop: LoopThread, *, governance: GovernanceConfig,
                 profile: str, seed: int, run_id: str, request: RequestSettings,
                 owns_backend: bool) -> None:
        self.institution = institution
        self.domains = domains
        self.domain: InstitutionDomain = domains.of(institution)
        self.templates = templates
        self.backend = backend
        self.loop = loop
        self.governance = governance
        self.profile = profile
        self.seed = seed
        self.run_id = run_id
        self.request = request
        self.owns_backend = owns_backend
        self.name = f"llm:{backend.kind}/{backend.model_id}"
        self._units = {f.name: f.unit for f in FACTS[institution]}

    # -- InstitutionMaker API ---------------------------------------------------------------
    def decide(self, situation: InstitutionSituation) -> InstitutionDecision:
        """Ask, validate and re-ask until approved or a budget is exhausted."""
        progress.phase("institutions", 1, label=self.institution)
        decision = self.loop.run(self.adecide(situation))
        progress.advance()
        self.backend.flush()
        return decision

    def provenance(self) -> dict[str, Any]:
        """The model's identity and sampling.

        Call and cache statistics: the run's ``llm`` entry when the households' broker shares the
        backend.
        """
        info = {"backend": self.backend.describe(), "sampling": asdict(self.request.sampling),
                "profile": self.profile}
        if self.owns_backend:
            info["stats"] = self.backend.stats()
        return info

    def close(self) -> None:
        """Release the backend and the loop when they are this maker's own."""
        if self.owns_backend:
            self.loop.run(self.backend.aclose())
            self.loop.close()

    # -- the loop ---------------------------------------------------------------------------
    async def adecide(self, situation: InstitutionSituation) -> InstitutionDecision:
        """The governed conversation for one year (module documentation)."""
        conv = Conversation(self.prompt(situation), self.schema(situation),
                            ("institution", self.institution, situation.year),
                            f"institution:{self.institution}")
        status = await converse(conv, _Institution(self, situation),
                                Channel(self.backend, self.request, self.governance, self.seed))
        return self._finish(situation, conv, status)

    # -- prompt, schema, parsing ------------------------------------------------------------
    def prompt(self, situation: InstitutionSituation) -> list[dict[str, str]]:
        """The system and user messages of a situation."""
        t, units = self.templates, self.templates.extra["unit_words"]
        texts = self.templates.extra["reply_texts"]
        reply = {"assessment": texts["assessment"],
                 **{lever: "<number>" for lever in situation.levers},
                 "reason": texts["reason"]}
        system = t.render("system", role=self.domain.description,
                          reply_format=json.dumps(reply).replace('"<number>"', "<number>"))
        facts = [t.render("fact_line", text=text,
                          value=format_value(situation.facts.get(name), self._units[name]))
                 for name, text in self.domain.facts.items()]
        levers = [t.render("lever_line", id=lever, description=spec.description,
                           unit=units.get(spec.unit, spec.unit),
                           value=format_value(situation.levers[lever], spec.unit))
                  for lever, spec in self.domain.levers.items() if lever in situation.levers]
        limits = [t.render("limit_line", text=text)
                  for text in statements(self.domain, situation)]
        in_force = [t.render("in_force_line", institution=other, lever=lever,
                             value=format_value(value, self.domains.of(other).levers[lever].unit))
                    for other, decided in situation.in_force.items()
                    for lever, value in decided.items()]
        user = t.render("user", year=situation.year, facts="\n".join(facts),
                        levers="\n".join(levers), limits="\n".join(limits),
                        in_force="\n".join(in_force) or t.text("in_force_none"))
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    @staticmethod
    def schema(situation: InstitutionSituation) -> dict[str, Any]:
        """The reply's JSON schema.

        The assessment, a number per lever, the reason (in this order, which a constrained decoder
        follows).
        """
        text = {"type": "string", "maxLength": hard_cap(MAX_TEXT_CHARS)}
        properties = {"assessment": text, **{lever: {"type": "number"}
                                             for lever in situation.levers}, "reason": text}
        return {"type": "object", "properties": properties, "required": list(properties),
                "additionalProperties": False}

    @staticmethod
    def parse(response: LLMResponse, situation: InstitutionSituation,
              ) -> tuple[dict[str, float] | None, dict[str, str], str | None]:
        """The levers and texts of a reply, or the reason it cannot be read."""
        data = response.parsed
        if not isinstance(data, dict):
            data, error = parse_json_reply(response.text)
            if error is not None:
                return None, {}, error
            if not isinstance(data, dict):
                return None, {}, "the reply is not a JSON object"
        levers: dict[str, float] = {}
        for lever in situation.levers:
            try:
                levers[lever] = lever_value(lever, data.get(lever))
            except ValueError as exc:
                return None, {}, str(exc)
        texts = {}
        for key in TEXT_FIELDS:
            value = data.get(key)
            if not isinstance(value, str) or not value.strip():
                return None, {}, f"{key!r} must be a short sentence"
            texts[key] = whole_sentences(value, MAX_TEXT_CHARS)[0]
        return levers, texts, None

    # -- records ----------------------------------------------------------------------------
    def _finish(self, s: InstitutionSituation, conv: Conversation,
                status: str) -> InstitutionDecision:
        levers, texts = conv.proposal or (None, {})
        if status in ("approved", "retry_approved"):
            levers, reason = dict(levers or {}), texts.get("reason", "")
        else:
            levers = within_limits(self.domain, s, s.levers)
            ids = ", ".join(o.rule_id for o in conv.errors)
            reason = (f"still broke {ids} after {conv.retries['governance']} re-ask(s); "
                      "last year's levers within the limits" if status == "rejected" else
                      f"no readable reply after {len(conv.attempts)} attempt(s) "
                      f"({conv.parse_error}); last year's levers within the limits")
        text = json.dumps(conv.prompt, sort_keys=True)
        audit: dict[str, Any] = {
            "profile": self.profile,
            "context_hash": hashlib.sha256(text.encode("utf-8")).hexdigest()[:16],
            "assessment": texts.get("assessment"),
            "final_proposal": conv.proposal[0] if conv.proposal else None,
            "retries_by_kind": conv.retries_by_kind(),
            "rules_fired": conv.rules_fired(),
            "attempts": conv.attempts,
            **conv.usage(),
        }
        if self.governance.audit.prompts:
            audit["prompt"] = conv.prompt
        return InstitutionDecision(
            institution=self.institution, year=s.year, levers=levers, status=status,
            decision_maker=self.name,
            proposed=conv.first_proposal[0] if conv.first_proposal else None,
            retries=conv.retry_count, reason=reason, audit=audit)


class _Institution:
    """An institution's side of a governed conversation (``broker.conversation.Decider``)."""

    def __init__(self, broker: InstitutionBroker, situation: InstitutionSituation) -> None:
        self.broker = broker
        self.situation = situation

    def read(self, response: LLMResponse) -> Reading:
        """The levers and texts of a reply (``InstitutionBroker.parse``)."""
        levers, texts, error = self.broker.parse(response, self.situation)
        return Reading(None if levers is None else (levers, texts), error, levers)

    def check(self, proposal: tuple[dict[str, float], dict[str, str]]) -> list[RuleOutcome]:
        """The institution's rules under the profile on the proposed levers."""
        b = self.broker
        return evaluate(b.domain, b.profile, self.situation, proposal[0])

    def feedback_format(self, error: str) -> str:
        """The re-ask after an unreadable reply."""
        return self.broker.templates.render("retry_format", error=error)

    def feedback_governance(self, issues: Sequence[tuple[str, str]]) -> str:
        """The re-ask after broken rules."""
        t = self.broker.templates
        lines = [t.render("retry_issue", rule_id=r, message=m) for r, m in issues]
        return t.render("retry_governance", issues="\n".join(lines))

    def exhausted(self, errors: Sequence[RuleOutcome]) -> str:
        """A proposal still breaking a rule is rejected."""
        return "rejected"


def build_institution_makers(experiment: ResolvedExperiment, run_dir: Path,
                             household_maker: DecisionMaker | None = None,
                             backend: LLMBackend | None = None,
                             ) -> dict[str, InstitutionMaker]:
    """The LLM makers of the experiment's institutions whose ``maker`` is ``llm``.

    They share the households' LLM backend, cache, call log and event loop when the
    households' maker is the governed broker; otherwise one backend is built from the
    experiment's ``llm:`` section (with the run's cache and call log in ``run_dir``) and the
    first maker owns it.

    Args:
        experiment: The resolved experiment (``institutions:`` set).
        run_dir: The run's working directory (the call log, when the backend is built here).
        household_maker: The households' maker (its backend is shared when it is the broker).
        backend: A ready backend (tests); by default as above.

    Raises:
        ConfigError: no ``llm:`` section, or broken prompt templates.
    """
    config, domains = experiment.config, experiment.institutions
    inst = config.institutions
    if inst is None or not inst.llm_makers:
        return {}
    if config.llm is None or domains is None:
        raise ConfigError("an institution decided by 'llm' needs an 'llm:' section")
    templates = load_templates(config.resolve_path(inst.prompts), INSTITUTION_TEMPLATES,
                               INSTITUTION_TEMPLATE_EXTRAS, setting="institutions.prompts")
    shared = isinstance(household_maker, GovernedBroker) and backend is None
    if shared:
        backend, loop = household_maker.backend, household_maker.loop
    else:
        if backend is None:
            from governed_broker.broker.factory import CALL_LOG_FILE
            from governed_broker.llm import backend_from_config

            backend = backend_from_config(config.llm, call_log_path=Path(run_dir) / CALL_LOG_FILE,
                                          base_dir=config.base_dir)
        loop = LoopThread("governed-broker-institutions")
    request = RequestSettings(sampling=resolve_sampling(config.llm),
                              max_tokens=config.llm.max_tokens, num_ctx=config.llm.num_ctx)
    makers: dict[str, InstitutionMaker] = {}
    for index, name in enumerate(inst.llm_makers):
        makers[name] = InstitutionBroker(
            name, domains, templates, backend, loop, governance=config.governance,
            profile=inst.profile, seed=config.seed, run_id=experiment.run_id, request=request,
            owns_backend=not shared and index == 0)
    return makers

