"""Executing the year's decisions.

The world re-checks feasibility, executes in agent-id order, pays costs and premiums, lapses
un-renewed insurance, relocates; then the year's savings and loan payments, and forced sales
(``sim.finance``).

Each household's execution touches only its own state, so the vectorised update here equals
executing the decisions one by one in agent-id order.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from governed_broker.contracts.decision import Decision
from governed_broker.sim import finance
from governed_broker.sim.effects import execute
from governed_broker.sim.instruments.base import Instrument, World


def execute_decisions(world: World, instruments: Sequence[Instrument],
                      decisions: Sequence[Decision], default_action: str) -> None:
    """Execute each active household's decision.

    Or ``default_action`` where the decided action is unknown, not open to it or not affordable
    (recorded in ``current.feasible``).
    """
    c, hh, idx = world.current, world.hh, world.current.idx
    quote, action_ids = c.options, list(world.domain.actions)
    pos = {a: k for k, a in enumerate(action_ids)}
    wanted = np.array([pos.get(d.action, -1) for d in decisions], dtype=np.int64)
    known = wanted >= 0
    feasible_m = quote.table("allowed") & quote.table("affordable")
    rows = np.arange(len(idx))
    feasible = known & feasible_m[rows, np.where(known, wanted, 0)]
    executed = np.where(feasible, wanted, pos[default_action])
    cost, premium = (quote.table(term)[rows, executed] for term in ("cost_usd", "premium_usd"))
    done = execute([world.domain.actions[a].effect for a in action_ids], executed, cost, premium)
    hh.elevated[idx] |= done.elevated
    insured = done.insured  # un-renewed insurance lapses
    for instrument in instruments:
        insured = instrument.execute(done, executed, insured)
    hh.insured[idx] = insured
    hh.relocated[idx] |= done.relocated
    for a, taken in hh.taken_once.items():
        taken[idx] |= executed == pos[a]
    _year_end_finance(world, done.premium_usd + done.action_cost_usd, done.relocated)
    c.decisions, c.feasible = list(decisions), feasible
    c.executed = np.asarray(action_ids, dtype=object)[executed]
    c.premium_usd, c.action_cost_usd = done.premium_usd, done.action_cost_usd


def _year_end_finance(world: World, spent_usd: np.ndarray, left: np.ndarray) -> None:
    """Savings, loan payments and new loans; households that must sell leave."""
    c, hh, idx, fin = world.current, world.hh, world.current.idx, world.config.finance
    cash = finance.year_end(fin, hh.savings_usd[idx], hh.income_usd[idx], spent_usd,
                            c.debt_before_usd, hh.loan_payment_usd[idx], c.payment_due_usd,
                            c.repairs)
    hh.savings_usd[idx] = cash.savings_usd
    hh.debt_usd[idx], hh.loan_payment_usd[idx] = cash.debt_usd, cash.payment_usd
    sold = ~left & finance.forced_sale(fin, hh.unrepaired_usd[idx],
                                       hh.structure_value_usd[idx], cash.savings_usd,
                                       hh.is_owner[idx])
    hh.sold[idx] |= sold
    hh.relocated[idx] |= sold
    hh.insured[idx] &= ~sold  # the policy ends with the sale
    c.forced_sale = sold
