"""The PMT context builder: one household's situation -> the decision prompt (docs/decisions.md).

The prompt has a system message that is identical for every household and year (so backends
reuse it as a cached prefix) and a user message with, in this order: identity, retrieved
memories (with their years and fidelity), the current situation, social signals, knowledge
(semantic facts, procedural heuristics and knowledge-base chunks; skipped when there is none),
the choice (appraisal instruction and this household's allowed actions with its real costs) and
the reply format. All wording comes from ``configs/prompts/household.yaml``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from governed_broker.cognition.prompts import HOUSEHOLD_TEMPLATES, PROMPT_SECTIONS
from governed_broker.cognition.schema import decision_json_schema
from governed_broker.config.agent_types import PMTLabels
from governed_broker.config.base import ConfigError, excerpt
from governed_broker.config.templates import TemplateSet, load_templates
from governed_broker.contracts.decision import HouseholdSituation, Remembered
from governed_broker.llm.jsontext import messages_json, schema_json

#: Characters per token used for budget estimates (the lineage's guard used the same ratio).
CHARS_PER_TOKEN = 4


class KnowledgeChunk(Protocol):
    """One knowledge passage: its text and where it comes from (``file.md#heading``)."""

    text: str
    source: str


class KnowledgeRetrieval(Protocol):
    """One search for a household: the chunks found and its account for the audit."""

    chunks: Sequence[KnowledgeChunk]

    def to_dict(self) -> dict[str, Any]:
        """The retrieval's account for the audit (JSON-serialisable)."""
        ...


class KnowledgeProvider(Protocol):
    """What the context builder and the run's manifest need of a knowledge base.

    ``rag.KnowledgeBase`` is the shipped one.
    """

    def chunks_for(self, situation: HouseholdSituation) -> Sequence[KnowledgeChunk]:
        """The chunks for a situation, outside an event loop."""
        ...

    async def aretrieve_for(self, situation: HouseholdSituation) -> KnowledgeRetrieval:
        """The search for a situation, inside an event loop (LLM query expansion awaits)."""
        ...

    def stats(self) -> dict[str, Any]:
        """Statistics of its work for the run's manifest."""
        ...


class ContextBudgetError(ConfigError):
    """A prompt is larger than ``governance.context.token_budget``.

    A configuration problem: the budget, ``llm.num_ctx`` or the amount of context shown must change.
    """


@dataclass(frozen=True)
class Prompt:
    """A built decision prompt.

    Attributes:
        messages: ``({"role": "system", ...}, {"role": "user", ...})``.
        json_schema: The reply schema (decision restricted to the allowed actions).
        context_hash: sha256 of the messages and schema (identifies the prompt in the audit).
        memory_ids: Ids of the memories shown, in prompt order.
        memory_fidelity: The fidelity each of them was shown at (``detailed``, ``summary``,
            ``gist``), in the same order.
        knowledge_sources: Sources of the knowledge-base chunks shown.
        estimated_tokens: Prompt size estimate (characters / 4).
        knowledge_retrieval: The knowledge base's account of the retrieval (topics fired,
            queries, chunks, failed query expansions), when the provider gives one.
    """

    messages: tuple[Mapping[str, str], ...]
    json_schema: Mapping[str, Any]
    context_hash: str
    memory_ids: tuple[Any, ...]
    knowledge_sources: tuple[str, ...]
    estimated_tokens: int
    knowledge_retrieval: Mapping[str, Any] | None = None
    memory_fidelity: tuple[str, ...] = ()


def money(value: float) -> str:
    """Format dollars for a prompt: ``$12,300``."""
    return f"${round(value):,}"


def percent(share: float) -> str:
    """Format a share 0..1 as a whole-number percentage: ``30%``."""
    return f"{round(share * 100)}%"


def share_of(amount: float, base: float) -> str:
    """``amount`` as a whole-number percentage of ``base`` (``170%``).

    ``more than 100%`` when there is a positive amount and no positive base (no savings left to
    compare with).
    """
    if base <= 0:
        return "more than 100%" if amount > 0 else "0%"
    return f"{round(100 * amount / base):,}%"


def flood_chance(probability: float) -> str:
    """Format an annual probability as ``1 in 100 (1%)``."""
    if probability <= 0:
        return "close to zero"
    return f"1 in {round(1 / probability):,} ({probability * 100:.3g}%)"


def _year_text(year: float) -> str:
    return str(int(year)) if float(year).is_integer() else f"{year:g}"


def memory_text(memory: Remembered) -> str:
    """A memory's text at its current fidelity."""
    return str(memory.text())


def _one_line(text: str) -> str:
    # what re.sub(r"\s+", " ", text).strip() gives (both split at Py_UNICODE_ISSPACE), faster
    return " ".join(str(text).split())


class ContextBuilder:
    """Builds the decision prompt of a household from its ``HouseholdSituation``.

    Args:
        templates: The ``household.yaml`` templates.
        action_descriptions: One-sentence description of every action id (skill registry).
        scale: The domain's appraisal scale (``pmt_labels``): the system message's
            ``$pmt_scale`` and ``$pmt_labels`` and the reply schema's label enum.
        token_budget: Largest prompt, in estimated tokens; larger raises ``ContextBudgetError``.
        max_memories: Most memories shown.
        max_reason_chars: Longest reason allowed by the reply schema.
        appraisal_order: ``label_first`` or ``reason_first``: the order of an appraisal's
            fields in the format the system message shows and in the reply schema.
        knowledge: Optional knowledge-base provider (``chunks_for(situation)``).
    """

    def __init__(
        self,
        templates: TemplateSet,
        action_descriptions: Mapping[str, str],
        scale: PMTLabels,
        token_budget: int = 3000,
        max_memories: int = 10,
        max_reason_chars: int = 200,
        appraisal_order: str = "label_first",
        knowledge: KnowledgeProvider | None = None,
    ) -> None:
        self.templates = templates
        self.action_descriptions = dict(action_descriptions)
        self.scale = scale
        self.appraisal_order = appraisal_order
        appraisal_format = templates.render(f"appraisal_{appraisal_order}",
                                            pmt_labels=scale.choices())
        self.system = templates.render(
            "system", pmt_scale=scale.prompt_scale(), appraisal_format=appraisal_format
        )
        self.token_budget = token_budget
        self.max_memories = max_memories
        self.max_reason_chars = max_reason_chars
        self.knowledge = knowledge
        self._trust_words = self._check_trust_words(templates)
        self._section_order = self._check_section_order(templates)
        self._schemas: dict[tuple[str, ...], Mapping[str, Any]] = {}

    @classmethod
    def from_dir(
        cls, prompts_dir: Path, action_descriptions: Mapping[str, str], scale: PMTLabels,
        **kwargs: Any,
    ) -> ContextBuilder:
        """Load ``<prompts_dir>/household.yaml`` and build a context builder."""
        templates = load_templates(
            Path(prompts_dir) / "household.yaml",
            HOUSEHOLD_TEMPLATES,
            extra_keys=frozenset({"trust_words", "section_order"}),
        )
        return cls(templates, action_descriptions, scale, **kwargs)

    @staticmethod
    def _check_trust_words(templates: TemplateSet) -> list[tuple[float, str]]:
        words = templates.extra.get("trust_words")
        try:
            pairs = [(float(bound), str(word)) for bound, word in words]
        except (TypeError, ValueError):
            raise ConfigError(
                f"{templates.path}: trust_words must be a list of [upper bound, words] pairs"
            ) from None
        if not pairs or pairs != sorted(pairs) or pairs[-1][0] <= 1.0:
            raise ConfigError(
                f"{templates.path}: trust_words bounds must increase and the last must exceed 1"
            )
        return pairs

    @staticmethod
    def _check_section_order(templates: TemplateSet) -> tuple[str, ...]:
        order = templates.extra.get("section_order")
        if not isinstance(order, list) or sorted(map(str, order)) != sorted(PROMPT_SECTIONS):
            raise ConfigError(
                f"{templates.path}: section_order must list each of {list(PROMPT_SECTIONS)} "
                f"once; got {excerpt(order)}")
        return tuple(order)

    # -- public -----------------------------------------------------------------------------
    async def abuild(self, situation: HouseholdSituation) -> Prompt:
        """``build`` for use inside an event loop.

        The knowledge search (LLM query expansion) is awaited rather than blocking the loop, and its
        account goes into the audit.
        """
        if self.knowledge is None:
            return self.build(situation, chunks=[])
        found = await self.knowledge.aretrieve_for(situation)
        return self.build(situation, chunks=list(found.chunks), retrieval=found.to_dict())

    def build(self, situation: HouseholdSituation, chunks: Sequence[KnowledgeChunk] | None = None,
              retrieval: Mapping[str, Any] | None = None) -> Prompt:
        """Build the prompt for one household; raises ``ContextBudgetError`` if too large.

        Args:
            situation: The household's situation.
            chunks: Knowledge chunks already retrieved; None asks the knowledge provider.
            retrieval: The provider's account of how ``chunks`` were found (for the audit).
        """
        memories = list(situation.memories)[: self.max_memories]
        if chunks is None:
            chunks = list(self.knowledge.chunks_for(situation)) if self.knowledge else []
        sections = {
            "identity": self._identity(situation),
            "memories": self._memories(memories),
            "situation": self._situation(situation),
            "social": self._social(situation),
            "knowledge": self._knowledge(situation, chunks),
            "choice": self._choice(situation),
            "response": self.templates.render(
                "response", actions=", ".join(situation.allowed_actions)),
        }
        user = "\n\n".join(sections[name] for name in self._section_order if sections[name])
        messages = (
            {"role": "system", "content": self.system},
            {"role": "user", "content": user},
        )
        schema = self._schema(situation.allowed_actions)
        chars = sum(len(m["content"]) for m in messages) + len(schema_json(schema, "ascii"))
        tokens = math.ceil(chars / CHARS_PER_TOKEN)
        if tokens > self.token_budget:
            raise ContextBudgetError(
                f"the decision prompt of household {situation.agent_id} in year "
                f"{situation.year} is about {tokens} tokens, over the budget of "
                f"{self.token_budget} (governance.context.token_budget); raise the budget "
                f"(and llm.num_ctx), or show fewer memories (governance.context.max_memories) "
                f"or knowledge chunks (rag.top_k)"
            )
        # json.dumps([messages, schema], sort_keys=True), written from its encoded parts
        text = "[" + messages_json(messages, "sorted_ascii") + ", " + \
            schema_json(schema, "sorted_ascii") + "]"
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return Prompt(
            messages=messages,
            json_schema=schema,
            context_hash=digest,
            memory_ids=tuple(m.id for m in memories),
            memory_fidelity=tuple(m.fidelity for m in memories),
            knowledge_sources=tuple(str(c.source) for c in chunks),
            estimated_tokens=tokens,
            knowledge_retrieval=retrieval,
        )

    def _schema(self, allowed: tuple[str, ...]) -> Mapping[str, Any]:
        """The reply schema of an allowed set, one object per set.

        Never changed: requests and the JSON encoders rely on it.
        """
        schema = self._schemas.get(allowed)
        if schema is None:
            schema = self._schemas[allowed] = decision_json_schema(
                allowed, self.scale.labels, self.max_reason_chars, self.appraisal_order)
        return schema

    def feedback_governance(self, issues: Sequence[tuple[str, str]]) -> str:
        """The re-ask message for blocked proposals: ``(rule id, message)`` pairs."""
        lines = [self.templates.render("retry_issue", rule_id=r, message=m) for r, m in issues]
        return self.templates.render("retry_governance", issues="\n".join(lines))

    def feedback_format(self, error: str) -> str:
        """The re-ask message for an unreadable reply."""
        return self.templates.render("retry_format", error=error.rstrip("."))

    # -- sections ---------------------------------------------------------------------------
    def _identity(self, s: HouseholdSituation) -> str:
        key = "identity_renter" if s.tenure == "renter" else "identity_owner"
        return self.templates.render(
            key,
            flood_zone=s.flood_zone,
            flood_chance=flood_chance(s.flood_probability),
            income=money(s.income_usd),
        )

    def _memories(self, memories: Sequence[Remembered]) -> str:
        if not memories:
            return self.templates.text("memories_none")
        lines = [self.templates.text("memories_header")]
        for m in memories:
            if m.kind == "insight":
                lines.append(self.templates.render(
                    "insight_line", year=_year_text(m.year), content=_one_line(memory_text(m))))
                continue
            note_key = f"memory_fidelity_{m.fidelity}"
            note = self.templates.text(note_key) if note_key in self.templates.templates else ""
            lines.append(
                self.templates.render(
                    "memory_line",
                    year=_year_text(m.year),
                    fidelity_note=note,
                    content=_one_line(memory_text(m)),
                )
            )
        return "\n".join(lines)

    def _situation(self, s: HouseholdSituation) -> str:
        t = self.templates
        lines = [t.render("situation_header", year=s.year)]
        if s.flooded:
            lines.append(
                t.render("situation_flood", depth=f"{s.depth_m:.2f} m", damage=money(s.damage_usd),
                         damage_income_share=share_of(s.damage_usd, s.income_usd))
            )
            if s.payout_usd > 0:
                lines.append(t.render("payout_line", payout=money(s.payout_usd)))
        else:
            lines.append(t.text("situation_no_flood"))
        if s.tenure == "renter":
            lines.append(t.render("home_values_renter", contents=money(s.contents_value_usd)))
        else:
            lines.append(t.render("home_values_owner", structure=money(s.structure_value_usd),
                                  contents=money(s.contents_value_usd)))
        facts = s.facts
        typical = facts.typical_flood
        if typical is not None and typical.damage_usd > 0:
            lines.append(t.render("typical_flood", depth=f"{typical.depth_m:.1f} m",
                                  damage=money(typical.damage_usd)))
        lines.append(t.render("savings_line", savings=money(s.savings_usd)))
        if facts.spending_room_usd is not None:
            lines.append(t.render("spending_room_line",
                                  room=money(float(facts.spending_room_usd))))
        if s.debt_usd > 0:
            lines.append(t.render("debt_line", debt=money(s.debt_usd)))
        if s.unrepaired_damage_usd > 0:
            lines.append(t.render("unrepaired_line", unrepaired=money(s.unrepaired_damage_usd)))
        lines.append(t.text("insured_yes" if s.insured else "insured_no"))
        if facts.insurance_required:
            lines.append(t.text("insurance_required_line"))
        group = facts.group_policy
        if group is not None and group.years:
            lines.append(t.render("group_policy_line", years=str(group.years),
                                  coverage=money(float(group.coverage_usd))))
        if facts.aid_requires_insurance:
            lines.append(t.text("aid_requires_insurance_line"))
        if facts.buyout_offer_usd:
            lines.append(t.render("buyout_offer_line", price=money(float(facts.buyout_offer_usd))))
        if s.tenure != "renter":
            lines.append(t.text("elevated_yes" if s.elevated else "elevated_no"))
        return "\n".join(lines)

    def _trust(self, value: float) -> str:
        for bound, words in self._trust_words:
            if value < bound:
                return words
        return self._trust_words[-1][1]

    def _social(self, s: HouseholdSituation) -> str:
        shares = s.neighbour_shares
        social = self.templates.render(
            "social",
            insured=percent(shares.get("insured", 0.0)),
            elevated=percent(shares.get("elevated", 0.0)),
            relocated=percent(shares.get("relocated", 0.0)),
        )
        trust = self.templates.render(
            "trust",
            trust_insurance=self._trust(s.trust_insurance),
            trust_neighbours=self._trust(s.trust_neighbours),
        )
        return f"{social}\n{trust}"

    def _knowledge(self, s: HouseholdSituation, chunks: Sequence[KnowledgeChunk]) -> str:
        t = self.templates
        lines = []
        for fact in s.facts.knowledge_facts:
            lines.append(t.render("knowledge_fact", text=_one_line(fact)))
        for h in s.facts.heuristics:
            lines.append(
                t.render(
                    "knowledge_heuristic",
                    description=_one_line(h.description),
                    success=percent(float(h.success_rate)),
                )
            )
        for chunk in chunks:
            lines.append(
                t.render("knowledge_chunk", text=_one_line(chunk.text), source=chunk.source)
            )
        if not lines:
            return ""
        return "\n".join([t.text("knowledge_header"), *lines])

    def _choice(self, s: HouseholdSituation) -> str:
        t = self.templates
        lines = [t.text("choice_header")]
        flood_costs = s.facts.loss_if_flood_usd
        for action in s.allowed_actions:
            cost = float(s.action_costs_usd.get(action, 0.0))
            affordable = bool(s.affordable.get(action, True))
            if action not in self.action_descriptions:
                raise ValueError(f"allowed action {action!r} is not in the skill registry")
            flood_cost = float(flood_costs.get(action, 0.0))
            lines.append(
                t.render(
                    "action_line",
                    id=action,
                    description=self.action_descriptions[action],
                    cost=money(cost) if cost > 0 else t.text("action_free"),
                    affordability=t.text("affordable_yes" if affordable else "affordable_no"),
                    flood_cost=money(flood_cost) if flood_cost > 0 else t.text("action_free"),
                    flood_cost_share=share_of(flood_cost, s.savings_usd),
                )
            )
        return "\n".join(lines)
