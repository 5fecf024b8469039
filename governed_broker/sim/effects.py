"""The world's effect table: what each action effect costs, saves and changes.

For every effect of ``contracts.effects.EFFECTS`` the table says, for a batch of active
households, its out-of-pocket cost this year, the loss a typical flood of the household's zone
would cause next year if it is taken, and any condition beyond tenure and ``duration: once``
under which it is open (elevating an elevated home is not). ``apply_effects`` executes the
year's chosen effects on the household arrays from their traits. The model, the situations
the decision makers see and the execution all read this table; no code compares effect names.

A new effect is an ``EffectTraits`` entry in ``contracts/effects.py`` plus a ``WorldEffect``
here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from governed_broker.config.damage import DamageTable
from governed_broker.config.experiment import ExperimentConfig
from governed_broker.contracts.effects import EFFECTS, EffectTraits
from governed_broker.sim import money
from governed_broker.sim.damage import damages_usd


@dataclass(frozen=True)
class OptionBatch:
    """The active households an effect is priced for (arrays in agent-id order).

    Attributes:
        config: The experiment (insurance, elevation and relocation terms).
        damage_table: The depth-damage table.
        owner: Owner (True) or renter.
        structure_value_usd: Replacement value of the structure (dollars; 0 for renters).
        contents_value_usd: Value of the contents (dollars).
        elevated: Whether the home is elevated now.
        typical_depth_m: Depth of a typical flood of the household's zone (metres).
    """

    config: ExperimentConfig
    damage_table: DamageTable
    owner: np.ndarray
    structure_value_usd: np.ndarray
    contents_value_usd: np.ndarray
    elevated: np.ndarray
    typical_depth_m: np.ndarray

    @cached_property
    def premium_usd(self) -> np.ndarray:
        """Annual premium of a policy for next year (dollars)."""
        return money.premium_usd(self.config.insurance, self.structure_value_usd,
                                 self.contents_value_usd, self.owner)

    @property
    def depth_here_m(self) -> np.ndarray:
        """Typical flood depth at the home as it stands (after any elevation; metres)."""
        return self.typical_depth_m - np.where(self.elevated, self.config.elevation.height_m, 0.0)

    def loss_usd(self, depth_m: np.ndarray, insured: bool) -> np.ndarray:
        """Out-of-pocket loss of a flood of ``depth_m`` (metres; negatives mean dry)."""
        d_s, d_c = damages_usd(self.damage_table, np.maximum(0.0, depth_m),
                               self.structure_value_usd, self.contents_value_usd)
        pay = money.payout_usd(self.config.insurance, d_s, d_c, self.owner,
                               np.full(len(self.owner), insured))
        return d_s + d_c - pay

    def zeros(self) -> np.ndarray:
        """A zero per household."""
        return np.zeros(len(self.owner))


def _open_to_all(batch: OptionBatch) -> np.ndarray:
    return np.ones(len(batch.owner), dtype=bool)


@dataclass(frozen=True)
class WorldEffect:
    """How the world prices one effect.

    Attributes:
        traits: The effect's shared meaning (``contracts.effects``).
        cost_usd: Out-of-pocket cost this year per household (dollars).
        loss_if_flood_usd: Loss of a typical flood next year if the effect is taken (dollars).
        open_to: Households it is open to, beyond the action's tenure and ``duration``.
    """

    traits: EffectTraits
    cost_usd: Callable[[OptionBatch], np.ndarray]
    loss_if_flood_usd: Callable[[OptionBatch], np.ndarray]
    open_to: Callable[[OptionBatch], np.ndarray] = _open_to_all


#: The effect table, by effect name (the keys of ``contracts.effects.EFFECTS``).
WORLD_EFFECTS: dict[str, WorldEffect] = {
    "none": WorldEffect(
        EFFECTS["none"],
        cost_usd=lambda b: b.zeros(),
        loss_if_flood_usd=lambda b: b.loss_usd(b.depth_here_m, insured=False)),
    "insure": WorldEffect(
        EFFECTS["insure"],
        cost_usd=lambda b: b.premium_usd,
        loss_if_flood_usd=lambda b: b.loss_usd(b.depth_here_m, insured=True)),
    "elevate": WorldEffect(
        EFFECTS["elevate"],
        cost_usd=lambda b: np.full(len(b.owner), money.elevation_cost_usd(b.config.elevation)),
        loss_if_flood_usd=lambda b: b.loss_usd(
            b.typical_depth_m - b.config.elevation.height_m, insured=False),
        open_to=lambda b: ~b.elevated),
    "relocate": WorldEffect(
        EFFECTS["relocate"],
        cost_usd=lambda b: money.relocation_cost_usd(
            b.config.relocation, b.structure_value_usd, b.owner),
        loss_if_flood_usd=lambda b: b.zeros()),
}


@dataclass(frozen=True)
class Executed:
    """What executing one year's effects changed for the households (arrays in order).

    Attributes:
        premium_usd: Premium paid for next year's policy (dollars).
        action_cost_usd: Cost of any other measure (dollars).
        elevated: Elevated this year.
        insured: Holds a policy for next year (un-renewed policies lapse).
        relocated: Left the area this year.
    """

    premium_usd: np.ndarray
    action_cost_usd: np.ndarray
    elevated: np.ndarray
    insured: np.ndarray
    relocated: np.ndarray


def execute(effects: list[str], chosen: np.ndarray, cost_usd: np.ndarray) -> Executed:
    """The consequences of the executed effects, from their traits.

    Args:
        effects: Effect name of each action (in the domain's action order).
        chosen: Index of the executed action per household.
        cost_usd: Its cost per household (dollars).
    """
    def mask(trait: Callable[[EffectTraits], bool]) -> np.ndarray:
        return np.array([trait(EFFECTS[e]) for e in effects], dtype=bool)[chosen]

    insures, leaves = mask(lambda t: t.insures), mask(lambda t: t.leaves)
    return Executed(premium_usd=np.where(insures, cost_usd, 0.0),
                    action_cost_usd=np.where(insures, 0.0, cost_usd),
                    elevated=mask(lambda t: t.elevates), insured=insures & ~leaves,
                    relocated=leaves)
