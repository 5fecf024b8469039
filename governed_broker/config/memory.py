"""Experiment-level memory settings (owned by the memory package; see README "Memory")."""

from __future__ import annotations

from typing import Literal

from governed_broker.config.base import StrictModel


class MemoryConfig(StrictModel):
    """Which memory engine households use and per-experiment parameter overrides.

    ``engine``: ``humancentric`` (SPEC 3.1), ``window`` (only the current year's working items,
    the ablation baseline) or ``none``. ``overrides`` replaces parameters of the ``memory:``
    section of ``agent_types.yaml`` for this experiment (same names).
    """

    engine: Literal["humancentric", "window", "none"] = "humancentric"
    overrides: dict[str, float | int] = {}
