"""Scoring runs against an observed yearly series (a hindcast).

Take-up by year, the post-flood spike and its decay, policy tenure.

The targets file (``configs/hindcast/passaic.yaml``) declares the observed policies in force
per calendar year and zone with their denominators, the basin's flood years, and ranges for
the spike, its half-life and the tenure of new policies, each with a standard deviation or
range and a source. Measures, on the runs' ``agents_yearly.csv``:

* **take-up** of a series in calendar year ``c`` (simulated year ``c - start_year + 1``):
  households of the series' zone (their zone in the first year) with a policy in force during
  the year (``insured_before``), over the zone's initial households (relocated households
  count as uninsured, as a fixed census denominator counts their homes);
* **RMSE** of a series: root mean square of simulated minus observed take-up over the scored
  years (every observed year but ``initial_year``, which the population is set to);
* **spike** after flood year ``f``: all-household take-up in ``f + 1`` over take-up in ``f``,
  minus 1 (the rise after the flood's decisions);
* **half-life** after the first flood: with excess ``e(t) = takeup(t) - takeup(f)`` and its peak
  over ``f+1..f+3``, the years after the peak until ``e`` has fallen to half the peak (linear
  between years); not computable without a positive peak, censored when it has not halved
  before the next flood or the end (it is then at least the years from the peak to the end);
* **tenure**: Kaplan-Meier median years in force of the policies started during the run (a
  spell that lasts to the end or until the household relocates is censored; when fewer than
  half the policies end, the median is at least the longest spell followed).

A censored run counts at its bound: when the runs' mean with those bounds exceeds the observed
value, the implausibility computed from it is a lower bound and is scored; otherwise the
target is not scored (the note says which). A duration never reached is not a missing value.

Each measure's implausibility ``I = |f - z| / sqrt(sd^2 + var / n)`` (``f`` the mean over the
runs, ``var`` their variance, ``n`` their number); a target is met when ``I <= cutoff``.

``HindcastTargets.within(first, last)`` keeps the targets of a window of years (a training
window is measured on the runs up to its last year only; the years after it are the test of
``governed-broker calibrate --train``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from pydantic import Field, ValidationError, model_validator

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.config.base import ConfigError, StrictModel
from governed_broker.config.yamlsafe import read_yaml


class SeriesTarget(StrictModel):
    """Observed policies in force per calendar year in one zone (``zone: null``: all)."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    name: str
    zone: str | None
    denominator: int = Field(ge=1)
    denominator_source: str = Field(min_length=1)
    policies: dict[int, int] = Field(min_length=1)
    sd: float = Field(gt=0, le=1)
    sd_source: str = Field(min_length=1)

    def takeup(self) -> pd.Series:
        """Observed take-up (fraction) by calendar year."""
        return pd.Series({y: n / self.denominator for y, n in sorted(self.policies.items())})


class RangeTarget(StrictModel):
    """A target range for one number, read as midpoint +- 3 standard deviations."""

    range: tuple[float, float]
    source: str = Field(min_length=1)

    @model_validator(mode="after")
    def _ordered(self) -> RangeTarget:
        if not self.range[0] < self.range[1]:
            raise ValueError(f"range must be [low, high] with low < high, got {list(self.range)}")
        return self

    @property
    def centre(self) -> float:
        """The midpoint."""
        return (self.range[0] + self.range[1]) / 2

    @property
    def sd(self) -> float:
        """A sixth of the range's width (its ends at three standard deviations)."""
        return (self.range[1] - self.range[0]) / 6


