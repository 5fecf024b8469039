"""Loaders: a run directory or a sweep directory into tidy pandas tables.

A *run directory* holds the files of the output contract (docs/ARCHITECTURE.md): at least
``agents_yearly.csv`` and ``model_yearly.csv``; optionally ``manifest.json``, ``config.yaml`` and
``decisions.jsonl``. A *sweep directory* holds ``sweep_runs.csv`` (one row per run), the combined
``sweep_agents_yearly.parquet`` and ``sweep_model_yearly.csv``, and one run directory per run.

Columns are converted to the dtypes in :mod:`governed_broker.analysis.schema`; a missing column,
an unparseable value or an empty required cell raises :class:`AnalysisInputError` naming the
file, the column and the value.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.schema import (
    AGENT_COLUMNS,
    BOOL,
    DEFAULT_ACTION_EFFECTS,
    DEFAULT_PMT_LABELS,
    INSTITUTION_COLUMNS,
    MODEL_COLUMNS,
    NULLABLE_AGENT_COLUMNS,
    NULLABLE_INSTITUTION_COLUMNS,
    STR,
    model_columns,
)
from governed_broker.config.base import ConfigError
from governed_broker.config.yamlsafe import read_yaml

AGENTS_FILE = "agents_yearly.csv"
MODEL_FILE = "model_yearly.csv"
DECISIONS_FILE = "decisions.jsonl"
MANIFEST_FILE = "manifest.json"
CONFIG_FILE = "config.yaml"
SWEEP_INDEX_FILE = "sweep_runs.csv"
SWEEP_AGENTS_FILE = "sweep_agents_yearly.parquet"
SWEEP_MODEL_FILE = "sweep_model_yearly.csv"
INSTITUTIONS_FILE = "institutions_yearly.csv"

_TRUE = {"true", "1"}
_FALSE = {"false", "0"}


@dataclass
class RunData:
    """The outputs of one run, as tables.

    Attributes:
        path: The run directory.
        run_id: Directory name (used as the run label in plots and sweeps).
        agents: ``agents_yearly.csv``; one row per active household and year.
        model: ``model_yearly.csv``; one row per year.
        manifest: ``manifest.json`` as a dict (empty when the file is absent).
        config: The resolved ``config.yaml`` as a dict (None when absent).
        decisions: ``decisions.jsonl`` records (None when the run has no broker audit).
        actions: The run's domain, action id -> effect, in the world's order (from the
            manifest; ``schema.DEFAULT_ACTION_EFFECTS`` for runs whose manifest predates it).
        pmt_labels: The run's appraisal scale, lowest first (from the manifest;
            ``schema.DEFAULT_PMT_LABELS`` for runs whose manifest predates it).
        institutions: ``institutions_yearly.csv``, one row per year (None: the run had no
            institutions).
    """

    path: Path
    run_id: str
    agents: pd.DataFrame
    model: pd.DataFrame
    manifest: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] | None = None
    decisions: list[dict[str, Any]] | None = None
    actions: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_ACTION_EFFECTS))
    pmt_labels: tuple[str, ...] = DEFAULT_PMT_LABELS
    institutions: pd.DataFrame | None = None


@dataclass
class SweepData:
    """The outputs of one sweep.

    Attributes:
        path: The sweep directory.
        runs: ``sweep_runs.csv``: one row per run (``run_id``, ``status``, ``seed`` and one
            column per swept parameter).
        agents: Combined agent table with a leading ``run_id`` column.
        model: Combined model table with a leading ``run_id`` column.
        parameters: Names of the swept parameter columns of ``runs``.
    """

    path: Path
    runs: pd.DataFrame
    agents: pd.DataFrame
    model: pd.DataFrame
    parameters: list[str]

    def run_dir(self, run_id: str) -> Path:
        """Return the run directory of ``run_id`` inside the sweep directory."""
        path = self.path / str(run_id)
        if not path.is_dir():
            raise AnalysisInputError(f"{self.path}: no run directory for run_id {run_id!r}")
        return path


def _parse_bool(series: pd.Series, source: str, column: str) -> pd.Series:
    if pd.api.types.is_bool_dtype(series):
        return series.astype(BOOL)
    text = series.astype("string").str.strip().str.lower()
    bad = text.notna() & ~text.isin(_TRUE | _FALSE)
    if bad.any():
        value = series[bad].iloc[0]
        raise AnalysisInputError(
            f"{source}: column {column!r} must be True/False, got {value!r} "
            f"(row {int(bad.idxmax()) + 2} of the file)"
        )
    out = pd.Series(pd.NA, index=series.index, dtype=BOOL)
    out[text.isin(_TRUE).fillna(False).astype(bool)] = True
    out[text.isin(_FALSE).fillna(False).astype(bool)] = False
    return out


def _parse_numeric(series: pd.Series, dtype: str, source: str, column: str) -> pd.Series:
    numeric = pd.to_numeric(series, errors="coerce")
    bad = numeric.isna() & series.notna() & (series.astype("string").str.strip() != "")
    if bad.any():
        raise AnalysisInputError(
            f"{source}: column {column!r} must be numeric, got {series[bad].iloc[0]!r}"
        )
    if dtype == "Int64":
        fractional = numeric.notna() & (numeric % 1 != 0)
        if fractional.any():
            raise AnalysisInputError(
                f"{source}: column {column!r} must be an integer, got {numeric[fractional].iloc[0]}"
            )
    return numeric.astype(dtype)


def coerce_columns(
    frame: pd.DataFrame,
    schema: dict[str, str],
    source: str,
    nullable: frozenset[str] = frozenset(),
) -> pd.DataFrame:
    """Check that ``frame`` has every column of ``schema`` and convert them to its dtypes.

    Args:
        frame: Table as read from disk (strings or already typed).
        schema: Column name -> dtype (``boolean``, ``Int64``, ``float64`` or ``str``).
        source: File name used in error messages.
        nullable: Columns allowed to contain empty cells.

    Returns:
        A copy of ``frame`` with converted columns; extra columns are kept unchanged.

    Raises:
        AnalysisInputError: on a missing column, an unparseable value or an empty required cell.
    """
    missing = [c for c in schema if c not in frame.columns]
    if missing:
        raise AnalysisInputError(
            f"{source}: missing column(s) {', '.join(missing)}; the file does not follow the "
            "output contract (docs/ARCHITECTURE.md) - re-run the experiment with this version"
        )
    out = frame.copy()
    for column, dtype in schema.items():
        series = out[column]
        if dtype == BOOL:
            series = _parse_bool(series, source, column)
        elif dtype == STR:
            series = series.astype("string").str.strip().replace("", pd.NA).astype(STR)
        else:
            series = _parse_numeric(series, dtype, source, column)
        if column not in nullable and series.isna().any():
            row = int(series.isna().to_numpy().argmax()) + 2
            raise AnalysisInputError(f"{source}: column {column!r} is empty in row {row}")
        out[column] = series
    return out


def _read_csv(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise AnalysisInputError(
            f"{path}: file not found; pass a run directory written by `governed-broker run`"
        )
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise AnalysisInputError(f"{path}: not a readable CSV file ({exc})") from exc


def read_agents_table(path: Path | str) -> pd.DataFrame:
    """Read an ``agents_yearly.csv`` into the typed agent table (see ``schema.AGENT_COLUMNS``)."""
    path = Path(path)
    frame = coerce_columns(_read_csv(path), AGENT_COLUMNS, str(path), NULLABLE_AGENT_COLUMNS)
    return frame.sort_values(["year", "agent_id"], kind="stable").reset_index(drop=True)


def action_count_columns(frame: pd.DataFrame) -> list[str]:
    """The actions whose ``n_<action>`` counts a model table carries (its domain's actions)."""
    return [c[2:] for c in frame.columns if c.startswith("n_") and c not in MODEL_COLUMNS]


def read_model_table(path: Path | str, actions: list[str] | None = None) -> pd.DataFrame:
    """Read a ``model_yearly.csv`` into the typed model table (see ``schema.model_columns``).

    Args:
        path: The file.
        actions: The run's action ids (None: the ``n_<action>`` columns the file has).
    """
    path = Path(path)
    frame = _read_csv(path)
    schema = model_columns(action_count_columns(frame) if actions is None else actions)
    frame = coerce_columns(frame, schema, str(path), frozenset({"mean_depth_flooded_m"}))
    return frame.sort_values("year", kind="stable").reset_index(drop=True)


def read_institutions_table(path: Path | str) -> pd.DataFrame:
    """Read an ``institutions_yearly.csv`` into its typed table (``schema.INSTITUTION_COLUMNS``)."""
    path = Path(path)
    return type_institutions_table(_read_csv(path), str(path))


def type_institutions_table(frame: pd.DataFrame, source: str) -> pd.DataFrame:
    """An ``institutions_yearly.csv`` read as text, typed by the column table and sorted by year.

    ``source`` names the file in errors.
    """
    frame = coerce_columns(frame, INSTITUTION_COLUMNS, source, NULLABLE_INSTITUTION_COLUMNS)
    return frame.sort_values("year", kind="stable").reset_index(drop=True)


def read_decisions(path: Path | str) -> list[dict[str, Any]]:
    """Read ``decisions.jsonl``: one JSON object per line (blank lines are skipped)."""
    path = Path(path)
    with path.open(encoding="utf-8") as handle:
        return json_objects(handle, path)


def json_objects(lines: Iterable[str], path: Path) -> list[dict[str, Any]]:
    """The JSON object of each line of a ``.jsonl`` file read from ``path``.

    Blank lines are skipped.

    Raises:
        AnalysisInputError: A line is not a JSON object (names the file and line).
    """
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise AnalysisInputError(f"{path}: line {number} is not JSON ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise AnalysisInputError(f"{path}: line {number} is not a JSON object")
        records.append(record)
    return records


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise AnalysisInputError(f"{path}: not valid JSON ({exc.msg})") from exc
    if not isinstance(data, dict):
        raise AnalysisInputError(f"{path}: expected a JSON object")
    return data


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = read_yaml(path, "run's config.yaml")
    except ConfigError as exc:
        raise AnalysisInputError(str(exc)) from exc
    if not isinstance(data, dict):
        raise AnalysisInputError(f"{path}: expected a YAML mapping")
    return data


def is_sweep_dir(path: Path | str) -> bool:
    """Whether ``path`` is a sweep directory (it holds ``sweep_runs.csv``)."""
    return (Path(path) / SWEEP_INDEX_FILE).is_file()


def load_run(path: Path | str) -> RunData:
    """Load one run directory.

    Args:
        path: A directory written by ``governed-broker run`` / ``run_experiment``.

    Returns:
        RunData with typed ``agents`` and ``model`` tables, and the manifest, config and broker
        decisions when those files exist.

    Raises:
        AnalysisInputError: when ``path`` is not a directory or a contract file is malformed.
    """
    path = Path(path)
    if not path.is_dir():
        raise AnalysisInputError(f"{path}: not a directory; pass a run directory")
    decisions_path = path / DECISIONS_FILE
    manifest_path = path / MANIFEST_FILE
    config_path = path / CONFIG_FILE
    manifest = _read_json(manifest_path) if manifest_path.is_file() else {}
    actions = domain_actions(manifest, manifest_path)
    labels = domain_labels(manifest, manifest_path)
    agents = read_agents_table(path / AGENTS_FILE)
    agents.attrs["action_effects"] = actions
    agents.attrs["pmt_labels"] = labels
    institutions = None
    if "institutions" in manifest or (path / INSTITUTIONS_FILE).is_file():
        institutions = read_institutions_table(path / INSTITUTIONS_FILE)
    return RunData(
        path=path,
        run_id=path.name,
        agents=agents,
        model=read_model_table(path / MODEL_FILE, list(actions)),
        manifest=manifest,
        config=_read_yaml(config_path) if config_path.is_file() else None,
        decisions=read_decisions(decisions_path) if decisions_path.is_file() else None,
        actions=actions,
        pmt_labels=labels,
        institutions=institutions,
    )


def domain_actions(manifest: dict[str, Any], source: Path) -> dict[str, str]:
    """A run's action id -> effect map from its manifest.

    Manifests record ``actions`` since the domain could be renamed; a run written before (or a
    directory without a manifest) used the repository's four actions, which is what
    ``schema.DEFAULT_ACTION_EFFECTS`` holds.
    """
    actions = manifest.get("actions")
    if actions is None:
        return dict(DEFAULT_ACTION_EFFECTS)
    if not isinstance(actions, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in actions.items()):
        raise AnalysisInputError(f"{source}: 'actions' must map action ids to effects")
    return dict(actions)


def domain_labels(manifest: dict[str, Any], source: Path) -> tuple[str, ...]:
    """A run's appraisal scale (lowest first) from its manifest.

    Manifests record ``pmt_labels`` since the scale could be changed in ``agent_types.yaml``;
    a run written before used the five-level scale, ``schema.DEFAULT_PMT_LABELS``.
    """
    labels = manifest.get("pmt_labels")
    if labels is None:
        return DEFAULT_PMT_LABELS
    if not isinstance(labels, list) or len(labels) < 2 or not all(
            isinstance(x, str) for x in labels):
        raise AnalysisInputError(f"{source}: 'pmt_labels' must be a list of label strings")
    return tuple(labels)


#: Columns of ``sweep_runs.csv`` that are bookkeeping, not swept parameters (those that
#: ``governed_broker.sweep.collect`` writes besides ``param.<path>``).
SWEEP_BOOKKEEPING_COLUMNS = frozenset(
    {
        "run_id", "index", "replicate", "seed", "sample_method", "status", "attempts",
        "started_at", "finished_at", "duration_s", "host", "task_id", "run_dir", "error",
    }
)


def _sweep_parameters(runs: pd.DataFrame) -> list[str]:
    """Swept parameter columns.

    The ``param.<path>`` columns that ``governed-broker sweep`` writes; in a table without them,
    every column that is not bookkeeping.
    """
    prefixed = [c for c in runs.columns if c.startswith("param.")]
    if prefixed:
        return prefixed
    return [c for c in runs.columns if c not in SWEEP_BOOKKEEPING_COLUMNS]


def _sweep_domain(sweep_dir: Path, runs: pd.DataFrame) -> tuple[dict[str, str], tuple[str, ...]]:
    """The domain (actions and appraisal scale) of a sweep's runs, from their manifests.

    All runs must share it.
    """
    found: tuple[dict[str, str], tuple[str, ...]] | None = None
    for run_dir in runs.get("run_dir", pd.Series(dtype=str)).dropna().astype(str):
        manifest_path = sweep_dir / run_dir / MANIFEST_FILE  # an absolute run_dir stays so
        if not manifest_path.is_file():
            continue
        manifest = _read_json(manifest_path)
        domain = (domain_actions(manifest, manifest_path), domain_labels(manifest, manifest_path))
        if found is not None and domain != found:
            raise AnalysisInputError(f"{manifest_path}: the runs of this sweep have different "
                                     "domains (actions or pmt_labels); analyse them separately")
        found = domain
    return found if found is not None else (dict(DEFAULT_ACTION_EFFECTS), DEFAULT_PMT_LABELS)


def load_sweep(path: Path | str, completed_only: bool = True) -> SweepData:
    """Load a sweep directory.

    Args:
        path: A directory with ``sweep_runs.csv``, ``sweep_agents_yearly.parquet`` and
            ``sweep_model_yearly.csv``.
        completed_only: Keep only runs whose ``status`` is ``done`` (the sweep's other
            statuses, ``failed``, ``running`` and ``pending``, have no outcome rows).

    Returns:
        SweepData; numeric parameter columns are converted to numbers.

    Raises:
        AnalysisInputError: on missing files or columns, or outcome rows of unknown runs.
    """
    path = Path(path)
    index_path = path / SWEEP_INDEX_FILE
    if not index_path.is_file():
        raise AnalysisInputError(
            f"{path}: no {SWEEP_INDEX_FILE}; pass a sweep directory written by "
            "`governed-broker sweep` (or a run directory to `load_run`)"
        )
    runs = _read_csv(index_path)
    for column in ("run_id", "status"):
        if column not in runs.columns:
            raise AnalysisInputError(f"{index_path}: missing column {column!r}")
    parameters = _sweep_parameters(runs)
    for column in [*parameters, "seed"]:
        if column in runs.columns:
            numeric = pd.to_numeric(runs[column], errors="coerce")
            if numeric.notna().all():
                runs[column] = numeric
    agents_path, model_path = path / SWEEP_AGENTS_FILE, path / SWEEP_MODEL_FILE
    if not agents_path.is_file():
        raise AnalysisInputError(f"{agents_path}: file not found; run `governed-broker collect`")
    agents = pd.read_parquet(agents_path)
    model = _read_csv(model_path)
    for frame, source in ((agents, agents_path), (model, model_path)):
        if "run_id" not in frame.columns:
            raise AnalysisInputError(f"{source}: missing column 'run_id'")
        frame["run_id"] = frame["run_id"].astype(str)
    runs["run_id"] = runs["run_id"].astype(str)
    if "index" in runs.columns:  # plan order (replicates of a point follow each other)
        runs = runs.sort_values(by="index", key=lambda c: pd.to_numeric(c), kind="stable")
        runs = runs.reset_index(drop=True)
    agents = coerce_columns(agents, AGENT_COLUMNS, str(agents_path), NULLABLE_AGENT_COLUMNS)
    model = coerce_columns(model, model_columns(action_count_columns(model)), str(model_path),
                           frozenset({"mean_depth_flooded_m"}))
    unknown = sorted(set(agents["run_id"]) - set(runs["run_id"]))
    if unknown:
        raise AnalysisInputError(f"{agents_path}: run_id {unknown[0]!r} is not in {index_path}")
    if completed_only:
        ok = runs["status"].astype(str) == "done"
        runs = runs[ok].reset_index(drop=True)
        agents = agents[agents["run_id"].isin(runs["run_id"])].reset_index(drop=True)
        model = model[model["run_id"].isin(runs["run_id"])].reset_index(drop=True)
    agents.attrs["action_effects"], agents.attrs["pmt_labels"] = _sweep_domain(path, runs)
    return SweepData(path=path, runs=runs, agents=agents, model=model, parameters=parameters)


GROUPS_FILE = "groups.csv"


def load_groups(path: Path | str) -> dict[str, list[RunData]]:
    """Load groups of replicate runs (e.g. the arms of an ablation) listed in ``groups.csv``.

    ``groups.csv`` in ``path`` has at least the columns ``group`` (label) and ``run`` (a run
    directory relative to ``path``); any other column (seed, description) is documentation.

    Returns:
        Group label -> loaded runs, in file order (groups in order of first appearance).
    """
    path = Path(path)
    index_path = path / GROUPS_FILE
    index = _read_csv(index_path)
    for column in ("group", "run"):
        if column not in index.columns:
            raise AnalysisInputError(f"{index_path}: missing column {column!r}")
    groups: dict[str, list[RunData]] = {}
    for row in index.itertuples():
        run_dir = (path / str(row.run)).resolve()
        if path.resolve() not in run_dir.parents:
            raise AnalysisInputError(f"{index_path}: run {row.run!r} is outside {path}")
        groups.setdefault(str(row.group), []).append(load_run(run_dir))
    return groups
