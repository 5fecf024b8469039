"""Governance, reflection and knowledge-base settings (owned by the broker/cognition/rag code)."""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from governed_broker.config.base import StrictModel
from governed_broker.contracts.decision import action_in_path

#: A governance rule's severity: ``ERROR`` blocks and re-asks, ``WARNING`` is only recorded,
#: ``off`` is not evaluated.
Severity = Literal["ERROR", "WARNING", "off"]


class AuditConfig(StrictModel):
    """What the broker's audit trail (``decisions.jsonl``) records.

    Attributes:
        prompts: Write every prompt's full messages into each decision record. Off by default
            because a prompt is ~3 KB per household-year; the prompt hash is always written.
    """

    prompts: bool = False


class ContextConfig(StrictModel):
    """How a household's decision prompt is built (``governed_broker.cognition.context``).

    Attributes:
        prompts_dir: Directory of the prompt templates (``household.yaml``,
            ``reflection.yaml``); relative paths resolve against the experiment file's
            directory.
        token_budget: Largest prompt allowed, in estimated tokens (characters / 4). A larger
            prompt is an error that names the household and year. source: the lineage's
            prompt guard used 16,384 estimated tokens; its single-agent prompts were ~800
            tokens (lessons_from_prior_art.md section 6). 3,000 leaves room for the reply in
            the default 4,096-token context window.
        max_memories: Most retrieved memories shown in one prompt (the memory engine already
            bounds retrieval; this guards the budget).
        max_reason_chars: The length a ``reason`` is asked to keep to. Short reasons save
            generation time on CPU: 100 characters is one short sentence (~18 words;
            docs/llm_backends.md "Measurements behind the defaults" recommends ~100). The
            response schema's limit is three times it (``cognition.sentences.hard_cap``), so
            that a sentence is never stopped halfway; a longer reason keeps its leading whole
            sentences (at least the first), a recorded repair.
        appraisal_order: The order of each appraisal's fields in the reply, in the format the
            system message shows (``appraisal_<order>`` of ``household.yaml``) and in the reply
            schema a grammar-constrained decoder follows: ``label_first`` (the response
            schema) or ``reason_first``, which makes a model write its reason before it
            commits to a label (a reply-shape variant of docs/validity.md "Variants measured").
    """

    prompts_dir: Path = Path("../configs/prompts")
    token_budget: int = Field(default=3000, ge=200, le=200_000)
    max_memories: int = Field(default=10, ge=0, le=100)
    max_reason_chars: int = Field(default=100, ge=20, le=2000)
    appraisal_order: Literal["label_first", "reason_first"] = "label_first"


class GovernanceConfig(StrictModel):
    """Governance profile, retry budgets and audit (``governed_broker.broker``).

    Attributes:
        profile: Which severities of the ``governance:`` rules of ``agent_types.yaml`` apply:
            ``strict`` (group B/C of the ablation), ``relaxed`` or ``disabled`` (group A, no
            rules: only the feasibility backstop remains).
        max_retries: Re-asks after a proposal blocked by an ERROR rule. source: the lineage's
            governance loop, max_retries = 3 (lessons_from_prior_art.md section 3).
        max_parse_retries: Re-asks after a reply that cannot be parsed (a separate budget).
            source: the lineage's format loop made at most 3 calls, i.e. 2 re-asks.
        max_reports_per_retry: Most violated rules explained in one re-ask. source: lineage
            ``max_reports_per_retry = 3``.
        fallback_action: Action executed when retries are exhausted; ``None`` means the
            skill registry's default action (``do_nothing``). Recorded as status ``rejected``.
        audit: What ``decisions.jsonl`` records.
        context: How prompts are built.
        rule_severity: Severities by rule id that replace the profile's column of
            ``agent_types.yaml`` for this experiment, e.g. ``{flooded_threat_very_low:
            ERROR}``: one rule measured as a variant or swept without a copy of the domain
            file. A rule id the domain does not define is a configuration error.
    """

    profile: Literal["strict", "relaxed", "disabled"] = "strict"
    max_retries: int = Field(default=3, ge=0, le=10)
    max_parse_retries: int = Field(default=2, ge=0, le=10)
    max_reports_per_retry: int = Field(default=3, ge=1, le=20)
    fallback_action: str | None = None
    audit: AuditConfig = AuditConfig()
    context: ContextConfig = ContextConfig()
    rule_severity: dict[str, Severity] = {}


