"""Fit of a run to empirical targets (``configs/benchmarks.yaml``) and failure signatures.

Each target names a *measure* (below), a range [low, high] and a weight. A target is
``in_range``, ``out_of_range`` or ``not_computable`` (the model does not produce the data, or
there is no household-year to measure it on). The score is the weighted share of computable,
scored targets in range::

    score = sum(weight * in_range) / sum(weight over computable scored targets)

(the lineage's "EPI"). Targets that cannot be computed never count as passed or failed; a
target with ``scored: false`` (its range has no primary source: ``unscored_reason`` says why)
is measured and shown, and can raise a failure signature, but never enters the score.

Measures (fractions 0..1 unless a unit is given; "end" = active, non-relocated households
after execution in the last simulated year; a *voluntary* policy is one the household bought
itself: not required by its lender, ``insurance_required``, nor an aid certificate,
``group_certificate``; see ``voluntary_policies``):

====================================  ========================================================
``insured_share_sfha_end``            insured share of end households in ``sfha_zones``
``insured_share_sfha_owners_end``     the same over end owner households
``insured_share_end``                 insured share of end households, all zones
``insured_share_outside_sfha_end``    insured share of end households outside ``sfha_zones``
``elevated_share_end``                elevated share of end households
``elevated_share_owners_end``         elevated share of end owner households
``relocated_share_end``               share of the initial population that relocated by
                                      choice by the last year (forced sales are not
                                      relocations)
``post_flood_inaction``               executed no-effect share of the flooded household-years
                                      of households that could act: not elevated before the
                                      flood, not insured whatever they choose
                                      (``insurance_required``, ``group_certificate``), some
                                      protective action open and affordable
                                      (``could_protect``), and not a broker fallback
                                      (``analysis.responses.post_flood_inaction`` reports the
                                      others apart)
``mg_nmg_gap``                        ever-adapted share of non-marginalised minus
                                      marginalised households (needs a boolean
                                      ``marginalised`` column; ``analysis.equity.
                                      adaptation_gap`` splits it into within-tenure and
                                      composition parts)
``flooded_uninsured``                 uninsured share (no policy in force) of the flooded
                                      household-years
``annual_lapse``                      share of household-years with a policy in force
                                      (``insured_before``) that did not renew (not relocating)
``annual_lapse_voluntary``            the same over voluntary policies in force; a policy
                                      renewed only by an aid certificate counts as lapsed
``post_flood_policy_rise``            relative change of the policies a zone holds in the
                                      year of a flood reaching its homes: policies for next
                                      year (``insured_after``, stayers) over the policies in
                                      force that year (``insured_before``) minus 1, mean over
                                      such zone-years
``post_flood_policy_rise_voluntary``  the same over voluntary policies
``post_flood_excess_yearK``           K = 2, 3, 5: the share of the year-after rise in a
                                      flooded zone's voluntary policies still there K years
                                      after the flood (``post_flood_excess``: the event-study
                                      curve normalised to its first year)
``median_policy_tenure``              years (unit): Kaplan-Meier median years in force of the
                                      policies started during the run (``analysis.hindcast.
                                      tenure_median``: censored when the run ends or the
                                      household leaves)
``median_policy_tenure_voluntary``    the same over voluntary policies
====================================  ========================================================
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from pydantic import Field, model_validator
from scipy import stats

from governed_broker.analysis.equity import adapted_households, household_gap
from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.hindcast import tenure_median
from governed_broker.analysis.responses import post_flood_rows
from governed_broker.analysis.version import METRIC_VERSION, stamp
from governed_broker.config.base import ConfigError, StrictModel
from governed_broker.config.validation import validate_model
from governed_broker.config.yamlsafe import read_yaml

DEFAULT_BENCHMARKS = Path(__file__).resolve().parents[2] / "configs" / "benchmarks.yaml"


class Target(StrictModel):
    """One empirical target (``unit``: ``fraction``, a share in 0..1, or ``years``)."""

    id: str
    name: str
    measure: str
    range: tuple[float, float]
    unit: Literal["fraction", "years"] = "fraction"
    weight: float = Field(gt=0)
    source: str = Field(min_length=1)
    requires: str | None = None
    scored: bool = True
    unscored_reason: str | None = None

    @model_validator(mode="after")
    def _check_range(self) -> Target:
        if self.scored == (self.unscored_reason is not None):
            raise ValueError("a target with 'scored: false' needs an 'unscored_reason' (why its "
                             "range has no primary source), and only such a target has one")
        low, high = self.range
        top = 1 if self.unit == "fraction" else float("inf")
        if not 0 <= low <= high <= top:
            raise ValueError(f"range must satisfy 0 <= low <= high <= {top} ({self.unit}), got "
                             f"{list(self.range)}")
        if self.measure not in MEASURES:
            raise ValueError(f"unknown measure {self.measure!r}; known: {sorted(MEASURES)}")
        return self


class Signature(StrictModel):
    """A failure signature: a target's range crossed on one side, or a saturation level."""

    description: str
    target: str | None = None
    side: Literal["above", "below", "outside"] | None = None
    saturation_share: float | None = Field(default=None, gt=0, le=1)
    source: str | None = None


