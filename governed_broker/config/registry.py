"""Name registries: a short name in a YAML file -> the class or builder that implements it.

LLM backends (``config.llm.LLM_BACKENDS``), memory engines (``config.memory.MEMORY_ENGINES``),
hazard modes (``config.world.HAZARD_MODES``), policy instruments
(``config.world.INSTRUMENTS``) and institutions (``config.institutions.INSTITUTIONS``) are
each a ``{"name": "module:attribute"}`` dict. The entry is imported only when a run uses it,
so an optional dependency is needed only by the runs that name it; ``load_registered`` is the
one place that imports an entry.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from governed_broker.config.base import ConfigError


def load_registered(registry: Mapping[str, str], name: str, *, kind: str, setting: str,
                    registry_name: str, what: str = "class",
                    error: type[Exception] = ConfigError) -> Any:
    """The attribute registered as ``name``, imported now.

    Args:
        registry: The registry (``{"name": "module:attribute"}``).
        name: The name a configuration gave.
        kind: What the registry holds, for messages (``hazard mode``).
        setting: Where the name was given, for messages (``hazard.mode``).
        registry_name: The registry's name, for messages (``HAZARD_MODES``).
        what: What an entry is, for messages (``class``, ``builder``).
        error: The exception raised when the entry cannot be imported.

    Raises:
        ValueError: ``name`` is not registered.
        error: Its entry cannot be imported (no such module or attribute).
    """
    target = registry.get(name)
    if target is None:
        raise ValueError(f"unknown {kind} {name!r}; registered: {', '.join(registry)}")
    module_name, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise error(f"{setting} {name!r}: cannot load its {what} {target!r} ({exc}); check the "
                    f"{registry_name} entry") from exc
