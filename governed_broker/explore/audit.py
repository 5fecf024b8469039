"""A run's audit files (``decisions.jsonl``, ``reflections.jsonl``) as the explorer holds them.

An index of where each household-year's record is, read from the file when it is shown.

Parsed into Python objects, the audit of a 2,000-household, 10-year LLM run (75 MB of JSON
lines) takes about 500 MB; the explorer needs the whole of a record only for the household
opened, and of every record only which rules fired and whether it is a laundering case (the
decision filters). So ``AuditRecords`` reads each complete line once, keeps its place in the
file and that small summary, and parses a record again when asked (``os.pread`` on a file it
keeps open: safe from several sessions' threads at once, and still the same file after a
running run's directory is renamed when it finishes).

A *laundering case* is a decision in which, after an attempt that a governance rule blocked (a
fired rule of severity ``ERROR``), a later readable reply gave a different threat or coping
label (``laundering_of``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from governed_broker.analysis.errors import AnalysisInputError

Key = tuple[int, int]


@dataclass(frozen=True)
class Laundering:
    """How a decision's appraisal changed after a block."""

    rule: str
    label: str
    before: str
    after: str
    label_only: bool

    def describe(self) -> str:
        """One line, e.g. ``threat H -> M after high_threat_inaction (same action)``."""
        tail = "same action" if self.label_only else "action changed too"
        return f"{self.label} {self.before} -> {self.after} after {self.rule} ({tail})"


def laundering_of(decision: Mapping[str, Any]) -> list[Laundering]:
    """The laundering cases in one audit record ([] when there is none)."""
    attempts = [a for a in decision.get("attempts") or [] if isinstance(a, dict)]
    found = []
    for i, blocked in enumerate(attempts):
        rules = [r for r in blocked.get("rules") or [] if r.get("fired")
                 and r.get("severity") == "ERROR"]
        before = blocked.get("parsed")
        if not rules or not before:
            continue
        after = next((a.get("parsed") for a in attempts[i + 1:] if a.get("parsed")), None)
        if not after:
            continue
        same_action = before.get("decision") == after.get("decision")
        for label, key in (("threat", "threat_appraisal"), ("coping", "coping_appraisal")):
            old, new = _label(before, key), _label(after, key)
            if old is not None and new is not None and old != new:
                found.append(Laundering(str(rules[0].get("id")), label, old, new, same_action))
    return found


def _label(reply: Mapping[str, Any], key: str) -> str | None:
    value = reply.get(key)
    return value.get("label") if isinstance(value, dict) else None


def fired_ids(record: Mapping[str, Any]) -> tuple[str, ...]:
    """The ids of the rules that fired at any attempt of a decision, sorted."""
    return tuple(sorted({str(r.get("id")) for r in record.get("rules_fired") or []}))


class AuditRecords(Mapping[Key, dict[str, Any]]):
    """The records of one audit file by (agent id, year), up to ``last_year``.

    See the module documentation.

    Args:
        path: ``decisions.jsonl`` or ``reflections.jsonl`` (absent: no records).
        last_year: The last complete year of the run; later records are left out.

    Raises:
        AnalysisInputError: a complete line is not a JSON object with an integer agent_id and
            year (names the file and the line).
    """

    def __init__(self, path: Path, last_year: int) -> None:
        self.path = Path(path)
        self._places: dict[Key, tuple[int, int]] = {}
        self._fired: dict[Key, tuple[str, ...]] = {}
        self._laundering: dict[Key, tuple[Laundering, ...]] = {}
        self._fd: int | None = None
        try:
            self._fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        self._index(last_year)

    def _index(self, last_year: int) -> None:
        offset = 0
        with os.fdopen(os.dup(self._fd), "rb") as f:
            for number, line in enumerate(f, start=1):
                start, offset = offset, offset + len(line)
                if not line.endswith(b"\n"):
                    break  # a running run's half-written last line
                if not line.strip():
                    continue
                record = _parse(line, self.path, number)
                try:
                    key = (int(record["agent_id"]), int(record["year"]))
                except (KeyError, TypeError, ValueError) as exc:
                    raise AnalysisInputError(f"{self.path}: line {number}: a record without an "
                                             f"integer agent_id and year ({exc})") from exc
                if key[1] > last_year:
                    continue
                self._places[key] = (start, len(line))
                if fired := fired_ids(record):
                    self._fired[key] = fired
                if cases := laundering_of(record):
                    self._laundering[key] = tuple(cases)

    def __getitem__(self, key: Key) -> dict[str, Any]:
        start, length = self._places[key]
        return _parse(os.pread(self._fd, length, start), self.path, None)

    def __iter__(self) -> Iterator[Key]:
        return iter(self._places)

    def __len__(self) -> int:
        return len(self._places)

    def fired(self, key: Key) -> tuple[str, ...]:
        """The rules that fired in the record of ``key`` (() without one)."""
        return self._fired.get(key, ())

    def laundering(self, key: Key) -> tuple[Laundering, ...]:
        """The laundering cases of the record of ``key`` (() without one)."""
        return self._laundering.get(key, ())

    def rule_ids(self) -> list[str]:
        """Every rule id that fired in some record, sorted."""
        return sorted({rule for ids in self._fired.values() for rule in ids})

    def __del__(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _parse(line: bytes, path: Path, number: int | None) -> dict[str, Any]:
    where = f"{path}: line {number}" if number is not None else f"{path}: a record"
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AnalysisInputError(f"{where} is not JSON ({exc})") from exc
    if not isinstance(record, dict):
        raise AnalysisInputError(f"{where} is not a JSON object")
    return record