class ReflectionConfig(StrictModel):
    """Yearly reflection: the LLM turns a household's memories of the year into insights.

    Attributes:
        enabled: Reflect at all (off for the ablation without reflection).
        interval_years: Reflect at the end of every n-th year (1 = every year). source: the
            lineage reflected every year (lessons_from_prior_art.md item 15).
        n_insights: Insights asked for per household and reflection. source:
            docs/memory.md "Reflection" / seed 003, "3 short insights".
        max_memories: Most memories of the year shown in one reflection prompt, most
            important first. source: the lineage used 10 memories per reflection.
        max_insight_chars: The length an insight is asked to keep to (the schema allows three
            times it; a longer insight keeps its leading whole sentences, one stopped
            mid-sentence by the schema's limit is rejected).
        max_parse_retries: Re-asks after an unparseable reflection reply; when exhausted the
            reflection is recorded as failed and no insight is stored.
        temperature: Sampling temperature of reflection calls; ``None`` uses the run's
            (``llm.temperature``, else the model catalogue's).
        max_tokens: Token limit of one reflection reply.
    """

    enabled: bool = False
    interval_years: int = Field(default=1, ge=1, le=100)
    n_insights: int = Field(default=3, ge=1, le=10)
    max_memories: int = Field(default=10, ge=1, le=100)
    max_insight_chars: int = Field(default=160, ge=20, le=1000)
    max_parse_retries: int = Field(default=1, ge=0, le=10)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    max_tokens: int = Field(default=200, ge=16, le=4096)


class RAGConfig(StrictModel):
    """Knowledge-base retrieval (``governed_broker.rag``; docs/knowledge.md).

    When ``enabled``, the markdown documents in ``knowledge_dir`` are chunked by heading and
    indexed, and the chunks most similar to a household's situation enter its prompt whenever
    the situation touches one of the policy topics defined in ``topics_file``.

    Attributes:
        enabled: Use the knowledge base in decision prompts.
        knowledge_dir: Directory of ``*.md`` documents (relative paths resolve against the
            experiment file's directory).
        topics_file: YAML file with the topic triggers and the MQE/HyDE prompt templates;
            ``None`` means ``<knowledge_dir>/rag_topics.yaml``.
        embedder: Embedder name for ``governed_broker.memory.embedding.make_embedder``:
            ``tfidf`` (lexical, fitted on the knowledge base itself; no extra install),
            ``minilm`` (offline sentence embeddings) or ``ollama`` (``OLLAMA_HOST`` server).
        max_chunk_chars: Maximum characters of one chunk's body; longer sections are split
            on paragraph boundaries.
        top_k: Chunks returned per situation.
        min_similarity: Cosine similarity (0..1) a chunk needs with at least one query to be
            returned; below it the chunk is judged irrelevant.
        mqe: Multi-query expansion: the LLM writes ``mqe_queries`` alternative queries.
        mqe_queries: Number of alternative queries MQE asks for.
        hyde: HyDE: the LLM writes a hypothetical answer passage that is embedded as a query.
        expansion_temperature: Sampling temperature of the MQE/HyDE LLM calls.
        expansion_max_tokens: Token limit of one MQE/HyDE reply.
        rrf_k: Constant ``k`` of reciprocal rank fusion, ``score = sum 1/(k + rank)``.
            source: k = 60 from Cormack, Clarke and Buettcher (SIGIR 2009), "Reciprocal rank
            fusion outperforms Condorcet and individual rank learning methods".
    """

    enabled: bool = False
    knowledge_dir: Path = Path("../configs/knowledge")
    topics_file: Path | None = None
    embedder: Literal["tfidf", "minilm", "ollama"] = "tfidf"
    max_chunk_chars: int = Field(default=1200, ge=200, le=20000)
    top_k: int = Field(default=3, ge=1, le=20)
    min_similarity: float = Field(default=0.05, ge=0.0, le=1.0)
    mqe: bool = False
    mqe_queries: int = Field(default=3, ge=1, le=8)
    hyde: bool = False
    expansion_temperature: float = Field(default=0.7, ge=0.0, le=2.0)
    expansion_max_tokens: int = Field(default=256, ge=16, le=4096)
    rrf_k: int = Field(default=60, ge=1, le=10_000)  # above, every rank scores alike


