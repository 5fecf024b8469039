"""The explorer's Solara app (``Page``); served by ``governed_broker.explore.server``.

The directory to show comes from the environment variable ``GOVERNED_BROKER_EXPLORE`` (set by
the server). A running run is read again whenever one of its files grows (checked every
``REFRESH_S`` seconds), and followed when it finishes and moves from ``<out>.partial`` to
``<out>``. The page's address can open a view directly: ``?tab=decisions&status=rejected``,
``?household=3&year=2``, ``?tab=households&colour=flooded``, ``?run=<run_id>`` (sweeps); the
HTML report links to these.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from urllib.parse import parse_qs

import solara
import solara.lab

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.explore.charts import COLOUR_BY
from governed_broker.explore.files import Target, fingerprint, resolve_target
from governed_broker.explore.layout import household_layout
from governed_broker.explore.run_view import WATCHED, RunView, SharedViews
from governed_broker.explore.server import ENV_TARGET
from governed_broker.explore.sweep_index import sweep_runs
from governed_broker.explore.timeline import household_timeline
from governed_broker.explore.views import (
    DecisionList,
    HouseholdPicker,
    InstitutionsTab,
    Neighbourhood,
    Overview,
    Timeline,
)

REFRESH_S = 2.0
TABS = ("overview", "households", "decisions", "institutions")


def _target() -> Target:
    path = os.environ.get(ENV_TARGET)
    if not path:
        raise AnalysisInputError(f"{ENV_TARGET} is not set; start the explorer with "
                                 "`governed-broker explore RUN_OR_SWEEP_DIR`")
    return resolve_target(path)


#: The views of this server process, shared by all its sessions (``SharedViews``).
VIEWS = SharedViews()


def _load(path: Path) -> tuple[RunView | None, str | None]:
    return VIEWS.get(path)


def _query() -> dict[str, str]:
    search = solara.use_router().search or ""
    return {k: v[-1] for k, v in parse_qs(search.lstrip("?")).items()}


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


@solara.component
def Page() -> None:
    """The whole explorer: a sweep's run picker, then the run's tabs."""
    target = solara.use_memo(_target, [])
    query = _query()
    solara.Title("governed_broker explorer")
    if target.kind == "sweep":
        SweepPage(target.path, query)
    else:
        RunPage(target.path, query)


@solara.component
def SweepPage(sweep_dir: Path, query: dict[str, str]) -> None:
    """Pick a run of a sweep from its index."""
    tick = _use_refresh(lambda: fingerprint(sweep_dir / "_sweep", ("plan.json", "state"))
                        + fingerprint(sweep_dir, ("sweep_runs.csv",))
                        + tuple(sorted(p.name for p in sweep_dir.iterdir())), str(sweep_dir))
    runs = solara.use_memo(lambda: sweep_runs(sweep_dir), [tick])
    chosen, set_chosen = solara.use_state(query.get("run"))
    solara.Text(f"Sweep {sweep_dir}: {len(runs)} runs "
                + ", ".join(f"{n} {s}" for s, n in runs["status"].value_counts().items()))
    openable = runs[runs["path"] != ""]
    if openable.empty:
        solara.Warning("No run directory of this sweep is here (only its combined tables); "
                       "re-run the sweep or copy its run directories to explore a run.")
        solara.DataFrame(runs.drop(columns=["path"]), items_per_page=20)
        return
    solara.Select("run", values=list(openable["run_id"]), value=chosen, on_value=set_chosen)
    solara.DataFrame(runs.drop(columns=["path"]), items_per_page=10)
    if chosen is not None and chosen in set(openable["run_id"]):
        RunPage(sweep_dir / chosen, query)


def _use_refresh(stamp_of, key: str) -> int:
    """A counter that grows whenever ``stamp_of()`` changes.

    Polled in a thread, started again when ``key``, the directory watched, changes.
    """
    tick, set_tick = solara.use_state(0)

    def watch():
        stop = threading.Event()
        last = [stamp_of()]

        def loop():
            while not stop.wait(REFRESH_S):
                try:
                    now = stamp_of()
                except OSError:
                    continue
                if now != last[0]:
                    last[0] = now
                    set_tick(lambda t: t + 1)

        threading.Thread(target=loop, daemon=True, name="explorer-refresh").start()
        return stop.set

    solara.use_effect(watch, [key])
    return tick


def _run_stamp(path: Path) -> tuple:
    try:
        location, _ = Target("run", path).run_location()
    except AnalysisInputError:
        return ("gone",)
    return fingerprint(location, WATCHED)


@solara.component
def RunPage(path: Path, query: dict[str, str]) -> None:
    """One run: overview, households (map and timeline), decisions and, when the run has them.

    The institutions' decisions.
    """
    tick = _use_refresh(lambda: _run_stamp(path), str(path))
    view, problem = solara.use_memo(lambda: _load(path), [str(path), tick])
    tab, set_tab = solara.use_state(TABS.index(query["tab"]) if query.get("tab") in TABS else
                                    1 if "household" in query else 0)
    year, set_year = solara.use_state(_int(query.get("year")))
    household, set_household = solara.use_state(_int(query.get("household")))
    colour_by, set_colour_by = solara.use_state(
        query["colour"] if query.get("colour") in COLOUR_BY else "state")
    if view is None:
        solara.Error(f"cannot show {path}: {problem}")
        return
    if view.last_year == 0:
        solara.Info(f"{view.name}: running, no year completed yet; this page refreshes by "
                    "itself.")
        return
    shown_year = min(year or view.last_year, view.last_year)

    def open_decision(agent: int, at: int) -> None:
        set_household(agent)
        set_year(at)
        set_tab(1)

    if view.institutions is None and tab == TABS.index("institutions"):
        tab = 0  # asked for in the address of a run without institutions
    with solara.lab.Tabs(value=tab, on_value=set_tab):
        with solara.lab.Tab("Overview"):
            Overview(view)
        with solara.lab.Tab("Households"):
            HouseholdsTab(view, shown_year, colour_by, household, set_year, set_colour_by,
                          set_household)
        with solara.lab.Tab("Decisions"):
            DecisionList(view, open_decision, query)
        if view.institutions is not None:  # the last tab: the others keep their index
            with solara.lab.Tab("Institutions"):
                InstitutionsTab(view)


@solara.component
def HouseholdsTab(view: RunView, year: int, colour_by: str, household: int | None,
                  set_year, set_colour_by, set_household) -> None:
    """The neighbourhood and, once one is clicked, a household's timeline."""
    layout = solara.use_memo(lambda: household_layout(view), [view.path, view.stamp])
    entries = solara.use_memo(
        lambda: household_timeline(view, household) if household in set(
            view.household_ids()) else [], [view.stamp, household])
    with solara.Columns([5, 6]):
        with solara.Column():
            Neighbourhood(view, layout, year, colour_by, household, set_year, set_colour_by,
                          set_household)
        with solara.Column(classes=["gb-timeline"]):
            HouseholdPicker(view, household, set_household)
            if household is None:
                solara.Text("Click a household on the map (or type its id) to see its years.")
            elif entries:
                Timeline(view, entries, household, year, set_year)
