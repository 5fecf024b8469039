"""The explorer's page sections (Solara components).

Overview, neighbourhood, household timeline and decision list. Every text from the run (prompts,
replies, reasons) is shown as text, never as HTML.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import solara

from governed_broker.explore.charts import (
    COLOUR_BY,
    household_classes,
    money_option,
    neighbourhood_option,
    shares_option,
)
from governed_broker.explore.filters import (
    DecisionFilter,
    matching_decisions,
    rule_ids,
    statuses,
)
from governed_broker.explore.layout import Layout
from governed_broker.explore.run_view import RunView
from governed_broker.explore.timeline import PROMPT_MISSING, Attempt, YearEntry

#: Most decisions listed at once by the decision filter.
MAX_LISTED = 200
CHART_HEIGHT = "height: 300px;"
#: Buttons show their label as written (ids and actions are lower case).
NO_CAPS = {"text-transform": "none"}
MAP_HEIGHT_PX = 460


def _line(text: str, bold: bool = False, classes: list[str] | None = None,
          size: str | None = None) -> None:
    """One line (a block) of text; run text is always text, never HTML."""
    style = ("font-weight: bold;" if bold else "") + (f"font-size: {size};" if size else "")
    solara.v.Html(tag="div", children=[text], class_=" ".join(classes or []),
                  style_=style + "margin: 2px 0;")


def _series_chart(option: dict[str, Any]) -> None:
    solara.FigureEcharts(option, responsive=True, attributes={"style": CHART_HEIGHT})


def _money(value: Any) -> str:
    return "" if value is None or pd.isna(value) else f"${float(value):,.0f}"


def _yes(value: Any) -> str:
    return "yes" if bool(value) and not pd.isna(value) else "no"


@solara.component
def Overview(view: RunView) -> None:
    """First page: what the run is, its validity card and benchmark fit, and its series."""
    with solara.Column():
        _facts(view)
        ValidityCardSection(view)
        BenchmarkSection(view)
        with solara.Columns([1, 1]):
            _series_chart(shares_option(view, None))
            _series_chart(money_option(view, None))


def _facts(view: RunView) -> None:
    planned = view.planned_years
    years = f"{view.last_year} of {planned}" if planned else f"{view.last_year} so far"
    n = len(view.household_ids())
    maker = view.manifest.get("decision_maker") or (
        view.agents["decision_maker"].iloc[0] if len(view.agents) else "unknown")
    state = "running (refreshes as years complete)" if view.live else "finished"
    _line(f"{view.name}: {n} households, years {years}, {state}; decisions by {maker}; "
                f"read from {view.path}")


@solara.component
def ValidityCardSection(view: RunView) -> None:
    """The run's ``validity_card.json``, or why it cannot be shown."""
    _line("Validity card", bold=True, size="1.1em")
    if view.card_problem:
        solara.Error(f"validity_card.json could not be read: {view.card_problem}")
        return
    if view.card is None:
        _line("This run has no validity_card.json.")
        return
    if view.card.verdict:
        _line(f"verdict: {view.card.verdict}")
    rows = [{"test": t.name, "statistic": t.statistic, "threshold": t.threshold,
             "passed": t.outcome.replace("_", " ") if t.outcome else
             {True: "passed", False: "FAILED", None: "not computable"}[t.passed],
             "n": t.n, "note": t.note} for t in view.card.tests]
    solara.DataFrame(pd.DataFrame(rows), items_per_page=20)
    for key, value in view.card.other.items():
        _line(f"{key}: {value}")


@solara.component
def BenchmarkSection(view: RunView) -> None:
    """Fit to ``configs/benchmarks.yaml`` (the report's validation table)."""
    _line("Benchmark fit", bold=True, size="1.1em")
    fit = view.fit
    if fit is None:
        _line(f"not computed: {view.fit_problem}")
        return
    score = "no computable target" if fit.score is None else (
        f"score {fit.score:.3f} (pass mark {fit.pass_mark:.2f}: "
        f"{'passed' if fit.passed else 'not passed'})")
    partial = " - measured on the years completed so far" if view.live else ""
    _line(f"{score}; benchmarks {fit.benchmarks_version}{partial}")
    table = fit.table[["id", "name", "value", "low", "high", "status", "n"]].copy()
    table["value"] = table["value"].round(3)
    solara.DataFrame(table, items_per_page=20)


