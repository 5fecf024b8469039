"""The reporters compute exactly the columns the contract declares."""

from __future__ import annotations

from governed_broker.contracts.columns import AGENT_YEARLY, MODEL_YEARLY_FIXED, names
from governed_broker.sim.reporters import AGENT_REPORTERS, MODEL_REPORTERS


def test_agent_reporters_are_the_declared_agent_columns() -> None:
    assert list(AGENT_REPORTERS) == list(names(AGENT_YEARLY))


def test_model_reporters_are_the_declared_fixed_model_columns() -> None:
    assert set(MODEL_REPORTERS) == set(names(MODEL_YEARLY_FIXED))
