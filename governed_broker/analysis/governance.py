"""Governance workload and the infeasible-proposal rate.

*Workload* (from ``agents_yearly.csv``): how often the broker had to re-ask or overrule the
LLM. ``retries`` is the number of re-asks after the first attempt; ``status`` is one of
``contracts.decision.DECISION_STATUSES`` (``baseline``, ``approved``, ``retry_approved``,
``unresolved``, ``rejected``, ``parse_failed``).

*Infeasible proposals*: decisions whose proposal violated an identity/physical or
affordability rule (e.g. elevating an already elevated home, a renter elevating, an action
costing more than the savings). With a broker audit (``decisions.jsonl``), a decision counts
when, at any attempt, a fired rule has a ``category`` in ``INFEASIBILITY_CATEGORIES``
(``identity``: identity and physical rules; ``financial``: affordability), or when the broker's
final feasibility backstop refused the approved proposal (``backstop`` set). Without an audit
(the baseline), the measure is the world's own check, ``feasible == False`` in the agent table.
The result records which ``source`` was used.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from governed_broker.analysis._grouping import as_columns
from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.version import METRIC_VERSION, stamp
from governed_broker.contracts.decision import DECISION_STATUSES

STATUSES = DECISION_STATUSES
INFEASIBILITY_CATEGORIES = frozenset({"identity", "financial"})


def governance_workload(
    agents: pd.DataFrame, by: Sequence[str] | str | None = None
) -> pd.DataFrame:
    """Retries and outcomes of decisions, overall or by group.

    Args:
        agents: Typed agent table.
        by: Optional grouping column(s), e.g. ``"year"``.

    Returns:
        One row per group: ``n_decisions``, ``n_retries`` (sum of re-asks),
        ``retries_per_decision`` (mean re-asks), ``share_retried`` (decisions with >= 1
        re-ask), and ``share_<status>`` for every status (fractions 0..1).

    Raises:
        AnalysisInputError: when a status outside the known set appears.
    """
    unknown = sorted(set(agents["status"].dropna()) - set(STATUSES))
    if unknown:
        raise AnalysisInputError(f"agent table: unknown status {unknown[0]!r}; known: {STATUSES}")
    keys = as_columns(by)
    frame = agents[keys].copy()
    frame["retries"] = agents["retries"].astype(int)
    frame["retried"] = (agents["retries"] > 0).astype(int)
    for status in STATUSES:
        frame[f"share_{status}"] = (agents["status"] == status).astype(int)
    grouped = frame.groupby(keys, observed=True) if keys else frame.groupby(lambda _: 0)
    out = grouped.mean()
    out.insert(0, "n_decisions", grouped.size())
    out.insert(1, "n_retries", grouped["retries"].sum())
    out = out.rename(columns={"retries": "retries_per_decision", "retried": "share_retried"})
    return stamp(out.reset_index(drop=not keys))


def _record_infeasible(record: Mapping[str, Any], source: str, categories: Collection[str]) -> bool:
    attempts = record.get("attempts")
    if not isinstance(attempts, list):
        raise AnalysisInputError(
            f"{source}: field 'attempts' must be a list of attempts, got {attempts!r}; "
            "the file does not follow the broker's audit format"
        )
    for attempt in attempts:
        for rule in attempt.get("rules", []) if isinstance(attempt, Mapping) else []:
            if not isinstance(rule, Mapping) or "category" not in rule:
                raise AnalysisInputError(f"{source}: rule entry without 'category': {rule!r}")
            if rule.get("fired") and rule["category"] in categories:
                return True
    return record.get("backstop") is not None


def infeasible_proposal_rate(
    agents: pd.DataFrame,
    decisions: Iterable[Mapping[str, Any]] | None = None,
    categories: Collection[str] = INFEASIBILITY_CATEGORIES,
) -> dict[str, Any]:
    """Share of decisions whose proposal was infeasible (see module docstring).

    Args:
        agents: Typed agent table (used when no broker audit is given).
        decisions: ``decisions.jsonl`` records, or None.
        categories: Rule categories that make a proposal infeasible.

    Returns:
        ``{"n_decisions", "n_infeasible", "rate", "source"}`` where ``source`` is
        ``"decisions.jsonl:rules"`` or ``"agents_yearly.csv:feasible"`` and ``rate`` is a
        fraction 0..1 (NaN without decisions).
    """
    records = list(decisions) if decisions is not None else []
    if records:
        flagged = sum(
            _record_infeasible(r, f"decisions.jsonl record {i + 1}", categories)
            for i, r in enumerate(records)
        )
        n, source = len(records), "decisions.jsonl:rules"
    else:
        flagged = int((~agents["feasible"].astype(bool)).sum())
        n, source = len(agents), "agents_yearly.csv:feasible"
    return {
        "n_decisions": n,
        "n_infeasible": int(flagged),
        "rate": flagged / n if n else float("nan"),
        "source": source,
        "metric_version": METRIC_VERSION,
    }


def _labels(attempt: Mapping[str, Any]) -> tuple[Any, Any, Any] | None:
    parsed = attempt.get("parsed") if isinstance(attempt, Mapping) else None
    if not parsed:
        return None
    return ((parsed.get("threat_appraisal") or {}).get("label"),
            (parsed.get("coping_appraisal") or {}).get("label"), parsed.get("decision"))


def label_changes_on_retry(decisions: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """How often a governance re-ask changed the model's appraisal rather than its choice.

    Among audited decisions that were re-asked after a rule blocked them
    (``retries_by_kind.governance`` >= 1) and have at least two parsed attempts, compares the
    first parsed attempt with the last: a changed threat or coping label means the model
    answered the rule's feedback by re-rating the situation (the feedback offers "or explain
    a lower appraisal"); a changed action, by choosing differently.

    Returns:
        ``{"n_retried", "n_labels_changed", "n_action_changed", "n_labels_only",
        "share_labels_changed", "share_labels_only", "metric_version"}``: ``n_labels_only``
        counts decisions whose labels changed but whose action did not; shares are of
        ``n_retried`` (NaN when none).
    """
    retried = changed = acted = labels_only = 0
    for number, record in enumerate(decisions, start=1):
        attempts = record.get("attempts")
        if not isinstance(attempts, list):
            raise AnalysisInputError(f"decisions.jsonl record {number}: 'attempts' must be a list")
        kinds = record.get("retries_by_kind") or {}
        parsed = [p for p in (_labels(a) for a in attempts) if p is not None]
        if int(kinds.get("governance", 0)) < 1 or len(parsed) < 2:
            continue
        retried += 1
        first, last = parsed[0], parsed[-1]
        relabelled, new_action = first[:2] != last[:2], first[2] != last[2]
        changed += relabelled
        acted += new_action
        labels_only += relabelled and not new_action
    share = (lambda n: n / retried) if retried else (lambda n: float("nan"))
    return {"n_retried": retried, "n_labels_changed": changed, "n_action_changed": acted,
            "n_labels_only": labels_only, "share_labels_changed": share(changed),
            "share_labels_only": share(labels_only), "metric_version": METRIC_VERSION}
