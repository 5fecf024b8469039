"""The world's effect table: what each action effect costs, saves and changes.

For every effect of ``contracts.effects.EFFECTS`` the table says, for a batch of active
households, its out-of-pocket cost this year, the loss a typical flood of the household's zone
would cause next year with the protection then in place, and any condition beyond tenure and
``duration: once`` under which it is open (elevating an elevated home is not). ``price``
prices an action's effect, a single one or a combination (``elevate+insure``: costs summed,
the loss judged with every part in place, open where every part is); ``execute`` applies the
year's chosen effects from their traits. The model, the situations the decision makers see and
the execution all read this table; no code compares effect names.

A new effect is an ``EffectTraits`` entry in ``contracts/effects.py`` plus a ``WorldEffect``
here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from governed_broker.config.damage import DamageTable
from governed_broker.config.experiment import ExperimentConfig
from governed_broker.contracts.effects import EFFECTS, EffectTraits, effect_names, traits_of
from governed_broker.sim import money
from governed_broker.sim.damage import damages_usd


@dataclass(frozen=True)
class OptionBatch:
    """The active households an effect is priced for (arrays in agent-id order).

    ``elevated`` and ``insured`` are the protection in place for next year's flood: as the home
    stands when pricing costs, and with the action's effects applied (``with_protection``)
    when judging the loss of a typical flood.

    Attributes:
        config: The experiment (insurance, elevation and relocation terms).
        damage_table: The depth-damage table.
        owner: Owner (True) or renter.
        structure_value_usd: Replacement value of the structure (dollars; 0 for renters).
        contents_value_usd: Value of the contents (dollars).
        elevated: Whether the home is elevated.
        typical_depth_m: Depth of a typical flood of the household's zone (metres).
        flood_probability: Annual chance that a flood reaches the home (the zone's, from the
            hazard map).
        insured: Whether a policy of the household's own covers next year's flood.
        certificate: Whether an aid certificate (``sim.instruments.certificates``) covers
            next year's flood; it pays up to the group policy's coverage and ends when the
            household buys a policy of its own.
        subsidy_offered: Whether the elevation grant is offered to the household this year
            (``sim.instruments.grants``).
        buyout_offered: Whether the buyout programme offers to buy the home this year
            (``sim.instruments.buyouts``).
        buyout_price_usd: The price it offers, or would offer an applicant (dollars; 0
            without either).
        buyout_application: Whether the owner may apply to the buyout programme this year
            (``buyout.offer_delay_years``): the action that sells to it is open, and taking it
            is the application.
        preferred: Whether the home is offered the banded premiums of
            ``insurance.preferred_risk`` (in its zones and, with its loss-history rule, still
            eligible; banded premiums under legacy pricing).
        premium_factor: This year's factor on legacy premiums (``insurance.premium_path``).
        premium_cap_usd: The most a policy may cost this year (dollars; a renewal's cap under
            ``insurance.premium_path``, infinite otherwise).
    """

    config: ExperimentConfig
    damage_table: DamageTable
    owner: np.ndarray
    structure_value_usd: np.ndarray
    contents_value_usd: np.ndarray
    elevated: np.ndarray
    typical_depth_m: np.ndarray
    flood_probability: np.ndarray
    insured: np.ndarray | bool = False
    certificate: np.ndarray | bool = False
    subsidy_offered: np.ndarray | bool = True
    buyout_offered: np.ndarray | bool = False
    buyout_price_usd: np.ndarray | float = 0.0
    buyout_application: np.ndarray | bool = False
    preferred: np.ndarray | bool = False
    premium_factor: np.ndarray | float = 1.0
    premium_cap_usd: np.ndarray | float = np.inf

    @cached_property
    def premium_usd(self) -> np.ndarray:
        """Annual premium of a policy for next year on the home as it stands (dollars).

        With risk-based pricing rated on the expected payout of a typical flood of the zone.
        """
        ins = self.config.insurance
        expected = self.expected_payout_usd if ins.pricing == "risk_based" else None
        return money.premium_usd(ins, self.structure_value_usd, self.contents_value_usd,
                                 self.owner, expected, self.preferred, self.premium_factor,
                                 self.premium_cap_usd)

    @cached_property
    def expected_payout_usd(self) -> np.ndarray:
        """Expected annual payout of a policy on the home as it stands (dollars).

        The annual chance of a flood times what the policy would pay for a typical flood of the
        zone.
        """
        d_s, d_c = damages_usd(self.damage_table, np.maximum(0.0, self.depth_here_m),
                               self.structure_value_usd, self.contents_value_usd)
        return self.flood_probability * money.payout_usd(
            self.config.insurance, d_s, d_c, self.owner, np.ones(len(self.owner), dtype=bool))

    @property
    def depth_here_m(self) -> np.ndarray:
        """Typical flood depth at the home as it stands (after any elevation; metres)."""
        return self.typical_depth_m - np.where(self.elevated, self.config.elevation.height_m, 0.0)

    def with_protection(self, traits: EffectTraits) -> OptionBatch:
        """The batch with an effect's protection in place for next year.

        Elevated if it elevates (or the home already is), insured by its own policy exactly when it
        insures (which ends a certificate).
        """
        return dataclasses.replace(self, elevated=self.elevated | traits.elevates,
                                   insured=traits.insures,
                                   certificate=self.certificate & (not traits.insures))

    def loss_usd(self, depth_m: np.ndarray, insured: np.ndarray | bool,
                 certificate: np.ndarray | bool = False) -> np.ndarray:
        """Out-of-pocket loss of a flood of ``depth_m`` (metres; negatives mean dry).

        Insured by an own policy or, up to its coverage, by an aid certificate.
        """
        d_s, d_c = damages_usd(self.damage_table, np.maximum(0.0, depth_m),
                               self.structure_value_usd, self.contents_value_usd)
        own = np.broadcast_to(insured, self.owner.shape)
        by_certificate = np.broadcast_to(certificate, self.owner.shape) & ~own
        pay_s, pay_c = money.payouts_usd(self.config.insurance, d_s, d_c, self.owner,
                                         own | by_certificate)
        if by_certificate.any():
            coverage = self.config.finance.aid.group_policy.coverage_usd
            pay_s, pay_c = money.capped_payouts(coverage, pay_s, pay_c, by_certificate)
        return d_s + d_c - pay_s - pay_c

    def loss_here_usd(self) -> np.ndarray:
        """Out-of-pocket loss of a typical flood with the protection of this batch."""
        return self.loss_usd(self.depth_here_m, self.insured, self.certificate)

    def damage_here_usd(self) -> np.ndarray:
        """Damage (before any payout) of a typical flood at the home as it stands."""
        d_s, d_c = damages_usd(self.damage_table, np.maximum(0.0, self.depth_here_m),
                               self.structure_value_usd, self.contents_value_usd)
        return d_s + d_c

    def buyout_cost_usd(self) -> np.ndarray:
        """Out-of-pocket cost of accepting the buyout (dollars).

        The owner's moving cost plus the home's value today, less the price. The price pays for the
        home, and what it pays above the home's value today (the unrepaired damage it makes good, at
        a pre-flood price) goes towards the move; a price below today's value is a loss, as a
        relocation's unpaid share is (``relocation.buyout_share``).
        """
        own = self.config.relocation.moving_cost_usd.owner + self.structure_value_usd
        return np.maximum(0.0, own - self.buyout_price_usd)

    def zeros(self) -> np.ndarray:
        """A zero per household."""
        return np.zeros(len(self.owner))


def _open_to_all(batch: OptionBatch) -> np.ndarray:
    return np.ones(len(batch.owner), dtype=bool)


def _loss_here(batch: OptionBatch) -> np.ndarray:
    return batch.loss_here_usd()


@dataclass(frozen=True)
class WorldEffect:
    """How the world prices one effect.

    Attributes:
        traits: The effect's shared meaning (``contracts.effects``).
        cost_usd: Out-of-pocket cost this year per household (dollars).
        loss_if_flood_usd: Loss of a typical flood next year (dollars), given a batch with the
            protection of the whole action in place (``OptionBatch.with_protection``).
        open_to: Households it is open to, beyond the action's tenure and ``duration``.
    """

    traits: EffectTraits
    cost_usd: Callable[[OptionBatch], np.ndarray]
    loss_if_flood_usd: Callable[[OptionBatch], np.ndarray] = _loss_here
    open_to: Callable[[OptionBatch], np.ndarray] = _open_to_all


#: The effect table, by effect name (the keys of ``contracts.effects.EFFECTS``).
WORLD_EFFECTS: dict[str, WorldEffect] = {
    "none": WorldEffect(EFFECTS["none"], cost_usd=lambda b: b.zeros()),
    "insure": WorldEffect(EFFECTS["insure"], cost_usd=lambda b: b.premium_usd),
    "elevate": WorldEffect(
        EFFECTS["elevate"],
        cost_usd=lambda b: np.broadcast_to(
            money.elevation_cost_usd(b.config.elevation, b.subsidy_offered), b.owner.shape),
        open_to=lambda b: ~b.elevated),
    "relocate": WorldEffect(
        EFFECTS["relocate"],
        cost_usd=lambda b: money.relocation_cost_usd(
            b.config.relocation, b.structure_value_usd, b.owner),
        loss_if_flood_usd=lambda b: b.zeros()),
    "buyout": WorldEffect(
        EFFECTS["buyout"],
        cost_usd=lambda b: np.broadcast_to(b.buyout_cost_usd(), b.owner.shape),
        loss_if_flood_usd=lambda b: b.zeros(),
        open_to=lambda b: np.broadcast_to(b.buyout_offered | b.buyout_application,
                                          b.owner.shape) & b.owner),
}


@dataclass(frozen=True)
class Priced:
    """An action's effect priced for a batch (arrays per household).

    Attributes:
        cost_usd: Out-of-pocket cost this year (premium included; dollars).
        premium_usd: The part of the cost that is a premium (paid every year it is held).
        loss_usd: Loss of a typical flood next year if taken (dollars).
        open_to: Whether the effect is open to the household.
    """

    cost_usd: np.ndarray
    premium_usd: np.ndarray
    loss_usd: np.ndarray
    open_to: np.ndarray


def price(effect: str, batch: OptionBatch) -> Priced:
    """Price an effect or a combination of effects for a batch.

    Costs are those of the home as it will stand: the policy of ``elevate+insure`` is priced
    on the elevated home (risk-based pricing rates it lower).
    """
    parts = [WORLD_EFFECTS[name] for name in effect_names(effect)]
    traits = traits_of(effect)
    protected = batch.with_protection(traits)
    built = dataclasses.replace(batch, elevated=protected.elevated)
    return Priced(
        cost_usd=np.sum([p.cost_usd(built) for p in parts], axis=0),
        premium_usd=built.premium_usd if traits.insures else batch.zeros(),
        loss_usd=np.min([p.loss_if_flood_usd(protected) for p in parts], axis=0),
        open_to=np.logical_and.reduce([p.open_to(batch) for p in parts]))


@dataclass(frozen=True)
class Executed:
    """What executing one year's effects changed for the households (arrays in order).

    Attributes:
        premium_usd: Premium paid for next year's policy (dollars).
        action_cost_usd: Cost of any other measure (dollars).
        elevated: Elevated this year.
        insured: Holds a policy for next year (un-renewed policies lapse).
        relocated: Left the area this year.
        bought_out: Sold the home to the buyout programme this year (and left).
    """

    premium_usd: np.ndarray
    action_cost_usd: np.ndarray
    elevated: np.ndarray
    insured: np.ndarray
    relocated: np.ndarray
    bought_out: np.ndarray


def execute(effects: Sequence[str], chosen: np.ndarray, cost_usd: np.ndarray,
            premium_usd: np.ndarray) -> Executed:
    """The consequences of the executed effects, from their traits.

    Args:
        effects: Effect of each action (in the domain's action order).
        chosen: Index of the executed action per household.
        cost_usd: Its cost per household (dollars, premium included).
        premium_usd: The premium part of that cost (dollars).
    """
    def mask(trait: Callable[[EffectTraits], bool]) -> np.ndarray:
        return np.array([trait(traits_of(e)) for e in effects], dtype=bool)[chosen]

    leaves = mask(lambda t: t.leaves)
    return Executed(premium_usd=premium_usd, action_cost_usd=cost_usd - premium_usd,
                    elevated=mask(lambda t: t.elevates),
                    insured=mask(lambda t: t.insures) & ~leaves, relocated=leaves,
                    bought_out=mask(lambda t: t.bought_out))
