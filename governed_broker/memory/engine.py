"""The human-centric memory engine (docs/memory.md, seed 003) and its window-only ablation variant.

Encoding: ``importance = W_emotion * W_source`` from keyword categories (or explicit).
Retrieval score: ``S(m, t) = importance * exp(-decay_rate * (1 - 0.5 * W_emotion) * (t - year))``.
Working memory holds the current year's items (at most ``window_size``); ``end_year``
consolidates them into long-term memory (salient items always, others with probability
``consolidation_prob * importance / consolidation_threshold`` drawn from the agent's seeded
generator). Insights go straight to long-term memory with their own retrieval slots.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from governed_broker.config.base import ConfigError
from governed_broker.config.memory import MEMORY_ENGINES, NO_MEMORY, MemoryConfig, MemoryParams
from governed_broker.config.registry import load_registered
from governed_broker.config.yamlsafe import read_yaml
from governed_broker.memory.encoding import CategoryTable
from governed_broker.memory.item import MEMORY_KINDS, MemoryItem, fidelity_for_age
from governed_broker.memory.protocol import MemoryEngine
from governed_broker.memory.working import WorkingMemory


def _weights(cats: Mapping[str, Any]) -> dict[str, float]:
    return {k: v.weight for k, v in cats.items()}


def _keywords(cats: Mapping[str, Any]) -> dict[str, list[str]]:
    return {k: list(v.keywords) for k, v in cats.items()}


class HumanCentricMemoryEngine:
    """One agent's memory: working memory, long-term memory, insights (docs/memory.md).

    Args:
        params: The ``memory:`` section (``config.memory.MemoryParams``, after
            ``memory.overrides``; default: docs/memory.md's values). Its emotion and source
            categories share one keyword table, so their names must differ.
        rng: The agent's seeded ``numpy.random.Generator`` (needed by consolidation).
        agent_id: Owner id written into every item.

    Raises:
        ValueError: A category name is both an emotion and a source.
    """

    variant = "humancentric"

    def __init__(self, params: MemoryParams | None = None, *,
                 rng: np.random.Generator | None = None, agent_id: str | int = "") -> None:
        self.memory_params = params = params if params is not None else MemoryParams()
        self.window_size = params.window_size
        self.top_k_significant = params.top_k_significant
        self.top_k_insights = params.top_k_insights
        self.decay_rate = params.decay_rate
        self.consolidation_threshold = params.consolidation_threshold
        self.consolidation_prob = params.consolidation_prob
        self.min_score = params.min_score
        self.insight_importance = params.insight_importance
        self.importance_boost = params.importance_boost
        self.fidelity_detailed_years = params.fidelity_detailed_years
        self.fidelity_summary_years = params.fidelity_summary_years
        self.agent_id = str(agent_id)
        self.rng = rng
        emotions, sources = params.emotion_categories, params.source_categories
        clash = sorted(set(emotions) & set(sources))
        if clash:
            raise ValueError(f"category names used for both emotion and source: {clash}")
        self._emotion = CategoryTable.build(_weights(emotions), _keywords(emotions),
                                            params.default_emotion)
        self._source = CategoryTable.build(_weights(sources), _keywords(sources),
                                           params.default_source)
        self._working = WorkingMemory(self.window_size, ttl_years=1.0)
        self._long: list[MemoryItem] = []
        self._new: list[MemoryItem] = []
        self._next_id = 0
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._reset_tracking()

    def _reset_tracking(self) -> None:
        """Start tracking changes afresh (``changes``) from the engine as it is now."""
        self._mark = len(self._long)  # long-term items up to here were reported
        self._touched: set[int] = set()  # reported long-term items changed since
        self._dirty = False
        # Long-term items whose fidelity may still change (None: not known, the next refresh
        # visits all). An item found "gist" at a refresh stays gist as it ages
        # (fidelity_for_age is monotone in age) until it is retrieved again.
        self._fresh: list[int] | None = None
        self._refreshed_year: float | None = None

    # ----------------------------------------------------------------------------- building
    @classmethod
    def from_config(
        cls,
        params: MemoryParams | Mapping[str, Any] | str | Path | None = None,
        *,
        overrides: Mapping[str, float | int] | None = None,
        rng: np.random.Generator | None = None,
        agent_id: str | int = "",
    ) -> HumanCentricMemoryEngine:
        """Build from the ``memory:`` section of ``agent_types.yaml`` (+ experiment overrides).

        Args:
            params: A ``MemoryParams``, the raw mapping of the section, or the path of an
                ``agent_types.yaml`` whose ``memory:`` section is read (None: defaults).
            overrides: ``MemoryConfig.overrides`` of the experiment.
            rng: The agent's seeded generator.
            agent_id: Owner id.
        """
        if isinstance(params, str | Path):
            params = _memory_section(Path(params))
        if params is None:
            params = MemoryParams()
        elif not isinstance(params, MemoryParams):
            params = MemoryParams.model_validate(dict(params))
        if overrides:
            params = params.with_overrides(overrides)
        return cls(params, rng=rng, agent_id=agent_id)

    # ----------------------------------------------------------------------------- encoding
    def classify(self, content: str) -> tuple[str, str]:
        """Emotion and source categories inferred from the text's keywords."""
        return self._emotion.classify(content), self._source.classify(content)

    def add(
        self,
        content: str,
        year: float,
        *,
        kind: str = "event",
        emotion: str | None = None,
        source: str | None = None,
        importance: float | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> MemoryItem:
        """Encode a memory into working memory and return it.

        Categories not given are inferred from keywords; ``importance`` (if given) overrides
        ``W_emotion * W_source``. ``kind="insight"`` is routed to ``add_insight`` semantics.
        """
        if kind not in MEMORY_KINDS:
            raise ValueError(f"unknown memory kind {kind!r}; allowed: {MEMORY_KINDS}")
        if kind == "insight":
            return self.add_insight(content, year, importance=importance, metadata=metadata)
        emotion = emotion or self._emotion.classify(content)
        source = source or self._source.classify(content)
        w_e, w_s = self._emotion.weight(emotion), self._source.weight(source)
        imp = w_e * w_s if importance is None else float(importance)
        if not (math.isfinite(imp) and imp >= 0):
            raise ValueError(f"importance must be a finite number >= 0, got {importance}")
        item = self._make(content, year, kind, emotion, source, imp, w_e, metadata)
        self._working.add(item)
        return item

    def add_insight(
        self,
        content: str,
        year: float,
        *,
        importance: float | None = None,
        salience: float = 1.0,
        sources: Sequence[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> MemoryItem:
        """Store a reflection insight directly in long-term memory.

        Decaying with ``W_emotion = importance_boost``; it never takes a working slot.

        Its importance is ``importance`` if given, else ``insight_importance * salience``:
        a lesson drawn from a flood (salience 1) keeps the full weight, one from a quiet year
        (routine memories, 0.1) a tenth of it. ``sources`` (memory ids) go into its metadata.
        """
        item = self._insight(content, year, importance, salience, sources, metadata)
        self._append_long([item])
        return item

    def _insight(self, content: str, year: float, importance: float | None, salience: float,
                 sources: Sequence[str], metadata: Mapping[str, Any] | None) -> MemoryItem:
        if not (math.isfinite(salience) and salience >= 0):
            raise ValueError(f"salience must be a finite number >= 0, got {salience}")
        imp = self.insight_importance * salience if importance is None else float(importance)
        source = self._source.classify(content)
        meta = {**(metadata or {}), "sources": list(sources), "salience": float(salience)}
        return self._make(content, year, "insight", "insight", source, imp,
                          self.importance_boost, meta)

    def _append_long(self, items: list[MemoryItem]) -> None:
        """Append to long-term memory, extending the cached score arrays (no rebuild)."""
        if self._fresh is not None:
            self._fresh.extend(range(len(self._long), len(self._long) + len(items)))
        self._long.extend(items)
        if self._arrays is None or not items:
            return
        imp, yr, lam, ins = self._arrays
        self._arrays = (
            np.concatenate([imp, [m.importance for m in items]]),
            np.concatenate([yr, [m.year for m in items]]),
            np.concatenate([lam, [self.decay_of(m) for m in items]]),
            np.concatenate([ins, [m.kind == "insight" for m in items]]),
        )

    def _make(self, content, year, kind, emotion, source, imp, w_e, metadata) -> MemoryItem:
        if not isinstance(content, str) or not content.strip():
            raise ValueError("memory content must be a non-empty string")
        item = MemoryItem(
            id=f"m{self._next_id:06d}", agent_id=self.agent_id, year=float(year),
            content=content, emotion=emotion, source=source, importance=imp, kind=kind,
            metadata=dict(metadata or {}), w_emotion=float(w_e),
        )
        self._next_id += 1
        self._new.append(item)
        self._dirty = True
        return item

    # ----------------------------------------------------------------------------- scoring
    def decay_of(self, item: MemoryItem) -> float:
        """``lambda' = decay_rate * (1 - 0.5 * W_emotion)`` of an item (per year)."""
        return self.decay_rate * (1.0 - 0.5 * item.w_emotion)

    def score(self, item: MemoryItem, year: float) -> float:
        """``S(m, t) = importance * exp(-lambda' * (t - year_m))`` (seed 003, exactly)."""
        return item.importance * math.exp(-self.decay_of(item) * (year - item.year))

    def _long_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if self._arrays is None:
            items = self._long
            imp = np.fromiter((m.importance for m in items), float, len(items))
            yr = np.fromiter((m.year for m in items), float, len(items))
            lam = self.decay_rate * (
                1.0 - 0.5 * np.fromiter((m.w_emotion for m in items), float, len(items)))
            ins = np.fromiter((m.kind == "insight" for m in items), bool, len(items))
            self._arrays = (imp, yr, lam, ins)
        return self._arrays

    def long_term_scores(self, year: float) -> np.ndarray:
        """Scores of all long-term items at ``year``.

        Vectorised; same order as ``long_term()``.
        """
        imp, yr, lam, _ = self._long_arrays()
        return imp * np.exp(-lam * (year - yr))

    # ----------------------------------------------------------------------------- retrieval
    def retrieve(self, year: float) -> list[MemoryItem]:
        """Memories for a decision in ``year``.

        Returns the working items (by score, highest first), then the ``top_k_significant``
        long-term non-insight items, then the ``top_k_insights`` insights, each group by score
        (ties: older first), ignoring long-term items scoring below ``min_score``. Retrieved
        items get ``access_count += 1``, ``last_access_year = year`` and their fidelity set
        from their age since formation or last retrieval, whichever is later.
        """
        working = sorted(self._working.items(), key=lambda m: -self.score(m, year))
        top = self._top_long(year)
        self._touched.update(top)
        if self._fresh is not None:
            self._fresh.extend(top)  # their age restarts from this retrieval
        self._dirty = True
        chosen = working + [self._long[i] for i in top]
        for item in chosen:
            ref = item.year if item.last_access_year is None else max(
                item.year, item.last_access_year)
            item.fidelity = fidelity_for_age(
                year - ref, self.fidelity_detailed_years, self.fidelity_summary_years)
            item.access_count += 1
            item.last_access_year = float(year)
        return chosen

    def _top_long(self, year: float) -> list[int]:
        """Indices (into long-term memory) of the long-term items ``retrieve`` returns."""
        if not self._long:
            return []
        scores = self.long_term_scores(year)
        _, yr, _, ins = self._long_arrays()
        ok = scores >= self.min_score
        out: list[int] = []
        for mask, k in ((ok & ~ins, self.top_k_significant), (ok & ins, self.top_k_insights)):
            idx = np.flatnonzero(mask)
            if k == 0 or idx.size == 0:
                continue
            if idx.size > k:
                part = np.argpartition(-scores[idx], k - 1)[:k]
                idx = idx[part]
            order = np.lexsort((yr[idx], -scores[idx]))
            out.extend(idx[order].tolist())
        return out

    # ----------------------------------------------------------------------------- year end
    def end_year(self, year: float) -> list[MemoryItem]:
        """Consolidate working memory into long-term memory; return the items kept.

        Items with ``importance >= consolidation_threshold`` are always kept; the others with
        probability ``consolidation_prob * importance / consolidation_threshold`` (one uniform
        draw per such item, in insertion order, from the agent's generator); the rest are
        forgotten. Long-term fidelity levels are then updated to their age at ``year``.
        """
        self._dirty = True
        kept: list[MemoryItem] = []
        for item in self._working.drain():
            if item.importance >= self.consolidation_threshold:
                kept.append(item)
                continue
            p = self.consolidation_prob * item.importance / self.consolidation_threshold
            if self._require_rng().random() < p:
                kept.append(item)
        self._append_long(kept)
        self._refresh_fidelity(year)
        return kept

    def _require_rng(self) -> np.random.Generator:
        if self.rng is None:
            raise ValueError(
                "this memory engine has no random generator: pass rng="
                "governed_broker.seeding.child_rng(seed, 'agent', agent_id, 'memory')")
        return self.rng

    def _refresh_fidelity(self, year: float) -> None:
        """Set every long-term item's fidelity to its age at ``year``.

        Only items that may not be "gist" yet are visited: the others were gist at an earlier
        refresh, have not been retrieved since, and only grow older (the first refresh after
        a restore, and one at an earlier year than the last, visit everything).
        """
        if self._fresh is None or (self._refreshed_year is not None
                                   and year < self._refreshed_year):
            self._fresh = list(range(len(self._long)))
        self._refreshed_year = float(year)
        detailed, summary, long = self.fidelity_detailed_years, self.fidelity_summary_years, \
            self._long
        fresh = []
        for i in sorted(set(self._fresh)):
            item = long[i]
            ref = item.year if item.last_access_year is None else max(
                item.year, item.last_access_year)
            level = fidelity_for_age(year - ref, detailed, summary)
            if level != item.fidelity:
                item.fidelity = level
                self._touched.add(i)
            if level != "gist":
                fresh.append(i)
        self._fresh = fresh

    # ----------------------------------------------------------------------------- accessors
    def items(self) -> list[MemoryItem]:
        """Working then long-term items."""
        return self._working.items() + list(self._long)

    def long_term(self) -> list[MemoryItem]:
        """Long-term items (events and insights) in the order they were consolidated."""
        return list(self._long)

    def working(self) -> list[MemoryItem]:
        """Working items of the current year."""
        return self._working.items()

    def insights(self) -> list[MemoryItem]:
        """Long-term insights."""
        return [m for m in self._long if m.kind == "insight"]

    def drain_new(self) -> list[MemoryItem]:
        """Items created since the last call (also those since evicted or forgotten).

        For the authoritative episodic store.
        """
        out, self._new = self._new, []
        self._dirty = self._dirty or bool(out)
        return out

    # ----------------------------------------------------------------------------- state
    def state(self) -> dict[str, Any]:
        """The whole engine as a JSON-serialisable dict (checkpoints; no pickle)."""
        return {
            "variant": self.variant,
            "params": self.memory_params.model_dump(mode="json"),
            "agent_id": self.agent_id,
            "next_id": self._next_id,
            "working": [m.to_dict() for m in self._working.items()],
            "long_term": [m.to_dict() for m in self._long],
            "new": [m.to_dict() for m in self._new],
            "rng": None if self.rng is None else self.rng.bit_generator.state,
        }

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> HumanCentricMemoryEngine:
        """Rebuild an engine (of the recorded variant) from ``state()``."""
        variant = state.get("variant", "humancentric")
        klass = {"humancentric": HumanCentricMemoryEngine, "window": WindowMemoryEngine}.get(
            variant)
        if klass is None:
            raise ValueError(f"unknown memory engine variant {variant!r} in state")
        rng = None
        if state.get("rng") is not None:
            rng = np.random.Generator(np.random.PCG64())
            rng.bit_generator.state = state["rng"]
        params, agent_id = _params_of(state)
        engine = klass(params, rng=rng, agent_id=agent_id)
        engine._next_id = int(state["next_id"])
        engine._working.extend(MemoryItem.from_dict(d) for d in state["working"])
        engine._long = [MemoryItem.from_dict(d) for d in state["long_term"]]
        by_id = {m.id: m for m in engine.items()}
        engine._new = [by_id.get(d["id"]) or MemoryItem.from_dict(d) for d in state["new"]]
        engine._reset_tracking()
        return engine

    # ----------------------------------------------------------------------------- changes
    def changes(self) -> dict[str, Any] | None:
        """What changed since the last call (or since the engine was built or restored).

        As a JSON-serialisable dict; None when nothing did.

        Checkpoints append it to their memory log: it holds the long-term items added, the
        fields that change after an item is formed (``access_count``, ``last_access_year``,
        ``fidelity``) of earlier items that changed, the working items, the items not yet
        drained, the next id and the generator state. Its size follows what happened since
        the last call, not the engine's history. ``apply_changes`` replays it.
        """
        if not self._dirty:
            return None
        long, mark = self._long, self._mark
        out = {
            "next_id": self._next_id,
            "rng": None if self.rng is None else self.rng.bit_generator.state,
            "working": [m.to_row() for m in self._working.items()],
            "long": [m.to_row() for m in long[mark:]],
            "touched": [[i, long[i].access_count, long[i].last_access_year, long[i].fidelity]
                        for i in sorted(self._touched) if i < mark],
            "new": [m.to_row() for m in self._new],
        }
        self._mark, self._touched, self._dirty = len(long), set(), False
        return out

    def apply_changes(self, changes: Mapping[str, Any]) -> None:
        """Replay one ``changes()`` on an engine in the state it had when they were taken."""
        self._next_id = int(changes["next_id"])
        if changes["rng"] is not None:
            if self.rng is None:
                self.rng = np.random.Generator(np.random.PCG64())
            self.rng.bit_generator.state = changes["rng"]
        long = self._long
        for i, access_count, last_access_year, fidelity in changes["touched"]:
            item = long[i]
            item.access_count, item.last_access_year, item.fidelity = \
                access_count, last_access_year, fidelity
        self._append_long([MemoryItem.from_row(r) for r in changes["long"]])
        self._working.clear()
        self._working.extend(MemoryItem.from_row(r) for r in changes["working"])
        self._new = []
        if changes["new"]:
            by_id = {m.id: m for m in self.items()}
            self._new = [by_id.get(r[0]) or MemoryItem.from_row(r) for r in changes["new"]]
        self._reset_tracking()


class WindowMemoryEngine(HumanCentricMemoryEngine):
    """Ablation baseline (group A): only the current year's working items, no long-term.

    Encoding and working memory are those of the human-centric engine; ``end_year`` forgets
    everything, insights live in working memory until the year ends, and ``retrieve`` returns
    the working items only.
    """

    variant = "window"

    def add_insight(self, content, year, *, importance=None, salience=1.0, sources=(),
                    metadata=None) -> MemoryItem:
        """Insights take a working slot and are forgotten at year end."""
        item = self._insight(content, year, importance, salience, sources, metadata)
        self._working.add(item)
        return item

    def end_year(self, year: float) -> list[MemoryItem]:
        """Forget the year's working items; nothing reaches long-term memory."""
        self._working.drain()
        return []

    def retrieve(self, year: float) -> list[MemoryItem]:
        """The working items only (by score)."""
        working = sorted(self._working.items(), key=lambda m: -self.score(m, year))
        self._dirty = True
        for item in working:
            item.access_count += 1
            item.last_access_year = float(year)
        return working


def _memory_section(path: Path) -> MemoryParams:
    """The validated ``memory:`` section of an agent-types YAML file."""
    data = read_yaml(path, "agent types file")
    if not isinstance(data, dict) or not isinstance(data.get("memory"), dict):
        raise ConfigError(f"{path}: no 'memory:' section")
    try:
        return MemoryParams.model_validate(data["memory"])
    except ValidationError as exc:
        raise ConfigError(f"{path}: memory: {exc}") from exc


def _params_of(state: Mapping[str, Any]) -> tuple[MemoryParams, str]:
    """The parameters and owner of an engine's ``state()``.

    A state written before the parameters were kept whole (constructor keywords: weights and
    keywords apart) is read too.
    """
    params = dict(state["params"])
    if "emotion_weights" not in params:
        return MemoryParams.model_validate(params), str(state.get("agent_id", ""))
    keywords = params.pop("keywords")
    for kind in ("emotion", "source"):
        weights = params.pop(f"{kind}_weights")
        params[f"{kind}_categories"] = {name: {"weight": w, "keywords": keywords.get(name, [])}
                                       for name, w in weights.items()}
    agent_id = str(params.pop("agent_id", ""))
    return MemoryParams.model_validate(params), agent_id


def engine_class(name: str) -> type[MemoryEngine]:
    """The engine class registered as ``name`` in ``MEMORY_ENGINES``, imported now.

    Raises:
        ValueError: ``name`` is not registered.
        ConfigError: its entry cannot be imported (no such module or attribute).
    """
    return load_registered(MEMORY_ENGINES, name, kind="memory engine",
                           setting="memory.engine", registry_name="MEMORY_ENGINES")


def make_engine(
    params: MemoryParams | None,
    config: MemoryConfig,
    *,
    rng: np.random.Generator,
    agent_id: str | int,
) -> MemoryEngine | None:
    """The engine an experiment asks for (a ``MEMORY_ENGINES`` class), or None (``none``).

    The class is built as ``klass(params, rng=rng, agent_id=agent_id)`` with ``params``
    (default: ``MemoryParams()``) after ``config.overrides``.
    """
    if config.engine == NO_MEMORY:
        return None
    params = (params or MemoryParams()).with_overrides(config.overrides)
    klass = engine_class(config.engine)
    return klass(params, rng=rng, agent_id=agent_id)


def restore_engine(state: Mapping[str, Any]) -> MemoryEngine:
    """Rebuild an engine from its ``state()``.

    ``from_state`` of the class registered under the recorded ``variant`` (default ``humancentric``,
    states from before variants).
    """
    variant = state.get("variant", "humancentric")
    if variant not in MEMORY_ENGINES:
        raise ValueError(f"unknown memory engine variant {variant!r} in state")
    return engine_class(variant).from_state(state)
