"""Evaluation of the ``governance:`` rule table of ``agent_types.yaml``.

A ``RuleSet`` is the rule table under one profile (``strict``, ``relaxed``, ``disabled``). For a
proposal (appraisal labels + action) and the household's situation, it evaluates every active
rule that applies to the proposed action and reports which fired, with their severity and the
message (placeholders filled in). Rules are data: this module knows the condition language, not
any particular rule.
"""

from __future__ import annotations

import logging
import string
from collections.abc import Sequence
from typing import Any

from governed_broker.broker.skills import SkillRegistry
from governed_broker.cognition.context import money, percent
from governed_broker.cognition.schema import DecisionReply
from governed_broker.config.base import ConfigError
from governed_broker.config.broker import GovernanceRule, GovernanceRules, NumericTest
from governed_broker.contracts.decision import (
    MISSING,
    HouseholdSituation,
    situation_path_problem,
    situation_value,
)
from governed_broker.contracts.effects import traits_of
from governed_broker.contracts.rules import RuleOutcome

logger = logging.getLogger(__name__)

def _test_holds(value: Any, test: Any) -> bool:
    if isinstance(test, NumericTest):
        try:
            number = float(value)
        except (TypeError, ValueError):
            return False
        return (
            (test.gt is None or number > test.gt)
            and (test.ge is None or number >= test.ge)
            and (test.lt is None or number < test.lt)
            and (test.le is None or number <= test.le)
        )
    if isinstance(test, list):
        return value in test
    return value == test


def can_protect(situation: HouseholdSituation, protective: frozenset[str]) -> bool:
    """Whether an action with a protective effect is allowed and affordable this year."""
    return any(a in protective and bool(situation.affordable.get(a, True))
               for a in situation.allowed_actions)


def condition_holds(rule: GovernanceRule, situation: HouseholdSituation, reply: Any,
                    protective: frozenset[str] = frozenset()) -> bool:
    """Whether ``rule.when`` holds for this situation and proposal (all tests AND-ed).

    A state test on a mapping key the situation lacks does not hold.

    Args:
        rule: The rule.
        situation: The household's situation.
        reply: The proposal (``cognition.schema.DecisionReply``: labels and decision).
        protective: Ids of the actions whose effect is protective (for ``can_protect``).
    """
    cond = rule.when
    if cond.can_protect is not None and can_protect(situation, protective) != cond.can_protect:
        return False
    if cond.threat is not None and reply.threat_appraisal.label not in cond.threat:
        return False
    if cond.coping is not None and reply.coping_appraisal.label not in cond.coping:
        return False
    if cond.affordable is not None:
        affordable = bool(situation.affordable.get(reply.decision, True))
        if affordable != cond.affordable:
            return False
    for path, test in cond.state.items():
        value = situation_value(situation, path)
        if value is MISSING or not _test_holds(value, test):
            return False
    return True


def message_values(situation: HouseholdSituation, reply: DecisionReply) -> dict[str, str]:
    """Values of the placeholders a rule message may use."""
    shares = situation.neighbour_shares
    return {
        "threat": reply.threat_appraisal.label,
        "coping": reply.coping_appraisal.label,
        "action": reply.decision,
        "action_cost": money(float(situation.action_costs_usd.get(reply.decision, 0.0))),
        "savings": money(situation.savings_usd),
        "income": money(situation.income_usd),
        "tenure": situation.tenure,
        "flood_zone": situation.flood_zone,
        "neighbours_insured": percent(shares.get("insured", 0.0)),
        "neighbours_elevated": percent(shares.get("elevated", 0.0)),
        "neighbours_relocated": percent(shares.get("relocated", 0.0)),
    }


class RuleSet:
    """The governance rules under one profile, checked against the skill registry.

    Args:
        rules: The validated ``governance:`` section.
        profile: ``strict``, ``relaxed`` or ``disabled``.
        registry: The skill registry (rules may only name its actions).
        labels: The appraisal scale, lowest first (``pmt_labels.labels`` of the domain; the
            dead-zone check runs over every pair of its labels).

    Raises:
        ConfigError: A rule names an unknown action or state field, or (with
            ``dead_zone_check: error``) the table has a dead zone under ``profile``.
    """

    def __init__(self, rules: GovernanceRules, profile: str, registry: SkillRegistry,
                 labels: Sequence[str]) -> None:
        self.profile = profile
        self.labels = tuple(labels)
        try:
            rules.check_actions(registry.ids)
        except ValueError as exc:
            raise ConfigError(f"agent_types.yaml governance: {exc}") from None
        for rule in rules.rules:
            for path in rule.when.state:
                self._check_field(rule.id, path)
        self._check_dead_zones(rules, registry)
        self.active = [
            (rule, rule.severity.for_profile(profile))
            for rule in rules.rules
            if rule.severity.for_profile(profile) != "off"
        ]
        self.protective = frozenset(a for a in registry.ids
                                    if traits_of(registry[a].effect).protective)
        self.on_exhausted = {rule.id: rule.on_exhausted for rule in rules.rules}

    @staticmethod
    def _check_field(rule_id: str, path: str) -> None:
        problem = situation_path_problem(path)
        if problem is not None:
            raise ConfigError(f"agent_types.yaml governance rule {rule_id!r}: unknown state "
                              f"field {path!r}: {problem}")

    def _check_dead_zones(self, rules: GovernanceRules, registry: SkillRegistry) -> None:
        if rules.dead_zone_check == "off":
            return
        zones = [z for z in rules.dead_zones(registry.actions_by_tenure(), self.labels)
                 if z[0] == self.profile]
        if not zones:
            return
        listed = "; ".join(
            f"{tenure} with threat {tp} and coping {cp} may only {open_ or 'nothing'}"
            for _, tenure, tp, cp, open_ in zones[:6]
        )
        text = (
            f"agent_types.yaml governance: the {self.profile!r} profile has {len(zones)} dead "
            f"zone(s) where ERROR rules leave one action or none: {listed}"
        )
        if rules.dead_zone_check == "error":
            raise ConfigError(text + " (set governance.dead_zone_check: warn to allow it)")
        logger.warning(text)

    def keeps(self, outcomes: list[RuleOutcome]) -> bool:
        """Whether every violated rule declares ``on_exhausted: keep`` (see the rule model)."""
        return bool(outcomes) and all(self.on_exhausted[o.rule_id] == "keep" for o in outcomes)

    def evaluate(self, situation: HouseholdSituation, reply: DecisionReply) -> list[RuleOutcome]:
        """Evaluate the active rules that apply to ``reply.decision``, in table order."""
        outcomes = []
        values: dict[str, str] | None = None
        for rule, severity in self.active:
            if reply.decision not in rule.actions:
                continue
            fired = condition_holds(rule, situation, reply, self.protective)
            message = ""
            if fired:
                values = values or message_values(situation, reply)
                message = " ".join(string.Template(rule.message).substitute(values).split())
            outcomes.append(RuleOutcome(rule.id, severity, fired, message, category=rule.category))
        return outcomes
