"""Governance workload and infeasible-proposal rate, by hand."""

from __future__ import annotations

import pytest
from analysis_helpers import make_agents

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.governance import governance_workload, infeasible_proposal_rate
from governed_broker.analysis.version import METRIC_VERSION


def _table():
    return make_agents(
        [
            {"year": 1, "agent_id": 1, "status": "approved", "retries": 0},
            {"year": 1, "agent_id": 2, "status": "retry_approved", "retries": 2},
            {"year": 1, "agent_id": 3, "status": "rejected", "retries": 3, "feasible": False},
            {"year": 2, "agent_id": 1, "status": "parse_failed", "retries": 1},
            {"year": 2, "agent_id": 2, "status": "approved", "retries": 0},
        ]
    )


def test_workload_by_hand():
    out = governance_workload(_table()).iloc[0]
    assert out["n_decisions"] == 5
    assert out["n_retries"] == 6
    assert out["retries_per_decision"] == pytest.approx(6 / 5)
    assert out["share_retried"] == pytest.approx(3 / 5)
    assert out["share_approved"] == pytest.approx(2 / 5)
    assert out["share_rejected"] == pytest.approx(1 / 5)
    assert out["share_parse_failed"] == pytest.approx(1 / 5)
    assert out["share_baseline"] == 0


def test_workload_by_year():
    out = governance_workload(_table(), by="year").set_index("year")
    assert out.loc[1, "retries_per_decision"] == pytest.approx(5 / 3)
    assert out.loc[2, "share_retried"] == pytest.approx(0.5)


def test_unknown_status_is_an_error():
    table = make_agents([{"year": 1, "agent_id": 1, "status": "maybe"}])
    with pytest.raises(AnalysisInputError, match="maybe"):
        governance_workload(table)


def test_infeasible_from_feasible_column():
    out = infeasible_proposal_rate(_table())
    assert out == {"n_decisions": 5, "n_infeasible": 1, "rate": 0.2,
                   "source": "agents_yearly.csv:feasible", "metric_version": METRIC_VERSION}


def _rule(category, fired=True):
    return {"id": f"r_{category}", "category": category, "severity": "ERROR", "fired": fired}


def test_infeasible_from_broker_audit():
    decisions = [
        # identity rule fired at the first attempt, fixed on retry: counts
        {"attempts": [{"rules": [_rule("identity")]}, {"rules": [_rule("identity", False)]}],
         "backstop": None},
        # only a thinking rule fired: does not count
        {"attempts": [{"rules": [_rule("thinking")]}], "backstop": None},
        # parse failure, no rules evaluated: does not count
        {"attempts": [{"rules": []}], "backstop": None},
        # affordability (financial) fired together with a thinking rule: counts
        {"attempts": [{"rules": [_rule("financial"), _rule("thinking")]}], "backstop": None},
        # rules passed but the world's backstop refused the approved action: counts
        {"attempts": [{"rules": [_rule("identity", False)]}],
         "backstop": "elevate_house costs more than this household's savings"},
    ]
    out = infeasible_proposal_rate(_table(), decisions)
    assert out["n_decisions"] == 5
    assert out["n_infeasible"] == 3
    assert out["rate"] == pytest.approx(0.6)
    assert out["source"] == "decisions.jsonl:rules"


def test_audit_without_attempts_is_an_error():
    with pytest.raises(AnalysisInputError, match="attempts"):
        infeasible_proposal_rate(_table(), [{"rules_fired": []}])
    with pytest.raises(AnalysisInputError, match="category"):
        infeasible_proposal_rate(_table(), [{"attempts": [{"rules": [{"id": "x"}]}]}])


def test_tables_carry_metric_version():
    assert governance_workload(_table()).attrs["metric_version"] == METRIC_VERSION


def _parsed(threat, coping, action):
    return {"parsed": {"threat_appraisal": {"label": threat},
                       "coping_appraisal": {"label": coping}, "decision": action}}


def test_label_changes_on_retry_by_hand():
    from governed_broker.analysis.governance import label_changes_on_retry

    records = [
        # re-asked: labels lowered, action kept (the rule answered by re-rating)
        {"retries_by_kind": {"governance": 1},
         "attempts": [_parsed("H", "M", "do_nothing"), _parsed("M", "M", "do_nothing")]},
        # re-asked: same labels, new action
        {"retries_by_kind": {"governance": 2},
         "attempts": [_parsed("VH", "H", "do_nothing"), _parsed("VH", "H", "do_nothing"),
                      _parsed("VH", "H", "buy_insurance")]},
        # format retry only: not counted
        {"retries_by_kind": {"format": 1, "governance": 0},
         "attempts": [{"parsed": None}, _parsed("L", "L", "do_nothing")]},
        # re-asked but the retry could not be parsed: one parsed attempt, not counted
        {"retries_by_kind": {"governance": 1},
         "attempts": [_parsed("H", "H", "do_nothing"), {"parsed": None}]},
    ]
    out = label_changes_on_retry(records)
    assert (out["n_retried"], out["n_labels_changed"], out["n_action_changed"]) == (2, 1, 1)
    assert out["n_labels_only"] == 1 and out["share_labels_only"] == 0.5
