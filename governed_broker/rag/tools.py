"""The seed-001 "everything is a tool" view of memory and the knowledge base.

A tool has a ``name``, a ``description`` and ``run(params) -> dict``: ``params["action"]`` picks
the operation, the other keys are its arguments, and the reply is a JSON-serialisable dict with
``status`` ``"ok"`` or ``"error"`` (with a ``message`` naming the bad action or parameter). An
agent loop, a notebook or a debugging session can drive memory and retrieval through this one
uniform interface; the simulation itself calls the engines directly.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections import Counter
from collections.abc import Mapping
from typing import Any, Protocol

from governed_broker.rag.knowledge_base import KnowledgeBase


class MemoryEngineLike(Protocol):
    """What ``MemoryTool`` needs of a memory engine (e.g. ``HumanCentricMemoryEngine``)."""

    def add(self, *args: Any, **kwargs: Any) -> Any:
        """Store a memory."""
        ...

    def retrieve(self, *args: Any, **kwargs: Any) -> Any:
        """Retrieve memories."""
        ...

    def items(self, *args: Any, **kwargs: Any) -> Any:
        """Every memory held."""
        ...


def json_safe(value: Any) -> Any:
    """Convert a value to plain JSON types (dataclasses, enums, numpy scalars, tuples, sets)."""
    if hasattr(value, "to_dict") and callable(value.to_dict):
        value = value.to_dict()
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=repr) if isinstance(value, set | frozenset) else value
        return [json_safe(v) for v in items]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        value = value.item()
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _error(action: Any, message: str) -> dict[str, Any]:
    return {"status": "error", "action": action, "message": message}


class _Tool:
    name = "tool"
    description = ""
    #: action -> (required params, optional params)
    actions: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}

    def _check(self, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | dict[str, Any]:
        if not isinstance(params, Mapping):
            return _error(
                None, f"{self.name}: params must be a mapping, got {type(params).__name__}"
            )
        action = params.get("action")
        if action not in self.actions:
            return _error(
                action,
                f"{self.name}: unknown action {action!r}; allowed: {', '.join(self.actions)}",
            )
        required, optional = self.actions[action]
        args = {k: v for k, v in params.items() if k != "action"}
        unknown = sorted(set(args) - set(required) - set(optional))
        if unknown:
            allowed = ", ".join((*required, *optional)) or "none"
            return _error(
                action, f"{self.name}.{action}: unknown parameters {unknown}; allowed: {allowed}"
            )
        missing = [k for k in required if k not in args]
        if missing:
            return _error(action, f"{self.name}.{action}: missing required parameters {missing}")
        return action, args


class RAGTool(_Tool):
    """Knowledge-base search as a tool.

    Actions:
        ``search``: ``query`` (str), optional ``top_k`` (int) -> results with source, score,
            similarity and text, plus the queries used (MQE/HyDE) and notes.
        ``topics``: the configured policy topics (id and description).
        ``stats``: documents, chunks, embedder, search and LLM-expansion counters.
    """

    name = "rag"
    description = "Search the flood-policy knowledge base (NFIP, elevation, subsidies, buyouts)."
    actions = {"search": (("query",), ("top_k",)), "topics": ((), ()), "stats": ((), ())}

    def __init__(self, knowledge_base: KnowledgeBase) -> None:
        self.kb = knowledge_base

    def _search_args(self, args: dict[str, Any]) -> tuple[str, int | None] | str:
        query, top_k = args["query"], args.get("top_k")
        if not isinstance(query, str) or not query.strip():
            return f"rag.search: query must be a non-empty string, got {query!r}"
        if top_k is not None and (
            isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1
        ):
            return f"rag.search: top_k must be a positive integer, got {top_k!r}"
        return query, top_k

    def _reply(self, action: str, args: dict[str, Any], retrieval: Any = None) -> dict[str, Any]:
        if action == "stats":
            return {"status": "ok", "action": action, "stats": json_safe(self.kb.stats())}
        if action == "topics":
            topics = self.kb.topics.topics if self.kb.topics else []
            return {
                "status": "ok",
                "action": action,
                "topics": [{"id": t.id, "description": t.description} for t in topics],
            }
        return {
            "status": "ok",
            "action": action,
            "query": args["query"],
            "queries": list(retrieval.queries),
            "results": [c.to_dict() for c in retrieval.chunks],
            "notes": list(retrieval.notes),
        }

    def run(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Run one action synchronously (see the class docstring)."""
        checked = self._check(params)
        if isinstance(checked, dict):
            return checked
        action, args = checked
        if action != "search":
            return self._reply(action, args)
        parsed = self._search_args(args)
        if isinstance(parsed, str):
            return _error(action, parsed)
        return self._reply(action, args, self.kb.retrieve(*parsed))



class MemoryTool(_Tool):
    """One household's memory engine (``HumanCentricMemoryEngine``) as a tool.

    Actions:
        ``add``: ``content`` (str) and ``year`` (simulation year), optional ``kind``,
            ``importance``, ``emotion``, ``source``, ``metadata`` -> the stored item
            (``engine.add``; ``kind="insight"`` stores a reflection insight).
        ``retrieve``: ``year`` -> the memories the engine retrieves for a decision that year
            (``engine.retrieve``; this strengthens them, as retrieval does in the simulation).
        ``stats``: counts of all items by kind and fidelity, mean importance.

    Args:
        engine: Object with ``add(content, year, **kw)``, ``retrieve(year)`` and ``items()``.
    """

    name = "memory"
    description = "Store and retrieve one household's memories."
    actions = {
        "add": (("content", "year"), ("kind", "importance", "emotion", "source", "metadata")),
        "retrieve": (("year",), ()),
        "stats": ((), ()),
    }

    def __init__(self, engine: MemoryEngineLike) -> None:
        self.engine = engine

    def run(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Run one action (see the class docstring)."""
        checked = self._check(params)
        if isinstance(checked, dict):
            return checked
        action, args = checked
        year = args.get("year")
        if action != "stats" and (isinstance(year, bool) or not isinstance(year, int | float)):
            return _error(action, f"memory.{action}: year must be a number, got {year!r}")
        if action == "add":
            content = args.pop("content")
            if not isinstance(content, str) or not content.strip():
                return _error(
                    action, f"memory.add: content must be a non-empty string, got {content!r}"
                )
            try:
                item = self.engine.add(content, args.pop("year"), **args)
            except ValueError as exc:  # the engine's own validation (kind, importance)
                return _error(action, f"memory.add: {exc}")
            return {"status": "ok", "action": action, "item": json_safe(item)}
        if action == "retrieve":
            items = list(self.engine.retrieve(year))
            return {
                "status": "ok",
                "action": action,
                "count": len(items),
                "items": json_safe(items),
            }
        return {"status": "ok", "action": action, "stats": self._stats(args)}

    def _stats(self, args: dict[str, Any]) -> dict[str, Any]:
        items = list(self.engine.items())
        importances = [float(getattr(i, "importance", 0.0)) for i in items]

        def counts(attr: str) -> dict[str, int]:
            values = (json_safe(getattr(i, attr, None)) for i in items)
            return dict(sorted(Counter(str(v) for v in values if v is not None).items()))

        return {
            "n_items": len(items),
            "by_kind": counts("kind"),
            "by_fidelity": counts("fidelity"),
            "mean_importance": sum(importances) / len(importances) if importances else None,
        }
