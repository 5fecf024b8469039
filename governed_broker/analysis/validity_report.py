"""The "Behavioural validity" section of a report.

The run's validity card (one figure per test family) and the validity measures of the run itself
(``run_validity``).

A run's card is ``validity_card.json`` in its directory (copied there when the run started, see
``governed_broker.validity.gate``); its manifest's ``validity`` record says what the gate found,
including the warning of ``validity.gate: warn``. A ``validate`` output directory has only the
card, and ``governed-broker report`` on it writes a page with this section alone.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.loaders import RunData
from governed_broker.analysis.plots import new_figure
from governed_broker.analysis.run_validity import (
    laundering_rate,
    proposal_gap,
    reason_coherence_rate,
    threat_by_depth,
    uptake_by_cost,
)
from governed_broker.config.base import ConfigError
from governed_broker.validity.battery import coherence_patterns
from governed_broker.validity.store import CARD_FILE

_PASS_COLOURS = {True: "#1a9850", False: "#d73027", None: "#999999"}


def read_card(directory: Path) -> dict[str, Any] | None:
    """The ``validity_card.json`` of a run or ``validate`` directory (None: there is none)."""
    path = Path(directory) / CARD_FILE
    if not path.is_file():
        return None
    try:
        card = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise AnalysisInputError(f"{path}: not a readable validity card ({exc})") from None
    if not isinstance(card, dict) or not isinstance(card.get("tests"), list):
        raise AnalysisInputError(f"{path}: not a validity card (no list of tests)")
    return card


def card_table(card: dict[str, Any]) -> pd.DataFrame:
    """One row per test.

    Whether it is primary, family, statistic, value, its 90 % interval, criterion, p (Holm-adjusted
    for primary tests), n, outcome, note.
    """
    rows = [{"test": t["name"], "primary": "yes" if t["primary"] else "",
             "family": t["family"], "statistic": t["statistic_name"], "value": t["statistic"],
             "interval": "" if t["lower"] is None or t["upper"] is None
             else f"[{t['lower']:.3g}, {t['upper']:.3g}]",
             "criterion": t["criterion"],
             "p": t["p_adjusted"] if t["primary"] else t["p_value"], "n": t["n"],
             "result": t["outcome"].replace("_", " "), "note": t.get("note", "")}
            for t in card["tests"]]
    return pd.DataFrame(rows)


# -- figures, one per test family -----------------------------------------------------------
def _panels(n: int, width: float) -> tuple[Figure, list[Any]]:
    """A figure with ``n`` panels, at most four in a row."""
    cols = min(4, n)
    rows = -(-n // cols)
    fig = new_figure((width * cols, 2.8 * rows))
    axes = list(np.ravel(fig.subplots(rows, cols, squeeze=False)))
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def _levels_figure(tests: Sequence[dict[str, Any]], scale: Sequence[str]) -> Figure:
    """Mean measure by level, one panel per test (monotone and share tests)."""
    fig, axes = _panels(len(tests), 3.2)
    for ax, t in zip(axes, tests, strict=True):
        levels = t["detail"]["levels"]
        means = [np.nan if lv["mean"] is None else lv["mean"] for lv in levels]
        ax.plot(range(len(levels)), means, marker="o", color=_PASS_COLOURS[t["passed"]])
        ax.set_xticks(range(len(levels)), [lv["label"].split("=", 1)[-1] for lv in levels])
        ax.set_xlabel(levels[0]["label"].split("=", 1)[0], fontsize=8)
        measure = t["detail"]["measure"]
        if measure in ("threat", "coping"):
            ax.set_yticks(range(len(scale)), scale)
            ax.set_ylim(-0.3, len(scale) - 0.7)
            ax.set_ylabel(f"mean {measure}")
        else:
            ax.set_ylim(-0.05, 1.05)
            ax.set_ylabel(f"share {measure.split(':', 1)[-1]}")
        value = "undefined" if t["statistic"] is None else f"{t['statistic']:.2f}"
        ax.set_title(f"{t['name']}\n{t['statistic_name']} {value}", fontsize=8)
    fig.tight_layout()
    return fig


def _arms_figure(tests: Sequence[dict[str, Any]], scale: Sequence[str]) -> Figure:
    """Choice shares of the base and the variant arm, one panel per invariance test."""
    fig, axes = _panels(len(tests), 4.0)
    for ax, t in zip(axes, tests, strict=True):
        base, variant = t["detail"]["base"], t["detail"]["variant"]
        actions = sorted(set(base) | set(variant))
        x = np.arange(len(actions))
        for offset, (name, counts) in zip((-0.2, 0.2), (("as listed", base),
                                                         (t["detail"]["variant_kind"], variant)),
                                          strict=True):
            total = sum(counts.values()) or 1
            ax.bar(x + offset, [counts.get(a, 0) / total for a in actions], 0.4, label=name)
        ax.set_xticks(x, actions, rotation=20, fontsize=7)
        ax.set_ylim(0, 1.05)
        ax.set_ylabel("share of first proposals")
        value = "undefined" if t["statistic"] is None else f"{t['statistic']:.2f}"
        ax.set_title(f"{t['name']}\nTV {value}", fontsize=8)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _outcomes_figure(tests: Sequence[dict[str, Any]], scale: Sequence[str]) -> Figure:
    """How blocked proposals ended, for scripted triggers and the model's own proposals."""
    fig, axes = _panels(len(tests), 4.5)
    for ax, t in zip(axes, tests, strict=True):
        sources = [s for s in ("trigger", "model") if s in t["detail"]]
        outcomes = list(t["detail"][sources[0]]) if sources else []
        bottom = np.zeros(len(sources))
        for outcome in outcomes:
            counts = np.array([t["detail"][s][outcome] for s in sources], dtype=float)
            ax.bar(sources, counts, bottom=bottom, label=outcome.replace("_", " "))
            bottom += counts
        ax.set_ylabel("blocked proposals")
        value = "undefined" if t["statistic"] is None else f"{t['statistic']:.2f}"
        ax.set_title(f"{t['name']}\nrate {value}", fontsize=8)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _statistics_figure(tests: Sequence[dict[str, Any]], scale: Sequence[str]) -> Figure:
    """Each test's statistic against its threshold (retest, reasoning and other families)."""
    fig = new_figure((max(3.0, 1.6 * len(tests)), 2.8))
    ax = fig.subplots()
    x = np.arange(len(tests))
    values = [np.nan if t["statistic"] is None else t["statistic"] for t in tests]
    ax.bar(x, values, color=[_PASS_COLOURS[t["passed"]] for t in tests])
    ax.scatter(x, [t["threshold"] for t in tests], marker="_", s=600, color="black",
               label="threshold", zorder=3)
    ax.set_xticks(x, [t["name"] for t in tests], rotation=20, fontsize=7)
    ax.set_ylabel("statistic")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def family_figure(tests: Sequence[dict[str, Any]], scale: Sequence[str]) -> Figure:
    """The figure of one family, chosen by what its tests record."""
    draw: Callable[[Sequence[dict[str, Any]], Sequence[str]], Figure] = _statistics_figure
    if all("levels" in t["detail"] for t in tests):
        draw = _levels_figure
    elif all("variant" in t["detail"] for t in tests):
        draw = _arms_figure
    elif all("trigger" in t["detail"] for t in tests):
        draw = _outcomes_figure
    return draw(tests, scale)


