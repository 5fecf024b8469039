"""``HouseholdArrays``: the state of every household as parallel arrays (index = agent id - 1).

The world keeps household state vectorised for speed; ``HouseholdAgent`` reads its own entries.
The policy instruments keep their own per-household state (``Instrument.arrays``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

import numpy as np

from governed_broker.config.agent_types import AgentTypesConfig
from governed_broker.sim.population import Population

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
    taken_once: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def from_population(cls, pop: Population, zones: list[str],
                        domain: AgentTypesConfig) -> HouseholdArrays:
        """The households of ``pop`` at the start of a run (``zones``: zone names by index)."""
        zone_lookup = {z: i for i, z in enumerate(zones)}
        n = pop.size
        return cls(
            is_owner=pop.is_owner.astype(bool),
            zone_index=np.array([zone_lookup[z] for z in pop.zone], dtype=np.int64),
            income_usd=pop.income_usd.astype(float),
            savings_usd=pop.savings_usd.astype(float),
            structure_value_usd=pop.structure_value_usd.astype(float),
            contents_value_usd=pop.contents_value_usd.astype(float),
            elevated=pop.elevated.astype(bool),
            insured=pop.insured.astype(bool),
            relocated=np.zeros(n, dtype=bool),
            trust_insurance=pop.trust_insurance.astype(float),
            trust_neighbours=pop.trust_neighbours.astype(float),
            years_since_flood=np.full(n, np.nan),
            floods_experienced=np.zeros(n, dtype=np.int64),
            debt_usd=np.zeros(n), loan_payment_usd=np.zeros(n), unrepaired_usd=np.zeros(n),
            sold=np.zeros(n, dtype=bool),
            taken_once={a: np.zeros(n, dtype=bool)
                        for a, spec in domain.actions.items() if spec.duration == "once"},
        )

    def arrays(self) -> dict[str, np.ndarray]:
        """Every array by name (``taken_once/<action>`` for the once-only actions)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "taken_once"}
        out.update({TAKEN_PREFIX + a: v for a, v in self.taken_once.items()})
        return out

    def load(self, data: Mapping[str, np.ndarray]) -> None:
        """Overwrite every array in place from ``arrays()`` output."""
        for name, target in self.arrays().items():
            target[...] = data[name]
