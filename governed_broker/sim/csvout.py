"""Deterministic CSV formatting of the yearly outputs.

Floats are written with the decimals the output column table declares
(``governed_broker.contracts.columns``: dollars 2, metres 4, shares, scores and trust 6, years
since flood 0), NaN as an empty field, booleans as ``True``/``False``;
the same arrays always give the same bytes. Rows are formatted with one ``%`` operation each
(the column formats are joined into one row format) for speed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from governed_broker.contracts.columns import FLOAT_DECIMALS


def decimals_for(column: str) -> int:
    """Decimals of a column written from floats, as the output column table declares them.

    Raises:
        ValueError: The column table declares no decimals for it (a column added to a writer
            but not to ``contracts/columns.py``).
    """
    try:
        return FLOAT_DECIMALS[column]
    except KeyError:
        raise ValueError(f"output column {column!r} has float values but no decimals in "
                         "governed_broker/contracts/columns.py; declare it there") from None


def _prepare(name: str, values: Any) -> tuple[str, list[Any]]:
    """The ``%`` format of a column and its values as a Python list."""
    if isinstance(values, list):
        needs_quotes = {v for v in set(values) if any(ch in str(v) for ch in ',\n"')}
        if needs_quotes:
            values = [_quote(str(v)) if v in needs_quotes else v for v in values]
        return "%s", values
    arr = np.asarray(values)
    if arr.dtype == bool:
        return "%s", np.where(arr, "True", "False").tolist()
    if np.issubdtype(arr.dtype, np.integer):
        return "%d", arr.tolist()
    if np.issubdtype(arr.dtype, np.floating):
        dec = decimals_for(name)
        rounded = np.round(arr.astype(float), dec) + 0.0  # -0.0 -> 0.0
        nan = np.isnan(rounded)
        if not nan.any():
            return f"%.{dec}f", rounded.tolist()
        fmt = f"{{:.{dec}f}}"
        return "%s", ["" if bad else fmt.format(v)
                      for v, bad in zip(rounded.tolist(), nan.tolist(), strict=True)]
    return _prepare(name, [str(v) for v in arr.tolist()])


def _quote(value: str) -> str:
    if any(ch in value for ch in ',\n"'):
        return '"' + value.replace('"', '""') + '"'
    return value


def format_rows(columns: Sequence[str], data: Mapping[str, Any]) -> str:
    """CSV text (no header) for columns given as arrays/lists of equal length."""
    prepared = [_prepare(c, data[c]) for c in columns]
    fmt = ",".join(f for f, _ in prepared) + "\n"
    return "".join([fmt % row for row in zip(*(v for _, v in prepared), strict=True)])


def format_row(columns: Sequence[str], row: Mapping[str, Any]) -> str:
    """CSV text of a single row given as scalars."""
    return format_rows(columns, {c: _as_array(row[c]) for c in columns})


def _as_array(value: Any) -> Any:
    if isinstance(value, bool | np.bool_):
        return np.array([bool(value)])
    if isinstance(value, int | np.integer):
        return np.array([int(value)], dtype=np.int64)
    if isinstance(value, float | np.floating):
        return np.array([float(value)])
    return [value]
