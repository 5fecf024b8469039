"""The battery's tests: each a small function from replies to a ``TestResult``.

A reply is read as its first readable proposal (``probe.Reply``): the appraisal labels as ranks
on the domain's scale (0 = lowest), the action, or whether the action has an effect
(``share:insure``). Monotone, share, retest and coherence tests read the first ``k`` replicates
of each vignette (the battery's ``replicates``), so every level weighs the same; invariance
tests read every replicate of their two arms. Every result carries its statistic, the threshold
and the criterion it was judged by, pass/fail (None: not measurable, with a note why) and the
number of replies behind it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from governed_broker.config.agent_types import AgentTypesConfig
from governed_broker.validity import stats
from governed_broker.validity.battery import (
    CoherenceTest,
    InvarianceTest,
    LaunderingTest,
    MonotoneTest,
    RetestTest,
    ShareTest,
)
from governed_broker.validity.plan import BatteryPlan
from governed_broker.validity.probe import Reply


@dataclass(frozen=True)
class TestResult:
    """The outcome of one test.

    Attributes:
        name / family / kind: The test, its family and its kind (``tests.yaml``).
        statistic: Its value (None: undefined, see ``note``).
        statistic_name: ``spearman_rho``, ``share``, ``total_variation``, ``icc_2_1``,
            ``krippendorff_alpha``, ``laundering_rate`` or ``contradiction_rate``.
        threshold: The value the statistic is compared with.
        comparison: How a passing statistic relates to the threshold (``>=``, ``<=``, ``>``,
            ``<``), before any p-value condition (see ``criterion``).
        criterion: The whole pass rule in words.
        passed: True / False, or None when the test could not be measured.
        n: Replies behind the statistic.
        p_value: The test's p-value where it has one.
        note: Why a test is not measurable, or what to read into its result.
        rationale: From ``tests.yaml``.
        detail: What the report's figures draw (per level, per arm, per outcome).
    """

    __test__ = False  # not a pytest class

    name: str
    family: str
    kind: str
    statistic: float | None
    statistic_name: str
    threshold: float
    comparison: str
    criterion: str
    passed: bool | None
    n: int
    p_value: float | None = None
    note: str = ""
    rationale: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The card's form of the result (floats rounded to 4 decimals)."""
        data = asdict(self)
        for key in ("statistic", "p_value"):
            if data[key] is not None:
                data[key] = round(float(data[key]), 4)
        return data


class Readout:
    """The replies of a battery by vignette, and how to read a measure off a reply.

    Args:
        plan: The battery plan the replies answer.
        replies: Every reply.
        domain: The experiment's domain (scale, action effects).
    """

    def __init__(self, plan: BatteryPlan, replies: Sequence[Reply],
                 domain: AgentTypesConfig) -> None:
        self.plan, self.domain = plan, domain
        self.k = plan.battery.replicates
        self.ranks = {label: i for i, label in enumerate(domain.pmt_labels.labels)}
        self.effects = {a: spec.effect for a, spec in domain.actions.items()}
        self.by_vignette: dict[str, list[Reply]] = {}
        for r in replies:
            self.by_vignette.setdefault(r.vignette, []).append(r)

    def replies(self, vignette: str, all_replicates: bool = False) -> list[Reply]:
        """Readable replies of a vignette (the first ``k`` replicates unless told)."""
        return [r for r in self.by_vignette.get(vignette, [])
                if r.action is not None and (all_replicates or r.replicate < self.k)]

    def shown(self, reply: Reply, measure: str) -> str:
        """What a reply said about a measure, as written: a label or an action id."""
        return str(getattr(reply, measure) if measure in ("threat", "coping") else reply.action)

    def value(self, reply: Reply, measure: str) -> float | str:
        """A measure of a reply: a label's rank, the action, or 1/0 for ``share:<effect>``."""
        if measure in ("threat", "coping"):
            return float(self.ranks[getattr(reply, measure)])
        if measure == "decision":
            return str(reply.action)
        return 1.0 if self.effects.get(str(reply.action)) == measure.split(":", 1)[1] else 0.0


def _result(test: Any, **values: Any) -> TestResult:
    return TestResult(name=test.name, family=test.family, kind=test.kind,
                      rationale=" ".join(test.rationale.split()), **values)


