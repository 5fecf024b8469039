"""Flood insurance that comes with disaster aid (``config.world.GroupPolicyConfig``).

Modelled on FEMA's Group Flood Insurance Policy (44 CFR 61.17; FloodSmart "Understanding
Group Flood Insurance Policies"): a household of the Special Flood Hazard Area that receives
disaster aid for a flood while uninsured, and has no earlier requirement to keep insurance, is
given a certificate paid from the aid; it covers the floods of the next ``term_years`` years up
to ``coverage_usd`` each, and ends early when the household buys a policy of its own. Every aid
recipient of those zones must keep flood insurance to receive aid again (``keep_insured``).

``AidCertificates`` is the instrument. Its state per household is three arrays:
``group_policy_years`` (years of floods the certificate still covers after this year's),
``aid_requires_insurance``, and ``group_insured`` (the policy in force for this year's flood is
the certificate, whose payout is capped, rather than a policy of the household's own). Its
output column is ``group_certificate``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from governed_broker.config.world import GroupPolicyConfig
from governed_broker.contracts.decision import AidCertificate
from governed_broker.sim.effects import Executed
from governed_broker.sim.finance import Repairs
from governed_broker.sim.instruments.base import Access, Instrument, World, in_zones
from governed_broker.sim.money import capped_payouts
from governed_broker.sim.reporters import YearView


def aid_eligible(config: GroupPolicyConfig | None, requires_insurance: np.ndarray,
                 insured_before: np.ndarray) -> np.ndarray:
    """Households that may receive aid for this year's flood.

    All, except (with ``keep_insured``) earlier recipients of the zones that were uninsured at the
    flood.
    """
    if config is None or not config.keep_insured:
        return np.ones(len(insured_before), dtype=bool)
    return ~(np.asarray(requires_insurance, dtype=bool) & ~np.asarray(insured_before, dtype=bool))


def new_certificates(config: GroupPolicyConfig | None, in_zones: np.ndarray,
                     aid_usd: np.ndarray, insured_before: np.ndarray,
                     requires_insurance: np.ndarray) -> np.ndarray:
    """Households given a certificate this year.

    Aid recipients of the zones that were uninsured at the flood and had no earlier requirement to
    keep insurance.
    """
    if config is None:
        return np.zeros(len(aid_usd), dtype=bool)
    return (in_zones & (np.asarray(aid_usd) > 0.0) & ~np.asarray(insured_before, dtype=bool)
            & ~np.asarray(requires_insurance, dtype=bool))


class AidCertificates(Instrument):
    """The group policy that comes with disaster aid (module documentation)."""

    name = "aid_certificates"

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.arrays = self.zeros(group_policy_years=np.int64, group_insured=bool,
                                 aid_requires_insurance=bool)

    @property
    def _group(self) -> GroupPolicyConfig | None:
        return self.world.config.finance.aid.group_policy

    def payouts(self, pay_structure_usd: np.ndarray, pay_contents_usd: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
        """A certificate pays at most its coverage."""
        group = self._group
        if group is None:
            return pay_structure_usd, pay_contents_usd
        insured = self.arrays["group_insured"][self.world.current.idx]
        return capped_payouts(group.coverage_usd, pay_structure_usd, pay_contents_usd, insured)

    def aid_eligible(self) -> np.ndarray:
        """``aid_eligible``: earlier recipients uninsured at this flood get no aid."""
        c = self.world.current
        return aid_eligible(self._group, self.arrays["aid_requires_insurance"][c.idx],
                            c.insured_before)

    def after_repairs(self, repairs: Repairs) -> None:
        """New certificates for this year's aid, and the requirement to keep insurance."""
        c, idx, group = self.world.current, self.world.current.idx, self._group
        if group is None:
            c.certificate_premium_usd = np.zeros(len(idx))
            return
        years, required = self.arrays["group_policy_years"], self.arrays["aid_requires_insurance"]
        zoned = in_zones(self.world, group.zones)
        given = new_certificates(group, zoned, repairs.aid_usd, c.insured_before, required[idx])
        years[idx] = np.where(given, group.term_years, years[idx])
        c.certificate_premium_usd = np.where(given, group.premium_usd, 0.0)
        required[idx] |= zoned & (repairs.aid_usd > 0.0)

    def offer(self, access: Access) -> dict[str, Any]:
        """``certificate``: a certificate covers next year's flood."""
        return {"certificate": self.arrays["group_policy_years"][self.world.current.idx] > 0}

    def facts(self) -> list[dict[str, Any]] | None:
        """``group_policy`` and ``aid_requires_insurance``, each only where it applies.

        ``group_policy``: the years of floods the certificate still covers and its coverage. Only
        where they apply, so that the situations of other households stay as they were.
        """
        group, idx = self._group, self.world.current.idx
        if group is None:
            return None
        years = self.arrays["group_policy_years"][idx].tolist()
        keep = (self.arrays["aid_requires_insurance"][idx] & group.keep_insured).tolist()
        return [{**({"group_policy": AidCertificate(n, group.coverage_usd)} if n else {}),
                 **({"aid_requires_insurance": True} if k else {})}
                for n, k in zip(years, keep, strict=True)]

    def execute(self, done: Executed, executed: np.ndarray, insured: np.ndarray) -> np.ndarray:
        """A certificate insures a household without a policy of its own that stays.

        And a year of its term is used; an own policy ends it.
        """
        idx, years = self.world.current.idx, self.arrays["group_policy_years"]
        certified = (years[idx] > 0) & ~insured & ~done.relocated
        self.arrays["group_insured"][idx] = certified
        years[idx] = np.where(certified, years[idx] - 1, 0)
        return insured | certified

    def report(self, view: YearView) -> dict[str, Any]:
        """``group_certificate``."""
        return {"group_certificate": view.state.certificate}

    def premiums_earned_usd(self) -> float:
        """The aid programme's premiums for next year's cover by certificates.

        Each certificate's premium spread evenly over its term, so that a year's claims are set
        against the premiums that bought that year's cover (the programme pays the whole term at the
        grant; the insurer earns it year by year).
        """
        group = self._group
        if group is None:
            return 0.0
        hh, idx = self.world.hh, self.world.current.idx
        # a household that left (forced sales too) takes no cover into next year
        certified = int((self.arrays["group_insured"][idx] & ~hh.relocated[idx]).sum())
        return certified * group.premium_usd / group.term_years
