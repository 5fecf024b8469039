"""One household in the world of an experiment: a household described rather than simulated.

A validity vignette states a household and its year (``validity.situations``); ``WorldOfOne``
puts it into the world of the experiment being validated (its hazard map, damage table,
insurance terms, policy instruments and action domain) and builds its situation with the code
the flood model runs: the flood losses of ``sim.impacts``, the instruments' offers and the
quote of ``sim.quote``, the perception of ``sim.perception``. So a vignette is priced, offered
and told exactly what a household of the run in its place would be.

What the world would know of the household and the description does not say is that of a
household new to the run: no loans or unrepaired damage, not required to insure by a lender,
no aid certificate or flood payments (``Household.programme_state`` may say otherwise), and the
programmes make their offers to it alone (a budget keeps an offer from it only if the offer
does not fit the whole budget; ``programme_state`` may state the offers instead).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from governed_broker.config.resolved import ResolvedExperiment
from governed_broker.contracts.decision import HouseholdSituation
from governed_broker.sim.finance import Repairs
from governed_broker.sim.households import HouseholdArrays
from governed_broker.sim.impacts import flood_losses
from governed_broker.sim.instruments.base import HazardMap, make_instruments
from governed_broker.sim.perception import allowed_actions, situations
from governed_broker.sim.population import Population
from governed_broker.sim.quote import OFFERS, quote
from governed_broker.sim.year_state import YearState


@dataclass(frozen=True)
class Household:
    """A household and its year, as a vignette describes them (units in the names).

    Attributes:
        year: The year it decides in.
        depth_m: This year's flood depth at the home (metres, before elevation; 0: none).
        neighbour_shares: Shares of neighbours insured, elevated and relocated last year.
        tenure: ``owner`` or ``renter``.
        flood_zone: A zone of the hazard map.
        income_usd: Annual income.
        savings_usd: Savings now (after this year's flood).
        structure_value_usd: Replacement value of the structure (0 for a renter).
        contents_value_usd: Replacement value of the contents.
        elevated: The home is elevated.
        insured: A policy is in force this year.
        trust_insurance: Trust in insurance, 0..1.
        trust_neighbours: Trust in neighbours, 0..1.
        years_since_flood: Years since the last flood at the home (None: never).
        floods_experienced: Floods at the home so far, this year's included.
        programme_state: By name, the household's state in the policy instruments
            (``Instrument.arrays``: ``insurance_required``, ``group_policy_years``...) and
            offers stated rather than made (``sim.quote.OFFERS``).
        damage_factor: Multiplies the damage of the depth-damage table (capped at the home's
            value).
        price_factor: Per effect name, a factor on its actions' cost and premium.
    """

    year: int
    depth_m: float
    neighbour_shares: Mapping[str, float]
    tenure: str
    flood_zone: str
    income_usd: float
    savings_usd: float
    structure_value_usd: float
    contents_value_usd: float
    elevated: bool
    insured: bool
    trust_insurance: float
    trust_neighbours: float
    years_since_flood: int | None
    floods_experienced: int
    programme_state: Mapping[str, float | bool] = field(default_factory=dict)
    damage_factor: float = 1.0
    price_factor: Mapping[str, float] = field(default_factory=dict)


class WorldOfOne:
    """The world of an experiment with one household in it, in one year (module docs).

    Args:
        experiment: The experiment (its settings, domain and damage table).
        hazard: Its hazard map for the household's zone alone (zone index 0).
        household: The household and its year.

    Raises:
        ValueError: ``programme_state`` names nothing an instrument or an offer has, or gives
            a state a value its kind cannot hold.
    """

    def __init__(self, experiment: ResolvedExperiment, hazard: HazardMap,
                 household: Household) -> None:
        self.config, self.domain = experiment.config, experiment.domain
        self.damage_table, self.hazard, self.household = experiment.damage_table, hazard, household
        self.zones, self.seed, self.year = ([household.flood_zone], self.config.seed,
                                            household.year)
        one = lambda value, dtype=float: np.array([value], dtype=dtype)  # noqa: E731
        owner = household.tenure == "owner"
        self.hh = HouseholdArrays.from_population(Population(
            is_owner=one(owner, bool), zone=one(household.flood_zone, object),
            income_usd=one(household.income_usd), savings_usd=one(household.savings_usd),
            structure_value_usd=one(household.structure_value_usd if owner else 0.0),
            contents_value_usd=one(household.contents_value_usd),
            elevated=one(household.elevated, bool), insured=one(household.insured, bool),
            trust_insurance=one(household.trust_insurance),
            trust_neighbours=one(household.trust_neighbours)), self.zones, self.domain)
        ysf = household.years_since_flood
        self.hh.years_since_flood[0] = np.nan if ysf is None else ysf
        self.hh.floods_experienced[0] = household.floods_experienced
        self.current = YearState(np.array([0]), savings_before_usd=self.hh.savings_usd.copy(),
                                 elevated_before=self.hh.elevated.copy(),
                                 insured_before=self.hh.insured.copy(),
                                 debt_before_usd=np.zeros(1), payment_due_usd=np.zeros(1))
        self.current.repairs = Repairs(*(np.zeros(1) for _ in dataclasses.fields(Repairs)))
        self.instruments = make_instruments(self)
        self.stated_offers = self._programme_state(household.programme_state)

    def _programme_state(self, state: Mapping[str, float | bool]) -> dict[str, Any]:
        """Start every instrument's state as a household new to the run, apply ``state``.

        And return the offers it states.
        """
        arrays = {name: a for i in self.instruments for name, a in i.arrays.items()}
        for target in arrays.values():
            target[...] = 0
        unknown = sorted(set(state) - set(arrays) - set(OFFERS))
        if unknown:
            raise ValueError(f"programme_state: unknown name(s) {unknown}; known: "
                             f"{', '.join(sorted(arrays) + sorted(OFFERS))}")
        for name, value in state.items():
            if name in arrays:
                kind = arrays[name].dtype.kind
                if (kind == "b") != isinstance(value, bool) or (
                        kind == "i" and float(value) != int(value)):
                    raise ValueError(f"programme_state.{name}: {value!r} is not a "
                                     f"{'true/false' if kind == 'b' else 'whole number'}")
                arrays[name][0] = value
        return {name: np.array([value]) for name, value in state.items() if name in OFFERS}

    def losses(self, depth_m: float) -> tuple[float, float]:
        """Damage and insurance payout (dollars) of a flood ``depth_m`` deep.

        The depth is in metres, before elevation; the cover and elevation are those in force this
        year.
        """
        lost = flood_losses(self, self.instruments, np.array([depth_m]),
                            self.household.damage_factor)
        return (float(lost.damage_structure_usd[0] + lost.damage_contents_usd[0]),
                float(lost.payout_structure_usd[0] + lost.payout_contents_usd[0]))

    def situation(self, *,
                  recall: Callable[[tuple[str, ...]], dict[str, Any] | None] = lambda _: None,
                  order: tuple[str, ...] | None = None) -> HouseholdSituation:
        """The household's situation this year, after this year's flood.

        Args:
            recall: What the household's memory retrieves, given the actions open to it
                (None: no memory).
            order: Lists the open actions in this order instead of the domain's.
        """
        c, household = self.current, self.household
        c.depth_m = np.array([float(household.depth_m)])
        c.flooded = c.depth_m > 0
        lost = flood_losses(self, self.instruments, c.depth_m, household.damage_factor)
        c.damage_structure_usd, c.damage_contents_usd = (lost.damage_structure_usd,
                                                         lost.damage_contents_usd)
        c.payout_usd = lost.payout_structure_usd + lost.payout_contents_usd
        c.neighbour_shares = {k: np.array([float(v)])
                              for k, v in household.neighbour_shares.items()}
        c.trust_insurance = self.hh.trust_insurance.copy()
        c.trust_neighbours = self.hh.trust_neighbours.copy()
        c.options = quote(self, self.instruments, household.price_factor, self.stated_offers)
        allowed = allowed_actions(c.options)[0]
        memory = recall(allowed)
        if order is not None:  # only the listing changes: what is remembered and known stays
            allowed = tuple(a for a in order if a in allowed)
        return situations(self, self.instruments, [allowed],
                          None if memory is None else [memory])[0]