@solara.component
def Neighbourhood(view: RunView, layout: Layout, year: int, colour_by: str,
                  household: int | None, on_year: Callable[[int], None],
                  on_colour: Callable[[str], None],
                  on_household: Callable[[int], None]) -> None:
    """The households on their network or zone layout, coloured, with a year slider."""
    classes = household_classes(view, year, colour_by)
    option = neighbourhood_option(layout, classes, colour_by, household)

    def clicked(event: dict[str, Any]) -> None:
        data = event.get("data") or {}
        if isinstance(data, dict) and data.get("agent_id") is not None:
            on_household(int(data["agent_id"]))

    with solara.Column():
        with solara.Row():
            solara.SliderInt("year", value=year, min=1, max=max(view.last_year, 1),
                             on_value=on_year, thumb_label="always")
            solara.ToggleButtonsSingle(value=colour_by, values=list(COLOUR_BY),
                                       on_value=on_colour)
        _line(f"Year {year}: {layout.note}; click a household to open its timeline.")
        solara.FigureEcharts(option, on_click=clicked, responsive=True,
                             attributes={"style": f"height: {MAP_HEIGHT_PX}px; width: 100%;",
                                         "class": "gb-neighbourhood"})
        with solara.Columns([1, 1]):
            _series_chart(shares_option(view, year))
            _series_chart(money_option(view, year))


@solara.component
def HouseholdPicker(view: RunView, household: int | None,
                    on_household: Callable[[int], None]) -> None:
    """Open a household by id (for runs too large to find one on the map)."""
    ids = view.household_ids()
    if not ids:
        return
    solara.InputInt("household id", value=household or ids[0], on_value=on_household,
                    continuous_update=False)
    if household is not None and household not in set(ids):
        solara.Error(f"household {household} is not in this run (ids {ids[0]}-{ids[-1]})")


@solara.component
def Timeline(view: RunView, entries: list[YearEntry], household: int, year: int,
             on_year: Callable[[int], None]) -> None:
    """A household's years: a summary table, then every step of the chosen year."""
    first = entries[0].row
    _line(f"Household {household}: {first['tenure']} in the {first['flood_zone']} zone",
          bold=True, size="1.2em", classes=["gb-household-title"])
    solara.DataFrame(_summary(entries), items_per_page=25)
    with solara.Row(classes=["gb-years"]):
        for entry in entries:
            solara.Button(f"year {entry.year}", on_click=lambda y=entry.year: on_year(y),
                          color="primary" if entry.year == year else None, small=True,
                          style=NO_CAPS)
    chosen = next((e for e in entries if e.year == year), entries[-1])
    YearDetail(view, chosen)


def _summary(entries: list[YearEntry]) -> pd.DataFrame:
    rows = []
    for e in entries:
        r = e.row
        rows.append({
            "year": e.year, "flooded": _yes(r["flooded"]),
            "depth m": round(float(r["depth_m"]), 2), "damage": _money(r["damage_usd"]),
            "payout": _money(r["payout_usd"]), "savings before": _money(r["savings_before_usd"]),
            "savings after": _money(r["savings_after_usd"]),
            "threat/coping": f"{r['threat_label'] or ''}/{r['coping_label'] or ''}",
            "proposed": r["proposed_action"] or "", "executed": r["executed_action"],
            "status": r["status"],
            "rules fired": ", ".join(sorted({f["id"] for f in e.rules_fired})),
        })
    return pd.DataFrame(rows)


@solara.component
def YearDetail(view: RunView, entry: YearEntry) -> None:
    """Everything about one year of one household."""
    r = entry.row
    with solara.Card(f"Year {entry.year}", classes=["gb-year-detail"]):
        flood = f"a flood {float(r['depth_m']):.2f} m deep" if bool(r["flooded"]) else "no flood"
        _line(
            f"Lived through: {flood}; damage {_money(r['damage_usd'])}, "
            f"payout {_money(r['payout_usd'])}, out of pocket {_money(r['out_of_pocket_usd'])}; "
            f"savings {_money(r['savings_before_usd'])} -> {_money(r['savings_after_usd'])}; "
            f"insured before: {_yes(r['insured_before'])}, elevated before: "
            f"{_yes(r['elevated_before'])}.")
        _line(
            f"Proposed {r['proposed_action'] or '-'}, executed {r['executed_action']} "
            f"(status {r['status']}, {r['retries']} re-asks, feasible {_yes(r['feasible'])}).",
            classes=["gb-outcome"])
        if entry.decision is None:
            _line("No broker audit for this decision (rule-based baseline decision).")
        else:
            _decision(view, entry)
        _reflection(entry)


