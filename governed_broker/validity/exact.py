"""The battery's tests judged from the model's exact choice distributions.

``validate --readout distribution`` reads each vignette's threat, coping and action
distributions once (``validity.readout``) instead of sampling replies, and judges every test
from them (docs/validity.md "Cards from distributions"):

* **The statistic** is the value the sampled card's estimator converges to as the replicates
  grow, computed exactly from the distributions (each level, arm or grid cell weighing the
  same, as in the sampled card): the population Spearman rho of level and measure (mid-rank
  grades of the joint distribution), the mean share of an effect, the total variation between
  two arms' action distributions, ICC(2,1) as between-vignette variance of the expected rank
  over that plus the mean within-vignette variance, and Krippendorff's alpha as one minus the
  mean within-vignette disagreement over the pooled one. None is a rank correlation of
  expected values (any strictly monotone change, however small, would give 1).
* **No sampling error in an exact field.** A distribution read once (along the greedy path, or
  after the same tokens in every account) is what every replicate would be drawn from, so the
  statistic is known exactly, up to the probability the readout did not read (tokens beyond the
  top ``k`` at a field's first position, and token paths that reached no allowed value):
  ``unread`` per distribution. That mass moves the statistic by at most, to first order, the sum
  over the distributions of the largest change when all of a distribution's unread mass is put
  on one value (exact for a share, an upper bound for the total variation).
* **Monte Carlo error of a field read over sampled accounts.** A field whose accounts differ
  (coping and the action; the threat label too where an account wrote the JSON layout with
  other whitespace) read over n sampled accounts (``ReadoutSettings.accounts``) is the mean of n
  conditional distributions, an estimate. Its one-sided bounds come from a percentile bootstrap
  over the accounts (the battery's ``resamples``; account k of every vignette was drawn with
  the same seed, so the accounts are resampled together, as the sampled card's replicates),
  at ``alpha`` for a secondary test and ``alpha`` over the number of primary tests for a
  primary one (Bonferroni: the primary tests together err at most ``alpha``), and are then
  widened by the unread mass's bound. A field read along the greedy path has no such error
  (and answers another question: the choice after the most probable account).
* **Three outcomes on the same thresholds.** A test passes when its bound clears the threshold
  of ``tests.yaml`` (the smallest effect of interest, margin, tolerance or largest share), fails
  when the opposite bound does not, and is inconclusive when the bounds straddle it. No
  p-values.
* **Not from distributions.** Laundering (the reply to a re-ask) and reason coherence (the
  reason's text) are about generated text, not about a choice among fixed values: they are
  ``not_measurable`` here and need the sampled card.

Read along the greedy path, the coping label and the action follow the greedy threat label and
reason (``llm.readout``), so tests on them judge the model's choice after its most probable
account; read over sampled accounts they judge the choice a sampled reply makes, as the sampled
card does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from governed_broker.config.agent_types import AgentTypesConfig
from governed_broker.validity.battery import (
    CoherenceTest,
    InvarianceTest,
    LaunderingTest,
    MonotoneTest,
    RetestTest,
    ShareTest,
)
from governed_broker.validity.measures import TestResult
from governed_broker.validity.plan import BatteryPlan

#: The reply's fields as the battery's measures name them (``validity.readout.FIELDS``).
FIELD_OF = {"threat": "threat_appraisal.label", "coping": "coping_appraisal.label",
            "action": "decision"}

Dist = Mapping[Any, float]


@dataclass(frozen=True)
class VignetteLaw:
    """One vignette's distributions, as a card needs them.

    Attributes:
        key: The vignette's key in the plan.
        distributions: ``threat``, ``coping``, ``action`` -> value -> probability (sums to 1).
        unread: The same keys -> probability the readout did not read (``Node.unread_share``).
        allowed: The actions offered, in the order shown.
        accounts: The same keys -> the distribution after each sampled account, for a field
            whose accounts differ (absent: read once, exact).
    """

    key: str
    distributions: dict[str, dict[str, float]]
    unread: dict[str, float]
    allowed: tuple[str, ...]
    accounts: dict[str, list[dict[str, float]]] = field(default_factory=dict)


def laws_from_readout(vignettes: Sequence[Mapping[str, Any]]) -> dict[str, VignetteLaw]:
    """The laws of a readout's vignettes (``VignetteDistributions.to_json`` entries), by key."""
    out = {}
    for v in vignettes:
        fields = {f["field"]: f for f in v["reply"]["fields"]}
        accounts = {m: [dict(a["distribution"]) for a in fields[name].get("accounts", [])]
                    for m, name in FIELD_OF.items()}
        out[v["vignette"]] = VignetteLaw(
            v["vignette"], {m: dict(v[m]) for m in FIELD_OF},
            {m: float(fields[name]["unread"]) for m, name in FIELD_OF.items()},
            tuple(v["allowed_actions"]),
            {m: a for m, a in accounts.items() if any(d != a[0] for d in a)})
    return out