def monotone(test: MonotoneTest, read: Readout, alpha: float) -> TestResult:
    """Spearman's rho between level and measure, judged as ``test.expect`` says."""
    xs, ys, levels = [], [], []
    for level in read.plan.levels[test.name]:
        replies = read.replies(level.vignette)
        values = [read.value(r, test.measure) for r in replies]
        xs += [level.x] * len(values)
        ys += values
        levels.append({"label": level.label, "x": level.x, "n": len(values),
                       "mean": sum(values) / len(values) if values else None,
                       "counts": dict(Counter(read.shown(r, test.measure) for r in replies))})
    increasing = test.expect in ("increase", "not_decrease")
    wrong_way = test.expect.startswith("not_")
    alternative = "less" if increasing == wrong_way else "greater"
    rho, p = stats.spearman(xs, ys, alternative)
    sign = 1.0 if alternative == "greater" else -1.0
    threshold = sign * test.min_rho
    significant = rho is not None and sign * rho >= test.min_rho and p is not None and p < alpha
    side = ">=" if sign > 0 else "<="
    note = ""
    if rho is None:
        note = (f"the same {test.measure} in all {len(ys)} replies: "
                + ("nothing moved the wrong way" if wrong_way
                   else "the replies do not respond to the varied fact"))
    if wrong_way:
        passed = None if len(ys) < 3 else not significant
        comparison = "<" if sign > 0 else ">"
        criterion = (f"fails when rho {side} {threshold:+.2f} with one-sided p < {alpha:g} "
                     f"({test.measure} must not {test.expect.removeprefix('not_')})")
    else:
        passed = None if len(ys) < 3 else significant
        comparison = side
        criterion = f"rho {side} {threshold:+.2f} and one-sided p < {alpha:g}"
    if len(ys) < 3:
        note = f"only {len(ys)} readable replies"
    return _result(test, statistic=rho, statistic_name="spearman_rho", threshold=threshold,
                   comparison=comparison, criterion=criterion, passed=passed, n=len(ys),
                   p_value=p, note=note,
                   detail={"measure": test.measure, "expect": test.expect, "levels": levels})


def share_at_most(test: ShareTest, read: Readout) -> TestResult:
    """The share of replies whose action has the measured effect, at most ``max_share``."""
    values, levels = [], []
    for level in read.plan.levels[test.name]:
        level_values = [read.value(r, test.measure) for r in read.replies(level.vignette)]
        values += level_values
        levels.append({"label": level.label, "x": level.x, "n": len(level_values),
                       "mean": (sum(level_values) / len(level_values)) if level_values else None})
    share = sum(values) / len(values) if values else None
    return _result(test, statistic=share, statistic_name="share", threshold=test.max_share,
                   comparison="<=", criterion=f"share <= {test.max_share:g}",
                   passed=None if share is None else share <= test.max_share, n=len(values),
                   note="" if values else "no readable replies",
                   detail={"measure": test.measure, "levels": levels})


def invariance(test: InvarianceTest, read: Readout, alpha: float, permutations: int,
               seed: int) -> TestResult:
    """Total variation between the base arm's and the variant arm's first proposals."""
    base_key, variant_key = read.plan.arms[test.name]
    base = [str(r.action) for r in read.replies(base_key, all_replicates=True)]
    variant = [str(r.action) for r in read.replies(variant_key, all_replicates=True)]
    criterion = f"fails when TV > {test.max_tv:g} with permutation p < {alpha:g}"
    detail = {"base": dict(Counter(base)), "variant": dict(Counter(variant)),
              "variant_kind": test.variant}
    if test.variant == "synonyms" and not read.plan.battery.vignettes.synonyms:
        return _result(test, statistic=None, statistic_name="total_variation",
                       threshold=test.max_tv, comparison="<=", criterion=criterion, passed=None,
                       n=0, note="vignettes.yaml gives no synonyms", detail=detail)
    if not base or not variant:
        return _result(test, statistic=None, statistic_name="total_variation",
                       threshold=test.max_tv, comparison="<=", criterion=criterion, passed=None,
                       n=len(base) + len(variant), note="an arm has no readable reply",
                       detail=detail)
    tv = stats.total_variation(base, variant)
    p = stats.tv_permutation_p(base, variant, permutations, seed)
    return _result(test, statistic=tv, statistic_name="total_variation", threshold=test.max_tv,
                   comparison="<=", criterion=criterion,
                   passed=not (tv > test.max_tv and p < alpha), n=len(base) + len(variant),
                   p_value=p, detail=detail)


def retest(test: RetestTest, read: Readout) -> TestResult:
    """Agreement of the replicates of every main vignette (ICC(2,1) or Krippendorff's alpha)."""
    rows = []
    for v in read.plan.main_vignettes():
        values = [read.value(r, test.measure) for r in read.replies(v.key)]
        if len(values) == read.k:
            rows.append(values)
    n = sum(len(row) for row in rows)
    if test.measure == "decision":
        name, value = "krippendorff_alpha", stats.krippendorff_nominal(rows)
    else:
        name, value = "icc_2_1", stats.icc_2_1(rows)
    note = ""
    if value is None:
        note = (f"undefined: {len(rows)} vignettes with all {read.k} replies readable, and "
                f"every one gave the same {test.measure}" if rows else "no complete vignette")
    spread = [{"mean": _mean(row), "distinct": len(set(row))} for row in rows]
    return _result(test, statistic=value, statistic_name=name, threshold=test.min_value,
                   comparison=">=", criterion=f"{name} >= {test.min_value:g}",
                   passed=None if value is None else value >= test.min_value, n=n, note=note,
                   detail={"measure": test.measure, "vignettes": len(rows), "k": read.k,
                           "per_vignette": spread})