# ---------------------------------------------------------------------------------------------
# The ``governance:`` section of agent_types.yaml: PMT coherence, identity and affordability
# rules as data. Evaluated by ``governed_broker.broker.rules.RuleSet``.

PROFILES: tuple[str, ...] = ("strict", "relaxed", "disabled")

#: Placeholders a rule message may use (``string.Template`` syntax, ``$threat``). They are
#: filled in before a message is sent to the LLM or written to the audit.
RULE_MESSAGE_PLACEHOLDERS: frozenset[str] = frozenset(
    {
        "threat",
        "coping",
        "action",
        "action_cost",
        "savings",
        "income",
        "tenure",
        "flood_zone",
        "neighbours_insured",
        "neighbours_elevated",
        "neighbours_relocated",
    }
)


class NumericTest(StrictModel):
    """A numeric comparison on a state field; all given bounds must hold."""

    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None

    @model_validator(mode="after")
    def _at_least_one(self) -> NumericTest:
        if all(v is None for v in (self.gt, self.ge, self.lt, self.le)):
            raise ValueError("a numeric test needs at least one of gt, ge, lt, le")
        return self


#: A state test: equality with a scalar, membership in a list, or a numeric comparison.
StateTest = bool | int | float | str | list[bool | int | float | str] | NumericTest


class RuleCondition(StrictModel):
    """When a rule fires; all given parts must hold (AND).

    Attributes:
        threat: The proposal's threat label is one of these (labels of the domain's
            ``pmt_labels`` scale; ``AgentTypesConfig`` checks them).
        coping: The proposal's coping label is one of these.
        state: Tests on ``HouseholdSituation`` fields (``elevated: true``,
            ``tenure: [renter]``, ``neighbour_shares.elevated: {gt: 0.5}``).
        affordable: The proposed action's affordability (``false``: the household cannot pay).
        can_protect: Whether the household could take a protective action this year (one
            whose effect is protective is among its allowed actions and affordable); ``true``
            keeps a rule about inaction from re-asking a household that has no protective
            choice left.
    """

    threat: list[str] | None = None
    coping: list[str] | None = None
    state: dict[str, StateTest] = {}
    affordable: bool | None = None
    can_protect: bool | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> RuleCondition:
        if self.threat is None and self.coping is None and not self.state and (
            self.affordable is None and self.can_protect is None
        ):
            raise ValueError("a rule condition ('when') needs at least one test")
        return self

    @property
    def labels_only(self) -> bool:
        """Whether the condition depends on the appraisal labels alone (a thinking rule)."""
        return not self.state and self.affordable is None and self.can_protect is None


class RuleSeverity(StrictModel):
    """Severity per governance profile.

    ``ERROR`` blocks and re-asks, ``WARNING`` is only recorded, ``off`` is not evaluated.
    """

    strict: Severity
    relaxed: Severity
    disabled: Severity = "off"

    def for_profile(self, profile: str) -> Severity:
        """The severity under ``profile`` (one of ``PROFILES``)."""
        return getattr(self, profile)


class GovernanceRule(StrictModel):
    """One rule: if the proposal is one of ``actions`` and ``when`` holds, it fires.

    Attributes:
        id: Stable identifier, written to the audit and shown to the LLM in feedback.
        category: ``identity`` (who may do what), ``financial`` (affordability), ``thinking``
            (PMT coherence of labels and action) or ``social``.
        actions: Action ids the rule applies to (the proposals it blocks or flags).
        when: The condition.
        severity: Per-profile severity.
        message: Feedback sent to the LLM and written to the audit; ``$placeholders`` from
            ``RULE_MESSAGE_PLACEHOLDERS`` are filled in first.
        on_exhausted: What happens when the rule, as an ERROR, is still violated after the
            last re-ask: ``fallback`` executes the fallback action (status ``rejected``);
            ``keep`` executes the model's final proposal when the world allows it and records
            the violation (status ``unresolved``). Identity and financial rules always fall
            back: their proposals cannot be executed.
        source: Where the rule comes from.
    """

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    category: Literal["identity", "financial", "thinking", "social"]
    actions: list[str] = Field(min_length=1)
    when: RuleCondition
    severity: RuleSeverity
    message: str = Field(min_length=1)
    on_exhausted: Literal["fallback", "keep"] = "fallback"
    source: str = ""

    @model_validator(mode="after")
    def _keep_only_thinking_or_social(self) -> GovernanceRule:
        if self.on_exhausted == "keep" and self.category in ("identity", "financial"):
            raise ValueError(f"rule {self.id!r}: on_exhausted 'keep' is for thinking and social "
                             f"rules; a {self.category} rule's proposal cannot be executed")
        return self

    @model_validator(mode="after")
    def _check_message(self) -> GovernanceRule:
        template = string.Template(self.message)
        if not template.is_valid():
            raise ValueError(f"rule {self.id!r}: message is not a valid $-template")
        unknown = set(template.get_identifiers()) - RULE_MESSAGE_PLACEHOLDERS
        if unknown:
            raise ValueError(
                f"rule {self.id!r}: unknown placeholder(s) {sorted(unknown)} in message; "
                f"allowed: {sorted(RULE_MESSAGE_PLACEHOLDERS)}"
            )
        return self


