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

from governed_broker.explore.run_view import RunView

#: Columns of the table ``matching_decisions`` returns.
COLUMNS = ("year", "agent_id", "flood_zone", "tenure", "status", "proposed_action",
           "executed_action", "rules_fired", "laundering")


@dataclass(frozen=True)
class Laundering:
    """How a decision's appraisal changed after a block."""

    rule: str
    label: str
    before: str
    after: str
    label_only: bool

    def describe(self) -> str:
        """One line, e.g. ``threat H -> M after high_threat_inaction (same action)``."""
        tail = "same action" if self.label_only else "action changed too"
        return f"{self.label} {self.before} -> {self.after} after {self.rule} ({tail})"


@dataclass(frozen=True)
class DecisionFilter:
    """The filters the explorer's decision list applies (None: not filtered)."""

    status: str | None = None
    rule: str | None = None
    laundering: bool = False
    zone: str | None = None
    tenure: str | None = None
    marginalised: bool | None = None


def laundering_of(decision: dict[str, Any]) -> list[Laundering]:
    """The laundering cases in one audit record ([] when there is none)."""
    attempts = [a for a in decision.get("attempts") or [] if isinstance(a, dict)]
    found = []
    for i, blocked in enumerate(attempts):
        rules = [r for r in blocked.get("rules") or [] if r.get("fired")
                 and r.get("severity") == "ERROR"]
        before = blocked.get("parsed")
        if not rules or not before:
            continue
        after = next((a.get("parsed") for a in attempts[i + 1:] if a.get("parsed")), None)
        if not after:
            continue
        same_action = before.get("decision") == after.get("decision")
        for label, key in (("threat", "threat_appraisal"), ("coping", "coping_appraisal")):
            old, new = _label(before, key), _label(after, key)
            if old is not None and new is not None and old != new:
                found.append(Laundering(str(rules[0].get("id")), label, old, new, same_action))
    return found


def _label(reply: dict[str, Any], key: str) -> str | None:
    value = reply.get(key)
    return value.get("label") if isinstance(value, dict) else None


def fired_rule_ids(decisions: Iterable[dict[str, Any]]) -> list[str]:
    """Every rule id that fired in some decision, sorted."""
    return sorted({str(r.get("id")) for d in decisions for r in d.get("rules_fired") or []})


def statuses(view: RunView) -> list[str]:
    """The decision statuses present in the run, sorted."""
    return sorted(view.agents["status"].dropna().unique().tolist())


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
        decision = view.decisions.get((int(row.agent_id), int(row.year))) or {}
        fired = sorted({str(r.get("id")) for r in decision.get("rules_fired") or []})
        laundering = laundering_of(decision) if decision else []
        if flt.rule is not None and flt.rule not in fired:
            continue
        if flt.laundering and not laundering:
            continue
        rows.append((int(row.year), int(row.agent_id), row.flood_zone, row.tenure, row.status,
                     row.proposed_action, row.executed_action, ", ".join(fired),
                     "; ".join(c.describe() for c in laundering)))
    return pd.DataFrame(rows, columns=list(COLUMNS))
