"""Sweep settings (owned by the sweep package; see README "Sweeps and clusters")."""

from __future__ import annotations

from governed_broker.config.base import StrictModel


class SweepConfig(StrictModel):
    """Parameter sweep over an experiment. Extended by the sweep package."""

    parameters: dict[str, list] = {}
    replicates: int = 1
