"""The battery's vignettes read as distributions: what the model believes in each situation.

Each vignette of the battery (``configs/validity/``) is rendered exactly as the sampled card
renders it (the experiment's broker, context builder and templates, the same arms: as a run
shows it, actions in reverse order, actions described by the synonyms) and its reply's
distributions are read once from the model's token probabilities (``llm.readout``): the threat
label, the coping label and the action, each a distribution summing to 1. Along the greedy
path, replicates and seeds play no part: the distributions are what every replicate's would be
drawn from (the coping label and the action after the most probable account). Over sampled
accounts, account k is drawn with the seed of the sampled card's replicate k. Trigger
vignettes (a re-ask after a scripted rule-breaking proposal) are not read.

``read_battery`` returns one ``VignetteDistributions`` per vignette; ``level_means`` gives, for each
monotone or share test, the expected measure at each of its levels (the expected rank of a
label, or the probability of an action with the effect), which says directly whether the
model's beliefs move with the facts at all. ``governed-broker readout`` prints both
(``validity.readout_cli``).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from governed_broker.config.base import ConfigError
from governed_broker.config.resolved import ResolvedExperiment
from governed_broker.llm.base import LLMBackend, LLMRequest
from governed_broker.llm.logprobs import token_source
from governed_broker.llm.readout import (
    ReadoutSettings,
    ReplyDistributions,
    TokenSource,
    read_distributions,
)
from governed_broker.llm.sampling import resolve_sampling
from governed_broker.validity.battery import MonotoneTest, ShareTest, load_battery
from governed_broker.validity.card import card_key
from governed_broker.validity.plan import BatteryPlan, Vignette, common_seed, plan_battery
from governed_broker.validity.probe import Prober, synonym_context
from governed_broker.validity.situations import zone_probabilities

#: The arms read (a trigger's re-ask follows a scripted proposal: not a first reply).
READ_ARMS = ("main", "reversed_order", "synonyms")
#: The reply's fields as the battery's measures name them.
FIELDS = {"threat": "threat_appraisal.label", "coping": "coping_appraisal.label",
          "action": "decision"}


@dataclass(frozen=True)
class VignetteDistributions:
    """One vignette's distributions.

    Attributes:
        vignette: The vignette (key, spec, arm, the tests that use it).
        reply: The reply's fields read.
        allowed: The actions offered, in the order shown.
    """

    vignette: Vignette
    reply: ReplyDistributions
    allowed: tuple[str, ...]

    def distribution(self, measure: str) -> dict[str, float]:
        """``threat``, ``coping`` or ``action``: value -> probability."""
        return self.reply.field(FIELDS[measure]).distribution()

    def to_json(self) -> dict[str, Any]:
        """The vignette, its distributions and the reply they were read from, as JSON."""
        v = self.vignette
        return {"vignette": v.key, "arm": v.arm, "uses": v.uses,
                "spec": v.spec.model_dump(mode="json"), "allowed_actions": list(self.allowed),
                **{m: self.distribution(m) for m in FIELDS}, "reply": self.reply.to_json()}


@dataclass(frozen=True)
class BatteryDistributions:
    """Every read vignette of a battery, with what is needed to interpret them.

    Attributes:
        plan: The battery's plan (tests, levels, vignettes).
        vignettes: One readout per vignette read, in plan order.
        labels: The appraisal scale, lowest first (a label's rank is its index).
        effects: Each action's effect.
        provenance: The model, how it was read, the wall time.
    """

    plan: BatteryPlan
    vignettes: list[VignetteDistributions]
    labels: tuple[str, ...]
    effects: dict[str, str]
    provenance: dict[str, Any]

    def by_key(self, key: str) -> VignetteDistributions:
        """The readout of the vignette ``key``."""
        for v in self.vignettes:
            if v.vignette.key == key:
                return v
        raise KeyError(key)

    def expected(self, vignette: VignetteDistributions, measure: str) -> float:
        """A measure's expectation under the vignette's distributions.

        the expected rank of a label (``threat``, ``coping``; 0 for the scale's first label), or the
        probability of an action with an effect (``share:<effect>``).
        """
        if measure in ("threat", "coping"):
            return sum(self.labels.index(label) * p
                       for label, p in vignette.distribution(measure).items())
        if measure.startswith("share:"):
            effect = measure.split(":", 1)[1]
            return sum(p for action, p in vignette.distribution("action").items()
                       if self.effects.get(action) == effect)
        raise ValueError(f"no expectation of measure {measure!r}")

    def level_means(self) -> list[dict[str, Any]]:
        """For each monotone or share test read: its measure and, per level, the expectation."""
        out = []
        read = {v.vignette.key for v in self.vignettes}
        for test in self.plan.battery.tests.tests:
            if not isinstance(test, MonotoneTest | ShareTest) or test.measure == "decision":
                continue
            if any(lv.vignette not in read for lv in self.plan.levels[test.name]):
                continue
            expect = (test.expect if isinstance(test, MonotoneTest)
                      else f"at most {test.max_share}")
            out.append({"test": test.name, "measure": test.measure, "expect": expect,
                        "levels": [{"label": lv.label, "x": lv.x,
                                    "mean": self.expected(self.by_key(lv.vignette),
                                                          test.measure)}
                                   for lv in self.plan.levels[test.name]]})
        return out

    def to_json(self) -> dict[str, Any]:
        """Every vignette's distributions and each test's expected measure by level, as JSON."""
        return {"provenance": self.provenance, "labels": list(self.labels),
                "vignettes": [v.to_json() for v in self.vignettes],
                "tests": self.level_means()}


def primary_vignettes(plan: BatteryPlan) -> set[str]:
    """The keys of the vignettes the battery's primary tests read (levels, arms, grids)."""
    keys: set[str] = set()
    for name in plan.battery.tests.primaries:
        keys |= {level.vignette for level in plan.levels.get(name, [])}
        keys |= set(plan.arms.get(name, ())) | set(plan.grids.get(name, []))
    return keys


def read_battery(experiment: ResolvedExperiment, settings: ReadoutSettings | None = None,
                 backend: LLMBackend | None = None, source: TokenSource | None = None,
                 progress: Callable[[int, int], None] | None = None,
                 primary_only: bool = False) -> BatteryDistributions:
    """Read every vignette of the experiment's battery (arms ``READ_ARMS``) once.

    Args:
        experiment: The experiment (``decision.maker: llm``).
        settings: Top-k, guard, sampled accounts and view of the readout.
        backend: A ready backend (tests); default: the experiment's.
        source: Ready token probabilities (tests); default: the backend's.
        progress: Called with (vignettes read, vignettes in all) after each.
        primary_only: Read only the vignettes of the primary tests (``primary_vignettes``);
            the other tests' measures are then not available.

    Raises:
        ConfigError: no ``llm:`` section, a broken battery.
        LLMError: the backend gives no token probabilities (the message says what to use).
    """
    config = experiment.config
    settings = settings or ReadoutSettings()
    if config.llm is None or config.decision.maker != "llm":
        raise ConfigError(f"{config.name}: a readout reads the experiment's language model; "
                          "set decision.maker: llm and give an llm: section")
    battery = load_battery(config.resolve_path(config.validity.battery_dir), experiment.domain)
    plan = plan_battery(battery, experiment.domain, zone_probabilities(experiment))
    wanted = primary_vignettes(plan) if primary_only else set(plan.vignettes)
    todo = [v for v in plan.vignettes.values() if v.arm in READ_ARMS and v.key in wanted]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="readout-") as work:
        prober = Prober(experiment, plan, Path(work), backend=backend)
        try:
            source = source or token_source(prober.backend)
            read = [_read(prober, v, source, settings) for v in _counted(todo, progress)]
            provenance = {"model": prober.backend.describe(), "source": source.name,
                          "configuration_key": card_key(experiment, plan),
                          "top_k": settings.top_k, "accounts": settings.accounts,
                          "min_path_mass": settings.min_path_mass, "view": settings.view,
                          "prompt_reuse": settings.prompt_reuse,
                          "vignettes": len(read), "primary_only": primary_only,
                          "passes": sum(r.reply.passes for r in read),
                          "redrawn": sum(r.reply.redrawn for r in read),
                          "wall_s": round(time.perf_counter() - start, 1)}
        finally:
            prober.broker.close()
    domain = experiment.domain
    return BatteryDistributions(plan, read, tuple(domain.pmt_labels.labels),
                          {a: spec.effect for a, spec in domain.actions.items()}, provenance)


def _counted(todo: Sequence[Vignette], progress: Callable[[int, int], None] | None):
    for i, v in enumerate(todo):
        yield v
        if progress is not None:
            progress(i + 1, len(todo))


def vignette_request(prober: Prober, vignette: Vignette) -> tuple[LLMRequest, tuple[str, ...]]:
    """The first request the battery's broker sends for a vignette, and the actions it offers.

    The request has its arm's listing and descriptions and replicate 0's common seed (the seed
    the battery's backend sends the first attempt with).
    """
    situation = prober.situation(vignette, 0)
    context = prober.broker.context
    if vignette.arm == "synonyms":
        context = synonym_context(context, prober.plan.battery.vignettes.synonyms)
    prompt = prober.broker.loop.run(context.abuild(situation))
    llm = prober.experiment.config.llm
    assert llm is not None  # a Prober's experiment has one
    request = LLMRequest.of(prompt.messages, json_schema=prompt.json_schema,
                            **resolve_sampling(llm).request_fields(),
                            seed=common_seed(prober.seed, 0, 0),
                            max_tokens=llm.max_tokens, num_ctx=llm.num_ctx, tag="decision")
    return request, situation.allowed_actions


def _read(prober: Prober, vignette: Vignette, source: TokenSource,
          settings: ReadoutSettings) -> VignetteDistributions:
    """A vignette's distributions; sampled account k is drawn with replicate k's common seed.

    So the accounts are the sampled card's replicates' first attempts, and every vignette's
    account k shares its seed (common random numbers).
    """
    request, allowed = vignette_request(prober, vignette)
    seeds = [common_seed(prober.seed, k, 0) for k in range(settings.accounts)]
    return VignetteDistributions(
        vignette, read_distributions(source, request, settings, seeds or None), allowed)


class ProgressLine:
    """Reports on stderr: vignettes read of all, and the seconds since it was made."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def __call__(self, done: int, total: int) -> None:
        """Print how many vignettes are read, and the seconds since the start."""
        print(f"readout: {done}/{total} vignettes, {time.perf_counter() - self.start:.0f} s",
              file=sys.stderr, flush=True)
