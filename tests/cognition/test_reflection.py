"""Reflection with a scripted backend and a small fake memory engine."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from broker_helpers import PROMPTS, read_jsonl

from governed_broker.cognition.reflection import ReflectionEngine, parse_insights
from governed_broker.config.broker import ReflectionConfig
from governed_broker.contracts.decision import ReflectionTarget
from governed_broker.llm.scripted import ScriptedBackend
from governed_broker.seeding import child_seed


@dataclass
class Item:
    """A ``Remembered`` whose text is its content at every fidelity."""

    id: str
    year: float
    content: str
    kind: str = "event"
    importance: float = 0.5
    fidelity: str = "detailed"

    def text(self, fidelity=None):
        return self.content


@dataclass
class FakeEngine:
    """The two methods reflection uses: ``items()`` and ``add_insight(content, year, ...)``."""

    stored: list = field(default_factory=list)
    memories: list = field(default_factory=list)

    def items(self):
        return list(self.memories)

    def add_insight(self, content, year, *, salience=1.0, sources=()):
        item = Item(f"i{len(self.stored)}", year, content, "insight", 10.0 * salience)
        item.sources = tuple(sources)
        self.stored.append(item)
        return item


INSIGHTS = {"insights": ["I live where floods reach my home.", "Insurance is worth having.",
                         "My neighbours are elevating."]}


def engine(backend, tmp_path=None, **cfg) -> ReflectionEngine:
    config = ReflectionConfig(enabled=True, **cfg)
    return ReflectionEngine.from_dir(
        PROMPTS, backend, config, seed=5, run_id="r",
        log_path=(tmp_path / "reflections.jsonl") if tmp_path else None)


def target(agent_id: int, memories: list, tenure: str = "owner") -> ReflectionTarget:
    return ReflectionTarget(agent_id, tenure, "high", FakeEngine(memories=memories))


def year3_memories():
    return [Item("m1", 3, "A flood put 0.8 m of water in my home.", importance=1.0),
            Item("m2", 3, "I bought flood insurance.", "decision", 0.8),
            Item("m3", 2, "Last year was calm."),
            Item("m4", 3, "An old lesson.", "insight", 10.0)]


def test_insights_are_stored_with_the_year_and_logged(tmp_path):
    backend = ScriptedBackend([(r"end of\s+year 3", INSIGHTS)], name="reflect")
    eng = engine(backend, tmp_path)
    t = target(4, year3_memories())
    records = eng.reflect([t], 3)
    eng.close()
    assert [i.content for i in t.engine.stored] == INSIGHTS["insights"]
    assert all(i.year == 3 for i in t.engine.stored)
    prompt = backend.calls[0].messages[1]["content"]
    assert "0.8 m of water" in prompt and "bought flood insurance" in prompt
    assert "Last year was calm" not in prompt and "An old lesson" not in prompt
    assert prompt.index("0.8 m of water") < prompt.index("bought flood")  # most important first
    assert backend.calls[0].seed == child_seed(5, "reflection", 4, 3, 0)
    assert backend.calls[0].json_schema["properties"]["insights"]["maxItems"] == 3
    (line,) = read_jsonl(tmp_path / "reflections.jsonl")
    assert line == json.loads(json.dumps(records[0]))
    assert line["status"] == "ok" and line["memory_ids"] == ["m1", "m2"]
    assert line["insight_ids"] == ["i0", "i1", "i2"] and line["rejected"] == []
    # stored at the salience of the flood memory (importance 1.0), with their sources
    assert line["salience"] == 1.0
    assert all(i.importance == 10.0 and i.sources == ("m1", "m2") for i in t.engine.stored)


def test_unsupported_insights_are_rejected_and_recorded():
    claims = {"insights": ["Our home flooded this year and the damage cost $12,000.",
                           "Insurance paid for the repairs.", "Floods can come any year."]}
    backend = ScriptedBackend([(r".", claims)])
    quiet = [Item("m1", 3, "Year 3 was quiet: no water reached my home.", importance=0.1),
             Item("m2", 3, "I renewed my insurance policy for $1,200.", "decision", 0.1)]
    t = target(1, quiet)
    (record,) = engine(backend).reflect([t], 3)
    assert [i.content for i in t.engine.stored] == ["Floods can come any year."]
    reasons = {r["insight"]: r["reason"] for r in record["rejected"]}
    assert reasons[claims["insights"][0]] == "the number 12000 is in no source memory"
    assert reasons[claims["insights"][1]] == "claim 'insurance_payout' is in no source memory"
    # a quiet year's lesson is stored at a tenth of a flood year's weight
    assert t.engine.stored[0].importance == 1.0 and record["salience"] == 0.1


def test_supported_claims_and_numbers_pass():
    memories = [Item("m1", 3, "My home flooded 0.3 m deep; the damage cost $54,000. My "
                             "insurance paid $51,000.", importance=1.0)]
    claims = {"insights": ["Our home flooded this year, 0.3 m deep.",
                           "Insurance paid $51k of the $54,000 damage.", "In year 3 I learned."]}
    t = target(1, memories)
    (record,) = engine(ScriptedBackend([(r".", claims)])).reflect([t], 3)
    assert record["rejected"] == [] and len(t.engine.stored) == 3


def test_every_rejected_leaves_the_reflection_rejected():
    t = target(1, [Item("m1", 3, "Year 3 was quiet: no water reached my home.")])
    (record,) = engine(ScriptedBackend([(r".", {"insights": ["I got a payout of $900."]})]),
                       n_insights=1).reflect([t], 3)
    assert record["status"] == "rejected" and t.engine.stored == []


def test_household_without_memories_of_the_year_is_skipped_without_a_call():
    backend = ScriptedBackend([(r".", INSIGHTS)])
    t = target(1, [Item("m3", 2, "Last year was calm.")])
    (record,) = engine(backend).reflect([t], 3)
    assert record["status"] == "skipped" and backend.calls == [] and t.engine.stored == []


def test_unparseable_reflection_is_recorded_and_stores_nothing():
    backend = ScriptedBackend([(r".", "I learned a lot this year.")])
    t = target(1, year3_memories())
    (record,) = engine(backend, max_parse_retries=1).reflect([t], 3)
    assert record["status"] == "parse_failed" and len(record["attempts"]) == 2
    assert t.engine.stored == []
    assert "could not be read" in backend.calls[1].messages[-1]["content"]


def test_format_retry_recovers():
    backend = ScriptedBackend([(r"could not be read", INSIGHTS), (r".", "no json")])
    t = target(1, year3_memories())
    (record,) = engine(backend).reflect([t], 3)
    assert record["status"] == "ok" and len(t.engine.stored) == 3


def test_insights_stored_in_agent_order_whatever_the_input_order():
    order = []

    class Recording(FakeEngine):
        def add_insight(self, content, year, **kw):
            order.append(self.name)
            return super().add_insight(content, year, **kw)

    targets = []
    for agent_id in (9, 2, 5):
        e = Recording(memories=year3_memories())
        e.name = agent_id
        targets.append(ReflectionTarget(agent_id, "renter", "low", e))
    records = engine(ScriptedBackend([(r".", INSIGHTS)])).reflect(targets, 3)
    assert [r["agent_id"] for r in records] == [2, 5, 9]
    assert order == [2, 2, 2, 5, 5, 5, 9, 9, 9]


def test_interval_and_switch():
    backend = ScriptedBackend([(r".", INSIGHTS)])
    assert [engine(backend, interval_years=2).due(y) for y in (1, 2, 3, 4)] == [
        False, True, False, True]
    off = ReflectionEngine.from_dir(PROMPTS, backend, ReflectionConfig(enabled=False), seed=1)
    assert not off.due(1)


def test_parse_insights_repairs():
    insights, repairs, error = parse_insights(
        '```json\n{"insights": ["a", "b", "c", "d",]}\n```', 3, 100)
    assert error is None and insights == ["a", "b", "c"]
    assert repairs == ["removed a markdown code fence", "removed trailing comma(s)",
                       "kept the first 3 of 4 insights"]
    insights, repairs, _ = parse_insights('{"insights": ["' + "x" * 50 + '"]}', 3, 20)
    assert insights == ["x" * 50] and "only 1 of 3 insights given" in repairs  # one sentence
    two = "First whole lesson. Second lesson that does not fit."
    insights, repairs, _ = parse_insights(json.dumps({"insights": [two]}), 1, 25)
    assert insights == ["First whole lesson."]
    assert repairs == ["insight 1: kept the first 1 whole sentence(s) of 2"]
    assert parse_insights('{"insights": []}', 3, 10)[2] == "the 'insights' list holds no text"
    assert parse_insights('{"lessons": ["a"]}', 3, 10)[2].startswith("the reply has no list")


def test_with_the_real_memory_engine_through_the_broker(tmp_path):
    """Broker.end_year -> reflection -> insights, recalled in a later decision.

    The insights go into a HumanCentricMemoryEngine (importance 10 times the flood memory's 1.0) and
    are retrieved in a later year's decision prompt.
    """
    from broker_helpers import FIRST, make_broker, make_situation, reply

    from governed_broker.memory import HumanCentricMemoryEngine
    from governed_broker.seeding import child_rng

    mem = HumanCentricMemoryEngine(rng=child_rng(1, "agent", 7, "memory"), agent_id=7)
    mem.add("A flood destroyed my kitchen and I lost $40,000.", 2)
    mem.add("I decided to buy flood insurance.", 2, kind="decision")
    household = ReflectionTarget(7, "owner", "high", mem)

    broker, backend = make_broker([(r"end of\s+year 2", INSIGHTS), (FIRST, reply("H", "M",
                                   "buy_insurance"))])
    broker.reflection = engine(backend, tmp_path)
    broker.end_year(2, [household])
    mem.end_year(2)
    insights = mem.insights()
    assert [i.content for i in insights] == INSIGHTS["insights"]
    assert all(i.importance == 10 and i.year == 2 for i in insights)
    retrieved = tuple(mem.retrieve(5))
    (d,) = broker.decide([make_situation(year=5, memories=retrieved)])
    prompt = backend.calls[-1].messages[1]["content"]
    assert "- A lesson you drew in year 2: I live where floods reach my home." in prompt
    assert set(d.audit["memory_ids"]) >= {i.id for i in insights}
    broker.close()
    assert read_jsonl(tmp_path / "reflections.jsonl")[0]["status"] == "ok"
