"""Behavioural validity of a run, measured on the households' real situations.

The validity battery (``governed_broker.validity``) asks about made-up vignettes; these measures
ask the same questions of a finished run's broker audit (``decisions.jsonl``), where the
situations are the ones the world produced. A decision is read as the battery reads it: the
labels, action and reason of its *first readable proposal*, before any governance re-ask.

- ``threat_by_depth``: first-proposal threat rank (0 = lowest label) by bin of this year's
  flood depth at the home (metres; bins 0 = no flood, (0, 0.5], (0.5, 1], > 1), and Spearman's
  rho of depth and rank over all decisions with its one-sided p-value (rho > 0 expected);
- ``uptake_by_cost``: the share of first proposals choosing an action with a given effect
  (``insure`` by default) by quartile of that action's out-of-pocket cost to the household
  (dollars), and Spearman's rho of cost and choice (rho < 0 expected);
- ``laundering_rate``: of the proposals an ERROR rule blocked that ended in a readable reply,
  the share whose accepted reply kept the action and changed an appraisal label
  (``validity.measures.outcome``);
- ``reason_coherence_rate``: the share of first proposals whose reason matches a pattern that
  contradicts its action's effect (the battery's ``reason_coherence`` patterns);
- ``proposal_gap``: the share of decisions whose executed action differs from the first
  proposal, in total and by status (governance re-asks, rejections and fallbacks).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from governed_broker.analysis.version import METRIC_VERSION, stamp
from governed_broker.validity import stats
from governed_broker.validity.measures import OUTCOMES, contradicts, outcome
from governed_broker.validity.probe import Reply

#: Upper edges of the depth bins (metres); the first bin is "no flood".
DEPTH_EDGES = (0.0, 0.5, 1.0, np.inf)
DEPTH_BINS = ("no flood", "0-0.5 m", "0.5-1 m", "> 1 m")


def _first(record: Mapping[str, Any]) -> Reply:
    return Reply.from_audit("run", 0, record)


def threat_by_depth(decisions: Sequence[Mapping[str, Any]],
                    labels: Sequence[str]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Threat rank by depth bin, and the depth-threat correlation (see the module docstring).

    Returns:
        A table (``depth_bin``, ``n``, ``mean_threat_rank``, ``share_high``: share in the
        scale's high half) and ``{"rho", "p_value", "n"}``.
    """
    ranks = {label: i for i, label in enumerate(labels)}
    high = set(labels[len(labels) - len(labels) // 2:])
    rows = []
    for record in decisions:
        reply = _first(record)
        if reply.threat is None:
            continue
        depth = float(record["state_before"]["depth_m"])
        rows.append({"depth_m": depth, "rank": ranks[reply.threat], "high": reply.threat in high})
    frame = pd.DataFrame(rows, columns=["depth_m", "rank", "high"])
    frame["depth_bin"] = pd.cut(frame["depth_m"], [-np.inf, *DEPTH_EDGES], labels=DEPTH_BINS,
                                right=True)
    table = frame.groupby("depth_bin", observed=False).agg(
        n=("rank", "size"), mean_threat_rank=("rank", "mean"), share_high=("high", "mean"))
    rho, p = stats.spearman(frame["depth_m"].tolist(), frame["rank"].tolist(), "greater")
    return stamp(table.reset_index()), {"rho": rho, "p_value": p, "n": len(frame),
                                        "metric_version": METRIC_VERSION}


def uptake_by_cost(decisions: Sequence[Mapping[str, Any]], effects: Mapping[str, str],
                   effect: str = "insure") -> tuple[pd.DataFrame, dict[str, Any]]:
    """Share choosing an action with ``effect`` by quartile of its cost (dollars).

    Only decisions where such an action was allowed count. Returns the table (``cost_bin``,
    ``n``, ``mean_cost_usd``, ``share_chosen``) and ``{"rho", "p_value", "n", "effect"}``.
    """
    rows = []
    for record in decisions:
        reply = _first(record)
        options = [a for a in record["allowed_actions"] if effects.get(a) == effect]
        if reply.action is None or not options:
            continue
        rows.append({"cost_usd": float(record["action_costs_usd"][options[0]]),
                     "chosen": effects.get(reply.action) == effect})
    frame = pd.DataFrame(rows, columns=["cost_usd", "chosen"])
    if frame["cost_usd"].nunique() > 1:
        frame["cost_bin"] = pd.qcut(frame["cost_usd"], 4, duplicates="drop").astype(str)
    else:
        frame["cost_bin"] = "all"
    table = frame.groupby("cost_bin", observed=True, sort=False).agg(
        n=("chosen", "size"), mean_cost_usd=("cost_usd", "mean"),
        share_chosen=("chosen", "mean")).reset_index().sort_values("mean_cost_usd")
    rho, p = stats.spearman(frame["cost_usd"].tolist(), frame["chosen"].astype(float).tolist(),
                            "less")
    return stamp(table.reset_index(drop=True)), {"rho": rho, "p_value": p, "n": len(frame),
                                                 "effect": effect,
                                                 "metric_version": METRIC_VERSION}


def laundering_rate(decisions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """How blocked proposals ended (``OUTCOMES``) and the laundering rate.

    The rate is over the blocks that ended in a readable reply: one whose re-asks gave nothing
    readable is no evidence of laundering or of its absence (None: no such block).
    """
    blocked = [r for r in map(_first, decisions) if r.blocked]
    counts = {o: sum(outcome(r) == o for r in blocked) for o in OUTCOMES}
    readable = len(blocked) - counts["unreadable"]
    return {"n_blocked": len(blocked), **counts,
            "rate": counts["changed_labels_only"] / readable if readable else None,
            "metric_version": METRIC_VERSION}


def reason_coherence_rate(decisions: Sequence[Mapping[str, Any]], effects: Mapping[str, str],
                          patterns: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """Share of first proposals with a reason that contradicts their action (None: none)."""
    checked = hits = 0
    for reply in map(_first, decisions):
        if reply.action is None or not reply.reason:
            continue
        checked += 1
        hits += contradicts(reply.reason, effects.get(reply.action, ""), patterns)
    return {"n": checked, "contradicting": hits, "rate": hits / checked if checked else None,
            "metric_version": METRIC_VERSION}


def proposal_gap(agents: pd.DataFrame) -> pd.DataFrame:
    """Share of decisions whose executed action differs from the first proposal.

    Overall and by status (rows with a proposal only; the baseline proposes what it executes).
    """
    rows = agents[agents["proposed_action"].notna()]
    differs = rows["proposed_action"] != rows["executed_action"]
    by_status = differs.groupby(rows["status"], observed=True).agg(["size", "mean"])
    table = pd.concat([pd.DataFrame({"status": ["all"], "n": [len(rows)],
                                     "share_changed": [differs.mean() if len(rows) else np.nan]}),
                       by_status.reset_index().rename(columns={"size": "n",
                                                               "mean": "share_changed"})],
                      ignore_index=True)
    return stamp(table)
