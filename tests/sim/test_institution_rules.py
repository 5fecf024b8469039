"""The institutions' rules (sim.institution_rules) on the shipped institutions.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governed_broker.config.loader import load_institutions
from governed_broker.contracts.institutions import InstitutionSituation
from governed_broker.sim.institution_rules import (
    evaluate,
    limit_violations,
    statements,
    within_limits,
)

REPO = Path(__file__).resolve().parents[2]
DOMAIN = load_institutions(REPO / "institutions.yaml")
GOV, INS = DOMAIN.government, DOMAIN.insurer


def gov_situation(funds: float = 100_000.0, flooded: int = 0, **levers: float):
    before = {"subsidy_share": 0.5, "grant_budget_usd": 40_000.0, "buyout_budget_usd": 20_000.0}
    before.update(levers)
    return InstitutionSituation("government", 3, {"funds_available_usd": funds,
                                                  "households_flooded": flooded}, before)


def ins_situation(ratio: float | None = 0.5, **levers: float):
    before = {"loading": 1.15, "crs_discount": 0.1}
    before.update(levers)
    return InstitutionSituation("insurer", 3, {"experience_loss_ratio": ratio}, before)


def fired(outcomes) -> set[str]:
    return {o.rule_id for o in outcomes if o.fired}


def test_a_budget_above_the_funds_fires_with_the_amounts_in_its_message() -> None:
    s = gov_situation(funds=100_000.0)
    outcomes = evaluate(GOV, "strict", s, {"subsidy_share": 0.5, "grant_budget_usd": 80_000.0,
                                           "buyout_budget_usd": 30_000.0})
    [rule] = [o for o in outcomes if o.fired]
    assert rule.rule_id == "budget_within_funds" and rule.severity == "ERROR"
    assert "$110,000" in rule.message and "$100,000" in rule.message
    ok = evaluate(GOV, "strict", s, {"subsidy_share": 0.5, "grant_budget_usd": 70_000.0,
                                     "buyout_budget_usd": 30_000.0})
    assert fired(ok) == set()  # exactly the funds is allowed


def test_legal_share_and_yearly_step_of_the_grant() -> None:
    s = gov_situation(subsidy_share=0.72)
    assert fired(evaluate(GOV, "strict", s, {"subsidy_share": 0.77, "grant_budget_usd": 0.0,
                                             "buyout_budget_usd": 0.0})) == {
        "subsidy_share_legal"}
    assert fired(evaluate(GOV, "strict", gov_situation(), {
        "subsidy_share": 0.6, "grant_budget_usd": 0.0, "buyout_budget_usd": 0.0})) == {
        "subsidy_share_step"}
    assert fired(evaluate(GOV, "strict", gov_situation(), {
        "subsidy_share": 0.55, "grant_budget_usd": 0.0, "buyout_budget_usd": -1.0})) == {
        "budgets_not_negative"}


def test_premium_increase_cap_is_relative_and_tolerates_rounding() -> None:
    s = ins_situation(loading=1.15)
    assert fired(evaluate(INS, "strict", s, {"loading": 1.357, "crs_discount": 0.1})) == set()
    assert fired(evaluate(INS, "strict", s, {"loading": 1.36, "crs_discount": 0.1})) == {
        "premium_increase_cap"}


def test_community_discount_comes_in_classes_one_a_year() -> None:
    s = ins_situation(crs_discount=0.1)
    assert fired(evaluate(INS, "strict", s, {"loading": 1.15, "crs_discount": 0.15})) == set()
    assert fired(evaluate(INS, "strict", s, {"loading": 1.15, "crs_discount": 0.12})) == {
        "crs_discount_class"}
    assert fired(evaluate(INS, "strict", s, {"loading": 1.15, "crs_discount": 0.2})) == {
        "crs_one_class_a_year"}
    assert fired(evaluate(INS, "strict", ins_situation(crs_discount=0.45), {
        "loading": 1.15, "crs_discount": 0.5})) == {"crs_discount_range"}


def test_direction_rules_are_warnings_that_need_their_fact() -> None:
    lower = {"loading": 1.0, "crs_discount": 0.1}
    losing = evaluate(INS, "strict", ins_situation(ratio=1.4), lower)
    [warn] = [o for o in losing if o.fired]
    assert warn.rule_id == "rates_cut_while_losing" and warn.severity == "WARNING"
    assert "1.4" in warn.message
    assert fired(evaluate(INS, "strict", ins_situation(ratio=0.6), lower)) == set()
    assert fired(evaluate(INS, "strict", ins_situation(ratio=None), lower)) == set()
    cut = {"subsidy_share": 0.5, "grant_budget_usd": 0.0, "buyout_budget_usd": 10_000.0}
    assert fired(evaluate(GOV, "strict", gov_situation(flooded=3), cut)) == {
        "buyouts_cut_after_flood"}
    # warnings are not limits: the world never refuses a decision for them
    assert limit_violations(GOV, gov_situation(flooded=3), cut) == []


def test_profiles_switch_rules_off_but_not_the_limits() -> None:
    bad = {"subsidy_share": 0.9, "grant_budget_usd": 0.0, "buyout_budget_usd": 0.0}
    assert evaluate(GOV, "disabled", gov_situation(), bad) == []
    assert {o.rule_id for o in limit_violations(GOV, gov_situation(), bad)} == {
        "subsidy_share_legal", "subsidy_share_step"}


def test_a_rule_on_a_lever_the_institution_lacks_this_year_is_skipped() -> None:
    s = InstitutionSituation("government", 1, {"funds_available_usd": 10.0},
                             {"subsidy_share": 0.5, "grant_budget_usd": 0.0})
    assert fired(evaluate(GOV, "strict", s, {"subsidy_share": 0.5,
                                             "grant_budget_usd": 5.0})) == set()
    assert any("$10" in text for text in statements(GOV, s))


@settings(max_examples=300, deadline=None)
@given(share=st.floats(-2, 2), grant=st.floats(-1e6, 1e7), buyout=st.floats(-1e6, 1e7),
       funds=st.floats(0, 5e6), before=st.floats(0, 0.75))
def test_within_limits_never_breaks_a_limit_government(share, grant, buyout, funds,
                                                       before) -> None:
    s = gov_situation(funds=funds, subsidy_share=round(before, 2))
    levers = within_limits(GOV, s, {"subsidy_share": share, "grant_budget_usd": grant,
                                    "buyout_budget_usd": buyout})
    assert limit_violations(GOV, s, levers) == []


@settings(max_examples=300, deadline=None)
@given(loading=st.floats(-5, 10), crs=st.floats(-1, 1), before=st.floats(0.5, 3.0),
       crs_class=st.integers(0, 9))
def test_within_limits_never_breaks_a_limit_insurer(loading, crs, before, crs_class) -> None:
    s = ins_situation(loading=before, crs_discount=crs_class * 0.05)
    levers = within_limits(INS, s, {"loading": loading, "crs_discount": crs})
    assert limit_violations(INS, s, levers) == []


def test_within_limits_scales_budgets_down_to_the_funds_in_whole_cents() -> None:
    s = gov_situation(funds=1000.0)
    out = within_limits(GOV, s, {"subsidy_share": 0.5, "grant_budget_usd": 3000.0,
                                 "buyout_budget_usd": 1000.0})
    assert out["grant_budget_usd"] == pytest.approx(750.0)
    assert out["buyout_budget_usd"] == pytest.approx(250.0)
    assert out["grant_budget_usd"] + out["buyout_budget_usd"] <= 1000.0


def test_an_overflowing_total_breaks_the_funds_limit_and_its_message_is_short() -> None:
    levers = {"subsidy_share": 0.5, "grant_budget_usd": 1e308, "buyout_budget_usd": 1e308}
    [broken] = limit_violations(GOV, gov_situation(), levers)  # the sum is inf
    assert broken.rule_id == "budget_within_funds" and "$inf" in broken.message
    assert len(broken.message) < 300
    assert within_limits(GOV, gov_situation(), levers)["grant_budget_usd"] == 0.0
