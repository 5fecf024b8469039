"""From the battery's tests to the decisions to ask for: vignettes, arms and replicates.

Every test names its vignettes as changes to the base (``battery.derive``). Vignettes that come
out the same are asked once and shared by the tests that use them (the depth test's 0.6 m level
is the base vignette, which the invariance tests compare their arms with). An *arm* says how the
vignette is shown: ``main`` (as a run would show it), ``reversed_order`` (actions listed in
reverse), ``synonyms`` (actions described in other words) or ``trigger`` (the decision starts
from a scripted rule-breaking proposal). A vignette's key is a hash of its spec, arm and
trigger; each replicate's household id, and so its request seeds, derive from that key, so
editing one test never changes the requests (and cached replies) of another.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from governed_broker.config.agent_types import AgentTypesConfig
from governed_broker.config.base import ConfigError
from governed_broker.validity.battery import (
    Battery,
    InvarianceTest,
    LaunderingTest,
    MonotoneTest,
    ShareTest,
    Trigger,
    VignetteSpec,
    derive,
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


@dataclass(frozen=True)
class Level:
    """One level of a monotone or share test: its value on the x axis and its vignette."""

    label: str
    x: float
    vignette: str


@dataclass
class BatteryPlan:
    """The vignettes to ask about and, per test, which of them it reads.

    Attributes:
        battery: The battery.
        zones: The experiment's zones and flood probabilities (``flood_zone`` aliases).
        vignettes: By key, in first-use order.
        levels: Per monotone/share test name, its levels.
        arms: Per invariance test name, ``(base key, variant key)``.
        triggers: Per laundering test name, its trigger vignette keys.
    """

    battery: Battery
    zones: dict[str, float] = field(default_factory=dict)
    vignettes: dict[str, Vignette] = field(default_factory=dict)
    levels: dict[str, list[Level]] = field(default_factory=dict)
    arms: dict[str, tuple[str, str]] = field(default_factory=dict)
    triggers: dict[str, list[str]] = field(default_factory=dict)

    def asks(self, arm: str | None = None) -> Iterator[tuple[Vignette, int]]:
        """Every (vignette, replicate) to ask for, of one arm or of all."""
        for v in self.vignettes.values():
            if arm is None or v.arm == arm:
                for r in range(v.replicates):
                    yield v, r

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

    def main_vignettes(self) -> list[Vignette]:
        """The vignettes shown as a run would show them (the retest and coherence tests)."""
        return [v for v in self.vignettes.values() if v.arm == "main"]

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
    """The vignettes of every test of ``battery`` (derived and checked by ``derive``).

    Args:
        battery: The battery.
        domain: The experiment's domain.
        zones: The experiment's zones and their annual flood probabilities, to resolve the
            ``flood_zone`` aliases ``most_exposed`` and ``least_exposed`` (the zone with the
            highest / lowest probability; ties go to the first name in sorted order).

    Raises:
        ConfigError: an alias without ``zones`` to resolve it.
    """
    plan = BatteryPlan(battery, zones=dict(zones or {}))
    source = battery.directory / "tests.yaml"
    base = battery.vignettes.base
    k = battery.replicates
    for test in battery.tests.tests:
        if isinstance(test, MonotoneTest | ShareTest):
            levels = []
            for i, level in enumerate(test.levels):
                spec = derive(base, test.set, test.vary, level, source, test.name)
                label = f"{test.vary}={json.dumps(level)}"
                key = plan._add(spec, "main", k, f"{test.name}:{label}")
                levels.append(Level(label, _x(level, i), key))
            plan.levels[test.name] = levels
        elif isinstance(test, InvarianceTest):
            n = battery.invariance_replicates
            plan.arms[test.name] = (plan._add(base, "main", n, f"{test.name}:base"),
                                    plan._add(base, test.variant, n, f"{test.name}:variant"))
        elif isinstance(test, LaunderingTest):
            n = battery.laundering_replicates(test)
            plan.triggers[test.name] = [
                plan._add(derive(base, t.set, None, None, source, test.name), "trigger", n,
                          f"{test.name}:trigger{i}", trigger=t)
                for i, t in enumerate(test.triggers)]
    if not plan.main_vignettes():
        plan._add(base, "main", k, "base")
    return plan


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
