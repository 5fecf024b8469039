"""Validity measures of a finished run, on hand-built audit records and committed samples."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from governed_broker.analysis import load_run
from governed_broker.analysis.run_validity import (
    laundering_rate,
    proposal_gap,
    reason_coherence_rate,
    threat_by_depth,
    uptake_by_cost,
)
from governed_broker.validity.battery import coherence_patterns

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LABELS = ("VL", "L", "M", "H", "VH")
EFFECTS = {"do_nothing": "none", "buy_insurance": "insure", "elevate_house": "elevate",
           "relocate": "relocate"}


def _attempt(threat: str, action: str, reason: str = "r", error: bool = False) -> dict:
    return {"parsed": {"threat_appraisal": {"label": threat, "reason": "t"},
                       "coping_appraisal": {"label": "M", "reason": "c"},
                       "decision": action, "reason": reason},
            "rules": [{"id": "x", "severity": "ERROR", "fired": error}], "llm": {}}


def _record(depth: float, threat: str, action: str, premium: float = 1000.0,
            attempts: list | None = None, status: str = "approved") -> dict:
    attempts = attempts or [_attempt(threat, action)]
    last = attempts[-1]["parsed"]
    return {"agent_id": 1, "state_before": {"depth_m": depth}, "status": status,
            "allowed_actions": list(EFFECTS), "attempts": attempts,
            "action_costs_usd": {"do_nothing": 0.0, "buy_insurance": premium,
                                 "elevate_house": 40000.0, "relocate": 70000.0},
            "final_proposal": last["decision"], "threat_label": last["threat_appraisal"]["label"],
            "coping_label": last["coping_appraisal"]["label"]}


def test_threat_by_depth_bins_and_correlation() -> None:
    records = [_record(0.0, "VL", "do_nothing"), _record(0.0, "L", "do_nothing"),
               _record(0.3, "M", "buy_insurance"), _record(0.8, "H", "buy_insurance"),
               _record(1.4, "VH", "elevate_house")]
    table, summary = threat_by_depth(records, LABELS)
    assert table["n"].tolist() == [2, 1, 1, 1]
    assert table["mean_threat_rank"].tolist() == [0.5, 2.0, 3.0, 4.0]
    assert table["share_high"].tolist() == [0.0, 0.0, 1.0, 1.0]
    assert summary["rho"] > 0.9 and summary["p_value"] < 0.05 and summary["n"] == 5


def test_uptake_by_cost_falls_for_a_price_sensitive_run() -> None:
    records = [_record(0.0, "M", "buy_insurance" if p < 1500 else "do_nothing", premium=p)
               for p in (500, 800, 1100, 1400, 1700, 2000, 2300, 2600)]
    table, summary = uptake_by_cost(records, EFFECTS)
    assert table["share_chosen"].tolist() == [1.0, 1.0, 0.0, 0.0]
    assert summary["rho"] < -0.8 and summary["p_value"] < 0.05


def test_laundering_rate_reads_the_first_and_final_proposals() -> None:
    laundered = _record(1.0, "H", "do_nothing", status="retry_approved", attempts=[
        _attempt("H", "do_nothing", error=True), _attempt("L", "do_nothing")])
    acted = _record(1.0, "H", "do_nothing", status="retry_approved", attempts=[
        _attempt("H", "do_nothing", error=True), _attempt("H", "buy_insurance")])
    result = laundering_rate([laundered, acted, _record(0.0, "L", "do_nothing")])
    assert result["n_blocked"] == 2 and result["rate"] == 0.5
    assert laundering_rate([_record(0.0, "L", "do_nothing")])["rate"] is None


def test_a_block_with_no_readable_reply_is_not_in_the_laundering_rate() -> None:
    # the re-asks gave nothing readable: no evidence of laundering nor of its absence
    garbled = _record(1.0, "H", "do_nothing", status="parse_failed")
    garbled["attempts"] = [_attempt("H", "do_nothing", error=True),
                           {"parsed": None, "rules": [], "llm": {}}]
    garbled["final_proposal"] = garbled["threat_label"] = garbled["coping_label"] = None
    laundered = _record(1.0, "H", "do_nothing", status="retry_approved", attempts=[
        _attempt("H", "do_nothing", error=True), _attempt("L", "do_nothing")])
    result = laundering_rate([garbled, laundered])
    assert result["n_blocked"] == 2 and result["unreadable"] == 1 and result["rate"] == 1.0
    assert laundering_rate([garbled])["rate"] is None


def test_reason_coherence_uses_the_batterys_patterns(repo_root) -> None:
    patterns = coherence_patterns(repo_root / "configs" / "validity")
    records = [_record(0.0, "L", "do_nothing",
                       attempts=[_attempt("L", "do_nothing", "The decision to do nothing this "
                                          "year is not reasonable because of the risk")]),
               _record(0.0, "L", "do_nothing",
                       attempts=[_attempt("L", "do_nothing", "No flood reached us.")])]
    result = reason_coherence_rate(records, EFFECTS, patterns)
    assert (result["n"], result["contradicting"], result["rate"]) == (2, 1, 0.5)


def test_proposal_gap_by_status() -> None:
    agents = pd.DataFrame({"proposed_action": ["a", "a", "b", None],
                           "executed_action": ["a", "b", "c", "a"],
                           "status": ["approved", "retry_approved", "rejected", "baseline"]})
    table = proposal_gap(agents).set_index("status")
    assert table.loc["all", "n"] == 3
    assert table.loc["all", "share_changed"] == pytest.approx(2 / 3)
    assert table.loc["approved", "share_changed"] == 0.0


def test_committed_runs() -> None:
    scripted = load_run(FIXTURES / "scripted_broker_run")
    result = laundering_rate(scripted.decisions)
    assert result["n_blocked"] > 0 and result["rate"] == 0.0  # the script changes its action
    embedded = load_run(FIXTURES / "embedded_llm_run")
    table, summary = threat_by_depth(embedded.decisions, embedded.pmt_labels)
    # a decision with no readable reply (parse_failed: no appraisal) is left out
    readable = [d for d in embedded.decisions if any(a["parsed"] for a in d["attempts"])]
    assert 0 < len(readable) and table["n"].sum() == len(readable)