# ----------------------------------------------------------------------------- statistics

def _mid_grades(weights: Mapping[float, float]) -> dict[float, float]:
    """Each value's mid-rank grade, P(X < x) + P(X = x) / 2, under ``weights`` (sum 1)."""
    out, below = {}, 0.0
    for x in sorted(weights):
        out[x] = below + weights[x] / 2
        below += weights[x]
    return out


def population_spearman(xs: Sequence[float], dists: Sequence[Dist]) -> float:
    """Spearman's rho of level and value when level i (weight 1/L) gives values by ``dists[i]``.

    The Pearson correlation of the mid-rank grades of the joint distribution: what the sampled
    statistic (average ranks for ties) converges to with equal replies per level. A value that
    never varies carries no association: 0, as in the sampled card.
    """
    n = len(xs)
    joint = {(x, y): 0.0 for x, d in zip(xs, dists, strict=True) for y in d}
    for x, d in zip(xs, dists, strict=True):
        for y, p in d.items():
            joint[(x, y)] += p / n
    px: dict[float, float] = {}
    py: dict[float, float] = {}
    for (x, y), p in joint.items():
        px[x] = px.get(x, 0.0) + p
        py[y] = py.get(y, 0.0) + p
    gx, gy = _mid_grades(px), _mid_grades(py)
    mx = sum(gx[x] * p for x, p in px.items())
    my = sum(gy[y] * p for y, p in py.items())
    vx = sum((gx[x] - mx) ** 2 * p for x, p in px.items())
    vy = sum((gy[y] - my) ** 2 * p for y, p in py.items())
    if vx <= 1e-15 or vy <= 1e-15:
        return 0.0
    cov = sum((gx[x] - mx) * (gy[y] - my) * p for (x, y), p in joint.items())
    return max(-1.0, min(1.0, cov / math.sqrt(vx * vy)))


def total_variation(p: Dist, q: Dist) -> float:
    """Half the L1 distance between two distributions over the same kind of values."""
    return 0.5 * sum(abs(p.get(c, 0.0) - q.get(c, 0.0)) for c in set(p) | set(q))


def population_icc(dists: Sequence[Dist]) -> float | None:
    """ICC(2,1) of ranks when vignette i answers by ``dists[i]`` and replicates are independent.

    Between-vignette variance of the expected rank (n - 1 in the denominator, as the sampled
    estimator's mean squares estimate it) over that plus the mean within-vignette variance;
    the raters' (replicates') variance is 0 in the limit. None when nothing varies.
    """
    means = [sum(y * p for y, p in d.items()) for d in dists]
    within = [sum((y - m) ** 2 * p for y, p in d.items()) for d, m in zip(dists, means,
                                                                          strict=True)]
    grand = sum(means) / len(means)
    between = sum((m - grand) ** 2 for m in means) / (len(means) - 1)
    total = between + sum(within) / len(within)
    return None if total <= 1e-15 else between / total


def population_alpha(dists: Sequence[Dist]) -> float | None:
    """Krippendorff's alpha (nominal) when unit i's values are drawn from ``dists[i]``.

    One minus the mean within-unit disagreement (1 - sum of squared shares) over the pooled
    disagreement, the limit of the coincidence-matrix estimate with many values per unit. None
    when every unit gives one value and all the same.
    """
    within = sum(1.0 - sum(p * p for p in d.values()) for d in dists) / len(dists)
    pooled: dict[Any, float] = {}
    for d in dists:
        for c, p in d.items():
            pooled[c] = pooled.get(c, 0.0) + p / len(dists)
    expected = 1.0 - sum(p * p for p in pooled.values())
    return None if expected <= 1e-12 else 1.0 - within / expected


