"""Premium pricing as the insurer offers it (``config.world.InsuranceConfig``).

The premium of a policy is computed in one place, ``sim.money.premium_usd``, for the batch the
effect table prices (``sim.effects.OptionBatch``): ``legacy`` flat rates, or ``risk_based``,
the expected annual payout at the home's first-floor height in the manner of FEMA's Risk
Rating 2.0. This instrument decides who is offered the banded premiums of
``insurance.preferred_risk`` (the NFIP Preferred Risk Policy under legacy pricing): the homes
of its zones that its loss-history rule has not made ineligible. Its state per household is
that history: ``flood_payments`` (claims, aid grants and disaster loans for floods, of any
amount) and ``large_flood_payments`` (those of at least the rule's threshold), counted only
where the rule is set; and ``policy_premium_usd``, what the policy in force cost when it was
bought (the household's or its lender's; 0 without one).

With ``insurance.premium_path`` the instrument also offers the year's factor on legacy
premiums (``premium_factor``) and caps the premium of a policy renewed: a household holding a
policy this year is quoted at most ``1 + max_increase_share`` times what that policy cost
(``premium_cap_usd``); a household without one (a new policy, or one after a lapse) pays the
full premium, and a lower premium is charged at once. So a change to risk-based pricing
(Risk Rating 2.0) reaches the full premium of a policy kept in force step by step.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from governed_broker.sim import money
from governed_broker.sim.effects import Executed
from governed_broker.sim.finance import Repairs
from governed_broker.sim.instruments.base import Access, Instrument, World, in_zones


class PremiumPricing(Instrument):
    """The banded premiums' eligibility and the loss history it rests on (module docs)."""

    name = "premium_pricing"

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.arrays = self.zeros(flood_payments=np.int64, large_flood_payments=np.int64,
                                 policy_premium_usd=float)

    def after_repairs(self, repairs: Repairs) -> None:
        """Add this year's claim, aid grant and disaster loan to each home's flood payments.

        Counted only where the banded premiums have a loss-history rule.
        """
        prp = self.world.config.insurance.preferred_risk
        if prp is None or prp.loss_history is None:
            return
        c = self.world.current
        paid, large = money.flood_payments(prp.loss_history.large_payment_usd, c.payout_usd,
                                           repairs.aid_usd, repairs.loan_usd)
        self.arrays["flood_payments"][c.idx] += paid
        self.arrays["large_flood_payments"][c.idx] += large

    def offer(self, access: Access) -> dict[str, Any]:
        """``preferred``, ``premium_factor`` and ``premium_cap_usd`` (module documentation).

        ``preferred``: the households offered the banded premiums, in a zone of
        ``insurance.preferred_risk`` and, with its ``loss_history`` rule, still eligible.
        """
        world = self.world
        ins, idx = world.config.insurance, world.current.idx
        path = ins.premium_path
        factor = 1.0 if path is None else path.legacy_factor(world.year)
        cap = np.full(len(idx), np.inf)
        if path is not None and path.max_increase_share is not None:
            last = self.arrays["policy_premium_usd"][idx]
            renewed = world.hh.insured[idx] & (last > 0)
            cap[renewed] = last[renewed] * (1.0 + path.max_increase_share)
        prp = ins.preferred_risk
        if prp is None:
            preferred = np.zeros(len(idx), dtype=bool)
        else:
            preferred = in_zones(world, prp.zones)
            if prp.loss_history is not None:
                preferred &= ~money.preferred_ineligible(
                    prp.loss_history, self.arrays["flood_payments"][idx],
                    self.arrays["large_flood_payments"][idx])
        return {"preferred": preferred, "premium_factor": np.full(len(idx), factor),
                "premium_cap_usd": cap}

    def execute(self, done: Executed, executed: np.ndarray, insured: np.ndarray) -> np.ndarray:
        """Record what each policy bought for next year cost (0 without one)."""
        self.arrays["policy_premium_usd"][self.world.current.idx] = done.premium_usd
        return insured
