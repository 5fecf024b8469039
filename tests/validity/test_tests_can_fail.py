"""Each test of the battery can pass and can fail.

Scripted households with one known flaw each (validity_households.py) run through the real context
builder, broker, rules and audit, on the small battery of conftest.py (at most 4 replies per
vignette: the deterministic households give their verdicts with few replies; a flaw shown by too few
is inconclusive).
"""

from __future__ import annotations

import json

import pytest
import validity_households as hh
import yaml

from governed_broker.validity.validate import validate


def _card(experiment, tmp_path, policy, name):
    result = validate(experiment, tmp_path / f"out-{name}", backend=hh.backend(policy, name),
                      progress=False)
    return result, {t["name"]: t for t in result.card["tests"]}


def test_a_rational_household_passes_every_test(scripted_experiment, tmp_path) -> None:
    result, tests = _card(scripted_experiment(), tmp_path, hh.rational, "rational")
    assert result.card["passed"] is True
    assert result.card["verdict"] == "passed: all 7 primary tests passed"
    # 4 replies a level are too few to exclude a wrong-way effect on the guards: inconclusive
    others = {n: t["outcome"] for n, t in tests.items() if t["outcome"] != "pass"}
    assert others == {"insurance_not_down_with_neighbours": "inconclusive"}, others
    assert tests["threat_rises_with_depth"]["statistic"] > 0.8
    assert tests["retest_decision"]["statistic"] == pytest.approx(1.0)
    assert tests["governance_laundering"]["n"] == 8  # every trigger was blocked
    assert tests["governance_laundering"]["detail"]["trigger"]["changed_action"] == 8


def test_ignoring_depth_is_no_pass_of_the_directional_test(scripted_experiment,
                                                           tmp_path) -> None:
    result, tests = _card(scripted_experiment(), tmp_path, hh.ignores_depth, "depthless")
    depth = tests["threat_rises_with_depth"]
    assert depth["outcome"] == "inconclusive" and depth["statistic"] == 0.0
    assert "no response" in depth["note"]
    assert result.card["passed"] is False
    assert "threat_rises_with_depth (inconclusive)" in result.card["verdict"]
    assert tests["coping_rises_with_savings"]["outcome"] == "pass"  # it does see money


def test_a_label_launderer_shows_a_laundering_rate_of_one(scripted_experiment,
                                                          tmp_path) -> None:
    _, tests = _card(scripted_experiment(), tmp_path, hh.launderer, "launderer")
    laundering = tests["governance_laundering"]
    assert laundering["statistic"] == 1.0 and laundering["outcome"] == "fail"
    assert laundering["detail"]["trigger"]["changed_labels_only"] == laundering["n"] == 8


def test_an_order_sensitive_household_fails_invariance(scripted_experiment, tmp_path) -> None:
    result, tests = _card(scripted_experiment(), tmp_path, hh.first_listed, "first")
    order = tests["action_order_invariance"]
    assert order["outcome"] == "fail" and order["statistic"] == 1.0
    assert order["lower"] > 0.25 and order["p_fail"] < 0.01
    assert order["detail"]["base"] == {"do_nothing": 4}
    assert order["detail"]["variant"] == {"relocate": 4}
    # the same household is indifferent to synonyms: the ids are listed in the same order
    assert tests["action_synonym_invariance"]["outcome"] == "pass"
    assert result.card["passed"] is False