class BenchmarkSet(StrictModel):
    """The contents of ``configs/benchmarks.yaml``."""

    version: str
    pass_mark: float = Field(ge=0, le=1)
    pass_mark_source: str
    sfha_zones: list[str]
    targets: list[Target]
    failure_signatures: dict[str, Signature] = {}

    @model_validator(mode="after")
    def _check_references(self) -> BenchmarkSet:
        ids = [t.id for t in self.targets]
        if len(ids) != len(set(ids)):
            raise ValueError(f"target ids must be unique, got {ids}")
        for name, sig in self.failure_signatures.items():
            if sig.target is not None and sig.target not in ids:
                raise ValueError(f"failure_signatures.{name}.target {sig.target!r} is not a target")
            if (sig.target is None) == (sig.saturation_share is None):
                raise ValueError(f"failure_signatures.{name}: give target+side or saturation_share")
        return self


def load_benchmarks(path: Path | str | None = None) -> BenchmarkSet:
    """Load and validate a benchmarks YAML (default: the repository's configs/benchmarks.yaml)."""
    path = Path(path) if path is not None else DEFAULT_BENCHMARKS
    if not path.is_file():
        raise AnalysisInputError(f"{path}: benchmarks file not found; pass --benchmarks FILE")
    try:  # bounded YAML; messages name fields and never quote the file (it may be any file)
        return validate_model(BenchmarkSet, read_yaml(path, "benchmarks file"), path)
    except ConfigError as exc:
        raise AnalysisInputError(str(exc)) from exc


@dataclass(frozen=True)
class MeasureValue:
    """A measured value with its denominator, or the reason it cannot be computed."""

    value: float | None
    n: int
    note: str = ""


def _end_households(agents: pd.DataFrame) -> pd.DataFrame:
    last = agents[agents["year"] == agents["year"].max()]
    return last[~last["relocated_after"].astype(bool)]


def _share(mask: pd.Series, what: str) -> MeasureValue:
    if len(mask) == 0:
        return MeasureValue(None, 0, f"no {what}")
    return MeasureValue(float(mask.astype(bool).mean()), int(len(mask)))


def _insured_share_sfha_end(agents: pd.DataFrame, bench: BenchmarkSet) -> MeasureValue:
    end = _end_households(agents)
    end = end[end["flood_zone"].isin(bench.sfha_zones)]
    return _share(end["insured_after"], f"end households in SFHA zones {bench.sfha_zones}")


def _insured_share_end(agents: pd.DataFrame, bench: BenchmarkSet) -> MeasureValue:
    return _share(_end_households(agents)["insured_after"], "end households")


