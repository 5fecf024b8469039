"""Reference respondents (``llm.backend: reference``).

What the rule reads off a real prompt, how it answers, and that every other respondent's replies
depend on exactly what they should.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from governed_broker.broker.factory import build_context
from governed_broker.config.base import ConfigError
from governed_broker.config.loader import load_experiment
from governed_broker.config.resolved import resolve_experiment
from governed_broker.llm.base import LLMError, LLMRequest
from governed_broker.llm.reference import ReferenceBackend, RuleRespondent, read_prompt
from governed_broker.validity.battery import derive, load_battery
from governed_broker.validity.situations import SituationBuilder

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def world():
    """The demo's world, the battery's base household and the demo's context builder."""
    experiment = resolve_experiment(load_experiment(REPO / "experiments" / "demo.yaml", []))
    base = load_battery(REPO / "configs" / "validity", experiment.domain).vignettes.base
    return (SituationBuilder(experiment, 1), base.model_copy(update={"flood_zone": "high"}),
            build_context(experiment), {})


def _request(world, seed: int = 1, **changes) -> tuple[LLMRequest, object]:
    """The request the broker would send about the base household with ``changes``."""
    builder, base, context, rendered = world
    key = json.dumps(changes, sort_keys=True)
    if key not in rendered:
        situation = builder.build(derive(base, changes, None, None, Path("t"), "t"), 7)
        rendered[key] = (context.build(situation, chunks=[]), situation)
    prompt, situation = rendered[key]
    return LLMRequest.of(prompt.messages, json_schema=prompt.json_schema, seed=seed), situation


def _reply(name: str, request: LLMRequest) -> dict:
    return ReferenceBackend(name).reply(request)


def test_the_rule_reads_the_facts_the_prompt_states(world) -> None:
    request, situation = _request(world, earlier_floods=[{"years_ago": 2, "depth_m": 0.5}])
    facts = read_prompt(request.messages[1]["content"])
    assert facts.year == situation.year and facts.flooded
    assert facts.chance == pytest.approx(situation.flood_probability)
    assert facts.damage_usd == pytest.approx(situation.damage_usd, abs=1)
    assert facts.income_usd == situation.income_usd
    assert facts.room_usd == pytest.approx(situation.facts.spending_room_usd, abs=1)
    assert [o.action for o in facts.offers] == list(situation.allowed_actions)
    costs = {o.action: o.cost_usd for o in facts.offers}
    assert costs == pytest.approx({a: situation.action_costs_usd[a]
                                   for a in situation.allowed_actions}, abs=1)
    assert {o.action for o in facts.offers if not o.affordable} == \
        {a for a in situation.allowed_actions if not situation.affordable[a]}
    assert {o.action for o in facts.offers if o.one_off} == \
        {"elevate_house", "relocate"}  # the combined action does not say it is one-off
    quiet, _ = _request(world, flood_depth_m=0.0, earlier_floods=[{"years_ago": 3,
                                                                   "depth_m": 0.5}])
    assert read_prompt(quiet.messages[1]["content"]).years_since_flood == 3


def test_the_rule_answers_to_damage_recency_money_and_price(world) -> None:
    rule = RuleRespondent()

    def answer(**changes):
        return rule.answer(read_prompt(_request(world, **changes)[0].messages[1]["content"]))

    assert [answer(damage_factor=f).threat for f in (0.03, 0.1, 0.4, 1.0)] == [1, 2, 3, 4]
    assert answer(flood_depth_m=0.0).threat == 0  # never flooded
    recency = [answer(flood_depth_m=0.0, earlier_floods=[{"years_ago": y, "depth_m": 0.6}],
                      memory_fidelity="detailed").threat for y in (1, 3, 5)]
    assert recency == [3, 2, 1]
    assert [answer(savings_usd=s).coping for s in (2000, 5000, 15000, 40000, 200000)] == \
        [0, 1, 2, 3, 4]
    assert answer().action == "buy_insurance"
    assert answer(**{"cost_factor": {"insure": 3.0}}).action == "elevate_house"
    assert answer(flood_depth_m=0.0).action == "do_nothing"


def test_replies_depend_on_what_each_respondent_answers_to(world) -> None:
    a, _ = _request(world, seed=5)
    b, _ = _request(world, seed=5, flood_depth_m=1.5)
    again, _ = _request(world, seed=6)
    # deaf: one reply to everything
    assert _reply("deaf", a) == _reply("deaf", b) == _reply("deaf", again)
    # seed: the same seed gives the same labels and position to any prompt
    seed_a, seed_b = _reply("seed", a), _reply("seed", b)
    assert seed_a["threat_appraisal"] == seed_b["threat_appraisal"]
    # every respondent gives the same reply to the same request (cacheable, reproducible)
    for name in ("random", "seed", "rule", "order:0.45", "noisy_rule:0.25"):
        assert _reply(name, a) == _reply(name, a)
    # random: over many seeds, labels spread over the whole scale whatever the facts
    labels = {_reply("random", _request(world, seed=s)[0])["threat_appraisal"]["label"]
              for s in range(40)}
    assert labels == {"VL", "L", "M", "H", "VH"}
    # the order-follower picks the first listed action in about q of its replies
    first = sum(_reply("order:0.45", _request(world, seed=s)[0])["decision"] == "do_nothing"
                for s in range(200))
    assert 70 <= first <= 110
    noisy = [_reply("noisy_rule:0.25", _request(world, seed=s)[0]) for s in range(200)]
    rule = _reply("rule", a)
    assert 130 <= sum(r == rule for r in noisy) <= 175  # 75 % and the random hits


def test_backend_identity_and_reply_shape(world) -> None:
    backend = ReferenceBackend("noisy_rule:0.25")
    assert backend.kind == "reference" and backend.model_id == "reference:noisy_rule:0.25"
    response = backend.chat(_request(world)[0])
    assert response.backend == "reference" and response.parsed == json.loads(response.text)
    assert set(response.parsed) == {"threat_appraisal", "coping_appraisal", "decision",
                                    "reason"}


def test_a_prompt_without_the_facts_or_schema_is_a_clear_error(world) -> None:
    request, _ = _request(world)
    bare = LLMRequest.of([{"role": "user", "content": "How are you?"}],
                         json_schema=request.json_schema)
    with pytest.raises(LLMError, match="does not state the year"):
        _reply("rule", bare)
    with pytest.raises(LLMError, match="decision requests only"):
        _reply("deaf", LLMRequest.of(request.messages))
    with pytest.raises(ValueError, match="unknown reference respondent"):
        ReferenceBackend("order:2")


def test_the_configuration_names_a_reference_respondent(experiments) -> None:
    good = experiments.config(["decision.maker=llm", "llm.backend=reference",
                               "llm.model=order:0.45"])
    assert good.llm.model == "order:0.45"
    with pytest.raises(ConfigError, match="names no reference respondent"):
        experiments.config(["decision.maker=llm", "llm.backend=reference", "llm.model=oracle"])