# -- HTML ------------------------------------------------------------------------------------
def card_section(card: dict[str, Any], table: Callable[[pd.DataFrame], str],
                 image: Callable[[Figure, str], str]) -> list[str]:
    """HTML of a card: verdict, table and one figure per family."""
    s, cfg = card["summary"], card["configuration"]
    verdict = html.escape(card["verdict"])
    if not card["passed"]:
        verdict = f'<span class="flag">{verdict}</span>'
    body = [
        f"<p>Validity card <code>{html.escape(card['key'][:12])}</code> ({verdict}; "
        f"{s['passed']} passed, {s['failed']} failed, {s['inconclusive']} inconclusive, "
        f"{s['not_informative']} not informative, {s['not_measurable']} not measurable"
        f"{'; quick battery' if card['quick'] else ''}), made {html.escape(card['created_at'])}"
        f" for {html.escape(json.dumps(cfg['model']))}, profile "
        f"{html.escape(str(cfg['profile']))}; {card['battery'].get('decisions')} battery "
        f"decisions in {card['timing'].get('wall_s')} s.</p>",
        table(card_table(card)),
    ]
    families: dict[str, list[dict[str, Any]]] = {}
    for t in card["tests"]:
        families.setdefault(t["family"], []).append(t)
    for family, tests in families.items():
        body += [f"<h3>{html.escape(family)}</h3>",
                 image(family_figure(tests, card.get("scale", [])), f"validity: {family}")]
    return body