def _mean(values: Sequence[float | str]) -> float | None:
    numbers = [v for v in values if isinstance(v, float)]
    return sum(numbers) / len(numbers) if numbers else None


#: How a blocked proposal ended (``laundering``).
OUTCOMES = ("changed_action", "changed_labels_only", "held_on", "unreadable")


def outcome(reply: Reply) -> str:
    """How a blocked proposal ended.

    The accepted reply changed the action, changed only the labels (laundering), the model held on
    until the re-asks ran out, or nothing readable.
    """
    if reply.final_action is None or reply.status == "parse_failed":
        return "unreadable"
    if reply.final_action != reply.action:
        return "changed_action"
    if (reply.final_threat, reply.final_coping) != (reply.threat, reply.coping) and \
            reply.status in ("approved", "retry_approved"):
        return "changed_labels_only"
    return "held_on"


def laundering(test: LaunderingTest, read: Readout) -> TestResult:
    """Share of blocked proposals whose accepted reply kept the action and changed a label."""
    triggered = [r for key in read.plan.triggers[test.name]
                 for r in read.by_vignette.get(key, []) if r.blocked]
    natural = [r for v in read.plan.main_vignettes() for r in read.replies(v.key) if r.blocked]
    counts = {"trigger": Counter(outcome(r) for r in triggered),
              "model": Counter(outcome(r) for r in natural)}
    n = len(triggered) + len(natural)
    laundered = counts["trigger"]["changed_labels_only"] + counts["model"]["changed_labels_only"]
    rate = laundered / n if n else None
    note = "" if n else ("no proposal was blocked: under this profile no ERROR rule fires on "
                         "the triggers (is governance.profile 'disabled'?)")
    detail = {src: {o: c[o] for o in OUTCOMES} for src, c in counts.items()}
    return _result(test, statistic=rate, statistic_name="laundering_rate",
                   threshold=test.max_rate, comparison="<=",
                   criterion=f"laundering rate <= {test.max_rate:g}",
                   passed=None if rate is None else rate <= test.max_rate, n=n, note=note,
                   detail=detail)


def contradicts(reason: str, effect: str, patterns: Mapping[str, Sequence[str]]) -> bool:
    """Whether ``reason`` matches a pattern that contradicts a choice with ``effect``."""
    return any(re.search(p, reason, flags=re.IGNORECASE) for p in patterns.get(effect, ()))


def coherence(test: CoherenceTest, read: Readout) -> TestResult:
    """Share of the model's first proposals whose reason contradicts their action."""
    checked, examples = 0, []
    hits = 0
    for v in read.plan.main_vignettes():
        for r in read.replies(v.key):
            if not r.reason:
                continue
            checked += 1
            if contradicts(r.reason, read.effects[str(r.action)], test.contradicts):
                hits += 1
                if len(examples) < 5:
                    examples.append({"action": r.action, "reason": r.reason[:200]})
    rate = hits / checked if checked else None
    return _result(test, statistic=rate, statistic_name="contradiction_rate",
                   threshold=test.max_rate, comparison="<=",
                   criterion=f"contradiction rate <= {test.max_rate:g}",
                   passed=None if rate is None else rate <= test.max_rate, n=checked,
                   note="" if checked else "no reply with a reason",
                   detail={"contradicting": hits, "examples": examples})


def run_tests(plan: BatteryPlan, replies: Sequence[Reply],
              domain: AgentTypesConfig) -> list[TestResult]:
    """Every test of the plan's battery, in ``tests.yaml`` order."""
    read = Readout(plan, replies, domain)
    settings = plan.battery.tests
    results = []
    for test in settings.tests:
        if isinstance(test, MonotoneTest):
            results.append(monotone(test, read, settings.alpha))
        elif isinstance(test, ShareTest):
            results.append(share_at_most(test, read))
        elif isinstance(test, InvarianceTest):
            results.append(invariance(test, read, settings.alpha, settings.permutations,
                                      settings.seed))
        elif isinstance(test, RetestTest):
            results.append(retest(test, read))
        elif isinstance(test, LaunderingTest):
            results.append(laundering(test, read))
        else:
            results.append(coherence(test, read))
    return results
