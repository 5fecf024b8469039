"""PMT coherence of decisions: the irrational-behaviour rate, following the rule table.

Protection Motivation Theory expects a household that appraises the flood threat as high, and
believes it can act, to protect itself, and one that appraises the threat as low not to take
drastic, costly measures. The measure follows the thinking rules of ``agent_types.yaml``
(``high_threat_inaction``, ``very_high_threat_inaction``, ``fatalistic_inaction``,
``low_threat_elevation``, ``low_threat_relocation``). A decision is *PMT-incoherent*
("irrational") when

* ``threat_label`` is in the high half of the run's scale (``H`` or ``VH``), ``coping_label``
  is not in the low half, the action has no effect (``do_nothing``), the home was not already
  elevated and some protective action was open to the household and affordable
  (``could_protect``): high-threat inaction; or
* ``threat_label`` is in the low half (``VL`` or ``L``) and the action elevates or relocates
  (its effect's traits): low-threat extreme action.

High threat with low coping and no action is *fatalistic inaction*, which PMT allows (the rule
table only warns): it is counted separately (``n_fatalistic_inaction``), never as irrational.
Inaction of an elevated household, or of one with no protective action it could take or pay
for, is not judged at all.

The halves come from the run's own ``pmt_labels`` scale (``config.agent_types.scale_halves``:
the lower and upper ``n // 2`` labels); actions are judged by their effect, not their id.

The rate is computed separately on *executed* actions (``executed_action``: what the world
did, after governance and feasibility checks) and on *proposed* actions (``proposed_action``:
the decision maker's first proposal). The prior lineage mixed the two; we never do. On executed
actions, decisions in which the broker executed its fallback (status ``rejected`` or
``parse_failed``) are broker outcomes, not household choices: they are left out of the rate and
counted as ``n_fallback``. The denominator is the number of household-years that have both a
threat label and the action in question (parse failures without a proposal are excluded from
the proposed rate).

A proposal is judged with the labels the decision maker gave *with that proposal*. The agent
table's labels come from the final reply, which after a governance retry can differ from the
first one; so with a broker audit (``decisions.jsonl``) the proposed rate takes labels and
action from the first parsed attempt of each decision. Without an audit (baseline: one reply
per decision) the table's columns are used. The ``labels`` column says which.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import pandas as pd

from governed_broker.analysis._grouping import as_columns
from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.schema import effects_of, labels_of
from governed_broker.analysis.version import stamp
from governed_broker.config.agent_types import scale_halves
from governed_broker.contracts.decision import FALLBACK_STATUSES
from governed_broker.contracts.effects import traits_of

#: The effect of no action.
INACTION_EFFECT = "none"


def is_extreme(effect: pd.Series) -> pd.Series:
    """Whether each effect (a name or a combination) elevates or leaves."""
    return effect.map(lambda e: pd.notna(e) and (traits_of(e).elevates or traits_of(e).leaves))


def incoherent_flags(agents: pd.DataFrame, on: Literal["executed", "proposed"]) -> pd.DataFrame:
    """Per-row flags: ``evaluable``, ``high_threat_inaction``, ``fatalistic_inaction``.

    ``low_threat_extreme`` and ``fallback`` (see the module docstring).

    Args:
        agents: Typed agent table.
        on: ``"executed"`` (``executed_action``) or ``"proposed"`` (``proposed_action``).
    """
    if on not in ("executed", "proposed"):
        raise ValueError(f"on must be 'executed' or 'proposed', got {on!r}")
    action = agents[f"{on}_action"]
    effect = effects_of(agents, f"{on}_action")
    threat, coping = agents["threat_label"], agents["coping_label"]
    low, high = scale_halves(labels_of(agents))
    fallback = (agents["status"].isin(FALLBACK_STATUSES) if on == "executed"
                else pd.Series(False, index=agents.index)).fillna(False).astype(bool)
    evaluable = (action.notna() & threat.notna()).astype(bool) & ~fallback
    inaction = (effect == INACTION_EFFECT).fillna(False).astype(bool)
    judged = inaction & ~agents["elevated_before"].astype(bool) & \
        agents["could_protect"].astype(bool)
    high_threat = threat.isin(high).fillna(False).astype(bool)
    low_coping = coping.isin(low).fillna(False).astype(bool)
    extreme = (threat.isin(low).fillna(False).astype(bool)
               & is_extreme(effect).fillna(False).astype(bool))
    return pd.DataFrame(
        {
            "evaluable": evaluable,
            "high_threat_inaction": high_threat & ~low_coping & judged & evaluable,
            "fatalistic_inaction": high_threat & low_coping & judged & evaluable,
            "low_threat_extreme": extreme & evaluable,
            "fallback": fallback,
        },
        index=agents.index,
    )


def first_proposals(decisions: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Action and threat label of the first parsed attempt of every audited decision.

    Returns:
        ``year, agent_id, proposed_action, threat_label, coping_label`` (None when no
        attempt parsed).
    """
    rows = []
    for number, record in enumerate(decisions, start=1):
        attempts = record.get("attempts")
        if not isinstance(attempts, list) or "year" not in record or "agent_id" not in record:
            raise AnalysisInputError(
                f"decisions.jsonl record {number}: needs 'year', 'agent_id' and 'attempts'"
            )
        parsed = next((a["parsed"] for a in attempts if a.get("parsed")), None)
        rows.append(
            {
                "year": int(record["year"]),
                "agent_id": int(record["agent_id"]),
                "proposed_action": parsed.get("decision") if parsed else None,
                "threat_label": (parsed.get("threat_appraisal") or {}).get("label")
                if parsed
                else None,
                "coping_label": (parsed.get("coping_appraisal") or {}).get("label")
                if parsed
                else None,
            }
        )
    return pd.DataFrame(rows, columns=["year", "agent_id", "proposed_action", "threat_label",
                                       "coping_label"])