def unread_bound(statistic: Callable[[list[dict[Any, float]]], float | None],
                 dists: Sequence[Dist], unread: Sequence[float]) -> float:
    """How far the unread mass can move ``statistic``, to first order.

    For each distribution with unread mass ``m``, the largest change of the statistic when
    ``m`` of it is moved onto one of its values (``(1 - m) p + m e_c``), summed over the
    distributions.
    """
    base = [dict(d) for d in dists]
    value = statistic(base)
    total = 0.0
    for i, m in enumerate(unread):
        if m <= 0.0:
            continue
        worst = 0.0
        for c in base[i]:
            moved = list(base)
            moved[i] = {k: (1 - m) * p + (m if k == c else 0.0) for k, p in base[i].items()}
            other = statistic(moved)
            if value is None or other is None:
                return math.inf
            worst = max(worst, abs(other - value))
        total += worst
    return total


def account_interval(statistic: Callable[[list[dict[Any, float]]], float | None],
                     accounts: Sequence[Sequence[Dist]], alpha: float, resamples: int
                     ) -> tuple[float, float] | None:
    """One-sided ``1 - alpha`` bounds of ``statistic`` over the sampled accounts' Monte Carlo error.

    Args:
        statistic: Of one distribution per vignette.
        accounts: Per vignette, the distribution after each of its accounts (one: exact).
        alpha: Each bound's error.
        resamples: Bootstrap resamples.

    Returns:
        The ``alpha`` and ``1 - alpha`` percentiles of the statistic over resamples of the
        accounts (account k of every vignette drawn together: they share a seed), or None when
        every vignette has one distribution (exact fields: nothing to resample).
    """
    sizes = {len(a) for a in accounts if len(a) > 1}
    if not sizes:
        return None
    if len(sizes) > 1:
        raise ValueError(f"vignettes read over different numbers of accounts: {sorted(sizes)}")
    n = sizes.pop()
    values = [sorted({v for d in a for v in d}, key=str) for a in accounts]
    arrays = [np.array([[d.get(v, 0.0) for v in vs] for d in a]) for a, vs in
              zip(accounts, values, strict=True)]
    rng = np.random.default_rng(0)  # a fixed stream: the same readout, the same card
    draws = []
    for _ in range(resamples):
        pick = rng.integers(0, n, n)
        dists = [dict(zip(vs, (a[pick] if len(a) > 1 else a).mean(axis=0), strict=True))
                 for a, vs in zip(arrays, values, strict=True)]
        value = statistic(dists)
        if value is not None:
            draws.append(value)
    if not draws:
        return None
    low, high = np.quantile(draws, [alpha, 1 - alpha])
    return float(low), float(high)


# ----------------------------------------------------------------------------- the tests

def _field(measure: str) -> str:
    """The field (``threat``, ``coping``, ``action``) a measure reads."""
    return measure if measure in ("threat", "coping") else "action"


def _as_measure(dist: Mapping[str, float], measure: str, scale: Sequence[str],
                effects: Mapping[str, str]) -> dict[Any, float]:
    """A field's distribution as a measure's: label ranks, action ids, or 1/0 for a share."""
    if measure in ("threat", "coping"):
        return {float(scale.index(label)): p for label, p in dist.items()}
    if measure == "decision":
        return dict(dist)
    effect = measure.split(":", 1)[1]
    hit = sum(p for a, p in dist.items() if effects.get(a) == effect)
    return {1.0: hit, 0.0: 1.0 - hit}