def _elevated_share_end(agents: pd.DataFrame, bench: BenchmarkSet) -> MeasureValue:
    return _share(_end_households(agents)["elevated_after"], "end households")


def _relocated_share_end(agents: pd.DataFrame, bench: BenchmarkSet) -> MeasureValue:
    population = agents.loc[agents["year"] == agents["year"].min(), "agent_id"].nunique()
    left = agents[agents["relocated_after"].astype(bool) & ~agents["forced_sale"].astype(bool)]
    if population == 0:
        return MeasureValue(None, 0, "no households")
    return MeasureValue(left["agent_id"].nunique() / population, int(population))


def _post_flood_inaction(agents: pd.DataFrame, bench: BenchmarkSet) -> MeasureValue:
    rows = post_flood_rows(agents)
    counted = rows[rows["group"] == "could_act"]
    return _share(counted["inaction"], "flooded household-years of households that could act")


def _mg_nmg_gap(agents: pd.DataFrame, bench: BenchmarkSet) -> MeasureValue:
    if "marginalised" not in agents.columns or agents["marginalised"].isna().all():
        return MeasureValue(None, 0, "needs a 'marginalised' household attribute "
                                     "(population.marginalised or a population CSV column)")
    households = adapted_households(agents)
    missing = int(households["marginalised"].isna().sum())
    if missing:
        return MeasureValue(None, len(households), f"{missing} of {len(households)} households "
                                                   "have no 'marginalised' value")
    gap = household_gap(households)
    if gap.empty:
        return MeasureValue(None, len(households), "needs both MG and NMG households")
    everyone = gap.iloc[0]
    return MeasureValue(float(everyone["gap"]), int(everyone["n_nmg"] + everyone["n_mg"]))


def _flooded_uninsured(agents: pd.DataFrame, bench: BenchmarkSet) -> MeasureValue:
    flooded = agents[agents["flooded"].astype(bool)]
    return _share(~flooded["insured_before"].astype(bool), "flooded household-years")


def _owners(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["tenure"] == "owner"]


def _insured_share_sfha_owners_end(agents: pd.DataFrame, bench: BenchmarkSet) -> MeasureValue:
    end = _owners(_end_households(agents))
    end = end[end["flood_zone"].isin(bench.sfha_zones)]
    return _share(end["insured_after"], f"end owner households in SFHA zones {bench.sfha_zones}")


def _insured_share_outside_sfha_end(agents: pd.DataFrame, bench: BenchmarkSet) -> MeasureValue:
    end = _end_households(agents)
    end = end[~end["flood_zone"].isin(bench.sfha_zones)]
    return _share(end["insured_after"], f"end households outside SFHA zones {bench.sfha_zones}")


def _elevated_share_owners_end(agents: pd.DataFrame, bench: BenchmarkSet) -> MeasureValue:
    return _share(_owners(_end_households(agents))["elevated_after"], "end owner households")


def voluntary_policies(agents: pd.DataFrame) -> pd.DataFrame:
    """``agents`` with ``voluntary_before`` / ``voluntary_after`` columns.

    A voluntary policy is one in force this year / held for next year that the household
    bought itself, not one its lender requires
    (``insurance_required``) nor an aid certificate (``group_certificate``; the one in force
    this year is last year's).
    """
    frame = agents.sort_values(["agent_id", "year"])
    required = frame["insurance_required"].astype(bool)
    certificate = frame["group_certificate"].astype(bool)
    last_certificate = certificate.groupby(frame["agent_id"]).shift(1, fill_value=False)
    frame = frame.assign(
        voluntary_before=frame["insured_before"].astype(bool) & ~required & ~last_certificate,
        voluntary_after=frame["insured_after"].astype(bool) & ~required & ~certificate)
    return frame.sort_index()


def _annual_lapse(agents: pd.DataFrame, bench: BenchmarkSet) -> MeasureValue:
    rows = agents[agents["insured_before"].astype(bool) & ~agents["relocated_after"].astype(bool)]
    return _share(~rows["insured_after"].astype(bool), "household-years with a policy in force")


