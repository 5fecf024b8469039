"""Column dtypes of the output contract, derived from ``governed_broker.contracts.columns``.

The loaders check every required column and convert it to the dtype derived here, so measures can
rely on them. Booleans are nullable ``boolean``; counts are nullable ``Int64``; money is float
dollars (``*_usd``); depths are float metres (``*_m``); labels and actions are strings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.contracts.columns import (
    AGENT_YEARLY,
    INSTITUTIONS_YEARLY,
    MODEL_YEARLY_FIXED,
    Column,
)
from governed_broker.contracts.columns import model_columns as model_column_table

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: Action id -> effect of the repository's ``agent_types.yaml``. A run's own domain comes from
#: its ``manifest.json`` (``actions``); this map is used only for runs written before manifests
#: recorded it (those could not rename actions) and for tables built by hand.
DEFAULT_ACTION_EFFECTS: dict[str, str] = {
    "do_nothing": "none", "buy_insurance": "insure", "elevate_house": "elevate",
    "elevate_and_insure": "elevate+insure", "relocate": "relocate",
}
#: The default action set (entropy of tables without a run's domain).
ACTIONS: tuple[str, ...] = tuple(DEFAULT_ACTION_EFFECTS)

#: The appraisal scale of the repository's ``agent_types.yaml`` (lowest first). A run's own
#: scale comes from its ``manifest.json`` (``pmt_labels``); this one is used only for runs
#: written before manifests recorded it (those could not change the scale) and for tables
#: built by hand.
DEFAULT_PMT_LABELS: tuple[str, ...] = ("VL", "L", "M", "H", "VH")

BOOL, INT, FLOAT, STR = "boolean", "Int64", "float64", "str"
_DTYPES = {"bool": BOOL, "int": INT, "float": FLOAT, "str": STR}


def _dtypes(columns: tuple[Column, ...]) -> dict[str, str]:
    return {c.name: _DTYPES[c.kind] for c in columns}


#: ``agents_yearly.csv`` column -> pandas dtype (from the output column table).
AGENT_COLUMNS: dict[str, str] = _dtypes(AGENT_YEARLY)

#: The fixed columns of ``model_yearly.csv`` -> pandas dtype (per-action counts excluded).
MODEL_COLUMNS: dict[str, str] = _dtypes(MODEL_YEARLY_FIXED)


def model_columns(actions: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Columns of a run's ``model_yearly.csv`` -> pandas dtype.

    The fixed columns with one ``n_<action>`` count per action of its domain, in the world's order.
    """
    return _dtypes(model_column_table(actions))


#: Columns that the contract allows to be empty (everything else must be filled).
NULLABLE_AGENT_COLUMNS = frozenset(c.name for c in AGENT_YEARLY if c.nullable)

#: ``institutions_yearly.csv`` column -> pandas dtype, and the columns that may be empty.
INSTITUTION_COLUMNS: dict[str, str] = _dtypes(INSTITUTIONS_YEARLY)
NULLABLE_INSTITUTION_COLUMNS = frozenset(c.name for c in INSTITUTIONS_YEARLY if c.nullable)


def effects_of(agents: pd.DataFrame, column: str) -> pd.Series:
    """The effect of each row's action.

    ``none``, ``insure``, ``elevate``, ``relocate``, or a combination such as ``elevate+insure``.

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


def labels_of(agents: pd.DataFrame) -> tuple[str, ...]:
    """The appraisal scale of a table's run, lowest first.

    ``load_run`` / ``load_sweep`` put it in ``agents.attrs["pmt_labels"]`` from the manifest;
    a table without it (built by hand) is read on ``DEFAULT_PMT_LABELS``.
    """
    return tuple(agents.attrs.get("pmt_labels") or DEFAULT_PMT_LABELS)
