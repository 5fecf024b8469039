"""The decision filters, laundering cases included."""

from __future__ import annotations

from pathlib import Path

from governed_broker.explore.filters import (
    DecisionFilter,
    fired_rule_ids,
    laundering_of,
    matching_decisions,
)
from governed_broker.explore.run_view import load_view

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _reply(threat: str, coping: str, action: str) -> dict:
    return {"threat_appraisal": {"label": threat}, "coping_appraisal": {"label": coping},
            "decision": action}


def _attempt(reply: dict | None, fired: list[tuple[str, str]]) -> dict:
    return {"parsed": reply, "rules": [{"id": i, "severity": s, "fired": True}
                                       for i, s in fired]}


def test_a_label_lowered_after_a_block_is_laundering() -> None:
    decision = {"attempts": [
        _attempt(_reply("H", "M", "do_nothing"), [("high_threat_inaction", "ERROR")]),
        _attempt(_reply("L", "M", "do_nothing"), [])]}
    (case,) = laundering_of(decision)
    assert (case.rule, case.label, case.before, case.after, case.label_only) == (
        "high_threat_inaction", "threat", "H", "L", True)
    assert case.describe() == "threat H -> L after high_threat_inaction (same action)"


def test_changing_the_action_with_the_same_labels_or_a_warning_is_not_laundering() -> None:
    reconsidered = {"attempts": [
        _attempt(_reply("H", "M", "do_nothing"), [("high_threat_inaction", "ERROR")]),
        _attempt(_reply("H", "M", "buy_insurance"), [])]}
    warned = {"attempts": [
        _attempt(_reply("H", "L", "do_nothing"), [("fatalistic_inaction", "WARNING")]),
        _attempt(_reply("M", "L", "do_nothing"), [])]}
    unreadable = {"attempts": [
        _attempt(_reply("H", "M", "do_nothing"), [("high_threat_inaction", "ERROR")]),
        _attempt(None, [])]}
    assert laundering_of(reconsidered) == laundering_of(warned) == laundering_of(unreadable) == []
    relabelled = {"attempts": [
        _attempt(_reply("H", "M", "do_nothing"), [("high_threat_inaction", "ERROR")]),
        _attempt(_reply("H", "L", "buy_insurance"), [])]}
    (case,) = laundering_of(relabelled)
    assert case.label == "coping" and not case.label_only


def test_filters_combine_on_a_sample_run() -> None:
    view = load_view(FIXTURES / "scripted_broker_run", live=False)
    assert fired_rule_ids(view.decisions.values()) == [
        "already_elevated", "cannot_afford", "renter_cannot_elevate"]
    everything = matching_decisions(view, DecisionFilter())
    assert len(everything) == len(view.agents) == 30
    renters = matching_decisions(view, DecisionFilter(rule="renter_cannot_elevate"))
    assert len(renters) and set(renters["tenure"]) == {"renter"}
    owners = matching_decisions(view, DecisionFilter(rule="renter_cannot_elevate",
                                                     tenure="owner"))
    assert owners.empty
    retried = matching_decisions(view, DecisionFilter(status="retry_approved"))
    assert set(retried["status"]) == {"retry_approved"}
    assert matching_decisions(view, DecisionFilter(laundering=True)).empty
    mg = matching_decisions(view, DecisionFilter(marginalised=True))
    assert set(zip(mg["year"], mg["agent_id"], strict=True)) == set(
        view.agents.loc[view.agents["marginalised"] == True, ["year", "agent_id"]]  # noqa: E712
        .itertuples(index=False, name=None))
    assert 0 < len(mg) < 30
    low = matching_decisions(view, DecisionFilter(zone="low"))
    assert set(low["flood_zone"]) == {"low"} and len(low) < 30