def _decision(view: RunView, entry: YearEntry) -> None:
    d = entry.decision or {}
    if d.get("fallback") or d.get("backstop"):
        solara.Warning(f"default action executed: fallback={d.get('fallback')}, "
                       f"backstop={d.get('backstop')}")
    _line("Memories recalled for this decision", bold=True)
    if not entry.memories:
        _line("none shown in the prompt")
    for m in entry.memories:
        fidelity = m.fidelity or "fidelity not recorded by this run"
        if m.memory is None:
            _line(f"- {m.id}: not in memory.sqlite ({fidelity})")
            continue
        mem = m.memory
        _line(f"- {m.id} (year {mem.year:g}, {mem.kind}, importance {mem.importance:.2f}, "
                    f"{fidelity}; {mem.emotion}/{mem.source}): {mem.content}")
    for attempt in entry.attempts:
        AttemptDetail(attempt)


@solara.component
def AttemptDetail(attempt: Attempt) -> None:
    """One ask: the messages sent, the reply, the rules evaluated and what fired."""
    title = f"Attempt {attempt.number} ({attempt.kind})" + (" - cached reply" if attempt.cached
                                                             else "")
    with solara.Card(title, classes=["gb-attempt"]):
        if attempt.messages is None:
            _line(f"Prompt: {PROMPT_MISSING}")
        elif attempt.number == 0:
            for message in attempt.messages:
                _line(f"{message.get('role')} message (from {attempt.messages_source}):",
                      bold=True)
                solara.Preformatted(str(message.get("content", "")),
                                    class_="gb-prompt", style_="white-space: pre-wrap;")
        elif attempt.feedback:
            _line("Feedback sent with this re-ask:", bold=True)
            solara.Preformatted(attempt.feedback, class_="gb-feedback",
                                style_="white-space: pre-wrap;")
        _line("Raw reply:", bold=True)
        solara.Preformatted(attempt.raw, class_="gb-reply", style_="white-space: pre-wrap;")
        if attempt.parse_error:
            solara.Error(f"unreadable reply: {attempt.parse_error}")
        if attempt.repairs:
            _line(f"repairs: {attempt.repairs}")
        _rules(attempt)


def _rules(attempt: Attempt) -> None:
    if not attempt.rules:
        _line("No rules evaluated on this attempt.")
        return
    rows = [{"rule": r.get("id"), "category": r.get("category"), "severity": r.get("severity"),
             "fired": "FIRED" if r.get("fired") else "not fired",
             "message": r.get("message") or ""} for r in attempt.rules]
    fired = ", ".join(str(r.get("id")) for r in attempt.fired) or "none"
    _line(f"Rules fired: {fired}", classes=["gb-rules-fired"])
    solara.DataFrame(pd.DataFrame(rows), items_per_page=20)


def _reflection(entry: YearEntry) -> None:
    record = entry.reflection
    if record is None:
        return
    _line("Reflection at the end of the year", bold=True)
    if record.get("status") != "ok":
        _line(f"status {record.get('status')}: {record.get('reason', '')}")
    for insight in record.get("insights") or []:
        _line(f"- {insight}")