class ExactReadout:
    """The laws of a battery's vignettes, and how to read a measure off them.

    Args:
        plan: The battery plan the laws answer.
        laws: By vignette key (some may be missing: not read).
        domain: The experiment's domain (scale, action effects).
    """

    def __init__(self, plan: BatteryPlan, laws: Mapping[str, VignetteLaw],
                 domain: AgentTypesConfig) -> None:
        self.plan, self.laws = plan, laws
        self.scale = list(domain.pmt_labels.labels)
        self.effects = {a: spec.effect for a, spec in domain.actions.items()}

    def monte_carlo(self, test: Any, statistic: Callable[[list[dict[Any, float]]], float | None],
                    keys: Sequence[str], measure: str) -> dict[str, Any] | None:
        """The accounts' Monte Carlo bounds of a test's statistic (None: every field exact).

        At ``alpha`` for a secondary test, ``alpha`` over the number of primary tests for a
        primary one.
        """
        tests = self.plan.battery.tests
        alpha = tests.alpha / len(tests.primaries) if test.primary else tests.alpha
        accounts = [self.accounts(k, measure) for k in keys]
        interval = account_interval(statistic, accounts, alpha, tests.resamples)
        if interval is None:
            return None
        return {"accounts": max(len(a) for a in accounts), "alpha": alpha,
                "resamples": tests.resamples, "lower": interval[0], "upper": interval[1]}

    def dist(self, key: str, measure: str) -> dict[Any, float]:
        """A vignette's distribution of a measure: ranks, action ids, or 1/0 for a share."""
        return _as_measure(self.laws[key].distributions[_field(measure)], measure, self.scale,
                           self.effects)

    def unread(self, key: str, measure: str) -> float:
        """The unread mass of the field a measure reads."""
        return self.laws[key].unread[_field(measure)]

    def accounts(self, key: str, measure: str) -> list[dict[Any, float]]:
        """A vignette's distribution of a measure after each sampled account (one: exact)."""
        law = self.laws[key]
        per_account = law.accounts.get(_field(measure))
        if not per_account:
            return [self.dist(key, measure)]
        return [_as_measure(d, measure, self.scale, self.effects) for d in per_account]

    def missing(self, keys: Sequence[str]) -> list[str]:
        """The keys not read."""
        return [k for k in keys if k not in self.laws]


def _outcome(statistic: float | None, bound: float, threshold: float, comparison: str,
             monte_carlo: Mapping[str, Any] | None = None
             ) -> tuple[str, float | None, float | None]:
    """(outcome, lower, upper) of a statistic.

    Its unread mass moves it by ``bound``; over sampled accounts, the Monte Carlo bounds
    (``ExactReadout.monte_carlo``) widen it first.
    """
    if statistic is None:
        return "fail", None, None
    if not math.isfinite(bound):  # the unread mass could make the statistic undefined
        return "inconclusive", None, None
    lower, upper = statistic, statistic
    if monte_carlo is not None:
        lower, upper = min(lower, monte_carlo["lower"]), max(upper, monte_carlo["upper"])
    lower, upper = lower - bound, upper + bound
    if comparison == ">":
        outcome = "pass" if lower > threshold else "fail" if upper <= threshold else \
            "inconclusive"
    else:
        outcome = "pass" if upper < threshold else "fail" if lower >= threshold else \
            "inconclusive"
    return outcome, lower, upper


def _result(test: Any, plan: BatteryPlan, **values: Any) -> TestResult:
    return TestResult(name=test.name, family=test.family, kind=test.kind, primary=test.primary,
                      rationale=" ".join(test.rationale.split()),
                      sizing={"readout": "distribution",
                              "sampled_equivalent": plan.sizes[test.name].to_json()},
                      **values)


def _judged(test: Any, plan: BatteryPlan, statistic: float | None, bound: float,
            threshold: float, comparison: str, monte_carlo: dict[str, Any] | None = None,
            **values: Any) -> TestResult:
    outcome, lower, upper = _outcome(statistic, bound, threshold, comparison, monte_carlo)
    if monte_carlo is not None:
        values["detail"] = {**values.get("detail", {}), "monte_carlo": monte_carlo}
        values["criterion"] = (f"{values['criterion']}, and than the Monte Carlo error of "
                               f"{monte_carlo['accounts']} sampled accounts can (one-sided "
                               f"{1 - monte_carlo['alpha']:.1%} bootstrap bounds)")
    return _result(test, plan, outcome=outcome, statistic=statistic, lower=lower, upper=upper,
                   threshold=threshold, comparison=comparison, **values)


