"""Depth-damage tables: water depth above the lowest floor -> damage fraction.

Tables live in ``configs/damage/*.yaml`` (name, source, units, structure and contents points)
and are interpolated linearly; beyond the last point the last fraction is held. Water at or
below the floor (effective depth <= 0, e.g. after elevation) does no damage.
"""

from __future__ import annotations

import numpy as np

from governed_broker.config.damage import DamageTable


def damages_usd(
    table: DamageTable,
    effective_depth_m: np.ndarray,
    structure_value_usd: np.ndarray,
    contents_value_usd: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Structure and contents damage in dollars at the given effective depths."""
    return (
        table.structure(effective_depth_m) * structure_value_usd,
        table.contents(effective_depth_m) * contents_value_usd,
    )