class HindcastTargets(StrictModel):
    """The contents of a hindcast targets file (``configs/hindcast/passaic.yaml``)."""

    version: str
    name: str
    start_year: int
    initial_year: int | None = None
    cutoff: float = Field(3.0, gt=0)
    notice: str = ""
    series: list[SeriesTarget] = Field(min_length=1)
    series_source: str = Field(min_length=1)
    floods: list[int] = []
    spike: RangeTarget | None = None
    half_life: RangeTarget | None = None
    tenure: RangeTarget | None = None
    last_year: int | None = Field(None, description=(
        "measure runs only up to this calendar year (a training window; None: the whole run)"))

    @model_validator(mode="after")
    def _unique(self) -> HindcastTargets:
        ids = [s.id for s in self.series]
        if len(ids) != len(set(ids)):
            raise ValueError(f"series ids must be unique, got {ids}")
        return self

    @property
    def observed_years(self) -> list[int]:
        """Every calendar year with an observed value in some series."""
        return sorted({y for s in self.series for y in s.policies})

    def within(self, first: int, last: int) -> HindcastTargets:
        """The targets of calendar years ``first``..``last`` only (a training or test window).

        Series keep their observed years in the window (the initial year stays the initial
        condition); a flood's spike is kept when the flood year and the next lie in the
        window; the half-life after the first flood and the tenure of new policies (measures
        of the run from its start) are kept only by a window that starts at the run's start.
        A window that starts there measures the runs up to ``last`` only (``last_year``), so
        nothing after it enters the fit.

        Raises:
            ValueError: ``first > last``, or no observed year of any series is scored in the
                window.
        """
        if first > last:
            raise ValueError(f"window {first}-{last}: the first year is after the last")
        series = [s.model_copy(update={"policies": {y: n for y, n in s.policies.items()
                                                    if first <= y <= last}})
                  for s in self.series]
        scored = [y for s in series for y in s.policies if y != self.initial_year]
        if not scored:
            raise ValueError(f"window {first}-{last}: no observed year to score "
                             f"(observed: {self.observed_years})")
        from_start = first <= self.start_year
        floods = [f for f in self.floods if first <= f and f + 1 <= last]
        return self.model_copy(update={
            "name": f"{self.name} [{first}-{last}]",
            "series": [s for s in series if s.policies],
            "floods": floods,
            "half_life": self.half_life if from_start and self.floods
            and self.floods[0] in floods else None,
            "tenure": self.tenure if from_start else None,
            "last_year": last if from_start else self.last_year,
        })


def load_targets(path: Path | str) -> HindcastTargets:
    """Read and validate a targets file.

    Raises:
        AnalysisInputError: missing, unreadable or invalid file (the message names it).
    """
    path = Path(path)
    try:
        return HindcastTargets.model_validate(read_yaml(path, "hindcast targets file"))
    except ConfigError as exc:
        raise AnalysisInputError(str(exc)) from exc
    except ValidationError as exc:
        raise AnalysisInputError(f"{path}: invalid hindcast targets:\n{exc}") from exc


# ------------------------------------------------------------------------------------------
# measures of one run
# ------------------------------------------------------------------------------------------

#: The columns of ``agents_yearly.csv`` the measures read.
HINDCAST_COLUMNS = ("year", "agent_id", "flood_zone", "insured_before")


def read_hindcast_agents(path: Path | str) -> pd.DataFrame:
    """The columns of an ``agents_yearly.csv`` the hindcast measures need.

    Fast: a calibration reads one table per run.
    """
    path = Path(path)
    if not path.is_file():
        raise AnalysisInputError(f"{path}: file not found")
    try:
        frame = pd.read_csv(path, usecols=list(HINDCAST_COLUMNS),
                            dtype={"flood_zone": str, "insured_before": str})
    except ValueError as exc:
        raise AnalysisInputError(f"{path}: needs columns {list(HINDCAST_COLUMNS)} ({exc})") from exc
    insured = frame["insured_before"].str.strip().str.lower()
    if not insured.isin(["true", "false"]).all():
        raise AnalysisInputError(f"{path}: column 'insured_before' must be True/False")
    frame["insured_before"] = insured == "true"
    return frame


def takeup_series(agents: pd.DataFrame, targets: HindcastTargets) -> pd.DataFrame:
    """Simulated take-up of every series by calendar year: ``series, calendar_year, takeup``."""
    first_year = agents["year"].min()
    first = agents.loc[agents["year"] == first_year, ["agent_id", "flood_zone"]]
    zone_of = first.set_index("agent_id")["flood_zone"]
    insured = agents.loc[agents["insured_before"].astype(bool), ["year", "agent_id"]]
    insured_zone = zone_of.reindex(insured["agent_id"]).to_numpy()
    rows = []
    years = sorted(agents["year"].unique())
    for s in targets.series:
        members = zone_of.index if s.zone is None else zone_of.index[zone_of == s.zone]
        if len(members) == 0:
            raise AnalysisInputError(f"series {s.id}: no household of zone {s.zone!r} in the run "
                                     f"(zones: {sorted(zone_of.unique())})")
        mask = np.ones(len(insured), bool) if s.zone is None else insured_zone == s.zone
        counts = insured.loc[mask, "year"].value_counts()
        for year in years:
            rows.append({"series": s.id, "calendar_year": int(year) - 1 + targets.start_year,
                         "takeup": counts.get(year, 0) / len(members)})
    return pd.DataFrame(rows)