def _annual_lapse_voluntary(agents: pd.DataFrame, bench: BenchmarkSet) -> MeasureValue:
    frame = voluntary_policies(agents)
    rows = frame[frame["voluntary_before"] & ~frame["relocated_after"].astype(bool)]
    renewed = rows["insured_after"].astype(bool) & ~rows["group_certificate"].astype(bool)
    return _share(~renewed, "household-years with a voluntary policy in force")


def _zone_policies(agents: pd.DataFrame, voluntary: bool = False) -> pd.DataFrame:
    """Per zone and year: policies in force (``before``).

    Also policies for next year held by the households that stay (``after``) and whether a flood
    reached a home of the zone; with ``voluntary``, the households' own policies only
    (``voluntary_policies``).
    """
    if voluntary:
        agents = voluntary_policies(agents)
    before, after = ("voluntary_before", "voluntary_after") if voluntary else (
        "insured_before", "insured_after")
    stay = ~agents["relocated_after"].astype(bool)
    frame = pd.DataFrame({
        "year": agents["year"].astype(int), "zone": agents["flood_zone"],
        "before": agents[before].astype(int),
        "after": (agents[after].astype(bool) & stay).astype(int),
        "flood": agents["flooded"].astype(bool)})
    return frame.groupby(["zone", "year"]).agg(before=("before", "sum"), after=("after", "sum"),
                                               flood=("flood", "any")).reset_index()


def _policy_rise(zy: pd.DataFrame) -> MeasureValue:
    floods = zy[zy["flood"] & (zy["before"] > 0)]
    if floods.empty:
        return MeasureValue(None, 0, "no flood reached a zone holding policies")
    rise = floods["after"] / floods["before"] - 1.0
    return MeasureValue(float(rise.mean()), int(len(floods)))


def _post_flood_policy_rise(agents: pd.DataFrame, bench: BenchmarkSet) -> MeasureValue:
    return _policy_rise(_zone_policies(agents))


def _post_flood_policy_rise_voluntary(agents: pd.DataFrame, bench: BenchmarkSet) -> MeasureValue:
    return _policy_rise(_zone_policies(agents, voluntary=True))


def post_flood_excess(agents: pd.DataFrame, k: int) -> MeasureValue:
    """Share of the year-after rise in a flooded zone's voluntary policies left after ``k`` years.

    The share is ``(P(f+k) / P(f) - 1) / (P(f+1) / P(f) - 1)`` with ``P(y)`` the
    zone's voluntary policies in force in year ``y`` (``voluntary_policies``), mean over the
    zone-floods with a rise (``P(f+1) > P(f) > 0``) and no other flood in the zone up to
    ``f+k`` inside the run (the event-study curve of take-up after a flood, normalised to its
    first year).
    """
    zy = _zone_policies(agents, voluntary=True)
    shares = []
    for _, zone in zy.groupby("zone"):
        in_force = zone.set_index("year")["before"]
        flooded = set(zone.loc[zone["flood"], "year"])
        for f in sorted(flooded):
            years = range(f + 1, f + k + 1)
            if any(y not in in_force.index or y in flooded for y in years):
                continue  # censored: the run ends, or another flood comes first
            level, first = in_force.get(f, 0), in_force[f + 1]
            if level > 0 and first > level:
                shares.append((in_force[f + k] / level - 1.0) / (first / level - 1.0))
    if not shares:
        return MeasureValue(None, 0, f"no flood followed by a rise and {k} flood-free years")
    return MeasureValue(float(np.mean(shares)), len(shares))


def _post_flood_excess(k: int) -> Callable[[pd.DataFrame, BenchmarkSet], MeasureValue]:
    def measure(agents: pd.DataFrame, bench: BenchmarkSet) -> MeasureValue:
        return post_flood_excess(agents, k)
    return measure


