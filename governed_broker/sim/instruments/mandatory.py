"""The mandatory purchase requirement.

Who must hold flood insurance, and what that does to the price of each choice
(``config.world.MandatoryPurchaseConfig``).

A household whose lender enforces the requirement is insured every year it stays: when its own
choice does not insure, the lender renews the policy and charges the premium. The choice is
priced that way (``effect`` with ``insure`` added: cost and premium with the policy, the loss of
a typical flood insured), so the decision makers see what each choice really costs; where the
household cannot pay the premium on top of its choice, the choice stays as it is and the
policy lapses. ``MandatoryPurchase`` is the instrument: its state per household is
``insurance_required`` (from two draws made once: the mortgage, and the enforcement against
the year's compliance), its output columns ``insurance_required`` and ``lender_placed``. The
households required in the first year start the run insured (``start``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from governed_broker.config.world import MandatoryPurchaseConfig
from governed_broker.contracts.effects import COMBINE, NO_EFFECT, effect_names, traits_of
from governed_broker.seeding import child_rng
from governed_broker.sim.effects import Executed, Priced, price
from governed_broker.sim.finance import affordable
from governed_broker.sim.households import HouseholdArrays
from governed_broker.sim.instruments.base import Instrument, Pricing, World
from governed_broker.sim.reporters import YearView

#: The effect the lender adds to a choice that does not insure.
INSURE = "insure"


def requirement_draws(config: MandatoryPurchaseConfig | None, zone: np.ndarray,
                      is_owner: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Who holds a mortgage that requires insurance, and each household's enforcement draw.

    Two uniform draws per household, in agent-id order (whatever its zone or tenure, so the
    draws do not depend on the population's make-up): a mortgage that requires insurance when
    the first is below ``mortgage_share`` (an owner of the zones), enforced in a year while the
    second is below the year's compliance (``MandatoryPurchaseConfig.compliance_in``).

    Args:
        config: The requirement (None: nobody is required to insure).
        zone: Zone name per household.
        is_owner: Owner (True) or renter per household.
        seed: The experiment seed.

    Returns:
        The mortgaged households and the second draw of every household.
    """
    n = len(zone)
    if config is None:
        return np.zeros(n, dtype=bool), np.ones(n)
    draws = child_rng(seed, "mandatory_purchase").random((n, 2))
    in_zones = np.isin(np.asarray(zone, dtype=object), config.zones)
    mortgaged = in_zones & np.asarray(is_owner, dtype=bool) & (draws[:, 0] < config.mortgage_share)
    return mortgaged, draws[:, 1]


def enforced_in(config: MandatoryPurchaseConfig | None, mortgaged: np.ndarray,
                enforcement: np.ndarray, year: int) -> np.ndarray:
    """The mortgaged households whose lender enforces the requirement in ``year`` (1-based)."""
    if config is None:
        return np.zeros(len(mortgaged), dtype=bool)
    return mortgaged & (enforcement < config.compliance_in(year))


def draw_required(config: MandatoryPurchaseConfig | None, zone: np.ndarray, is_owner: np.ndarray,
                  seed: int, year: int = 1) -> np.ndarray:
    """Households whose lender enforces the requirement in ``year`` (``requirement_draws``)."""
    return enforced_in(config, *requirement_draws(config, zone, is_owner, seed), year)


def zone_tenure_groups(hh: HouseholdArrays) -> np.ndarray:
    """A group label per household: its zone and tenure (the start keeps each group's policies)."""
    return hh.zone_index * 2 + hh.is_owner.astype(np.int64)


def holders_by_score(insured: np.ndarray, required: np.ndarray, groups: np.ndarray,
                     scores: np.ndarray) -> np.ndarray:
    """Who holds the start's policies when the highest scores keep them.

    Within each group (zone and tenure) the count of policies stays; the required households
    hold theirs, and the rest go to the other households in descending score (ties in index
    order).

    Args:
        insured: Who holds a policy at the start (the count per group is kept).
        required: Whose lender enforces the requirement (insured whatever the score).
        groups: A group label per household.
        scores: A score per household (``RanksInitialPolicyholders``).
    """
    out = np.asarray(required, dtype=bool).copy()
    for group in np.unique(groups):
        members = np.flatnonzero(groups == group)
        room = int(insured[members].sum()) - int(out[members].sum())
        free = members[~out[members]]
        ranked = free[np.argsort(-np.asarray(scores)[free], kind="stable")]
        out[ranked[:max(room, 0)]] = True
    return out


def keep_initial_share(insured: np.ndarray, required: np.ndarray, groups: np.ndarray,
                       rng: np.random.Generator) -> np.ndarray:
    """Who is insured at the start once the required households are.

    Within each group (zone and tenure) the count of insured households stays what it was
    where the required households fit in it: the required are insured, and of the others' policies
    as many are kept (chosen at random) as the count leaves room for; a group whose required
    households outnumber its insured ones (a small population's draw) has only those.

    Args:
        insured: Who holds a policy at the start as the population says.
        required: Whose lender enforces the requirement in the first year.
        groups: A group label per household (households of a group are compared).
        rng: The stream the kept policies are chosen from.
    """
    out = np.asarray(insured, dtype=bool) | required
    for group in np.unique(groups[required]):
        members = groups == group
        room = max(0, int((insured & members).sum()) - int((required & members).sum()))
        others = np.flatnonzero(insured & members & ~required)
        dropped = rng.permutation(others)[room:]
        out[dropped] = False
    return out


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
        self._mortgaged, self._enforcement = requirement_draws(
            world.config.insurance.mandatory_purchase, zone, hh.is_owner, world.seed)
        self.arrays = {"insurance_required": self._required_in(1)}

    def _required_in(self, year: int) -> np.ndarray:
        """The households whose lender enforces the requirement in ``year`` (this year's terms)."""
        return enforced_in(self.world.config.insurance.mandatory_purchase, self._mortgaged,
                           self._enforcement, year)

    def start(self) -> None:
        """Required households start the run insured, within each group's initial insured count.

        The groups are zone and tenure (``keep_initial_share``); so the population's initial
        insured share is the share insured at the start, required households included.
        """
        hh, required = self.world.hh, self.arrays["insurance_required"]
        if not required.any():
            return
        groups = zone_tenure_groups(hh)
        hh.insured[...] = keep_initial_share(hh.insured, required, groups,
                                             child_rng(self.world.seed, "mandatory_purchase",
                                                       "start"))

    def begin_year(self) -> None:
        """This year's enforced requirement (the compliance of the year)."""
        self.arrays["insurance_required"][...] = self._required_in(self.world.year)

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
