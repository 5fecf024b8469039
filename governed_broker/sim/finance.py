"""Household finance: paying for repairs, loans, the year's cash flow and forced sales.

Vectorised over the active households, in dollars; the rules are those of
``config.world.FinanceConfig`` (docs/configuration.md "Household finance"):

* repairs of what insurance did not pay are financed in order by disaster aid (a grant with
  probability ``aid.probability``, at most ``aid.max_grant_usd``), savings (aid and savings
  split between structure and contents in proportion to the need), and a disaster loan within
  the caps and the household's repayment ability, the home first; the rest is left unrepaired
  and lowers the value of the home (structure) or of the belongings (contents);
* a loan is an annuity; its payments start the year after it is taken (interest too);
* each year the household saves ``saving_share`` of its income, pays its loans, and pays
  premiums and measures first from ``protection_budget_share`` of its income, the rest from
  savings; ``affordable`` is exactly the condition that savings stay >= 0;
* a household sells and leaves (forced sale) when its unrepaired structure damage reaches
  ``forced_sale_damage_share`` of its home's undamaged value, or when savings would fall below
  zero (it cannot meet its payments).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from governed_broker.config.world import FinanceConfig


def annuity_factor(rate: float, years: int) -> float:
    """Yearly payment per dollar borrowed at ``rate`` over ``years`` (1/years at rate 0)."""
    return 1.0 / years if rate == 0 else rate / (1.0 - (1.0 + rate) ** -years)


@dataclass(frozen=True)
class Repairs:
    """How one year's repair needs were paid (arrays per household, dollars).

    Attributes:
        aid_usd: Disaster aid grant.
        aid_withheld: The draw gave a grant, but the household may not receive aid
            (``aid_eligible``).
        from_savings_usd: Paid from savings.
        loan_usd: Disaster loan taken.
        new_payment_usd: Yearly payment of that loan (from next year).
        unrepaired_structure_usd: Structure damage left unrepaired.
        unrepaired_contents_usd: Contents damage left unrepaired.
    """

    aid_usd: np.ndarray
    aid_withheld: np.ndarray
    from_savings_usd: np.ndarray
    loan_usd: np.ndarray
    new_payment_usd: np.ndarray
    unrepaired_structure_usd: np.ndarray
    unrepaired_contents_usd: np.ndarray

    @property
    def unrepaired_usd(self) -> np.ndarray:
        """Structure and contents damage left unrepaired."""
        return self.unrepaired_structure_usd + self.unrepaired_contents_usd


def finance_repairs(
    fin: FinanceConfig, need_structure_usd: np.ndarray, need_contents_usd: np.ndarray,
    savings_usd: np.ndarray, income_usd: np.ndarray, payment_usd: np.ndarray,
    aid_draw: np.ndarray, aid_eligible: np.ndarray | None = None,
) -> Repairs:
    """Finance the repairs that insurance did not pay (see the module docstring).

    Args:
        fin: The ``finance`` section.
        need_structure_usd: Structure damage minus the structure payout.
        need_contents_usd: Contents damage minus the contents payout.
        savings_usd: Savings before the repairs.
        income_usd: Yearly income.
        payment_usd: Yearly payments of the loans held already.
        aid_draw: Uniform draws in [0, 1), one per household (aid when below the probability).
        aid_eligible: Households that may receive aid at all (None: every one;
            ``sim.instruments.certificates.aid_eligible``).
    """
    need_s, need_c = np.maximum(need_structure_usd, 0.0), np.maximum(need_contents_usd, 0.0)
    need = need_s + need_c
    drawn = (aid_draw < fin.aid.probability) & (need > 0)
    withheld = drawn & ~aid_eligible if aid_eligible is not None else np.zeros_like(drawn)
    aid = np.where(drawn & ~withheld,
                   np.minimum(need, fin.aid.max_grant_usd), 0.0)
    from_savings = np.minimum(need - aid, np.maximum(savings_usd, 0.0))
    left = need - aid - from_savings
    share_s = np.divide(need_s, need, out=np.zeros_like(need), where=need > 0)
    left_s, left_c = left * share_s, left * (1.0 - share_s)
    factor = annuity_factor(fin.loan.rate, fin.loan.term_years)
    capacity = np.maximum(fin.loan.max_payment_share * income_usd - payment_usd, 0.0) / factor
    loan_s = np.minimum.reduce([left_s, np.full_like(left_s, fin.loan.max_structure_usd),
                                capacity])
    loan_c = np.minimum.reduce([left_c, np.full_like(left_c, fin.loan.max_contents_usd),
                                capacity - loan_s])
    loan = loan_s + loan_c
    return Repairs(aid_usd=aid, aid_withheld=withheld, from_savings_usd=from_savings, loan_usd=loan,
                   new_payment_usd=loan * factor, unrepaired_structure_usd=left_s - loan_s,
                   unrepaired_contents_usd=left_c - loan_c)


def payment_due(fin: FinanceConfig, debt_usd: np.ndarray, payment_usd: np.ndarray) -> np.ndarray:
    """This year's loan payment: the scheduled payment, or less when it repays the loan."""
    return np.minimum(payment_usd, debt_usd * (1.0 + fin.loan.rate))


