"""What this year's flood does to the active households.

Damage after elevation, insurance payouts, and the financing of the rest (``sim.finance``: aid,
savings, a loan, left unrepaired), with every instrument's part in them (``Instrument.payouts``,
``aid_eligible``, ``after_repairs``).

``flood_losses`` is the damage and the payouts alone; the flood model's impacts phase and the
validity vignettes (``sim.world_of_one``) both work them out with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from governed_broker.seeding import child_rng
from governed_broker.sim import finance, money
from governed_broker.sim.damage import damages_usd
from governed_broker.sim.instruments.base import Instrument, World


@dataclass(frozen=True)
class FloodLosses:
    """A flood's damage and insurance payouts per active household (dollars).

    Attributes:
        effective_depth_m: Depth above the floor, after elevation (metres).
        damage_structure_usd: Structure damage.
        damage_contents_usd: Contents damage.
        payout_structure_usd: Insurance payout for the structure.
        payout_contents_usd: Insurance payout for the contents.
    """

    effective_depth_m: np.ndarray
    damage_structure_usd: np.ndarray
    damage_contents_usd: np.ndarray
    payout_structure_usd: np.ndarray
    payout_contents_usd: np.ndarray


def flood_losses(world: World, instruments: Sequence[Instrument], depth_m: np.ndarray,
                 damage_factor: float = 1.0) -> FloodLosses:
    """The damage and payouts of a flood ``depth_m`` deep at each active home.

    Depths are in metres, before elevation; the elevation and cover are those in force this year
    (``current.elevated_before``, ``insured_before``).

    Args:
        world: The world.
        instruments: Its instruments (an aid certificate caps the payout).
        depth_m: Depth at each active home.
        damage_factor: Multiplies the table's damage, capped at the home's value (a validity
            vignette's; 1 in a run).
    """
    c, hh, idx, config = world.current, world.hh, world.current.idx, world.config
    effective = np.maximum(0.0, depth_m - np.where(c.elevated_before,
                                                   config.elevation.height_m, 0.0))
    structure, contents = hh.structure_value_usd[idx], hh.contents_value_usd[idx]
    d_s, d_c = damages_usd(world.damage_table, effective, structure, contents)
    if damage_factor != 1.0:
        d_s = np.minimum(d_s * damage_factor, structure)
        d_c = np.minimum(d_c * damage_factor, contents)
    pay_s, pay_c = money.payouts_usd(config.insurance, d_s, d_c, hh.is_owner[idx],
                                     c.insured_before)
    for instrument in instruments:
        pay_s, pay_c = instrument.payouts(pay_s, pay_c)
    return FloodLosses(effective, d_s, d_c, pay_s, pay_c)


def apply_impacts(world: World, instruments: Sequence[Instrument]) -> None:
    """This year's flood (``current.depth_m``).

    Damage, payouts, the repairs' financing and the flood experience, written to ``world.current``
    and the household arrays.
    """
    c, hh, idx, config = world.current, world.hh, world.current.idx, world.config
    losses = flood_losses(world, instruments, c.depth_m)
    c.effective_depth_m = losses.effective_depth_m
    c.damage_structure_usd = losses.damage_structure_usd
    c.damage_contents_usd = losses.damage_contents_usd
    pay_s, pay_c = losses.payout_structure_usd, losses.payout_contents_usd
    c.payout_usd = pay_s + pay_c
    c.out_of_pocket_usd = c.damage_usd - c.payout_usd
    aid_draw = child_rng(world.seed, "finance", world.year, "aid").random(len(hh.is_owner))[idx]
    eligible = np.ones(len(idx), dtype=bool)
    for instrument in instruments:
        allowed = instrument.aid_eligible()
        if allowed is not None:
            eligible &= allowed
    c.repairs = repairs = finance.finance_repairs(
        config.finance, c.damage_structure_usd - pay_s, c.damage_contents_usd - pay_c,
        hh.savings_usd[idx], hh.income_usd[idx], c.payment_due_usd, aid_draw, eligible)
    for instrument in instruments:
        instrument.after_repairs(repairs)
    hh.savings_usd[idx] -= repairs.from_savings_usd
    hh.structure_value_usd[idx] -= repairs.unrepaired_structure_usd
    hh.contents_value_usd[idx] -= repairs.unrepaired_contents_usd
    hh.unrepaired_usd[idx] += repairs.unrepaired_structure_usd
    hh.years_since_flood[idx] = np.where(c.flooded, 0.0, hh.years_since_flood[idx] + 1.0)
    hh.floods_experienced[idx] += c.flooded