def _tenure(agents: pd.DataFrame) -> MeasureValue:
    median = tenure_median(agents)
    if np.isnan(median):
        return MeasureValue(None, 0, "no policy bought during the run lapsed before half of "
                                     "them had (or none was bought)")
    return MeasureValue(float(median), int(agents["agent_id"].nunique()))


def _median_policy_tenure(agents: pd.DataFrame, bench: BenchmarkSet) -> MeasureValue:
    return _tenure(agents)


def _median_policy_tenure_voluntary(agents: pd.DataFrame, bench: BenchmarkSet) -> MeasureValue:
    frame = voluntary_policies(agents)
    return _tenure(frame.assign(insured_before=frame["voluntary_before"]))


MEASURES: dict[str, Callable[[pd.DataFrame, BenchmarkSet], MeasureValue]] = {
    "insured_share_sfha_end": _insured_share_sfha_end,
    "insured_share_sfha_owners_end": _insured_share_sfha_owners_end,
    "insured_share_end": _insured_share_end,
    "insured_share_outside_sfha_end": _insured_share_outside_sfha_end,
    "elevated_share_end": _elevated_share_end,
    "elevated_share_owners_end": _elevated_share_owners_end,
    "relocated_share_end": _relocated_share_end,
    "post_flood_inaction": _post_flood_inaction,
    "mg_nmg_gap": _mg_nmg_gap,
    "flooded_uninsured": _flooded_uninsured,
    "annual_lapse": _annual_lapse,
    "annual_lapse_voluntary": _annual_lapse_voluntary,
    "post_flood_policy_rise": _post_flood_policy_rise,
    "post_flood_policy_rise_voluntary": _post_flood_policy_rise_voluntary,
    **{f"post_flood_excess_year{k}": _post_flood_excess(k) for k in (2, 3, 5)},
    "median_policy_tenure": _median_policy_tenure,
    "median_policy_tenure_voluntary": _median_policy_tenure_voluntary,
}


@dataclass
class BenchmarkFit:
    """The fit of one run to a benchmark set.

    Attributes:
        table: One row per target: ``id, name, measure, value, low, high, weight, status, n,
            note, source, scored`` (status: in_range / out_of_range / not_computable).
        score: Weighted share of computable targets in range (None when none is computable).
        computable_weight: Sum of the weights of computable targets.
        passed: ``score >= pass_mark`` (None when the score is None).
        flags: One row per failure signature: ``signature, flagged, value, description``
            (flagged is None when the underlying measure cannot be computed).
        benchmarks_version / metric_version: versions of the targets and of the definitions.
    """

    table: pd.DataFrame
    score: float | None
    computable_weight: float
    pass_mark: float
    passed: bool | None
    flags: pd.DataFrame
    benchmarks_version: str
    metric_version: str = METRIC_VERSION


def _status(value: float | None, low: float, high: float) -> str:
    if value is None:
        return "not_computable"
    return "in_range" if low <= value <= high else "out_of_range"


def _saturation(agents: pd.DataFrame, level: float) -> tuple[bool | None, float | None]:
    owners = agents[(agents["tenure"] == "owner") & ~agents["relocated_after"].astype(bool)]
    if owners.empty:
        return None, None
    peak = float(owners.groupby("year")["elevated_after"].mean().max())
    return peak >= level, peak


def _flags(agents: pd.DataFrame, bench: BenchmarkSet, table: pd.DataFrame) -> pd.DataFrame:
    rows = []
    by_id = table.set_index("id")
    for name, sig in bench.failure_signatures.items():
        if sig.saturation_share is not None:
            flagged, value = _saturation(agents, sig.saturation_share)
        else:
            target = by_id.loc[sig.target]
            value = None if pd.isna(target["value"]) else float(target["value"])
            if value is None:
                flagged = None
            elif sig.side == "above":
                flagged = value > target["high"]
            elif sig.side == "below":
                flagged = value < target["low"]
            else:
                flagged = not target["low"] <= value <= target["high"]
        rows.append(
            {"signature": name, "flagged": flagged, "value": value, "description": sig.description}
        )
    return pd.DataFrame(rows, columns=["signature", "flagged", "value", "description"])