@solara.component
def DecisionList(view: RunView, on_open: Callable[[int, int], None],
                 initial: dict[str, str]) -> None:
    """Decisions matching the filters; each opens its household at its year.

    First set from ``initial``: the page's ``status`` and ``rule`` parameters.
    """
    status, set_status = solara.use_state(initial.get("status"))
    rule, set_rule = solara.use_state(initial.get("rule"))
    laundering, set_laundering = solara.use_state(False)
    zone, set_zone = solara.use_state(None)
    tenure, set_tenure = solara.use_state(None)
    mg, set_mg = solara.use_state("any")
    agents = view.agents
    with solara.Row():
        solara.Select("status", values=[None, *statuses(view)], value=status,
                      on_value=set_status)
        solara.Select("rule fired", values=[None, *rule_ids(view)],
                      value=rule, on_value=set_rule)
        solara.Select("zone", values=[None, *sorted(agents["flood_zone"].dropna().unique())],
                      value=zone, on_value=set_zone)
        solara.Select("tenure", values=[None, *sorted(agents["tenure"].dropna().unique())],
                      value=tenure, on_value=set_tenure)
        if "marginalised" in agents.columns:
            solara.Select("MG group", values=["any", "MG", "NMG"], value=mg, on_value=set_mg)
        solara.Checkbox(label="laundering cases only", value=laundering,
                        on_value=set_laundering)
    flt = DecisionFilter(status=status, rule=rule, laundering=laundering, zone=zone,
                         tenure=tenure, marginalised={"any": None, "MG": True, "NMG": False}[mg])
    found = matching_decisions(view, flt)
    _line(f"{len(found)} decisions match" + (
        f"; the first {MAX_LISTED} are listed" if len(found) > MAX_LISTED else ""),
        classes=["gb-match-count"])
    for row in found.head(MAX_LISTED).itertuples(index=False):
        label = (f"year {row.year} · household {row.agent_id} · {row.tenure}/{row.flood_zone}"
                 f" · {row.status} · {row.proposed_action or '-'} -> {row.executed_action}")
        if row.rules_fired:
            label += f" · rules: {row.rules_fired}"
        if row.laundering:
            label += f" · {row.laundering}"
        solara.Button(label, text=True, classes=["gb-decision"], style=NO_CAPS,
                      on_click=lambda a=row.agent_id, y=row.year: on_open(int(a), int(y)))


#: Columns of ``institutions_yearly.csv`` the Institutions tab shows, in order.
INSTITUTION_TABLE_COLUMNS = (
    "year", "government_status", "subsidy_share", "subsidy_budget_usd", "buyout_budget_usd",
    "funds_available_usd", "grants_paid_usd", "buyouts_paid_usd", "balance_end_usd",
    "insurer_status", "loading", "crs_discount", "premiums_written_usd", "claims_usd",
    "loss_ratio")


@solara.component
def InstitutionsTab(view: RunView) -> None:
    """The government's and the insurer's levers and money by year, then each decision.

    Who made it, its status, the levers before, proposed and put in force, the reason, and the rules
    that fired on an LLM maker's replies.
    """
    _line("Levers and money by year (institutions_yearly.csv)", bold=True, size="1.1em")
    solara.DataFrame(view.institutions[list(INSTITUTION_TABLE_COLUMNS)], items_per_page=20)
    _line(f"Decisions (institutions.jsonl): {len(view.institution_decisions)}", bold=True,
          size="1.1em")
    for record in view.institution_decisions:
        _institution_decision(record)


def _levers(levers: dict[str, Any] | None) -> str:
    if not levers:
        return "-"
    return ", ".join(f"{k} {_number(v)}" for k, v in levers.items())


def _number(value: Any) -> str:
    """Shares and factors as written, money in whole dollars with thousands separators."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return str(value)
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:g}"


def _institution_decision(record: dict[str, Any]) -> None:
    title = (f"year {record.get('year')} · {record.get('institution')} · "
             f"{record.get('decision_maker')} · {record.get('status')}")
    if record.get("retries"):
        title += f" · {record['retries']} re-ask(s)"
    with solara.Column(classes=["gb-institution-decision"], gap="0px"):
        _line(title, bold=True)
        _line(f"before: {_levers(record.get('levers_before'))}")
        if record.get("proposed") != record.get("levers"):
            _line(f"proposed: {_levers(record.get('proposed'))}")
        _line(f"in force: {_levers(record.get('levers'))}")
        if record.get("backstop"):
            _line(f"refused by the world's limits: {', '.join(record['backstop'])}")
        fired = record.get("rules_fired") or []
        if fired:
            _line("rules fired: " + ", ".join(
                f"{r.get('id')} ({r.get('severity')}, attempt {r.get('attempt')})"
                for r in fired))
        if record.get("assessment"):
            _line(f"assessment: {record['assessment']}")
        _line(f"reason: {record.get('reason') or '-'}")
