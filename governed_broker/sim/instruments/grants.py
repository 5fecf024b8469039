"""The elevation grant programme: grants applied for, funded within a budget in a declared order.

Its terms are ``config.world.ElevationConfig``.

A grant pays ``subsidy_share`` of the elevation cost. Every household that may elevate is told
the programme's terms (``subsidy_offered``): the elevation's price with the grant. A household
that chooses an elevating action applies (``subsidy_applied``). Without a budget every
application is funded. With an annual budget the programme funds ``floor(budget / grant)``
applications a year, in its declared order (``subsidy_allocation``), as a grant programme
(FEMA's Hazard Mitigation Grant Program, Flood Mitigation Assistance) approves applications
before the work is done and cannot pay out more than it was given: the budget is spent on the
households that want to elevate, up to what it funds, and never exceeded. An application that
is not funded does not go ahead this year: the household takes its chosen action without the
elevation (``elevate_and_insure`` becomes the action whose effect is ``insure``; one with
nothing left, or left with an action it may not take or cannot pay, the default action) and
may apply again next year. A grant not applied for lapses with the year (the budget is
annual).

Allocation (``subsidy_allocation``):
- ``first_come``: applications arrive in a random order, drawn from the year's seeded stream;
- ``by_need``: lowest income first (ties in agent-id order).

``ElevationGrants`` is the instrument; its output columns are ``subsidy_offered``,
``subsidy_applied`` and ``subsidy_usd``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from governed_broker.config.world import ElevationConfig
from governed_broker.contracts.effects import COMBINE, NO_EFFECT, effect_names, traits_of
from governed_broker.seeding import child_rng
from governed_broker.sim.allocation import allocation_order
from governed_broker.sim.effects import Executed
from governed_broker.sim.instruments.base import Access, Instrument
from governed_broker.sim.money import elevation_grant_usd
from governed_broker.sim.reporters import YearView


def grants_funded(elev: ElevationConfig) -> int | None:
    """How many grants the annual budget funds (None: no budget, no limit).

    Capped at 2**53 (a tiny grant against a large budget), far above any population.
    """
    grant = elevation_grant_usd(elev)
    if elev.subsidy_budget_usd is None or grant <= 0.0:
        return None
    return int(min(elev.subsidy_budget_usd // grant, 2.0**53))


def funded_applications(elev: ElevationConfig, applied: np.ndarray, income_usd: np.ndarray,
                        rng: np.random.Generator) -> np.ndarray:
    """The applications the programme funds this year (a boolean mask).

    Args:
        elev: The elevation terms and the programme.
        applied: Households that applied (chose to elevate with the grant offered).
        income_usd: Annual income per household (dollars; ``by_need`` ranks by it).
        rng: This year's stream for the programme (``first_come`` draws the order from it).
    """
    applied = np.asarray(applied, dtype=bool)
    slots = grants_funded(elev)
    if slots is None:
        return applied.copy()
    queue = allocation_order(applied, income_usd, elev.subsidy_allocation, rng)
    funded = np.zeros(len(applied), dtype=bool)
    funded[queue[:slots]] = True
    return funded


def without_elevation(effect: str) -> str:
    """The effect with its elevating parts taken out (``elevate+insure`` -> ``insure``)."""
    parts = [p for p in effect_names(effect) if not traits_of(p).elevates]
    return COMBINE.join(parts) if parts else NO_EFFECT


class ElevationGrants(Instrument):
    """The elevation grant programme (module documentation)."""

    name = "elevation_grants"

    def offer(self, access: Access) -> dict[str, Any]:
        """``subsidy_offered``: the grant's terms, to households that may elevate.

        Those whose home is not elevated and to whom an elevating action is open (none when
        the grant is 0).
        """
        world = self.world
        idx = world.current.idx
        if elevation_grant_usd(world.config.elevation) <= 0.0:
            return {"subsidy_offered": np.zeros(len(idx), dtype=bool)}
        return {"subsidy_offered": access.any_open(lambda t: t.elevates)
                & ~world.hh.elevated[idx]}

    def admit(self, executed: np.ndarray) -> np.ndarray:
        """Fund the applications in the declared order; the unfunded go ahead without elevating."""
        world = self.world
        c, actions = world.current, list(world.domain.actions)
        elevates = np.array([traits_of(world.domain.actions[a].effect).elevates
                             for a in actions])
        c.subsidy_applied = elevates[executed] & np.asarray(c.subsidy_offered, dtype=bool)
        rng = child_rng(world.seed, "elevation_subsidy", world.year)
        c.subsidy_funded = funded_applications(world.config.elevation, c.subsidy_applied,
                                               world.hh.income_usd[c.idx], rng)
        unfunded = np.flatnonzero(c.subsidy_applied & ~c.subsidy_funded)
        if not len(unfunded):
            return executed
        executed = executed.copy()
        open_now = c.options.table("allowed") & c.options.table("affordable")
        default = actions.index(world.domain.default_action)
        for i in unfunded.tolist():
            rest = without_elevation(world.domain.actions[actions[executed[i]]].effect)
            instead = [k for k, a in enumerate(actions)
                       if world.domain.actions[a].effect == rest and open_now[i, k]]
            executed[i] = instead[0] if instead else default
        return executed

    def execute(self, done: Executed, executed: np.ndarray, insured: np.ndarray) -> np.ndarray:
        """The grant is paid where a funded applicant elevated."""
        c = self.world.current
        c.subsidy_usd = np.where(done.elevated & c.subsidy_funded,
                                 elevation_grant_usd(self.world.config.elevation), 0.0)
        return insured

    def report(self, view: YearView) -> dict[str, Any]:
        """``subsidy_offered``, ``subsidy_applied`` and ``subsidy_usd``."""
        return {"subsidy_offered": view.state.subsidy_offered,
                "subsidy_applied": view.state.subsidy_applied,
                "subsidy_usd": view.state.subsidy_usd}
