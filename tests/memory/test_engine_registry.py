"""Memory engines come from a name registry.

A new one is a class plus one ``MEMORY_ENGINES`` entry.

``ToyEngine`` below is such a class (here, in this test file, not derived from the shipped
engines): it keeps every memory and retrieves the newest ``window_size``. Registering it lets a
run use it end to end, checkpoints and resumption included.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from governed_broker.config.base import ConfigError
from governed_broker.config.memory import MEMORY_ENGINES, MemoryConfig, MemoryParams
from governed_broker.memory import HumanCentricMemoryEngine, WindowMemoryEngine
from governed_broker.memory.engine import make_engine, restore_engine
from governed_broker.memory.item import MemoryItem
from governed_broker.memory.protocol import MemoryEngine
from governed_broker.runner import run_experiment
from governed_broker.sim.model import FloodModel

SETTINGS = ["years=4", "population.size=5", "memory.engine=toy"]


class ToyEngine:
    """Remembers everything, retrieves the newest ``window_size`` items (no decay, no draws)."""

    variant = "toy"

    def __init__(self, params: MemoryParams, *, rng: np.random.Generator | None = None,
                 agent_id: str | int = "") -> None:
        self.agent_id = str(agent_id)
        self.window_size = params.window_size
        self.top_k_significant = self.top_k_insights = 0
        self.decay_rate = self.min_score = 0.0
        self._items: list[MemoryItem] = []
        self._new: list[MemoryItem] = []

    def add(self, content: str, year: float, *, kind: str = "event", emotion: str | None = None,
            source: str | None = None, importance: float | None = None,
            metadata: Mapping[str, Any] | None = None) -> MemoryItem:
        item = MemoryItem(id=f"t{len(self._items):06d}", agent_id=self.agent_id,
                          year=float(year), content=content, emotion=emotion or "routine",
                          source=source or "personal", kind=kind, metadata=dict(metadata or {}),
                          importance=1.0 if importance is None else float(importance))
        self._items.append(item)
        self._new.append(item)
        return item

    def add_insight(self, content: str, year: float, *, salience: float = 1.0,
                    sources=()) -> MemoryItem:
        return self.add(content, year, kind="insight")

    def retrieve(self, year: float) -> list[MemoryItem]:
        return self._items[-self.window_size:]

    def score(self, item: MemoryItem, year: float) -> float:
        return item.importance

    def end_year(self, year: float) -> list[MemoryItem]:
        return [m for m in self._items if m.year == year]

    def drain_new(self) -> list[MemoryItem]:
        out, self._new = self._new, []
        return out

    def items(self) -> list[MemoryItem]:
        return list(self._items)

    def working(self) -> list[MemoryItem]:
        return []

    def long_term(self) -> list[MemoryItem]:
        return list(self._items)

    def insights(self) -> list[MemoryItem]:
        return [m for m in self._items if m.kind == "insight"]

    def state(self) -> dict[str, Any]:
        return {"variant": self.variant, "agent_id": self.agent_id,
                "window_size": self.window_size,
                "items": [m.to_dict() for m in self._items],
                "new": [m.id for m in self._new]}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> ToyEngine:
        engine = cls(MemoryParams(window_size=state["window_size"]), agent_id=state["agent_id"])
        engine._items = [MemoryItem.from_dict(d) for d in state["items"]]
        new = set(state["new"])
        engine._new = [m for m in engine._items if m.id in new]
        return engine


@pytest.fixture
def toy(monkeypatch) -> None:
    """``ToyEngine`` registered as ``toy``."""
    monkeypatch.setitem(MEMORY_ENGINES, "toy", f"{__name__}:ToyEngine")


def _outputs(run) -> dict[str, bytes]:
    names = ("agents_yearly.csv", "model_yearly.csv", "memories/1.md")
    return {name: (run / name).read_bytes() for name in names}


def _members(protocol: type) -> set[str]:
    return {n for n in vars(protocol) if not n.startswith("_")} | set(protocol.__annotations__)


@pytest.mark.parametrize("klass", [HumanCentricMemoryEngine, WindowMemoryEngine, ToyEngine])
def test_engines_have_every_protocol_member(klass) -> None:
    engine = klass(MemoryParams(), rng=np.random.default_rng(0), agent_id=1)
    assert {m for m in _members(MemoryEngine) if not hasattr(engine, m)} == set()


class Crash(RuntimeError):
    """Stands for a process dying."""


def test_a_registered_engine_runs_and_resumes_an_experiment(experiments, tmp_path, toy,
                                                            monkeypatch) -> None:
    config = experiments.config(SETTINGS)
    reference = run_experiment(config, tmp_path / "reference", progress=False).out_dir
    markdown = (reference / "memories" / "1.md").read_text()
    assert "Engine: toy;" in markdown and "Year 4" in markdown
    hazard_phase = FloodModel.hazard_phase

    def crashing(model: FloodModel) -> None:
        if model.year == 3:
            raise Crash("year 3")
        hazard_phase(model)

    with monkeypatch.context() as m:
        m.setattr(FloodModel, "hazard_phase", crashing)
        with pytest.raises(Crash):
            run_experiment(config, tmp_path / "run", progress=False)
    resumed = run_experiment(config, tmp_path / "run", progress=False)
    assert resumed.resumed_from_year == 2  # the toy engine came back from the checkpoint
    assert _outputs(resumed.out_dir) == _outputs(reference)


def test_a_registered_engine_is_built_and_restored(toy) -> None:
    engine = make_engine(None, MemoryConfig(engine="toy"), rng=np.random.default_rng(0),
                         agent_id=3)
    assert isinstance(engine, ToyEngine) and engine.agent_id == "3"
    engine.add("My home flooded.", 1)
    again = restore_engine(engine.state())
    assert isinstance(again, ToyEngine) and again.items() == engine.items()


def test_an_unknown_engine_is_a_configuration_error(experiments) -> None:
    with pytest.raises(ConfigError, match="unknown memory engine 'tiny'; registered: "
                                          "humancentric, window"):
        experiments.config(["memory.engine=tiny"])


def test_none_still_means_no_memory(experiments) -> None:
    assert experiments.config(["memory.engine=none"]).memory.engine == "none"


def test_a_broken_registry_entry_says_so(monkeypatch) -> None:
    monkeypatch.setitem(MEMORY_ENGINES, "ghost", "no_such_module:Engine")
    with pytest.raises(ConfigError, match="cannot load its class 'no_such_module:Engine'"):
        make_engine(None, MemoryConfig(engine="ghost"), rng=np.random.default_rng(0),
                    agent_id=1)