def _not_read(test: Any, plan: BatteryPlan, name: str, missing: Sequence[str],
              comparison: str, threshold: float) -> TestResult:
    return _result(test, plan, outcome="not_measurable", statistic=None, statistic_name=name,
                   lower=None, upper=None, threshold=threshold, comparison=comparison,
                   criterion="", n=0, note=f"{len(missing)} of its vignettes were not read "
                   "(read only the primary tests' vignettes)")


def monotone(test: MonotoneTest, read: ExactReadout, prompts: Mapping[str, str]) -> TestResult:
    """The population Spearman rho of level and measure against the test's threshold."""
    levels = read.plan.levels[test.name]
    keys = [lv.vignette for lv in levels]
    sign = 1.0 if test.expect in ("increase", "not_decrease") else -1.0
    threshold, side = sign * test.floor, ">" if sign > 0 else "<"
    if missing := read.missing(keys):
        return _not_read(test, read.plan, "spearman_rho", missing, side, threshold)
    xs = [lv.x for lv in levels]
    dists = [read.dist(k, test.measure) for k in keys]
    def statistic(ds: list[dict[Any, float]]) -> float:
        return population_spearman(xs, ds)

    rho = statistic(dists)
    bound = unread_bound(statistic, dists, [read.unread(k, test.measure) for k in keys])
    detail_levels = [{"label": lv.label, "x": lv.x, "n": None,
                      "mean": sum(y * p for y, p in d.items()),
                      "counts": {str(k): round(p, 6) for k, p in
                                 read.laws[lv.vignette].distributions[
                                     "action" if test.measure.startswith("share:")
                                     else test.measure].items()}}
                     for lv, d in zip(levels, dists, strict=True)]
    note = ""
    outcome_override = None
    if len({prompts.get(k) for k in keys}) == 1 and None not in {prompts.get(k) for k in keys}:
        outcome_override = "not_informative"
        note = (f"every level of {test.vary} gives the same prompt: the experiment's prompts "
                "do not state this fact, so no reply can respond to it")
    if test.measure.startswith("share:") and not _offered(read, test.measure, keys):
        outcome_override = "not_informative"
        note = (f"no vignette of the test offers an action with the effect "
                f"{test.measure.split(':', 1)[1]!r}: the test cannot fail")
    result = _judged(test, read.plan, rho, bound, threshold, side,
                     read.monte_carlo(test, statistic, keys, test.measure),
                     statistic_name="spearman_rho",
                     criterion=f"exact rho {side} {threshold:+.2f}, by more than the unread "
                     "mass can move it", n=len(keys), note=note,
                     detail={"measure": test.measure, "expect": test.expect,
                             "levels": detail_levels, "unread_bound": bound})
    if outcome_override:
        result = replace(result, outcome=outcome_override)
    return result


def _offered(read: ExactReadout, measure: str, keys: Sequence[str]) -> bool:
    """Whether any of the vignettes offers an action with the effect of ``share:<effect>``."""
    effect = measure.split(":", 1)[1]
    return any(read.effects.get(a) == effect for k in keys for a in read.laws[k].allowed)


def share_at_most(test: ShareTest, read: ExactReadout) -> TestResult:
    """The mean probability of an action with the effect over the levels, below ``max_share``."""
    levels = read.plan.levels[test.name]
    keys = [lv.vignette for lv in levels]
    if missing := read.missing(keys):
        return _not_read(test, read.plan, "share", missing, "<", test.max_share)
    effect = test.measure.split(":", 1)[1]
    shares = [read.dist(k, test.measure)[1.0] for k in keys]
    unread = [read.unread(k, test.measure) for k in keys]
    share = sum(shares) / len(shares)
    bound = sum(unread) / len(unread)  # exact: moving m of level i moves the mean by m / L
    offered = _offered(read, test.measure, keys)
    def mean_share(ds: list[dict[Any, float]]) -> float:
        return sum(d[1.0] for d in ds) / len(ds)

    result = _judged(test, read.plan, share, bound, test.max_share, "<",
                     read.monte_carlo(test, mean_share, keys, test.measure),
                     statistic_name="share",
                     criterion=f"exact share < {test.max_share:g}, by more than the unread mass "
                     "can move it", n=len(keys),
                     detail={"measure": test.measure,
                             "levels": [{"label": lv.label, "x": lv.x, "n": None, "mean": s}
                                        for lv, s in zip(levels, shares, strict=True)]})
    if not offered:
        result = replace(result, outcome="not_informative",
                         note=f"no vignette of the test offers an action with the effect "
                         f"{effect!r}: the test cannot fail")
    return result


