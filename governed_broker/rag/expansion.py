"""LLM query expansion for retrieval: multi-query expansion (MQE) and HyDE.

MQE asks the LLM for ``n`` alternative wordings of a query, so that documents phrased
differently from the household's situation are still found. HyDE (Gao et al. 2022, "Precise
zero-shot dense retrieval without relevance labels") asks the LLM for a hypothetical answer
passage; the passage is embedded as one more query, because an answer looks more like the
documents than a question does. Both replies are requested under a JSON schema.

Replies are cached in memory by (kind, query, n): the same query always gets the same
expansion within a run, whichever household asks first, and each distinct query costs one LLM
call. Each request's seed is ``child_seed(seed, "rag", kind, query, n)``, so a re-run with the
same seed asks the backend exactly the same requests. A reply that does not satisfy the schema
is not used; the search goes on with the queries it has, and the failure is recorded in the
expansion's ``notes`` (for the audit) and in ``stats()``.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from string import Template
from typing import Any

from governed_broker.config.knowledge import ExpansionPrompts
from governed_broker.llm.base import LLMBackend, LLMRequest
from governed_broker.seeding import child_seed

#: Longest accepted MQE query / HyDE passage (characters); longer replies are truncated.
MAX_QUERY_CHARS = 300
MAX_PASSAGE_CHARS = 1500


def mqe_schema(n: int) -> dict[str, Any]:
    """JSON schema of an MQE reply: exactly ``n`` non-empty query strings."""
    return {
        "type": "object",
        "properties": {
            "queries": {
                "type": "array",
                "items": {"type": "string", "minLength": 3, "maxLength": MAX_QUERY_CHARS},
                "minItems": n,
                "maxItems": n,
            }
        },
        "required": ["queries"],
        "additionalProperties": False,
    }


HYDE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"passage": {"type": "string", "minLength": 20, "maxLength": MAX_PASSAGE_CHARS}},
    "required": ["passage"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Expansion:
    """What the LLM added to one query.

    Attributes:
        queries: Alternative queries from MQE (empty when MQE is off or failed).
        hypothetical: HyDE passage (None when HyDE is off or failed).
        cache_hits: Kinds (``"mqe"``, ``"hyde"``) answered from the in-memory cache.
        notes: Human-readable notes on failed expansions (recorded in audits).
    """

    queries: tuple[str, ...] = ()
    hypothetical: str | None = None
    cache_hits: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass
class _Outcome:
    value: Any
    note: str | None = None


@dataclass
class ExpansionStats:
    """Counters of LLM expansion calls, cache hits and failures in this run."""

    mqe_calls: int = 0
    mqe_cache_hits: int = 0
    mqe_failures: int = 0
    hyde_calls: int = 0
    hyde_cache_hits: int = 0
    hyde_failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        """JSON-serialisable counters."""
        return dict(self.__dict__)


class QueryExpander:
    """Generates and caches MQE queries and HyDE passages through an ``LLMBackend``.

    Args:
        backend: The LLM backend (any ``LLMBackend``; ``ScriptedBackend`` in tests).
        prompts: Prompt templates (from the topics file).
        seed: Experiment seed; request seeds are derived from it and the query.
        temperature: Sampling temperature of expansion requests.
        max_tokens: Token limit of one reply.
    """

    def __init__(
        self,
        backend: LLMBackend,
        prompts: ExpansionPrompts,
        seed: int,
        temperature: float = 0.7,
        max_tokens: int = 256,
    ) -> None:
        self.backend = backend
        self.prompts = prompts
        self.seed = seed
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.stats = ExpansionStats()
        self._cache: dict[tuple[str, str, int], _Outcome] = {}
        self._inflight: dict[tuple[str, str, int], asyncio.Future[_Outcome]] = {}

    async def aexpand(self, query: str, mqe_queries: int = 0, hyde: bool = False) -> Expansion:
        """Expand ``query`` with ``mqe_queries`` alternatives (0: no MQE) and/or HyDE."""
        hits: list[str] = []
        notes: list[str] = []
        jobs: dict[str, Any] = {}
        if mqe_queries > 0:
            jobs["mqe"] = self._cached(("mqe", query, mqe_queries), hits)
        if hyde:
            jobs["hyde"] = self._cached(("hyde", query, 0), hits)
        results = dict(zip(jobs, await asyncio.gather(*jobs.values()), strict=True))
        for outcome in results.values():
            if outcome.note:
                notes.append(outcome.note)
        mqe = results.get("mqe")
        hyde_out = results.get("hyde")
        return Expansion(
            queries=tuple(mqe.value) if mqe and mqe.value else (),
            hypothetical=hyde_out.value if hyde_out else None,
            cache_hits=tuple(sorted(hits)),
            notes=tuple(notes),
        )

    async def _cached(self, key: tuple[str, str, int], hits: list[str]) -> _Outcome:
        kind = key[0]
        if key in self._cache:
            hits.append(kind)
            self._count(kind, "cache_hits")
            return self._cache[key]
        if key in self._inflight:  # another household asked the same query concurrently
            hits.append(kind)
            self._count(kind, "cache_hits")
            return await asyncio.shield(self._inflight[key])
        future: asyncio.Future[_Outcome] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            outcome = await (self._call_mqe(key) if kind == "mqe" else self._call_hyde(key))
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: waiters re-raise it themselves
            raise
        finally:
            self._inflight.pop(key, None)
        self._cache[key] = outcome
        future.set_result(outcome)
        return outcome

    def _count(self, kind: str, what: str) -> None:
        name = f"{kind}_{what}"
        setattr(self.stats, name, getattr(self.stats, name) + 1)

    async def _ask(self, kind: str, system: str, user: str, schema: dict, key: tuple) -> Any:
        request = LLMRequest.of(
            [{"role": "system", "content": system}, {"role": "user", "content": user}],
            json_schema=schema,
            temperature=self.temperature,
            seed=child_seed(self.seed, "rag", *key),
            max_tokens=self.max_tokens,
            tag=f"rag_{kind}",
        )
        response = await self.backend.achat(request)
        self._count(kind, "calls")
        self.stats.prompt_tokens += response.prompt_tokens
        self.stats.completion_tokens += response.completion_tokens
        if response.parsed is not None:
            return response.parsed
        try:
            return json.loads(response.text)
        except json.JSONDecodeError:
            return None

    async def _call_mqe(self, key: tuple[str, str, int]) -> _Outcome:
        _, query, n = key
        fill = {"query": query, "n": str(n)}
        reply = await self._ask(
            "mqe",
            Template(self.prompts.mqe_system).substitute(fill),
            Template(self.prompts.mqe_user).substitute(fill),
            mqe_schema(n),
            key,
        )
        raw = reply.get("queries") if isinstance(reply, dict) else None
        if not isinstance(raw, list):
            self._count("mqe", "failures")
            return _Outcome([], f"mqe: reply without a 'queries' list for {query[:60]!r}; skipped")
        queries: list[str] = []
        for q in raw:
            text = " ".join(str(q).split())[:MAX_QUERY_CHARS] if isinstance(q, str) else ""
            if len(text) >= 3 and text != query and text not in queries:
                queries.append(text)
        note = None
        if len(queries) < n:
            note = f"mqe: {len(queries)} usable of {n} queries requested for {query[:60]!r}"
        return _Outcome(queries[:n], note)

    async def _call_hyde(self, key: tuple[str, str, int]) -> _Outcome:
        query = key[1]
        reply = await self._ask(
            "hyde",
            self.prompts.hyde_system,
            Template(self.prompts.hyde_user).substitute(query=query),
            HYDE_SCHEMA,
            key,
        )
        passage = reply.get("passage") if isinstance(reply, dict) else None
        if not isinstance(passage, str) or len(passage.strip()) < 20:
            self._count("hyde", "failures")
            return _Outcome(None, f"hyde: reply without a usable 'passage' for {query[:60]!r}")
        return _Outcome(" ".join(passage.split())[:MAX_PASSAGE_CHARS])