def protection_budget_usd(fin: FinanceConfig, income_usd: np.ndarray) -> np.ndarray:
    """What a household can spend on premiums and measures from this year's income."""
    return fin.protection_budget_share * np.asarray(income_usd, dtype=float)


def spare_savings_usd(fin: FinanceConfig, savings_usd: np.ndarray, income_usd: np.ndarray,
                      due_usd: np.ndarray) -> np.ndarray:
    """Savings left for measures once the year's saving is added and the loans are paid."""
    return np.maximum(savings_usd + fin.saving_share * income_usd - due_usd, 0.0)


def spending_room_usd(fin: FinanceConfig, savings_usd: np.ndarray, income_usd: np.ndarray,
                      due_usd: np.ndarray) -> np.ndarray:
    """What a household can spend on protection this year (dollars).

    On premiums and measures, without savings falling below zero: its protection budget plus the
    savings it can spare.

    Args:
        fin: The ``finance`` section.
        savings_usd: Savings at decision time.
        income_usd: Yearly income.
        due_usd: This year's loan payment (``payment_due``).
    """
    return protection_budget_usd(fin, income_usd) + spare_savings_usd(fin, savings_usd,
                                                                      income_usd, due_usd)


def affordable(fin: FinanceConfig, cost_usd: np.ndarray, savings_usd: np.ndarray,
               income_usd: np.ndarray, due_usd: np.ndarray) -> np.ndarray:
    """Whether a cost fits the ``spending_room_usd`` (zero-cost choices always do)."""
    cost = np.asarray(cost_usd, dtype=float)
    return (cost <= 0.0) | (cost <= spending_room_usd(fin, savings_usd, income_usd, due_usd))


@dataclass(frozen=True)
class CashFlow:
    """The year's end for each household (arrays, dollars).

    Attributes:
        savings_usd: Savings after saving, loan payments and spending beyond the budget.
        debt_usd: Loan balance after this year's payment and new loans.
        payment_usd: Yearly payment due from next year.
    """

    savings_usd: np.ndarray
    debt_usd: np.ndarray
    payment_usd: np.ndarray


def year_end(fin: FinanceConfig, savings_usd: np.ndarray, income_usd: np.ndarray,
             spent_usd: np.ndarray, debt_before_usd: np.ndarray, payment_before_usd: np.ndarray,
             due_usd: np.ndarray, repairs: Repairs) -> CashFlow:
    """Savings and loans at the end of the year.

    Args:
        fin: The ``finance`` section.
        savings_usd: Savings after this year's repairs.
        income_usd: Yearly income.
        spent_usd: Premiums and measures paid this year.
        debt_before_usd: Loan balance at the start of the year (before this year's loans).
        payment_before_usd: Scheduled payment of those loans.
        due_usd: This year's payment (``payment_due``).
        repairs: This year's repair financing (its new loans are added after the payment).
    """
    beyond_budget = np.maximum(spent_usd - protection_budget_usd(fin, income_usd), 0.0)
    savings = savings_usd + fin.saving_share * income_usd - due_usd - beyond_budget
    left = np.maximum(debt_before_usd * (1.0 + fin.loan.rate) - due_usd, 0.0)
    payment = np.where(left > 0.0, payment_before_usd, 0.0) + repairs.new_payment_usd
    return CashFlow(savings_usd=savings, debt_usd=left + repairs.loan_usd, payment_usd=payment)


def forced_sale(fin: FinanceConfig, unrepaired_usd: np.ndarray, structure_value_usd: np.ndarray,
                savings_usd: np.ndarray, is_owner: np.ndarray) -> np.ndarray:
    """Households that must sell and leave at the end of the year.

    Args:
        fin: The ``finance`` section (``forced_sale_damage_share``).
        unrepaired_usd: Structure damage left unrepaired so far (dollars).
        structure_value_usd: The home's value now, after that damage (dollars).
        savings_usd: Savings at the end of the year (below zero: payments not met).
        is_owner: Owners (only an owner's home can be sold).
    """
    undamaged = structure_value_usd + unrepaired_usd
    ruined = is_owner & (undamaged > 0) & (unrepaired_usd >= fin.forced_sale_damage_share
                                           * undamaged)
    return ruined | (savings_usd < 0.0)
