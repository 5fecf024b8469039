"""Every rule of agent_types.yaml under every profile, through the broker with a scripted LLM.

For each (rule, profile) a proposal that fires the rule is built from the rule's own
condition, so a new rule in the YAML is covered without a new test:
- ERROR: the proposal is blocked and re-asked with feedback naming the rule; an acceptable
  retry is ``retry_approved``; a model that insists gets what the rule declares after exactly
  ``max_retries`` re-asks: ``rejected`` with the default action (``on_exhausted: fallback``) or
  ``unresolved`` with its own proposal executed (``keep``);
- WARNING: never blocks (one call), recorded as fired;
- off: not evaluated; the proposal stands unless it is infeasible, in which case the
  feasibility backstop rejects it (never executed).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from broker_helpers import (
    FIRST,
    GOV_RETRY,
    OWNER_ACTIONS,
    governance_rules,
    make_broker,
    make_situation,
    reply,
)

from governed_broker.config.broker import PROFILES, GovernanceRule, NumericTest

RULES = governance_rules().rules
CASES = [(rule, profile) for rule in RULES for profile in PROFILES]
#: A reply that fires no ERROR rule in any situation built below.
SAFE = reply("L", "M", "do_nothing", "safe choice")


def _satisfying(test: Any) -> Any:
    if isinstance(test, NumericTest):
        if test.gt is not None:
            return test.gt + 0.1
        if test.ge is not None:
            return test.ge
        return (test.lt if test.lt is not None else test.le) - 0.1
    return test[0] if isinstance(test, list) else test


def trigger(rule: GovernanceRule) -> tuple[Any, dict]:
    """A situation and a proposal that fire ``rule``."""
    cond = rule.when
    action = rule.actions[0]
    fields: dict[str, Any] = {}
    shares = {"insured": 0.3, "elevated": 0.1, "relocated": 0.0}
    for path, test in cond.state.items():
        head, _, key = path.partition(".")
        if head == "neighbour_shares":
            shares[key] = _satisfying(test)
        else:
            fields[head] = _satisfying(test)
    fields["neighbour_shares"] = shares
    if cond.affordable is not None:
        fields["affordable"] = {a: (cond.affordable if a == action else True)
                                for a in OWNER_ACTIONS}
    if cond.can_protect is False:  # nothing protective it could pay for
        fields["affordable"] = {a: a == "do_nothing" for a in OWNER_ACTIONS}
    situation = make_situation(**fields)
    threat = cond.threat[0] if cond.threat else "M"
    coping = cond.coping[0] if cond.coping else "M"
    return situation, reply(threat, coping, action)


def feasible(situation, action: str) -> bool:
    return action in situation.allowed_actions and situation.affordable.get(action, True)


def fired_ids(decision) -> list[tuple[int, str, str]]:
    return [(f["attempt"], f["id"], f["severity"]) for f in decision.audit["rules_fired"]]


@pytest.mark.parametrize(("rule", "profile"), CASES, ids=[f"{r.id}-{p}" for r, p in CASES])
def test_rule_under_profile(rule, profile, close_brokers):
    situation, proposal = trigger(rule)
    severity = rule.severity.for_profile(profile)
    broker, backend = make_broker([(FIRST, proposal), (GOV_RETRY, SAFE)], profile=profile)
    close_brokers.append(broker)
    (decision,) = broker.decide([situation])
    assert decision.proposed_action == proposal["decision"]
    assert decision.action in situation.allowed_actions
    assert situation.affordable.get(decision.action, True)
    if severity == "ERROR":
        assert len(backend.calls) == 2
        feedback = backend.calls[1].messages[-1]["content"]
        assert f"[{rule.id}]" in feedback
        assert not re.search(r"\$[A-Za-z_{]", feedback), "un-interpolated placeholder"
        assert decision.status == "retry_approved"
        assert decision.action == "do_nothing" and decision.retries == 1
        assert (0, rule.id, "ERROR") in fired_ids(decision)
    elif severity == "WARNING":
        assert len(backend.calls) == 1
        assert (0, rule.id, "WARNING") in fired_ids(decision)
        if feasible(situation, proposal["decision"]):
            assert decision.status == "approved"
            assert decision.action == proposal["decision"]
    else:
        assert len(backend.calls) == 1
        assert rule.id not in {r["id"] for r in decision.audit["attempts"][0]["rules"]}
        if feasible(situation, proposal["decision"]):
            assert (decision.status, decision.action) == ("approved", proposal["decision"])
        else:
            assert (decision.status, decision.action) == ("rejected", "do_nothing")
            assert decision.audit["backstop"]


ERROR_CASES = [(r, p) for r, p in CASES if r.severity.for_profile(p) == "ERROR"]


@pytest.mark.parametrize(
    ("rule", "profile"), ERROR_CASES, ids=[f"{r.id}-{p}" for r, p in ERROR_CASES]
)
@pytest.mark.parametrize("max_retries", [0, 2])
def test_exhausted_retries_give_the_declared_outcome(rule, profile, max_retries, close_brokers):
    situation, proposal = trigger(rule)
    broker, backend = make_broker([(r".", proposal)], profile=profile, max_retries=max_retries)
    close_brokers.append(broker)
    (decision,) = broker.decide([situation])
    assert len(backend.calls) == 1 + max_retries
    if rule.on_exhausted == "keep":  # the model's own choice stands, the violation recorded
        assert decision.status == "unresolved"
        assert decision.action == proposal["decision"]
        assert decision.audit["fallback"] is False
        assert decision.audit["unresolved_rules"] == [rule.id]
    else:
        assert decision.status == "rejected"
        assert decision.action == "do_nothing"
        assert decision.audit["fallback"] is True
        assert decision.audit["unresolved_rules"] == []
    assert decision.proposed_action == proposal["decision"]
    assert decision.retries == max_retries
    assert decision.audit["retries_by_kind"] == {
        "format": 0, "governance": max_retries, "transport": 0}
    assert rule.id in decision.reason
    for call in backend.calls[1:]:
        assert f"[{rule.id}]" in call.messages[-1]["content"]
