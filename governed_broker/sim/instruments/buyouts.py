"""The buyout programme.

Who is offered a buyout, at what price, for how long (``config.world.BuyoutConfig``).

Offers follow floods, as NJ Blue Acres followed Sandy: an owner whose home this year's flood
left with substantial damage (structure damage of at least ``substantial_damage_share`` of its
pre-flood value, the NFIP's 50 %, 44 CFR 59.1) or a repetitive loss (``min_floods`` floods at
the home, this year's the latest) is eligible in the year of that flood.

Applications. Without ``offer_delay_years`` (0) every eligible owner is taken to apply, and the
programme makes its offers after the flood and before households decide, so each one is told
its offer (an action whose effect is ``buyout`` is open to it) and the price is part of what it
weighs. With ``offer_delay_years`` = n, the owners apply, as Blue Acres' did: in the flood's year
an action whose effect is ``buyout`` is open to every eligible owner (``buyout_application``),
priced at what the programme would pay; choosing it is the application, executed as the
default action (the owner stays and does nothing else that year; its row shows the proposed
buyout action and the executed default). n years later (appraisal and funding) the programme
makes its offer to the applicant at that price, and the owner decides again: an offer is
accepted or declined, as Blue Acres' offers were (``published_findings.csv`` nj_blueacres_*:
offers accepted / offers made). No household prompt states an application yet, so such a
programme is for the baseline decision maker (``config.experiment`` refuses LLM households).

Budget. Without one every offer due is made. With an annual budget the programme goes through
the year's due offers (the eligible owners, or the applicants whose appraisal ends this year or
who wait for a budget) in its allocation order (``first_come``: a random order drawn from the
year's seeded stream; ``by_need``: lowest income first, ties in agent-id order) and makes each
offer whose price still fits what is left of the year's budget: the budget commits the prices
of the offers it makes, whatever the households choose. An applicant the budget does not reach
waits for next year's. An offer stays open for ``offer_years`` years at its price (the year it
is made included): the owner may accept it in any of them; acceptance is the decision maker's,
never the programme's.

``Buyouts`` is the instrument. Its state per household: the open offer
(``buyout_offer_years``, years it stays open, this one included, and
``buyout_offer_price_usd``) and a waiting application (``buyout_applied_year``, the year of the
application, 0 without one, at the same price); its output columns are ``buyout_offered`` (an
offer is open this year) and ``buyout_usd``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from governed_broker.config.world import BuyoutConfig
from governed_broker.contracts.effects import traits_of
from governed_broker.seeding import child_rng
from governed_broker.sim.allocation import allocation_order
from governed_broker.sim.effects import Executed
from governed_broker.sim.instruments.base import Access, Instrument, World
from governed_broker.sim.reporters import YearView


def eligible_for_buyout(config: BuyoutConfig, owner: np.ndarray, flooded: np.ndarray,
                        floods: np.ndarray, damage_structure_usd: np.ndarray,
                        pre_flood_value_usd: np.ndarray) -> np.ndarray:
    """Owners whose home this year's flood left with a repetitive or substantial loss.

    Args:
        config: The programme.
        owner: Owner (True) or renter per household.
        flooded: The home flooded this year.
        floods: Floods at the home so far, this year's included.
        damage_structure_usd: This year's structure damage (dollars).
        pre_flood_value_usd: Structure value before any unrepaired damage (dollars).
    """
    eligible = np.asarray(floods) >= config.min_floods
    if config.substantial_damage_share is not None:
        share = config.substantial_damage_share
        eligible |= (np.asarray(damage_structure_usd) > 0) & (
            np.asarray(damage_structure_usd) >= share * np.asarray(pre_flood_value_usd))
    return np.asarray(owner, dtype=bool) & np.asarray(flooded, dtype=bool) & eligible


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

    def __init__(self, world: World) -> None:
        super().__init__(world)
        self.arrays = self.zeros(buyout_offer_years=np.int64, buyout_offer_price_usd=float,
                                 buyout_applied_year=np.int64)

    def candidates(self, access: Access) -> tuple[np.ndarray, np.ndarray]:
        """Who this year's flood makes eligible for a new offer or application, at what price.

        The active owners whose home this year's flood left with a repetitive or substantial
        loss, to whom an action that sells to the programme is open and who hold no open offer
        or waiting application, and the price it would offer each; none without a programme.
        """
        world = self.world
        hh, programme, c = world.hh, world.config.buyout, world.current
        idx = c.idx
        if programme is None:
            return np.zeros(len(idx), dtype=bool), np.zeros(len(idx))
        may_sell = access.any_open(lambda t: t.bought_out)
        pre_flood = hh.structure_value_usd[idx] + hh.unrepaired_usd[idx]
        free = (self.arrays["buyout_offer_years"][idx] == 0) & (
            self.arrays["buyout_applied_year"][idx] == 0)
        eligible = may_sell & free & eligible_for_buyout(
            programme, hh.is_owner[idx], c.flooded, hh.floods_experienced[idx],
            c.damage_structure_usd, pre_flood)
        return eligible, programme.price_share * pre_flood

    def offer(self, access: Access) -> dict[str, Any]:
        """``buyout_offered``, ``buyout_application`` and ``buyout_price_usd`` this year.

        The offers still open from earlier years at their price and this year's new ones (to
        the eligible owners, or to the applicants whose appraisal is over) that the budget and
        the allocation reach; with ``offer_delay_years``, the eligible owners who may apply and
        the price they are told (module documentation). None while there is no programme.
        """
        world, programme = self.world, self.world.config.buyout
        idx = world.current.idx
        years, price = self.arrays["buyout_offer_years"], self.arrays["buyout_offer_price_usd"]
        applied = self.arrays["buyout_applied_year"]
        none = np.zeros(len(idx), dtype=bool)
        if programme is None:
            years[idx], applied[idx] = 0, 0
            return {"buyout_offered": none, "buyout_application": none,
                    "buyout_price_usd": np.zeros(len(idx))}
        eligible, price_usd = self.candidates(access)
        rng = child_rng(world.seed, "buyout", world.year)
        if programme.offer_delay_years:
            applying, told = eligible, np.where(eligible, price_usd, price[idx])
            due = (applied[idx] > 0) & (world.year - applied[idx] >= programme.offer_delay_years)
        else:
            applying, told, due = none, price_usd, eligible
        new = buyout_offers(programme, due, told, world.hh.income_usd[idx], rng)
        years[idx[new]] = programme.offer_years
        price[idx[new]] = told[new]
        applied[idx[new]] = 0
        open_now = years[idx] > 0
        return {"buyout_offered": open_now, "buyout_application": applying,
                "buyout_price_usd": np.where(open_now, price[idx],
                                             np.where(applying, told, 0.0))}

    def facts(self) -> list[dict[str, Any]]:
        """``buyout_offer_usd``, only where an offer is open.

        The situations of the others stay as they were. An owner who may apply is told the
        price through the buyout action's cost only: no household prompt states an application
        yet (``config.experiment``: a programme with ``offer_delay_years`` is for the baseline).
        """
        c = self.world.current
        offers = np.where(c.buyout_offered, c.buyout_price_usd, 0.0).tolist()
        return [{"buyout_offer_usd": o} if o else {} for o in offers]

    def admit(self, executed: np.ndarray) -> np.ndarray:
        """An owner who chose to sell while it may apply has applied: it stays this year.

        Its application waits ``offer_delay_years`` for the offer at the price it was told; the
        action executed this year is the default.
        """
        world = self.world
        c, actions = world.current, list(world.domain.actions)
        applying = np.asarray(c.buyout_application, dtype=bool)
        if not applying.any():
            return executed
        sells = np.array([traits_of(world.domain.actions[a].effect).bought_out
                          for a in actions])
        applied = applying & sells[executed]
        where = c.idx[applied]
        self.arrays["buyout_applied_year"][where] = world.year
        self.arrays["buyout_offer_price_usd"][where] = c.buyout_price_usd[applied]
        return np.where(applied, actions.index(world.domain.default_action), executed)

    def execute(self, done: Executed, executed: np.ndarray, insured: np.ndarray) -> np.ndarray:
        """The price is paid for the homes sold; an open offer has a year less to run."""
        c, idx = self.world.current, self.world.current.idx
        c.buyout_usd = np.where(done.bought_out, c.buyout_price_usd, 0.0)
        years = self.arrays["buyout_offer_years"]
        years[idx] = np.where(done.relocated, 0, np.maximum(years[idx] - 1, 0))
        self.arrays["buyout_applied_year"][idx[done.relocated]] = 0
        return insured

    def report(self, view: YearView) -> dict[str, Any]:
        """``buyout_offered`` and ``buyout_usd``."""
        return {"buyout_offered": view.state.buyout_offered, "buyout_usd": view.state.buyout_usd}
