"""From the battery's tests to the decisions to ask for: vignettes, arms, replicates and power.

Every test names its vignettes as changes to the base (``battery.derive``). Vignettes that come
out the same are asked once and shared by the tests that use them (the depth test's 0.6 m level
is the base vignette, which the invariance tests compare their arms with). An *arm* says how the
vignette is shown: ``main`` (as a run would show it), ``reversed_order`` (actions listed in
reverse), ``synonyms`` (actions described in other words) or ``trigger`` (the decision starts
from a scripted rule-breaking proposal). A vignette's key is a hash of its spec, arm and
trigger, and each replicate's household id derives from that key.

**How many replies.** Each test is *sized* (``power``): it gets the replies it needs to pass,
with the battery's power, a respondent that shows its design effect, at its significance level
(``alpha``, divided by the number of primary tests for a primary test). A vignette shared by
tests is asked as often as the most demanding of them needs; each test reads the first replies
it asked for, so every level of a test weighs the same. ``--quick`` asks every vignette the
quick number of times instead (the power of such a card is reported, and it never opens a
gate).

**Common random numbers.** Replicate ``r`` of every vignette is asked with the same request
seeds (``common_seed``): a difference between two levels of a test is then the model's answer
to the fact that differs, not a difference between the seeds they were asked with.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from governed_broker.config.agent_types import AgentTypesConfig
from governed_broker.config.base import ConfigError
from governed_broker.seeding import child_seed
from governed_broker.validity import power
from governed_broker.validity.battery import (
    Battery,
    CoherenceTest,
    InvarianceTest,
    LaunderingTest,
    MonotoneTest,
    RetestTest,
    ShareTest,
    Trigger,
    VignetteSpec,
    derive,
    grid_cells,
)

ARMS = ("main", "reversed_order", "synonyms", "trigger")


@dataclass
class Vignette:
    """One vignette in one arm, with the replicates asked for and the tests using it.

    Attributes:
        key: 12 hex digits identifying spec, arm and trigger.
        spec: The household and its situation.
        arm: How it is shown (``ARMS``).
        replicates: How many replies are asked for.
        trigger: The scripted first proposal (arm ``trigger``).
        uses: ``test:level`` labels of the tests that read it.
    """

    key: str
    spec: VignetteSpec
    arm: str
    replicates: int
    trigger: Trigger | None = None
    uses: list[str] = field(default_factory=list)

    def agent_id(self, replicate: int) -> int:
        """The household id of a replicate (48 bits of a hash of key and replicate)."""
        digest = hashlib.sha256(f"{self.key}:{replicate}".encode()).hexdigest()
        return int(digest[:12], 16)


def common_seed(battery_seed: int, replicate: int, attempt: int) -> int:
    """The request seed of an attempt of one replicate, the same for every vignette.

    ``attempt`` 0 is the first request; sharing the seeds across vignettes gives the battery
    common random numbers.
    """
    return child_seed(battery_seed, "replicate", replicate, attempt)


@dataclass(frozen=True)
class Level:
    """One level of a monotone or share test: its value on the x axis and its vignette."""

    label: str
    x: float
    vignette: str


@dataclass(frozen=True)
class Sizing:
    """How many replies a test reads, and its power at its design effect.

    Attributes:
        per_vignette: Replies it reads of each of its vignettes (levels, arms, grid cells,
            triggers).
        replies: Replies its statistic rests on when every one is readable (laundering: the
            triggers' replies; coherence: every main reply).
        needed: Replies the power computation asked for (before the ``max_replicates`` cap
            and the rounding to whole replicates); None for a test that is not sized.
        power: Power at the design effect with ``replies`` (None: not computable).
        alpha: The level it was sized at.
    """

    per_vignette: int
    replies: int
    needed: int | None
    power: float | None
    alpha: float

    def to_json(self) -> dict[str, Any]:
        """The card's form."""
        return {"per_vignette": self.per_vignette, "replies": self.replies,
                "needed": self.needed, "alpha": round(self.alpha, 6),
                "power": None if self.power is None else round(self.power, 3)}


@dataclass
class BatteryPlan:
    """The vignettes to ask about and, per test, which of them it reads and how many times.

    Attributes:
        battery: The battery.
        zones: The experiment's zones and flood probabilities (``flood_zone`` aliases).
        vignettes: By key, in first-use order.
        levels: Per monotone/share test name, its levels.
        arms: Per invariance test name, ``(base key, variant key)``.
        grids: Per retest test name, its grid's vignette keys.
        triggers: Per laundering test name, its trigger vignette keys.
        sizes: Per test name, its sizing.
    """

    battery: Battery
    zones: dict[str, float] = field(default_factory=dict)
    vignettes: dict[str, Vignette] = field(default_factory=dict)
    levels: dict[str, list[Level]] = field(default_factory=dict)
    arms: dict[str, tuple[str, str]] = field(default_factory=dict)
    grids: dict[str, list[str]] = field(default_factory=dict)
    triggers: dict[str, list[str]] = field(default_factory=dict)
    sizes: dict[str, Sizing] = field(default_factory=dict)

    def asks(self, arm: str | None = None) -> Iterator[tuple[Vignette, int]]:
        """Every (vignette, replicate) to ask for, of one arm or of all."""
        for v in self.vignettes.values():
            if arm is None or v.arm == arm:
                for r in range(v.replicates):
                    yield v, r

    def decisions(self) -> int:
        """How many decisions the battery asks for."""
        return sum(v.replicates for v in self.vignettes.values())

    def main_vignettes(self) -> list[Vignette]:
        """The vignettes shown as a run would show them (coherence and natural blocks)."""
        return [v for v in self.vignettes.values() if v.arm == "main"]

    def _resolve_zone(self, spec: VignetteSpec) -> VignetteSpec:
        if spec.flood_zone not in ZONE_ALIASES:
            return spec
        if not self.zones:
            raise ConfigError(
                f"{self.battery.directory / 'vignettes.yaml'}: flood_zone {spec.flood_zone!r} "
                "needs the experiment's zones and their flood probabilities, which its hazard "
                "mode does not list; name a zone instead")
        ranked = sorted(self.zones, key=lambda z: (-self.zones[z], z))
        zone = ranked[0] if spec.flood_zone == "most_exposed" else ranked[-1]
        return spec.model_copy(update={"flood_zone": zone})

    def _add(self, spec: VignetteSpec, arm: str, replicates: int, use: str,
             trigger: Trigger | None = None) -> str:
        spec = self._resolve_zone(spec)
        ident = {"spec": spec.model_dump(mode="json"), "arm": arm,
                 "trigger": trigger.model_dump(mode="json") if trigger else None}
        key = hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]
        v = self.vignettes.setdefault(key, Vignette(key, spec, arm, replicates, trigger))
        v.replicates = max(v.replicates, replicates)
        v.uses.append(use)
        return key


