"""Small helper shared by the measures: normalise a ``by`` argument to a list of columns."""

from __future__ import annotations

from collections.abc import Sequence


def as_columns(by: Sequence[str] | str | None) -> list[str]:
    """Return ``by`` as a list of column names (``None`` -> no grouping)."""
    if by is None:
        return []
    return [by] if isinstance(by, str) else list(by)
