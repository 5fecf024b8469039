"""Flood insurance that comes with disaster aid (``config.world.GroupPolicyConfig``).

Modelled on FEMA's Group Flood Insurance Policy (44 CFR 61.17; FloodSmart "Understanding
Group Flood Insurance Policies"): a household of the Special Flood Hazard Area that receives
disaster aid for a flood while uninsured, and has no earlier requirement to keep insurance, is
given a certificate paid from the aid; it covers the floods of the next ``term_years`` years up
to ``coverage_usd`` each, and ends early when the household buys a policy of its own. Every aid
recipient of those zones must keep flood insurance to receive aid again (``keep_insured``).

The household state is three arrays of ``HouseholdArrays``: ``group_policy_years`` (years of
floods the certificate still covers after this year's), ``aid_requires_insurance``, and
``group_insured`` (the policy in force for this year's flood is the certificate, whose payout
is capped, rather than a policy of the household's own).
"""

from __future__ import annotations

import numpy as np

from governed_broker.config.world import GroupPolicyConfig


def aid_eligible(config: GroupPolicyConfig | None, requires_insurance: np.ndarray,
                 insured_before: np.ndarray) -> np.ndarray:
    """Households that may receive aid for this year's flood: all, except (with
    ``keep_insured``) earlier recipients of the zones that were uninsured at the flood."""
    if config is None or not config.keep_insured:
        return np.ones(len(insured_before), dtype=bool)
    return ~(np.asarray(requires_insurance, dtype=bool) & ~np.asarray(insured_before, dtype=bool))


def new_certificates(config: GroupPolicyConfig | None, in_zones: np.ndarray,
                     aid_usd: np.ndarray, insured_before: np.ndarray,
                     requires_insurance: np.ndarray) -> np.ndarray:
    """Households given a certificate this year: aid recipients of the zones that were
    uninsured at the flood and had no earlier requirement to keep insurance."""
    if config is None:
        return np.zeros(len(aid_usd), dtype=bool)
    return (in_zones & (np.asarray(aid_usd) > 0.0) & ~np.asarray(insured_before, dtype=bool)
            & ~np.asarray(requires_insurance, dtype=bool))


def capped_payouts(coverage_usd: float, pay_structure_usd: np.ndarray,
                   pay_contents_usd: np.ndarray, capped: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Payouts with those of ``capped`` households scaled down to at most ``coverage_usd``
    together (structure and contents in proportion)."""
    total = pay_structure_usd + pay_contents_usd
    scale = np.where(np.asarray(capped, dtype=bool) & (total > coverage_usd),
                     coverage_usd / np.where(total > 0.0, total, 1.0), 1.0)
    return pay_structure_usd * scale, pay_contents_usd * scale
