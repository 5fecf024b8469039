"""End-of-year reflection: each household turns its memories of the year into insights.

At the end of every ``reflection.interval_years``-th year, for each active household that has a
memory engine and remembers something of the year, the LLM is asked (schema-constrained) for
``n_insights`` short first-person lessons. Each is kept whole (``cognition.sentences``: whole
sentences, never cut halfway) and checked against the memories it was drawn from
(``cognition.insight_check``): an insight stopped by the schema's limit, or with a claim or a
number that no source memory supports, is rejected and recorded, never stored. The others are
stored with the engine's ``add_insight`` at a salience equal to the highest importance among
their source memories (importance = ``insight_importance`` x salience, docs/memory.md), so a flood
year's lessons outlast a quiet year's. Every reflection, including the failed, skipped and
rejected ones, is written to ``reflections.jsonl``. Households reflect concurrently; insights
are stored in agent-id order so memory ids do not depend on completion order.

Reflection must run before the memory engine's ``end_year`` consolidation, while the year's
working memories are still there (the world's yearly loop does it in that order).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from governed_broker import progress
from governed_broker.cognition.context import memory_text
from governed_broker.cognition.insight_check import unsupported
from governed_broker.cognition.prompts import REFLECTION_TEMPLATES
from governed_broker.cognition.repair import extract_json_object
from governed_broker.cognition.schema import insights_json_schema
from governed_broker.cognition.sentences import whole_sentences
from governed_broker.config.broker import ReflectionConfig
from governed_broker.config.claims import load_claims
from governed_broker.config.templates import TemplateSet, load_templates
from governed_broker.contracts.decision import ReflectionTarget, Remembered
from governed_broker.contracts.jsonl import JsonlWriter
from governed_broker.llm.base import LLMBackend, LLMRequest, LLMResponse, Sampling
from governed_broker.llm.jsontext import messages_json
from governed_broker.seeding import child_seed


def parse_insights(
    text: str, n_insights: int, max_chars: int
) -> tuple[list[str], list[str], str | None]:
    """Parse ``{"insights": [...]}``, repairing fences, prose, trailing commas.

    Overlong items keep their leading whole sentences (never cut halfway).

    Returns:
        ``(insights, repairs, error or None)``; at least one non-empty insight on success.
    """
    data, repairs, error = extract_json_object(text)
    if data is None:
        return [], repairs, error
    items = data.get("insights")
    if not isinstance(items, list):
        return [], repairs, "the reply has no list field 'insights'"
    insights = [" ".join(str(i).split()) for i in items if isinstance(i, str) and i.strip()]
    if not insights:
        return [], repairs, "the 'insights' list holds no text"
    if len(insights) > n_insights:
        repairs.append(f"kept the first {n_insights} of {len(insights)} insights")
        insights = insights[:n_insights]
    elif len(insights) < n_insights:
        repairs.append(f"only {len(insights)} of {n_insights} insights given")
    for i, insight in enumerate(insights):
        insights[i], note, _ = whole_sentences(insight, max_chars)
        if note is not None:
            repairs.append(f"insight {i + 1}: {note}")
    return insights, repairs, None


def salience(memories: Sequence[Remembered]) -> float:
    """The highest importance among an insight's source memories (1 when there are none)."""
    return max((float(m.importance) for m in memories), default=1.0)


