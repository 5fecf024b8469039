"""The reporters and the instruments compute exactly the columns the contract declares."""

from __future__ import annotations

from governed_broker.contracts.columns import AGENT_YEARLY, MODEL_YEARLY_FIXED, names
from governed_broker.contracts.decision import Decision
from governed_broker.sim import FloodModel
from governed_broker.sim.reporters import AGENT_REPORTERS, MODEL_REPORTERS, YearView


class Idle:
    """Decides ``do_nothing`` for everyone."""

    name = "idle"

    def decide(self, situations):
        return [Decision(s.agent_id, "do_nothing", "do_nothing", "baseline") for s in situations]

    def end_year(self, year, households) -> None:
        pass


def test_agent_reporters_and_instruments_report_the_declared_agent_columns(
        experiments) -> None:
    config = experiments.config(["years=1"])
    model = FloodModel(config, Idle())
    model.step()
    view = YearView(model.year, model.current, model.hh, model.zones, model.action_ids)
    reported = [c for i in model.instruments for c in i.report(view)]
    assert not set(reported) & set(AGENT_REPORTERS), "an instrument reports a world column"
    assert len(set(reported)) == len(reported), "two instruments report one column"
    assert set(AGENT_REPORTERS) | set(reported) == set(names(AGENT_YEARLY))
    assert set(model.last_agent_columns) == set(names(AGENT_YEARLY))


def test_model_reporters_are_the_declared_fixed_model_columns() -> None:
    assert set(MODEL_REPORTERS) == set(names(MODEL_YEARLY_FIXED))