#: ``flood_zone`` values that name a zone by its exposure in the experiment's hazard.
ZONE_ALIASES = ("most_exposed", "least_exposed")


def plan_battery(battery: Battery, domain: AgentTypesConfig,
                 zones: Mapping[str, float] | None = None) -> BatteryPlan:
    """The vignettes of every test of ``battery``, each asked as often as its tests need.

    Vignettes are derived and checked by ``derive``.

    Args:
        battery: The battery.
        domain: The experiment's domain.
        zones: The experiment's zones and their annual flood probabilities, to resolve the
            ``flood_zone`` aliases ``most_exposed`` and ``least_exposed`` (the zone with the
            highest / lowest annual probability; ties go to the first name in sorted order).

    Raises:
        ConfigError: an alias without ``zones`` to resolve it.
    """
    plan = BatteryPlan(battery, zones=dict(zones or {}))
    source = battery.directory / "tests.yaml"
    base = battery.vignettes.base
    sizes = size_tests(battery)
    for test in battery.tests.tests:
        k = sizes[test.name].per_vignette if test.name in sizes else 0
        if isinstance(test, MonotoneTest | ShareTest):
            levels = []
            for i, level in enumerate(test.levels):
                spec = derive(base, test.set, test.vary, level, source, test.name)
                label = f"{test.vary}={json.dumps(level)}"
                key = plan._add(spec, "main", k, f"{test.name}:{label}")
                levels.append(Level(label, _x(level, i), key))
            plan.levels[test.name] = levels
        elif isinstance(test, InvarianceTest):
            plan.arms[test.name] = (plan._add(base, "main", k, f"{test.name}:base"),
                                    plan._add(base, test.variant, k, f"{test.name}:variant"))
        elif isinstance(test, RetestTest):
            plan.grids[test.name] = [
                plan._add(derive(base, {**test.set, **cell}, None, None, source, test.name),
                          "main", k, f"{test.name}:{json.dumps(cell, sort_keys=True)}")
                for cell in grid_cells(test)]
        elif isinstance(test, LaunderingTest):
            plan.triggers[test.name] = [
                plan._add(derive(base, t.set, None, None, source, test.name), "trigger", k,
                          f"{test.name}:trigger{i}", trigger=t)
                for i, t in enumerate(test.triggers)]
    if not plan.main_vignettes():
        plan._add(base, "main", battery.tests.quick.replicates, "base")
    main_replies = sum(v.replicates for v in plan.main_vignettes())
    for test in battery.tests.tests:  # coherence reads every main reply
        if isinstance(test, CoherenceTest):
            sizes[test.name] = _rate_sizing(test, main_replies, battery.tests.alpha, None)
    plan.sizes = sizes
    return plan


