"""Figures of the analysis measures (matplotlib on the Agg canvas: no display needed).

Every function takes the table of a measure (or an agent table), draws one figure and returns
the ``matplotlib.figure.Figure``; ``figure_to_png`` / ``save_figure`` turn it into bytes or a
file. Figures are built with the object-oriented API on an Agg canvas, never through
``pyplot``: they need no display, leave the global backend alone (a notebook keeps its inline
backend and shows them with ``display(fig)``) and are freed when no longer referenced.
Colours are fixed per action/state so figures are comparable across runs.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from governed_broker.analysis.governance import STATUSES
from governed_broker.analysis.schema import labels_of

STATE_COLOURS = {
    "share_no_measure": ("none", "#d9d9d9"),
    "share_insured_only": ("insured only", "#4c72b0"),
    "share_elevated_only": ("elevated only", "#dd8452"),
    "share_insured_and_elevated": ("insured and elevated", "#8172b3"),
    "share_relocated": ("relocated", "#55a868"),
}
_LABEL_HEX = ["#2c7bb6", "#abd9e9", "#ffffbf", "#fdae61", "#d7191c"]
_STATUS_HEX = ["#999999", "#1a9850", "#91cf60", "#fee08b", "#d73027", "#fc8d59"]
STATUS_COLOURS = dict(zip(STATUSES, _STATUS_HEX, strict=True))


def new_figure(figsize: tuple[float, float]) -> Figure:
    """A figure on its own Agg canvas (independent of pyplot and the global backend)."""
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig


def figure_to_png(fig: Figure, dpi: int = 110) -> bytes:
    """Render ``fig`` to PNG bytes."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


def save_figure(fig: Figure, path: Path | str, dpi: int = 110) -> Path:
    """Write ``fig`` as PNG to ``path``."""
    path = Path(path)
    path.write_bytes(figure_to_png(fig, dpi))
    return path


def plot_trajectories(trajectories: pd.DataFrame, title: str = "Adaptation states") -> Figure:
    """Stacked shares of the five adaptation states by year (``adaptation_trajectories``)."""
    fig = new_figure((7, 4))
    ax = fig.subplots()
    years = trajectories["year"].to_numpy()
    columns = list(STATE_COLOURS)
    ax.stackplot(
        years,
        *[trajectories[c].to_numpy() for c in columns],
        labels=[STATE_COLOURS[c][0] for c in columns],
        colors=[STATE_COLOURS[c][1] for c in columns],
    )
    ax.set(xlabel="year", ylabel="share of initial households", ylim=(0, 1), title=title)
    ax.set_xlim(years.min(), years.max())
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    return fig


def plot_losses(losses: pd.DataFrame, title: str = "Losses and spending by year") -> Figure:
    """Grouped bars of damage, payouts, premiums and out-of-pocket losses (``losses_by_year``)."""
    fig = new_figure((7, 4))
    ax = fig.subplots()
    columns = [
        ("damage_usd", "damage"),
        ("payout_usd", "insurance payouts"),
        ("premium_usd", "premiums"),
        ("out_of_pocket_usd", "out-of-pocket"),
    ]
    years = losses["year"].to_numpy()
    width = 0.8 / len(columns)
    for i, (column, label) in enumerate(columns):
        ax.bar(years + (i - 1.5) * width, losses[column] / 1e3, width, label=label)
    ax.set(xlabel="year", ylabel="thousand USD", title=title)
    ax.set_xticks(years)
    ax.legend(frameon=False)
    return fig


def label_colours(labels: tuple[str, ...]) -> dict[str, str]:
    """A diverging colour per label, low (blue) to high (red).

    The five-level scale keeps the ColorBrewer RdYlBu colours of ``_LABEL_HEX``, other lengths
    sample the same colour map.
    """
    if len(labels) == len(_LABEL_HEX):
        return dict(zip(labels, _LABEL_HEX, strict=True))
    cmap = matplotlib.colormaps["RdYlBu_r"]
    return {x: matplotlib.colors.to_hex(cmap(i / (len(labels) - 1))) for i, x in enumerate(labels)}


