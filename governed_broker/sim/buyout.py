"""The buyout programme: who is offered a buyout this year, at what price
(``config.world.BuyoutConfig``).

Offers are made after the year's flood and before households decide, so each eligible owner is
told its offer (an action whose effect is ``buyout`` is open to it) and the price is part of
what it weighs. Without a budget every eligible owner gets an offer. With an annual budget the
programme goes through the eligible owners in its allocation order (``first_come``: a random
order drawn from the year's seeded stream; ``by_need``: lowest income first, ties in agent-id
order) and makes each offer whose price still fits what is left: the offers' prices, and hence
what the programme can pay, never exceed the budget, whatever the households choose.
"""

from __future__ import annotations

import numpy as np

from governed_broker.config.world import BuyoutConfig
from governed_broker.sim.allocation import allocation_order


def eligible_for_buyout(config: BuyoutConfig, owner: np.ndarray, floods: np.ndarray,
                        damage_structure_usd: np.ndarray,
                        pre_flood_value_usd: np.ndarray) -> np.ndarray:
    """Owners with repetitive losses or substantial damage this year.

    Args:
        config: The programme.
        owner: Owner (True) or renter per household.
        floods: Floods at the home so far, this year's included.
        damage_structure_usd: This year's structure damage (dollars).
        pre_flood_value_usd: Structure value before any unrepaired damage (dollars).
    """
    eligible = np.asarray(floods) >= config.min_floods
    if config.substantial_damage_share is not None:
        share = config.substantial_damage_share
        eligible |= (np.asarray(damage_structure_usd) > 0) & (
            np.asarray(damage_structure_usd) >= share * np.asarray(pre_flood_value_usd))
    return np.asarray(owner, dtype=bool) & eligible


def buyout_offers(config: BuyoutConfig, eligible: np.ndarray, price_usd: np.ndarray,
                  income_usd: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Households offered a buyout this year (a boolean mask; module documentation).

    Args:
        config: The programme.
        eligible: Owners who qualify (``eligible_for_buyout``).
        price_usd: What the programme would pay each household (dollars).
        income_usd: Annual income (dollars; ``by_need`` ranks by it).
        rng: This year's stream for the programme (``first_come`` draws the order from it).
    """
    eligible = np.asarray(eligible, dtype=bool)
    if config.annual_budget_usd is None:
        return eligible.copy()
    queue = allocation_order(eligible, income_usd, config.allocation, rng)
    offered = np.zeros(len(eligible), dtype=bool)
    left = config.annual_budget_usd
    for i, price in zip(queue.tolist(), np.asarray(price_usd)[queue].tolist(), strict=True):
        if price <= left:
            offered[i] = True
            left -= price
    return offered
