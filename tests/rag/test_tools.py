"""The seed-001 tool view: RAGTool and MemoryTool with run({"action": ...})."""

from __future__ import annotations

import json

import numpy as np
import pytest
from rag_helpers import KNOWLEDGE_DIR, TOPICS_FILE

from governed_broker.llm.scripted import ScriptedBackend
from governed_broker.memory.embedding import TfidfEmbedder
from governed_broker.memory.engine import HumanCentricMemoryEngine
from governed_broker.rag import KnowledgeBase, MemoryTool, RAGTool, load_chunks, load_topics
from governed_broker.rag.tools import json_safe


@pytest.fixture(scope="module")
def rag_tool() -> RAGTool:
    chunks = load_chunks(KNOWLEDGE_DIR)
    kb = KnowledgeBase(
        chunks, TfidfEmbedder([c.text for c in chunks]), topics=load_topics(TOPICS_FILE)
    )
    return RAGTool(kb)


def test_rag_search_returns_json_results(rag_tool) -> None:
    reply = rag_tool.run({"action": "search", "query": "30-day waiting period", "top_k": 2})
    assert reply["status"] == "ok" and len(reply["results"]) == 2
    assert reply["results"][0]["source"] == "nfip_basics.md#The 30-day waiting period"
    assert reply["results"][0]["citation"].startswith("FEMA")
    assert reply["queries"] == ["30-day waiting period"]
    assert json.loads(json.dumps(reply)) == reply


def test_rag_stats_and_topics(rag_tool) -> None:
    stats = rag_tool.run({"action": "stats"})
    assert stats["status"] == "ok" and stats["stats"]["n_documents"] == 4
    topics = rag_tool.run({"action": "topics"})
    assert "relocation" in [t["id"] for t in topics["topics"]]
    json.dumps([stats, topics])


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"action": "index"}, "unknown action 'index'; allowed: search, topics, stats"),
        ({}, "unknown action None"),
        ({"action": "search"}, "missing required parameters ['query']"),
        ({"action": "search", "query": "x", "k": 3}, "unknown parameters ['k']"),
        ({"action": "search", "query": "  "}, "non-empty string"),
        ({"action": "search", "query": "x", "top_k": 0}, "positive integer"),
        ({"action": "search", "query": "x", "top_k": True}, "positive integer"),
    ],
)
def test_rag_tool_errors_are_clear(rag_tool, params, message) -> None:
    reply = rag_tool.run(params)
    assert reply["status"] == "error" and message in reply["message"]


def test_rag_tool_rejects_non_mapping(rag_tool) -> None:
    assert rag_tool.run(["search"])["status"] == "error"


def test_rag_tool_uses_llm_expansion() -> None:
    chunks = load_chunks(KNOWLEDGE_DIR)
    backend = ScriptedBackend([(r"search queries", {"queries": ["a b c", "d e f"]})])
    kb = KnowledgeBase(
        chunks,
        TfidfEmbedder([c.text for c in chunks]),
        topics=load_topics(TOPICS_FILE),
        backend=backend,
        mqe_queries=2,
    )
    reply = RAGTool(kb).run({"action": "search", "query": "buyout"})
    assert reply["queries"] == ["buyout", "a b c", "d e f"]
    assert len(backend.calls) == 1


# --- MemoryTool over the real engine -----------------------------------------------------
@pytest.fixture
def memory_tool() -> MemoryTool:
    engine = HumanCentricMemoryEngine(rng=np.random.default_rng(0), agent_id=4)
    return MemoryTool(engine)


def test_memory_add_retrieve_stats(memory_tool) -> None:
    added = memory_tool.run(
        {"action": "add", "content": "My house was flooded, 40 cm of water", "year": 2}
    )
    assert added["status"] == "ok" and added["item"]["year"] == 2.0
    assert added["item"]["kind"] == "event" and added["item"]["importance"] > 0
    memory_tool.run(
        {"action": "add", "content": "I live in a flood zone", "year": 2, "kind": "insight"}
    )
    got = memory_tool.run({"action": "retrieve", "year": 3})
    assert got["status"] == "ok" and got["count"] == 2
    assert {i["content"] for i in got["items"]} == {
        "My house was flooded, 40 cm of water",
        "I live in a flood zone",
    }
    stats = memory_tool.run({"action": "stats"})["stats"]
    assert stats["n_items"] == 2 and stats["by_kind"] == {"event": 1, "insight": 1}
    json.dumps([added, got, stats])


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"action": "consolidate"}, "unknown action 'consolidate'; allowed: add, retrieve, stats"),
        ({"action": "add", "content": "x"}, "missing required parameters ['year']"),
        ({"action": "add", "content": "", "year": 1}, "non-empty string"),
        ({"action": "add", "content": "x", "year": "one"}, "year must be a number"),
        ({"action": "add", "content": "x", "year": 1, "kind": "dream"}, "unknown memory kind"),
        ({"action": "retrieve"}, "missing required parameters ['year']"),
        ({"action": "stats", "agent": 1}, "unknown parameters ['agent']"),
    ],
)
def test_memory_tool_errors_are_clear(memory_tool, params, message) -> None:
    reply = memory_tool.run(params)
    assert reply["status"] == "error" and message in reply["message"], reply


def test_json_safe_converts_numpy_tuples_sets_and_nan() -> None:
    value = {"a": np.float32(1.5), "b": (1, 2), "c": {"y", "x"}, "d": float("nan"), 3: np.int64(2)}
    assert json_safe(value) == {"a": 1.5, "b": [1, 2], "c": ["x", "y"], "d": None, "3": 2}
