"""The battery calibrated on reference respondents.

How often each test passes a respondent whose truth is known (``governed_broker.llm.reference``).

``calibrate`` runs the real battery (situations, prompts, broker, rules, audit) on the
experiment with its model replaced by each reference respondent, once per battery seed
(``seed``, ``seed + 1``, ...), and counts per test how often each respondent passed it and how
often its card passed. For the deaf, random and seed-driven respondents a pass of a
responsiveness test (directional, persona, retest) is a false pass; for the rule and the noisy
rule a pass is what the battery should give (its power); the order-follower should fail the
order test. ``table`` prints the result as the Markdown table of docs/validity.md, with each
test's planned replies and its power at its design effect; ``calibration_json`` is what
``calibration.json`` in the battery directory holds, which every card then quotes per test.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from governed_broker.config.resolved import ResolvedExperiment, resolve_experiment
from governed_broker.validity import CALIBRATION_VERSION
from governed_broker.validity.card import battery_sha256, verdict
from governed_broker.validity.measures import RESPONSIVENESS
from governed_broker.validity.plan import BatteryPlan
from governed_broker.validity.validate import prepare, run_battery

#: The respondents of the calibration table, in its column order.
RESPONDENTS = ("deaf", "random", "seed", "order:0.45", "rule", "noisy_rule:0.25")
#: The respondents with no response to the facts: any pass of theirs on a responsiveness
#: test is a false pass.
NULL_RESPONDENTS = ("deaf", "random", "seed")


def reference_experiment(experiment: ResolvedExperiment, name: str) -> ResolvedExperiment:
    """The experiment with its model replaced by the reference respondent ``name``.

    The response cache is off (its replies cost nothing to make again); everything else is as
    configured.
    """
    config = experiment.config
    assert config.llm is not None
    llm = config.llm.model_copy(update={
        "backend": "reference", "model": name, "model_path": None, "script": None,
        "prompt_cache": True, "cache": config.llm.cache.model_copy(update={"mode": "off"})})
    checked = type(llm).model_validate(llm.model_dump())  # the reference name is checked
    return resolve_experiment(config.model_copy(update={"llm": checked}))


@dataclass
class Tally:
    """How one respondent did over the battery seeds."""

    runs: int = 0
    cards_passed: int = 0
    passes: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, dict[str, int]] = field(default_factory=dict)
    tests_passed: list[int] = field(default_factory=list)
    first: dict[str, str] = field(default_factory=dict)

    def add(self, results: Sequence[Any]) -> None:
        """Count one battery's results (the first battery's outcomes kept per test)."""
        if not self.runs:
            self.first = {r.name: r.outcome for r in results}
        self.runs += 1
        self.cards_passed += int(verdict(list(results))[0])
        self.tests_passed.append(sum(r.outcome == "pass" for r in results))
        for r in results:
            self.passes[r.name] = self.passes.get(r.name, 0) + int(r.outcome == "pass")
            counts = self.outcomes.setdefault(r.name, {})
            counts[r.outcome] = counts.get(r.outcome, 0) + 1

    def rate(self, test: str) -> float:
        """The share of runs in which ``test`` passed."""
        return self.passes.get(test, 0) / self.runs if self.runs else 0.0


@dataclass
class Calibration:
    """The tallies of every respondent, and the plan of the shipped seed."""

    plan: BatteryPlan
    seeds: list[int]
    tallies: dict[str, Tally]


def calibrate(experiment: ResolvedExperiment, names: Sequence[str], seeds: int,
              progress: Callable[[str], None] | None = None) -> Calibration:
    """Run the battery ``seeds`` times on each reference respondent of ``names``.

    The battery seeds are ``seed`` to ``seed + seeds - 1``.
    """
    first = prepare(reference_experiment(experiment, names[0]))
    root = first.plan.battery.tests.seed
    tallies = {}
    for name in names:
        ref = reference_experiment(experiment, name)
        tally = tallies[name] = Tally()
        for i in range(seeds):
            prepared = prepare(ref, seed=root + i)
            with tempfile.TemporaryDirectory(prefix="gb-reference-") as work:
                _, _, results = run_battery(ref, prepared.plan, Path(work))
            tally.add(results)
            if progress is not None:
                progress(f"reference {name}: battery seed {root + i} ({i + 1}/{seeds}), card "
                         f"{'passed' if verdict(results)[0] else 'not passed'}")
    return Calibration(first.plan, [root + i for i in range(seeds)], tallies)


def table(calibration: Calibration) -> str:
    """The Markdown table.

    Per test its planned replies, its power at its design effect and how often each respondent
    passed it; the last row, how often its card passed.
    """
    names = list(calibration.tallies)
    header = ["test", "primary", "replies", "power", *(f"`{n}`" for n in names)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for test in calibration.plan.battery.tests.tests:
        size = calibration.plan.sizes[test.name]
        power = "-" if size.power is None else f"{size.power:.2f}"
        rates = [f"{calibration.tallies[n].rate(test.name):.2f}" for n in names]
        lines.append(f"| {test.name} | {'yes' if test.primary else ''} | {size.replies} | "
                     f"{power} | " + " | ".join(rates) + " |")
    cards = [f"**{t.cards_passed / t.runs:.2f}**" for t in calibration.tallies.values()]
    lines.append("| **card passed** | | | | " + " | ".join(cards) + " |")
    return "\n".join(lines)


def calibration_json(calibration: Calibration, made_with: str) -> dict[str, Any]:
    """What ``calibration.json`` holds.

    Per test each respondent's pass rate and the largest false-pass rate of the respondents that do
    not respond (responsiveness tests only); the judging code's ``CALIBRATION_VERSION``; and each
    respondent's outcome of every test at the first battery seed (``first_seed``), which a fast
    test judges again to catch a change of outcome made without a version bump.
    """
    battery = calibration.plan.battery
    tests: dict[str, Any] = {}
    for test in battery.tests.tests:
        rates = {n: round(t.rate(test.name), 3) for n, t in calibration.tallies.items()}
        nulls = [rates[n] for n in NULL_RESPONDENTS if n in rates]
        responsive = test.family in RESPONSIVENESS
        tests[test.name] = {"pass_rate": rates,
                            "false_pass_rate": max(nulls) if responsive and nulls else None}
    return {"battery_sha256": battery_sha256(battery),
            "calibration_version": CALIBRATION_VERSION, "made_with": made_with,
            "seeds": calibration.seeds[0] if len(calibration.seeds) == 1 else
            [calibration.seeds[0], calibration.seeds[-1]],
            "runs": len(calibration.seeds),
            "cards_passed": {n: round(t.cards_passed / t.runs, 3)
                             for n, t in calibration.tallies.items()},
            "tests_passed": {n: {"min": min(t.tests_passed), "mean": round(
                sum(t.tests_passed) / t.runs, 2), "max": max(t.tests_passed)}
                for n, t in calibration.tallies.items()},
            "outcomes": {n: t.outcomes for n, t in calibration.tallies.items()},
            "first_seed": {"seed": calibration.seeds[0],
                           "outcomes": {n: t.first for n, t in calibration.tallies.items()}},
            "tests": tests}
