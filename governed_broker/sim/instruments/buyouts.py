"""The buyout programme.

Who is offered a buyout this year, at what price (``config.world.BuyoutConfig``).

Offers are made after the year's flood and before households decide, so each eligible owner is
told its offer (an action whose effect is ``buyout`` is open to it) and the price is part of
what it weighs. Without a budget every eligible owner gets an offer. With an annual budget the
programme goes through the eligible owners in its allocation order (``first_come``: a random
order drawn from the year's seeded stream; ``by_need``: lowest income first, ties in agent-id
order) and makes each offer whose price still fits what is left: the offers' prices, and hence
what the programme can pay, never exceed the budget, whatever the households choose.

``Buyouts`` is the instrument; its output columns are ``buyout_offered`` and ``buyout_usd``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from governed_broker.config.world import BuyoutConfig
from governed_broker.seeding import child_rng
from governed_broker.sim.allocation import allocation_order
from governed_broker.sim.effects import Executed
from governed_broker.sim.instruments.base import Access, Instrument
from governed_broker.sim.reporters import YearView


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


class Buyouts(Instrument):
    """The buyout programme (module documentation)."""

    name = "buyouts"

    def candidates(self, access: Access) -> tuple[np.ndarray, np.ndarray]:
        """Who the programme's rules make eligible this year, and at what price.

        The active owners with repetitive or substantial losses to whom an action that sells to the
        programme is open, and the price it would offer each; none without a programme.
        """
        world = self.world
        hh, programme, c = world.hh, world.config.buyout, world.current
        idx = c.idx
        if programme is None:
            return np.zeros(len(idx), dtype=bool), np.zeros(len(idx))
        may_sell = access.any_open(lambda t: t.bought_out)
        pre_flood = hh.structure_value_usd[idx] + hh.unrepaired_usd[idx]
        eligible = may_sell & eligible_for_buyout(
            programme, hh.is_owner[idx], hh.floods_experienced[idx],
            c.damage_structure_usd, pre_flood)
        return eligible, programme.price_share * pre_flood

    def offer(self, access: Access) -> dict[str, Any]:
        """``buyout_offered`` and ``buyout_price_usd``.

        The eligible households the budget and the allocation reach, and the price (0 without an
        offer).
        """
        world, programme = self.world, self.world.config.buyout
        eligible, price_usd = self.candidates(access)
        if programme is not None:
            rng = child_rng(world.seed, "buyout", world.year)
            eligible = buyout_offers(programme, eligible, price_usd,
                                     world.hh.income_usd[world.current.idx], rng)
            price_usd = np.where(eligible, price_usd, 0.0)
        return {"buyout_offered": eligible, "buyout_price_usd": price_usd}

    def facts(self) -> list[dict[str, Any]]:
        """``buyout_offer_usd``, only where an offer is made.

        The situations of the others stay as they were.
        """
        offers = self.world.current.buyout_price_usd.tolist()
        return [{"buyout_offer_usd": o} if o else {} for o in offers]

    def execute(self, done: Executed, executed: np.ndarray, insured: np.ndarray) -> np.ndarray:
        """The price is paid for the homes sold to the programme."""
        c = self.world.current
        c.buyout_usd = np.where(done.bought_out, c.buyout_price_usd, 0.0)
        return insured

    def report(self, view: YearView) -> dict[str, Any]:
        """``buyout_offered`` and ``buyout_usd``."""
        return {"buyout_offered": view.state.buyout_offered, "buyout_usd": view.state.buyout_usd}