def spike_after(all_takeup: pd.Series, flood: int) -> float:
    """Relative rise of take-up from flood year ``flood`` to the next (NaN if not covered)."""
    if flood not in all_takeup.index or flood + 1 not in all_takeup.index:
        return math.nan
    before = all_takeup[flood]
    return math.nan if before <= 0 else all_takeup[flood + 1] / before - 1.0


def half_life_after(all_takeup: pd.Series, flood: int, until: int | None) -> float:
    """Years after the post-flood peak until the excess take-up has halved.

    NaN: no positive peak, or not halved before ``until`` / the end (``half_life_censored_at``
    gives the bound then).
    """
    return _half_life(all_takeup, flood, until)[0]


def half_life_censored_at(all_takeup: pd.Series, flood: int, until: int | None) -> float:
    """The years from the peak to the last year measured when the excess never halved.

    The half-life is then at least this; NaN when it was measured or has no positive peak.
    """
    return _half_life(all_takeup, flood, until)[1]


def _half_life(all_takeup: pd.Series, flood: int, until: int | None) -> tuple[float, float]:
    """(half-life, censoring bound): one of them finite, or both NaN without a peak."""
    if flood not in all_takeup.index:
        return math.nan, math.nan
    end = max(all_takeup.index) if until is None else until - 1
    excess = all_takeup.loc[flood:end] - all_takeup[flood]
    window = excess.loc[flood + 1:flood + 3]
    if window.empty or window.max() <= 0:
        return math.nan, math.nan
    peak_year, peak = int(window.idxmax()), float(window.max())
    after = excess.loc[peak_year:]
    years, values = after.index.to_numpy(float), after.to_numpy(float)
    for k in range(1, len(values)):
        if values[k] <= peak / 2:
            frac = (values[k - 1] - peak / 2) / (values[k - 1] - values[k])
            return float(years[k - 1] + frac * (years[k] - years[k - 1]) - peak_year), math.nan
    return math.nan, float(years[-1] - peak_year)


def tenure_median(agents: pd.DataFrame) -> float:
    """Kaplan-Meier median years in force of policies started during the run.

    NaN when the survival curve never falls to one half (``tenure_censored_at`` gives the
    bound then).
    """
    return _km_median(*_spells(agents))[0]


def tenure_censored_at(agents: pd.DataFrame) -> float:
    """The longest spell followed when the survival curve never falls to one half.

    The median tenure is then at least this; NaN when it was measured or no policy started.
    """
    return _km_median(*_spells(agents))[1]


