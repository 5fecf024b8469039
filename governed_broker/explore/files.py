"""What the explorer reads: a finished run, a running one (``<out>.partial``) or a sweep.

A run works in ``<out>.partial/`` and renames it to ``<out>`` when it has finished
(``governed_broker.run_dir``). While it runs, ``agents_yearly.csv``, ``model_yearly.csv``,
``decisions.jsonl`` and ``reflections.jsonl`` grow by whole years, and a reader may catch a file
in the middle of a line. The readers here therefore keep only complete lines (up to the last
newline) and never fail on the unfinished tail. ``manifest.json`` and ``config.yaml`` exist only
once the run has finished.

A sweep directory has ``sweep_runs.csv`` (written when the sweep collects) and, while it runs,
``_sweep/plan.json`` with one state file per run; the explorer lists its runs from either.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.loaders import SWEEP_INDEX_FILE, json_objects
from governed_broker.run_dir import partial_dir

PARTIAL_SUFFIX = ".partial"
SWEEP_META = "_sweep"


@dataclass(frozen=True)
class Target:
    """A directory the explorer was asked to show.

    Attributes:
        kind: ``run`` or ``sweep``.
        path: The finished path (``<out>``, without ``.partial``).
    """

    kind: Literal["run", "sweep"]
    path: Path

    def run_location(self) -> tuple[Path, bool]:
        """Where a run's files are now and whether it is still running.

        Returns ``(<out>, False)`` once the run has finished (``<out>`` exists) and
        ``(<out>.partial, True)`` while it runs. A run that finishes while it is being explored
        moves from the second to the first.
        """
        if self.path.is_dir():
            return self.path, False
        work = partial_dir(self.path)
        if work.is_dir():
            return work, True
        raise AnalysisInputError(f"{self.path}: the run directory has gone (neither it nor "
                                 f"{work.name} exists any more)")


def resolve_target(path: str | Path) -> Target:
    """The run or sweep that ``path`` names.

    Accepts a finished run directory, a running one given either as ``<out>`` or as
    ``<out>.partial``, and a sweep directory (finished or running).

    Raises:
        AnalysisInputError: ``path`` is none of these; the message says what was expected.
    """
    path = Path(path).expanduser().resolve()
    if path.name.endswith(PARTIAL_SUFFIX) and path.is_dir():
        path = path.with_name(path.name[: -len(PARTIAL_SUFFIX)])
    if path.is_dir() and ((path / SWEEP_INDEX_FILE).is_file()
                          or (path / SWEEP_META / "plan.json").is_file()):
        return Target("sweep", path)
    if (path.is_dir() and (path / "agents_yearly.csv").is_file()) or partial_dir(path).is_dir():
        return Target("run", path)
    if path.is_dir():
        raise AnalysisInputError(
            f"{path}: not a run or sweep directory (no agents_yearly.csv, no {SWEEP_INDEX_FILE}, "
            "no _sweep/plan.json); pass a directory written by `governed-broker run` or "
            "`governed-broker sweep`")
    raise AnalysisInputError(f"{path}: no such directory, and no running {path.name}"
                             f"{PARTIAL_SUFFIX} beside it")


def complete_text(path: Path) -> str:
    """The text of ``path`` up to its last newline ('' when the file does not exist).

    A file that a running run appends to may end in half a line; that tail is left out.
    """
    if not path.is_file():
        return ""
    data = path.read_bytes()
    end = data.rfind(b"\n")
    return data[: end + 1].decode("utf-8", errors="replace") if end >= 0 else ""


def read_csv_complete(path: Path) -> pd.DataFrame | None:
    """A CSV's complete rows as strings (empty cells as missing); None when absent or empty."""
    text = complete_text(path)
    if not text.strip():
        return None
    try:
        return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, na_values=[""])
    except pd.errors.ParserError as exc:
        raise AnalysisInputError(f"{path}: not a readable CSV file ({exc})") from exc


def read_jsonl_complete(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of the complete lines of a ``.jsonl`` file ([] when absent).

    Raises:
        AnalysisInputError: a complete line is not a JSON object (names file and line).
    """
    return json_objects(complete_text(path).splitlines(), path)


def read_json_object(path: Path) -> dict[str, Any] | None:
    """A JSON object file (None when absent).

    Raises:
        AnalysisInputError: the file is not a JSON object.
    """
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AnalysisInputError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise AnalysisInputError(f"{path}: expected a JSON object")
    return data


def fingerprint(directory: Path, names: tuple[str, ...]) -> tuple:
    """Sizes and modification times of ``names`` in ``directory``: changes when any grows."""
    out = []
    for name in names:
        try:
            st = (directory / name).stat()
            out.append((name, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append((name, None, None))
    return (str(directory), *out)