def size_tests(battery: Battery) -> dict[str, Sizing]:
    """The sizing of every test but coherence (which reads what the others ask for)."""
    settings = battery.tests
    primaries = len(settings.primaries)
    quick = settings.quick if battery.quick else None
    cap = settings.max_replicates
    out: dict[str, Sizing] = {}
    for test in settings.tests:
        alpha = settings.alpha / primaries if test.primary else settings.alpha
        if isinstance(test, MonotoneTest):
            out[test.name] = _monotone_sizing(test, alpha, settings.power, cap, quick)
        elif isinstance(test, ShareTest):
            n_levels = len(test.levels)
            needed = power.rate_n(test.max_share, test.design_share, alpha, settings.power)
            k = quick.replicates if quick else min(cap, math.ceil(needed / n_levels))
            out[test.name] = Sizing(k, k * n_levels, needed, power.rate_power(
                k * n_levels, test.max_share, test.design_share, alpha), alpha)
        elif isinstance(test, InvarianceTest):
            shares = tuple(test.design_shares)
            needed = power.tv_n(shares, test.tolerance, alpha, settings.power)
            k = quick.replicates if quick else min(cap, needed)
            out[test.name] = Sizing(k, 2 * k, 2 * needed,
                                    power.tv_power(k, shares, test.tolerance, alpha), alpha)
        elif isinstance(test, LaunderingTest):
            n_triggers = len(test.triggers)
            needed = power.rate_n(test.max_rate, test.design_rate, alpha, settings.power)
            k = quick.laundering_replicates if quick else min(cap,
                                                               math.ceil(needed / n_triggers))
            out[test.name] = _rate_sizing(test, k * n_triggers, alpha, needed, k)
    for test in settings.tests:  # a grid is asked as often as its most demanding test needs
        if isinstance(test, RetestTest):
            alpha = settings.alpha / primaries if test.primary else settings.alpha
            out[test.name] = _retest_sizing(test, settings.tests, alpha, settings.power, cap,
                                            quick)
    return out


def _monotone_sizing(test: MonotoneTest, alpha: float, target: float, cap: int,
                     quick: Any) -> Sizing:
    n_levels = len(test.levels)
    needed = power.correlation_n(test.floor, test.design, alpha, target)
    k = quick.replicates if quick else min(cap, math.ceil(needed / n_levels))
    return Sizing(k, k * n_levels, needed,
                  power.correlation_power(k * n_levels, test.floor, test.design, alpha), alpha)


def _retest_sizing(test: RetestTest, tests: list[Any], alpha: float, target: float, cap: int,
                   quick: Any) -> Sizing:
    cells = len(grid_cells(test))
    same_grid = [t for t in tests if isinstance(t, RetestTest) and t.grid == test.grid
                 and t.set == test.set and t.design_effect is not None]
    k = 2
    for other in same_grid:
        k = max(k, power.icc_replicates(cells, other.smallest_effect, other.design_effect,
                                        alpha, target, cap))
    if quick:
        k = max(2, quick.replicates)
    sized = test.design_effect is not None
    needed = power.icc_replicates(cells, test.smallest_effect, test.design_effect, alpha,
                                  target, cap) * cells if sized else None
    return Sizing(k, k * cells, needed, power.icc_power(
        cells, k, test.smallest_effect, test.design_effect, alpha) if sized else None, alpha)


def _rate_sizing(test: LaunderingTest | CoherenceTest, replies: int, alpha: float,
                 needed: int | None, per_vignette: int = 1) -> Sizing:
    return Sizing(per_vignette, replies, needed,
                  power.rate_power(replies, test.max_rate, test.design_rate, alpha), alpha)


def _x(level: Any, position: int) -> float:
    """A level's value on the x axis: the number itself, else its position in the list."""
    if isinstance(level, bool) or not isinstance(level, int | float):
        return float(position)
    return float(level)


def trigger_reply(trigger: Trigger, domain: AgentTypesConfig, allowed: tuple[str, ...]
                  ) -> dict[str, Any]:
    """The scripted first proposal of a trigger.

    Its labels, the first allowed action with its effect, and its reasons, in the reply schema's
    shape.

    Raises:
        ValueError: no action with the trigger's effect is open to the vignette's household.
    """
    reply = trigger.reply
    actions = [a for a in domain.actions_with_effect(reply.effect) if a in allowed]
    if not actions:
        raise ValueError(f"no allowed action has the effect {reply.effect!r} (allowed: "
                         f"{', '.join(allowed)})")
    return {"threat_appraisal": {"label": reply.threat, "reason": reply.threat_reason},
            "coping_appraisal": {"label": reply.coping, "reason": reply.coping_reason},
            "decision": actions[0], "reason": reply.reason}
