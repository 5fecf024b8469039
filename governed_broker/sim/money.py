"""Insurance premiums and payouts, action costs and affordability (vectorised, dollars).

Formulas (docs/configuration.md):
- coverage = min(value, limit) per structure (owners only) and contents;
- premium, ``insurance.pricing: legacy`` = (rate_s * coverage_s / 1000 + rate_c * coverage_c
  / 1000) * loading * (1 - crs_discount) + fee;
- premium, ``legacy`` in a zone of ``insurance.preferred_risk``: the premium of the smallest
  band covering the policy (``preferred_premium_usd``), plus its surcharge, while the home's
  flood payments so far keep it eligible (``preferred_ineligible``);
- premium, ``risk_based`` = expected annual payout * loading * (1 - crs_discount) + fee, the
  expected payout being
  the zone's annual flood chance times the payout of a typical flood at the home's first-floor
  height (``sim.effects.OptionBatch.premium_usd``);
- payout = payout_share * max(0, min(damage, limit) - deductible), per structure / contents;
- elevation out-of-pocket = cost * (1 - subsidy_share) with a grant offered
  (``sim.instruments.grants``), the full cost without;
- relocation = moving cost (+ owners: (1 - buyout_share) * structure value).

Who can pay for what, and how repairs are financed, is ``sim.finance``. The premium is computed
here only (``premium_usd``): pricing rules (by zone, by elevation) belong in this one place.
"""

from __future__ import annotations

import numpy as np

from governed_broker.config.world import (
    ElevationConfig,
    InsuranceConfig,
    PreferredLossHistory,
    PreferredRiskConfig,
    RelocationConfig,
)


