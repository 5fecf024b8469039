"""The ``hazard.raster`` section: a yearly series of flood-depth grids (ESRI ASCII).

Mode ``raster`` (``governed_broker.sim.raster.RasterHazard``) gives each home the depth of its
grid cell in the grid of the calendar year being simulated. Where the homes stand comes from
the population (columns ``x`` and ``y`` in the grids' coordinates) or, for a population
without coordinates, from ``placement``: a declared, seeded rule that puts each household of
a zone on a cell drawn from that zone's class of cells.

What households are *told* about their flood chance never comes from the grids: it is the
declared statement in ``hazard.zones`` (annual chance and typical depth per zone, with the
section's ``source``), so the stated chance does not depend on the floods to come.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, model_validator

from governed_broker.config.base import StrictModel

#: Earliest and latest calendar year a grid may stand for.
MIN_CALENDAR_YEAR, MAX_CALENDAR_YEAR = 1000, 3000


class PlacementZone(StrictModel):
    """The cells a zone's households are placed on.

    Valid cells wet (depth above ``min_depth_m``) in at least ``wet_years_min`` and at most
    ``wet_years_max`` of the series' grids.

    ``share`` (default 1) is the share of the zone's households standing on those cells (the
    zone's exposed homes); the others stand on valid cells dry in every grid. A share below 1
    is how a zone only part of which the series floods is declared (a real SFHA: most of its
    homes stay dry through a decade's floods); with ``wet_years_min`` 0 the two classes would
    overlap, so a share below 1 needs ``wet_years_min`` of at least 1.
    """

    wet_years_min: int = Field(ge=0, le=1000, description="fewest grids the cell is wet in")
    wet_years_max: int = Field(ge=0, le=1000, description="most grids the cell is wet in")
    share: float = Field(default=1.0, ge=0.0, le=1.0, description=(
        "share of the zone's households on these cells; the rest on cells dry in every grid"))

    @model_validator(mode="after")
    def _ordered(self) -> PlacementZone:
        if self.wet_years_max < self.wet_years_min:
            raise ValueError(f"wet_years_max ({self.wet_years_max}) must be >= wet_years_min "
                             f"({self.wet_years_min})")
        if self.share < 1.0 and self.wet_years_min < 1:
            raise ValueError(f"share {self.share:g} < 1 needs wet_years_min >= 1 (the other "
                             "households stand on cells dry in every grid, which a range "
                             "starting at 0 already holds)")
        return self


class PlacementConfig(StrictModel):
    """How households without coordinates are put on cells.

    Each household of zone z gets a cell drawn uniformly (with replacement) from the valid
    cells whose wet-year count lies in z's range, from the generator
    ``child_rng(seed, "hazard", "placement", z)``; with ``share`` below 1, round(share * n)
    of the zone's n households, chosen from the same generator, stand there and the others on
    valid cells dry in every grid. Every zone of the population needs an entry.
    """

    source: str = Field(min_length=1, description="why these cell classes stand for the zones")
    zones: dict[str, PlacementZone] = Field(min_length=1, description=(
        "zone -> the class of cells its households are drawn on"))


class RasterConfig(StrictModel):
    """A yearly series of flood-depth grids (metres) and where the homes stand on them.

    Attributes:
        path: A directory, or a ``.tar`` / ``.tar.gz`` archive, holding the grids (relative to
            the experiment file).
        grids: Calendar year -> grid file inside ``path`` (ESRI ASCII, ``.asc`` or
            ``.asc.gz``; depth in metres; NODATA cells are outside the modelled area).
        start_year: The calendar year of simulated year 1; simulated year ``t`` uses the grid
            of ``start_year + t - 1``, and every year of the run must have a grid.
        min_depth_m: A cell is wet (and a home on it flooded) when its depth exceeds this.
        placement: The rule placing households that have no coordinates.
    """

    path: Path = Field(description="directory or .tar/.tar.gz archive holding the grids")
    grids: dict[int, str] = Field(min_length=1, description=(
        "calendar year -> ESRI ASCII grid (.asc or .asc.gz, metres) inside path"))
    start_year: int = Field(ge=MIN_CALENDAR_YEAR, le=MAX_CALENDAR_YEAR, description=(
        "calendar year of simulated year 1; every year of the run needs a grid"))
    min_depth_m: float = Field(default=0.0, ge=0.0, le=20.0, description=(
        "a cell is wet (a home on it flooded) when its depth exceeds this (metres)"))
    placement: PlacementConfig | None = Field(default=None, description=(
        "the rule placing households that have no x/y coordinates"))

    @model_validator(mode="after")
    def _years(self) -> RasterConfig:
        bad = [y for y in self.grids if not MIN_CALENDAR_YEAR <= y <= MAX_CALENDAR_YEAR]
        if bad:
            raise ValueError(f"grids: years {bad} are not calendar years "
                             f"({MIN_CALENDAR_YEAR}-{MAX_CALENDAR_YEAR})")
        names = list(self.grids.values())
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"grids: file(s) {twice} stand for more than one year")
        n_grids = len(self.grids)
        if self.placement is not None:
            for zone, rule in self.placement.zones.items():
                if rule.wet_years_min > n_grids:
                    raise ValueError(
                        f"placement.zones.{zone}.wet_years_min ({rule.wet_years_min}) exceeds "
                        f"the number of grids ({n_grids}): no cell can qualify")
        return self

    def calendar_year(self, year: int) -> int:
        """The calendar year of simulated year ``year`` (1-based)."""
        return self.start_year + year - 1
