"""The year's output rows, each column computed next to its name.

As Mesa's DataCollector declares reporters.

``AGENT_REPORTERS`` gives one value per active household for every column of
``agents_yearly.csv``; ``MODEL_REPORTERS`` one value for every fixed column of
``model_yearly.csv`` (the per-action counts ``n_<action>`` follow the domain). Names, units and
decimals are declared once in ``governed_broker.contracts.columns``; a test checks that the
reporters cover exactly those columns.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from governed_broker.contracts.columns import AGENT_YEARLY, action_count_column, names
from governed_broker.contracts.columns import model_columns as model_column_table
from governed_broker.sim.households import HouseholdArrays
from governed_broker.sim.year_state import YearState

#: Columns of ``agents_yearly.csv`` (``governed_broker.contracts.columns``).
AGENT_COLUMNS = names(AGENT_YEARLY)


def model_columns(action_ids: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Headers of ``model_yearly.csv`` for a domain.

    One ``n_<action>`` count per action id of ``agent_types.yaml``, in its order, between the fixed
    columns.
    """
    return names(model_column_table(action_ids))


@dataclass(frozen=True)
class YearView:
    """What the reporters read at the end of a year.

    Attributes:
        year: Simulation year (1-based).
        state: The year's ``YearState`` (active households at the start of the year).
        hh: Every household's state at the end of the year.
        zones: Zone names by zone index.
        action_ids: The domain's action ids, in order.
        marginalised: Marginalised group membership of every household (None: unknown).
    """

    year: int
    state: YearState
    hh: HouseholdArrays
    zones: list[str]
    action_ids: list[str]
    marginalised: np.ndarray | None = None

    def marginalised_column(self) -> Any:
        """The ``marginalised`` column: membership, or empty fields where it is unknown."""
        if self.marginalised is None:
            return [""] * len(self.idx)
        return self.marginalised[self.idx]

    @property
    def idx(self) -> np.ndarray:
        """Indices of the year's active households."""
        return self.state.idx

    @cached_property
    def stay(self) -> np.ndarray:
        """Households that have not relocated (all households)."""
        return ~self.hh.relocated

    def audit_score(self, key: str) -> np.ndarray:
        """A score from each decision's audit (NaN where there is none)."""
        return np.array([d.audit.get(key, np.nan) if d.audit else np.nan
                         for d in self.state.decisions], dtype=float)

    def of_decisions(self, read: Callable[[Any], Any]) -> list[Any]:
        """``read(decision)`` for every decision, in order."""
        return [read(d) for d in self.state.decisions]


Reporter = Callable[[YearView], Any]

#: Columns of ``agents_yearly.csv``: one value per active household (the policy instruments
#: report their own columns, ``Instrument.report``).
AGENT_REPORTERS: dict[str, Reporter] = {
    "year": lambda v: np.full(len(v.idx), v.year),
    "agent_id": lambda v: v.idx + 1,
    "tenure": lambda v: np.where(v.hh.is_owner[v.idx], "owner", "renter"),
    "flood_zone": lambda v: np.asarray(v.zones, dtype=object)[v.hh.zone_index[v.idx]],
    "income_usd": lambda v: v.hh.income_usd[v.idx],
    "marginalised": YearView.marginalised_column,
    "savings_before_usd": lambda v: v.state.savings_before_usd,
    "elevated_before": lambda v: v.state.elevated_before,
    "insured_before": lambda v: v.state.insured_before,
    "flooded": lambda v: v.state.flooded,
    "depth_m": lambda v: v.state.depth_m,
    "effective_depth_m": lambda v: v.state.effective_depth_m,
    "damage_structure_usd": lambda v: v.state.damage_structure_usd,
    "damage_contents_usd": lambda v: v.state.damage_contents_usd,
    "damage_usd": lambda v: v.state.damage_usd,
    "payout_usd": lambda v: v.state.payout_usd,
    "out_of_pocket_usd": lambda v: v.state.out_of_pocket_usd,
    "aid_usd": lambda v: v.state.repairs.aid_usd,
    "aid_withheld": lambda v: v.state.repairs.aid_withheld,
    "repaired_from_savings_usd": lambda v: v.state.repairs.from_savings_usd,
    "loan_usd": lambda v: v.state.repairs.loan_usd,
    "unrepaired_usd": lambda v: v.state.repairs.unrepaired_usd,
    "years_since_flood": lambda v: v.hh.years_since_flood[v.idx],
    "floods_experienced": lambda v: v.hh.floods_experienced[v.idx],
    "neighbour_insured_share": lambda v: v.state.neighbour_shares["insured"],
    "neighbour_elevated_share": lambda v: v.state.neighbour_shares["elevated"],
    "neighbour_relocated_share": lambda v: v.state.neighbour_shares["relocated"],
    "trust_insurance": lambda v: v.state.trust_insurance,
    "trust_neighbours": lambda v: v.state.trust_neighbours,
    "threat_score": lambda v: v.audit_score("threat_score"),
    "coping_score": lambda v: v.audit_score("coping_score"),
    "threat_label": lambda v: v.of_decisions(lambda d: d.threat_label or ""),
    "coping_label": lambda v: v.of_decisions(lambda d: d.coping_label or ""),
    "proposed_action": lambda v: v.of_decisions(lambda d: d.proposed_action or ""),
    "executed_action": lambda v: v.state.executed,
    "status": lambda v: v.of_decisions(lambda d: d.status),
    "retries": lambda v: np.array(v.of_decisions(lambda d: d.retries), dtype=np.int64),
    "feasible": lambda v: v.state.feasible,
    "could_protect": lambda v: v.state.options.could_protect,
    "action_cost_usd": lambda v: v.state.action_cost_usd,
    "premium_usd": lambda v: v.state.premium_usd,
    "elevated_after": lambda v: v.hh.elevated[v.idx].copy(),
    "insured_after": lambda v: v.hh.insured[v.idx].copy(),
    "relocated_after": lambda v: v.hh.relocated[v.idx].copy(),
    "loan_payment_usd": lambda v: v.state.payment_due_usd,
    "debt_after_usd": lambda v: v.hh.debt_usd[v.idx].copy(),
    "savings_after_usd": lambda v: v.hh.savings_usd[v.idx].copy(),
    "forced_sale": lambda v: v.state.forced_sale,
    "decision_maker": lambda v: v.of_decisions(lambda d: d.decision_maker),
}


