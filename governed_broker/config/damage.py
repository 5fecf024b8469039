"""Depth-damage table files (``configs/damage/*.yaml``): their model and validation.

A table maps water depth above the lowest floor (metres) to a damage fraction of the value,
for structure and contents; ``sim.damage`` applies it to households.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import Field, model_validator

from governed_broker.config.base import StrictModel, excerpt
from governed_broker.config.validation import validate_model
from governed_broker.config.yamlsafe import read_yaml


class DamageCurve(StrictModel):
    """Depth points (metres, increasing) and damage fractions (0..1)."""

    depth_m: list[float] = Field(min_length=2)
    fraction: list[float] = Field(min_length=2)

    @model_validator(mode="after")
    def _valid(self) -> DamageCurve:
        d, f = self.depth_m, self.fraction
        if len(d) != len(f):
            raise ValueError(f"depth_m has {len(d)} points but fraction has {len(f)}")
        # messages name the first bad point, never the whole list: the file may be any file
        bad = [i for i in range(len(d)) if d[i] < 0 or (i and d[i] <= d[i - 1])]
        if bad:
            raise ValueError(f"depth_m must be >= 0 and strictly increasing (point {bad[0]}: "
                             f"{excerpt(d[bad[0]])})")
        bad = [i for i in range(len(f)) if not 0.0 <= f[i] <= 1.0]
        if bad:
            raise ValueError(f"fraction values must lie in [0, 1] (point {bad[0]}: "
                             f"{excerpt(f[bad[0]])})")
        bad = [i for i in range(1, len(f)) if f[i] < f[i - 1]]
        if bad:
            raise ValueError(f"fraction must not decrease with depth (point {bad[0]}: "
                             f"{excerpt(f[bad[0]])} after {excerpt(f[bad[0] - 1])})")
        return self

    def __call__(self, depth_m: np.ndarray) -> np.ndarray:
        """Damage fraction at each depth (vectorised); 0 where depth <= 0."""
        depth = np.asarray(depth_m, dtype=float)
        frac = np.interp(depth, self.depth_m, self.fraction)
        return np.where(depth > 0.0, frac, 0.0)


class DamageTable(StrictModel):
    """A depth-damage table file (see ``configs/damage/``)."""

    name: str = Field(min_length=1)
    source: str = Field(min_length=1)
    derivation: str = ""
    units: dict[str, str] = {}
    structure: DamageCurve
    contents: DamageCurve


def load_damage_table(path: str | Path) -> DamageTable:
    """Load and validate a depth-damage table YAML (``ConfigError`` on any problem)."""
    path = Path(path)
    return validate_model(DamageTable, read_yaml(path), path)
