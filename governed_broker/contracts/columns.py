"""The output column table.

Every column of ``agents_yearly.csv``, ``model_yearly.csv`` and ``institutions_yearly.csv``.

Declared once here (name, kind, unit, decimals, meaning, whether it may be empty), and used by
the writer (column order, float decimals), the analysis loaders (dtypes, required and nullable
columns) and the generated tables in ``docs/outputs.md``. ``model_yearly.csv`` has one
``n_<action>`` count per action of the run's domain, in ``agent_types.yaml`` order, between the
fixed columns (``model_columns``); no action id is spelled here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Kind = Literal["bool", "int", "float", "str"]


@dataclass(frozen=True)
class Column:
    """One output column.

    Attributes:
        name: Column header.
        kind: ``bool`` (``True``/``False``), ``int``, ``float`` or ``str``.
        unit: Unit for readers (``USD``, ``m``, ``0..1``, ``count``, ``-``...).
        meaning: One line for the documentation.
        decimals: Decimals written when the values are floats (None: never floats).
        nullable: Whether an empty field ("not applicable") is allowed.
    """

    name: str
    kind: Kind
    unit: str
    meaning: str
    decimals: int | None = None
    nullable: bool = False


def _usd(name: str, meaning: str, unit: str = "USD") -> Column:
    return Column(name, "float", unit, meaning, decimals=2)


def _metres(name: str, meaning: str, nullable: bool = False) -> Column:
    return Column(name, "float", "m", meaning, decimals=4, nullable=nullable)


def _unit(name: str, meaning: str, unit: str = "0..1", nullable: bool = False) -> Column:
    """A share, score or trust in 0..1 (6 decimals)."""
    return Column(name, "float", unit, meaning, decimals=6, nullable=nullable)


def _count(name: str, meaning: str) -> Column:
    return Column(name, "int", "count", meaning)


def _flag(name: str, meaning: str) -> Column:
    return Column(name, "bool", "bool", meaning)


def _text(name: str, unit: str, meaning: str, nullable: bool = False) -> Column:
    return Column(name, "str", unit, meaning, nullable=nullable)


#: ``agents_yearly.csv``: one row per household active at the start of the year, sorted by
#: year and agent id.
AGENT_YEARLY: tuple[Column, ...] = (
    Column("year", "int", "year", "simulation year (1-based)"),
    Column("agent_id", "int", "-", "household id (1..N, population order)"),
    _text("tenure", "-", "`owner` or `renter`"),
    _text("flood_zone", "-", "zone name"),
    _usd("income_usd", "annual income", "USD/year"),
    Column("marginalised", "bool", "bool",
           "belongs to a marginalised group (`population.marginalised` rule or the population "
           "CSV's column; empty: the population does not say)", nullable=True),
    _usd("savings_before_usd", "savings at the start of the year"),
    _flag("elevated_before", "home elevated at the start of the year"),
    _flag("insured_before", "policy in force during this year's flood (bought last year)"),
    _flag("flooded", "water reached the home this year (depth > 0)"),
    _metres("depth_m", "flood depth at the home (before elevation)"),
    _metres("effective_depth_m",
            "depth above the floor after elevation (max(0, depth - height))"),
    _usd("damage_structure_usd", "structure damage (0 for renters)"),
    _usd("damage_contents_usd", "contents damage"),
    _usd("damage_usd", "structure + contents damage"),
    _usd("payout_usd", "insurance payout"),
    _usd("out_of_pocket_usd", "damage - payout: the repair need, financed by the next four"),
    _usd("aid_usd", "disaster aid grant towards the repairs"),
    _flag("aid_withheld", "the aid draw gave a grant, but the household had not kept the "
          "insurance an earlier grant required (`finance.aid.group_policy.keep_insured`)"),
    _usd("repaired_from_savings_usd", "repairs paid from savings"),
    _usd("loan_usd", "disaster loan taken for the repairs (repaid from next year)"),
    _usd("unrepaired_usd", "damage left unrepaired: lowers the value of the home or belongings"),
    # written from a float array (empty when never flooded), hence decimals 0
    Column("years_since_flood", "int", "years",
           "years since the last flood at this home, after this year's flood (0: flooded this "
           "year; empty: never)", decimals=0, nullable=True),
    _count("floods_experienced", "floods at this home so far, including this year"),
    _unit("neighbour_insured_share", "share of graph neighbours insured at the end of last year"),
    _unit("neighbour_elevated_share", "share of neighbours elevated at the end of last year"),
    _unit("neighbour_relocated_share", "share of neighbours relocated by the end of last year"),
    _unit("trust_insurance", "trust in insurance at decision time"),
    _unit("trust_neighbours", "trust in neighbours at decision time"),
    _unit("threat_score", "baseline's continuous threat appraisal (empty for LLM decisions)",
          nullable=True),
    _unit("coping_score", "baseline's continuous coping appraisal (empty for LLM decisions)",
          nullable=True),
    _text("threat_label", "PMT label", "threat appraisal label (`pmt_labels` of the domain)",
          nullable=True),
    _text("coping_label", "PMT label", "coping appraisal label", nullable=True),
    _text("proposed_action", "action id", "what the decision maker first proposed",
          nullable=True),
    _text("executed_action", "action id", "what the world executed"),
    _text("status", "-",
          "`baseline`, `approved`, `retry_approved`, `unresolved`, `rejected`, `parse_failed` "
          "(docs/decisions.md)"),
    _count("retries", "re-asks after the first attempt (0 for the baseline)"),
    _flag("feasible", "False when the world refused the decided action and executed the default"),
    _flag("could_protect", "some protective action was open to the household and affordable "
          "this year"),
    _flag("subsidy_offered", "the elevation grant was offered this year (every household that "
          "may elevate without `elevation.subsidy_budget_usd`; else as allocated)"),
    _usd("subsidy_usd", "elevation grant paid this year (not part of action_cost_usd)"),
    _flag("buyout_offered", "the buyout programme offered to buy the home this year "
          "(`buyout`; the offer lapses with the year)"),
    _usd("buyout_usd", "price the programme paid for the home (accepted this year)"),
    _usd("action_cost_usd", "out-of-pocket cost of elevation / relocation paid this year"),
    _usd("premium_usd", "insurance premium paid this year (policy for next year)"),
    _flag("elevated_after", "elevated after execution"),
    _flag("insured_after", "holds a policy for next year's flood"),
    _flag("insurance_required", "the mortgage lender enforces the mandatory purchase of flood "
          "insurance (drawn once; `insurance.mandatory_purchase`)"),
    _flag("lender_placed", "the lender renewed the policy for next year because the executed "
          "action did not insure (insured_after is then true)"),
    _flag("group_certificate", "at decision time an aid certificate "
          "(`finance.aid.group_policy`) covered next year's flood: a choice without insurance "
          "left the household insured by it"),
    _flag("relocated_after", "left this year (relocation or forced sale; leaves the simulation)"),
    _usd("loan_payment_usd", "loan payment made this year"),
    _usd("debt_after_usd", "disaster-loan balance at the end of the year"),
    _usd("savings_after_usd", "savings_before - repaired_from_savings + saving_share * income "
         "- loan_payment - (premium + action_cost beyond the protection budget)"),
    _flag("forced_sale", "sold and left at the end of the year (unrepairable damage or "
          "unpaid debts); relocated_after is then true as well"),
    _text("decision_maker", "-", "`baseline` or the LLM maker's name"),
)

_MODEL_HEAD: tuple[Column, ...] = (
    Column("year", "int", "year", "simulation year"),
    _count("n_households", "households in the initial population"),
    _count("n_active", "households active at the start of the year"),
    _count("n_flooded", "active households whose home flooded"),
    _flag("flood_occurred", "any zone flooded this year"),
    _unit("share_insured", "households holding a policy for next year"),
    _unit("share_elevated", "elevated households (not relocated)"),
    _unit("share_relocated", "households that have left (relocation or forced sale)"),
    _unit("share_insured_and_elevated", "insured and elevated"),
    _unit("share_no_measure", "not relocated, neither insured nor elevated"),
    _usd("total_damage_usd", "sum of damage"),
    _usd("total_payout_usd", "sum of payouts"),
    _usd("total_premiums_usd", "sum of premiums paid"),
    _usd("total_action_costs_usd", "sum of elevation / relocation costs paid"),
    _usd("total_subsidy_usd", "sum of elevation grants paid (at most "
         "`elevation.subsidy_budget_usd`)"),
    _usd("total_buyout_usd", "sum of buyout prices paid (at most `buyout.annual_budget_usd`)"),
    _usd("total_aid_usd", "sum of disaster aid grants"),
    _usd("total_loans_usd", "sum of disaster loans taken"),
    _usd("total_unrepaired_usd", "sum of damage left unrepaired"),
    _count("n_forced_sales", "households that sold and left at the end of the year"),
    _metres("mean_depth_flooded_m", "mean depth over flooded households (empty if none)",
            nullable=True),
)
_MODEL_TAIL: tuple[Column, ...] = (
    _count("n_rejected", "decisions with status `rejected`"),
    _count("n_retries", "sum of retries"),
    _count("n_infeasible", "decisions the world refused (`feasible = False`)"),
)

#: The fixed columns of ``model_yearly.csv`` (the per-action counts come between head and tail).
MODEL_YEARLY_FIXED: tuple[Column, ...] = _MODEL_HEAD + _MODEL_TAIL


def action_count_column(action_id: str) -> Column:
    """The ``n_<action>`` count of ``model_yearly.csv`` for one action of the domain."""
    return _count(f"n_{action_id}", f"households that executed `{action_id}` this year")


def model_columns(action_ids: Sequence[str]) -> tuple[Column, ...]:
    """Columns of ``model_yearly.csv`` for a domain, in file order.

    Args:
        action_ids: The domain's action ids in ``agent_types.yaml`` order.
    """
    return _MODEL_HEAD + tuple(action_count_column(a) for a in action_ids) + _MODEL_TAIL


def names(columns: Sequence[Column]) -> tuple[str, ...]:
    """Column headers in order."""
    return tuple(c.name for c in columns)


#: ``institutions_yearly.csv`` (runs with ``institutions:``): one row per year, after the
#: year's accounts are settled. The lever columns are the world settings the institutions set
#: (``config.institutions.LEVER_SETTINGS``), empty when the lever does not exist that year.
INSTITUTIONS_YEARLY: tuple[Column, ...] = (
    Column("year", "int", "year", "simulation year"),
    _text("government_maker", "-", "`rule` or the government's LLM maker"),
    _text("government_status", "-", "`rule`, `approved`, `retry_approved`, `rejected` (the "
          "fallback was put in force), `parse_failed`"),
    _unit("subsidy_share", "share of an elevation's cost an elevation grant pays"),
    _usd("subsidy_budget_usd", "money the government committed to elevation grants"),
    Column("buyout_budget_usd", "float", "USD", "money the government committed to buyouts "
           "(empty without a buyout programme)", decimals=2, nullable=True),
    _usd("funds_available_usd", "balance carried over + appropriation + post-disaster funds"),
    _usd("appropriation_usd", "this year's appropriation to the fund"),
    _usd("post_disaster_funds_usd", "post-disaster mitigation funds (a share of last year's "
         "disaster aid, aid certificates' premiums included)"),
    _count("grants_offered", "elevation grants offered"),
    _count("grants_paid", "elevation grants paid (offered households that elevated)"),
    _usd("grants_paid_usd", "money paid in elevation grants (at most subsidy_budget_usd)"),
    _count("buyouts_offered", "buyout offers made"),
    _count("buyouts_accepted", "homes bought out"),
    _usd("buyouts_paid_usd", "money paid for buyouts (at most buyout_budget_usd)"),
    _usd("balance_end_usd", "fund balance carried over to next year"),
    _text("insurer_maker", "-", "`rule` or the insurer's LLM maker"),
    _text("insurer_status", "-", "as government_status"),
    _unit("loading", "multiplier on every rated premium", unit="factor"),
    _unit("crs_discount", "community discount off every premium"),
    _count("policies_in_force", "policies in force during this year's flood"),
    _usd("claims_usd", "claims paid this year"),
    _count("n_claims", "claims paid this year (policies with a payout)"),
    _usd("premiums_written_usd", "premiums written this year (cover for next year), with the "
         "aid programme's for its certificates' cover next year (`finance.aid.group_policy`)"),
    _count("policies_written", "households' own policies written this year"),
    _unit("loss_ratio", "claims this year / premiums written last year (empty: none written)",
          unit="ratio", nullable=True),
    _unit("experience_loss_ratio", "claims / premiums over the insurer's experience window "
          "(empty: no premium written yet)", unit="ratio", nullable=True),
    _usd("reserves_end_usd", "insurer's reserves at the end of the year"),
)

#: Decimals by column name for columns written from float values, for the CSV writer.
FLOAT_DECIMALS: dict[str, int] = {
    c.name: c.decimals for c in AGENT_YEARLY + MODEL_YEARLY_FIXED + INSTITUTIONS_YEARLY
    if c.decimals is not None
}
