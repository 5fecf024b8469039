"""``validate``: run the battery for an experiment and write its card.

The battery's decisions are made in ``<out>.partial/`` (the broker's ``decisions.jsonl`` and
``llm_calls.sqlite``, and ``vignettes.jsonl``: which vignette, arm and replicate each household
id stands for), the card is written there as ``validity_card.json``, and the directory is renamed
to ``<out>`` only when everything is written; the card is then stored under its key in the cards
directory, where runs of the same configuration find it. ``--overwrite`` replaces only a
directory that holds nothing but these files.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from governed_broker.config.base import ConfigError
from governed_broker.config.cost import calls_per_decision
from governed_broker.config.resolved import ResolvedExperiment
from governed_broker.contracts.jsonl import JsonlWriter
from governed_broker.llm.base import LLMBackend
from governed_broker.progress import Progress, reporting
from governed_broker.run_dir import RunLock, check_out_dir, partial_dir, write_atomic
from governed_broker.validity.battery import load_battery
from governed_broker.validity.budget import Budget, battery_budget
from governed_broker.validity.card import card_key, make_card
from governed_broker.validity.measures import TestResult, run_tests
from governed_broker.validity.plan import BatteryPlan, plan_battery
from governed_broker.validity.probe import Prober, Reply
from governed_broker.validity.situations import zone_probabilities
from governed_broker.validity.store import CARD_FILE, card_text, cards_dir, save_card

VIGNETTES_FILE = "vignettes.jsonl"
#: Everything ``validate`` writes into its directory (SQLite side files included).
VALIDITY_FILES = frozenset({
    CARD_FILE, VIGNETTES_FILE, "readout.json", "decisions.jsonl", "llm_calls.sqlite",
    "llm_calls.sqlite-wal", "llm_calls.sqlite-shm", "llm_calls.sqlite-journal"})


@dataclass(frozen=True)
class Validation:
    """A finished ``validate``.

    Attributes:
        card: The card.
        out_dir: The directory with the card and the battery's audit.
        stored: The card's path in the cards directory (None: not stored).
        results: The test results.
    """

    card: dict[str, Any]
    out_dir: Path
    stored: Path | None
    results: list[TestResult]


def default_out_dir(experiment: ResolvedExperiment, quick: bool) -> Path:
    """``outputs/<name>-validity`` (``-validity-quick`` for ``--quick``)."""
    return Path("outputs") / f"{experiment.config.name}-validity{'-quick' if quick else ''}"


def require_ours(path: Path, action: str) -> None:
    """Refuse to ``action`` a directory that holds anything ``validate`` does not write."""
    strangers = sorted(n for n in os.listdir(path)
                       if n not in VALIDITY_FILES and not n.startswith(".tmp-"))
    if strangers or any((path / n).is_symlink() or (path / n).is_dir()
                        for n in os.listdir(path)):
        raise ConfigError(f"refusing to {action} {path}: it holds entries `validate` does not "
                          f"write ({', '.join(strangers[:5]) or 'folders or links'}); choose "
                          "another --out, or move it away yourself")


def empty_work_dir(out: Path, overwrite: bool) -> Path:
    """The empty ``<out>.partial/`` a battery writes into, ``out`` checked first.

    Raises:
        ConfigError: ``out`` exists without ``overwrite``, or either holds entries ``validate``
            does not write.
    """
    if out.exists():
        if not overwrite:
            raise ConfigError(f"{out} already exists; choose another --out or pass "
                              "--overwrite")
        require_ours(out, "replace")
    work = partial_dir(out)
    if work.exists():
        require_ours(work, "reuse")
        shutil.rmtree(work)
    work.mkdir(parents=True)
    return work


def publish_card(work: Path, out: Path, card: dict[str, Any]) -> None:
    """Write ``card`` into ``work`` and put ``work`` in the place of ``out`` at once.

    Called under the output directory's lock: an earlier ``out`` (checked by
    ``empty_work_dir``) is replaced only once the whole card is written.
    """
    write_atomic(work / CARD_FILE, card_text(card))
    if out.exists():
        shutil.rmtree(out)
    os.replace(work, out)


@dataclass(frozen=True)
class Prepared:
    """A battery ready to run for an experiment: the plan, its card key and its budget."""

    plan: BatteryPlan
    key: str
    budget: Budget


def prepare(experiment: ResolvedExperiment, quick: bool = False,
            seed: int | None = None) -> Prepared:
    """Load and plan the experiment's battery (``seed``.

    Another battery seed, for the reference calibration) and compute its card key and budget; no
    model call.

    Raises:
        ConfigError: no ``llm:`` section, or a broken battery.
    """
    config = experiment.config
    if config.llm is None or config.decision.maker != "llm":
        raise ConfigError(f"{config.name}: the battery asks the experiment's language model; "
                          "set decision.maker: llm and give an llm: section")
    battery = load_battery(config.resolve_path(config.validity.battery_dir), experiment.domain,
                           quick=quick)
    if seed is not None:
        battery = dataclasses.replace(
            battery, tests=battery.tests.model_copy(update={"seed": seed}))
    plan = plan_battery(battery, experiment.domain, zone_probabilities(experiment))
    return Prepared(plan, card_key(experiment, plan), battery_budget(plan, experiment))


def run_battery(experiment: ResolvedExperiment, plan: BatteryPlan, work: Path,
                backend: LLMBackend | None = None, progress: bool = False
                ) -> tuple[list[Reply], dict[str, Any], list[TestResult]]:
    """Ask every decision of ``plan`` and judge the tests.

    The broker's audit and call log go to ``work``. Returns (replies, the broker's provenance,
    results).
    """
    prober = Prober(experiment, plan, work, backend=backend)
    with reporting(battery_progress(experiment, plan, progress)):
        replies = prober.ask()
    return replies, prober.provenance, run_tests(plan, replies, experiment.domain)


def validate(experiment: ResolvedExperiment, out_dir: Path | None = None, *, quick: bool = False,
             overwrite: bool = False, backend: LLMBackend | None = None,
             progress: bool = True, source: dict[str, Any] | None = None,
             announce: Callable[[Prepared], None] | None = None,
             store: bool = True) -> Validation:
    """Run the battery of ``experiment`` and write and store its card.

    Args:
        experiment: The experiment (``decision.maker: llm``).
        out_dir: Output directory (default ``default_out_dir``).
        quick: Fewer replicates (``tests.yaml`` ``quick``); its card never opens a gate.
        overwrite: Replace an existing output directory of ``validate``.
        backend: A ready backend (tests); default: the experiment's, cached and logged.
        progress: Report progress on stderr.
        source: The experiment file and ``--set`` options, recorded in the card.
        announce: Called with the plan, key and budget before the first decision.
        store: Store the card in the cards directory (reference respondents' cards are not).

    Raises:
        ConfigError: no ``llm:`` section, a broken battery, an output directory in the way.
    """
    prepared = prepare(experiment, quick)
    plan, key = prepared.plan, prepared.key
    out = check_out_dir(out_dir if out_dir is not None else default_out_dir(experiment, quick))
    with RunLock(out):
        work = empty_work_dir(out, overwrite)
        if announce is not None:
            announce(prepared)
        wall, cpu = time.perf_counter(), time.process_time()
        replies, provenance, results = run_battery(experiment, plan, work, backend, progress)
        timing = {"wall_s": round(time.perf_counter() - wall, 1),
                  "cpu_s": round(time.process_time() - cpu, 1)}
        facts = {"experiment": source or {}, "timing": timing,
                 "battery": {**_battery_facts(plan, replies),
                             "budget": prepared.budget.to_json()}}
        card = make_card(key, experiment, plan.battery, results, provenance, facts)
        _write_vignettes(work / VIGNETTES_FILE, plan)
        publish_card(work, out, card)
    stored = save_card(card, cards_dir(experiment.config)) if store else None
    return Validation(card, out, stored, results)


def battery_progress(experiment: ResolvedExperiment, plan: BatteryPlan,
                     enabled: bool) -> Progress:
    """The progress line of a battery: decisions done of all, LLM calls and an ETA.

    The battery's size and cost are said before it starts by its budget (``budget``); the
    line plans the calls a decision is expected to take (``config.cost``: re-asks included).
    """
    meter = Progress(f"validate {experiment.config.name}", enabled=enabled, totals=True)
    meter.plan("decisions", len(list(plan.asks())), calls_per_decision(experiment.config))
    return meter


def _battery_facts(plan: BatteryPlan, replies: list[Reply]) -> dict[str, Any]:
    settings = plan.battery.tests
    return {"seed": settings.seed, "alpha": settings.alpha, "power": settings.power,
            "vignettes": len(plan.vignettes), "decisions": len(replies),
            "unreadable": sum(r.action is None for r in replies),
            "sizes": {name: size.to_json() for name, size in plan.sizes.items()}}


def _write_vignettes(path: Path, plan: BatteryPlan) -> None:
    """One line per decision: household id, vignette, arm, replicate, tests and spec."""
    out = JsonlWriter(path)
    try:
        for v in plan.vignettes.values():
            out.write_many({"agent_id": v.agent_id(r), "vignette": v.key, "arm": v.arm,
                            "replicate": r, "uses": v.uses,
                            "spec": v.spec.model_dump(mode="json")}
                           for r in range(v.replicates))
    finally:
        out.close()
