"""The rule table: validation at load time, dead zones, the condition language."""

from __future__ import annotations

import copy

import pytest
import yaml
from broker_helpers import AGENT_TYPES, SCALE, governance_rules, make_situation, registry
from pydantic import ValidationError

from governed_broker.broker.rules import RuleSet
from governed_broker.cognition.schema import DecisionReply
from governed_broker.config.base import ConfigError
from governed_broker.config.broker import GovernanceRules


def rule(**overrides):
    base = {
        "id": "r1", "category": "thinking", "actions": ["do_nothing"],
        "when": {"threat": ["VH"]}, "severity": {"strict": "ERROR", "relaxed": "WARNING"},
        "message": "Threat $threat with $action.",
    }
    base.update(overrides)
    return base


def proposal(threat="M", coping="M", action="do_nothing") -> DecisionReply:
    return DecisionReply.model_validate({
        "threat_appraisal": {"label": threat, "reason": ""},
        "coping_appraisal": {"label": coping, "reason": ""}, "decision": action, "reason": ""})


def test_repository_table_loads_without_dead_zones_in_any_profile():
    rules = governance_rules()
    assert rules.dead_zones(registry().actions_by_tenure(), SCALE.labels) == []
    for profile in ("strict", "relaxed", "disabled"):
        RuleSet(rules, profile, registry(), SCALE.labels)


def test_spec4_strict_table_is_present():
    by_id = {r.id: r for r in governance_rules().rules}
    strict = {r.id: r.severity.strict for r in by_id.values()}
    assert strict["high_threat_inaction"] == strict["very_high_threat_inaction"] == "ERROR"
    assert by_id["high_threat_inaction"].when.coping == ["M", "H", "VH"]
    assert strict["low_threat_elevation"] == strict["low_threat_relocation"] == "ERROR"
    assert strict["low_coping_costly_action"] == "WARNING"
    assert all(r.severity.disabled == "off" for r in by_id.values())


def test_lineage_pre_v22_table_is_rejected_as_a_dead_zone():
    data = copy.deepcopy(AGENT_TYPES["governance"])
    for r in data["rules"]:
        if r["id"] == "low_coping_costly_action":
            r["severity"]["strict"] = "ERROR"
        if r["id"] == "fatalistic_inaction":
            r["severity"]["strict"] = "ERROR"
    rules = GovernanceRules.model_validate(data)
    with pytest.raises(ConfigError, match=r"dead zone.*threat H and coping L may only"):
        RuleSet(rules, "strict", registry(), SCALE.labels)
    RuleSet(rules, "relaxed", registry(), SCALE.labels)  # the relaxed column is still fine
    data["dead_zone_check"] = "warn"
    RuleSet(GovernanceRules.model_validate(data), "strict", registry(), SCALE.labels)


def test_unknown_action_or_field_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown action"):
        RuleSet(GovernanceRules.model_validate({"rules": [rule(actions=["swim"])]}),
                "strict", registry(), SCALE.labels)
    bad_field = rule(when={"state": {"wealth": {"gt": 1}}})
    with pytest.raises(ConfigError, match="unknown state field 'wealth'"):
        RuleSet(GovernanceRules.model_validate({"rules": [bad_field]}), "strict", registry(),
                SCALE.labels)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"message": "Hello $name"}, "unknown placeholder"),
        ({"message": "Costs $5"}, "not a valid"),
        ({"when": {}}, "at least one test"),
        ({"severity": {"strict": "FATAL", "relaxed": "off"}}, "strict"),
        ({"id": "Bad Id"}, "id"),
        ({"when": {"state": {"savings_usd": {}}}}, "at least one of gt"),
    ],
)
def test_malformed_rules_are_rejected(change, match):
    with pytest.raises(ValidationError, match=match):
        GovernanceRules.model_validate({"rules": [rule(**change)]})


def test_duplicate_ids_are_rejected():
    with pytest.raises(ValidationError, match="duplicate"):
        GovernanceRules.model_validate({"rules": [rule(), rule()]})


def test_unquoted_yaml_off_is_accepted():
    data = yaml.safe_load("rules:\n- id: r1\n  category: social\n  actions: [do_nothing]\n"
                          "  when: {threat: [H]}\n  severity: {strict: WARNING, relaxed: off}\n"
                          "  message: m\n")
    assert GovernanceRules.model_validate(data).rules[0].severity.relaxed == "off"


