"""Column schemas of the output contract (docs/ARCHITECTURE.md, "Output contract").

The loaders check every required column and convert it to the dtype listed here, so measures can
rely on them. Booleans are nullable ``boolean``; counts are nullable ``Int64``; money is float
dollars (``*_usd``); depths are float metres (``*_m``); labels and actions are strings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from governed_broker.analysis.errors import AnalysisInputError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: Action id -> effect of the repository's ``agent_types.yaml``. A run's own domain comes from
#: its ``manifest.json`` (``actions``); this map is used only for runs written before manifests
#: recorded it (those could not rename actions) and for tables built by hand.
DEFAULT_ACTION_EFFECTS: dict[str, str] = {
    "do_nothing": "none", "buy_insurance": "insure", "elevate_house": "elevate",
    "relocate": "relocate",
}
#: The default action set (entropy of tables without a run's domain).
ACTIONS: tuple[str, ...] = tuple(DEFAULT_ACTION_EFFECTS)

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
    # one n_<action> count per action of the run's domain comes here (``model_columns``)
    "n_rejected": INT,
    "n_retries": INT,
    "n_infeasible": INT,
}

def model_columns(actions: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Columns of a run's ``model_yearly.csv``: ``MODEL_COLUMNS`` with one ``n_<action>`` count
    per action of its domain, in the world's order (before ``n_rejected``)."""
    out: dict[str, str] = {}
    for name, dtype in MODEL_COLUMNS.items():
        if name == "n_rejected":
            out.update({f"n_{a}": INT for a in actions})
        out[name] = dtype
    return out


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


def effects_of(agents: pd.DataFrame, column: str) -> pd.Series:
    """The effect (``none``, ``insure``, ``elevate``, ``relocate``) of each row's action.

    The action -> effect map is the run's own domain, which ``load_run`` / ``load_sweep`` put
    in ``agents.attrs["action_effects"]`` (it travels with copies and filtered tables); a table
    without it (built by hand) is read with ``DEFAULT_ACTION_EFFECTS``. An action outside the
    map is an error rather than a guess.

    Args:
        agents: Agent table.
        column: ``executed_action`` or ``proposed_action``.
    """
    effects = agents.attrs.get("action_effects") or DEFAULT_ACTION_EFFECTS
    actions = agents[column]
    unknown = sorted(set(actions.dropna()) - set(effects))
    if unknown:
        raise AnalysisInputError(
            f"{column}: action {unknown[0]!r} is not in the run's domain {sorted(effects)}; "
            "load the run with load_run, which reads its domain from manifest.json")
    return actions.map(effects)
