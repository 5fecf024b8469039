"""KnowledgeBase: TF-IDF retrieval over the shipped documents, MQE/HyDE, topic retrieval."""

from __future__ import annotations

import asyncio
import json

import pytest
from rag_helpers import KNOWLEDGE_DIR, TOPICS_FILE, CountingEmbedder, situation

from governed_broker.config.base import ConfigError
from governed_broker.config.broker import RAGConfig
from governed_broker.llm.scripted import ScriptedBackend
from governed_broker.memory.embedding import TfidfEmbedder
from governed_broker.rag import HYDE_SCHEMA, KnowledgeBase, load_chunks, load_topics, mqe_schema
from governed_broker.seeding import child_seed

CHUNKS = load_chunks(KNOWLEDGE_DIR, 1200)
TOPICS = load_topics(TOPICS_FILE)


def make_kb(**kwargs) -> KnowledgeBase:
    embedder = kwargs.pop("embedder", None) or TfidfEmbedder([c.text for c in CHUNKS])
    return KnowledgeBase(CHUNKS, embedder, topics=TOPICS, **kwargs)


@pytest.mark.parametrize(
    ("query", "expected_source"),
    [
        (
            "How much does the NFIP pay for my building and my contents?",
            "nfip_basics.md#Coverage limits",
        ),
        (
            "waiting period before a new policy takes effect",
            "nfip_basics.md#The 30-day waiting period",
        ),
        (
            "Are basement walls and belongings covered?",
            "insurance_coverage.md#Basements are covered only in part",
        ),
        (
            "temporary housing while the home is repaired",
            "insurance_coverage.md#What is not covered",
        ),
        (
            "Increased Cost of Compliance after substantial damage",
            "elevation_and_subsidies.md#Increased Cost of Compliance (ICC)",
        ),
        (
            "Hazard Mitigation Assistance grant cost share",
            "elevation_and_subsidies.md#FEMA Hazard Mitigation Assistance grants",
        ),
        ("New Jersey Blue Acres buyout", "relocation_and_buyouts.md#NJ Blue Acres as an example"),
    ],
)
def test_topical_queries_find_the_relevant_section(query, expected_source) -> None:
    results = make_kb().search(query)
    assert results[0].source == expected_source
    assert results[0].similarity > 0.1
    assert [c.score for c in results] == sorted((c.score for c in results), reverse=True)


def test_front_matter_is_a_citation_not_a_result() -> None:
    kb = make_kb(top_k=25)
    results = kb.search("Source FEMA disclaimer check every figure study area")
    assert all(not c.front_matter for c in results)
    assert kb.n_front_matter == 4
    assert all(c.citation.startswith("FEMA") for c in results if c.doc.startswith("nfip"))


def test_unrelated_query_returns_nothing() -> None:
    assert make_kb().search("quantum chromodynamics lattice gluon") == []


def test_min_similarity_filters_weak_matches() -> None:
    strict = make_kb(min_similarity=0.99, top_k=5).search("coverage limits")
    assert strict == []


def test_search_is_deterministic() -> None:
    a = make_kb(top_k=6).search("flood insurance deductible premium")
    b = make_kb(top_k=6).search("flood insurance deductible premium")
    assert [(c.source, c.score, c.similarity) for c in a] == [
        (c.source, c.score, c.similarity) for c in b
    ]


# --- MQE and HyDE ------------------------------------------------------------------------
MQE_REPLY = {"queries": ["buyout of flooded homes", "Blue Acres open space", "sell house to state"]}
HYDE_REPLY = {
    "passage": "Blue Acres buys flood-prone homes from willing sellers at pre-flood fair "
    "market value and keeps the land as open space."
}


def scripted(mqe=MQE_REPLY, hyde=HYDE_REPLY) -> ScriptedBackend:
    return ScriptedBackend([(r"search queries", mqe), (r"passage", hyde)], name="rag")


def test_mqe_and_hyde_requests_use_schemas_seeds_and_tags() -> None:
    backend = scripted()
    kb = make_kb(backend=backend, seed=11, mqe_queries=3, hyde=True)
    query = "What happens to my land in a buyout?"
    retrieval = kb.retrieve(query)
    by_tag = {r.tag: r for r in backend.calls}
    assert set(by_tag) == {"rag_mqe", "rag_hyde"}
    assert by_tag["rag_mqe"].json_schema == mqe_schema(3)
    assert by_tag["rag_mqe"].json_schema["properties"]["queries"]["minItems"] == 3
    assert by_tag["rag_hyde"].json_schema == HYDE_SCHEMA
    assert by_tag["rag_mqe"].seed == child_seed(11, "rag", "mqe", query, 3)
    assert by_tag["rag_hyde"].seed == child_seed(11, "rag", "hyde", query, 0)
    assert query in by_tag["rag_mqe"].messages[-1]["content"]
    assert "3 different" in by_tag["rag_mqe"].messages[-1]["content"]
    assert retrieval.queries == (query, *MQE_REPLY["queries"], HYDE_REPLY["passage"])
    # the expansions talk about Blue Acres; the bare question does not find it
    blue_acres = "relocation_and_buyouts.md#NJ Blue Acres as an example"
    assert blue_acres in [c.source for c in retrieval.chunks]
    assert blue_acres not in [c.source for c in make_kb().search(query)]
    json.dumps(retrieval.to_dict())