def _share(v: YearView, mask: np.ndarray) -> float:
    """Share of the initial population (relocated households included in the denominator)."""
    return mask.sum() / len(v.hh.relocated)


def _mean_depth_flooded(v: YearView) -> float:
    flooded = v.state.flooded
    return float(v.state.depth_m[flooded].mean()) if flooded.any() else np.nan


#: Fixed columns of ``model_yearly.csv``: one value per year.
MODEL_REPORTERS: dict[str, Reporter] = {
    "year": lambda v: v.year,
    "n_households": lambda v: len(v.hh.relocated),
    "n_active": lambda v: len(v.idx),
    "n_flooded": lambda v: int(v.state.flooded.sum()),
    "flood_occurred": lambda v: v.state.flood_occurred,
    "share_insured": lambda v: _share(v, v.hh.insured & v.stay),
    "share_elevated": lambda v: _share(v, v.hh.elevated & v.stay),
    "share_relocated": lambda v: _share(v, v.hh.relocated),
    "share_insured_and_elevated": lambda v: _share(v, v.hh.insured & v.stay & v.hh.elevated),
    "share_no_measure": lambda v: _share(v, v.stay & ~v.hh.insured & ~v.hh.elevated),
    "total_damage_usd": lambda v: float(np.sum(v.state.damage_usd)),
    "total_payout_usd": lambda v: float(np.sum(v.state.payout_usd)),
    "total_premiums_usd": lambda v: float(np.sum(v.state.premium_usd)),
    "total_action_costs_usd": lambda v: float(np.sum(v.state.action_cost_usd)),
    "total_subsidy_usd": lambda v: float(np.sum(v.state.subsidy_usd)),
    "total_buyout_usd": lambda v: float(np.sum(v.state.buyout_usd)),
    "total_aid_usd": lambda v: float(np.sum(v.state.repairs.aid_usd)),
    "total_loans_usd": lambda v: float(np.sum(v.state.repairs.loan_usd)),
    "total_unrepaired_usd": lambda v: float(np.sum(v.state.repairs.unrepaired_usd)),
    "n_forced_sales": lambda v: int(np.sum(v.state.forced_sale)),
    "mean_depth_flooded_m": _mean_depth_flooded,
    "n_rejected": lambda v: v.of_decisions(lambda d: d.status).count("rejected"),
    "n_retries": lambda v: int(sum(v.of_decisions(lambda d: d.retries))),
    "n_infeasible": lambda v: int((~v.state.feasible).sum()),
}


def agent_columns(view: YearView, instrument_columns: Mapping[str, Any]) -> dict[str, Any]:
    """This year's agent rows as columns (arrays or lists), keyed by output column.

    The instruments' columns (``Instrument.report``) included.
    """
    return {**{name: report(view) for name, report in AGENT_REPORTERS.items()},
            **instrument_columns}


def model_row(view: YearView) -> dict[str, Any]:
    """This year's row of ``model_yearly.csv``, per-action counts included."""
    row = {name: report(view) for name, report in MODEL_REPORTERS.items()}
    executed = view.state.executed
    row.update({action_count_column(a).name: int(np.sum(executed == a)) for a in view.action_ids})
    return row
