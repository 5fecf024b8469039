"""Streamed JSON-lines audit files (``decisions.jsonl``, ``reflections.jsonl``).

Records are written as they are produced (one batch per year, in agent order) and flushed, so a
long run never holds its audit in memory and a crashed run keeps what it decided. Keys keep the
order in which the broker builds a record, so identical runs give identical lines apart from
the timing fields (``latency_s``), which appear only here, never in the CSVs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO


def _json_default(value: Any) -> Any:
    # numpy scalars and arrays (memory ids, shares) and tuples from frozen dataclasses.
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    if hasattr(value, "tolist") and callable(value.tolist):
        return value.tolist()
    if isinstance(value, set | frozenset):
        return sorted(value)
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"audit value of type {type(value).__name__} is not JSON-serialisable")


_UTF8 = json.JSONEncoder(ensure_ascii=False, default=_json_default)
_ASCII = json.JSONEncoder(ensure_ascii=True, default=_json_default)

#: JSON escapes for the characters other than ``\n`` at which ``str.splitlines`` (and
#: JavaScript) break a line; raw, they would cut a JSON line in two for such readers.
_LINE_SAFE = {c: f"\\u{c:04x}" for c in (0x0B, 0x0C, 0x1C, 0x1D, 0x1E, 0x85, 0x2028, 0x2029)}


def to_json_line(record: Mapping[str, Any]) -> str:
    """One record as a JSON line (UTF-8 text, no trailing newline).

    Text reaching an audit record has been cleaned (``contracts.text.clean_text``); should a
    string still hold a lone surrogate, which UTF-8 cannot store, the line is written with
    ASCII escapes instead, so the writer never fails on any string.
    """
    line = _UTF8.encode(record)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        line = _ASCII.encode(record)
    # characters that some line readers split at: escaped (they only occur inside strings)
    return line.translate(_LINE_SAFE)


class JsonlWriter:
    """Appends JSON records, one per line, to a file.

    Args:
        path: The file; created when missing, appended to otherwise (a new run writes into a
            new directory; a resumed run has cut the file back to its last checkpoint).
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file: TextIO | None = self.path.open("a", encoding="utf-8")

    def write_many(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Write records and flush."""
        if self._file is None:
            raise ValueError(f"audit file {self.path} is closed")
        for record in records:
            self._file.write(to_json_line(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._file is not None:
            self._file.close()
            self._file = None