def _patterns(run: RunData) -> dict[str, list[str]]:
    battery = ((run.config or {}).get("validity") or {}).get("battery_dir")
    base = run.manifest.get("config_base_dir")
    if not battery or not base:
        raise ConfigError("the run's config.yaml or manifest does not name its validity battery")
    return coherence_patterns(Path(base) / battery)


def run_section(run: RunData, table: Callable[[pd.DataFrame], str],
                image: Callable[[Figure, str], str]) -> list[str]:
    """HTML of the run's own validity: the gate's record, its card, and the run measures."""
    body = ["<h2>Behavioural validity</h2>"]
    record = run.manifest.get("validity") or {}
    if record.get("warning"):
        body.append(f'<p class="flag">Validity warning: {html.escape(record["warning"])}</p>')
    card = read_card(run.path)
    if card is not None:
        body += card_section(card, table, image)
    else:
        body.append(f"<p>No validity card for this run's configuration (gate "
                    f"{html.escape(str(record.get('gate', 'not recorded')))}, status "
                    f"{html.escape(str(record.get('status', 'not recorded')))}); "
                    "<code>governed-broker validate EXPERIMENT.yaml</code> makes one.</p>")
    if not run.decisions:
        return body
    body.append("<h3>This run's decisions (first proposals)</h3>")
    depth, depth_stats = threat_by_depth(run.decisions, run.pmt_labels)
    cost, cost_stats = uptake_by_cost(run.decisions, run.actions)
    body += [f"<p>Threat by flood depth: Spearman rho {_num(depth_stats['rho'])} "
             f"(one-sided p {_num(depth_stats['p_value'])}, n {depth_stats['n']}).</p>",
             table(depth),
             f"<p>Insurance uptake by premium quartile: rho {_num(cost_stats['rho'])} "
             f"(one-sided p {_num(cost_stats['p_value'])}, n {cost_stats['n']}).</p>",
             table(cost), image(_run_figure(depth, cost, run.pmt_labels), "run validity")]
    laundering = laundering_rate(run.decisions)
    body.append(f"<p>Blocked proposals: {laundering['n_blocked']}; laundering rate "
                f"{_num(laundering['rate'])} ({laundering['changed_labels_only']} kept the "
                f"action and changed a label, {laundering['changed_action']} changed the "
                f"action, {laundering['held_on']} held on, {laundering['unreadable']} "
                "unreadable).</p>")
    try:
        coherence = reason_coherence_rate(run.decisions, run.actions, _patterns(run))
        body.append(f"<p>Reasons contradicting their action: {coherence['contradicting']} of "
                    f"{coherence['n']} (rate {_num(coherence['rate'])}).</p>")
    except ConfigError as exc:
        body.append(f"<p>Reason coherence not computed: {html.escape(str(exc))}</p>")
    body += ["<p>Proposed versus executed action:</p>", table(proposal_gap(run.agents))]
    return body


def _run_figure(depth: pd.DataFrame, cost: pd.DataFrame, labels: Sequence[str]) -> Figure:
    fig = new_figure((8.0, 2.8))
    left, right = fig.subplots(1, 2)
    left.bar(depth["depth_bin"].astype(str), depth["mean_threat_rank"].fillna(np.nan))
    left.set_yticks(range(len(labels)), labels)
    left.set_ylim(-0.3, len(labels) - 0.7)
    left.set_title("mean threat by flood depth", fontsize=9)
    right.bar(range(len(cost)), cost["share_chosen"])
    right.set_xticks(range(len(cost)), [f"${v:,.0f}" for v in cost["mean_cost_usd"]],
                     fontsize=7)
    right.set_ylim(0, 1.05)
    right.set_title("insurance share by premium", fontsize=9)
    fig.tight_layout()
    return fig


def _num(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"