def invariance(test: InvarianceTest, read: ExactReadout) -> TestResult:
    """The total variation between the base arm's and the variant arm's action distributions."""
    base_key, variant_key = read.plan.arms[test.name]
    if missing := read.missing([base_key, variant_key]):
        return _not_read(test, read.plan, "total_variation", missing, "<", test.tolerance)
    base, variant = read.dist(base_key, "decision"), read.dist(variant_key, "decision")
    bound = read.unread(base_key, "decision") + read.unread(variant_key, "decision")
    return _judged(test, read.plan, total_variation(base, variant), bound, test.tolerance, "<",
                   read.monte_carlo(test, lambda ds: total_variation(ds[0], ds[1]),
                                    [base_key, variant_key], "decision"),
                   statistic_name="total_variation",
                   criterion=f"exact TV < {test.tolerance:g} (equivalence), by more than the "
                   "unread mass can move it", n=2,
                   detail={"base": base, "variant": variant, "variant_kind": test.variant})


def retest(test: RetestTest, read: ExactReadout) -> TestResult:
    """ICC(2,1) of the ranks, or Krippendorff's alpha of the actions, over the grid."""
    keys = read.plan.grids[test.name]
    name = "krippendorff_alpha" if test.measure == "decision" else "icc_2_1"
    if missing := read.missing(keys):
        return _not_read(test, read.plan, name, missing, ">", test.smallest_effect)
    dists = [read.dist(k, test.measure) for k in keys]
    statistic = population_alpha if test.measure == "decision" else population_icc
    value = statistic(dists)
    bound = unread_bound(statistic, dists, [read.unread(k, test.measure) for k in keys])
    note = "" if value is not None else (f"every vignette gives the same {test.measure} with "
                                         "certainty: the replies cannot tell them apart")
    return _judged(test, read.plan, value, bound, test.smallest_effect, ">",
                   read.monte_carlo(test, statistic, keys, test.measure), statistic_name=name,
                   criterion=f"exact {name} > {test.smallest_effect:g}, by more than the unread "
                   "mass can move it", n=len(keys), note=note,
                   detail={"measure": test.measure, "vignettes": len(keys), "grid": test.grid})


def not_from_distributions(test: LaunderingTest | CoherenceTest,
                           plan: BatteryPlan) -> TestResult:
    """Laundering and coherence judge generated text: not measurable from distributions."""
    name = "laundering_rate" if isinstance(test, LaunderingTest) else "contradiction_rate"
    return _result(test, plan, outcome="not_measurable", statistic=None, statistic_name=name,
                   lower=None, upper=None, threshold=test.max_rate, comparison="<",
                   criterion="", n=0,
                   note="judged on generated text (a re-ask's reply, a reason), not on a "
                   "choice among fixed values: run the sampled card for it")


def exact_tests(plan: BatteryPlan, laws: Mapping[str, VignetteLaw], domain: AgentTypesConfig,
                prompts: Mapping[str, str]) -> list[TestResult]:
    """Every test of the plan's battery, in ``tests.yaml`` order, judged from the laws.

    Args:
        plan: The battery plan.
        laws: The distributions read, by vignette key.
        domain: The experiment's domain.
        prompts: Each vignette's rendered prompt hash (``card.rendered_prompts``): a monotone
            test whose levels all give one prompt is not informative.
    """
    read = ExactReadout(plan, laws, domain)
    results = []
    for test in plan.battery.tests.tests:
        if isinstance(test, MonotoneTest):
            results.append(monotone(test, read, prompts))
        elif isinstance(test, ShareTest):
            results.append(share_at_most(test, read))
        elif isinstance(test, InvarianceTest):
            results.append(invariance(test, read))
        elif isinstance(test, RetestTest):
            results.append(retest(test, read))
        else:
            results.append(not_from_distributions(test, plan))
    return results
