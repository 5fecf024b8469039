"""Checking that a branch's arms re-lived their parent's history.

An arm re-simulates the parent's years before the policy change (every random stream is keyed
by seed and year, and the changed settings are not in force yet), so its rows of
``agents_yearly.csv`` and ``model_yearly.csv`` for those years must be the parent's, byte for
byte, and the reference arm (no change) must be the parent in every year. ``decisions.jsonl``
records are compared too, without the fields that legitimately differ between a run and its
re-simulation (``VOLATILE_DECISION_FIELDS``, ``VOLATILE_ATTEMPT_FIELDS``). Files are streamed
record by record, so the check costs a read of each file and no more memory than a record.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import zip_longest
from pathlib import Path
from typing import Any

#: The yearly tables compared byte for byte (header and rows); ``institutions_yearly.csv`` when
#: the parent has institutions.
YEARLY_FILES = ("agents_yearly.csv", "model_yearly.csv")
OPTIONAL_YEARLY_FILES = ("institutions_yearly.csv",)
#: The broker's audit records, compared without their volatile fields.
DECISIONS_FILE = "decisions.jsonl"
#: Fields of a decision record that differ between a run and its re-simulation: the audit run
#: id (it carries the run's config hash, which an arm's policy change alters), wall-clock
#: latency, and how many replies came from the response cache.
VOLATILE_DECISION_FIELDS = frozenset({"run_id", "latency_s", "cache_hits"})
#: Fields of each attempt of a decision record that differ likewise: latency, whether the reply
#: was cached, and the backend's per-call extras (host, timings, cache key, original latency).
VOLATILE_ATTEMPT_FIELDS = frozenset({"latency_s", "cached", "llm"})


@dataclass(frozen=True)
class Difference:
    """Where a file of an arm first departs from the parent's.

    Attributes:
        file: The file's name (``agents_yearly.csv``...).
        year: The first year whose records differ (None: the header differs, or a file is
            missing on one side).
        detail: What differs, for people (the first differing record's number).
    """

    file: str
    year: int | None
    detail: str

    def __str__(self) -> str:
        if self.year is None:
            return f"{self.file}: {self.detail}"
        return f"{self.file}: first differs from the parent's in year {self.year} ({self.detail})"


def compare_run(parent: Path, arm: Path, before: int | None) -> list[Difference]:
    """The files in which run ``arm`` departs from run ``parent``.

    Args:
        parent: The parent's run directory.
        arm: The arm's run directory.
        before: Compare only the years before this one (None: every year, for the reference
            arm).

    Returns:
        One ``Difference`` per file that differs (empty: the history is shared).
    """
    names = [*YEARLY_FILES, *(n for n in OPTIONAL_YEARLY_FILES if (parent / n).is_file())]
    found = [d for name in names
             if (d := compare_yearly_csv(parent / name, arm / name, before)) is not None]
    has = [(parent / DECISIONS_FILE).is_file(), (arm / DECISIONS_FILE).is_file()]
    if any(has) and not all(has):
        side = "the parent" if has[0] else "the arm"
        found.append(Difference(DECISIONS_FILE, None, f"only {side} has one"))
    elif all(has):
        difference = compare_decisions(parent / DECISIONS_FILE, arm / DECISIONS_FILE, before)
        if difference is not None:
            found.append(difference)
    return found


def compare_yearly_csv(parent: Path, arm: Path, before: int | None) -> Difference | None:
    """The first year whose rows (raw text) differ between two yearly tables, or None."""
    if not arm.is_file():
        return Difference(arm.name, None, "the arm has no such file")
    try:
        with open(parent, encoding="utf-8", newline="") as p_file, \
                open(arm, encoding="utf-8", newline="") as a_file:
            p_header, p_rows = _csv_records(p_file)
            a_header, a_rows = _csv_records(a_file)
            if p_header != a_header:
                return Difference(parent.name, None, "the header differs from the parent's")
            return _first_difference(parent.name, p_rows, a_rows, before, "row")
    except (ValueError, IndexError) as exc:  # not one of our yearly tables any more
        return Difference(parent.name, None, f"cannot be compared: {exc}")


def compare_decisions(parent: Path, arm: Path, before: int | None) -> Difference | None:
    """The first year whose decision records differ (volatile fields aside), or None."""
    try:
        with open(parent, encoding="utf-8") as p_file, open(arm, encoding="utf-8") as a_file:
            return _first_difference(DECISIONS_FILE, _decision_records(p_file),
                                     _decision_records(a_file), before, "record")
    except (ValueError, KeyError, TypeError) as exc:  # not our audit records any more
        return Difference(DECISIONS_FILE, None, f"cannot be compared: {exc!r}")


def _first_difference(name: str, parent: Iterator[tuple[int, Any]],
                      arm: Iterator[tuple[int, Any]], before: int | None,
                      what: str) -> Difference | None:
    """Walk two streams of (year, record) in step until a year >= ``before`` on both sides."""
    for number, (p, a) in enumerate(zip_longest(parent, arm), start=1):
        p_in = p is not None and (before is None or p[0] < before)
        a_in = a is not None and (before is None or a[0] < before)
        if not p_in and not a_in:
            return None
        if p_in and a_in and p == a:
            continue
        if p_in and a_in:
            return Difference(name, p[0], f"{what} {number} differs")
        year = p[0] if p_in else a[0]
        return Difference(name, year, f"{what} {number} is only in "
                                      f"{'the parent' if p_in else 'the arm'}")
    return None


class _Recorder:
    """An iterator over a file's lines that keeps the lines read since the last ``take``."""

    def __init__(self, lines: Iterator[str]) -> None:
        self._lines = lines
        self._taken: list[str] = []

    def __iter__(self) -> _Recorder:
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self._taken.append(line)
        return line

    def take(self) -> str:
        text, self._taken = "".join(self._taken), []
        return text


def _csv_records(handle: Any) -> tuple[str, Iterator[tuple[int, str]]]:
    """The header's raw text and a stream of (year, raw text) per record.

    A quoted field may span lines, so records are read with the csv module and their text kept
    verbatim.
    """
    recorder = _Recorder(iter(handle))
    reader = csv.reader(recorder)
    columns = next(reader, None)
    header = recorder.take()
    if not columns or "year" not in columns:
        raise ValueError(f"{Path(handle.name).name} has no 'year' column")
    column = columns.index("year")

    def records() -> Iterator[tuple[int, str]]:
        for row in reader:
            yield int(row[column]), recorder.take()

    return header, records()


def _decision_records(handle: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    """(year, record without its volatile fields) per line of a ``decisions.jsonl``."""
    for line in handle:
        if line.strip():
            record = json.loads(line)
            yield int(record["year"]), normalised_decision(record)


def normalised_decision(record: dict[str, Any]) -> dict[str, Any]:
    """A decision record without the fields that differ between a run and its re-simulation."""
    out = {k: v for k, v in record.items() if k not in VOLATILE_DECISION_FIELDS}
    if isinstance(out.get("attempts"), list):
        out["attempts"] = [
            {k: v for k, v in attempt.items() if k not in VOLATILE_ATTEMPT_FIELDS}
            if isinstance(attempt, dict) else attempt for attempt in out["attempts"]]
    return out
