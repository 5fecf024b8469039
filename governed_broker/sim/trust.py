"""Yearly trust dynamics (``trust:`` section; domain_defaults section 5).

Trust in insurance moves with the household's own experience: insured and flooded (paid out),
insured and dry, uninsured and flooded, uninsured and dry. Trust in neighbours moves with how
many households in the whole population took a lasting measure (elevated or relocated): above
``high_action_rate`` it rises for everyone; below ``low_action_rate`` it falls for households
that were flooded. Both stay within [0, 1].
"""

from __future__ import annotations

import numpy as np

from governed_broker.config.world import TrustConfig
from governed_broker.sim.households import HouseholdArrays
from governed_broker.sim.year_state import YearState


def update_trust(t: TrustConfig, hh: HouseholdArrays, year: YearState) -> None:
    """Apply one year's trust changes to the active households of ``year`` (in place)."""
    idx, ins, fl = year.idx, year.insured_before, year.flooded
    delta_i = np.select(
        [ins & fl, ins & ~fl, ~ins & fl],
        [t.insurance_insured_flooded, t.insurance_insured_safe, t.insurance_uninsured_flooded],
        t.insurance_uninsured_safe,
    )
    hh.trust_insurance[idx] = np.clip(hh.trust_insurance[idx] + delta_i, 0.0, 1.0)
    rate = float(np.mean((hh.elevated & ~hh.relocated) | hh.relocated))
    if rate > t.high_action_rate:
        delta_n = np.full(len(idx), t.neighbours_high_action)
    else:
        low = rate < t.low_action_rate
        delta_n = np.where(fl & low, t.neighbours_flooded_low_action, t.neighbours_otherwise)
    hh.trust_neighbours[idx] = np.clip(hh.trust_neighbours[idx] + delta_n, 0.0, 1.0)
