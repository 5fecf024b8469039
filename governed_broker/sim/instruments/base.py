"""Policy instruments: the programmes of the world as components it composes.

An instrument (premium pricing, the mandatory purchase requirement, aid certificates, elevation
grants, buyouts) is one programme of the world with its own per-household state, its hooks
into the yearly phases and its output columns, as a Concordia entity is made of components.
The world (``sim.model.FloodModel``, Mesa's model) keeps the yearly schedule and the household
arrays and, at each phase, calls every instrument's hook in the order of
``config.world.INSTRUMENTS``; every instrument reads the year's settings afresh from
``world.config`` (a policy change or an institution may start, change or end its programme) and
does nothing while its section is absent.

The hooks, by phase (each a no-op here):

* set-up: ``__init__`` makes ``arrays``, the instrument's state per household (index = agent
  id - 1), saved and restored with the world's checkpoints under these names;
* impacts: ``payouts`` may change the insurance payouts of this year's flood, ``aid_eligible``
  may withhold disaster aid, ``after_repairs`` sees how the damage was financed;
* perception (``sim.quote``): ``offer`` states what the programme offers each household this
  year as fields of ``sim.effects.OptionBatch`` (the effect table prices with them);
  ``amend`` may change the priced choices (a lender adds a policy); ``facts`` are what the
  household is told of the programme (``HouseholdSituation`` facts);
* execution: ``execute`` applies the executed choices' consequences for the programme and
  says who holds insurance for next year's flood;
* outputs: ``report`` gives the programme's columns of ``agents_yearly.csv``
  (``contracts.columns``).

Hooks read the world through ``World``: the flood model and the one-household world of a
validity vignette (``sim.world_of_one``) both satisfy it, so a vignette is offered, priced and
told exactly what a household of the run would be.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

import numpy as np

from governed_broker.config.agent_types import AgentTypesConfig
from governed_broker.config.damage import DamageTable
from governed_broker.config.experiment import ExperimentConfig
from governed_broker.config.registry import load_registered
from governed_broker.config.world import INSTRUMENTS
from governed_broker.contracts.effects import EffectTraits, traits_of
from governed_broker.sim.effects import Executed, OptionBatch, Priced
from governed_broker.sim.finance import Repairs
from governed_broker.sim.households import HouseholdArrays
from governed_broker.sim.reporters import YearView
from governed_broker.sim.year_state import YearState


class HazardMap(Protocol):
    """What households are told of the hazard, per zone index (``sim.hazard.Hazard``)."""

    probability: np.ndarray
    typical_depth_m: np.ndarray


class World(Protocol):
    """What instruments, the quote and the perception read of the world.

    Attributes:
        config: This year's settings.
        domain: The action domain.
        damage_table: The depth-damage table.
        hazard: The hazard map households are told.
        hh: Every household's state (index = agent id - 1).
        current: This year's state of the active households (``current.idx``).
        zones: Zone names by zone index.
        seed: The experiment seed (programmes draw from its child streams).
        year: This year (1-based).
    """

    config: ExperimentConfig
    domain: AgentTypesConfig
    damage_table: DamageTable
    hazard: HazardMap
    hh: HouseholdArrays
    current: YearState
    zones: list[str]
    seed: int
    year: int


class Access:
    """Which active households each action is open to by its tenure and, for an action taken once.

    Because they have not taken it yet (before any condition of its effect).
    """

    def __init__(self, world: World) -> None:
        self.world = world
        self._open: dict[str, np.ndarray] = {}

    def open_to(self, action: str) -> np.ndarray:
        """The active households ``action`` is open to by tenure and ``duration``."""
        if action not in self._open:
            hh, idx = self.world.hh, self.world.current.idx
            owner = hh.is_owner[idx]
            spec = self.world.domain.actions[action]
            allowed = np.zeros(len(idx), dtype=bool)
            for tenure in spec.tenure:
                allowed |= owner if tenure == "owner" else ~owner
            if action in hh.taken_once:
                allowed &= ~hh.taken_once[action][idx]
            self._open[action] = allowed
        return self._open[action]

    def any_open(self, trait: Callable[[EffectTraits], bool]) -> np.ndarray:
        """The active households some action whose effect has ``trait`` is open to."""
        out = np.zeros(len(self.world.current.idx), dtype=bool)
        for action, spec in self.world.domain.actions.items():
            if trait(traits_of(spec.effect)):
                out |= self.open_to(action)
        return out


@dataclass
class Pricing:
    """The effects of the domain priced for the active households, as instruments may amend them.

    ``Instrument.amend``.

    Attributes:
        batch: The households and the offers they were priced with.
        priced: Each effect's prices (``sim.effects.price``), by effect name.
        lender_placed: Per effect, the households whose lender adds a policy to it.
    """

    batch: OptionBatch
    priced: dict[str, Priced]
    lender_placed: dict[str, np.ndarray] = field(default_factory=dict)


def in_zones(world: World, zones: list[str]) -> np.ndarray:
    """Which active households live in one of ``zones``."""
    idx = world.current.idx
    return np.isin(np.asarray(world.zones, dtype=object)[world.hh.zone_index[idx]], zones)


class Instrument:
    """A policy instrument of the world, bound to one world (module documentation).

    Args:
        world: The world it belongs to; its households exist already.
    """

    #: Its name in ``config.world.INSTRUMENTS``.
    name: ClassVar[str] = ""

    def __init__(self, world: World) -> None:
        self.world = world
        #: Its state per household by name (index = agent id - 1; numbers and booleans).
        self.arrays: dict[str, np.ndarray] = {}

    def zeros(self, **dtypes: type) -> dict[str, np.ndarray]:
        """A zero array per household for each name (``name=dtype``), for ``arrays``."""
        n = len(self.world.hh.is_owner)
        return {name: np.zeros(n, dtype=dtype) for name, dtype in dtypes.items()}

    def load(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Overwrite ``arrays`` in place (a checkpoint, a vignette's programme state)."""
        for name, target in self.arrays.items():
            if name in arrays:
                target[...] = arrays[name]

    # -- impacts ----------------------------------------------------------------------------
    def payouts(self, pay_structure_usd: np.ndarray, pay_contents_usd: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
        """This year's insurance payouts (structure, contents; dollars) after the programme."""
        return pay_structure_usd, pay_contents_usd

    def aid_eligible(self) -> np.ndarray | None:
        """Which active households may receive disaster aid this year (None: no condition)."""
        return None

    def after_repairs(self, repairs: Repairs) -> None:
        """How this year's damage was financed (``sim.finance.Repairs``)."""

    # -- perception -------------------------------------------------------------------------
    def offer(self, access: Access) -> dict[str, Any]:
        """What the programme offers each active household this year.

        Fields of ``OptionBatch`` by name.
        """
        return {}

    def amend(self, pricing: Pricing) -> None:
        """Change the priced effects in place (after every instrument's ``offer``)."""

    def facts(self) -> list[dict[str, Any]] | None:
        """What each active household is told of the programme.

        Situation facts by name; None: nothing.
        """
        return None

    # -- execution --------------------------------------------------------------------------
    def execute(self, done: Executed, executed: np.ndarray, insured: np.ndarray) -> np.ndarray:
        """Apply the programme's consequences of the executed choices.

        Args:
            done: What the executed effects changed (``sim.effects.execute``).
            executed: The index (in the domain's order) of each active household's executed
                action.
            insured: Who holds a policy for next year's flood so far.

        Returns:
            Who holds a policy for next year's flood after the programme.
        """
        return insured

    # -- outputs ----------------------------------------------------------------------------
    def report(self, view: YearView) -> dict[str, Any]:
        """The programme's columns of ``agents_yearly.csv`` (one value per active household)."""
        return {}


def make_instruments(world: World) -> list[Instrument]:
    """Every registered instrument, bound to ``world``, in registry order.

    Raises:
        ConfigError: An entry of ``INSTRUMENTS`` cannot be imported.
    """
    return [load_registered(INSTRUMENTS, name, kind="instrument", setting="instrument",
                            registry_name="INSTRUMENTS")(world) for name in INSTRUMENTS]
