"""The Mesa flood world (docs/ARCHITECTURE.md "Yearly loop").

The decision interface it uses lives in ``governed_broker.contracts.decision``.
"""

from governed_broker.sim.agents import HouseholdAgent
from governed_broker.sim.baseline import BaselineDecisionMaker
from governed_broker.sim.model import FloodModel
from governed_broker.sim.reporters import AGENT_COLUMNS, model_columns

__all__ = [
    "AGENT_COLUMNS",
    "BaselineDecisionMaker",
    "FloodModel",
    "HouseholdAgent",
    "model_columns",
]
