"""PMT cognition of a household: the decision prompt, the reply schema, reflection."""

from governed_broker.cognition.context import ContextBudgetError, ContextBuilder, Prompt
from governed_broker.cognition.reflection import ReflectionEngine, ReflectionTarget
from governed_broker.cognition.repair import ParseResult, parse_decision
from governed_broker.cognition.schema import DecisionReply, decision_json_schema

__all__ = [
    "ContextBudgetError",
    "ContextBuilder",
    "DecisionReply",
    "ParseResult",
    "Prompt",
    "ReflectionEngine",
    "ReflectionTarget",
    "decision_json_schema",
    "parse_decision",
]
