"""Hand-built agent tables for the analysis tests.

``make_agents(rows)`` fills every contract column with a neutral default so each test only
writes the columns its measure reads; the expected answers in the tests are computed by hand
from those few columns.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from governed_broker.analysis.loaders import coerce_columns
from governed_broker.analysis.schema import (
    ACTIONS,
    AGENT_COLUMNS,
    NULLABLE_AGENT_COLUMNS,
    model_columns,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

_DEFAULTS = {
    "tenure": "owner",
    "flood_zone": "high",
    "income_usd": 50_000.0,
    "marginalised": None,
    "savings_before_usd": 10_000.0,
    "elevated_before": False,
    "insured_before": False,
    "flooded": False,
    "depth_m": 0.0,
    "effective_depth_m": 0.0,
    "damage_structure_usd": 0.0,
    "damage_contents_usd": 0.0,
    "damage_usd": 0.0,
    "payout_usd": 0.0,
    "out_of_pocket_usd": 0.0,
    "aid_usd": 0.0,
    "aid_withheld": False,
    "repaired_from_savings_usd": 0.0,
    "loan_usd": 0.0,
    "unrepaired_usd": 0.0,
    "years_since_flood": None,
    "floods_experienced": 0,
    "neighbour_insured_share": 0.0,
    "neighbour_elevated_share": 0.0,
    "neighbour_relocated_share": 0.0,
    "trust_insurance": 0.5,
    "trust_neighbours": 0.5,
    "threat_score": None,
    "coping_score": None,
    "threat_label": "M",
    "coping_label": "M",
    "proposed_action": "do_nothing",
    "executed_action": "do_nothing",
    "status": "approved",
    "retries": 0,
    "feasible": True,
    "could_protect": True,
    "subsidy_offered": False,
    "subsidy_applied": False,
    "subsidy_usd": 0.0,
    "buyout_offered": False,
    "buyout_usd": 0.0,
    "action_cost_usd": 0.0,
    "premium_usd": 0.0,
    "elevated_after": False,
    "insured_after": False,
    "insurance_required": False,
    "lender_placed": False,
    "group_certificate": False,
    "relocated_after": False,
    "loan_payment_usd": 0.0,
    "debt_after_usd": 0.0,
    "savings_after_usd": 10_000.0,
    "forced_sale": False,
    "decision_maker": "test",
}


def make_agents(rows: list[dict]) -> pd.DataFrame:
    """Typed agent table from rows giving at least ``year`` and ``agent_id``."""
    full = [{**_DEFAULTS, **row} for row in rows]
    frame = pd.DataFrame(full, columns=list(AGENT_COLUMNS))
    return coerce_columns(frame, AGENT_COLUMNS, "test", NULLABLE_AGENT_COLUMNS)


def make_model(years: list[int]) -> pd.DataFrame:
    """A typed model table with zeros (for loader tests)."""
    columns = model_columns(ACTIONS)
    rows = [{c: 0 for c in columns} | {"year": y, "flood_occurred": False} for y in years]
    return coerce_columns(pd.DataFrame(rows), columns, "test")

