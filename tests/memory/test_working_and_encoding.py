"""WorkingMemory (seed 001) and keyword encoding (docs/memory.md)."""

from __future__ import annotations

import threading

import pytest

from governed_broker.memory import MemoryItem, WorkingMemory
from governed_broker.memory.encoding import CategoryTable


def item(i: int, imp: float, year: float = 1.0) -> MemoryItem:
    return MemoryItem(id=f"m{i}", agent_id="a", year=year, content=f"c{i}", emotion="routine",
                      source="general", importance=imp)


def test_capacity_evicts_least_important_then_oldest():
    wm = WorkingMemory(capacity=3, ttl_years=1)
    a, b, c = item(0, 0.5, 1.0), item(1, 0.2, 1.5), item(2, 0.2, 1.2)
    for it in (a, b, c):
        assert wm.add(it) == []
    assert wm.add(item(3, 0.9)) == [c]  # 0.2 twice: the older (year 1.2) goes
    # full again: the newcomer is the least important, so it is the one evicted
    assert [m.id for m in wm.add(item(4, 0.1))] == ["m4"]
    assert [m.id for m in wm.items()] == ["m0", "m1", "m3"]


def test_ttl_in_years():
    wm = WorkingMemory(capacity=5, ttl_years=1.0)
    wm.add(item(0, 0.5, year=1.0))
    wm.add(item(1, 0.5, year=1.6))
    assert wm.expire(1.99) == []
    assert [m.id for m in wm.expire(2.0)] == ["m0"]
    assert [m.id for m in wm.items()] == ["m1"]
    assert [m.id for m in wm.high_importance(0.5)] == ["m1"]
    assert [m.id for m in wm.drain()] == ["m1"] and len(wm) == 0


def test_bad_arguments():
    with pytest.raises(ValueError):
        WorkingMemory(capacity=0)
    with pytest.raises(ValueError):
        WorkingMemory(ttl_years=0)


def test_thread_safe_capacity():
    wm = WorkingMemory(capacity=7)
    def work(k):
        for i in range(300):
            wm.add(item(k * 1000 + i, (i % 10) / 10))
    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wm) == 7
    assert all(m.importance == pytest.approx(0.9) for m in wm.items())


def test_category_table_word_boundaries_and_highest_weight():
    t = CategoryTable.build({"hi": 1.0, "mid": 0.8, "lo": 0.1},
                            {"hi": ["flood", "water entered"], "mid": ["decision"]}, "lo")
    assert t.classify("FLOOD warning") == "hi"
    assert t.classify("floodplain maps") == "lo"  # no partial-word match
    assert t.classify("a decision after the flood") == "hi"  # highest weight wins
    assert t.classify("the water  entered the kitchen") == "hi"  # phrase, any spacing
    assert t.classify("my decision") == "mid"
    assert t.weight("mid") == 0.8
    with pytest.raises(ValueError, match="unknown category"):
        t.weight("nope")
    with pytest.raises(ValueError):
        CategoryTable.build({"a": 1.0}, {}, "b")


def test_item_fidelity_texts():
    it = MemoryItem(id="m", agent_id="a", year=1, content="My home flooded 1 m deep; damage "
                    "$5,000 and many other details here in this long sentence.", emotion="x",
                    source="y", importance=1.0)
    assert it.text("detailed") == it.content
    assert it.text("summary") == "My home flooded 1 m deep."
    it.metadata["gist"] = "Flooded."
    assert it.text("gist") == "Flooded."
    with pytest.raises(ValueError):
        it.text("vague")