def fit_to_benchmarks(agents: pd.DataFrame, bench: BenchmarkSet | None = None) -> BenchmarkFit:
    """Measure every target on one run's agent table and score the fit.

    Args:
        agents: Typed agent table of one run.
        bench: Benchmarks (default: ``load_benchmarks()``).
    """
    bench = bench or load_benchmarks()
    rows = []
    for target in bench.targets:
        measured = MEASURES[target.measure](agents, bench)
        note = measured.note
        if target.requires and measured.value is None and measured.n == 0:
            # nothing to measure on: say what the target needs (a measure's own note says why
            # it could not use the households it had)
            note = f"requires {target.requires}"
        low, high = target.range
        rows.append(
            {
                "id": target.id,
                "name": target.name,
                "measure": target.measure,
                "value": measured.value,
                "low": low,
                "high": high,
                "weight": target.weight,
                "status": _status(measured.value, low, high),
                "n": measured.n,
                "note": note if target.scored else "; ".join(
                    filter(None, [note, f"not scored: {target.unscored_reason}"])),
                "source": target.source,
                "scored": target.scored,
            }
        )
    table = pd.DataFrame(rows)
    table["value"] = table["value"].astype(float)
    computable = table[(table["status"] != "not_computable") & table["scored"]]
    weight = float(computable["weight"].sum())
    score = (
        float(computable.loc[computable["status"] == "in_range", "weight"].sum() / weight)
        if weight > 0
        else None
    )
    return BenchmarkFit(
        table=table,
        score=score,
        computable_weight=weight,
        pass_mark=bench.pass_mark,
        passed=None if score is None else score >= bench.pass_mark,
        flags=_flags(agents, bench, table),
        benchmarks_version=bench.version,
    )


@dataclass
class ReplicateFit:
    """The fit of replicate runs (e.g. seeds) of one experiment to a benchmark set.

    Attributes:
        table: One row per target: ``id, name, n, mean, ci_low, ci_high, low, high, weight,
            share_in_range, status, scored`` (mean and Student-t interval of the measured
            value over the replicates where it is computable; ``status`` judges the mean:
            in_range / out_of_range / not_computable; ``share_in_range``: share of
            replicates in range).
        scores: The score of every replicate (NaN where none is computable).
        score_mean, score_ci: Mean score and its interval (NaN bounds with one replicate).
        passed: ``score_mean >= pass_mark`` (None when no replicate has a score).
        confidence: Level of the intervals.
    """

    table: pd.DataFrame
    scores: list[float]
    score_mean: float | None
    score_ci: tuple[float, float]
    pass_mark: float
    passed: bool | None
    confidence: float
    benchmarks_version: str
    metric_version: str = METRIC_VERSION


