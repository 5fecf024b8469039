"""Flood hazard: which years flood and how deep the water is at each home (metres).

Each year's draws come from a generator derived from (seed, "hazard", year), so a year's flood
does not depend on how earlier years were simulated (this keeps resumed runs identical).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from governed_broker.config.world import FixedEvent, HazardConfig
from governed_broker.seeding import child_rng


class Hazard:
    """Flood events for a set of zones.

    Args:
        config: The experiment's ``hazard`` section.
        zones: Zone names; households refer to zones by index into this list.
        seed: The experiment seed.
        years: Number of simulated years (used for the fixed schedule's frequencies).
        events: The fixed schedule (mode ``fixed``) when it came from ``config.file``
            (default: ``config.events``).
    """

    def __init__(
        self, config: HazardConfig, zones: Sequence[str], seed: int, years: int,
        events: Sequence[FixedEvent] | None = None,
    ) -> None:
        self.config = config
        self.zones = list(zones)
        self.seed = int(seed)
        self.years = int(years)
        self.events = {e.year: e for e in (config.events if events is None else events)}
        self.probability, self.typical_depth_m = self._zone_statistics()

    def _zone_statistics(self) -> tuple[np.ndarray, np.ndarray]:
        """Objective annual flood probability and typical flood depth per zone."""
        n = len(self.zones)
        prob, depth = np.zeros(n), np.zeros(n)
        if self.config.mode == "stochastic":
            for i, zone in enumerate(self.zones):
                spec = self.config.zones[zone]
                prob[i], depth[i] = spec.annual_probability, spec.median_depth_m
            return prob, depth
        for i, zone in enumerate(self.zones):
            depths = [e.depth_m[zone] for e in self.events.values()
                      if e.depth_m.get(zone, 0.0) > 0 and e.year <= self.years]
            prob[i] = len(depths) / self.years
            depth[i] = float(np.mean(depths)) if depths else 0.0
        return prob, depth

    def zone_depths(self, year: int) -> np.ndarray:
        """Flood depth per zone this year (0: no flood in that zone)."""
        if self.config.mode == "fixed":
            event = self.events.get(year)
            if event is None:
                return np.zeros(len(self.zones))
            return np.array([event.depth_m.get(z, 0.0) for z in self.zones])
        rng = child_rng(self.seed, "hazard", year, "event")
        u, z = rng.random(), rng.standard_normal()
        out = np.zeros(len(self.zones))
        for i, zone in enumerate(self.zones):
            spec = self.config.zones[zone]
            if u < spec.annual_probability:
                out[i] = spec.median_depth_m * np.exp(spec.event_sigma * z)
        return out

    def household_depths(self, year: int, zone_index: np.ndarray) -> np.ndarray:
        """Depth at each home this year (metres), with per-household lognormal spread."""
        base = self.zone_depths(year)[zone_index]
        sigma = self.config.household_sigma
        if sigma > 0 and np.any(base > 0):
            rng = child_rng(self.seed, "hazard", year, "households")
            base = base * np.exp(sigma * rng.standard_normal(len(zone_index)))
        return base
