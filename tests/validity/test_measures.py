"""How outcomes are decided.

Holm across the primary tests, fail on the opposite bound, and the card's verdict from the primary
tests that can give one.
"""

from __future__ import annotations

from governed_broker.validity.card import verdict
from governed_broker.validity.measures import TestResult, judge


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
