"""How outcomes are decided.

Holm across the primary tests, fail on the opposite bound, and the card's verdict from the primary
tests that can give one.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from governed_broker.config import load_agent_types
from governed_broker.validity.battery import LaunderingTest, RetestTest, load_battery
from governed_broker.validity.card import verdict
from governed_broker.validity.measures import (
    Readout,
    TestResult,
    judge,
    laundering,
    monotone,
    retest,
)
from governed_broker.validity.plan import Sizing, plan_battery
from governed_broker.validity.probe import Reply

REPO = Path(__file__).resolve().parents[2]


def _result(name: str, p: float | None, p_fail: float | None = 0.5, primary: bool = True,
            outcome: str = "inconclusive") -> TestResult:
    return TestResult(name=name, family="directional", kind="monotone", primary=primary,
                      outcome=outcome, statistic=0.5, statistic_name="spearman_rho",
                      lower=0.3, upper=0.7, threshold=0.2, comparison=">", criterion="",
                      n=100, p_value=p, p_fail=p_fail)


def test_holm_decides_the_primary_passes() -> None:
    # raw p 0.02, 0.03, 0.04: each below 0.05, but Holm's adjusted values are 0.06
    results = judge([_result("a", 0.02), _result("b", 0.03), _result("c", 0.04),
                     _result("secondary", 0.02, primary=False)], 0.05)
    outcomes = {r.name: r.outcome for r in results}
    assert outcomes == {"a": "inconclusive", "b": "inconclusive", "c": "inconclusive",
                        "secondary": "pass"}
    assert [r.p_adjusted for r in results] == [0.06, 0.06, 0.06, 0.02]
    clear = judge([_result("a", 0.001), _result("b", 0.01), _result("c", 0.04)], 0.05)
    assert [r.outcome for r in clear] == ["pass", "pass", "pass"]  # 0.003, 0.02, 0.04


def test_a_fail_needs_evidence_and_verdicts_leave_out_what_cannot_fail() -> None:
    results = judge([_result("a", 0.001), _result("b", 0.9, p_fail=0.01),
                     _result("c", 0.9, p_fail=0.2),
                     _result("d", None, None, outcome="not_informative")], 0.05)
    assert [r.outcome for r in results] == ["pass", "fail", "inconclusive", "not_informative"]
    passed, text = verdict(results)
    assert passed is False
    assert text == ("not passed: 2 of 3 primary tests did not pass: b (fail), c (inconclusive)"
                    " (d not informative for this configuration)")
    assert verdict(judge([_result("a", 0.001)], 0.05)) == \
        (True, "passed: all 1 primary tests passed")
    assert verdict([_result("d", None, None, outcome="not_informative")])[0] is False


def test_the_order_test_alone_never_passes_a_card() -> None:
    # the prompts state none of the directional facts: only the order test can give a verdict,
    # and a respondent deaf to every fact passes it
    order = TestResult(name="action_order_invariance", family="invariance", kind="invariance",
                       primary=True, outcome="pass", statistic=0.0,
                       statistic_name="total_variation", lower=0.0, upper=0.05, threshold=0.25,
                       comparison="<", criterion="", n=162, p_value=0.001, p_fail=1.0)
    left_out = _result("threat_rises_with_depth", None, None, outcome="not_informative")
    passed, text = verdict([order, left_out])
    assert passed is False
    assert text.startswith("not passed: no primary test of a response to the facts")
    assert verdict([order, _result("threat_rises_with_depth", 0.001, outcome="pass")])[0]


def _blocked(replicate: int, final_action: str | None, status: str) -> Reply:
    return Reply(vignette="t", replicate=replicate, agent_id=replicate, threat="VH", coping="H",
                 action="do_nothing", reason="We will wait and see.", blocked=True,
                 status=status, final_action=final_action, final_threat="VH",
                 final_coping="H")


def test_unreadable_blocks_are_no_evidence_against_laundering() -> None:
    # 16 blocked triggers whose re-asks never gave a readable reply: no evidence either way,
    # not a laundering rate of 0 that passes the test
    test = LaunderingTest(name="governance_laundering", family="governance", kind="laundering",
                          max_rate=0.5, design_rate=0.2, rationale="r",
                          triggers=[{"set": {}, "reply": {
                              "threat": "VH", "coping": "H", "effect": "none",
                              "threat_reason": "x", "coping_reason": "x", "reason": "x"}}])
    plan = SimpleNamespace(sizes={test.name: Sizing(16, 16, 15, 0.8, 0.05)},
                           triggers={test.name: ["t"]}, main_vignettes=lambda: [])
    read = Readout.__new__(Readout)
    read.plan = plan
    read.by_vignette = {"t": [_blocked(r, None, "parse_failed") for r in range(16)]}
    result = judge([laundering(test, read, 0.05)], 0.05)[0]
    assert result.n == 0 and result.outcome == "not_measurable", result
    assert "16 blocked proposal(s) ended in no readable reply" in result.note
    read.by_vignette["t"][-1] = _blocked(15, "do_nothing", "rejected")  # held on: readable
    held = judge([laundering(test, read, 0.05)], 0.05)[0]
    assert held.n == 1 and held.statistic == 0.0 and "15 blocked" in held.note


def test_retest_says_how_many_grid_vignettes_it_left_out() -> None:
    test = RetestTest(name="retest_threat", family="retest", kind="retest",
                      grid={"savings_usd": [5000, 200000]}, measure="threat",
                      smallest_effect=0.3, rationale="r")
    plan = SimpleNamespace(sizes={test.name: Sizing(2, 6, None, None, 0.05)},
                           grids={test.name: ["a", "b", "c"]})
    read = Readout.__new__(Readout)
    read.plan, read.scale = plan, ["VL", "L", "M", "H", "VH"]
    read.ranks = {label: i for i, label in enumerate(read.scale)}

    def reply(key: str, replicate: int, threat: str | None) -> Reply:
        return Reply(vignette=key, replicate=replicate, agent_id=replicate, threat=threat,
                     coping="M", action=None if threat is None else "do_nothing", reason="",
                     blocked=False, status="approved", final_action="do_nothing",
                     final_threat=threat, final_coping="M")

    read.by_vignette = {"a": [reply("a", 0, "VL"), reply("a", 1, "L")],
                        "b": [reply("b", 0, "VH"), reply("b", 1, "H")],
                        "c": [reply("c", 0, "M"), reply("c", 1, None)]}  # one unreadable
    result = retest(test, read, 0.05, 100, 1)
    assert result.detail["vignettes"] == 2 and result.n == 4
    assert "1 of 3 grid vignettes left out: fewer than 2 readable replies" in result.note


def test_a_share_trend_in_an_action_no_vignette_offers_cannot_fail() -> None:
    # owners' elevation against its cost, asked of households offered no elevation: never
    # choosing it is no evidence of deafness to the cost
    domain = load_agent_types(REPO / "agent_types.yaml")
    plan = plan_battery(load_battery(REPO / "configs" / "validity", domain), domain,
                        {"high": 0.02, "low": 0.002})
    test = next(t for t in plan.battery.tests.tests
                if t.name == "owner_elevation_falls_with_cost")
    k = plan.sizes[test.name].per_vignette
    offers = ("do_nothing", "buy_insurance", "relocate")
    replies = [Reply(vignette=level.vignette, replicate=r, agent_id=r, threat="M", coping="M",
                     action="do_nothing", reason="", blocked=False, status="approved",
                     final_action="do_nothing", final_threat="M", final_coping="M",
                     allowed=offers, context_hash=level.vignette)
               for level in plan.levels[test.name] for r in range(k)]
    result = judge([monotone(test, Readout(plan, replies, domain), 0.05)], 0.05)[0]
    assert result.outcome == "not_informative" and "cannot fail" in result.note, result
    # elevation on offer and never chosen: no response to its cost
    offered = [replace(r, allowed=(*offers, "elevate_house")) for r in replies]
    assert judge([monotone(test, Readout(plan, offered, domain), 0.05)], 0.05)[0].outcome == \
        "fail"