def test_expansion_embeds_every_query() -> None:
    embedder = CountingEmbedder(TfidfEmbedder([c.text for c in CHUNKS]))
    kb = make_kb(embedder=embedder, backend=scripted(), mqe_queries=3, hyde=True)
    embedder.seen.clear()
    kb.search("buyout")
    assert embedder.seen == ["buyout", *MQE_REPLY["queries"], HYDE_REPLY["passage"]]


def test_expansions_are_cached_by_query() -> None:
    backend = scripted()
    kb = make_kb(backend=backend, mqe_queries=3, hyde=True)
    first = kb.retrieve("buyout")
    second = kb.retrieve("buyout")
    kb.retrieve("elevation")
    assert len(backend.calls) == 4  # two kinds x two distinct queries
    assert first.expansion_cache_hits == () and second.expansion_cache_hits == ("hyde", "mqe")
    assert first.chunks == second.chunks
    stats = kb.stats()["expansion"]
    assert (
        stats["mqe_calls"] == 2 and stats["mqe_cache_hits"] == 1 and stats["hyde_cache_hits"] == 1
    )


def test_concurrent_identical_queries_share_one_llm_call() -> None:
    backend = scripted()
    kb = make_kb(backend=backend, mqe_queries=3)

    async def many():
        return await asyncio.gather(*(kb.aretrieve("buyout") for _ in range(5)))

    results = asyncio.run(many())
    assert len(backend.calls) == 1
    assert len({r.chunks for r in results}) == 1


def test_only_switched_on_expansions_are_requested() -> None:
    backend = scripted()
    make_kb(backend=backend, hyde=True).search("buyout")
    assert [r.tag for r in backend.calls] == ["rag_hyde"]
    backend = scripted()
    make_kb(backend=backend, mqe_queries=2).search("buyout")
    assert [r.tag for r in backend.calls] == ["rag_mqe"]


def test_bad_llm_replies_are_recorded_not_used() -> None:
    backend = scripted(mqe="not json", hyde={"passage": "short"})
    kb = make_kb(backend=backend, mqe_queries=3, hyde=True)
    retrieval = kb.retrieve("buyout")
    assert retrieval.queries == ("buyout",)
    assert any(n.startswith("mqe:") for n in retrieval.notes)
    assert any(n.startswith("hyde:") for n in retrieval.notes)
    stats = kb.stats()["expansion"]
    assert stats["mqe_failures"] == 1 and stats["hyde_failures"] == 1


def test_partial_mqe_reply_is_noted() -> None:
    backend = scripted(
        mqe={"queries": ["buyout", "Blue Acres open space", "Blue Acres open space"]}
    )
    retrieval = make_kb(backend=backend, mqe_queries=3).retrieve("buyout")
    assert retrieval.queries == ("buyout", "Blue Acres open space")
    assert retrieval.notes and "1 usable of 3" in retrieval.notes[0]


def test_expansion_without_backend_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="need an LLM backend"):
        make_kb(mqe_queries=3)


def test_sync_api_inside_event_loop_with_expansion_is_refused() -> None:
    kb = make_kb(backend=scripted(), mqe_queries=3)

    async def call_sync():
        return kb.chunks_for(situation(floods_experienced=2))

    with pytest.raises(RuntimeError, match="await achunks_for"):
        asyncio.run(call_sync())


def test_sync_api_inside_event_loop_without_expansion_works() -> None:
    kb = make_kb()

    async def call_sync():
        return kb.chunks_for(situation(floods_experienced=2))

    assert asyncio.run(call_sync())


# --- situations ---------------------------------------------------------------------------
def test_no_topic_means_no_chunks_and_no_llm_call() -> None:
    backend = scripted()
    embedder = CountingEmbedder(TfidfEmbedder([c.text for c in CHUNKS]))
    kb = make_kb(embedder=embedder, backend=backend, mqe_queries=3, hyde=True)
    embedder.seen.clear()
    retrieval = kb.retrieve_for(situation())
    assert retrieval.topics == () and retrieval.chunks == ()
    assert backend.calls == [] and embedder.seen == []
    assert kb.chunks_for(situation()) == []