def mean_interval(values: list[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """Mean and Student-t confidence interval of ``values`` (NaN entries dropped).

    Returns:
        ``(mean, low, high)``; the bounds are NaN with fewer than two values (never a fake
        zero width), all three NaN with none.
    """
    data = np.asarray([v for v in values if v is not None and not np.isnan(v)], dtype=float)
    if data.size == 0:
        return float("nan"), float("nan"), float("nan")
    mean = float(data.mean())
    if data.size < 2:
        return mean, float("nan"), float("nan")
    half = float(stats.t.ppf((1 + confidence) / 2, data.size - 1) * data.std(ddof=1)
                 / np.sqrt(data.size))
    return mean, mean - half, mean + half


def fit_replicates(tables: list[pd.DataFrame], bench: BenchmarkSet | None = None,
                   confidence: float = 0.95) -> ReplicateFit:
    """``fit_to_benchmarks`` on every replicate run, summarised with intervals.

    Args:
        tables: Typed agent tables of replicate runs (same experiment, different seeds).
        bench: Benchmarks (default: ``load_benchmarks()``).
        confidence: Level of the Student-t intervals across replicates.
    """
    if not tables:
        raise AnalysisInputError("fit_replicates needs at least one run")
    bench = bench or load_benchmarks()
    fits = [fit_to_benchmarks(agents, bench) for agents in tables]
    rows = []
    for target in bench.targets:
        values = [float(f.table.set_index("id").loc[target.id, "value"]) for f in fits]
        present = [v for v in values if v == v]
        mean, low_ci, high_ci = mean_interval(present, confidence)
        low, high = target.range
        rows.append({
            "id": target.id, "name": target.name, "n": len(present), "mean": mean,
            "ci_low": low_ci, "ci_high": high_ci, "low": low, "high": high,
            "weight": target.weight,
            "share_in_range": (sum(low <= v <= high for v in present) / len(present)
                               if present else float("nan")),
            "status": _status(mean if present else None, low, high),
            "scored": target.scored,
        })
    scores = [float("nan") if f.score is None else f.score for f in fits]
    score_mean, score_low, score_high = mean_interval(scores, confidence)
    has_score = score_mean == score_mean
    return ReplicateFit(
        table=pd.DataFrame(rows), scores=scores,
        score_mean=score_mean if has_score else None, score_ci=(score_low, score_high),
        pass_mark=bench.pass_mark, passed=(score_mean >= bench.pass_mark) if has_score else None,
        confidence=confidence, benchmarks_version=bench.version)


def paired_fit_difference(tables: Sequence[pd.DataFrame], others: Sequence[pd.DataFrame],
                          bench: BenchmarkSet | None = None,
                          confidence: float = 0.95) -> pd.DataFrame:
    """Seed-by-seed difference between the fits of two experiments.

    ``tables[i]`` minus ``others[i]``.

    Runs of two arms with the same seed share their population and floods, so the difference
    of each pair removes what the seed decides; its interval is far narrower than comparing two
    means with their own intervals.

    Args:
        tables: Typed agent tables of one arm, one per seed.
        others: The other arm's tables, same seeds in the same order.
        bench: Benchmarks (default: ``load_benchmarks()``).
        confidence: Level of the Student-t intervals across pairs.

    Returns:
        One row for the score (``id`` = ``score``) and one per target: ``pairs`` (pairs where
        both are computable), ``mean``, ``ci_low``, ``ci_high`` of the differences, and
        ``higher`` / ``lower`` (pairs where the first arm's value is above / below).

    Raises:
        AnalysisInputError: The arms have different numbers of runs.
    """
    if len(tables) != len(others) or not tables:
        raise AnalysisInputError(f"paired_fit_difference needs the same seeds in both arms "
                                 f"(got {len(tables)} and {len(others)} runs)")
    bench = bench or load_benchmarks()
    fits = [(fit_to_benchmarks(a, bench), fit_to_benchmarks(b, bench))
            for a, b in zip(tables, others, strict=True)]
    by_id = [(f.table.set_index("id")["value"], g.table.set_index("id")["value"])
             for f, g in fits]
    pairs = {"score": [(f.score, g.score) for f, g in fits]}
    for target in bench.targets:
        pairs[target.id] = [(a[target.id], b[target.id]) for a, b in by_id]
    rows = []
    for name, both in pairs.items():
        # a pair counts only where both runs could compute the measure (None or NaN: not)
        diffs = [float(a) - float(b) for a, b in both if pd.notna(a) and pd.notna(b)]
        mean, low, high = mean_interval(diffs, confidence)
        rows.append({"id": name, "pairs": len(diffs), "mean": mean, "ci_low": low,
                     "ci_high": high, "higher": sum(d > 0 for d in diffs),
                     "lower": sum(d < 0 for d in diffs)})
    return stamp(pd.DataFrame(rows))
