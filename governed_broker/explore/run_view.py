"""One run as the explorer shows it: every file of the run directory, read at one moment.

``load_view`` reads the tables (typed by the output contract), the broker's audit
(``decisions.jsonl``), the reflections, the institutions' table and audit (when the run has
institutions), the validity card and the benchmark fit. Memories
(``memory.sqlite``) and prompts (``llm_calls.sqlite``) are looked up when a household is opened,
so a large run opens quickly. A running run is read from its ``.partial`` directory up to its
last complete year (the year of the last row of ``model_yearly.csv``, which the runner writes
after the year's agent rows).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import OrderedDict
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from governed_broker.analysis.benchmarks import BenchmarkFit, fit_to_benchmarks, load_benchmarks
from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.loaders import (
    action_count_columns,
    coerce_columns,
    domain_actions,
    domain_labels,
    type_institutions_table,
)
from governed_broker.analysis.schema import (
    AGENT_COLUMNS,
    DEFAULT_ACTION_EFFECTS,
    NULLABLE_AGENT_COLUMNS,
    model_columns,
)
from governed_broker.config.base import ConfigError
from governed_broker.explore.audit import AuditRecords
from governed_broker.explore.files import (
    Target,
    fingerprint,
    read_csv_complete,
    read_json_object,
    read_jsonl_complete,
)
from governed_broker.explore.validity_card import ValidityCard, read_validity_card

AGENTS_FILE, MODEL_FILE = "agents_yearly.csv", "model_yearly.csv"
DECISIONS_FILE, REFLECTIONS_FILE = "decisions.jsonl", "reflections.jsonl"
MEMORY_FILE, CALLS_FILE = "memory.sqlite", "llm_calls.sqlite"
INSTITUTIONS_FILE, INSTITUTIONS_AUDIT = "institutions_yearly.csv", "institutions.jsonl"
#: Files whose change means the view must be read again (live runs grow them year by year).
WATCHED = (AGENTS_FILE, MODEL_FILE, DECISIONS_FILE, REFLECTIONS_FILE, INSTITUTIONS_FILE,
           INSTITUTIONS_AUDIT, "manifest.json", "validity_card.json")


@dataclass(frozen=True)
class Memory:
    """One memory of one household as the explorer shows it.

    Attributes:
        id: The memory id within the household (``m000012``).
        year: Year it was formed.
        kind: ``event``, ``decision``, ``observation``, ``insight`` or ``seed``.
        content: Its detailed text.
        importance: The importance the memory engine scores it with (W_emotion x W_source;
            insights 10).
        emotion: Emotion category.
        source: Source category.
        long_term: Whether it was consolidated into long-term memory.
    """

    id: str
    year: float
    kind: str
    content: str
    importance: float
    emotion: str
    source: str
    long_term: bool | None


@dataclass(frozen=True)
class LoggedCall:
    """One LLM call of ``llm_calls.sqlite``: the messages sent and the text received."""

    messages: list[dict[str, str]]
    response: str | None
    ok: bool
    error: str | None


@dataclass
class RunView:
    """The outputs of one run at one moment.

    Attributes:
        path: The directory read (``<out>`` or, while running, ``<out>.partial``).
        live: The run had not finished when it was read.
        name: Experiment name (manifest), else the directory name.
        manifest: ``manifest.json`` ({} while running).
        config: ``config.yaml`` as a dict (None while running).
        agents: Typed agent table (complete years only).
        model: Typed model table (complete years only).
        actions: Action id -> effect of the run's domain.
        labels: The appraisal scale, lowest first.
        decisions: (agent id, year) -> audit record of ``decisions.jsonl`` (read from the
            file when asked, ``audit.AuditRecords``).
        reflections: (agent id, year) -> record of ``reflections.jsonl`` (likewise).
        institutions: Typed ``institutions_yearly.csv`` (complete years; None: the run has no
            institutions).
        institution_decisions: Records of ``institutions.jsonl`` (complete years), in the
            order they were decided (government, then insurer, each year).
        card: The validity card (None when the run has none).
        card_problem: Why a present ``validity_card.json`` could not be read.
        fit: Fit to ``configs/benchmarks.yaml`` (None when it cannot be computed).
        fit_problem: Why the fit could not be computed.
        stamp: Sizes and times of the files read (compare with ``current_stamp``).
    """

    path: Path
    live: bool
    name: str
    manifest: dict[str, Any]
    config: dict[str, Any] | None
    agents: pd.DataFrame
    model: pd.DataFrame
    actions: dict[str, str]
    labels: tuple[str, ...]
    decisions: AuditRecords
    reflections: AuditRecords
    institutions: pd.DataFrame | None = None
    institution_decisions: list[dict[str, Any]] = field(default_factory=list)
    card: ValidityCard | None = None
    card_problem: str | None = None
    fit: BenchmarkFit | None = None
    fit_problem: str | None = None
    stamp: tuple = ()

    @property
    def last_year(self) -> int:
        """The last complete year (0 before the first year has finished)."""
        return int(self.model["year"].max()) if len(self.model) else 0

    @property
    def planned_years(self) -> int | None:
        """Years the run simulates (None while running: the manifest is not written yet)."""
        years = self.manifest.get("years") or (self.config or {}).get("years")
        return int(years) if years is not None else None

    def household_ids(self) -> list[int]:
        """Every household of the run, in id order."""
        return sorted(int(a) for a in self.agents["agent_id"].unique())

    def memories(self, agent_id: int, ids: list[str] | None = None) -> list[Memory]:
        """The memories of one household in ``memory.sqlite``.

        All, or those in ``ids`` in that order; [] when the run kept no memory store.
        """
        path = self.path / MEMORY_FILE
        if not path.is_file():
            return []
        with closing(_read_only(path, self.live)) as conn:
            rows = conn.execute(
                "SELECT id, timestamp, memory_type, content, importance, context, metadata "
                "FROM episodes WHERE user_id = ? ORDER BY rid", (str(agent_id),)).fetchall()
        found = {}
        for rid, year, kind, content, importance, context, metadata in rows:
            ctx, meta = _json_dict(context), _json_dict(metadata)
            mid = str(meta.get("memory_id") or rid.split(":", 1)[-1])
            found[mid] = Memory(
                id=mid, year=float(year), kind=str(kind), content=str(content),
                importance=float(meta.get("raw_importance", importance)),
                emotion=str(ctx.get("emotion", "")), source=str(ctx.get("source", "")),
                long_term=ctx.get("long_term"))
        if ids is None:
            return list(found.values())
        return [found[i] for i in ids if i in found]

    def call(self, seed: int, tag: str = "decision") -> LoggedCall | None:
        """The logged LLM call with this request seed.

        Each attempt of each decision has its own seed; the successful one when a call was repeated.
        None without a call log.
        """
        path = self.path / CALLS_FILE
        if not path.is_file():
            return None
        with closing(_read_only(path, self.live)) as conn:
            rows = conn.execute(
                "SELECT messages_json, response_text, ok, error FROM calls "
                "WHERE seed = ? AND tag = ? ORDER BY ok, id", (int(seed), tag)).fetchall()
        if not rows:
            return None
        messages, response, ok, error = rows[-1]
        return LoggedCall(json.loads(messages), response, bool(ok), error)

    def current_stamp(self) -> tuple:
        """The stamp the view would have if read now."""
        return fingerprint(self.path, WATCHED)


class SharedViews:
    """The ``RunView`` of each run directory, one for all the sessions of a server.

    Every browser session of the explorer shows the same files, so they share one view (read
    once, about 100 MB for a 2,000-household, 10-year LLM run) instead of each reading its own; a
    view is read again when a file it read has changed (``RunView.stamp``), and at most
    ``keep`` views are kept (the runs of a sweep opened last). Views are never changed once
    read, so sharing them between sessions (threads) is safe.

    Args:
        keep: How many run directories' views are kept.
    """

    def __init__(self, keep: int = 4) -> None:
        self.keep = keep
        self._views: OrderedDict[str, tuple[RunView | None, str | None, tuple]] = OrderedDict()
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, target: Path) -> tuple[RunView | None, str | None]:
        """The current view of the run ``target`` (its ``<out>``), or why it cannot be read."""
        key = str(target)
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:  # one session reads, the others wait for its view
            try:
                location, live = Target("run", Path(target)).run_location()
            except AnalysisInputError as exc:
                return None, str(exc)
            with self._lock:
                cached = self._views.get(key)
            now = (str(location), fingerprint(location, WATCHED))
            if cached is not None and cached[2] == now:
                with self._lock:
                    self._views.move_to_end(key)
                return cached[0], cached[1]
            try:
                view: RunView | None = load_view(location, live)
                result = (view, None, (str(location), view.stamp))
            except (AnalysisInputError, ConfigError, OSError) as exc:
                result = (None, str(exc), now)
            with self._lock:
                self._views[key] = result
                self._views.move_to_end(key)
                while len(self._views) > self.keep:
                    self._views.popitem(last=False)
            return result[0], result[1]


def _read_only(path: Path, live: bool) -> sqlite3.Connection:
    """Open a run's SQLite file without ever writing beside it.

    A finished run's file is opened as immutable (no lock or WAL side files are created), a running
    run's read-only (its writer keeps the side files).
    """
    mode = "ro" if live else "ro&immutable=1"
    return sqlite3.connect(f"{path.absolute().as_uri()}?mode={mode}", uri=True, timeout=5)


def _json_dict(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def load_view(path: Path, live: bool) -> RunView:
    """Read one run directory (finished, or the ``.partial`` directory of a running run).

    Raises:
        AnalysisInputError: a file breaks the output contract (names file, column, value).
    """
    stamp = fingerprint(path, WATCHED)
    manifest = read_json_object(path / "manifest.json") or {}
    config = _read_config(path / "config.yaml")
    model_raw = read_csv_complete(path / MODEL_FILE)
    actions = _actions(manifest, model_raw, path / "manifest.json")
    labels = domain_labels(manifest, path / "manifest.json")
    model = _typed_model(model_raw, list(actions), path / MODEL_FILE)
    last = int(model["year"].max()) if len(model) else 0
    agents = _typed_agents(read_csv_complete(path / AGENTS_FILE), path / AGENTS_FILE, last)
    agents.attrs["action_effects"] = actions
    agents.attrs["pmt_labels"] = labels
    view = RunView(
        path=path, live=live, name=str(manifest.get("name") or _name(path)),
        manifest=manifest, config=config, agents=agents, model=model, actions=actions,
        labels=labels, decisions=AuditRecords(path / DECISIONS_FILE, last),
        reflections=AuditRecords(path / REFLECTIONS_FILE, last), stamp=stamp)
    view.institutions, view.institution_decisions = _institutions(path, last)
    view.card, view.card_problem = read_validity_card(path / "validity_card.json")
    view.fit, view.fit_problem = _fit(view)
    return view


def _institutions(path: Path, last_year: int) -> tuple[pd.DataFrame | None, list[dict[str, Any]]]:
    """The institutions' yearly table and decision records up to ``last_year``.

    None and [] for a run without institutions.
    """
    raw = read_csv_complete(path / INSTITUTIONS_FILE)
    if raw is None:
        return None, []
    table = type_institutions_table(_complete_years(raw, last_year),
                                    str(path / INSTITUTIONS_FILE))
    records = []
    for record in read_jsonl_complete(path / INSTITUTIONS_AUDIT):
        try:
            year = int(record["year"])
        except (KeyError, TypeError, ValueError) as exc:
            raise AnalysisInputError(f"{path / INSTITUTIONS_AUDIT}: a record without an "
                                     f"integer year ({exc})") from exc
        if year <= last_year:
            records.append(record)
    return table, records


def _complete_years(raw: pd.DataFrame, last_year: int) -> pd.DataFrame:
    """The rows of a yearly table read as text up to ``last_year``."""
    return raw[pd.to_numeric(raw["year"], errors="coerce") <= last_year] if "year" in raw else raw


def _actions(manifest: dict[str, Any], model_raw: pd.DataFrame | None,
             source: Path) -> dict[str, str]:
    """The run's action id -> effect.

    From the manifest; while running (no manifest yet) the actions are those of the ``n_<action>``
    columns of ``model_yearly.csv``, with the effects of the repository's domain where it has them.
    """
    if "actions" in manifest or model_raw is None:
        return domain_actions(manifest, source)
    return {a: DEFAULT_ACTION_EFFECTS.get(a, "unknown") for a in action_count_columns(model_raw)}


def _name(path: Path) -> str:
    return path.name.removesuffix(".partial")


def _read_config(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    from governed_broker.config.yamlsafe import read_yaml

    data = read_yaml(path)
    return data if isinstance(data, dict) else None


def _typed_model(raw: pd.DataFrame | None, actions: list[str], source: Path) -> pd.DataFrame:
    schema = model_columns(actions)
    if raw is None:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in schema.items()})
    return coerce_columns(raw, schema, str(source), frozenset({"mean_depth_flooded_m"}))


def _typed_agents(raw: pd.DataFrame | None, source: Path, last_year: int) -> pd.DataFrame:
    if raw is None:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in AGENT_COLUMNS.items()})
    frame = coerce_columns(_complete_years(raw, last_year), AGENT_COLUMNS, str(source),
                           NULLABLE_AGENT_COLUMNS)
    if "marginalised" in frame.columns:  # optional population column (MG / NMG groups)
        frame["marginalised"] = frame["marginalised"].astype(str).str.lower().isin(
            ["true", "1"])
    return frame.sort_values(["year", "agent_id"], kind="stable").reset_index(drop=True)


def _fit(view: RunView) -> tuple[BenchmarkFit | None, str | None]:
    if view.agents.empty:
        return None, "no complete year yet"
    unknown = sorted(a for a, effect in view.actions.items() if effect == "unknown")
    if unknown:
        return None, (f"the effect of {', '.join(unknown)} is known once the run has written "
                      "manifest.json (when it finishes)")
    try:
        return fit_to_benchmarks(view.agents, load_benchmarks()), None
    except AnalysisInputError as exc:
        return None, str(exc)
