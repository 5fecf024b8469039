"""Semantic memory (seed 000): a small knowledge graph of flood-adaptation concepts.

Concepts and typed relations come from ``configs/knowledge/flood_concepts.yaml``; each
household gets its own copy, to which consolidation adds facts learned from experience (e.g.
``home experienced river_flood`` in year 3). A copy shares the graph it was made from until it
first changes (copy on write): most households learn little, and a private graph per household
costs tens of kilobytes. ``version`` counts changes, so readers can cache what they derive.
Queries: related concepts by relation and depth, shortest connecting path, and property
inheritance along ``is_a`` edges.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import networkx as nx

from governed_broker.config.base import ConfigError, excerpt
from governed_broker.config.yamlsafe import read_yaml

RELATIONS: tuple[str, ...] = (
    "is_a", "part_of", "used_for", "requires", "reduces", "increases", "causes", "pays_for",
    "provided_by", "similar_to", "opposite_of", "experienced",
)

DEFAULT_CONCEPTS = Path(__file__).resolve().parents[2] / "configs" / "knowledge" / \
    "flood_concepts.yaml"


def _key(name: str) -> str:
    return str(name).strip().lower().replace(" ", "_").replace("-", "_")


class SemanticMemory:
    """Concepts (nodes with type, description, properties) and typed relations (edges)."""

    def __init__(self) -> None:
        self.graph: nx.MultiDiGraph = nx.MultiDiGraph()
        self._shared = False  # the graph is another memory's too: copy before changing it
        self.version = 0  # changes made to the graph (with its identity, a cache key)
        self._learned_since: list[list[Any]] = []  # facts learned since ``changes()``

    def _writable(self) -> nx.MultiDiGraph:
        if self._shared:
            self.graph, self._shared = self.graph.copy(), False
        self.version += 1
        return self.graph

    # ----------------------------------------------------------------------------- loading
    @classmethod
    def from_yaml(cls, path: str | Path = DEFAULT_CONCEPTS) -> SemanticMemory:
        """Load concepts and relations; problems raise ``ConfigError`` naming the entry.

        A file is parsed once per version (its path, size and modification time; a run builds
        a world memory per validity vignette, each of which loads it): every call returns an
        independent copy of the parsed graph (copy on write).
        """
        path = Path(path)
        try:
            stat = path.resolve().stat()
        except OSError:
            return cls._parse(path)  # raises the ConfigError that says what is missing
        return _parsed(path.resolve(), stat.st_mtime_ns, stat.st_size).copy()

    @classmethod
    def _parse(cls, path: Path) -> SemanticMemory:
        data = read_yaml(path, "knowledge graph (memory.concepts_file)")
        if not isinstance(data, dict) or set(data) - {"concepts", "relations"}:
            raise ConfigError(f"{path}: expected a mapping with keys 'concepts' and 'relations'")
        mem = cls()
        for name, spec in (data.get("concepts") or {}).items():
            spec = spec or {}
            if not isinstance(spec, dict) or set(spec) - {"type", "description", "properties"}:
                raise ConfigError(
                    f"{path}: concepts.{name}: expected keys type, description, properties")
            mem.add_concept(name, spec.get("type", "concept"), spec.get("description", ""),
                            spec.get("properties") or {})
        for i, rel in enumerate(data.get("relations") or []):
            if not (isinstance(rel, list) and len(rel) == 3):
                raise ConfigError(f"{path}: relations[{i}]: expected [source, relation, target],"
                                  f" got {excerpt(rel)}")
            src, kind, dst = rel
            for end in (src, dst):
                if _key(end) not in mem.graph:
                    raise ConfigError(f"{path}: relations[{i}]: unknown concept {excerpt(end)}")
            if kind not in RELATIONS:
                raise ConfigError(f"{path}: relations[{i}]: unknown relation {excerpt(kind)}; "
                                  f"allowed: {RELATIONS}")
            mem.add_relation(src, kind, dst)
        return mem

    def copy(self) -> SemanticMemory:
        """An independent copy (one per household)."""
        other = SemanticMemory()
        other.graph, other.version = self.graph, self.version
        other._shared = self._shared = True
        return other

    # ----------------------------------------------------------------------------- writing
    def add_concept(self, name: str, type_: str = "concept", description: str = "",
                    properties: Mapping[str, Any] | None = None) -> str:
        """Add or update a concept; returns its key (lower case, underscores)."""
        key = _key(name)
        self._writable().add_node(key, type=str(type_), description=str(description),
                                  properties=dict(properties or {}))
        return key

    def add_relation(self, source: str, relation: str, target: str, **attrs: Any) -> bool:
        """Add a typed edge (both concepts must exist); True when the graph changed."""
        if relation not in RELATIONS:
            raise ValueError(f"unknown relation {relation!r}; allowed: {RELATIONS}")
        s, t = _key(source), _key(target)
        for end in (s, t):
            if end not in self.graph:
                raise KeyError(f"unknown concept {end!r}")
        existing = self.graph.get_edge_data(s, t, key=relation)
        if existing is None:
            self._writable().add_edge(s, t, key=relation, relation=relation, **attrs)
        elif "learned_year" in attrs and "learned_year" not in existing:
            # a known relation confirmed by experience (in this memory's own graph)
            self._writable().get_edge_data(s, t, key=relation).update(attrs)
        else:
            return False
        return True

    def add_fact(self, source: str, relation: str, target: str, *, year: float | None = None,
                 evidence: str = "") -> None:
        """Add a fact learned from experience; unknown concepts are created (type learned)."""
        for end in (source, target):
            if _key(end) not in self.graph:
                self.add_concept(end, "learned")
        if self.add_relation(source, relation, target, learned_year=year, evidence=evidence):
            self._learned_since.append([source, relation, target, year, evidence])

    # ----------------------------------------------------------------------------- queries
    def concept(self, name: str) -> dict[str, Any] | None:
        """Attributes of a concept (case-insensitive), or None."""
        key = _key(name)
        return dict(self.graph.nodes[key], id=key) if key in self.graph else None

    def related(self, name: str, relation: str | None = None, depth: int = 1) -> list[str]:
        """Concepts reachable along outgoing edges (of one relation type) within ``depth`` steps.

        Breadth-first, nearest first (alphabetical within a step).
        """
        start = _key(name)
        if start not in self.graph:
            return []
        seen, frontier, out = {start}, [start], []
        for _ in range(int(depth)):
            nxt = []
            for node in frontier:
                for _, tgt, data in sorted(self.graph.out_edges(node, data=True),
                                           key=lambda e: e[1]):
                    if (relation is None or data["relation"] == relation) and tgt not in seen:
                        seen.add(tgt)
                        nxt.append(tgt)
            out.extend(sorted(nxt))
            frontier = nxt
        return out

    def shortest_path(self, a: str, b: str) -> list[str] | None:
        """Shortest chain of concepts connecting ``a`` and ``b`` (edges in either direction).

        Or None when unconnected or unknown.
        """
        a, b = _key(a), _key(b)
        if a not in self.graph or b not in self.graph:
            return None
        try:
            return nx.shortest_path(self.graph.to_undirected(as_view=True), a, b)
        except nx.NetworkXNoPath:
            return None

    def ancestors(self, name: str) -> list[str]:
        """All ``is_a`` ancestors, nearest first."""
        return self.related(name, "is_a", depth=len(self.graph))

    def infer_properties(self, name: str) -> dict[str, Any]:
        """Own properties plus those inherited along ``is_a`` (nearer ancestors win)."""
        node = self.concept(name)
        if node is None:
            return {}
        props = dict(node["properties"])
        for anc in self.ancestors(name):
            for k, v in self.graph.nodes[anc]["properties"].items():
                props.setdefault(k, v)
        return props

    def facts(self, name: str | None = None) -> list[str]:
        """Relations as plain sentences (``flood insurance pays for flood damage``).

        Of one concept (as source or target) or all, sorted.
        """
        key = None if name is None else _key(name)
        out = []
        for s, t, d in self.graph.edges(data=True):
            if key is None or key in (s, t):
                out.append(self._sentence(s, d["relation"], t, d.get("learned_year")))
        return sorted(out)

    def learned_facts(self) -> list[dict[str, Any]]:
        """Facts added by consolidation, in year order."""
        rows = [{"source": s, "relation": d["relation"], "target": t,
                 "year": d.get("learned_year"), "evidence": d.get("evidence", "")}
                for s, t, d in self.graph.edges(data=True) if "learned_year" in d]
        return sorted(rows, key=lambda r: (r["year"] is None, r["year"] or 0, r["source"]))

    @staticmethod
    def _sentence(s: str, rel: str, t: str, year: float | None) -> str:
        text = f"{s.replace('_', ' ')} {rel.replace('_', ' ')} {t.replace('_', ' ')}"
        return text if year is None else f"{text} (learned in year {year:g})"

    # ----------------------------------------------------------------------------- state
    def learned_state(self) -> list[dict[str, Any]]:
        """JSON-serialisable learned facts (the base graph is reloaded from YAML)."""
        return self.learned_facts()

    def restore_learned(self, facts: Iterable[Mapping[str, Any]]) -> None:
        """Re-add learned facts from ``learned_state``."""
        for f in facts:
            self.add_fact(f["source"], f["relation"], f["target"], year=f.get("year"),
                          evidence=f.get("evidence", ""))
        self._learned_since = []

    def changes(self) -> list[list[Any]] | None:
        """Facts learned since the last call, in the order learned.

        As ``[source, relation, target, year, evidence]`` (None: none); for checkpoint logs,
        replayed by ``apply_changes``.
        """
        if not self._learned_since:
            return None
        out, self._learned_since = self._learned_since, []
        return out

    def apply_changes(self, changes: list[list[Any]]) -> None:
        """Replay one ``changes()`` (the facts are learned again, in the same order)."""
        for source, relation, target, year, evidence in changes:
            self.add_fact(source, relation, target, year=year, evidence=evidence)
        self._learned_since = []


@functools.lru_cache(maxsize=8)
def _parsed(path: Path, mtime_ns: int, size: int) -> SemanticMemory:
    """The parsed concepts file of this version.

    ``SemanticMemory.from_yaml``; never handed out itself, only copies.
    """
    return SemanticMemory._parse(path)
