"""Flood hazard: which years flood and how deep the water is at each home (metres).

Each hazard mode is a ``Hazard`` subclass registered by name in
``governed_broker.config.world.HAZARD_MODES`` (``fixed``: ``FixedScheduleHazard``,
``stochastic``: ``StochasticHazard``); ``make_hazard`` builds the one an experiment names.

Each year's draws come from a generator derived from (seed, "hazard", year), so a year's flood
does not depend on how earlier years were simulated (this keeps resumed runs identical).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from governed_broker.config.registry import load_registered
from governed_broker.config.world import HAZARD_MODES, FixedEvent, HazardConfig
from governed_broker.seeding import child_rng


def hazard_class(mode: str) -> type[Hazard]:
    """The class registered as ``mode`` in ``HAZARD_MODES``, imported now.

    Raises:
        ValueError: ``mode`` is not registered.
        ConfigError: its entry cannot be imported (no such module or attribute).
    """
    return load_registered(HAZARD_MODES, mode, kind="hazard mode", setting="hazard.mode",
                           registry_name="HAZARD_MODES")


def make_hazard(
    config: HazardConfig, zones: Sequence[str], seed: int, years: int,
    events: Sequence[FixedEvent] | None = None,
) -> Hazard:
    """The hazard of ``config.mode`` (see ``Hazard`` for the arguments)."""
    return hazard_class(config.mode)(config, zones, seed, years, events)


class Hazard:
    """Flood events for a set of zones; the base of the hazard modes.

    What households are told (``probability``, ``typical_depth_m``) is the declared hazard map
    (``config.zones``), never the realised events: a schedule's future must not leak into a
    prompt. A mode overrides ``zone_depths`` (and ``_zone_statistics`` if its map is not
    ``config.zones``); ``household_depths`` decides which homes an event reaches
    (``flooded_share`` of a zone's homes, drawn per home and year) and spreads the zone's depth
    over them (``household_sigma``). Build one with ``make_hazard``, which picks the class
    registered for ``config.mode``.

    Args:
        config: The experiment's ``hazard`` section.
        zones: Zone names; households refer to zones by index into this list.
        seed: The experiment seed.
        years: Number of simulated years.
        events: The flood schedule when it came from ``config.file`` (default:
            ``config.events``); kept by year in ``events``.

    Attributes:
        probability: Annual chance that a flood reaches a home, per zone (the map's).
        typical_depth_m: Typical depth of a flood at a home, per zone (metres; the map's).
        flooded_share: Share of a zone's homes that an event reaches, per zone.
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
        self.flooded_share = np.array([
            config.zones[z].flooded_share if z in config.zones else 1.0 for z in self.zones])

    def _zone_statistics(self) -> tuple[np.ndarray, np.ndarray]:
        """The declared map: ``annual_probability`` and ``median_depth_m`` per zone."""
        n = len(self.zones)
        prob, depth = np.zeros(n), np.zeros(n)
        for i, zone in enumerate(self.zones):
            spec = self.config.zones[zone]
            prob[i], depth[i] = spec.annual_probability, spec.median_depth_m
        return prob, depth

    def zone_depths(self, year: int) -> np.ndarray:
        """Flood depth per zone this year (0: no flood in that zone)."""
        raise NotImplementedError

    def place_households(self, zone_index: np.ndarray, x: np.ndarray | None,
                         y: np.ndarray | None) -> None:
        """Where the homes stand: called once by the world after the population is built.

        The zone-based modes need only each home's zone (given to ``household_depths``);
        a mode that gives each home its own depth (``raster``) overrides this.

        Args:
            zone_index: Zone of each household (index into ``zones``).
            x: First coordinate of each home from the population, or None.
            y: Second coordinate of each home, or None.
        """

    def household_depths(self, year: int, zone_index: np.ndarray) -> np.ndarray:
        """Depth at each home this year (metres; 0 where the event did not reach the home).

        An event reaches each home of its zone with probability ``flooded_share`` (one draw
        per home from ``child_rng(seed, "hazard", year, "reached")``), at the zone's depth
        times a lognormal spread (``household_sigma``).
        """
        base = self.zone_depths(year)[zone_index]
        if np.any(base > 0) and np.any(self.flooded_share < 1.0):
            rng = child_rng(self.seed, "hazard", year, "reached")
            base = np.where(rng.random(len(zone_index)) < self.flooded_share[zone_index],
                            base, 0.0)
        sigma = self.config.household_sigma
        if sigma > 0 and np.any(base > 0):
            rng = child_rng(self.seed, "hazard", year, "households")
            base = base * np.exp(sigma * rng.standard_normal(len(zone_index)))
        return base


class StochasticHazard(Hazard):
    """Mode ``stochastic``.

    One event draw per year; zone z has an event when ``u < annual_probability[z] /
    flooded_share[z]`` (so that each home's chance is the map's ``annual_probability``), at
    ``median_depth_m * exp(event_sigma * z)`` (one standard normal shared by the zones).
    """

    def zone_depths(self, year: int) -> np.ndarray:
        """This year's event, drawn from ``child_rng(seed, "hazard", year, "event")``."""
        rng = child_rng(self.seed, "hazard", year, "event")
        u, z = rng.random(), rng.standard_normal()
        out = np.zeros(len(self.zones))
        for i, zone in enumerate(self.zones):
            spec = self.config.zones[zone]
            if u < spec.event_probability:
                out[i] = spec.median_depth_m * np.exp(spec.event_sigma * z)
        return out


class FixedScheduleHazard(Hazard):
    """Mode ``fixed``: the floods of the schedule (``events``).

    Nothing else. Households are told the declared map (``config.zones``), not how often the
    schedule floods.
    """

    def zone_depths(self, year: int) -> np.ndarray:
        """The scheduled depths of ``year`` (zeros when it is not a flood year)."""
        event = self.events.get(year)
        if event is None:
            return np.zeros(len(self.zones))
        return np.array([event.depth_m.get(z, 0.0) for z in self.zones])
