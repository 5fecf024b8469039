"""What a battery will cost, said before it starts: decisions, model calls, minutes, power.

The decisions are the plan's (``plan.BatteryPlan.decisions``). Each asks the model at least once;
a reply the rules block or cannot read is asked again, up to the governance budgets
(``max_retries`` + ``max_parse_retries`` more). Minutes are given at a measured figure per call
where there is one: the model catalogue's ``speed`` for an embedded catalogue model (measured on
2 idle cores); a reference or scripted backend answers at once; a server's or a local file's
speed is not known here, so only the calls are given. Replies already in the response cache
cost no model time.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any

from governed_broker.config.resolved import ResolvedExperiment
from governed_broker.validity.plan import BatteryPlan


@dataclass(frozen=True)
class Budget:
    """The cost of a battery before it runs.

    Attributes:
        decisions: Decisions asked.
        calls_at_most: Model calls if every decision used up its re-ask budgets.
        seconds_per_call: A measured seconds per call for this backend (None: unknown).
        speed_source: Where that figure comes from.
    """

    decisions: int
    calls_at_most: int
    seconds_per_call: float | None
    speed_source: str

    def minutes(self) -> float | None:
        """Minutes of the first calls at ``seconds_per_call`` (None: unknown)."""
        if self.seconds_per_call is None:
            return None
        return self.decisions * self.seconds_per_call / 60

    def to_json(self) -> dict[str, Any]:
        """The card's form."""
        minutes = self.minutes()
        return {"decisions": self.decisions, "calls_at_least": self.decisions,
                "calls_at_most": self.calls_at_most, "seconds_per_call": self.seconds_per_call,
                "speed_source": self.speed_source,
                "minutes_at_least": None if minutes is None else round(minutes, 1)}


def battery_budget(plan: BatteryPlan, experiment: ResolvedExperiment) -> Budget:
    """The budget of ``plan`` on the experiment's backend."""
    config = experiment.config
    governance = config.governance
    decisions = plan.decisions()
    seconds, source = _speed(experiment)
    return Budget(decisions, decisions * (1 + governance.max_retries
                                          + governance.max_parse_retries), seconds, source)


def _speed(experiment: ResolvedExperiment) -> tuple[float | None, str]:
    llm = experiment.config.llm
    assert llm is not None
    if llm.backend in ("reference", "scripted"):
        return 0.0, f"{llm.backend} backend: no model, replies at once"
    if llm.backend == "embedded" and llm.model_path is None:
        from governed_broker.llm.catalogue import default_model_name, get_model_spec

        spec = get_model_spec(llm.model or default_model_name())
        if spec.seconds_per_call is not None:
            return spec.seconds_per_call, f"the model catalogue's figure: {spec.speed_source}"
    return None, f"the speed of {llm.backend} model {llm.model or llm.model_path} is not known here"


def budget_lines(plan: BatteryPlan, budget: Budget) -> list[str]:
    """The budget as printed before the battery starts.

    The totals, then per test what it reads and its power at its design effect.
    """
    minutes = budget.minutes()
    if minutes is None:
        time = f"time: {budget.speed_source}"
    elif budget.seconds_per_call == 0:
        time = f"time: seconds ({budget.speed_source})"
    else:
        time = (f"at least {minutes:.0f} min at {budget.seconds_per_call:g} s per call (the "
                "model catalogue's figure, measured on 2 idle cores; a busy machine takes "
                "longer); re-asks come on top, and replies already in the response cache cost "
                "nothing")
    lines = [f"battery: {budget.decisions:,} decisions, {budget.decisions:,} model calls (up to "
             f"{budget.calls_at_most:,} if every re-ask were used)",
             *textwrap.wrap(time, 96, initial_indent="  ", subsequent_indent="  "),
             "  test                                  primary  replies  per vignette  power"]
    for test in plan.battery.tests.tests:
        size = plan.sizes[test.name]
        power = "-" if size.power is None else f"{size.power:.2f}"
        lines.append(f"  {test.name:38s}{'yes' if test.primary else 'no':9s}{size.replies:>7d}"
                     f"{size.per_vignette:>14d}  {power}")
    if plan.battery.quick:
        lines.append("  (quick: a smoke check with too few replies for power; its card never "
                     "opens a gate)")
    return lines
