"""Depth-damage table files (``configs/damage/*.yaml``): their model and validation.

A table maps water depth above the lowest floor (metres) to a damage fraction of the value,
for structure and contents; ``sim.damage`` applies it to households.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import Field, model_validator

from governed_broker.config.base import StrictModel
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
        if any(b <= a for a, b in zip(d, d[1:], strict=False)) or d[0] < 0:
            raise ValueError(f"depth_m must be >= 0 and strictly increasing, got {d}")
        if any(not 0.0 <= x <= 1.0 for x in f):
            raise ValueError(f"fraction values must lie in [0, 1], got {f}")
        if any(b < a for a, b in zip(f, f[1:], strict=False)):
            raise ValueError(f"fraction must not decrease with depth, got {f}")
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
    from governed_broker.config.loader import validate_model

    path = Path(path)
    return validate_model(DamageTable, read_yaml(path), path)
