"""Flood insurance that comes with disaster aid (``sim.instruments.certificates``).

Who gets a certificate, what it covers and for how long, and aid withheld from recipients who did
not keep insurance.
"""

from __future__ import annotations

import numpy as np
import pytest

from governed_broker.config import ConfigError
from governed_broker.config.world import GroupPolicyConfig
from governed_broker.contracts.decision import AidCertificate
from governed_broker.sim import FloodModel
from governed_broker.sim.instruments.certificates import aid_eligible, new_certificates
from governed_broker.sim.money import capped_payouts
from tests.sim.test_model import POP_HEADER, Scripted, run

POP_ROWS = [
    "owner,high,60000,100000,200000,100000,False,False,0.3,0.5",   # 1: uninsured
    "owner,high,60000,100000,200000,100000,False,False,0.3,0.5",   # 2: buys a policy in year 1
    "owner,low,60000,100000,200000,100000,False,False,0.3,0.5",    # 3: outside the zones
    "owner,high,60000,100000,200000,100000,False,False,0.3,0.5",   # 4: buys a policy in year 3
    "renter,high,40000,20000,0,50000,False,False,0.3,0.5",         # 5: renter
]
COVERAGE_USD = 20_000.0


def _group(**kw) -> dict:
    return {"source": "test", "zones": ["high"], "term_years": 3,
            "coverage_usd": COVERAGE_USD, "premium_usd": 2_400.0, **kw}


@pytest.fixture
def world(experiments):
    (experiments.tmp_path / "pop.csv").write_text(
        "# synthetic test population\n" + POP_HEADER + "\n" + "\n".join(POP_ROWS) + "\n")

    def make(script: dict[tuple[int, int], str], group: dict | None, years: int = 6,
             policy_change: dict | None = None):
        data = experiments.data()
        data["years"] = years
        data["memory"]["engine"] = "none"
        data["population"] = {"source": "test", "file": "pop.csv"}
        data["hazard"] = {"source": "test", "mode": "fixed", "events": [
            {"year": y, "depth_m": {"high": 1.0, "low": 1.0}} for y in (2, 4, 6)],
            "zones": {"high": {"annual_probability": 0.02, "median_depth_m": 0.3},
                      "low": {"annual_probability": 0.002, "median_depth_m": 0.2}}}
        data["network"] = {"kind": "ring", "k": 2}
        del data["insurance"]["mandatory_purchase"]
        data["finance"]["aid"]["probability"] = 1.0
        data["finance"]["aid"]["group_policy"] = group
        if group is None:
            del data["finance"]["aid"]["group_policy"]
        if policy_change is not None:
            data["policy_change"] = policy_change
        maker = Scripted(script)
        return FloodModel(experiments.config(data=data), maker), maker

    return make


def test_uninsured_aid_recipients_of_the_zones_are_insured_for_the_term(world) -> None:
    model, _ = world({(1, 2): "buy_insurance", (3, 4): "buy_insurance"}, _group())
    rows = run(model, 6)
    flood = rows[1]  # year 2
    assert flood[1]["aid_usd"] > 0 and flood[3]["aid_usd"] > 0
    # certificates: uninsured recipients of the zone (owner and renter), not the insured one
    # nor the one outside the zone
    assert [a for a in flood if flood[a]["group_certificate"]] == [1, 4, 5]
    for year in (2, 3, 4):  # doing nothing, insured for the floods of years 3, 4 and 5
        r = rows[year - 1][1]
        assert r["executed_action"] == "do_nothing" and r["premium_usd"] == 0
        assert r["insured_after"] and r["group_certificate"]
    assert not rows[4][1]["insured_after"] and not rows[4][1]["group_certificate"]  # expired
    assert not rows[1][3]["insured_after"]


def test_the_certificate_pays_up_to_its_coverage_and_an_own_policy_ends_it(world) -> None:
    rows = run(world({(1, 2): "buy_insurance", (3, 4): "buy_insurance"}, _group())[0], 4)
    year4 = rows[3]
    assert year4[1]["insured_before"] and year4[1]["payout_usd"] == pytest.approx(COVERAGE_USD)
    assert year4[4]["insured_before"] and year4[4]["payout_usd"] > COVERAGE_USD  # own policy
    # buying its own policy ended household 4's certificate: it lapses like any policy
    assert rows[2][4]["group_certificate"] and not rows[3][4]["group_certificate"]
    assert not rows[3][4]["insured_after"]


