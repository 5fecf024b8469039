"""The institutions' rules, evaluated on a proposal (``institutions.yaml``; docs/institutions.md).

The world and the LLM maker use the same evaluation: the broker re-asks with the messages of
the ERROR rules that fired; the world checks every limit again (``limit_violations``, whatever
the profile) before a decision takes effect, and a maker's fallback is last year's levers
brought within the limits (``within_limits``), which the world also uses when a decision
breaks one. Rules are data: this module knows the kinds, not any rule.
"""

from __future__ import annotations

import math
import string
from collections.abc import Mapping

from governed_broker.config.broker import NumericTest
from governed_broker.config.institutions import (
    TOLERANCE,
    InstitutionDomain,
    InstitutionRule,
    close,
)
from governed_broker.contracts.institutions import FACTS, InstitutionSituation, format_value
from governed_broker.contracts.rules import RuleOutcome

#: The unit of every fact, by name.
_FACT_UNITS = {f.name: f.unit for facts in FACTS.values() for f in facts}


def _test(value: float | None, test: NumericTest) -> bool:
    if value is None:
        return False
    return ((test.gt is None or value > test.gt) and (test.ge is None or value >= test.ge)
            and (test.lt is None or value < test.lt) and (test.le is None or value <= test.le))


def _present(rule: InstitutionRule, situation: InstitutionSituation) -> list[str]:
    """The rule's levers the institution has this year.

    A rule with none does not apply; a budget rule applies to the budgets there are.
    """
    return [lv for lv in rule.levers if lv in situation.levers]


def _fires(rule: InstitutionRule, situation: InstitutionSituation,
           levers: Mapping[str, float]) -> tuple[bool, str | None]:
    """Whether ``rule`` fires on ``levers``, and the first lever it fires on."""
    if rule.kind == "total_within":
        limit = situation.facts.get(rule.fact)
        total = sum(levers[lv] for lv in _present(rule, situation))
        # a sum that overflows (or is NaN) is beyond every limit, not "close" to one
        over = not math.isfinite(total) or (total > limit and not close(total, limit))
        return limit is not None and over, None
    for lever in _present(rule, situation):
        value, previous = levers[lever], situation.levers[lever]
        if rule.kind == "direction":
            moved = value > previous if rule.change == "rises" else value < previous
            if moved and not close(value, previous) and _test(situation.facts.get(rule.fact),
                                                               rule.test):
                return True, lever
        elif not rule.allows(value, previous):
            return True, lever
    return False, None


def _message(text: str, rule: InstitutionRule, domain: InstitutionDomain,
             situation: InstitutionSituation, levers: Mapping[str, float],
             lever: str | None) -> str:
    """A rule's message or statement with its placeholders filled in the lever's unit."""
    lever = lever or _present(rule, situation)[0]
    unit = domain.levers[lever].unit
    previous = situation.levers[lever]
    low, high = (rule.bounds(previous) if rule.kind in ("range", "max_change")
                 else (rule.min, rule.max))
    fact_unit = _FACT_UNITS.get(rule.fact or "", "ratio")
    step_unit = "usd" if unit == "usd" else "ratio"
    values = {
        "lever": lever,
        "value": format_value(levers.get(lever, previous), unit),
        "previous": format_value(previous, unit),
        "min": "-" if low is None or math.isinf(low) else format_value(low, unit),
        "max": "-" if high is None or math.isinf(high) else format_value(high, unit),
        "max_increase": _step_text(rule.max_increase, rule.relative, step_unit),
        "max_decrease": _step_text(rule.max_decrease, rule.relative, step_unit),
        "step": "-" if rule.step is None else format_value(rule.step, unit),
        "total": format_value(sum(levers.get(lv, situation.levers[lv])
                                  for lv in _present(rule, situation)), unit),
        "limit": format_value(situation.facts.get(rule.fact), fact_unit) if rule.fact else "-",
        "fact": rule.fact or "-",
        "fact_value": format_value(situation.facts.get(rule.fact), fact_unit)
        if rule.fact else "-",
    }
    return string.Template(text).substitute(values)


