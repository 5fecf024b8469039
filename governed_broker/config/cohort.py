"""Cohort mode's settings (owned by ``governed_broker.broker.cohort``)."""

from __future__ import annotations

import math

from pydantic import Field, field_validator

from governed_broker.config.base import StrictModel

#: Numeric situation fields a cohort key may bin (``HouseholdSituation`` attributes and the
#: neighbour shares); the categorical facts are always part of the key.
COHORT_NUMERIC_FIELDS: tuple[str, ...] = (
    "income_usd", "savings_usd", "structure_value_usd", "contents_value_usd", "depth_m",
    "damage_usd", "payout_usd", "years_since_flood", "floods_experienced", "flood_probability",
    "trust_insurance", "trust_neighbours", "neighbour_shares.insured",
    "neighbour_shares.elevated", "neighbour_shares.relocated",
)


class CohortConfig(StrictModel):
    """Cohort mode: for populations too large to ask household by household (off by default).

    Each year, households whose decision-relevant situation is the same after binning form a
    cohort: same tenure, flood zone, flooded / insured / elevated this year, allowed actions and
    affordability of each, and the same bin of every field in ``bins``. A cohort's
    representative (its lowest agent id) is asked ``samples`` times (separate, seeded governed
    conversations), and every member draws one of those outcomes with its own seeded draw; an
    outcome the member could not take falls back as in a full run. Reflection, when on, is
    asked once per cohort and its insights go to every member still active. What this costs in
    accuracy is measured, not assumed: ``governed-broker cohort-check`` compares a cohort run
    with a full run (docs/running.md, "Cohort mode").

    Attributes:
        enabled: Decide by cohort.
        samples: Conversations per cohort and year (k); a cohort smaller than k gets one per
            member. More samples follow the reply distribution more closely and cost more.
        bins: Numeric situation field -> increasing bin edges (value v: bin
            bisect_right(edges, v)). A household that never flooded has its own
            ``years_since_flood`` bin; fields not named do not split cohorts (the prompt shows
            the representative's values).
    """

    enabled: bool = False
    samples: int = Field(default=5, ge=1, le=100, description=(
        "our choice: 5 replies per cohort and year give every member a draw from a small "
        "reply distribution at a fifth of the calls of asking 25 households; cohort-check "
        "measures the error"))
    bins: dict[str, list[float]] = Field(default_factory=dict)

    @field_validator("bins")
    @classmethod
    def _known_increasing(cls, bins: dict[str, list[float]]) -> dict[str, list[float]]:
        for name, edges in bins.items():
            if name not in COHORT_NUMERIC_FIELDS:
                raise ValueError(f"unknown field {name!r}; binnable: "
                                 f"{', '.join(COHORT_NUMERIC_FIELDS)}")
            if not 1 <= len(edges) <= 100:
                raise ValueError(f"{name}: give 1 to 100 bin edges, got {len(edges)}")
            if any(not math.isfinite(e) for e in edges) or \
                    any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
                raise ValueError(f"{name}: bin edges must be finite and increasing, got {edges}")
        return bins
