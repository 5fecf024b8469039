"""The battery's tests: each a small function from replies to a ``TestResult``.

A reply is read as its first readable proposal (``probe.Reply``): the appraisal labels as ranks
on the domain's scale (0 = lowest), the action, or whether the action has an effect
(``share:insure``). Each test reads the first replies it asked for of each of its vignettes
(``plan.Sizing.per_vignette``), so every level weighs the same.

**Three outcomes.** A test passes only on evidence: the one-sided confidence bound of its
statistic clears the test's threshold (the smallest effect of interest, a non-inferiority
margin, a tolerance or a largest rate). It fails when the opposite bound stays on the wrong
side of that threshold (evidence that the effect is smaller, or the difference larger, than
the threshold; for the invariance tests' total variation this evidence is approximate: at a
true difference of exactly the tolerance a fail comes in about 12 % of data sets at alpha 0.05,
docs/validity.md). Otherwise it is *inconclusive*: the replies cannot tell. In p-value form, a
test passes when the p-value of "not good enough" is below ``alpha`` (for the primary tests,
after Holm's correction across them, ``judge``), and fails when the p-value of "good enough"
is. Two more outcomes say why a test has no verdict: *not informative* (the test cannot fail:
the experiment's prompts do not state the varied fact, or no vignette offers the action it
counts) and *not measurable* (no readable reply, no blocked proposal).
A change here that moves any test's outcome bumps ``validity.CALIBRATION_VERSION`` (and the
shipped calibration is regenerated).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from governed_broker.config.agent_types import AgentTypesConfig
from governed_broker.seeding import child_seed
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

#: The test families that measure a response to the facts (a card needs one primary verdict
#: of theirs: order invariance alone is passed by a respondent deaf to every fact).
RESPONSIVENESS = ("directional", "persona", "retest")

#: The outcomes of a test, and what ``passed`` holds for each.
OUTCOMES_OF_TESTS = {"pass": True, "fail": False, "inconclusive": None,
                     "not_informative": None, "not_measurable": None}


@dataclass(frozen=True)
class TestResult:
    """The outcome of one test.

    Attributes:
        name / family / kind: The test, its family and its kind (``tests.yaml``).
        primary: Whether the test decides the card.
        outcome: ``pass``, ``fail``, ``inconclusive``, ``not_informative`` or
            ``not_measurable``.
        passed: True (pass), False (fail) or None (any other outcome).
        statistic: Its value (None: undefined, see ``note``).
        statistic_name: ``spearman_rho``, ``share``, ``total_variation``, ``icc_2_1``,
            ``krippendorff_alpha``, ``laundering_rate`` or ``contradiction_rate``.
        lower / upper: One-sided confidence bounds at ``1 - alpha`` (unadjusted).
        threshold: The value the bound must clear.
        comparison: How a passing bound relates to the threshold (``>`` or ``<``).
        criterion: The whole pass rule in words.
        n: Replies behind the statistic.
        p_value: p-value of "not good enough" (small: evidence for a pass), unadjusted.
        p_adjusted: Holm-adjusted across the primary tests (the secondary tests' own).
        p_fail: p-value of "good enough" (small: evidence for a fail).
        sizing: How many replies it planned and its power at its design effect.
        note: Why a test has no verdict, or what to read into its result.
        rationale: From ``tests.yaml``.
        detail: What the report's figures draw (per level, per arm or per outcome).
    """

    __test__ = False  # not a pytest class

    name: str
    family: str
    kind: str
    primary: bool
    outcome: str
    statistic: float | None
    statistic_name: str
    lower: float | None
    upper: float | None
    threshold: float
    comparison: str
    criterion: str
    n: int
    p_value: float | None = None
    p_adjusted: float | None = None
    p_fail: float | None = None
    sizing: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    rationale: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool | None:
        """True for a pass, False for a fail, None otherwise."""
        return OUTCOMES_OF_TESTS[self.outcome]

    def to_json(self) -> dict[str, Any]:
        """The card's form of the result (floats rounded to 4 decimals)."""
        data = asdict(self)
        data["passed"] = self.passed
        for key in ("statistic", "lower", "upper", "p_value", "p_adjusted", "p_fail"):
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
        self.scale = list(domain.pmt_labels.labels)
        self.ranks = {label: i for i, label in enumerate(self.scale)}
        self.effects = {a: spec.effect for a, spec in domain.actions.items()}
        self.by_vignette: dict[str, list[Reply]] = {}
        for r in replies:
            self.by_vignette.setdefault(r.vignette, []).append(r)

    def replies(self, vignette: str, k: int) -> list[Reply]:
        """Readable replies among the first ``k`` replicates of a vignette."""
        return [r for r in self.by_vignette.get(vignette, [])
                if r.action is not None and r.replicate < k]

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

    def prompts(self, vignettes: Sequence[str]) -> set[str]:
        """The distinct first prompts (context hashes) the vignettes were shown."""
        return {r.context_hash for v in vignettes for r in self.by_vignette.get(v, [])}


def _result(test: Any, k: int, plan: BatteryPlan, **values: Any) -> TestResult:
    sizing = plan.sizes[test.name]
    return TestResult(name=test.name, family=test.family, kind=test.kind, primary=test.primary,
                      rationale=" ".join(test.rationale.split()),
                      sizing={**sizing.to_json(), "per_vignette": k}, **values)


def _judged(evidence: stats.Evidence | None, pass_when: str) -> dict[str, Any]:
    """The p-values of a test whose pass needs the quantity ``above`` or ``below`` its threshold.

    The outcome is decided by ``judge`` once every test is in.
    """
    if evidence is None:
        return {"outcome": "not_measurable", "p_value": None, "p_fail": None}
    above = pass_when == "above"
    return {"outcome": "inconclusive",
            "p_value": evidence.p_above if above else evidence.p_below,
            "p_fail": evidence.p_below if above else evidence.p_above}


def monotone(test: MonotoneTest, read: Readout, alpha: float) -> TestResult:
    """Spearman's rho between level and measure against its threshold.

    The threshold is the smallest effect of interest (directional) or the non-inferiority margin
    (guard).
    """
    k = read.plan.sizes[test.name].per_vignette
    xs, ys, levels, asked = [], [], [], []
    keys = [level.vignette for level in read.plan.levels[test.name]]
    for level in read.plan.levels[test.name]:
        replies = read.replies(level.vignette, k)
        asked += replies
        values = [float(read.value(r, test.measure)) for r in replies]
        xs += [level.x] * len(values)
        ys += values
        levels.append({"label": level.label, "x": level.x, "n": len(values),
                       "mean": sum(values) / len(values) if values else None,
                       "counts": dict(Counter(read.shown(r, test.measure) for r in replies))})
    sign = 1.0 if test.expect in ("increase", "not_decrease") else -1.0
    floor = test.floor
    evidence = stats.correlation_evidence(xs, [sign * y for y in ys], floor, alpha)
    threshold = sign * floor
    side = ">" if sign > 0 else "<"
    if test.guard:
        criterion = (f"rho's one-sided {1 - alpha:.0%} bound {side} {threshold:+.2f} (no "
                     f"{test.expect.removeprefix('not_')} as large as {test.smallest_effect:g})")
    else:
        criterion = (f"rho's one-sided {1 - alpha:.0%} bound {side} {threshold:+.2f} "
                     f"(smallest effect of interest)")
    note = ""
    if evidence is None:
        note = f"only {len(ys)} readable replies"
    elif len(set(ys)) == 1:
        note = (f"the same {test.measure} in all {len(ys)} replies: rho taken as 0 (no "
                "response to the varied fact)")
    judged = _judged(evidence, "above")
    if len(read.prompts(keys)) == 1 and evidence is not None:
        judged["outcome"] = "not_informative"
        note = (f"every level of {test.vary} gives the same prompt: the experiment's prompts "
                "do not state this fact, so no reply can respond to it")
    if test.measure.startswith("share:") and evidence is not None and \
            not _offered(read, test.measure, asked):
        judged["outcome"] = "not_informative"
        note = _not_offered(test.measure)
    return _result(test, k, read.plan, statistic=None if evidence is None else
                   sign * evidence.estimate, statistic_name="spearman_rho",
                   **_bounds(evidence, sign), threshold=threshold, comparison=side,
                   criterion=criterion, n=len(ys), note=note, **judged,
                   detail={"measure": test.measure, "expect": test.expect, "levels": levels})


def _bounds(evidence: stats.Evidence | None, sign: float = 1.0) -> dict[str, float | None]:
    """The evidence's bounds on the statistic's own scale (``sign`` -1 swaps them)."""
    if evidence is None:
        return {"lower": None, "upper": None}
    lower, upper = evidence.lower, evidence.upper
    if sign < 0:
        lower, upper = (None if upper is None else -upper), (None if lower is None else -lower)
    return {"lower": lower, "upper": upper}


def _offered(read: Readout, measure: str, replies: Sequence[Reply]) -> bool:
    """Whether any of the replies was offered an action with the effect of ``share:<effect>``."""
    effect = measure.split(":", 1)[1]
    return any(read.effects.get(a) == effect for r in replies for a in r.allowed)


def _not_offered(measure: str) -> str:
    """The note of a share test whose vignettes offer no action with the measured effect."""
    return (f"no vignette of the test offers an action with the effect "
            f"{measure.split(':', 1)[1]!r}: a reply held to the offered actions (the reply "
            "schema's enum) cannot propose one, so the test cannot fail")


def share_at_most(test: ShareTest, read: Readout, alpha: float) -> TestResult:
    """The share of replies whose action has the measured effect, below ``max_share``."""
    k = read.plan.sizes[test.name].per_vignette
    values, levels, offered = [], [], False
    for level in read.plan.levels[test.name]:
        replies = read.replies(level.vignette, k)
        offered |= _offered(read, test.measure, replies)
        level_values = [float(read.value(r, test.measure)) for r in replies]
        values += level_values
        levels.append({"label": level.label, "x": level.x, "n": len(level_values),
                       "mean": (sum(level_values) / len(level_values)) if level_values else None})
    evidence = stats.rate_evidence(int(sum(values)), len(values), test.max_share, alpha)
    judged = _judged(evidence, "below")
    note = "" if values else "no readable replies"
    if values and not offered:
        judged["outcome"] = "not_informative"
        note = _not_offered(test.measure)
    return _result(test, k, read.plan, statistic=None if evidence is None else evidence.estimate,
                   statistic_name="share", **_bounds(evidence), threshold=test.max_share,
                   comparison="<", criterion=f"share's one-sided {1 - alpha:.0%} upper bound "
                   f"< {test.max_share:g}", n=len(values), note=note, **judged,
                   detail={"measure": test.measure, "levels": levels})


def invariance(test: InvarianceTest, read: Readout, alpha: float, resamples: int,
               seed: int) -> TestResult:
    """Equivalence of the base arm's and the variant arm's first proposals.

    The bootstrap upper bound of their total variation below the tolerance.
    """
    k = read.plan.sizes[test.name].per_vignette
    base_key, variant_key = read.plan.arms[test.name]
    base = [str(r.action) for r in read.replies(base_key, k)]
    variant = [str(r.action) for r in read.replies(variant_key, k)]
    criterion = (f"TV's one-sided {1 - alpha:.0%} bootstrap upper bound < {test.tolerance:g} "
                 "(equivalence)")
    detail = {"base": dict(Counter(base)), "variant": dict(Counter(variant)),
              "variant_kind": test.variant}
    common = {"statistic_name": "total_variation", "threshold": test.tolerance,
              "comparison": "<", "criterion": criterion, "detail": detail}
    if test.variant == "synonyms" and not read.plan.battery.vignettes.synonyms:
        return _result(test, k, read.plan, outcome="not_informative", statistic=None,
                       lower=None, upper=None, n=0, note="vignettes.yaml gives no synonyms",
                       **common)
    if not base or not variant:
        return _result(test, k, read.plan, outcome="not_measurable", statistic=None,
                       lower=None, upper=None, n=len(base) + len(variant),
                       note="an arm has no readable reply", **common)
    evidence = stats.tv_evidence(base, variant, test.tolerance, alpha, resamples,
                                 child_seed(seed, "bootstrap", test.name))
    return _result(test, k, read.plan, statistic=evidence.estimate, **_bounds(evidence),
                   n=len(base) + len(variant), **_judged(evidence, "below"), **common)


def retest(test: RetestTest, read: Readout, alpha: float, resamples: int,
           seed: int) -> TestResult:
    """Agreement of the replicates across the grid's vignettes.

    ICC(2,1) of the ranks, or Krippendorff's alpha of the decisions, with a within-vignette
    agreement index.
    """
    k = read.plan.sizes[test.name].per_vignette
    rows, agreement, allowed, incomplete = [], [], [], 0
    for key in read.plan.grids[test.name]:
        replies = read.replies(key, k)
        values = [read.value(r, test.measure) for r in replies]
        if test.measure == "decision":
            if len(values) >= 2 and replies and len(replies[0].allowed) >= 2:
                agreement.append(stats.bennett_s(values, len(replies[0].allowed)))
            rows.append(values)
            allowed.append(len(replies[0].allowed) if replies else 0)
        elif len(values) == k:  # ICC needs a complete table
            rows.append(values)
            agreement.append(stats.rwg([float(v) for v in values], len(read.scale)))
        else:
            incomplete += 1
    n = sum(len(row) for row in rows)
    if test.measure == "decision":
        name = "krippendorff_alpha"
        evidence = stats.alpha_evidence(rows, test.smallest_effect, alpha, resamples,
                                        child_seed(seed, "bootstrap", test.name))
    else:
        name = "icc_2_1"
        evidence = stats.icc_evidence(rows, test.smallest_effect, alpha)
    note = ""
    if evidence is None:
        note = "fewer than two vignettes with complete replies"
    elif evidence.estimate is None:
        note = (f"every reply gave the same {test.measure}: the replies do not tell the "
                "vignettes apart")
    if incomplete:  # which vignettes drop out may depend on the model: say so
        note = " ".join([note, f"{incomplete} of {len(read.plan.grids[test.name])} grid "
                         f"vignettes left out: fewer than {k} readable replies"]).strip()
    index = stats.mean_evidence(agreement, 0.0, alpha)
    detail = {"measure": test.measure, "vignettes": len(rows), "k": k, "grid": test.grid,
              "agreement": {"index": "bennett_s" if test.measure == "decision" else "rwg",
                            "mean": None if index is None else index.estimate,
                            "lower": None if index is None else index.lower,
                            "upper": None if index is None else index.upper,
                            "per_vignette": [round(a, 4) for a in agreement]},
              "per_vignette": [{"mean": _mean(row), "distinct": len(set(row))} for row in rows]}
    return _result(test, k, read.plan, statistic=None if evidence is None else
                   evidence.estimate, statistic_name=name, **_bounds(evidence),
                   threshold=test.smallest_effect, comparison=">",
                   criterion=f"{name}'s one-sided {1 - alpha:.0%} lower bound > "
                   f"{test.smallest_effect:g}", n=n, note=note, **_judged(evidence, "above"),
                   detail=detail)


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


def laundering(test: LaunderingTest, read: Readout, alpha: float) -> TestResult:
    """Share of blocked proposals whose accepted reply kept the action and changed a label."""
    k = read.plan.sizes[test.name].per_vignette
    triggered = [r for key in read.plan.triggers[test.name]
                 for r in read.by_vignette.get(key, []) if r.blocked and r.replicate < k]
    natural = [r for v in read.plan.main_vignettes()
               for r in read.replies(v.key, v.replicates) if r.blocked]
    counts = {"trigger": Counter(outcome(r) for r in triggered),
              "model": Counter(outcome(r) for r in natural)}
    # a block that ended in no readable reply says nothing about laundering: not in the rate
    unreadable = counts["trigger"]["unreadable"] + counts["model"]["unreadable"]
    n = len(triggered) + len(natural) - unreadable
    laundered = counts["trigger"]["changed_labels_only"] + counts["model"]["changed_labels_only"]
    evidence = stats.rate_evidence(laundered, n, test.max_rate, alpha)
    note = ""
    if not triggered and not natural:
        note = ("no proposal was blocked: under this profile no ERROR rule fires on the "
                "triggers (is governance.profile 'disabled'?)")
    elif unreadable:
        note = (f"{unreadable} blocked proposal(s) ended in no readable reply and are left out "
                "of the rate")
    detail = {src: {o: c[o] for o in OUTCOMES} for src, c in counts.items()}
    return _result(test, k, read.plan, statistic=None if evidence is None else
                   evidence.estimate, statistic_name="laundering_rate", **_bounds(evidence),
                   threshold=test.max_rate, comparison="<",
                   criterion=f"laundering rate's one-sided {1 - alpha:.0%} upper bound < "
                   f"{test.max_rate:g}", n=n, note=note, **_judged(evidence, "below"),
                   detail=detail)


def contradicts(reason: str, effect: str, patterns: Mapping[str, Sequence[str]]) -> bool:
    """Whether ``reason`` matches a pattern that contradicts a choice with ``effect``."""
    return any(re.search(p, reason, flags=re.IGNORECASE) for p in patterns.get(effect, ()))


def coherence(test: CoherenceTest, read: Readout, alpha: float) -> TestResult:
    """Share of the model's first proposals whose reason contradicts their action."""
    checked, hits, examples = 0, 0, []
    for v in read.plan.main_vignettes():
        for r in read.replies(v.key, v.replicates):
            if not r.reason:
                continue
            checked += 1
            if contradicts(r.reason, read.effects[str(r.action)], test.contradicts):
                hits += 1
                if len(examples) < 5:
                    examples.append({"action": r.action, "reason": r.reason[:200]})
    evidence = stats.rate_evidence(hits, checked, test.max_rate, alpha)
    return _result(test, 1, read.plan, statistic=None if evidence is None else
                   evidence.estimate, statistic_name="contradiction_rate", **_bounds(evidence),
                   threshold=test.max_rate, comparison="<",
                   criterion=f"contradiction rate's one-sided {1 - alpha:.0%} upper bound < "
                   f"{test.max_rate:g}", n=checked,
                   note="" if checked else "no reply with a reason",
                   **_judged(evidence, "below"),
                   detail={"contradicting": hits, "examples": examples})


def run_tests(plan: BatteryPlan, replies: Sequence[Reply],
              domain: AgentTypesConfig) -> list[TestResult]:
    """Every test of the plan's battery, in ``tests.yaml`` order, judged (``judge``)."""
    read = Readout(plan, replies, domain)
    settings = plan.battery.tests
    alpha, seed, resamples = settings.alpha, settings.seed, settings.resamples
    results = []
    for test in settings.tests:
        if isinstance(test, MonotoneTest):
            results.append(monotone(test, read, alpha))
        elif isinstance(test, ShareTest):
            results.append(share_at_most(test, read, alpha))
        elif isinstance(test, InvarianceTest):
            results.append(invariance(test, read, alpha, resamples, seed))
        elif isinstance(test, RetestTest):
            results.append(retest(test, read, alpha, resamples, seed))
        elif isinstance(test, LaunderingTest):
            results.append(laundering(test, read, alpha))
        else:
            results.append(coherence(test, read, alpha))
    return judge(results, alpha)


def judge(results: Sequence[TestResult], alpha: float) -> list[TestResult]:
    """Each test's outcome.

    Holm-adjust the pass p-values of the primary tests that have a verdict to give (not informative
    or not measurable ones are left out of the family), then pass when the (adjusted) p-value is
    below ``alpha``, fail when the fail p-value is, and inconclusive otherwise.
    """
    family = [i for i, r in enumerate(results) if r.primary and r.outcome == "inconclusive"]
    p_values = [1.0 if results[i].p_value is None else results[i].p_value for i in family]
    adjusted = dict(zip(family, stats.holm(p_values), strict=True))
    out = []
    for i, r in enumerate(results):
        if r.outcome != "inconclusive":
            out.append(r)
            continue
        p = adjusted.get(i, r.p_value)
        verdict = ("pass" if p is not None and p < alpha else
                   "fail" if r.p_fail is not None and r.p_fail < alpha else "inconclusive")
        out.append(replace(r, outcome=verdict, p_adjusted=p))
    return out