def test_condition_language_state_tests():
    rules = GovernanceRules.model_validate({"rules": [
        rule(id="eq", when={"state": {"tenure": "renter"}}),
        rule(id="member", when={"state": {"flood_zone": ["high", "medium"]}}),
        rule(id="num", when={"state": {"savings_usd": {"ge": 1000, "lt": 5000}}}),
        rule(id="dotted", when={"state": {"neighbour_shares.elevated": {"gt": 0.5}}}),
        rule(id="missing_key", when={"state": {"neighbour_shares.grant": True}}),
        rule(id="labels", when={"threat": ["H"], "coping": ["VL", "L"]}),
        rule(id="afford", when={"affordable": False}),
    ]})
    rs = RuleSet(rules, "strict", registry(), SCALE.labels)
    s = make_situation(tenure="renter", savings_usd=2000.0,
                       neighbour_shares={"insured": 0, "elevated": 0.6, "relocated": 0})
    fired = {o.rule_id for o in rs.evaluate(s, proposal("H", "L")) if o.fired}
    assert fired == {"eq", "member", "num", "dotted", "labels"}
    s2 = make_situation(flood_zone="low", savings_usd=5000.0,
                        affordable={"do_nothing": False})
    fired2 = {o.rule_id for o in rs.evaluate(s2, proposal("H", "M")) if o.fired}
    assert fired2 == {"afford"}


def test_rules_only_evaluated_for_their_actions_and_profile():
    rs = RuleSet(GovernanceRules.model_validate({"rules": [rule()]}), "relaxed", registry(),
                 SCALE.labels)
    assert rs.evaluate(make_situation(), proposal("VH", action="buy_insurance")) == []
    (outcome,) = rs.evaluate(make_situation(), proposal("VH"))
    assert (outcome.severity, outcome.fired, outcome.message) == (
        "WARNING", True, "Threat VH with do_nothing.")
    disabled = RuleSet(GovernanceRules.model_validate({"rules": [rule()]}), "disabled",
                       registry(), SCALE.labels)
    assert disabled.evaluate(make_situation(), proposal("VH")) == []


def test_inaction_rules_respect_protection_and_means():
    """An elevated household, or one with no protective action it could take or pay for.

    May keep doing nothing at high threat; a household that can act is re-asked.
    """
    from broker_helpers import OWNER_ACTIONS, governance_rules, make_situation, registry, reply

    from governed_broker.broker.rules import RuleSet
    from governed_broker.cognition.schema import DecisionReply

    rules = RuleSet(governance_rules(), "strict", registry(), ("VL", "L", "M", "H", "VH"))
    idle = DecisionReply.model_validate(reply("VH", "H", "do_nothing"))

    def fired(situation):
        return {o.rule_id for o in rules.evaluate(situation, idle) if o.fired}

    assert "very_high_threat_inaction" in fired(make_situation())
    assert "very_high_threat_inaction" not in fired(make_situation(elevated=True))
    broke = make_situation(affordable={a: a == "do_nothing" for a in OWNER_ACTIONS})
    assert "very_high_threat_inaction" not in fired(broke)
    insured_only = make_situation(affordable={a: a in ("do_nothing", "buy_insurance")
                                              for a in OWNER_ACTIONS})
    assert "very_high_threat_inaction" in fired(insured_only)  # insuring is still open


def test_keep_is_refused_for_rules_whose_proposals_cannot_run():
    import pytest
    from pydantic import ValidationError

    from governed_broker.config.broker import GovernanceRule

    with pytest.raises(ValidationError, match="on_exhausted 'keep' is for thinking"):
        GovernanceRule.model_validate({
            "id": "x", "category": "financial", "actions": ["buy_insurance"],
            "when": {"affordable": False}, "severity": {"strict": "ERROR", "relaxed": "ERROR"},
            "message": "m", "on_exhausted": "keep"})


def test_rule_severity_replaces_only_the_profile_column_of_the_named_rule():
    rules = governance_rules()
    changed = rules.with_severities("strict", {"flooded_threat_very_low": "ERROR",
                                               "majority_deviation": "off"})
    by_id = {r.id: r for r in changed.rules}
    assert by_id["flooded_threat_very_low"].severity.strict == "ERROR"
    assert by_id["flooded_threat_very_low"].severity.relaxed == "off"
    assert by_id["majority_deviation"].severity.strict == "off"
    assert [r for r in changed.rules if r.id not in ("flooded_threat_very_low",
            "majority_deviation")] == [r for r in rules.rules if r.id not in (
            "flooded_threat_very_low", "majority_deviation")]
    with pytest.raises(ValueError, match="unknown rule id"):
        rules.with_severities("strict", {"no_such_rule": "ERROR"})


@pytest.mark.parametrize("severity", ["off", "ERROR"])
def test_flooded_household_rating_threat_very_low_fires_only_when_switched_on(severity):
    rules = governance_rules().with_severities("strict", {"flooded_threat_very_low": severity})
    ruleset = RuleSet(rules, "strict", registry(), SCALE.labels)
    flooded = make_situation(flooded=True, depth_m=0.6, damage_usd=20_000.0)
    dry = make_situation(flooded=False, depth_m=0.0, damage_usd=0.0)

    def fired(situation, threat, action):
        return [o.rule_id for o in ruleset.evaluate(situation, proposal(threat, "M", action))
                if o.rule_id == "flooded_threat_very_low" and o.fired]

    expected = ["flooded_threat_very_low"] if severity == "ERROR" else []
    for action in ("do_nothing", "buy_insurance"):
        assert fired(flooded, "VL", action) == expected
        assert fired(flooded, "L", action) == []
        assert fired(dry, "VL", action) == []
