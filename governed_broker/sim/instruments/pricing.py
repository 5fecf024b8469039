"""Premium pricing as the insurer offers it (``config.world.InsuranceConfig``).

The premium of a policy is computed in one place, ``sim.money.premium_usd``, for the batch the
effect table prices (``sim.effects.OptionBatch``): ``legacy`` flat rates, or ``risk_based``,
the expected annual payout at the home's first-floor height in the manner of FEMA's Risk
Rating 2.0. This instrument decides who is offered the banded premiums of
``insurance.preferred_risk`` (the NFIP Preferred Risk Policy under legacy pricing): the homes
of its zones that its loss-history rule has not made ineligible. Its state per household is
that history: ``flood_payments`` (claims, aid grants and disaster loans for floods, of any
amount) and ``large_flood_payments`` (those of at least the rule's threshold), counted only
where the rule is set.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from governed_broker.sim import money
from governed_broker.sim.finance import Repairs
from governed_broker.sim.instruments.base import Access, Instrument, World, in_zones


class PremiumPricing(Instrument):
    """The banded premiums' eligibility and the loss history it rests on (module docs)."""

    name = "premium_pricing"

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.arrays = self.zeros(flood_payments=np.int64, large_flood_payments=np.int64)

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
        """``preferred``: the households offered the banded premiums.

        In a zone of ``insurance.preferred_risk`` and, with its ``loss_history`` rule, still
        eligible.
        """
        prp, idx = self.world.config.insurance.preferred_risk, self.world.current.idx
        if prp is None:
            return {"preferred": np.zeros(len(idx), dtype=bool)}
        offered = in_zones(self.world, prp.zones)
        if prp.loss_history is not None:
            offered &= ~money.preferred_ineligible(
                prp.loss_history, self.arrays["flood_payments"][idx],
                self.arrays["large_flood_payments"][idx])
        return {"preferred": offered}
