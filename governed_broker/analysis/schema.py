"""Column schemas of the output contract (docs/ARCHITECTURE.md, "Output contract").

The loaders check every required column and convert it to the dtype listed here, so measures can
rely on them. Booleans are nullable ``boolean``; counts are nullable ``Int64``; money is float
dollars (``*_usd``); depths are float metres (``*_m``); labels and actions are strings.
"""

from __future__ import annotations

#: The four household actions of ``agent_types.yaml`` (the default action set for entropy).
ACTIONS: tuple[str, ...] = ("do_nothing", "buy_insurance", "elevate_house", "relocate")

#: Five-level PMT appraisal labels, lowest first.
PMT_LABELS: tuple[str, ...] = ("VL", "L", "M", "H", "VH")

BOOL, INT, FLOAT, STR = "boolean", "Int64", "float64", "str"

AGENT_COLUMNS: dict[str, str] = {
    "year": INT,
    "agent_id": INT,
    "tenure": STR,
    "flood_zone": STR,
    "income_usd": FLOAT,
    "savings_before_usd": FLOAT,
    "elevated_before": BOOL,
    "insured_before": BOOL,
    "flooded": BOOL,
    "depth_m": FLOAT,
    "effective_depth_m": FLOAT,
    "damage_structure_usd": FLOAT,
    "damage_contents_usd": FLOAT,
    "damage_usd": FLOAT,
    "payout_usd": FLOAT,
    "out_of_pocket_usd": FLOAT,
    "years_since_flood": INT,
    "floods_experienced": INT,
    "neighbour_insured_share": FLOAT,
    "neighbour_elevated_share": FLOAT,
    "neighbour_relocated_share": FLOAT,
    "trust_insurance": FLOAT,
    "trust_neighbours": FLOAT,
    "threat_score": FLOAT,
    "coping_score": FLOAT,
    "threat_label": STR,
    "coping_label": STR,
    "proposed_action": STR,
    "executed_action": STR,
    "status": STR,
    "retries": INT,
    "feasible": BOOL,
    "action_cost_usd": FLOAT,
    "premium_usd": FLOAT,
    "elevated_after": BOOL,
    "insured_after": BOOL,
    "relocated_after": BOOL,
    "savings_after_usd": FLOAT,
    "decision_maker": STR,
}

MODEL_COLUMNS: dict[str, str] = {
    "year": INT,
    "n_households": INT,
    "n_active": INT,
    "n_flooded": INT,
    "flood_occurred": BOOL,
    "share_insured": FLOAT,
    "share_elevated": FLOAT,
    "share_relocated": FLOAT,
    "share_insured_and_elevated": FLOAT,
    "share_no_measure": FLOAT,
    "total_damage_usd": FLOAT,
    "total_payout_usd": FLOAT,
    "total_premiums_usd": FLOAT,
    "total_action_costs_usd": FLOAT,
    "mean_depth_flooded_m": FLOAT,
    "n_do_nothing": INT,
    "n_buy_insurance": INT,
    "n_elevate_house": INT,
    "n_relocate": INT,
    "n_rejected": INT,
    "n_retries": INT,
    "n_infeasible": INT,
}

#: Columns that the contract allows to be empty (everything else must be filled).
NULLABLE_AGENT_COLUMNS = frozenset(
    {
        "years_since_flood",
        "threat_score",
        "coping_score",
        "threat_label",
        "coping_label",
        "proposed_action",
    }
)
