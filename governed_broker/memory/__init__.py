"""Human-centric memory (docs/memory.md).

Engine, working/episodic/semantic/procedural stores, consolidation, fidelity, metacognition,
Markdown export. The flood world's household adapter is ``governed_broker.sim.household_memory``.

Heavy optional dependencies (FAISS, sentence-transformers, ollama) are imported only when
the corresponding class is constructed.
"""

from governed_broker.memory.consolidation import ConsolidationReport, consolidate
from governed_broker.memory.embedding import (
    Embedder,
    EmbedderUnavailable,
    MiniLMEmbedder,
    OllamaEmbedder,
    TfidfEmbedder,
    make_embedder,
)
from governed_broker.memory.engine import (
    HumanCentricMemoryEngine,
    WindowMemoryEngine,
    make_engine,
)
from governed_broker.memory.episodic import Episode, EpisodicStore, SearchHit
from governed_broker.memory.export import export_markdown, render_markdown
from governed_broker.memory.item import FIDELITY_LEVELS, MemoryItem, fidelity_for_age
from governed_broker.memory.metacognition import MetacognitiveRecord, StrategyRecord
from governed_broker.memory.procedural import Heuristic, ProceduralMemory
from governed_broker.memory.protocol import MemoryEngine
from governed_broker.memory.semantic import SemanticMemory
from governed_broker.memory.working import WorkingMemory

__all__ = [
    "FIDELITY_LEVELS",
    "ConsolidationReport",
    "Embedder",
    "EmbedderUnavailable",
    "Episode",
    "EpisodicStore",
    "Heuristic",
    "HumanCentricMemoryEngine",
    "MemoryEngine",
    "MemoryItem",
    "MetacognitiveRecord",
    "MiniLMEmbedder",
    "OllamaEmbedder",
    "ProceduralMemory",
    "SearchHit",
    "SemanticMemory",
    "StrategyRecord",
    "TfidfEmbedder",
    "WindowMemoryEngine",
    "WorkingMemory",
    "consolidate",
    "export_markdown",
    "fidelity_for_age",
    "make_embedder",
    "make_engine",
    "render_markdown",
]