def _spells(agents: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Durations (years) of the policies started during the run, and whether each ended."""
    years = sorted(agents["year"].unique())
    ids = np.sort(agents["agent_id"].unique())
    pos = np.searchsorted(ids, agents["agent_id"].to_numpy())
    col = np.searchsorted(years, agents["year"].to_numpy())
    present = np.zeros((len(ids), len(years)), bool)
    insured = np.zeros_like(present)
    present[pos, col] = True
    insured[pos, col] = agents["insured_before"].astype(bool).to_numpy()
    durations, events = [], []
    start = np.full(len(ids), -1)
    for k in range(1, len(years)):
        begins = insured[:, k] & ~insured[:, k - 1] & present[:, k - 1]
        start[begins] = k
        ends = (start >= 0) & insured[:, k - 1] & ~insured[:, k] & (start < k)
        lapsed = ends & present[:, k]
        durations += (k - start[ends]).tolist()
        events += lapsed[ends].tolist()
        start[ends] = -1
    running = start >= 0
    durations += (len(years) - start[running]).tolist()
    events += [False] * int(running.sum())
    return np.array(durations, float), np.array(events, bool)


def _km_median(durations: np.ndarray, events: np.ndarray) -> tuple[float, float]:
    """(median, censoring bound): the median, or the longest spell when it is not reached."""
    if durations.size == 0:
        return math.nan, math.nan
    survival = 1.0
    for t in np.unique(durations[events]):
        at_risk = np.sum(durations >= t)
        survival *= 1.0 - np.sum((durations == t) & events) / at_risk
        if survival <= 0.5:
            return float(t), math.nan
    return math.nan, float(durations.max())


@dataclass(frozen=True)
class RunMeasures:
    """The measures of one run: take-up per series and year, spikes, half-life, tenure.

    ``half_life_at_least`` and ``tenure_at_least`` are the censoring bounds when the measure
    was not reached within the run (the excess never halved; fewer than half the new
    policies ended): the measure is then NaN and at least this many years.
    """

    takeup: pd.DataFrame
    spikes: dict[int, float]
    half_life: float
    tenure: float
    half_life_at_least: float = math.nan
    tenure_at_least: float = math.nan


def run_measures(agents: pd.DataFrame, targets: HindcastTargets) -> RunMeasures:
    """Every hindcast measure of one run's agent table (up to ``targets.last_year``)."""
    if targets.last_year is not None:
        agents = agents[agents["year"] <= targets.last_year - targets.start_year + 1]
    takeup = takeup_series(agents, targets)
    everyone = [s.id for s in targets.series if s.zone is None]
    if everyone:
        all_takeup = takeup[takeup["series"] == everyone[0]].set_index("calendar_year")["takeup"]
    else:
        all_takeup = _all_households(agents, targets)
    floods = sorted(targets.floods)
    spikes = {f: spike_after(all_takeup, f) for f in floods}
    half = (_half_life(all_takeup, floods[0], floods[1] if len(floods) > 1 else None)
            if floods else (math.nan, math.nan))
    tenure = _km_median(*_spells(agents))
    return RunMeasures(takeup, spikes, half[0], tenure[0], half_life_at_least=half[1],
                       tenure_at_least=tenure[1])


def _all_households(agents: pd.DataFrame, targets: HindcastTargets) -> pd.Series:
    n = agents.loc[agents["year"] == agents["year"].min(), "agent_id"].nunique()
    counts = agents.loc[agents["insured_before"].astype(bool)].groupby("year").size()
    years = sorted(agents["year"].unique())
    return pd.Series({int(y) - 1 + targets.start_year: counts.get(y, 0) / n for y in years})


# ------------------------------------------------------------------------------------------
# score of an ensemble (one run or the replicates of one parameter point)
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HindcastScore:
    """How an ensemble of runs fits the targets.

    Attributes:
        table: One row per scored quantity: ``target`` (series id, ``spike_<year>``,
            ``half_life``, ``tenure``), ``calendar_year``, ``observed``, ``simulated`` (mean
            over runs), ``sd``, ``runs_sd`` (standard deviation over runs), ``n_runs``,
            ``implausibility``, ``met`` (``I <= cutoff``; None when not computable) and
            ``note``.
        rmse: Series id -> RMSE over the scored years (fraction points).
        max_implausibility: Largest implausibility (NaN when nothing is computable).
        cutoff: The targets' cutoff.
    """

    table: pd.DataFrame
    rmse: dict[str, float]
    max_implausibility: float
    cutoff: float

    @property
    def plausible(self) -> bool:
        """Every computable quantity within the cutoff (and at least one computable)."""
        return bool(self.max_implausibility <= self.cutoff)


def score_measures(measures: Sequence[RunMeasures], targets: HindcastTargets) -> HindcastScore:
    """Score the runs of one parameter point (replicates) against the targets."""
    if not measures:
        raise AnalysisInputError("no run to score")
    rows: list[dict] = []
    rmse: dict[str, float] = {}
    for s in targets.series:
        sims = pd.concat([m.takeup[m.takeup["series"] == s.id].set_index("calendar_year")
                          ["takeup"].rename(i) for i, m in enumerate(measures)], axis=1)
        errors = []
        for year, observed in s.takeup().items():
            if year not in sims.index:
                continue
            scored = year != targets.initial_year
            row = _row(s.id, year, observed, sims.loc[year].to_numpy(float), s.sd,
                       "" if scored else "initial condition, not scored")
            if not scored:
                row.update(implausibility=math.nan, met=None)
            else:
                errors.append(row["simulated"] - observed)
            rows.append(row)
        rmse[s.id] = float(np.sqrt(np.mean(np.square(errors)))) if errors else math.nan
    if targets.spike is not None:
        for flood in sorted(targets.floods):
            values = np.array([m.spikes.get(flood, math.nan) for m in measures])
            rows.append(_row(f"spike_{flood}", flood, targets.spike.centre, values,
                             targets.spike.sd, "relative rise in the year after the flood"))
    for name in ("half_life", "tenure"):
        target = getattr(targets, name)
        if target is not None:
            values = np.array([getattr(m, name) for m in measures])
            at_least = np.array([getattr(m, f"{name}_at_least") for m in measures])
            rows.append(_censored_row(name, target.centre, values, at_least, target.sd))
    table = pd.DataFrame(rows)
    computable = table["implausibility"].dropna()
    table["met"] = [None if pd.isna(i) else bool(i <= targets.cutoff)
                    for i in table["implausibility"]]
    worst = float(computable.max()) if len(computable) else math.nan
    return HindcastScore(table, rmse, worst, targets.cutoff)


def _row(target: str, year: int | None, observed: float, values: np.ndarray, sd: float,
         note: str) -> dict:
    finite = values[np.isfinite(values)]
    if finite.size < values.size:
        note = f"{note}; not computable in {values.size - finite.size} of {values.size} runs"
    if finite.size == 0:
        return {"target": target, "calendar_year": year, "observed": observed,
                "simulated": math.nan, "sd": sd, "runs_sd": math.nan, "n_runs": 0,
                "implausibility": math.nan, "met": None, "note": note.strip("; ")}
    mean = float(finite.mean())
    var = float(finite.var(ddof=1)) if finite.size > 1 else 0.0
    implausibility = abs(mean - observed) / math.sqrt(sd**2 + var / finite.size)
    return {"target": target, "calendar_year": year, "observed": observed, "simulated": mean,
            "sd": sd, "runs_sd": math.sqrt(var), "n_runs": int(finite.size),
            "implausibility": implausibility, "met": None, "note": note.strip("; ")}


def _censored_row(target: str, observed: float, values: np.ndarray, at_least: np.ndarray,
                  sd: float) -> dict:
    """A duration's row where some runs only bound it from below (censored).

    A censored run counts at its bound, so the mean is a lower bound of the runs' mean. When it
    lies above the observed value the implausibility computed from it is a lower bound too (a
    longer true duration would be further away) and the target is scored; when it does not,
    the censored runs could lie on either side of the observed value and the target is not
    scored. Leaving censored runs out instead, as a missing value, would score a run whose
    excess never decays as if it had said nothing.
    """
    censored = np.isfinite(at_least) & ~np.isfinite(values)
    if not censored.any():
        return _row(target, None, observed, values, sd, "years")
    bounded = np.where(censored, at_least, values)
    row = _row(target, None, observed, bounded, sd, "years")
    note = (f"{row['note']}; {int(censored.sum())} of {values.size} runs censored (not "
            f"reached within the run, counted at their bound, at least "
            f"{at_least[censored].min():.3g})")
    if row["n_runs"] and row["simulated"] > observed:
        row["note"] = f"{note}: the implausibility is a lower bound"
    else:
        row.update(implausibility=math.nan,
                   note=f"{note}: the bound lies below the observed, not scored")
    return row


def score_runs(agent_tables: Sequence[pd.DataFrame], targets: HindcastTargets) -> HindcastScore:
    """Measure and score the agent tables of the runs of one parameter point."""
    return score_measures([run_measures(a, targets) for a in agent_tables], targets)


# ------------------------------------------------------------------------------------------
# figure
# ------------------------------------------------------------------------------------------


def plot_hindcast(ensembles: dict[str, Sequence[RunMeasures]], targets: HindcastTargets,
                  title: str = "Observed vs simulated take-up"):
    """One panel per series.

    Observed take-up (black points; the initial year hollow) and, per labelled ensemble, the mean
    over its runs (line) and their range (band); the flood years as dashed lines. Returns the
    matplotlib figure.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(targets.series), figsize=(4.2 * len(targets.series), 3.6),
                             squeeze=False)
    for ax, s in zip(axes[0], targets.series, strict=True):
        for label, runs in ensembles.items():
            sims = pd.concat([m.takeup[m.takeup["series"] == s.id].set_index("calendar_year")
                              ["takeup"] for m in runs], axis=1)
            line = ax.plot(sims.index, sims.mean(axis=1), label=label)[0]
            if sims.shape[1] > 1:
                ax.fill_between(sims.index, sims.min(axis=1), sims.max(axis=1),
                                color=line.get_color(), alpha=0.2, linewidth=0)
        observed = s.takeup()
        scored = observed[observed.index != targets.initial_year]
        ax.errorbar(scored.index, scored.to_numpy(), yerr=targets.cutoff * s.sd, fmt="o",
                    color="black", capsize=3, label=f"observed (+-{targets.cutoff:g} sd)")
        if targets.initial_year in observed.index:
            ax.plot([targets.initial_year], [observed[targets.initial_year]], "o",
                    mfc="white", color="black", label="observed, initial condition")
        for flood in targets.floods:
            ax.axvline(flood, color="grey", linestyle="--", linewidth=0.8)
        ax.set_title(s.name, fontsize=9)
        ax.set_xlabel("year")
        ax.set_ylabel("take-up (share of households)")
        ax.set_ylim(bottom=0)
    axes[0][0].legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
