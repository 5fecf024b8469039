"""Household finance: repairs financed in the declared order, loans within repayment ability.

The year's cash flow, affordability and forced sales.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from governed_broker.config.world import FinanceConfig
from governed_broker.sim import finance

FIN = FinanceConfig.model_validate({
    "source": "t", "saving_share": 0.05, "protection_budget_share": 0.05,
    "aid": {"source": "t", "probability": 0.5, "max_grant_usd": 10_000},
    "loan": {"source": "t", "rate": 0.04, "term_years": 30, "max_structure_usd": 500_000,
             "max_contents_usd": 100_000, "max_payment_share": 0.05},
    "forced_sale_damage_share": 0.5})
FACTOR = finance.annuity_factor(0.04, 30)


def _one(need_s, need_c, savings, income=60_000.0, payment=0.0, draw=0.9):
    return finance.finance_repairs(FIN, np.array([need_s]), np.array([need_c]),
                                   np.array([savings]), np.array([income]), np.array([payment]),
                                   np.array([draw]))


def test_annuity_factor() -> None:
    assert FACTOR == pytest.approx(0.05783, abs=1e-5)
    assert finance.annuity_factor(0.0, 20) == 0.05


def test_aid_then_savings_then_loan_then_unrepaired_by_hand() -> None:
    # need 100k (80k structure, 20k contents); aid 10k; savings 20k (both split 80:20);
    # loan capacity 0.05 * 60k / 0.05783 = 51.9k, the home first; the rest (18.1k) unrepaired
    r = _one(80_000.0, 20_000.0, 20_000.0, draw=0.1)
    assert r.aid_usd[0] == 10_000 and r.from_savings_usd[0] == 20_000
    capacity = 0.05 * 60_000 / FACTOR
    assert r.loan_usd[0] == pytest.approx(capacity)
    assert r.new_payment_usd[0] == pytest.approx(3_000.0)  # the whole repayment room
    assert r.unrepaired_usd[0] == pytest.approx(70_000 - capacity)
    assert r.unrepaired_structure_usd[0] == pytest.approx(56_000 - capacity)
    assert r.unrepaired_contents_usd[0] == pytest.approx(14_000)


def test_no_aid_without_the_draw_and_loans_stay_within_repayment_ability() -> None:
    r = _one(30_000.0, 0.0, 0.0, payment=2_000.0, draw=0.6)
    assert r.aid_usd[0] == 0
    assert r.loan_usd[0] == pytest.approx(1_000.0 / FACTOR)  # 3,000 room minus 2,000 paid
    assert _one(0.0, 0.0, 5_000.0).loan_usd[0] == 0  # no need, nothing financed


@given(st.floats(0, 1e6), st.floats(0, 2e5), st.floats(0, 1e6), st.floats(1e3, 5e5),
       st.floats(0, 2e4), st.floats(0, 1))
def test_the_need_is_always_financed_exactly(need_s, need_c, savings, income, payment, draw):
    r = _one(need_s, need_c, savings, income, payment, draw)
    parts = r.aid_usd + r.from_savings_usd + r.loan_usd + r.unrepaired_usd
    assert parts[0] == pytest.approx(need_s + need_c, rel=1e-9, abs=1e-6)
    assert min(r.aid_usd[0], r.from_savings_usd[0], r.loan_usd[0],
               r.unrepaired_structure_usd[0], r.unrepaired_contents_usd[0]) >= -1e-6
    assert r.from_savings_usd[0] <= savings + 1e-6
    # total payments never exceed the repayment room (or what was paid already)
    assert r.new_payment_usd[0] <= max(0.0, 0.05 * income - payment) + 1e-6


def test_affordable_means_savings_stay_above_zero() -> None:
    # income 60k: budget 3k from income; spare savings = 1k + 3k saving - 500 due = 3.5k
    ok = finance.affordable(FIN, np.array([0.0, 6_500.0, 6_500.01]), np.full(3, 1_000.0),
                            np.full(3, 60_000.0), np.full(3, 500.0))
    assert ok.tolist() == [True, True, False]
    cash = finance.year_end(FIN, np.array([1_000.0]), np.array([60_000.0]),
                            np.array([6_500.0]), np.array([0.0]), np.array([0.0]),
                            np.array([500.0]), _one(0.0, 0.0, 0.0))
    assert cash.savings_usd[0] == pytest.approx(0.0)


def test_loans_amortise_and_new_loans_start_paying_next_year() -> None:
    debt, payment = np.array([10_000.0]), np.array([2_000.0])
    due = finance.payment_due(FIN, debt, payment)
    new = _one(0.0, 5_000.0, 0.0, draw=0.9)  # a 5k loan this year
    cash = finance.year_end(FIN, np.array([0.0]), np.array([60_000.0]), np.array([0.0]),
                            debt, payment, due, new)
    assert cash.debt_usd[0] == pytest.approx(10_000 * 1.04 - 2_000 + 5_000)
    assert cash.payment_usd[0] == pytest.approx(2_000 + 5_000 * FACTOR)
    # the last payment repays the balance and the schedule ends
    last = finance.payment_due(FIN, np.array([1_000.0]), np.array([2_000.0]))
    assert last[0] == pytest.approx(1_040.0)
    end = finance.year_end(FIN, np.array([0.0]), np.array([60_000.0]), np.array([0.0]),
                           np.array([1_000.0]), np.array([2_000.0]), last, _one(0, 0, 0))
    assert (end.debt_usd[0], end.payment_usd[0]) == (0.0, 0.0)


def test_forced_sale_when_half_the_home_is_left_unrepaired_or_payments_fail() -> None:
    sold = finance.forced_sale(FIN, np.array([50_000.0, 49_000.0, 50_000.0, 0.0]),
                               np.array([50_000.0, 51_000.0, 0.0, 0.0]),
                               np.array([0.0, 0.0, 0.0, -1.0]),
                               np.array([True, True, False, False]))
    assert sold.tolist() == [True, False, False, True]
