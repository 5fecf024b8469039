"""Knowledge base over ``configs/knowledge/``.

Heading-aware chunks, embedding search with multi-query expansion (MQE) and HyDE, policy-topic
triggers, and the seed-001 tool view.

See docs/knowledge.md and docs/ARCHITECTURE.md.
"""

from governed_broker.config.knowledge import Topic, TopicCondition, TopicsFile, load_topics
from governed_broker.rag.chunking import Chunk, chunk_markdown, load_chunks, split_body
from governed_broker.rag.expansion import HYDE_SCHEMA, Expansion, QueryExpander, mqe_schema
from governed_broker.rag.fusion import reciprocal_rank_fusion
from governed_broker.rag.knowledge_base import KnowledgeBase, Retrieval, build_embedder
from governed_broker.rag.tools import MemoryTool, RAGTool

__all__ = [
    "HYDE_SCHEMA",
    "Chunk",
    "Expansion",
    "KnowledgeBase",
    "MemoryTool",
    "QueryExpander",
    "RAGTool",
    "Retrieval",
    "Topic",
    "TopicCondition",
    "TopicsFile",
    "build_embedder",
    "chunk_markdown",
    "load_chunks",
    "load_topics",
    "mqe_schema",
    "reciprocal_rank_fusion",
    "split_body",
]
