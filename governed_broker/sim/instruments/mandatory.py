"""The mandatory purchase requirement.

Who must hold flood insurance, and what that does to the price of each choice
(``config.world.MandatoryPurchaseConfig``).

A household whose lender enforces the requirement is insured every year it stays: when its own
choice does not insure, the lender renews the policy and charges the premium. The choice is
priced that way (``effect`` with ``insure`` added: cost and premium with the policy, the loss of
a typical flood insured), so the decision makers see what each choice really costs; where the
household cannot pay the premium on top of its choice, the choice stays as it is and the
policy lapses. ``MandatoryPurchase`` is the instrument: its state per household is
``insurance_required`` (drawn once, at the start of the run), its output columns
``insurance_required`` and ``lender_placed``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from governed_broker.config.world import MandatoryPurchaseConfig
from governed_broker.contracts.effects import COMBINE, NO_EFFECT, effect_names, traits_of
from governed_broker.seeding import child_rng
from governed_broker.sim.effects import Executed, Priced, price
from governed_broker.sim.finance import affordable
from governed_broker.sim.instruments.base import Instrument, Pricing, World
from governed_broker.sim.reporters import YearView

#: The effect the lender adds to a choice that does not insure.
INSURE = "insure"


def draw_required(config: MandatoryPurchaseConfig | None, zone: np.ndarray, is_owner: np.ndarray,
                  seed: int) -> np.ndarray:
    """Households whose lender enforces the requirement (drawn once from the run's seed).

    Two uniform draws per household, in agent-id order (whatever its zone or tenure, so the
    draws do not depend on the population's make-up): a mortgage that requires insurance when
    the first is below ``mortgage_share``, enforced when the second is below
    ``compliance_share``.

    Args:
        config: The requirement (None: nobody is required to insure).
        zone: Zone name per household.
        is_owner: Owner (True) or renter per household.
        seed: The experiment seed.
    """
    n = len(zone)
    if config is None:
        return np.zeros(n, dtype=bool)
    draws = child_rng(seed, "mandatory_purchase").random((n, 2))
    in_zones = np.isin(np.asarray(zone, dtype=object), config.zones)
    return (in_zones & np.asarray(is_owner, dtype=bool) & (draws[:, 0] < config.mortgage_share)
            & (draws[:, 1] < config.compliance_share))


def lender_adds_insurance(effect: str) -> bool:
    """Whether the lender would add a policy to a choice of this effect.

    It neither insures nor leaves.
    """
    traits = traits_of(effect)
    return not traits.insures and not traits.leaves


def with_insurance(effect: str) -> str:
    """The effect with the lender's policy added.

    ``none`` -> ``insure``, ``elevate`` -> ``elevate+insure``.
    """
    parts = [p for p in effect_names(effect) if p != NO_EFFECT]
    return COMBINE.join([*parts, INSURE])


class MandatoryPurchase(Instrument):
    """The lender's requirement to hold flood insurance (module documentation)."""

    name = "mandatory_purchase"

    def __init__(self, world: World) -> None:
        super().__init__(world)
        hh = world.hh
        zone = np.asarray(world.zones, dtype=object)[hh.zone_index]
        self.arrays = {"insurance_required": draw_required(
            world.config.insurance.mandatory_purchase, zone, hh.is_owner, world.seed)}

    def amend(self, pricing: Pricing) -> None:
        """Price each choice that neither insures nor leaves with the lender's policy added.

        For the required households (without an aid certificate) that can pay for it.
        """
        world, batch = self.world, pricing.batch
        hh, c, idx = world.hh, world.current, world.current.idx
        required = self.arrays["insurance_required"][idx] & ~np.asarray(batch.certificate)
        if not required.any():
            return
        for effect in filter(lender_adds_insurance, list(pricing.priced)):
            insured = price(with_insurance(effect), batch)
            placed = required & affordable(world.config.finance, insured.cost_usd,
                                           hh.savings_usd[idx], hh.income_usd[idx],
                                           c.payment_due_usd)
            pricing.lender_placed[effect] = placed
            pricing.priced[effect] = _where(placed, insured, pricing.priced[effect])

    def facts(self) -> list[dict[str, Any]]:
        """``insurance_required`` of each active household."""
        required = self.arrays["insurance_required"][self.world.current.idx].tolist()
        return [{"insurance_required": r} for r in required]

    def execute(self, done: Executed, executed: np.ndarray, insured: np.ndarray) -> np.ndarray:
        """The lender renews the policy where the executed choice was priced with it."""
        c = self.world.current
        c.lender_placed = c.options.table("lender_placed")[np.arange(len(executed)), executed]
        return insured | c.lender_placed

    def report(self, view: YearView) -> dict[str, Any]:
        """``insurance_required`` and ``lender_placed``."""
        return {"insurance_required": self.arrays["insurance_required"][view.idx].copy(),
                "lender_placed": view.state.lender_placed}


def _where(mask: np.ndarray, chosen: Priced, other: Priced) -> Priced:
    """``chosen``'s prices where ``mask`` holds, ``other``'s elsewhere (open as ``other``)."""
    return Priced(cost_usd=np.where(mask, chosen.cost_usd, other.cost_usd),
                  premium_usd=np.where(mask, chosen.premium_usd, other.premium_usd),
                  loss_usd=np.where(mask, chosen.loss_usd, other.loss_usd),
                  open_to=other.open_to)
