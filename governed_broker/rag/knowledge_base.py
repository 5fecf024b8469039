"""The knowledge base: chunked markdown documents, an embedding index and topic-driven search.

Search embeds each query (the original, MQE alternatives, the HyDE passage) with the
knowledge base's ``Embedder``, ranks all chunks by cosine similarity per query, keeps the chunks
whose best similarity reaches ``min_similarity`` and fuses the per-query rankings with
reciprocal rank fusion (``governed_broker.rag.fusion``). ``chunks_for(situation)`` first asks
the topics file whether the household's situation touches a policy topic at all; if none
fires it returns ``[]`` without any embedding or LLM work.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from governed_broker.config.base import ConfigError
from governed_broker.config.knowledge import Topic, TopicsFile, load_topics
from governed_broker.contracts.decision import HouseholdSituation
from governed_broker.llm.base import LLMBackend
from governed_broker.rag.chunking import Chunk, load_chunks
from governed_broker.rag.expansion import Expansion, QueryExpander
from governed_broker.rag.fusion import reciprocal_rank_fusion

if TYPE_CHECKING:  # pragma: no cover
    from governed_broker.config.broker import RAGConfig

TOPICS_FILE_NAME = "rag_topics.yaml"


class EmbedderLike(Protocol):
    """What the knowledge base needs of ``governed_broker.memory.embedding.Embedder``."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One vector per text (rows of a float array)."""
        ...