def plot_label_distribution(agents: pd.DataFrame, title: str = "PMT appraisals") -> Figure:
    """Shares of threat (TP) and coping (CP) labels by year.

    Stacked from the lowest label of the run's scale to the highest.
    """
    labels = labels_of(agents)
    colours = label_colours(labels)
    fig = new_figure((10, 3.8))
    axes = fig.subplots(1, 2, sharey=True)
    panels = (("threat_label", "threat (TP)"), ("coping_label", "coping (CP)"))
    for ax, (column, name) in zip(axes, panels, strict=True):
        labelled = agents.dropna(subset=[column])
        if labelled.empty:
            ax.text(0.5, 0.5, "no labels in this run", ha="center", transform=ax.transAxes)
            ax.set_title(name)
            continue
        shares = pd.crosstab(labelled["year"], labelled[column], normalize="index")
        shares = shares.reindex(columns=list(labels), fill_value=0.0)
        bottom = np.zeros(len(shares))
        for label in labels:
            ax.bar(shares.index, shares[label], bottom=bottom, label=label,
                   color=colours[label], edgecolor="white", linewidth=0.5)
            bottom += shares[label].to_numpy()
        ax.set(title=name, xlabel="year")
        ax.set_xticks(shares.index)
    axes[0].set_ylabel("share of decisions")
    axes[1].legend(loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    fig.suptitle(title)
    return fig


def plot_governance(workload: pd.DataFrame, title: str = "Governance workload") -> Figure:
    """Decision statuses by year (stacked) and retries per decision (line, right axis)."""
    fig = new_figure((7, 4))
    ax = fig.subplots()
    years = workload["year"].to_numpy()
    bottom = np.zeros(len(workload))
    for status in STATUSES:
        share = workload[f"share_{status}"].to_numpy()
        if share.sum() > 0:
            ax.bar(years, share, bottom=bottom, label=status, color=STATUS_COLOURS[status])
            bottom += share
    ax.set(xlabel="year", ylabel="share of decisions", ylim=(0, 1), title=title)
    ax.set_xticks(years)
    right = ax.twinx()
    right.plot(years, workload["retries_per_decision"], "k.-", label="retries per decision")
    right.set_ylabel("retries per decision")
    right.set_ylim(0, max(0.5, 1.1 * float(workload["retries_per_decision"].max())))
    handles = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    right.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.15, 1), frameon=False)
    return fig


def plot_group_bands(
    summary: pd.DataFrame, ylabel: str, title: str = "", groups: Sequence[str] | None = None
) -> Figure:
    """Mean line and confidence band per group by year (``summarise_replicates`` output)."""
    fig = new_figure((7, 4))
    ax = fig.subplots()
    for label in groups or list(dict.fromkeys(summary["group"])):
        rows = summary[summary["group"] == label].sort_values("year")
        n = int(rows["n"].min())
        line = ax.plot(rows["year"], rows["mean"], marker="o", label=f"{label} (n={n})")[0]
        if n > 1:
            ax.fill_between(rows["year"], rows["ci_low"], rows["ci_high"],
                            color=line.get_color(), alpha=0.2)
    ax.set(xlabel="year", ylabel=ylabel, title=title)
    ax.legend(frameon=False)
    return fig


def plot_sobol(indices: pd.DataFrame, title: str | None = None) -> Figure:
    """Bar chart of first-order (and total, when present) indices per parameter."""
    fig = new_figure((6, 0.6 * len(indices) + 1.5))
    ax = fig.subplots()
    y = np.arange(len(indices))
    has_st = indices["ST"].notna().any()
    height = 0.4 if has_st else 0.6
    s1_err = indices["S1_conf"].where(indices["S1_conf"].notna(), None)
    ax.barh(y - (height / 2 if has_st else 0), indices["S1"], height, label="first order S1",
            xerr=s1_err.to_numpy(dtype=float), color="#4c72b0")
    if has_st:
        ax.barh(y + height / 2, indices["ST"], height, label="total ST",
                xerr=indices["ST_conf"].to_numpy(dtype=float), color="#dd8452")
    ax.set_yticks(y, indices["parameter"])
    method = indices["method"].iloc[0]
    ax.set(xlabel="sensitivity index (error bars: 95% interval half-width)",
           xlim=(min(0, float(indices["S1"].min())), 1),
           title=title or f"{indices['output'].iloc[0]} ({method})")
    ax.legend(frameon=False)
    return fig


def plot_institutions(institutions: pd.DataFrame,
                      title: str = "Institutions: levers and money by year") -> Figure:
    """The institutions' year (``institutions_yearly.csv``).

    The levers in force (left) and the money committed, paid, collected and claimed (right, thousand
    USD).
    """
    fig = new_figure((10, 4))
    levers, money = fig.subplots(1, 2)
    years = institutions["year"].to_numpy()
    for column, label in (("subsidy_share", "grant share of elevation cost"),
                          ("loading", "premium loading"), ("crs_discount", "community discount")):
        levers.plot(years, institutions[column].astype(float), marker="o", label=label)
    top = float(institutions[["subsidy_share", "loading", "crs_discount"]].astype(float)
                .max().max())
    levers.set(xlabel="year", ylabel="share / factor", title="levers in force",
               ylim=(0, 1.4 * max(top, 1.0)))
    levers.legend(frameon=False, fontsize="small", loc="upper left", ncols=2)
    for column, label in (("funds_available_usd", "government funds available"),
                          ("grants_paid_usd", "grants paid"), ("buyouts_paid_usd", "buyouts paid"),
                          ("premiums_written_usd", "premiums written"),
                          ("claims_usd", "claims paid")):
        money.plot(years, institutions[column].astype(float) / 1e3, marker=".", label=label)
    money.set(xlabel="year", ylabel="thousand USD", title="money")
    money.legend(frameon=False, fontsize="small")
    for ax in (levers, money):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.suptitle(title)
    return fig
