"""The Mesa flood world (SPEC section 2) and the decision-maker interface."""

from governed_broker.sim.baseline import BaselineDecisionMaker
from governed_broker.sim.decision import (
    DECISION_STATUSES,
    Decision,
    DecisionMaker,
    HouseholdSituation,
)
from governed_broker.sim.model import AGENT_COLUMNS, MODEL_COLUMNS, FloodModel, HouseholdAgent

__all__ = [
    "AGENT_COLUMNS",
    "DECISION_STATUSES",
    "MODEL_COLUMNS",
    "BaselineDecisionMaker",
    "Decision",
    "DecisionMaker",
    "FloodModel",
    "HouseholdAgent",
    "HouseholdSituation",
]
