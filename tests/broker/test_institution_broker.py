"""The institutions' governed LLM maker (broker.institutions) with a scripted backend."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from governed_broker.broker.institutions import InstitutionBroker, build_institution_makers
from governed_broker.config import load_experiment
from governed_broker.config.resolved import resolve_experiment
from governed_broker.contracts.institutions import InstitutionSituation
from governed_broker.llm.scripted import ScriptedBackend
from governed_broker.runner import run_experiment
from governed_broker.seeding import child_seed
from governed_broker.sim.institution_rules import within_limits

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "fixtures" / "scripted_institutions.yaml"
LLM = {"backend": "scripted", "model": "institutions", "script": str(SCRIPT),
       "cache": {"mode": "off"}}
GOOD = {"assessment": "Funds are limited.", "subsidy_share": 0.5, "grant_budget_usd": 40_000,
        "buyout_budget_usd": 10_000, "reason": "Spend within the fund."}
GREEDY = {**GOOD, "grant_budget_usd": 900_000}


def government_maker(rules, *overrides: str) -> tuple[InstitutionBroker, ScriptedBackend]:
    config = load_experiment(REPO / "experiments" / "institutions.yaml", [
        "institutions.government.maker=llm", f"llm={json.dumps(LLM)}", *overrides])
    backend = ScriptedBackend(rules)
    makers = build_institution_makers(resolve_experiment(config), Path("."), backend=backend)
    assert set(makers) == {"government"}
    return makers["government"], backend


SITUATION = InstitutionSituation(
    "government", 4, {"funds_available_usd": 100_000.0, "balance_usd": 60_000.0,
                      "appropriation_usd": 40_000.0, "post_disaster_funds_usd": 0.0,
                      "households_active": 90, "households_flooded": 12,
                      "damage_usd": 850_000.0, "aid_usd": 0.0, "unrepaired_damage_usd": 0.0,
                      "share_elevated": 0.05, "share_insured": 0.3, "owners_may_elevate": 60,
                      "elevation_cost_usd": 80_000.0, "buyout_eligible": 3,
                      "buyout_eligible_value_usd": 700_000.0, "grants_paid_last_year": 1,
                      "grants_paid_last_year_usd": 40_000.0, "buyouts_last_year": 0,
                      "buyouts_last_year_usd": 0.0},
    {"subsidy_share": 0.5, "grant_budget_usd": 30_000.0, "buyout_budget_usd": 20_000.0})


def test_a_request_above_the_funds_is_asked_again_and_kept_within_them() -> None:
    maker, backend = government_maker([("cannot be accepted", GOOD), (".", GREEDY)])
    decision = maker.decide(SITUATION)
    assert decision.status == "retry_approved" and decision.retries == 1
    assert dict(decision.levers) == {"subsidy_share": 0.5, "grant_budget_usd": 40_000.0,
                                     "buyout_budget_usd": 10_000.0}
    assert decision.proposed["grant_budget_usd"] == 900_000.0
    fired = [(r["id"], r["severity"]) for r in decision.audit["rules_fired"]]
    # the reply also cut the buyout budget after a flood: recorded, not blocking
    assert fired == [("budget_within_funds", "ERROR"), ("buyouts_cut_after_flood", "WARNING"),
                     ("buyouts_cut_after_flood", "WARNING")]
    feedback = backend.calls[1].messages[-1]["content"]
    assert "[budget_within_funds]" in feedback and "$910,000" in feedback
    assert backend.calls[1].messages[-2] == {"role": "assistant",
                                             "content": json.dumps(GREEDY)}
    seeds = [a["seed"] for a in decision.audit["attempts"]]
    assert seeds == [child_seed(42, "institution", "government", 4, k) for k in (0, 1)]
    assert [c.tag for c in backend.calls] == ["institution:government"] * 2


def test_exhausted_re_asks_put_last_years_levers_within_the_limits() -> None:
    maker, _ = government_maker([(".", GREEDY)], "governance.max_retries=2")
    decision = maker.decide(SITUATION)
    assert decision.status == "rejected" and decision.retries == 2
    assert dict(decision.levers) == within_limits(maker.domain, SITUATION, SITUATION.levers)
    assert "budget_within_funds" in decision.reason


def test_an_unreadable_reply_is_asked_again_then_falls_back() -> None:
    maker, _ = government_maker([(".", {**GOOD, "grant_budget_usd": "a lot"})])
    decision = maker.decide(SITUATION)
    assert decision.status == "parse_failed"
    assert "grant_budget_usd" in decision.audit["attempts"][0]["parse_error"]
    assert len(decision.audit["attempts"]) == 3  # max_parse_retries 2 by default


def test_the_prompt_states_the_facts_levers_and_limits_and_the_schema_appraises_first() -> None:
    maker, backend = government_maker([(".", GOOD)])
    maker.decide(SITUATION)
    request = backend.calls[0]
    system, user = (m["content"] for m in request.messages)
    assert "flood mitigation programme" in system and '"grant_budget_usd": <number>' in system
    assert "- Money you may commit this year: $100,000" in user
    assert "- Households whose home flooded this year: 12" in user
    assert "- grant_budget_usd: money committed this year to elevation grants" in user
    assert "Last year: $30,000." in user
    assert "cannot exceed the $100,000 you may commit" in user
    assert "A grant pays between 0 and 0.75" in user
    assert list(request.json_schema["properties"]) == [
        "assessment", "subsidy_share", "grant_budget_usd", "buyout_budget_usd", "reason"]


def test_institutions_and_households_decide_through_the_broker_in_phase_order(
        tmp_path) -> None:
    config = load_experiment(REPO / "experiments" / "institutions.yaml", [
        "years=2", "population.size=6", "decision.maker=llm", f"llm={json.dumps(LLM)}",
        "institutions.government.maker=llm", "institutions.insurer.maker=llm",
        "institutions.government.appropriation_per_household_usd=1000",
        "outputs.plots=false", "outputs.progress=false"])
    out = run_experiment(config, tmp_path / "run", progress=False).out_dir
    records = [json.loads(line) for line in (out / "institutions.jsonl").open()]
    assert [(r["year"], r["order"], r["institution"]) for r in records] == [
        (1, 1, "government"), (1, 2, "insurer"), (2, 1, "government"), (2, 2, "insurer")]
    government, insurer = records[0], records[1]
    assert government["status"] == "retry_approved"
    assert [r["id"] for r in government["rules_fired"]
            if r["severity"] == "ERROR"] == ["budget_within_funds"]
    assert insurer["status"] == "approved" and insurer["levers"] == {"loading": 1.3,
                                                                     "crs_discount": 0.05}
    assert insurer["in_force_before"] == {"government": government["levers"]}
    with sqlite3.connect(out / "llm_calls.sqlite") as db:
        tags = [t for (t,) in db.execute("SELECT tag FROM calls ORDER BY id")]
    year_one = tags[: 3 + 6]
    assert year_one == ["institution:government"] * 2 + ["institution:insurer"] + [
        "decision"] * 6
    inst = pd.read_csv(out / "institutions_yearly.csv")
    assert list(inst["government_status"]) == ["retry_approved"] * 2
    assert list(inst["loading"]) == [1.3, 1.3]
    # the households priced their insurance with the insurer's levers of the year
    agents = pd.read_csv(out / "agents_yearly.csv")
    paid = agents[agents["premium_usd"] > 0]
    assert not paid.empty
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["institutions"]["insurer"]["decision_maker"].startswith("llm:scripted")


def test_a_scripted_institution_run_resumes_identically(tmp_path, monkeypatch) -> None:
    from governed_broker.run_dir import partial_dir
    from governed_broker.sim.model import FloodModel

    config = load_experiment(REPO / "experiments" / "institutions.yaml", [
        "years=5", "population.size=12", "institutions.government.maker=llm",
        f"llm={json.dumps(LLM)}", "hazard.zones.high.annual_probability=0.3",
        "institutions.government.appropriation_per_household_usd=1000",
        "outputs.plots=false", "outputs.progress=false"])
    reference = run_experiment(config, tmp_path / "ref", progress=False).out_dir
    original = FloodModel.execution_phase

    def crash(self, decisions):
        if self.year == 4:
            raise RuntimeError("killed in year 4")
        return original(self, decisions)

    out = tmp_path / "run"
    with monkeypatch.context() as m:
        m.setattr(FloodModel, "execution_phase", crash)
        with pytest.raises(RuntimeError, match="killed"):
            run_experiment(config, out, progress=False)
    assert partial_dir(out).exists()
    assert run_experiment(config, out, progress=False).resumed_from_year == 3
    for name in ("agents_yearly.csv", "model_yearly.csv", "institutions_yearly.csv"):
        assert (out / name).read_bytes() == (reference / name).read_bytes()
    lines = [json.loads(x) for x in (out / "institutions.jsonl").open()]
    ref = [json.loads(x) for x in (reference / "institutions.jsonl").open()]
    for a, b in zip(lines, ref, strict=True):
        for record in (a, b):  # wall-clock times differ between the runs
            record.pop("latency_s", None)
            for attempt in record.get("attempts", []):
                attempt.pop("latency_s")
        assert a == b


def test_an_llm_institutions_missing_script_is_a_configuration_error(tmp_path) -> None:
    # baseline households, an LLM government: its script is checked at load like theirs
    from governed_broker.config import ConfigError

    llm = {**LLM, "script": str(tmp_path / "none.yaml")}
    with pytest.raises(ConfigError, match="field 'llm.script'.*none.yaml.*not found"):
        load_experiment(REPO / "experiments" / "institutions.yaml", [
            f"llm={json.dumps(llm)}", "institutions.government.maker=llm"])


@pytest.mark.parametrize("budgets", [(1e308, 1e308), (10 ** 400, 0)])
def test_overflowing_lever_replies_are_asked_again_then_fall_back(budgets) -> None:
    # N1: two budgets of 1e308 (their sum overflows); N2: a 400-digit integer
    hostile = {**GOOD, "grant_budget_usd": budgets[0], "buyout_budget_usd": budgets[1]}
    maker, _ = government_maker([(".", hostile)])
    decision = maker.decide(SITUATION)
    assert decision.status == "parse_failed"
    assert dict(decision.levers) == within_limits(maker.domain, SITUATION, SITUATION.levers)
    error = decision.audit["attempts"][0]["parse_error"]
    assert "grant_budget_usd" in error and len(error) < 200
    json.dumps(decision.audit, allow_nan=False)


def test_a_run_whose_institutions_reply_overflowing_numbers_finishes(tmp_path) -> None:
    from governed_broker.cli import main

    script = tmp_path / "greedy.yaml"
    government = ("{assessment: 'all of it.', subsidy_share: 0.5, grant_budget_usd: 1.0e+308, "
                  "buyout_budget_usd: 1.0e+308, reason: 'more.'}")
    insurer = f"{{assessment: 'more.', loading: {'9' * 400}, crs_discount: 0.05, reason: 'x.'}}"
    script.write_text("".join(  # the first ask and each re-ask (which names the lever)
        f"- pattern: {pattern!r}\n  reply: {reply}\n"
        for pattern, reply in (("Policies in force", insurer), ("'loading'", insurer),
                               ("Money you may commit", government),
                               ("grant_budget_usd", government))))
    llm = json.dumps({**LLM, "script": str(script)})
    args = ["run", str(REPO / "experiments" / "institutions.yaml"), "--set", "years=2",
            "--set", "population.size=6", "--set", "outputs.plots=false", "--set",
            "institutions.government.maker=llm", "--set", "institutions.insurer.maker=llm",
            "--set", f"llm={llm}"]
    out = tmp_path / "run"
    assert main([*args, "--out", str(out)]) == 0
    statuses = pd.read_csv(out / "institutions_yearly.csv")
    assert set(statuses["government_status"]) == {"parse_failed"}
    assert set(statuses["insurer_status"]) == {"parse_failed"}
    records = [json.loads(line, parse_constant=pytest.fail)  # strict JSON: no NaN, Infinity
               for line in (out / "institutions.jsonl").read_text().splitlines()]
    errors = [r["attempts"][0]["parse_error"] for r in records]
    assert "grant_budget_usd" in errors[0] and "1e+308" in errors[0]
    assert "'loading'" in errors[1] and "integer of 400 digits" in errors[1]
