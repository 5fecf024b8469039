"""``HouseholdArrays``: the state of every household as parallel arrays (index = agent id - 1).

The world keeps household state vectorised for speed; ``HouseholdAgent`` reads its own entries.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

import numpy as np

#: Name prefix of the once-only action arrays in ``HouseholdArrays.arrays()``.
TAKEN_PREFIX = "taken_once/"


@dataclass
class HouseholdArrays:
    """The state of every household, one entry per household (index = agent id - 1)."""

    is_owner: np.ndarray
    zone_index: np.ndarray
    income_usd: np.ndarray
    savings_usd: np.ndarray
    structure_value_usd: np.ndarray
    contents_value_usd: np.ndarray
    elevated: np.ndarray
    insured: np.ndarray  # policy in force for this year's flood
    relocated: np.ndarray
    trust_insurance: np.ndarray
    trust_neighbours: np.ndarray
    years_since_flood: np.ndarray  # float; NaN = never flooded
    floods_experienced: np.ndarray
    debt_usd: np.ndarray  # disaster-loan balance
    loan_payment_usd: np.ndarray  # yearly payment of the loans held
    unrepaired_usd: np.ndarray  # structure damage left unrepaired so far
    sold: np.ndarray  # left by a forced sale (also marked relocated)
    insurance_required: np.ndarray  # the lender enforces the mandatory purchase requirement
    group_policy_years: np.ndarray  # int; later years of floods an aid certificate covers
    group_insured: np.ndarray  # the policy in force is an aid certificate (``sim.group_policy``)
    aid_requires_insurance: np.ndarray  # received aid in the group policy's zones
    # int; flood payments so far (claims, aid grants, disaster loans), of any amount and of at
    # least the banded premiums' threshold (``insurance.preferred_risk.loss_history``)
    flood_payments: np.ndarray
    large_flood_payments: np.ndarray
    taken_once: dict[str, np.ndarray] = field(default_factory=dict)

    def arrays(self) -> dict[str, np.ndarray]:
        """Every array by name (``taken_once/<action>`` for the once-only actions)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "taken_once"}
        out.update({TAKEN_PREFIX + a: v for a, v in self.taken_once.items()})
        return out

    def load(self, data: Mapping[str, np.ndarray]) -> None:
        """Overwrite every array in place from ``arrays()`` output."""
        for name, target in self.arrays().items():
            target[...] = data[name]