def coverage_usd(
    ins: InsuranceConfig, structure_value_usd: np.ndarray, contents_value_usd: np.ndarray,
    is_owner: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Structure (owners only) and contents coverage, capped by the policy limits."""
    cov_s = np.where(is_owner, np.minimum(structure_value_usd, ins.limit_structure_usd), 0.0)
    cov_c = np.minimum(contents_value_usd, ins.limit_contents_usd)
    return cov_s, cov_c


def premium_usd(
    ins: InsuranceConfig, structure_value_usd: np.ndarray, contents_value_usd: np.ndarray,
    is_owner: np.ndarray, expected_payout_usd: np.ndarray | None = None,
    preferred: np.ndarray | bool = False,
) -> np.ndarray:
    """Annual premium of a policy with full coverage up to the limits (dollars).

    Args:
        ins: The ``insurance`` section (rates, loading, discount, fee, pricing).
        structure_value_usd: Replacement value of the structure (0 for renters).
        contents_value_usd: Value of the contents.
        is_owner: Owner (True) or renter per household.
        expected_payout_usd: The policy's expected annual payout (dollars): the rated amount
            when ``ins.pricing`` is ``risk_based`` (required there, unused otherwise).
        preferred: Households offered the banded premiums of ``ins.preferred_risk`` (in its
            zones and not made ineligible by their loss history; banded premiums under
            legacy pricing).
    """
    if ins.pricing == "risk_based":
        if expected_payout_usd is None:
            raise ValueError("risk-based pricing needs the policy's expected annual payout")
        rated = np.asarray(expected_payout_usd, dtype=float)
    else:
        cov_s, cov_c = coverage_usd(ins, structure_value_usd, contents_value_usd, is_owner)
        rated = (ins.rate_structure_per_1000_usd * cov_s
                 + ins.rate_contents_per_1000_usd * cov_c) / 1000.0
    premium = rated * ins.loading * (1.0 - ins.crs_discount) + ins.fee_usd
    if ins.pricing == "legacy" and ins.preferred_risk is not None and np.any(preferred):
        banded = preferred_premium_usd(ins.preferred_risk, cov_s, cov_c, is_owner)
        premium = np.where(preferred, banded, premium)
    return premium


def preferred_premium_usd(prp: PreferredRiskConfig, coverage_structure_usd: np.ndarray,
                          coverage_contents_usd: np.ndarray, is_owner: np.ndarray
                          ) -> np.ndarray:
    """Banded premium (dollars a year).

    Owners that of the smallest building-and-contents band covering both coverages, renters that of
    the smallest contents-only band covering theirs (the largest band when none does), plus the
    surcharge.
    """
    def band_premium(bands, need_building, need_contents):
        building = np.array([b.building_usd for b in bands])
        contents = np.array([b.contents_usd for b in bands])
        fits = ((building[None, :] >= need_building[:, None])
                & (contents[None, :] >= need_contents[:, None]))
        first = np.where(fits.any(axis=1), fits.argmax(axis=1), len(bands) - 1)
        return np.array([b.premium_usd for b in bands])[first]

    cov_s = np.asarray(coverage_structure_usd, dtype=float)
    cov_c = np.asarray(coverage_contents_usd, dtype=float)
    owners = band_premium(prp.building_contents, cov_s, cov_c)
    renters = band_premium(prp.contents_only, np.zeros_like(cov_c), cov_c)
    return np.where(is_owner, owners, renters) + prp.surcharge_usd


def flood_payments(threshold_usd: float, *payments_usd: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """This year's flood payments per household.

    Each array one kind (claim payout, aid grant, disaster loan): how many were paid at all, and how
    many were at least ``threshold_usd``.
    """
    paid = np.stack([np.asarray(p, dtype=float) for p in payments_usd])
    made = paid > 0.0  # a zero is no payment, whatever the threshold
    return made.sum(axis=0), (made & (paid >= threshold_usd)).sum(axis=0)


def preferred_ineligible(rule: PreferredLossHistory, payments: np.ndarray,
                         large_payments: np.ndarray) -> np.ndarray:
    """Homes whose flood payments so far end their banded premiums (``PreferredLossHistory``)."""
    return (np.asarray(large_payments) >= rule.large_payments) | (
        np.asarray(payments) >= rule.any_payments)


def payouts_usd(
    ins: InsuranceConfig, damage_structure_usd: np.ndarray, damage_contents_usd: np.ndarray,
    is_owner: np.ndarray, insured: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Claim payouts for the structure (owners) and the contents (0 for the uninsured)."""
    capped_s = np.minimum(damage_structure_usd, ins.limit_structure_usd)
    pay_s = np.maximum(0.0, capped_s - ins.deductible_structure_usd)
    pay_s = np.where(is_owner, pay_s, 0.0)
    pay_c = np.maximum(
        0.0, np.minimum(damage_contents_usd, ins.limit_contents_usd) - ins.deductible_contents_usd
    )
    insured = np.asarray(insured, dtype=bool)
    return (np.where(insured, ins.payout_share * pay_s, 0.0),
            np.where(insured, ins.payout_share * pay_c, 0.0))


def capped_payouts(coverage_usd: float, pay_structure_usd: np.ndarray,
                   pay_contents_usd: np.ndarray, capped: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Payouts with those of ``capped`` households scaled down to ``coverage_usd``.

    At most ``coverage_usd`` together, structure and contents in proportion (an aid certificate's
    coverage).
    """
    total = pay_structure_usd + pay_contents_usd
    scale = np.where(np.asarray(capped, dtype=bool) & (total > coverage_usd),
                     coverage_usd / np.where(total > 0.0, total, 1.0), 1.0)
    return pay_structure_usd * scale, pay_contents_usd * scale


def payout_usd(
    ins: InsuranceConfig, damage_structure_usd: np.ndarray, damage_contents_usd: np.ndarray,
    is_owner: np.ndarray, insured: np.ndarray,
) -> np.ndarray:
    """Claim payout for insured households (0 for the uninsured)."""
    pay_s, pay_c = payouts_usd(ins, damage_structure_usd, damage_contents_usd, is_owner, insured)
    return pay_s + pay_c


def elevation_grant_usd(elev: ElevationConfig) -> float:
    """The subsidy programme's grant towards one elevation (dollars)."""
    return elev.cost_usd * elev.subsidy_share


def elevation_cost_usd(elev: ElevationConfig, subsidised: np.ndarray | bool = True) -> np.ndarray:
    """Out-of-pocket elevation cost: the cost less the grant where one is offered (dollars)."""
    return elev.cost_usd - np.where(subsidised, elevation_grant_usd(elev), 0.0)


def relocation_cost_usd(
    rel: RelocationConfig, structure_value_usd: np.ndarray, is_owner: np.ndarray
) -> np.ndarray:
    """Out-of-pocket relocation cost: moving cost plus, for owners, the unpaid share of value."""
    owner_cost = rel.moving_cost_usd.owner + (1.0 - rel.buyout_share) * structure_value_usd
    return np.where(is_owner, owner_cost, rel.moving_cost_usd.renter)
