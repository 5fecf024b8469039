"""Mode ``raster``: each home gets its grid cell's depth in a yearly series of depth grids.

Simulated year ``t`` is calendar year ``start_year + t - 1`` and uses that year's grid
(``hazard.raster``, read by ``governed_broker.config.grids``). Homes stand on cells given by
the population's ``x``/``y`` or drawn by the declared placement rule (see
``governed_broker.config.raster.PlacementConfig``).

What households are told (``probability``, ``typical_depth_m`` per zone) is the declared
statement in ``hazard.zones``, never a statistic of the grids: the series is the future the
households live through, and stating its frequencies would tell them their floods to come.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from governed_broker.config.base import ConfigError
from governed_broker.config.grids import GridGeometry, load_depth_series
from governed_broker.config.world import FixedEvent, HazardConfig
from governed_broker.seeding import child_rng
from governed_broker.sim.hazard import Hazard


class RasterHazard(Hazard):
    """Flood depths from a yearly series of grids, one cell per home.

    Built like every hazard (``Hazard``), from a section whose ``raster.path`` is resolved
    (``config.loader.hazard_with_paths``; ``FloodModel`` does this).

    Attributes:
        geometry: The grids' geometry.
        depths: Calendar year -> depth grid (metres, NaN outside the modelled area).
        cells: Flat cell index of each household's home (set by ``place_households``).
    """

    def __init__(
        self, config: HazardConfig, zones: Sequence[str], seed: int, years: int,
        events: Sequence[FixedEvent] | None = None,
    ) -> None:
        super().__init__(config, zones, seed, years, events)
        raster = config.raster
        self.geometry, self.depths = load_depth_series(raster, raster.path)
        missing = [raster.calendar_year(t) for t in range(1, self.years + 1)
                   if raster.calendar_year(t) not in self.depths]
        if missing:
            raise ConfigError(f"hazard.raster.grids: no grid for calendar year(s) {missing[:5]}")
        self.cells: np.ndarray | None = None
        self._zone_index: np.ndarray | None = None

    # ----------------------------------------------------------------------------------------
    # placement
    # ----------------------------------------------------------------------------------------

    def wet_years(self) -> np.ndarray:
        """Per cell, in how many grids of the series it is wet.

        -1 outside the modelled area: NODATA in any grid.
        """
        stack = np.stack([self.depths[y] for y in sorted(self.depths)])
        count = (np.nan_to_num(stack, nan=0.0) > self.config.raster.min_depth_m).sum(axis=0)
        return np.where(np.isnan(stack).any(axis=0), -1, count).ravel()

    def place_households(self, zone_index: np.ndarray, x: np.ndarray | None,
                         y: np.ndarray | None) -> None:
        """Put each home on a cell: its coordinates, or the placement rule of its zone."""
        zone_index = np.asarray(zone_index, dtype=np.int64)
        self._zone_index = zone_index
        if x is not None and y is not None:
            self.cells = self._cells_of_points(np.asarray(x, float), np.asarray(y, float))
        else:
            self.cells = self._drawn_cells(zone_index)

    def _cells_of_points(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        row, col = self.geometry.cell_of(x, y)
        flat = np.where(row < 0, -1, row * self.geometry.ncols + col)
        outside = flat < 0
        outside[~outside] = self.wet_years()[flat[~outside]] < 0
        if outside.any():
            i = int(np.flatnonzero(outside)[0])
            raise ConfigError(
                f"population: household {i + 1} at x={x[i]:g}, y={y[i]:g} is outside the "
                f"modelled area of the hazard grids ({_extent(self.geometry)}; NODATA cells "
                f"count as outside); {int(outside.sum())} household(s) in all")
        return flat

    def _drawn_cells(self, zone_index: np.ndarray) -> np.ndarray:
        placement = self.config.raster.placement
        if placement is None:
            raise ConfigError("hazard.raster.placement: the population has no x/y coordinates "
                              "and no placement rule is given")
        wet = self.wet_years()
        cells = np.full(len(zone_index), -1, dtype=np.int64)
        for z, zone in enumerate(self.zones):
            members = np.flatnonzero(zone_index == z)
            if members.size == 0:
                continue
            rule = placement.zones.get(zone)
            if rule is None:
                raise ConfigError(f"hazard.raster.placement.zones: no rule for zone {zone!r}")
            pool = np.flatnonzero((wet >= rule.wet_years_min) & (wet <= rule.wet_years_max))
            if pool.size == 0:
                raise ConfigError(
                    f"hazard.raster.placement.zones.{zone}: no cell of the grids is wet in "
                    f"{rule.wet_years_min}-{rule.wet_years_max} of {len(self.depths)} years")
            rng = child_rng(self.seed, "hazard", "placement", zone)
            if rule.share < 1.0:
                # the zone's exposed homes, an exact count; the others on always-dry cells
                exposed = np.zeros(members.size, bool)
                exposed[rng.permutation(members.size)[:round(rule.share * members.size)]] = True
                dry = np.flatnonzero(wet == 0)
                if dry.size == 0 and not exposed.all():
                    raise ConfigError(f"hazard.raster.placement.zones.{zone}: share "
                                      f"{rule.share:g} < 1 but no cell is dry in every grid")
                rest = members[~exposed]
                cells[rest] = dry[rng.integers(0, max(dry.size, 1), size=rest.size)]
                members = members[exposed]
            cells[members] = pool[rng.integers(0, pool.size, size=members.size)]
        return cells

    # ----------------------------------------------------------------------------------------
    # depths
    # ----------------------------------------------------------------------------------------

    def _home_depths(self, year: int) -> np.ndarray:
        if self.cells is None:
            raise RuntimeError("RasterHazard: place_households must be called before depths")
        grid = self.depths[self.config.raster.calendar_year(year)].ravel()
        depth = np.nan_to_num(grid[self.cells], nan=0.0)
        return np.where(depth > self.config.raster.min_depth_m, depth, 0.0)

    def zone_depths(self, year: int) -> np.ndarray:
        """The deepest water at any home of each zone this year (metres; 0: dry)."""
        depth = self._home_depths(year)
        out = np.zeros(len(self.zones))
        np.maximum.at(out, self._zone_index, depth)
        return out

    def household_depths(self, year: int, zone_index: np.ndarray) -> np.ndarray:
        """Each home's cell depth this year (metres; 0 at or below ``min_depth_m``)."""
        if len(zone_index) != len(self.cells):
            raise ValueError(f"{len(zone_index)} households asked for, {len(self.cells)} placed")
        return self._home_depths(year)


def _extent(g: GridGeometry) -> str:
    return (f"x {g.xllcorner:g} to {g.xllcorner + g.ncols * g.cellsize:g}, "
            f"y {g.yllcorner:g} to {g.yllcorner + g.nrows * g.cellsize:g}")