@dataclass(frozen=True)
class Retrieval:
    """One search with everything an audit needs to explain it.

    Attributes:
        topics: Ids of the policy topics that fired (empty for a free query search).
        queries: Every query text embedded, in fusion order (original first, then MQE, HyDE).
        chunks: Results, best first.
        expansion_cache_hits: MQE/HyDE replies served from the in-memory cache.
        notes: Failed or partial expansions.
    """

    topics: tuple[str, ...]
    queries: tuple[str, ...]
    chunks: tuple[Chunk, ...]
    expansion_cache_hits: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (for ``decisions.jsonl``)."""
        return {
            "topics": list(self.topics),
            "queries": list(self.queries),
            "chunks": [c.to_dict() for c in self.chunks],
            "expansion_cache_hits": list(self.expansion_cache_hits),
            "notes": list(self.notes),
        }


class KnowledgeBase:
    """Chunks of knowledge documents with an embedding index, searched with optional MQE/HyDE.

    Args:
        chunks: Chunks to index (``load_chunks`` / ``chunk_markdown``).
        embedder: Embedder whose ``embed`` returns L2-normalised float32 rows (a TF-IDF
            embedder must already be fitted on these chunks).
        topics: Topic triggers and prompt templates; required for ``chunks_for`` and for
            MQE/HyDE.
        backend: LLM backend for MQE/HyDE; required when either is on.
        seed: Experiment seed (MQE/HyDE request seeds derive from it).
        top_k: Results per search.
        min_similarity: Cosine similarity a chunk needs with at least one query.
        mqe_queries: Alternative queries per search (0 turns MQE off).
        hyde: Whether to add a HyDE passage to each search.
        rrf_k: Reciprocal rank fusion constant.
        expansion_temperature: Sampling temperature of MQE/HyDE requests.
        expansion_max_tokens: Token limit of MQE/HyDE replies.
    """

    def __init__(
        self,
        chunks: Sequence[Chunk],
        embedder: EmbedderLike,
        *,
        topics: TopicsFile | None = None,
        backend: LLMBackend | None = None,
        seed: int = 0,
        top_k: int = 3,
        min_similarity: float = 0.05,
        mqe_queries: int = 0,
        hyde: bool = False,
        rrf_k: int = 60,
        expansion_temperature: float = 0.7,
        expansion_max_tokens: int = 256,
    ) -> None:
        indexed = tuple(c for c in chunks if not c.front_matter)
        if not indexed:
            raise ValueError("a knowledge base needs at least one chunk besides front matter")
        if (mqe_queries > 0 or hyde) and (backend is None or topics is None):
            raise ConfigError(
                "rag.mqe / rag.hyde need an LLM backend (the experiment's `llm:` section) and a "
                "topics file with the expansion prompts; turn them off or configure `llm:`"
            )
        #: Retrievable chunks (front matter, i.e. title + Source line + disclaimer, excluded).
        self.chunks: tuple[Chunk, ...] = indexed
        self.n_front_matter = len(chunks) - len(indexed)
        self.embedder = embedder
        self.topics = topics
        self.top_k = top_k
        self.min_similarity = min_similarity
        self.mqe_queries = mqe_queries
        self.hyde = hyde
        self.rrf_k = rrf_k
        self.expander = (
            QueryExpander(
                backend, topics.prompts, seed, expansion_temperature, expansion_max_tokens
            )
            if backend is not None and topics is not None
            else None
        )
        self._matrix = self._embed(c.text for c in self.chunks)
        self._searches = 0
        self._situations = 0
        self._topic_counts: dict[str, int] = {}

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_config(
        cls,
        config: RAGConfig,
        *,
        backend: LLMBackend | None = None,
        seed: int = 0,
        embedder: EmbedderLike | None = None,
        base_dir: Path | None = None,
    ) -> KnowledgeBase:
        """Build from the experiment's ``rag:`` section.

        Args:
            config: The validated ``RAGConfig``.
            backend: LLM backend (used only when ``mqe`` or ``hyde`` is on).
            seed: Experiment seed.
            embedder: A ready embedder; by default ``make_embedder(config.embedder)`` (TF-IDF
                fitted on the chunks).
            base_dir: Directory that relative ``knowledge_dir`` / ``topics_file`` resolve
                against: the experiment file's directory (``ExperimentConfig.base_dir``);
                ``None`` leaves them relative to the working directory.
        """

        def resolve(path: Path) -> Path:
            path = Path(path)
            return path if base_dir is None or path.is_absolute() else Path(base_dir) / path

        knowledge_dir = resolve(config.knowledge_dir)
        try:
            chunks = load_chunks(knowledge_dir, config.max_chunk_chars)
        except FileNotFoundError as exc:
            raise ConfigError(f"rag.knowledge_dir: {exc}") from exc
        topics_path = (
            resolve(config.topics_file) if config.topics_file else knowledge_dir / TOPICS_FILE_NAME
        )
        topics = load_topics(topics_path)
        if embedder is None:
            embedder = build_embedder(config.embedder, [c.text for c in chunks])
        return cls(
            chunks,
            embedder,
            topics=topics,
            backend=backend if (config.mqe or config.hyde) else None,
            seed=seed,
            top_k=config.top_k,
            min_similarity=config.min_similarity,
            mqe_queries=config.mqe_queries if config.mqe else 0,
            hyde=config.hyde,
            rrf_k=config.rrf_k,
            expansion_temperature=config.expansion_temperature,
            expansion_max_tokens=config.expansion_max_tokens,
        )

    # ------------------------------------------------------------------ search
    def _embed(self, texts: Any) -> np.ndarray:
        texts = list(texts)
        matrix = np.asarray(self.embedder.embed(texts), dtype=np.float32)
        if matrix.shape != (len(texts), self.embedder.dim):
            raise ValueError(
                f"embedder {self.embedder.name!r} returned shape {matrix.shape}, expected "
                f"({len(texts)}, {self.embedder.dim})"
            )
        return matrix

    def _rank(self, queries: Sequence[str], top_k: int) -> Retrieval:
        """Rank chunks for already-expanded queries and fuse (no LLM calls)."""
        self._searches += 1
        sims = self._embed(queries) @ self._matrix.T  # (n_queries, n_chunks) cosines
        best = sims.max(axis=0)
        rankings = []
        for row in sims:
            # stable sort: equal similarities keep document order, so ranks are deterministic
            order = np.argsort(-row, kind="stable")
            rankings.append([int(i) for i in order if row[i] >= self.min_similarity])
        fused = reciprocal_rank_fusion(rankings, self.rrf_k)[:top_k]
        chunks = tuple(
            replace(self.chunks[i], score=score, similarity=float(best[i])) for i, score in fused
        )
        return Retrieval(topics=(), queries=tuple(queries), chunks=chunks)

    @property
    def expands(self) -> bool:
        """Whether searches call the LLM (MQE or HyDE on)."""
        return self.expander is not None and (self.mqe_queries > 0 or self.hyde)

    async def _aexpand_all(self, queries: Sequence[str]) -> list[Expansion]:
        if not self.expands:
            return [Expansion() for _ in queries]
        assert self.expander is not None
        return list(
            await asyncio.gather(
                *(self.expander.aexpand(q, self.mqe_queries, self.hyde) for q in queries)
            )
        )

    def _expand_all(self, queries: Sequence[str]) -> list[Expansion]:
        """Synchronous expansion; LLM calls need their own event loop."""
        if not self.expands:
            return [Expansion() for _ in queries]
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._aexpand_all(queries))
        raise RuntimeError(
            "KnowledgeBase: the synchronous API was called inside a running event loop with "
            "MQE/HyDE on; await achunks_for()/aretrieve() instead"
        )

    def _expanded(self, query: str, expansion: Expansion, top_k: int) -> Retrieval:
        queries = [query, *expansion.queries]
        if expansion.hypothetical:
            queries.append(expansion.hypothetical)
        result = self._rank(queries, top_k)
        return replace(result, expansion_cache_hits=expansion.cache_hits, notes=expansion.notes)

    async def aretrieve(self, query: str, top_k: int | None = None) -> Retrieval:
        """Search for a free-text query, with MQE/HyDE when configured."""
        (expansion,) = await self._aexpand_all([query])
        return self._expanded(query, expansion, top_k or self.top_k)

    def retrieve(self, query: str, top_k: int | None = None) -> Retrieval:
        """Synchronous ``aretrieve``; with MQE/HyDE on it must not run inside an event loop."""
        (expansion,) = self._expand_all([query])
        return self._expanded(query, expansion, top_k or self.top_k)

    def search(self, query: str, top_k: int | None = None) -> list[Chunk]:
        """Chunks for a free-text query, best first."""
        return list(self.retrieve(query, top_k).chunks)

    # ------------------------------------------------------------------ situations
    def _fired(self, situation: HouseholdSituation) -> list[Topic]:
        if self.topics is None:
            raise ConfigError(
                "this knowledge base has no topics file, so it cannot judge situations; "
                f"add {TOPICS_FILE_NAME} to the knowledge directory or set rag.topics_file"
            )
        return self.topics.matching(situation)

    def _combine(
        self, fired: Sequence[Topic], queries: Sequence[str], expansions: Sequence[Expansion]
    ) -> Retrieval:
        """One fused ranking per fired topic, interleaved so that every topic is represented.

        The result takes each topic's best chunk in topic order, then each topic's second
        best, and so on, skipping chunks already taken, until ``top_k`` chunks are chosen.
        """
        self._situations += 1
        for topic in fired:
            self._topic_counts[topic.id] = self._topic_counts.get(topic.id, 0) + 1
        if not fired:
            return Retrieval(topics=(), queries=(), chunks=())
        per_topic = [
            self._expanded(q, e, self.top_k) for q, e in zip(queries, expansions, strict=True)
        ]
        chosen: dict[str, Chunk] = {}
        for rank in range(self.top_k):
            for result in per_topic:
                if rank < len(result.chunks) and len(chosen) < self.top_k:
                    chosen.setdefault(result.chunks[rank].source, result.chunks[rank])
        return Retrieval(
            topics=tuple(t.id for t in fired),
            queries=tuple(q for r in per_topic for q in r.queries),
            chunks=tuple(chosen.values()),
            expansion_cache_hits=tuple(h for r in per_topic for h in r.expansion_cache_hits),
            notes=tuple(n for r in per_topic for n in r.notes),
        )

    async def aretrieve_for(self, situation: HouseholdSituation) -> Retrieval:
        """Retrieval for a household: one search per fired topic; empty if none fired.

        Each fired topic's query (filled from the situation) is expanded and ranked on its own
        (RRF over its queries); the topics' rankings are then interleaved (``_combine``) so
        that a second topic is represented before the next-best chunk of the first.
        """
        fired = self._fired(situation)
        queries = [t.query_for(situation) for t in fired]
        return self._combine(fired, queries, await self._aexpand_all(queries))

    def retrieve_for(self, situation: HouseholdSituation) -> Retrieval:
        """Synchronous ``aretrieve_for``; with MQE/HyDE on it must not run inside a loop."""
        fired = self._fired(situation)
        queries = [t.query_for(situation) for t in fired]
        return self._combine(fired, queries, self._expand_all(queries))

    def chunks_for(self, situation: HouseholdSituation) -> list[Chunk]:
        """Top chunks for the household's situation; ``[]`` when no policy topic is touched."""
        return list(self.retrieve_for(situation).chunks)

    async def achunks_for(self, situation: HouseholdSituation) -> list[Chunk]:
        """Async ``chunks_for`` (use it inside an event loop when MQE/HyDE are on)."""
        return list((await self.aretrieve_for(situation)).chunks)

    # ------------------------------------------------------------------ misc
    def stats(self) -> dict[str, Any]:
        """JSON-serialisable counters: documents, chunks, searches, topics fired, LLM calls."""
        docs = sorted({c.doc for c in self.chunks})
        return {
            "documents": docs,
            "n_documents": len(docs),
            "n_chunks": len(self.chunks),
            "n_front_matter": self.n_front_matter,
            "embedder": self.embedder.name,
            "dim": int(self.embedder.dim),
            "mqe_queries": self.mqe_queries,
            "hyde": self.hyde,
            "top_k": self.top_k,
            "n_searches": self._searches,
            "n_situations": self._situations,
            "topics_fired": dict(sorted(self._topic_counts.items())),
            "expansion": self.expander.stats.as_dict() if self.expander else None,
        }


def build_embedder(name: str, corpus: Sequence[str]) -> EmbedderLike:
    """Create the named embedder via ``governed_broker.memory.embedding.make_embedder``.

    ``tfidf`` is fitted on ``corpus`` (the chunk texts); ``minilm`` and ``ollama`` use their
    defaults (``OLLAMA_HOST``, model ``nomic-embed-text``) and raise ``EmbedderUnavailable``
    with installation advice when they cannot run.
    """
    from governed_broker.memory.embedding import make_embedder

    if name == "tfidf":
        return make_embedder(name, corpus=list(corpus))
    return make_embedder(name)