class ReflectionEngine:
    """Asks the LLM for each household's insights at year end and stores them.

    Args:
        backend: The LLM backend.
        config: The ``reflection:`` section.
        templates: The ``reflection.yaml`` templates.
        seed: Experiment seed; request seeds derive from (seed, "reflection", agent, year,
            attempt).
        run_id: Identifies the run in each record.
        sampling: Sampling settings (``config.temperature`` overrides their temperature).
        num_ctx: Context window of the requests.
        log_path: Where to stream ``reflections.jsonl`` (None: not written).
    """

    def __init__(
        self,
        backend: LLMBackend,
        config: ReflectionConfig,
        templates: TemplateSet,
        seed: int,
        run_id: str = "",
        sampling: Sampling | None = None,
        num_ctx: int = 4096,
        log_path: Path | None = None,
    ) -> None:
        self.backend = backend
        self.config = config
        self.templates = templates
        self.seed = seed
        self.run_id = run_id
        sampling = sampling or Sampling()
        if config.temperature is not None:
            sampling = replace(sampling, temperature=config.temperature)
        self.sampling = sampling
        self.num_ctx = num_ctx
        self.schema = insights_json_schema(config.n_insights, config.max_insight_chars)
        self.claims = load_claims(templates.extra.get("claims", []), str(templates.path))
        self._log = JsonlWriter(log_path) if log_path is not None else None

    @classmethod
    def from_dir(cls, prompts_dir: Path, backend: LLMBackend, config: ReflectionConfig,
                 **kwargs: Any) -> ReflectionEngine:
        """Load ``<prompts_dir>/reflection.yaml`` and build the engine.

        Templates and ``claims``.
        """
        templates = load_templates(Path(prompts_dir) / "reflection.yaml", REFLECTION_TEMPLATES,
                                   extra_keys=frozenset({"claims"}))
        return cls(backend, config, templates, **kwargs)

    def due(self, year: int) -> bool:
        """Whether households reflect at the end of ``year``."""
        return self.config.enabled and year % self.config.interval_years == 0

    async def areflect_due(
        self, targets: Sequence[ReflectionTarget], year: int
    ) -> list[dict[str, Any]]:
        """Reflect ``targets`` if ``year`` is due (see ``due``); nothing otherwise."""
        if not self.due(year):
            return []
        return await self.areflect(targets, year)

    def reflect(self, targets: Sequence[ReflectionTarget], year: int) -> list[dict[str, Any]]:
        """Synchronous ``areflect`` (for scripts and tests)."""
        return asyncio.run(self.areflect(targets, year))

    async def areflect(
        self, targets: Sequence[ReflectionTarget], year: int
    ) -> list[dict[str, Any]]:
        """Reflect the given households concurrently; store insights in agent order.

        Returns:
            The ``reflections.jsonl`` records, in agent order.
        """
        semaphore = asyncio.Semaphore(max(1, int(self.backend.max_concurrency)))

        async def one(target: ReflectionTarget) -> tuple[dict[str, Any], list[str]]:
            async with semaphore:
                result = await self._reflect_one(target, year)
            progress.advance()
            return result

        ordered = sorted(targets, key=lambda t: t.agent_id)
        progress.phase("reflections", len(ordered))
        results = await asyncio.gather(*(one(t) for t in ordered))
        records = []
        for target, (record, insights) in zip(ordered, results, strict=True):
            weight = record.get("salience", 1.0)
            stored = [target.engine.add_insight(text, year, salience=weight,
                                                sources=tuple(record["memory_ids"]))
                      for text in insights]
            record["insight_ids"] = [m.id for m in stored]
            records.append(record)
        if self._log is not None:
            self._log.write_many(records)
        return records

    async def areflect_shared(
        self, groups: Sequence[Sequence[ReflectionTarget]], year: int
    ) -> list[dict[str, Any]]:
        """Reflect once per group (cohort mode).

        The group's first household by agent id reflects on its memories of the year, and its
        insights are stored in every member.

        Returns:
            The ``reflections.jsonl`` records, one per household in agent order; a member's
            is the representative's with its own ``agent_id`` and ``insight_ids`` and a
            ``cohort`` entry ``{"representative", "size"}``.
        """
        semaphore = asyncio.Semaphore(max(1, int(self.backend.max_concurrency)))
        ordered = [sorted(g, key=lambda t: t.agent_id) for g in groups if g]

        async def one(target: ReflectionTarget) -> tuple[dict[str, Any], list[str]]:
            async with semaphore:
                result = await self._reflect_one(target, year)
            progress.advance()
            return result

        progress.phase("reflections", len(ordered))
        results = await asyncio.gather(*(one(g[0]) for g in ordered))
        records = []
        for group, (record, insights) in zip(ordered, results, strict=True):
            cohort = {"representative": group[0].agent_id, "size": len(group)}
            weight = record.get("salience", 1.0)
            for target in group:
                # the source memories are the representative's: members get the lesson at
                # their salience but name no memory ids of another household
                sources = tuple(record["memory_ids"]) if target is group[0] else ()
                stored = [target.engine.add_insight(text, year, salience=weight, sources=sources)
                          for text in insights]
                records.append({**record, "agent_id": target.agent_id,
                                "insight_ids": [m.id for m in stored], "cohort": cohort})
        records.sort(key=lambda r: r["agent_id"])
        if self._log is not None:
            self._log.write_many(records)
        return records

    def close(self) -> None:
        """Close ``reflections.jsonl``."""
        if self._log is not None:
            self._log.close()

    # -- one household ----------------------------------------------------------------------
    def _year_memories(self, target: ReflectionTarget, year: int) -> list[Remembered]:
        items = [m for m in target.engine.items() if int(m.year) == year and m.kind != "insight"]
        items.sort(key=lambda m: (-float(m.importance), str(m.id)))
        return items[: self.config.max_memories]

    def _messages(self, target: ReflectionTarget, year: int,
                  memories: list[Remembered]) -> list[dict]:
        t = self.templates
        lines = [t.render("memory_line", content=" ".join(memory_text(m).split()))
                 for m in memories]
        tenure = t.text("tenure_renter" if target.tenure == "renter" else "tenure_owner")
        user = t.render("user", tenure_phrase=tenure, flood_zone=target.flood_zone, year=year,
                        memories="\n".join(lines), n_insights=self.config.n_insights)
        return [{"role": "system", "content": t.text("system")}, {"role": "user", "content": user}]

    async def _reflect_one(
        self, target: ReflectionTarget, year: int
    ) -> tuple[dict[str, Any], list[str]]:
        memories = self._year_memories(target, year)
        record: dict[str, Any] = {
            "run_id": self.run_id, "year": year, "agent_id": target.agent_id,
            "memory_ids": [m.id for m in memories],
        }
        if not memories:
            record.update(status="skipped", reason="no memories of this year", attempts=[],
                          insights=[], rejected=[])
            return record, []
        base = self._messages(target, year, memories)
        # json.dumps(base, sort_keys=True), the system message encoded once per run
        record["context_hash"] = hashlib.sha256(
            messages_json(base, "sorted_ascii").encode("utf-8")).hexdigest()
        messages, attempts = base, []
        for attempt in range(self.config.max_parse_retries + 1):
            seed = child_seed(self.seed, "reflection", target.agent_id, year, attempt)
            response, cleaned = (await self._ask(messages, seed)).sanitised()
            insights, repairs, error = parse_insights(
                response.text, self.config.n_insights, self.config.max_insight_chars)
            repairs = cleaned + repairs
            attempts.append(self._attempt(attempt, seed, response, repairs, error))
            if error is None:
                kept, rejected = self._checked(insights, memories, year)
                record.update(status="ok" if kept else "rejected", attempts=attempts,
                              insights=kept, rejected=rejected, salience=salience(memories))
                return record, kept
            feedback = self.templates.render("retry_format", error=error,
                                             n_insights=self.config.n_insights)
            messages = base + [{"role": "assistant", "content": response.text},
                               {"role": "user", "content": feedback}]
        record.update(status="parse_failed", attempts=attempts, insights=[], rejected=[])
        return record, []

    def _checked(self, insights: list[str], memories: list[Remembered],
                 year: int) -> tuple[list[str], list[dict[str, str]]]:
        """Split insights into those to store and those rejected (with the reason)."""
        texts = [" ".join(memory_text(m).split()) for m in memories]
        kept, rejected = [], []
        for insight in insights:
            if not whole_sentences(insight, self.config.max_insight_chars)[2]:
                why: str | None = "stopped mid-sentence at the schema's limit"
            else:
                why = unsupported(insight, texts, year, self.claims)
            if why is None:
                kept.append(insight)
            else:
                rejected.append({"insight": insight, "reason": why})
        return kept, rejected

    async def _ask(self, messages: list[dict], seed: int) -> LLMResponse:
        request = LLMRequest.of(
            messages, json_schema=self.schema, **self.sampling.request_fields(), seed=seed,
            max_tokens=self.config.max_tokens, num_ctx=self.num_ctx, tag="reflection")
        return await self.backend.achat(request)

    def _attempt(self, attempt: int, seed: int, response: LLMResponse,
                 repairs: list[str], error: str | None) -> dict[str, Any]:
        return {
            "attempt": attempt,
            "seed": seed,
            "raw": response.text, "repairs": repairs, "parse_error": error,
            "prompt_tokens": response.prompt_tokens,
            "completion_tokens": response.completion_tokens,
            "latency_s": round(response.latency_s, 4), "cached": response.cached,
        }
