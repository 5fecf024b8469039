"""The Mesa flood world (docs/ARCHITECTURE.md "Yearly loop"). The decision interface it uses
lives in ``governed_broker.contracts.decision``."""

from governed_broker.sim.baseline import BaselineDecisionMaker
from governed_broker.sim.model import AGENT_COLUMNS, FloodModel, HouseholdAgent, model_columns

__all__ = [
    "AGENT_COLUMNS",
    "BaselineDecisionMaker",
    "FloodModel",
    "HouseholdAgent",
    "model_columns",
]