@pytest.mark.parametrize(
    ("changes", "expected_doc"),
    [
        (
            {
                "insured": False,
                "flood_probability": 0.01,
                "allowed_actions": ("do_nothing", "buy_insurance"),
            },
            "nfip_basics.md",
        ),
        (
            {"floods_experienced": 1, "allowed_actions": ("do_nothing", "elevate_house")},
            "elevation_and_subsidies.md",
        ),
        (
            {"floods_experienced": 3, "allowed_actions": ("do_nothing", "relocate")},
            "relocation_and_buyouts.md",
        ),
    ],
)
def test_chunks_for_returns_the_topic_documents(changes, expected_doc) -> None:
    chunks = make_kb().chunks_for(situation(**changes))
    assert len(chunks) == 3
    assert chunks[0].doc == expected_doc


def test_every_fired_topic_is_represented() -> None:
    s = situation(
        flooded=True, depth_m=1.5, damage_usd=90_000.0, allowed_actions=("do_nothing", "relocate")
    )
    retrieval = make_kb().retrieve_for(s)
    assert retrieval.topics == ("insurance_claim", "relocation")
    docs = [c.doc for c in retrieval.chunks]
    assert docs[0] == "insurance_coverage.md" and docs[1] == "relocation_and_buyouts.md"
    assert len({c.source for c in retrieval.chunks}) == len(retrieval.chunks)


def test_async_and_sync_situation_retrieval_agree() -> None:
    backend = scripted()
    kb = make_kb(backend=backend, mqe_queries=3, hyde=True)
    s = situation(floods_experienced=2, allowed_actions=("do_nothing", "relocate"))
    async_chunks = asyncio.run(kb.achunks_for(s))
    assert kb.chunks_for(s) == async_chunks
    assert kb.stats()["topics_fired"] == {"relocation": 2}


# --- configuration ------------------------------------------------------------------------
def test_from_config_builds_the_shipped_knowledge_base() -> None:
    config = RAGConfig(enabled=True, knowledge_dir=KNOWLEDGE_DIR, top_k=2)
    kb = KnowledgeBase.from_config(config, seed=5)
    assert kb.embedder.name.startswith("tfidf") and kb.expander is None
    assert len(kb.chunks_for(situation(floods_experienced=2))) == 2
    stats = kb.stats()
    assert stats["n_documents"] == 4 and stats["n_chunks"] > 10
    json.dumps(stats)


def test_from_config_with_expansion_uses_the_backend() -> None:
    backend = scripted()
    config = RAGConfig(
        enabled=True, knowledge_dir=KNOWLEDGE_DIR, mqe=True, mqe_queries=3, hyde=True
    )
    kb = KnowledgeBase.from_config(config, backend=backend, seed=5)
    kb.search("buyout")
    assert len(backend.calls) == 2
    with pytest.raises(ConfigError, match="need an LLM backend"):
        KnowledgeBase.from_config(config, seed=5)


def test_from_config_errors_name_the_setting(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"rag\.knowledge_dir.*does not exist"):
        KnowledgeBase.from_config(RAGConfig(enabled=True, knowledge_dir=tmp_path / "none"))
    (tmp_path / "a.md").write_text("# A\n\ntext\n")
    with pytest.raises(ConfigError, match="rag_topics.yaml"):
        KnowledgeBase.from_config(RAGConfig(enabled=True, knowledge_dir=tmp_path))


def test_rag_config_rejects_bad_values() -> None:
    with pytest.raises(ValueError, match="top_k"):
        RAGConfig(top_k=0)
    with pytest.raises(ValueError, match="embedder"):
        RAGConfig(embedder="hash")
    with pytest.raises(ValueError, match="mqe_querys"):
        RAGConfig.model_validate({"mqe_querys": 2})


def test_from_config_resolves_relative_paths_against_base_dir() -> None:
    experiments = KNOWLEDGE_DIR.parent.parent / "experiments"
    config = RAGConfig(enabled=True)  # default ../configs/knowledge
    kb = KnowledgeBase.from_config(config, base_dir=experiments)
    assert kb.stats()["n_documents"] == 4
    relative_topics = RAGConfig(
        enabled=True, knowledge_dir=KNOWLEDGE_DIR, topics_file="../configs/knowledge/none.yaml"
    )
    with pytest.raises(ConfigError, match=str(experiments / "../configs/knowledge/none.yaml")):
        KnowledgeBase.from_config(relative_topics, base_dir=experiments)
