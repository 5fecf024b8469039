"""governed_broker: LLM-driven agent-based models of household flood adaptation.

A Mesa world of households that decide each simulated year how to adapt to flood risk.
Decisions come from a ``DecisionMaker``: the rule-based PMT / expected-utility baseline, or
the governed LLM broker that validates every proposal against world and theory rules.
"""

__version__ = "0.1.0"
