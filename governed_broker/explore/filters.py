"""Which decisions of a run match the explorer's filters.

Filters combine (all must hold):

* ``status``: the decision's status (``rejected``, ``retry_approved``, ``parse_failed``, ...);
* ``rule``: the id of a rule that fired at any attempt of the decision;
* ``laundering``: the decision is a *laundering case*: after an attempt that a governance rule
  blocked (a fired rule of severity ``ERROR``), a later readable reply gave a different threat or
  coping label. ``label_only`` says whether the action stayed the same, the suspicious form:
  the model lowered (or raised) its appraisal to get the same action past the rule, instead of
  reconsidering the action;
* ``zone``, ``tenure``, ``marginalised``: the household's group in that year (the last only
  when the population has a ``marginalised`` column).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pandas as pd

from governed_broker.explore.audit import Laundering, laundering_of
from governed_broker.explore.run_view import RunView

__all__ = ["COLUMNS", "DecisionFilter", "Laundering", "fired_rule_ids", "laundering_of",
           "matching_decisions", "rule_ids", "statuses"]

#: Columns of the table ``matching_decisions`` returns.
COLUMNS = ("year", "agent_id", "flood_zone", "tenure", "status", "proposed_action",
           "executed_action", "rules_fired", "laundering")


@dataclass(frozen=True)
class DecisionFilter:
    """The filters the explorer's decision list applies (None: not filtered)."""

    status: str | None = None
    rule: str | None = None
    laundering: bool = False
    zone: str | None = None
    tenure: str | None = None
    marginalised: bool | None = None


def fired_rule_ids(decisions: Iterable[dict[str, Any]]) -> list[str]:
    """Every rule id that fired in some decision, sorted."""
    return sorted({str(r.get("id")) for d in decisions for r in d.get("rules_fired") or []})


def statuses(view: RunView) -> list[str]:
    """The decision statuses present in the run, sorted."""
    return sorted(view.agents["status"].dropna().unique().tolist())


def rule_ids(view: RunView) -> list[str]:
    """Every rule id that fired in some decision of the run, sorted."""
    return view.decisions.rule_ids()


def matching_decisions(view: RunView, flt: DecisionFilter) -> pd.DataFrame:
    """One row per household-year matching ``flt`` (columns ``COLUMNS``), by year and id."""
    agents = view.agents
    mask = pd.Series(True, index=agents.index)
    for column, wanted in (("status", flt.status), ("flood_zone", flt.zone),
                           ("tenure", flt.tenure)):
        if wanted is not None:
            mask &= agents[column] == wanted
    if flt.marginalised is not None:
        if "marginalised" not in agents.columns:
            return pd.DataFrame(columns=list(COLUMNS))
        mask &= agents["marginalised"] == flt.marginalised
    rows = []
    for row in agents[mask].itertuples(index=False):
        key = (int(row.agent_id), int(row.year))
        fired, laundering = view.decisions.fired(key), view.decisions.laundering(key)
        if flt.rule is not None and flt.rule not in fired:
            continue
        if flt.laundering and not laundering:
            continue
        rows.append((int(row.year), int(row.agent_id), row.flood_zone, row.tenure, row.status,
                     row.proposed_action, row.executed_action, ", ".join(fired),
                     "; ".join(c.describe() for c in laundering)))
    return pd.DataFrame(rows, columns=list(COLUMNS))