def _with_audited_proposals(
    agents: pd.DataFrame, decisions: Iterable[Mapping[str, Any]]
) -> pd.DataFrame:
    first = first_proposals(decisions).set_index(["year", "agent_id"])
    keys = pd.MultiIndex.from_arrays(
        [agents["year"].astype(int), agents["agent_id"].astype(int)], names=["year", "agent_id"]
    )
    missing = keys.difference(first.index)
    if len(missing):
        year, agent_id = missing[0]
        raise AnalysisInputError(
            f"decisions.jsonl has no record for household {agent_id} in year {year}"
        )
    out = agents.copy()
    aligned = first.reindex(keys)
    out["proposed_action"] = aligned["proposed_action"].astype("str").to_numpy()
    out["threat_label"] = aligned["threat_label"].astype("str").to_numpy()
    out["coping_label"] = aligned["coping_label"].astype("str").to_numpy()
    return out


def irrational_behaviour_rate(
    agents: pd.DataFrame,
    on: Literal["executed", "proposed"] = "executed",
    by: Sequence[str] | str | None = None,
    decisions: Iterable[Mapping[str, Any]] | None = None,
) -> pd.DataFrame:
    """Share of PMT-incoherent decisions (see module docstring), overall or by group.

    Args:
        agents: Typed agent table.
        on: Which action to judge: ``"executed"`` or ``"proposed"``.
        by: Optional grouping column(s), e.g. ``"year"`` or ``["year", "tenure"]``.
        decisions: ``decisions.jsonl`` records; for ``on="proposed"`` the first parsed
            attempt's action and threat label are used (see module docstring).

    Returns:
        One row per group (a single row without ``by``): ``n_evaluated`` (decisions with a
        threat label and an action, broker fallbacks excluded), ``n_high_threat_inaction``,
        ``n_low_threat_extreme``, ``n_irrational`` (their sum), ``rate`` = n_irrational /
        n_evaluated (fraction 0..1; NaN when nothing is evaluable), and, reported apart,
        ``n_fatalistic_inaction`` (PMT-permitted) and ``n_fallback`` (broker fallbacks).
    """
    keys = as_columns(by)
    audited = on == "proposed" and decisions is not None
    if audited:
        agents = _with_audited_proposals(agents, decisions)
    flags = incoherent_flags(agents, on)
    frame = pd.concat([agents[keys], flags.astype(int)], axis=1)
    if keys:
        counts = frame.groupby(keys, observed=True).sum()
    else:
        counts = frame.sum().to_frame().T
    counts = counts.rename(
        columns={
            "evaluable": "n_evaluated",
            "high_threat_inaction": "n_high_threat_inaction",
            "fatalistic_inaction": "n_fatalistic_inaction",
            "low_threat_extreme": "n_low_threat_extreme",
            "fallback": "n_fallback",
        }
    )
    counts["n_irrational"] = counts["n_high_threat_inaction"] + counts["n_low_threat_extreme"]
    counts["rate"] = counts["n_irrational"] / counts["n_evaluated"].where(counts["n_evaluated"] > 0)
    counts.insert(0, "actions", on)
    counts.insert(1, "labels", "decisions.jsonl:first_parsed" if audited else "agents_yearly.csv")
    return stamp(counts.reset_index(drop=not keys))
