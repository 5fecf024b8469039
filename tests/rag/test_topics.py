"""Policy-topic triggers: conditions as data, clear errors, the shipped topics file."""

from __future__ import annotations

import pytest
import yaml
from rag_helpers import TOPICS_FILE, situation

from governed_broker.config.base import ConfigError
from governed_broker.config.knowledge import Topic, TopicCondition, load_topics


def cond(**kw) -> TopicCondition:
    return TopicCondition.model_validate(kw)


def test_conditions_compare_fields_values_and_other_fields() -> None:
    s = situation(savings_usd=10_000.0, action_costs_usd={"elevate_house": 40_000.0})
    assert cond(field="insured", op="eq", value=True).holds(s)
    assert cond(field="allowed_actions", op="contains", value="relocate").holds(s)
    assert not cond(field="allowed_actions", op="contains", value="elevate_house").holds(s)
    assert cond(field="tenure", op="in", value=["owner", "landlord"]).holds(s)
    assert cond(field="action_costs_usd.elevate_house", op="gt", other="savings_usd").holds(s)
    assert not cond(field="action_costs_usd.elevate_house", op="lt", other="savings_usd").holds(s)


def test_missing_mapping_key_makes_the_condition_false() -> None:
    s = situation(action_costs_usd={})
    assert not cond(field="action_costs_usd.elevate_house", op="gt", value=0).holds(s)
    assert not cond(field="action_costs_usd.elevate_house", op="le", value=0).holds(s)


def test_years_since_flood_none_is_false_not_an_error() -> None:
    assert not cond(field="years_since_flood", op="le", value=2).holds(situation())


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"field": "insurd", "op": "eq", "value": True}, "unknown situation field 'insurd'"),
        ({"field": "tenure.x", "op": "eq", "value": 1}, "not a mapping"),
        ({"field": "insured", "op": "eq"}, "exactly one of"),
        ({"field": "insured", "op": "eq", "value": 1, "other": "flooded"}, "exactly one of"),
        ({"field": "insured", "op": "approx", "value": 1}, "op"),
    ],
)
def test_bad_conditions_are_rejected(kw, message) -> None:
    with pytest.raises(ValueError, match=message):
        TopicCondition.model_validate(kw)


def test_incomparable_values_raise_a_config_error() -> None:
    with pytest.raises(ConfigError, match="cannot compare"):
        cond(field="tenure", op="gt", value=3).holds(situation())


def test_query_template_is_filled_and_restricted() -> None:
    topic = Topic(
        id="t",
        description="d",
        when=[[{"field": "flooded", "op": "eq", "value": True}]],
        query="a $tenure in zone $flood_zone, depth $depth_m m, costs $$5",
    )
    s = situation(tenure="renter", flood_zone="high", depth_m=0.75)
    assert topic.query_for(s) == "a renter in zone high, depth 0.75 m, costs $5"
    with pytest.raises(ValueError, match="unknown template fields"):
        Topic(id="t", description="d", when=[[]], query="$__class__")
    with pytest.raises(ValueError, match="unknown template fields"):
        Topic(id="t", description="d", when=[[]], query="$action_costs_usd")


def test_topic_fires_if_any_clause_holds_completely() -> None:
    topic = Topic(
        id="t",
        description="d",
        when=[
            [
                {"field": "flooded", "op": "eq", "value": True},
                {"field": "insured", "op": "eq", "value": False},
            ],
            [{"field": "floods_experienced", "op": "ge", "value": 3}],
        ],
        query="q",
    )
    assert not topic.matches(situation(flooded=True, insured=True))
    assert topic.matches(situation(flooded=True, insured=False))
    assert topic.matches(situation(floods_experienced=3))


def test_load_topics_errors_name_file_and_field(tmp_path) -> None:
    data = yaml.safe_load(TOPICS_FILE.read_text())
    data["topics"][1]["when"][0][0]["field"] = "flodded"
    bad = tmp_path / "topics.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as err:
        load_topics(bad)
    assert str(bad) in str(err.value) and "topics.1.when.0.0.field" in str(err.value)
    assert "flodded" in str(err.value)

    data = yaml.safe_load(TOPICS_FILE.read_text())
    data["topics"].append(data["topics"][0])
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="duplicate topic ids"):
        load_topics(bad)
    with pytest.raises(ConfigError, match="not found"):
        load_topics(tmp_path / "nope.yaml")
    bad.write_text("topics: [unclosed")
    with pytest.raises(ConfigError, match="malformed YAML"):
        load_topics(bad)


def test_prompt_templates_need_query_placeholder(tmp_path) -> None:
    data = yaml.safe_load(TOPICS_FILE.read_text())
    data["prompts"]["hyde_user"] = "no placeholder"
    bad = tmp_path / "t.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"hyde_user must contain \$query"):
        load_topics(bad)


# --- the shipped triggers ---------------------------------------------------------------
OWNER_ACTIONS = ("do_nothing", "buy_insurance", "elevate_house", "relocate")


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        # a quiet year, low zone, insured owner who cannot re-buy: nothing to look up
        ({}, []),
        # uninsured in the 1 % zone, may buy
        (
            {
                "insured": False,
                "flood_probability": 0.01,
                "allowed_actions": ("do_nothing", "buy_insurance"),
            },
            ["insurance_uninsured"],
        ),
        # uninsured in the low zone but just flooded
        (
            {
                "insured": False,
                "flooded": True,
                "depth_m": 0.3,
                "damage_usd": 5_000.0,
                "allowed_actions": ("do_nothing", "buy_insurance"),
            },
            ["insurance_uninsured", "insurance_claim"],
        ),
        # insured owner who can renew
        ({"allowed_actions": ("do_nothing", "buy_insurance")}, ["insurance_renewal"]),
        # owner with one flood behind, may elevate; elevation unaffordable alone also fires
        (
            {"floods_experienced": 1, "allowed_actions": ("do_nothing", "elevate_house")},
            ["elevation"],
        ),
        (
            {
                "allowed_actions": ("do_nothing", "elevate_house"),
                "action_costs_usd": {"elevate_house": 80_000.0},
                "savings_usd": 20_000.0,
            },
            ["elevation"],
        ),
        # severe flood, may relocate
        (
            {
                "flooded": True,
                "depth_m": 1.2,
                "damage_usd": 60_000.0,
                "allowed_actions": ("do_nothing", "relocate"),
            },
            ["insurance_claim", "relocation"],
        ),
        ({"floods_experienced": 2, "allowed_actions": ("do_nothing", "relocate")}, ["relocation"]),
        # renters cannot elevate: elevation never fires for them
        (
            {"tenure": "renter", "floods_experienced": 3, "allowed_actions": ("do_nothing",)},
            [],
        ),
    ],
)
def test_shipped_topic_triggers(changes, expected) -> None:
    topics = load_topics(TOPICS_FILE)
    assert [t.id for t in topics.matching(situation(**changes))] == expected


def test_shipped_topic_queries_fill_in() -> None:
    topics = load_topics(TOPICS_FILE)
    s = situation(tenure="renter", flood_zone="high")
    query = next(t for t in topics.topics if t.id == "insurance_uninsured").query_for(s)
    assert "renter" in query and "high flood zone" in query
