"""The governed broker: skill registry, rule table, validation with retries, audit.

``build_decision_maker(experiment, run_dir)`` (in ``governed_broker.broker.factory``) builds the
``GovernedBroker`` an experiment with ``decision.maker: llm`` uses.
"""

from governed_broker.broker.governed import GovernedBroker, RequestSettings
from governed_broker.broker.rules import RuleSet
from governed_broker.broker.skills import Skill, SkillRegistry
from governed_broker.contracts.jsonl import JsonlWriter
from governed_broker.contracts.rules import RuleOutcome

__all__ = [
    "GovernedBroker",
    "JsonlWriter",
    "RequestSettings",
    "RuleOutcome",
    "RuleSet",
    "Skill",
    "SkillRegistry",
]
