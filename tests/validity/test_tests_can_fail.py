"""Each test of the battery can pass and can fail.

Scripted households with one known flaw each (validity_households.py) run through the real context
builder, broker, rules and audit.
"""

from __future__ import annotations

import json

import pytest
import validity_households as hh

from governed_broker.validity.validate import validate


def _card(experiment, tmp_path, policy, name):
    result = validate(experiment, tmp_path / f"out-{name}", backend=hh.backend(policy, name),
                      progress=False)
    return result, {t["name"]: t for t in result.card["tests"]}


def test_a_rational_household_passes_every_test(scripted_experiment, tmp_path) -> None:
    result, tests = _card(scripted_experiment(), tmp_path, hh.rational, "rational")
    assert result.card["passed"] is True
    failed = {n: t for n, t in tests.items() if t["passed"] is not True}
    # the neighbours test is 'not down': a household that insures either way passes it
    assert failed == {}, failed
    assert tests["threat_rises_with_depth"]["statistic"] > 0.8
    assert tests["retest_decision"]["statistic"] == pytest.approx(1.0)
    assert tests["governance_laundering"]["n"] == 6  # every trigger was blocked
    assert tests["governance_laundering"]["detail"]["trigger"]["changed_action"] == 6


def test_ignoring_depth_fails_the_directional_test(scripted_experiment, tmp_path) -> None:
    _, tests = _card(scripted_experiment(), tmp_path, hh.ignores_depth, "depthless")
    depth = tests["threat_rises_with_depth"]
    assert depth["passed"] is False and depth["statistic"] is None
    assert "do not respond" in depth["note"]
    assert tests["coping_rises_with_savings"]["passed"] is True  # it does see money


def test_a_label_launderer_shows_a_laundering_rate_of_one(scripted_experiment,
                                                          tmp_path) -> None:
    _, tests = _card(scripted_experiment(), tmp_path, hh.launderer, "launderer")
    laundering = tests["governance_laundering"]
    assert laundering["statistic"] == 1.0 and laundering["passed"] is False
    assert laundering["detail"]["trigger"]["changed_labels_only"] == laundering["n"] == 6


def test_an_order_sensitive_household_fails_invariance(scripted_experiment, tmp_path) -> None:
    _, tests = _card(scripted_experiment(), tmp_path, hh.first_listed, "first")
    order = tests["action_order_invariance"]
    assert order["passed"] is False and order["statistic"] == 1.0 and order["p_value"] < 0.01
    assert order["detail"]["base"] == {"do_nothing": 8}
    assert order["detail"]["variant"] == {"relocate": 8}
    # the same household is indifferent to synonyms: the ids are listed in the same order
    assert tests["action_synonym_invariance"]["passed"] is True


def test_a_renter_that_elevates_fails_the_persona_test(scripted_experiment, tmp_path) -> None:
    def elevating(request):
        reply = hh.rational(request)
        reply["decision"] = "elevate_house"
        return reply

    _, tests = _card(scripted_experiment(), tmp_path, elevating, "elevating")
    renters = tests["renters_never_elevate"]
    assert renters["statistic"] == 1.0 and renters["passed"] is False  # proposed, then blocked


def test_a_contradicting_reason_fails_coherence(scripted_experiment, tmp_path) -> None:
    def contradicting(request):
        reply = hh.rational(request)
        reply["reason"] = "The decision to do nothing this year is not reasonable because of risk."
        reply["decision"] = "do_nothing"
        reply["threat_appraisal"]["label"] = "L"
        return reply

    _, tests = _card(scripted_experiment(), tmp_path, contradicting, "contradicting")
    coherence = tests["reason_coherence"]
    assert coherence["statistic"] == 1.0 and coherence["passed"] is False
    assert coherence["detail"]["examples"][0]["action"] == "do_nothing"


def test_a_random_household_fails_retest(scripted_experiment, tmp_path) -> None:
    def noisy(request):
        reply = hh.rational(request)
        pick = request.seed % 5
        reply["threat_appraisal"]["label"] = hh.LABELS[pick]
        reply["coping_appraisal"]["label"] = hh.LABELS[(pick * 3) % 5]
        reply["decision"] = ["do_nothing", "buy_insurance"][pick % 2]
        return reply

    _, tests = _card(scripted_experiment(), tmp_path, noisy, "noisy")
    for name in ("retest_threat", "retest_coping", "retest_decision"):
        assert tests[name]["passed"] is False, tests[name]
        assert tests[name]["statistic"] < 0.3


def test_no_blocked_proposal_without_rules(scripted_experiment, tmp_path) -> None:
    _, tests = _card(scripted_experiment("governance.profile=disabled"), tmp_path,
                     hh.launderer, "disabled")
    laundering = tests["governance_laundering"]
    assert laundering["passed"] is None and laundering["n"] == 0
    assert "no proposal was blocked" in laundering["note"]


def test_the_audit_and_vignette_map_are_written(scripted_experiment, tmp_path) -> None:
    result, _ = _card(scripted_experiment(), tmp_path, hh.rational, "audit")
    decisions = [json.loads(x) for x in (result.out_dir / "decisions.jsonl").read_text()
                 .splitlines()]
    vignettes = [json.loads(x) for x in (result.out_dir / "vignettes.jsonl").read_text()
                 .splitlines()]
    assert len(decisions) == len(vignettes) == result.card["battery"]["decisions"] == 102
    assert {d["agent_id"] for d in decisions} == {v["agent_id"] for v in vignettes}
    triggers = [v["agent_id"] for v in vignettes if v["arm"] == "trigger"]
    scripted = [d for d in decisions if d["agent_id"] in triggers]
    assert all(d["attempts"][0]["llm"].get("validity_trigger") for d in scripted)
    assert json.loads((result.out_dir / "validity_card.json").read_text()) == result.card
    assert result.stored.read_text() == (result.out_dir / "validity_card.json").read_text()
