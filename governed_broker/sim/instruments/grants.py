"""The elevation subsidy programme: who is offered a grant this year.

Its terms are ``config.world.ElevationConfig``.

A grant pays ``subsidy_share`` of the elevation cost. Without a budget every household that may
elevate is offered one. With an annual budget the programme funds ``floor(budget / grant)``
grants and offers them *before* households decide, as a grant programme approves applications
before the work is done: each household is told the price it would really pay (with or without
the grant), the decision makers compare true prices, and the budget cannot be exceeded whatever
they choose. A grant offered and not taken lapses with the year (the budget is annual).

Allocation (``subsidy_allocation``):
- ``first_come``: applications arrive in a random order, drawn from the year's seeded stream;
- ``by_need``: lowest income first (ties in agent-id order).

``ElevationGrants`` is the instrument; its output columns are ``subsidy_offered`` and
``subsidy_usd``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from governed_broker.config.world import ElevationConfig
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


def subsidy_offers(elev: ElevationConfig, eligible: np.ndarray, income_usd: np.ndarray,
                   rng: np.random.Generator) -> np.ndarray:
    """Households offered the elevation grant this year.

    Args:
        elev: The elevation terms and the programme.
        eligible: Households that may elevate this year (in agent-id order).
        income_usd: Annual income per household (dollars; ``by_need`` ranks by it).
        rng: This year's stream for the programme (``first_come`` draws the order from it).

    Returns:
        A boolean mask over the households; no grant is offered when the share is 0.
    """
    eligible = np.asarray(eligible, dtype=bool)
    if elevation_grant_usd(elev) <= 0.0:
        return np.zeros(len(eligible), dtype=bool)
    slots = grants_funded(elev)
    if slots is None:
        return eligible.copy()
    queue = allocation_order(eligible, income_usd, elev.subsidy_allocation, rng)
    offered = np.zeros(len(eligible), dtype=bool)
    offered[queue[:slots]] = True
    return offered


class ElevationGrants(Instrument):
    """The elevation grant programme (module documentation)."""

    name = "elevation_grants"

    def offer(self, access: Access) -> dict[str, Any]:
        """``subsidy_offered``.

        The grant, to households whose home is not elevated and to whom an elevating action is open,
        within the programme's budget.
        """
        world = self.world
        idx = world.current.idx
        eligible = access.any_open(lambda t: t.elevates) & ~world.hh.elevated[idx]
        rng = child_rng(world.seed, "elevation_subsidy", world.year)
        return {"subsidy_offered": subsidy_offers(world.config.elevation, eligible,
                                                  world.hh.income_usd[idx], rng)}

    def execute(self, done: Executed, executed: np.ndarray, insured: np.ndarray) -> np.ndarray:
        """The grant is paid where an offered household elevated."""
        c = self.world.current
        c.subsidy_usd = np.where(done.elevated & c.subsidy_offered,
                                 elevation_grant_usd(self.world.config.elevation), 0.0)
        return insured

    def report(self, view: YearView) -> dict[str, Any]:
        """``subsidy_offered`` and ``subsidy_usd``."""
        return {"subsidy_offered": view.state.subsidy_offered,
                "subsidy_usd": view.state.subsidy_usd}
