"""Reading a run's ``validity_card.json`` for the explorer's first page.

The card is written by the validity checks (issue 12). The explorer reads only this minimal
shape and shows anything else it finds as plain key/value lines::

    {
      "verdict": "passed",                 # optional: one word or sentence for the whole card
      "tests": [                           # required: one object per test
        {"name": "placebo_shift",          # required: text
         "statistic": 0.031,               # number or null
         "threshold": 0.05,                # number or null
         "passed": true,                   # true, false or null (not computable)
         "outcome": "pass",                # optional: pass, fail, inconclusive, ...
         "n": 400,                         # integer or null: observations the test used
         "note": "..."}                    # optional text
      ]
    }

A file that does not have this shape is reported on the page (what is wrong, in which file),
never silently skipped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.explore.files import read_json_object


@dataclass(frozen=True)
class CardTest:
    """One test of a validity card."""

    name: str
    statistic: float | None
    threshold: float | None
    passed: bool | None
    n: int | None
    note: str = ""
    outcome: str = ""


@dataclass(frozen=True)
class ValidityCard:
    """A validity card: its tests, its verdict and any other top-level fields (as text)."""

    tests: tuple[CardTest, ...]
    verdict: str | None
    other: dict[str, str]


def read_validity_card(path: Path) -> tuple[ValidityCard | None, str | None]:
    """``(card, None)``, ``(None, None)`` when the file is absent, or ``(None, problem)``."""
    try:
        data = read_json_object(path)
        return (None, None) if data is None else (parse_validity_card(data, path), None)
    except AnalysisInputError as exc:
        return None, str(exc)


def parse_validity_card(data: dict[str, Any], source: Path) -> ValidityCard:
    """Check and convert the card's JSON object.

    Raises:
        AnalysisInputError: ``tests`` is missing or a test breaks the shape (names the test
            index and field).
    """
    tests = data.get("tests")
    if not isinstance(tests, list):
        raise AnalysisInputError(f"{source}: 'tests' must be a list of test objects")
    parsed = tuple(_test(t, i, source) for i, t in enumerate(tests))
    verdict = data.get("verdict")
    other = {str(k): _text(v) for k, v in data.items() if k not in ("tests", "verdict")}
    return ValidityCard(parsed, None if verdict is None else _text(verdict), other)


def _test(item: Any, index: int, source: Path) -> CardTest:
    where = f"{source}: tests[{index}]"
    if not isinstance(item, dict) or not isinstance(item.get("name"), str):
        raise AnalysisInputError(f"{where} must be an object with a text 'name'")
    passed = item.get("passed")
    if passed is not None and not isinstance(passed, bool):
        raise AnalysisInputError(f"{where}.passed must be true, false or null, got {passed!r}")
    n = item.get("n")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int)):
        raise AnalysisInputError(f"{where}.n must be an integer or null, got {n!r}")
    outcome = item.get("outcome", "")
    if not isinstance(outcome, str):
        raise AnalysisInputError(f"{where}.outcome must be text, got {outcome!r}")
    return CardTest(item["name"], _number(item.get("statistic"), f"{where}.statistic"),
                    _number(item.get("threshold"), f"{where}.threshold"), passed, n,
                    _text(item.get("note", "")), outcome)


def _number(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise AnalysisInputError(f"{where} must be a finite number or null, got {value!r}")
    return float(value)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)
