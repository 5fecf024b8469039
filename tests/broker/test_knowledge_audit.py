"""The knowledge base's retrieval is part of each decision's audit record."""

from __future__ import annotations

from pathlib import Path

from broker_helpers import (
    FIRST,
    PROMPTS,
    SCALE,
    governance_rules,
    make_situation,
    read_jsonl,
    registry,
    reply,
)

from governed_broker.broker.governed import GovernedBroker
from governed_broker.broker.rules import RuleSet
from governed_broker.cognition.context import ContextBuilder
from governed_broker.config.broker import GovernanceConfig, RAGConfig
from governed_broker.llm.scripted import ScriptedBackend
from governed_broker.rag import KnowledgeBase

KNOWLEDGE = Path(__file__).resolve().parents[2] / "configs" / "knowledge"


def test_retrieval_account_is_audited(tmp_path: Path) -> None:
    backend = ScriptedBackend([(FIRST, reply("H", "M", "buy_insurance"))], name="kb")
    kb = KnowledgeBase.from_config(RAGConfig(enabled=True, knowledge_dir=KNOWLEDGE))
    reg = registry()
    context = ContextBuilder.from_dir(PROMPTS, reg.descriptions(), SCALE, knowledge=kb)
    broker = GovernedBroker(
        backend, context, reg, RuleSet(governance_rules(), "strict", reg, SCALE.labels),
        GovernanceConfig(), seed=3, run_id="kb-run", audit_path=tmp_path / "decisions.jsonl")
    try:
        # flooded and uninsured: touches the insurance topic
        broker.decide([make_situation(flooded=True, insured=False)])
    finally:
        broker.close()
    (record,) = read_jsonl(tmp_path / "decisions.jsonl")
    found = record["knowledge_retrieval"]
    assert found["topics"], "a policy topic should have fired"
    assert [c["source"] for c in found["chunks"]] == record["knowledge_sources"]
    assert record["knowledge_sources"], "chunks were shown"
    assert found["notes"] == []  # no query expansion configured, nothing failed
