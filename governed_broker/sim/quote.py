"""The one options quote.

What every action costs, saves and is open to, for the households of a world this year.

Every instrument states its offers (``Instrument.offer``: the grant, the buyout's price, an aid
certificate in force, the banded premiums), the effect table prices each effect with them
(``sim.effects``), every instrument may amend the prices (``Instrument.amend``: the lender adds
a policy), and each action gets its terms (``sim.year_state.ActionTerms``): cost, premium, the
loss of a typical flood after it, whether it is open and affordable, whether the lender would
place a policy with it. The flood model quotes its active households with it each year; the
validity vignettes are quoted with it in a world of one household (``sim.world_of_one``), so
they see exactly the prices, offers and requirements a household of the run would.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from governed_broker.contracts.effects import traits_of
from governed_broker.sim.effects import OptionBatch, price
from governed_broker.sim.finance import affordable, spending_room_usd
from governed_broker.sim.instruments.base import Access, Instrument, Pricing, World
from governed_broker.sim.year_state import ActionTerms, Quote, YearState

#: What an instrument may offer (``Instrument.offer``): the fields of ``OptionBatch`` that
#: ``YearState`` also has, where the year's offers are kept.
OFFERS = frozenset({f.name for f in dataclasses.fields(YearState)}
                   & {f.name for f in dataclasses.fields(OptionBatch)})


def _batch(world: World, **offers: Any) -> OptionBatch:
    """The active households of ``world`` as the effect table prices them."""
    hh, idx = world.hh, world.current.idx
    zone = hh.zone_index[idx]
    return OptionBatch(world.config, world.damage_table, hh.is_owner[idx],
                       hh.structure_value_usd[idx], hh.contents_value_usd[idx],
                       hh.elevated[idx], world.hazard.typical_depth_m[zone],
                       world.hazard.probability[zone], **offers)


def quote(world: World, instruments: Sequence[Instrument],
          price_factor: Mapping[str, float] | None = None,
          stated_offers: Mapping[str, Any] | None = None) -> Quote:
    """Every action's terms for the active households of ``world`` this year.

    The instruments' offers are also written to ``world.current`` (``YearState`` fields of
    the same names), where execution and the outputs read them.

    Args:
        world: The world (``current.idx`` are the households quoted).
        instruments: Its instruments, in registry order.
        price_factor: Per effect name, a factor on the cost and premium of its actions (a
            validity vignette's ``cost_factor``; none in a run).
        stated_offers: Offers stated rather than made, by name (a vignette that says what a
            programme with a budget offered it; none in a run).
    """
    access = Access(world)
    offers: dict[str, Any] = {}
    for instrument in instruments:
        offers.update(instrument.offer(access))
    offers.update(stated_offers or {})
    unknown = sorted(set(offers) - OFFERS)
    if unknown:
        raise ValueError(f"offers {unknown} are not fields of both OptionBatch and YearState "
                         f"(offers: {', '.join(sorted(OFFERS))})")
    for name, value in offers.items():
        setattr(world.current, name, value)
    batch = _batch(world, **offers)
    effects = {spec.effect for spec in world.domain.actions.values()}
    pricing = Pricing(batch, {e: price(e, batch) for e in effects})
    for instrument in instruments:
        instrument.amend(pricing)
    hh, c, fin = world.hh, world.current, world.config.finance
    savings, income = hh.savings_usd[c.idx], hh.income_usd[c.idx]
    none = np.zeros(len(c.idx), dtype=bool)
    actions: dict[str, ActionTerms] = {}
    for action, spec in world.domain.actions.items():
        priced = pricing.priced[spec.effect]
        cost, premium = priced.cost_usd, priced.premium_usd
        factor = (price_factor or {}).get(spec.effect, 1.0)
        if factor != 1.0:
            cost, premium = cost * factor, premium * factor
        actions[action] = ActionTerms(
            cost_usd=cost, premium_usd=premium, loss_usd=priced.loss_usd,
            allowed=access.open_to(action) & priced.open_to,
            affordable=affordable(fin, cost, savings, income, c.payment_due_usd),
            lender_placed=pricing.lender_placed.get(spec.effect, none))
    could_protect = np.zeros(len(c.idx), dtype=bool)
    for action, spec in world.domain.actions.items():
        if traits_of(spec.effect).protective:
            could_protect |= actions[action].allowed & actions[action].affordable
    return Quote(actions, typical_damage_usd=batch.damage_here_usd(),
                 spending_room_usd=spending_room_usd(fin, savings, income, c.payment_due_usd),
                 could_protect=could_protect)


def expected_payouts_usd(world: World) -> np.ndarray:
    """Expected annual payout of a policy on each active home as it stands.

    Dollars; the hazard map's annual chance times the payout of a typical flood of the zone.
    """
    return _batch(world).expected_payout_usd