def test_aid_is_withheld_from_recipients_who_did_not_keep_insurance(world) -> None:
    rows = run(world({(1, 2): "buy_insurance"}, _group())[0], 6)
    year6 = rows[5]
    # 1 held a certificate (expired), 2 was insured at its first grant: both uninsured now
    for a in (1, 2):
        assert not year6[a]["insured_before"] and year6[a]["out_of_pocket_usd"] > 0
        assert year6[a]["aid_withheld"] and year6[a]["aid_usd"] == 0
    assert year6[3]["aid_usd"] > 0 and not year6[3]["aid_withheld"]  # outside the zones
    # earlier: only 2, at the flood of year 4 (its policy lapsed after year 2; 1 was certified)
    assert [(y + 1, a) for y in range(5) for a in rows[y] if rows[y][a]["aid_withheld"]] == [
        (4, 2)]


def test_a_policy_change_of_the_coverage_applies_to_certificates_in_force(world) -> None:
    change = {"from_year": 4, "settings": {"finance.aid.group_policy.coverage_usd": 5_000}}
    rows = run(world({(1, 2): "buy_insurance"}, _group(), policy_change=change)[0], 4)
    # household 1's certificate was given at the flood of year 2, under the old coverage
    assert rows[1][1]["group_certificate"] and rows[2][1]["insured_after"]
    assert rows[3][1]["insured_before"] and rows[3][1]["payout_usd"] == pytest.approx(5_000.0)


def test_without_keep_insured_aid_is_never_withheld(world) -> None:
    rows = run(world({}, _group(keep_insured=False))[0], 6)
    assert rows[5][1]["aid_usd"] > 0 and not rows[5][1]["aid_withheld"]


def test_without_a_group_policy_nothing_changes(world) -> None:
    rows = run(world({}, None)[0], 6)
    assert not any(rows[y][a]["group_certificate"] or rows[y][a]["aid_withheld"]
                   for y in range(6) for a in rows[y])
    assert not rows[1][1]["insured_after"]


def test_decision_makers_see_the_certificate_and_its_cover(world) -> None:
    model, maker = world({}, _group(), years=2)
    run(model, 2)
    s = {x.agent_id: x for x in maker.seen[1]}
    assert s[1].facts.group_policy == AidCertificate(years=3, coverage_usd=COVERAGE_USD)
    assert s[1].facts.aid_requires_insurance
    assert s[3].facts.group_policy is None and not s[3].facts.aid_requires_insurance
    assert s[1].action_costs_usd["do_nothing"] == 0
    loss = s[1].facts.loss_if_flood_usd
    damage = s[1].facts.typical_flood.damage_usd
    policy_pays = damage - loss["buy_insurance"]  # what a policy of its own would pay
    assert policy_pays > COVERAGE_USD  # so the certificate's cap matters here
    assert loss["do_nothing"] == pytest.approx(damage - COVERAGE_USD)


def test_capped_payouts_scale_both_parts_to_the_coverage() -> None:
    pay_s, pay_c = capped_payouts(100.0, np.array([150.0, 60.0, 150.0]),
                                  np.array([50.0, 20.0, 50.0]), np.array([True, True, False]))
    assert pay_s.tolist() == [75.0, 60.0, 150.0] and pay_c.tolist() == [25.0, 20.0, 50.0]


def test_certificates_and_eligibility_follow_the_rules() -> None:
    group = GroupPolicyConfig(source="t", zones=["high"], term_years=3, coverage_usd=1.0,
                              premium_usd=1.0)
    in_zones = np.array([True, True, True, False, True])
    aid = np.array([5.0, 5.0, 0.0, 5.0, 5.0])
    insured = np.array([False, True, False, False, False])
    earlier = np.array([False, False, False, False, True])
    assert new_certificates(group, in_zones, aid, insured, earlier).tolist() == [
        True, False, False, False, False]
    assert not new_certificates(None, in_zones, aid, insured, earlier).any()
    assert aid_eligible(group, earlier, insured).tolist() == [True, True, True, True, False]
    assert aid_eligible(group, earlier, np.ones(5, dtype=bool)).all()
    assert aid_eligible(None, earlier, insured).all()


def test_an_unknown_zone_is_a_configuration_error(experiments) -> None:
    data = experiments.data()
    data["finance"]["aid"]["group_policy"]["zones"] = ["sfha"]
    with pytest.raises(ConfigError, match="group_policy.zones.*sfha"):
        experiments.config(data=data)
