"""``YearState``: what one simulated year produced, filled phase by phase; ``Quote``.

The terms of every action this year.

The phases of ``FloodModel.step`` hand their results on through one ``YearState`` (instead of
a dict of string keys): the world memory reads the impacts from it, the reporters the whole
year. Arrays run over the households active at the start of the year, in agent-id order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from governed_broker.contracts.decision import Decision
from governed_broker.sim.finance import Repairs


def _none() -> np.ndarray:
    return np.zeros(0)


@dataclass(frozen=True)
class ActionTerms:
    """One action as the world quotes it to the active households (arrays in agent-id order).

    Attributes:
        cost_usd: Out-of-pocket cost this year (premium included; dollars).
        premium_usd: The part of the cost that is a premium (dollars).
        loss_usd: Out-of-pocket loss of a typical flood of the household's zone next year if
            the household takes the action (dollars).
        allowed: Open to the household (tenure, ``duration``, its effect's conditions).
        affordable: The cost fits the household's spending room.
        lender_placed: Taking it, the household would be insured by its lender's requirement
            (cost, premium and loss then include the policy).
    """

    cost_usd: np.ndarray
    premium_usd: np.ndarray
    loss_usd: np.ndarray
    allowed: np.ndarray
    affordable: np.ndarray
    lender_placed: np.ndarray


@dataclass(frozen=True)
class Quote:
    """Every action's terms for the active households this year (``sim.quote.quote``).

    Attributes:
        actions: Each action's terms, by action id in the domain's order.
        typical_damage_usd: Damage a typical flood of the zone would do to the home as it
            stands (dollars).
        spending_room_usd: What each household can spend on protection this year (dollars).
        could_protect: Some protective action is open to the household and affordable.
    """

    actions: dict[str, ActionTerms]
    typical_damage_usd: np.ndarray
    spending_room_usd: np.ndarray
    could_protect: np.ndarray

    def table(self, term: str) -> np.ndarray:
        """One term of every action as a (households x actions) array, in the domain's order."""
        return np.column_stack([getattr(t, term) for t in self.actions.values()])


@dataclass
class YearState:
    """One year's state of the active households.

    Attributes:
        idx: Indices (0-based) of the households active at the start of the year.
        savings_before_usd: Savings at the start of the year (dollars).
        elevated_before: Elevated at the start of the year.
        insured_before: Holding a policy for this year's flood.
        flood_occurred: Whether any zone flooded (hazard phase).
        depth_m: Flood depth at the home, before elevation (metres; hazard phase).
        flooded: Depth above zero (hazard phase).
        effective_depth_m: Depth after elevation (metres; impacts phase).
        damage_structure_usd: Structure damage (dollars; impacts phase).
        damage_contents_usd: Contents damage (dollars; impacts phase).
        payout_usd: Insurance payout (dollars; impacts phase).
        out_of_pocket_usd: Damage minus payout (dollars; impacts phase).
        debt_before_usd: Loan balance at the start of the year (dollars).
        payment_due_usd: This year's loan payment (dollars).
        repairs: How the out-of-pocket damage was financed (``sim.finance.Repairs``;
            impacts phase).
        options: Every action's terms (``sim.quote``; perception phase).
        neighbour_shares: Share of neighbours insured / elevated / relocated at the end of
            last year (perception phase).
        trust_insurance: Trust in insurance at decision time (perception phase).
        trust_neighbours: Trust in neighbours at decision time (perception phase).
        decisions: One decision per household (decision phase).
        feasible: Whether the decision passed the world's feasibility re-check (execution).
        executed: Action id executed per household (execution).
        premium_usd: Premium paid for next year's policy (dollars; execution).
        action_cost_usd: Cost of other measures (dollars; execution).
        forced_sale: Sold and left at the end of the year (execution).
        lender_placed: The lender renewed the policy for next year because the executed
            action did not insure (mandatory purchase; execution).
        certificate: An aid certificate covered next year's flood at decision time
            (``sim.instruments.certificates``; perception phase).
        certificate_premium_usd: Premium the aid programme paid the insurer for a
            certificate given this year (dollars, its whole term; impacts phase).
        subsidy_offered: The elevation grant's terms were offered this year
            (``sim.instruments.grants``; perception phase).
        subsidy_applied: Chose an elevating action with the grant offered: an application
            (execution).
        subsidy_funded: The programme funded the application (execution).
        subsidy_usd: Elevation grant paid this year (dollars; execution).
        buyout_offered: The buyout programme offered to buy the home
            (``sim.instruments.buyouts``; perception phase).
        buyout_price_usd: The price offered, or that would be offered to an applicant
            (dollars; 0 without either; perception phase).
        buyout_application: The owner may apply to the buyout programme this year
            (``buyout.offer_delay_years``; perception phase).
        buyout_usd: The price paid for a home sold to the programme (dollars; execution).
        preferred: Offered the banded premiums of ``insurance.preferred_risk``
            (``sim.instruments.pricing``; perception phase).
        premium_factor: This year's factor on legacy premiums (``insurance.premium_path``;
            perception phase).
        premium_cap_usd: The most a policy may cost the household this year (dollars;
            infinite without a cap; perception phase).
    """

    idx: np.ndarray
    savings_before_usd: np.ndarray
    elevated_before: np.ndarray
    insured_before: np.ndarray
    debt_before_usd: np.ndarray
    payment_due_usd: np.ndarray
    flood_occurred: bool = False
    depth_m: np.ndarray = field(default_factory=_none)
    flooded: np.ndarray = field(default_factory=_none)
    effective_depth_m: np.ndarray = field(default_factory=_none)
    damage_structure_usd: np.ndarray = field(default_factory=_none)
    damage_contents_usd: np.ndarray = field(default_factory=_none)
    payout_usd: np.ndarray = field(default_factory=_none)
    out_of_pocket_usd: np.ndarray = field(default_factory=_none)
    repairs: Repairs | None = None
    options: Quote | None = None
    neighbour_shares: dict[str, np.ndarray] = field(default_factory=dict)
    trust_insurance: np.ndarray = field(default_factory=_none)
    trust_neighbours: np.ndarray = field(default_factory=_none)
    decisions: list[Decision] = field(default_factory=list)
    feasible: np.ndarray = field(default_factory=_none)
    executed: np.ndarray = field(default_factory=_none)
    premium_usd: np.ndarray = field(default_factory=_none)
    action_cost_usd: np.ndarray = field(default_factory=_none)
    forced_sale: np.ndarray = field(default_factory=_none)
    lender_placed: np.ndarray = field(default_factory=_none)
    certificate: np.ndarray = field(default_factory=_none)
    certificate_premium_usd: np.ndarray = field(default_factory=_none)
    subsidy_offered: np.ndarray = field(default_factory=_none)
    subsidy_applied: np.ndarray = field(default_factory=_none)
    subsidy_funded: np.ndarray = field(default_factory=_none)
    subsidy_usd: np.ndarray = field(default_factory=_none)
    buyout_offered: np.ndarray = field(default_factory=_none)
    buyout_price_usd: np.ndarray = field(default_factory=_none)
    buyout_application: np.ndarray = field(default_factory=_none)
    buyout_usd: np.ndarray = field(default_factory=_none)
    preferred: np.ndarray = field(default_factory=_none)
    premium_factor: np.ndarray = field(default_factory=_none)
    premium_cap_usd: np.ndarray = field(default_factory=_none)

    @property
    def damage_usd(self) -> np.ndarray:
        """Structure plus contents damage (dollars)."""
        return self.damage_structure_usd + self.damage_contents_usd
