"""Institutions in the world (sim.institutions).

The government's fund and the insurer's book, deciding before the households; budgets hold, the
accounts balance, the levers reach every premium and offer, the world refuses a decision that breaks
a limit, and the phase order.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from governed_broker.config import ConfigError, load_experiment
from governed_broker.config.institutions import GovernmentConfig, InsurerConfig
from governed_broker.config.loader import load_institutions
from governed_broker.contracts.decision import Decision, HouseholdSituation
from governed_broker.contracts.institutions import (
    FACTS,
    InstitutionDecision,
    InstitutionSituation,
)
from governed_broker.runner import run_experiment
from governed_broker.sim import money
from governed_broker.sim.institution_makers import RuleGovernment, RuleInsurer
from governed_broker.sim.institution_rules import within_limits
from governed_broker.sim.model import FloodModel

REPO = Path(__file__).resolve().parents[2]
EXPERIMENT = REPO / "experiments" / "institutions.yaml"
DOMAIN = load_institutions(REPO / "institutions.yaml")
#: A flood-prone version of the rule-institutions experiment: floods most years, every home
#: of the zone reached, so that grants, buyouts, aid and claims all happen.
FLOODY = ("population.size=80", "years=12", "hazard.zones.high.annual_probability=0.5",
          "hazard.zones.high.flooded_share=1.0", "hazard.zones.high.median_depth_m=0.8",
          "institutions.government.appropriation_per_household_usd=3000",
          "outputs.plots=false", "outputs.progress=false")


class TakesOffers:
    """Households that accept a buyout when offered, elevate when they can.

    And otherwise insure when they can (to exercise every payment).
    """

    name = "takes-offers"

    def decide(self, situations: Sequence[HouseholdSituation]) -> list[Decision]:
        out = []
        for s in situations:
            open_ = [a for a in s.allowed_actions if s.affordable.get(a, True)]
            action = next((a for a in ("accept_buyout", "elevate_house", "buy_insurance")
                           if a in open_), "do_nothing")
            out.append(Decision(s.agent_id, action, action, "approved",
                                decision_maker=self.name))
        return out

    def end_year(self, year, households) -> None:
        pass

    def provenance(self) -> None:
        return None

    def close(self) -> None:
        pass


class Recording:
    """An institution maker that records its situations and returns fixed levers."""

    def __init__(self, levers: dict[str, float] | None = None) -> None:
        self.levers = levers
        self.seen: list[InstitutionSituation] = []
        self.name = "recording"
        self.closed = False

    def decide(self, situation: InstitutionSituation) -> InstitutionDecision:
        self.seen.append(situation)
        levers = dict(situation.levers if self.levers is None else self.levers)
        return InstitutionDecision(situation.institution, situation.year, levers, "approved",
                                   self.name, proposed=levers)

    def provenance(self) -> dict:
        return {"recording": True}

    def close(self) -> None:
        self.closed = True


@pytest.fixture(scope="module")
def floody_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("inst") / "run"
    run_experiment(load_experiment(EXPERIMENT, list(FLOODY)), out, progress=False,
                   decision_maker=TakesOffers())
    return out


def test_every_programme_spends_within_its_budget_and_the_fund_balances(floody_run) -> None:
    inst = pd.read_csv(floody_run / "institutions_yearly.csv")
    model = pd.read_csv(floody_run / "model_yearly.csv")
    agents = pd.read_csv(floody_run / "agents_yearly.csv")
    assert inst["grants_paid"].sum() > 0 and inst["buyouts_accepted"].sum() > 0
    cent = 0.011  # each dollar column is written to the cent
    assert (inst["grants_paid_usd"] <= inst["subsidy_budget_usd"] + cent).all()
    assert (inst["buyouts_paid_usd"] <= inst["buyout_budget_usd"] + cent).all()
    committed = inst["subsidy_budget_usd"] + inst["buyout_budget_usd"]
    assert (committed <= inst["funds_available_usd"] + 2 * cent).all()
    spent = inst["grants_paid_usd"] + inst["buyouts_paid_usd"]
    assert np.allclose(inst["balance_end_usd"], inst["funds_available_usd"] - spent)
    assert (inst["balance_end_usd"] >= 0).all()
    carried = np.r_[0.0, inst["balance_end_usd"].to_numpy()[:-1]]
    post = 0.15 * np.r_[0.0, model["total_aid_usd"].to_numpy()[:-1]]
    assert np.allclose(inst["post_disaster_funds_usd"], post)
    assert post.sum() > 0
    assert np.allclose(inst["appropriation_usd"], 3000 * 80)
    assert np.allclose(inst["funds_available_usd"], carried + 3000 * 80 + post)
    by_year = agents.groupby("year")[["subsidy_usd", "buyout_usd"]].sum()
    assert np.allclose(by_year["subsidy_usd"], inst["grants_paid_usd"])
    assert np.allclose(by_year["buyout_usd"], inst["buyouts_paid_usd"])


def test_the_insurers_book_follows_premiums_and_claims(floody_run) -> None:
    inst = pd.read_csv(floody_run / "institutions_yearly.csv")
    model = pd.read_csv(floody_run / "model_yearly.csv")
    assert np.allclose(inst["claims_usd"], model["total_payout_usd"])
    assert np.allclose(inst["premiums_written_usd"], model["total_premiums_usd"])
    reserves = np.cumsum(inst["premiums_written_usd"] - inst["claims_usd"])
    assert np.allclose(inst["reserves_end_usd"], reserves)
    assert math.isnan(inst["loss_ratio"].iloc[0])  # cover bought before the run: no premium
    ratio = inst["claims_usd"].to_numpy()[1:] / inst["premiums_written_usd"].to_numpy()[:-1]
    assert np.allclose(inst["loss_ratio"].to_numpy()[1:], ratio, atol=1e-6)


class DoesNothing(TakesOffers):
    """Households that never act: uninsured aid recipients keep their aid certificates."""

    name = "does-nothing"

    def decide(self, situations: Sequence[HouseholdSituation]) -> list[Decision]:
        return [Decision(s.agent_id, "do_nothing", "do_nothing", "approved",
                         decision_maker=self.name) for s in situations]


def test_the_aid_programme_pays_the_insurer_for_its_certificates(tmp_path) -> None:
    config = load_experiment(EXPERIMENT, [*FLOODY, "years=8", "finance.aid.probability=1.0"])
    group = config.finance.aid.group_policy
    out = run_experiment(config, tmp_path / "run", progress=False,
                         decision_maker=DoesNothing()).out_dir
    inst = pd.read_csv(out / "institutions_yearly.csv")
    model = pd.read_csv(out / "model_yearly.csv")
    agents = pd.read_csv(out / "agents_yearly.csv")
    held = agents.pivot(index="agent_id", columns="year", values="group_certificate")
    held = held.fillna(False).astype(bool)
    new = (held & ~held.shift(1, axis=1, fill_value=False)).sum().to_numpy()
    # certificates covering next year's flood: held at decision time, still there at the end
    staying = agents[agents["group_certificate"] & ~agents["relocated_after"]]
    covering = staying.groupby("year").size().reindex(inst["year"], fill_value=0).to_numpy()
    assert new.sum() > 0 and covering.sum() > new.sum()  # given, then earned over the term
    earned = covering * group.premium_usd / group.term_years
    assert np.allclose(inst["premiums_written_usd"], model["total_premiums_usd"] + earned)
    aid = model["total_aid_usd"].to_numpy() + new * group.premium_usd
    assert np.allclose(inst["post_disaster_funds_usd"], 0.15 * np.r_[0.0, aid[:-1]])


def test_audit_records_each_decision_in_phase_order(floody_run) -> None:
    records = pd.read_json(floody_run / "institutions.jsonl", lines=True)
    assert list(records["institution"][:2]) == ["government", "insurer"]
    assert (records.groupby("year")["order"].apply(list) == pd.Series(
        [[1, 2]] * 12, index=range(1, 13))).all()
    for _, r in records.iterrows():
        assert set(r["facts"]) == {f.name for f in FACTS[r["institution"]]}
    insurer = records[records["institution"] == "insurer"]
    government = records[records["institution"] == "government"].set_index("year")
    for _, r in insurer.iterrows():  # the insurer decided knowing the government's levers
        assert r["in_force_before"] == {"government": government.loc[r["year"], "levers"]}


def _world(makers: dict, overrides: Sequence[str] = FLOODY) -> FloodModel:
    config = load_experiment(EXPERIMENT, list(overrides))
    return FloodModel(config, TakesOffers(), institution_makers=makers)


def test_the_insurers_levers_reach_every_premium() -> None:
    model = _world({"insurer": Recording({"loading": 1.3, "crs_discount": 0.05})})
    model.step()
    c, ins = model.current, model.config.insurance
    assert (ins.loading, ins.crs_discount) == (1.3, 0.05)
    hh = model.hh
    # banded premiums outside the SFHA: the levers do not apply
    banded = np.isin(np.asarray(model.zones, dtype=object)[hh.zone_index[c.idx]],
                     ins.preferred_risk.zones)
    for zone_paid, levers_apply in ((~banded, True), (banded, False)):
        paid = (c.premium_usd > 0) & zone_paid
        assert paid.any()
        idx = c.idx[paid]
        cov_s = np.where(hh.is_owner[idx], np.minimum(hh.structure_value_usd[idx], 250_000), 0.0)
        cov_c = np.minimum(hh.contents_value_usd[idx], 100_000)
        expected = ((3.6 * cov_s + 5.0 * cov_c) / 1000 * 1.3 * (1 - 0.05) + 100 if levers_apply
                    else money.preferred_premium_usd(ins.preferred_risk, cov_s, cov_c,
                                                     hh.is_owner[idx]))
        assert np.allclose(c.premium_usd[paid], expected)


def test_the_insurer_sees_this_years_government_decision() -> None:
    gov, ins = Recording({"subsidy_share": 0.55, "grant_budget_usd": 1000.0,
                          "buyout_budget_usd": 0.0}), Recording()
    model = _world({"government": gov, "insurer": ins})
    model.step()
    assert gov.seen[0].in_force == {}
    assert ins.seen[0].in_force == {"government": {"subsidy_share": 0.55,
                                                   "grant_budget_usd": 1000.0,
                                                   "buyout_budget_usd": 0.0}}
    assert model.config.elevation.subsidy_share == 0.55
    assert model.config.elevation.subsidy_budget_usd == 1000.0


def test_a_decision_that_breaks_a_limit_is_never_put_in_force() -> None:
    greedy = Recording({"subsidy_share": 0.5, "grant_budget_usd": 1e9,
                        "buyout_budget_usd": 1e9})
    model = _world({"government": greedy})
    model.step()
    [record] = [r for r in model.institutions.records if r["institution"] == "government"]
    situation = greedy.seen[0]
    assert record["status"] == "rejected" and record["fallback"]
    assert any("more than" in m for m in record["backstop"])
    assert record["levers"] == within_limits(DOMAIN.government, situation, situation.levers)
    funds = situation.facts["funds_available_usd"]
    budget = model.config.elevation.subsidy_budget_usd + model.config.buyout.annual_budget_usd
    assert budget <= funds
    assert model.last_institution_row["government_status"] == "rejected"


def test_a_decision_without_every_lever_is_refused() -> None:
    model = _world({"insurer": Recording({"loading": 1.2})})
    model.step()
    [record] = [r for r in model.institutions.records if r["institution"] == "insurer"]
    assert record["status"] == "rejected" and "crs_discount" in record["backstop"][0]


def test_rule_insurer_moves_by_credibility_weighted_experience() -> None:
    config = InsurerConfig(source="t", target_loss_ratio=0.87, full_credibility_claims=1082)
    maker = RuleInsurer(config, DOMAIN.insurer)
    full = InstitutionSituation("insurer", 5, {"experience_loss_ratio": 0.95,
                                               "experience_claims": 1082},
                                {"loading": 1.15, "crs_discount": 0.1})
    assert maker.decide(full).levers["loading"] == pytest.approx(1.15 * 0.95 / 0.87)
    quarter = InstitutionSituation("insurer", 5, {"experience_loss_ratio": 0.95,
                                                  "experience_claims": 1082 // 4},
                                   {"loading": 1.15, "crs_discount": 0.1})
    z = math.sqrt((1082 // 4) / 1082)
    assert maker.decide(quarter).levers["loading"] == pytest.approx(
        1.15 * (1 + z * (0.95 / 0.87 - 1)))
    capped = InstitutionSituation("insurer", 5, {"experience_loss_ratio": 5.0,
                                                 "experience_claims": 5000},
                                  {"loading": 1.15, "crs_discount": 0.1})
    out = maker.decide(capped).levers
    assert out["loading"] == pytest.approx(1.15 * 1.18) and out["crs_discount"] == 0.1
    none_yet = InstitutionSituation("insurer", 1, {"experience_loss_ratio": None,
                                                   "experience_claims": 0},
                                    {"loading": 1.15, "crs_discount": 0.1})
    assert maker.decide(none_yet).levers == {"loading": 1.15, "crs_discount": 0.1}


def test_rule_government_commits_the_funds_split_between_programmes() -> None:
    maker = RuleGovernment(GovernmentConfig(source="t", appropriation_per_household_usd=1,
                                            post_disaster_share=0.15,
                                            buyout_share_of_funds=0.25), DOMAIN.government)
    both = InstitutionSituation("government", 2, {"funds_available_usd": 100_000.0},
                                {"subsidy_share": 0.5, "grant_budget_usd": 0.0,
                                 "buyout_budget_usd": 0.0})
    assert maker.decide(both).levers == {"subsidy_share": 0.5, "grant_budget_usd": 75_000.0,
                                         "buyout_budget_usd": 25_000.0}
    grants_only = InstitutionSituation("government", 2, {"funds_available_usd": 100_000.0},
                                       {"subsidy_share": 0.5, "grant_budget_usd": 0.0})
    assert maker.decide(grants_only).levers["grant_budget_usd"] == 100_000.0


def test_the_buyout_lever_exists_only_with_a_programme() -> None:
    gov = Recording()
    model = _world({"government": gov}, (*FLOODY, "buyout=null"))
    model.step()
    assert set(gov.seen[0].levers) == {"subsidy_share", "grant_budget_usd"}
    assert model.last_institution_row["buyout_budget_usd"] == ""


def test_starting_levers_and_policy_changes_are_checked_at_load() -> None:
    with pytest.raises(ConfigError, match="crs_discount_class"):
        load_experiment(EXPERIMENT, ["insurance.crs_discount=0.07"])
    with pytest.raises(ConfigError, match="subsidy_share_legal"):
        load_experiment(EXPERIMENT, ["elevation.subsidy_share=0.9"])
    with pytest.raises(ConfigError, match="set each year by the insurer"):
        load_experiment(EXPERIMENT, [
            "policy_change={from_year: 3, settings: {insurance.loading: 2.0}}"])
    with pytest.raises(ConfigError, match="needs an 'llm:' section"):
        load_experiment(EXPERIMENT, ["institutions.insurer.maker=llm"])
    # a policy may change what the institutions receive, from a year on
    load_experiment(EXPERIMENT, ["policy_change={from_year: 3, settings: "
                                 "{institutions.government.appropriation_per_household_usd: "
                                 "500}}"])


def test_without_institutions_nothing_is_written_and_the_hash_is_unchanged(tmp_path) -> None:
    from governed_broker.config.hashing import config_hash

    base = load_experiment(REPO / "experiments" / "baseline.yaml")
    same = load_experiment(REPO / "experiments" / "baseline.yaml",
                           ["insurance.crs_discount=0.0", "institutions=null"])
    assert config_hash(base) == config_hash(same)
    assert config_hash(base) != config_hash(load_experiment(
        REPO / "experiments" / "baseline.yaml", ["insurance.crs_discount=0.05"]))
    out = tmp_path / "run"
    run_experiment(load_experiment(REPO / "experiments" / "baseline.yaml",
                                   ["years=2", "population.size=10", "outputs.plots=false"]),
                   out, progress=False)
    assert not (out / "institutions_yearly.csv").exists()
    assert not (out / "institutions.jsonl").exists()


@pytest.mark.parametrize("levers", [
    # N1: each budget finite, their sum inf: close(inf, funds) said "within the funds"
    {"subsidy_share": 0.5, "grant_budget_usd": 1e308, "buyout_budget_usd": 1e308},
    # N2: an integer no float holds
    {"subsidy_share": 0.5, "grant_budget_usd": 10 ** 400, "buyout_budget_usd": 0.0},
    {"subsidy_share": float("nan"), "grant_budget_usd": 0.0, "buyout_budget_usd": 0.0},
    {"subsidy_share": 0.5, "grant_budget_usd": "lots", "buyout_budget_usd": 0.0},
    {"subsidy_share": True, "grant_budget_usd": 0.0, "buyout_budget_usd": 0.0},
])
def test_hostile_levers_fall_back_to_last_years_and_say_why(levers) -> None:
    maker = Recording(levers)
    model = _world({"government": maker})
    model.step()  # never raises: the world refuses the decision
    [record] = [r for r in model.institutions.records if r["institution"] == "government"]
    situation = maker.seen[0]
    assert record["status"] == "rejected" and record["fallback"] and record["backstop"]
    assert record["levers"] == within_limits(DOMAIN.government, situation, situation.levers)
    assert model.config.elevation.subsidy_budget_usd == record["levers"]["grant_budget_usd"]
    json.dumps(record, allow_nan=False)  # the audit line stays valid JSON


def test_levers_a_setting_refuses_are_refused_though_no_rule_forbids_them(tmp_path) -> None:
    # the domain's rules are data: a domain without the funds rule must not let a budget
    # above what the setting holds (config.world.MAX_USD) crash the year
    text = (REPO / "institutions.yaml").read_text()
    domain = tmp_path / "institutions.yaml"
    domain.write_text(text.replace("kind: total_within", "kind: range\n      min: 0.0")
                      .replace("      fact: funds_available_usd\n", "", 1))
    maker = Recording({"subsidy_share": 0.5, "grant_budget_usd": 5e12, "buyout_budget_usd": 0.0})
    model = _world({"government": maker}, [*FLOODY, f"institutions.domain={domain}"])
    model.step()
    [record] = [r for r in model.institutions.records if r["institution"] == "government"]
    assert record["status"] == "rejected"
    assert any("elevation.subsidy_budget_usd" in m for m in record["backstop"])
