"""The PMT / expected-utility baseline decision maker."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from governed_broker.config import load_agent_types
from governed_broker.config.world import BaselineParams
from governed_broker.contracts.decision import HouseholdSituation, SituationFacts
from governed_broker.sim import BaselineDecisionMaker, FloodModel
from tests.conftest import REPO_ROOT

ACTIONS = ("do_nothing", "buy_insurance", "elevate_house", "elevate_and_insure", "relocate")
#: The domain's action that needs a buyout offer: priced, never open in these situations.
NOT_OFFERED = {"accept_buyout": 0.0}


def params(repo_root, **changes) -> BaselineParams:
    """The shipped baseline parameters (``experiments/baseline.yaml``) with ``changes``."""
    data = yaml.safe_load((repo_root / "experiments" / "baseline.yaml").read_text())
    return BaselineParams.model_validate({**data["decision"]["baseline"], **changes})


@pytest.fixture
def maker(repo_root) -> BaselineDecisionMaker:
    types = load_agent_types(repo_root / "agent_types.yaml")
    return BaselineDecisionMaker(params(repo_root, implementation_probability=1.0,
                                        perception_sigma=0.0), types, seed=1)


def situation(agent_id=1, *, ysf=None, savings=50_000.0, prob=0.2, insured=False,
              loss=(200_000.0, 5_000.0, 0.0, 0.0, 0.0),
              costs=(0.0, 1_500.0, 40_000.0, 41_500.0, 60_000.0),
              tenure="owner") -> HouseholdSituation:
    allowed = ACTIONS if tenure == "owner" else ("do_nothing", "buy_insurance", "relocate")
    premium = (0.0, costs[1], 0.0, costs[1], 0.0)
    return HouseholdSituation(
        agent_id=agent_id, year=1, tenure=tenure, flood_zone="high", income_usd=60_000.0,
        savings_usd=savings, structure_value_usd=250_000.0, contents_value_usd=140_000.0,
        elevated=False, insured=insured, flooded=ysf == 0, depth_m=0.0, damage_usd=0.0,
        payout_usd=0.0, years_since_flood=ysf, floods_experienced=0 if ysf is None else 1,
        flood_probability=prob, neighbour_shares={"insured": 0, "elevated": 0, "relocated": 0},
        action_costs_usd=dict(zip(ACTIONS, costs, strict=True)) | NOT_OFFERED,
        affordable={a: c <= savings for a, c in zip(ACTIONS, costs, strict=True)}
        | {a: True for a in NOT_OFFERED},
        allowed_actions=allowed, trust_insurance=0.3, trust_neighbours=0.5, debt_usd=0.0,
        unrepaired_damage_usd=0.0,
        facts=SituationFacts(
            loss_if_flood_usd=dict(zip(ACTIONS, loss, strict=True)) | NOT_OFFERED,
            premium_usd=dict(zip(ACTIONS, premium, strict=True)) | NOT_OFFERED,
            spending_room_usd=max(savings, 0.0)),
    )


def test_risk_perception_curve(maker) -> None:
    beta = maker.perceived_probability(np.ones(5), np.array([0, 1, 2, 3, np.nan]))
    # capped at 0.998; derived values 3.2, 1.05, 0.40 from domain_defaults section 5
    np.testing.assert_allclose(beta[:1], [0.998])
    small = maker.perceived_probability(np.full(5, 0.01), np.array([0, 1, 2, 3, np.nan])) / 0.01
    np.testing.assert_allclose(small, [10.1, 3.2, 1.05, 0.40, 0.1], atol=0.015)


def test_threat_rises_after_a_flood_and_decays(maker) -> None:
    out = maker.decide([situation(1, ysf=None), situation(2, ysf=0), situation(3, ysf=3)])
    scores = [d.audit["threat_score"] for d in out]
    assert scores[1] > scores[2] > scores[0]
    assert out[1].threat_label == "VH" and all(d.status == "baseline" for d in out)
    assert all(d.decision_maker == "baseline" and d.retries == 0 for d in out)


def test_low_threat_means_do_nothing(maker) -> None:
    d = maker.decide([situation(prob=0.001)])[0]
    assert d.action == "do_nothing" and d.threat_label == "VL"


def test_motivated_household_picks_best_expected_utility(maker) -> None:
    # three years after a flood (perceived p = 0.2 * 0.39): the cheap policy wins
    assert maker.decide([situation(ysf=3)])[0].action == "buy_insurance"
    # just flooded (perceived p = 0.998): elevation's annualised cost (40k * 0.0838 = 3.4k)
    # beats premium plus deductible (1.5k + 5k)
    assert maker.decide([situation(ysf=0)])[0].action == "elevate_house"


def test_the_premium_recurs_and_one_off_costs_are_annualised(maker) -> None:
    # elevating and insuring: premium 1.5k a year plus 40k * 0.0838; the policy is worth it
    # only while the elevated home would still take damage
    costs = (0.0, 1_500.0, 40_000.0, 41_500.0, 60_000.0)
    loss = (200_000.0, 60_000.0, 80_000.0, 2_000.0, 0.0)
    d = maker.decide([situation(ysf=0, loss=loss, costs=costs)])[0]
    assert d.action == "elevate_and_insure"


def test_an_unmotivated_policyholder_renews_when_it_pays(maker) -> None:
    # threat below the gate (perceived p = 0.0004) yet a policy worth more than its premium,
    # since the loss would take nearly all the household's wealth (500k): habit
    worth = maker.decide([situation(prob=0.004, insured=True,
                                    loss=(499_000.0, 0.0, 0.0, 0.0, 0.0),
                                    costs=(0.0, 1_000.0, 40_000.0, 41_000.0, 60_000.0))])[0]
    assert worth.threat_label in ("VL", "L") and worth.action == "buy_insurance"
    lapse = maker.decide([situation(prob=0.001, insured=True)])[0]
    assert lapse.action == "do_nothing"  # not worth its premium: it lapses


def test_perception_factor_is_fixed_per_household_and_seeded(repo_root) -> None:
    types = load_agent_types(repo_root / "agent_types.yaml")
    maker = BaselineDecisionMaker(params(repo_root), types, seed=1)
    first = maker.disposition(list(range(1, 2001)))
    again = BaselineDecisionMaker(params(repo_root), types, seed=1).disposition([5, 3])
    assert again.tolist() == [first[4], first[2]]  # the same whatever the order asked
    assert np.median(np.log(first)) == pytest.approx(0.0, abs=0.15)
    assert np.std(np.log(first)) == pytest.approx(params(repo_root).perception_sigma, rel=0.1)
    other = BaselineDecisionMaker(params(repo_root), types, seed=2).disposition([1, 2, 3])
    assert other.tolist() != first[:3].tolist()


def test_no_coping_no_action(maker) -> None:
    d = maker.decide([situation(ysf=0, savings=-10_000.0)])[0]
    assert d.action == "do_nothing" and d.coping_label == "VL"


def test_never_proposes_disallowed_or_unaffordable(maker) -> None:
    batch = [situation(i, ysf=0, savings=s, tenure=t)
             for i, (s, t) in enumerate([(2_000.0, "owner"), (100.0, "renter"),
                                         (80_000.0, "renter")], start=1)]
    for s, d in zip(batch, maker.decide(batch), strict=True):
        assert d.action in s.allowed_actions and s.affordable[d.action]


def test_implementation_delay_is_seeded(repo_root) -> None:
    types = load_agent_types(repo_root / "agent_types.yaml")
    halfway = params(repo_root, implementation_probability=0.5)
    batch = [situation(i, ysf=0) for i in range(1, 201)]
    a = [d.action for d in BaselineDecisionMaker(halfway, types, 1).decide(batch)]
    b = [d.action for d in BaselineDecisionMaker(halfway, types, 1).decide(batch)]
    c = [d.action for d in BaselineDecisionMaker(halfway, types, 2).decide(batch)]
    assert a == b and a != c
    assert 0.3 < np.mean([x != "do_nothing" for x in a]) < 0.7


def test_runs_inside_the_world(experiments) -> None:
    config = experiments.config(["years=5", "population.size=50"])
    types = load_agent_types(config.resolve_path(config.agent_types))
    model = FloodModel(config, BaselineDecisionMaker(config.decision.baseline, types, config.seed))
    for _ in range(5):
        model.step()
        cols = model.last_agent_columns
        assert set(cols["status"]) == {"baseline"}
        assert np.all((cols["threat_score"] >= 0) & (cols["threat_score"] <= 1))


def prospect_maker(**changes) -> BaselineDecisionMaker:
    """A baseline decision maker valuing actions as ``experiments/baseline_prospect.yaml`` does.

    With ``changes`` to the shipped parameters.
    """
    types = load_agent_types(REPO_ROOT / "agent_types.yaml")
    data = yaml.safe_load((REPO_ROOT / "experiments" / "baseline_prospect.yaml").read_text())
    return BaselineDecisionMaker(params(REPO_ROOT, **changes, **data["decision"]["baseline"]),
                                 types, seed=1)


@pytest.fixture
def prospect() -> BaselineDecisionMaker:
    return prospect_maker(implementation_probability=1.0, perception_sigma=0.0)


def test_prospect_theory_values_losses_by_weighted_chance(prospect) -> None:
    cost, loss = np.array([[0.0, 400.0]]), np.array([[50_000.0, 0.0]])
    p = np.array([0.002])
    w = p**0.69 / (p**0.69 + (1 - p) ** 0.69) ** (1 / 0.69)
    value = prospect._value(cost, loss, np.array([300_000.0]), p)
    np.testing.assert_allclose(value, [[-w[0] * 50_000.0**0.88, -(400.0**0.88)]])
    assert w[0] == pytest.approx(0.0134, abs=0.0005)  # a 0.2 % chance weighs like 1.3 %


def test_prospect_theory_keeps_a_policy_expected_utility_drops(maker, prospect) -> None:
    # a 0.2 % perceived chance (never flooded: a tenth of 2 %) of a 60k loss against a $400
    # premium: worth 120 a year in expectation, so expected utility lets the policy lapse;
    # weighted like 1.3 % under prospect theory (0.0134 * 60k**0.88 = 215 > 400**0.88 = 195),
    # the policy is kept (habit, below the gate)
    s = situation(prob=0.02, insured=True, loss=(60_000.0, 0.0, 0.0, 0.0, 0.0),
                  costs=(0.0, 400.0, 40_000.0, 40_400.0, 60_000.0))
    assert maker.decide([s])[0].action == "do_nothing"
    kept = prospect.decide([s])[0]
    assert kept.action == "buy_insurance" and kept.threat_label in ("VL", "L")


def test_prospect_utility_needs_its_parameters_and_only_it_takes_them(repo_root) -> None:
    with pytest.raises(ValueError, match="copy the block from experiments/baseline_prospect"):
        params(repo_root, utility="prospect")
    block = {"source": "x", "loss_curvature": 0.88, "probability_weighting": 0.69}
    with pytest.raises(ValueError, match="prospect is set but utility is expected"):
        params(repo_root, prospect=block)


#: One maker for every hypothesis example (``_value`` keeps no state between calls).
_shared_prospect = functools.cache(prospect_maker)


@settings(max_examples=200, deadline=None)
@given(p=st.floats(0.0, 0.998), q=st.floats(0.0, 0.998),
       cost=st.floats(0.0, 1e5), loss=st.floats(0.0, 1e6), more=st.floats(1.0, 1e5))
def test_prospect_value_falls_with_cost_loss_and_chance(p, q, cost, loss, more) -> None:
    def value(c, l_, chance):
        return _shared_prospect()._value(np.array([[c]]), np.array([[l_]]), np.array([1e6]),
                                         np.array([chance]))[0, 0]

    here = value(cost, loss, p)
    assert value(cost + more, loss, p) < here
    assert value(cost, loss + more, p) <= here
    low, high = sorted((p, q))
    assert value(cost, loss, high) <= value(cost, loss, low) + 1e-9


def _review(repo_root, q: float) -> BaselineDecisionMaker:
    types = load_agent_types(repo_root / "agent_types.yaml")
    return BaselineDecisionMaker(params(repo_root, implementation_probability=1.0,
                                        perception_sigma=0.0, renewal_review_probability=q),
                                 types, seed=1)


def test_inertia_renews_a_policy_the_household_does_not_review(repo_root) -> None:
    # a policy in force on a home whose flood chance makes renewing worse than nothing
    holders = [situation(a, prob=0.001, insured=True) for a in range(1, 2001)]
    lapse = {q: sum(d.action == "do_nothing" for d in _review(repo_root, q).decide(holders))
             / len(holders) for q in (1.0, 0.3, 0.0)}
    assert lapse[1.0] == 1.0 and lapse[0.0] == 0.0  # every year / never reviewed
    assert lapse[0.3] == pytest.approx(0.3, abs=0.04)  # 2,000 draws: sd 0.010
    # the uninsured are not held by it, and an unaffordable renewal is not forced
    free = _review(repo_root, 0.0).decide([
        situation(1, prob=0.001), situation(2, prob=0.001, insured=True, savings=1_000.0)])
    assert [d.action for d in free] == ["do_nothing", "do_nothing"]