def _with_share_tests(experiment, tmp_path):
    """The experiment's battery plus two share tests.

    Renters proposing elevation (which no renter is offered) and owners relocating.
    """
    battery = experiment.config.resolve_path(experiment.config.validity.battery_dir)
    tests = yaml.safe_load((battery / "tests.yaml").read_text())
    share = {"family": "persona", "kind": "share_at_most", "vary": "flood_depth_m",
             "levels": [0.6, 1.5], "max_share": 0.5, "design_share": 0.1, "rationale": "test"}
    tests["tests"] += [
        {**share, "name": "renters_never_elevate", "measure": "share:elevate",
         "set": {"tenure": "renter", "structure_value_usd": 0}},
        {**share, "name": "owners_rarely_relocate", "measure": "share:relocate"}]
    (battery / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    return experiment


def test_share_tests_pass_fail_or_cannot_fail(scripted_experiment, tmp_path) -> None:
    def relocating(request):
        reply = hh.rational(request)
        allowed = request.json_schema["properties"]["decision"]["enum"]
        reply["decision"] = "elevate_house" if "elevate_house" not in allowed else "relocate"
        return reply

    experiment = _with_share_tests(scripted_experiment(), tmp_path)
    _, rational = _card(experiment, tmp_path, hh.rational, "rational")
    assert rational["owners_rarely_relocate"]["outcome"] == "pass"
    _, moving = _card(experiment, tmp_path, relocating, "relocating")
    assert moving["owners_rarely_relocate"]["outcome"] == "fail"
    # no renter is offered elevation: the test cannot fail, even when (unconstrained, as a
    # script is) the household proposes it, and says so
    renters = moving["renters_never_elevate"]
    assert renters["statistic"] == 1.0 and renters["outcome"] == "not_informative"
    assert "cannot fail" in renters["note"]


def test_a_contradicting_reason_fails_coherence(scripted_experiment, tmp_path) -> None:
    def contradicting(request):
        reply = hh.rational(request)
        reply["reason"] = "The decision to do nothing this year is not reasonable because of risk."
        reply["decision"] = "do_nothing"
        reply["threat_appraisal"]["label"] = "L"
        return reply

    _, tests = _card(scripted_experiment(), tmp_path, contradicting, "contradicting")
    coherence = tests["reason_coherence"]
    assert coherence["statistic"] == 1.0 and coherence["outcome"] == "fail"
    assert coherence["detail"]["examples"][0]["action"] == "do_nothing"


def test_a_random_household_fails_retest(scripted_experiment, tmp_path) -> None:
    """Labels and choices drawn from the request seed.

    With common random numbers every vignette's replicate r answers alike, so nothing distinguishes
    the vignettes.
    """
    def noisy(request):
        reply = hh.rational(request)
        pick = request.seed % 5
        reply["threat_appraisal"]["label"] = hh.LABELS[pick]
        reply["coping_appraisal"]["label"] = hh.LABELS[(pick * 3) % 5]
        reply["decision"] = ["do_nothing", "buy_insurance"][pick % 2]
        return reply

    _, tests = _card(scripted_experiment(), tmp_path, noisy, "noisy")
    for name in ("retest_threat", "retest_coping", "retest_decision"):
        assert tests[name]["outcome"] == "fail", tests[name]
        assert tests[name]["statistic"] is None or tests[name]["statistic"] < 0.3
    # the seed decides the label identically at every level: no trend
    assert tests["threat_rises_with_depth"]["statistic"] == 0.0


def test_no_blocked_proposal_without_rules(scripted_experiment, tmp_path) -> None:
    _, tests = _card(scripted_experiment("governance.profile=disabled"), tmp_path,
                     hh.launderer, "disabled")
    laundering = tests["governance_laundering"]
    assert laundering["outcome"] == "not_measurable" and laundering["n"] == 0
    assert "no proposal was blocked" in laundering["note"]


def test_the_audit_and_vignette_map_are_written(scripted_experiment, tmp_path) -> None:
    result, _ = _card(scripted_experiment(), tmp_path, hh.rational, "audit")
    decisions = [json.loads(x) for x in (result.out_dir / "decisions.jsonl").read_text()
                 .splitlines()]
    vignettes = [json.loads(x) for x in (result.out_dir / "vignettes.jsonl").read_text()
                 .splitlines()]
    assert len(decisions) == len(vignettes) == result.card["battery"]["decisions"] == \
        result.card["battery"]["budget"]["decisions"]
    assert {d["agent_id"] for d in decisions} == {v["agent_id"] for v in vignettes}
    triggers = [v["agent_id"] for v in vignettes if v["arm"] == "trigger"]
    scripted = [d for d in decisions if d["agent_id"] in triggers]
    assert all(d["attempts"][0]["llm"].get("validity_trigger") for d in scripted)
    # common random numbers: replicate r of every vignette was sent with the same seed
    replicate = {v["agent_id"]: v["replicate"] for v in vignettes}
    sent: dict[int, set] = {}
    for d in decisions:
        first = d["attempts"][0]["llm"]
        if "battery_seed" in first:
            sent.setdefault(replicate[d["agent_id"]], set()).add(first["battery_seed"])
    assert sent and all(len(seeds) == 1 for seeds in sent.values())
    assert len({next(iter(s)) for s in sent.values()}) == len(sent)
    assert json.loads((result.out_dir / "validity_card.json").read_text()) == result.card
    assert result.stored.read_text() == (result.out_dir / "validity_card.json").read_text()