class GovernanceRules(StrictModel):
    """The ``governance:`` section of ``agent_types.yaml``.

    Attributes:
        dead_zone_check: What to do when, under some profile, a combination of appraisal
            labels leaves a household with one action or none (the lineage's "governance
            dead zone"): ``error`` (default), ``warn`` or ``off``.
        rules: The rules, evaluated in this order.
    """

    dead_zone_check: Literal["error", "warn", "off"] = "error"
    rules: list[GovernanceRule] = []

    @model_validator(mode="after")
    def _unique_ids(self) -> GovernanceRules:
        seen: set[str] = set()
        for rule in self.rules:
            if rule.id in seen:
                raise ValueError(f"duplicate governance rule id {rule.id!r}")
            seen.add(rule.id)
        return self

    def with_severities(self, profile: str, severities: Mapping[str, Severity]
                        ) -> GovernanceRules:
        """The table with ``severities`` (by rule id) in the column of ``profile``.

        Raises:
            ValueError: A rule id of ``severities`` is not in the table.
        """
        unknown = sorted(set(severities) - {rule.id for rule in self.rules})
        if unknown:
            raise ValueError(f"unknown rule id(s) {unknown}; the rules are "
                             f"{[rule.id for rule in self.rules]}")
        rules = [rule if rule.id not in severities else rule.model_copy(update={
                     "severity": rule.severity.model_copy(update={profile: severities[rule.id]})})
                 for rule in self.rules]
        return self.model_copy(update={"rules": rules})

    def check_actions(self, action_ids: Iterable[str]) -> None:
        """Raise ``ValueError`` if a rule names an action the domain does not have.

        Among the actions it applies to, or as the action whose cost or affordability it tests.
        """
        known = set(action_ids)
        for rule in self.rules:
            named = [*rule.actions, *filter(None, map(action_in_path, rule.when.state))]
            unknown = [a for a in named if a not in known]
            if unknown:
                raise ValueError(
                    f"governance rule {rule.id!r} names unknown action(s) {unknown}; "
                    f"known actions: {sorted(known)}"
                )

    def dead_zones(
        self, actions_by_tenure: Mapping[str, Sequence[str]], labels: Sequence[str]
    ) -> list[tuple[str, str, str, str, list[str]]]:
        """Label combinations under which ERROR thinking rules leave at most one action.

        Only rules whose condition depends on the labels alone are considered (identity and
        affordability rules depend on the household, not on the rule table).

        Args:
            actions_by_tenure: The actions each tenure may take, e.g.
                ``{"owner": [...4 actions], "renter": [...3 actions]}``.
            labels: The appraisal scale (``pmt_labels.labels``).

        Returns:
            ``(profile, tenure, threat, coping, open_actions)`` for every dead zone.
        """
        zones = []
        for profile in PROFILES:
            for tenure, actions in sorted(actions_by_tenure.items()):
                for threat in labels:
                    for coping in labels:
                        blocked = self._blocked(profile, threat, coping)
                        open_actions = [a for a in actions if a not in blocked]
                        if len(open_actions) <= 1:
                            zones.append((profile, tenure, threat, coping, open_actions))
        return zones

    def _blocked(self, profile: str, threat: str, coping: str) -> set[str]:
        blocked: set[str] = set()
        for rule in self.rules:
            cond = rule.when
            if rule.severity.for_profile(profile) != "ERROR" or not cond.labels_only:
                continue
            if cond.threat is not None and threat not in cond.threat:
                continue
            if cond.coping is not None and coping not in cond.coping:
                continue
            blocked.update(rule.actions)
        return blocked