def _step_text(step: float | None, relative: bool, unit: str) -> str:
    if step is None:
        return "-"
    return f"{step * 100:.4g} %" if relative else format_value(step, unit)


def evaluate(domain: InstitutionDomain, profile: str, situation: InstitutionSituation,
             levers: Mapping[str, float]) -> list[RuleOutcome]:
    """Every rule active under ``profile`` on a proposal, in the domain's order.

    Args:
        domain: The institution's domain (its levers and rules).
        profile: ``strict``, ``relaxed`` or ``disabled``.
        situation: What the institution saw (last year's levers, this year's facts).
        levers: The proposal: a value for every lever of ``situation.levers``.
    """
    outcomes = []
    for rule in domain.rules:
        severity = rule.severity.for_profile(profile)
        if severity == "off" or not _present(rule, situation):
            continue
        fired, lever = _fires(rule, situation, levers)
        message = (_message(rule.message, rule, domain, situation, levers, lever)
                   if fired else "")
        outcomes.append(RuleOutcome(rule.id, severity, fired, message, kind=rule.kind))
    return outcomes


def limit_violations(domain: InstitutionDomain, situation: InstitutionSituation,
                     levers: Mapping[str, float]) -> list[RuleOutcome]:
    """The limits (``LIMIT_KINDS``) a proposal breaks, whatever the profile.

    What the world refuses to put in force.
    """
    broken = []
    for rule in domain.rules:
        if not rule.is_limit or not _present(rule, situation):
            continue
        fired, lever = _fires(rule, situation, levers)
        if fired:
            broken.append(RuleOutcome(
                rule.id, "LIMIT", True,
                _message(rule.message, rule, domain, situation, levers, lever), kind=rule.kind))
    return broken


def statements(domain: InstitutionDomain, situation: InstitutionSituation) -> list[str]:
    """The limits as the prompt states them, filled with this year's values.

    Rules with a ``statement`` whose levers the institution has this year.
    """
    return [_message(rule.statement, rule, domain, situation, situation.levers, None)
            for rule in domain.rules if rule.statement and _present(rule, situation)]


def within_limits(domain: InstitutionDomain, situation: InstitutionSituation,
                  levers: Mapping[str, float]) -> dict[str, float]:
    """``levers`` brought within every limit.

    Each lever into the intersection of its range and change limits (last year's value when they do
    not meet), onto its step, and the levers that must fit within a fact scaled down together to
    fit.

    Used for fallbacks (last year's levers) and by the rule makers, so that neither ever
    proposes what the world would refuse.
    """
    out = {k: float(v) for k, v in levers.items()}
    for lever in out:
        previous = situation.levers[lever]
        low, high = -math.inf, math.inf
        steps = []
        for rule in domain.rules:
            if not rule.is_limit or lever not in rule.levers:
                continue
            if rule.kind in ("range", "max_change"):
                a, b = rule.bounds(previous)
                low, high = max(low, a), min(high, b)
            elif rule.kind == "multiple_of":
                steps.append(rule.step)
        if low > high:
            low = high = previous
        value = min(max(out[lever], low), high)
        for step in steps:  # the nearest step inside the interval
            on_step = round(value / step) * step
            if on_step > high + TOLERANCE:
                on_step -= step
            if on_step < low - TOLERANCE:
                on_step += step
            value = on_step
        out[lever] = value
    for rule in domain.rules:
        present = [lv for lv in rule.levers if lv in out]
        if rule.kind != "total_within" or not present:
            continue
        limit = situation.facts.get(rule.fact)
        total = sum(out[lv] for lv in present)
        if limit is not None and (total > limit or not math.isfinite(total)):
            scale = max(0.0, limit) / total if math.isfinite(total) else 0.0
            for lv in present:
                out[lv] = math.floor(out[lv] * scale * 100.0) / 100.0  # whole cents, never over
    return out
