"""The shipped calibration belongs to the shipped battery, and the docs quote it exactly.

``configs/validity/calibration.json`` is written by the command in docs/validity.md (the
reference respondents through the battery, 50 seeds, about 10-15 minutes: too slow for CI).
These tests catch the two ways it goes stale: the battery edited without regenerating it (every
card would then say ``out_of_date``), and the table in docs/validity.md drifting from the file.
"""

from __future__ import annotations

import json
from pathlib import Path

from governed_broker.config import load_agent_types
from governed_broker.validity.battery import load_battery
from governed_broker.validity.card import CALIBRATION_FILE, calibration_of

REPO = Path(__file__).resolve().parents[2]
BATTERY = REPO / "configs" / "validity"


def _battery():
    return load_battery(BATTERY, load_agent_types(REPO / "agent_types.yaml"))


def _docs_table() -> dict[str, dict[str, str]]:
    """The reference table of docs/validity.md: test (or 'card passed') -> respondent -> rate."""
    lines = (REPO / "docs" / "validity.md").read_text(encoding="utf-8").splitlines()
    start = lines.index(next(x for x in lines if x.startswith("| test | primary | replies")))
    header = [c.strip().strip("`") for c in lines[start].strip("|").split("|")]
    rows: dict[str, dict[str, str]] = {}
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip().strip("*") for c in line.strip("|").split("|")]
        rows[cells[0]] = dict(zip(header[4:], cells[4:], strict=True))
    return rows


def test_the_shipped_calibration_is_current_for_the_shipped_battery():
    calibration = calibration_of(_battery())
    assert calibration["status"] == "current", (
        f"{BATTERY / CALIBRATION_FILE} was made for another battery: regenerate it with "
        "the command in docs/validity.md")


def test_the_docs_reference_table_is_the_calibration_file():
    data = json.loads((BATTERY / CALIBRATION_FILE).read_text(encoding="utf-8"))
    docs = _docs_table()
    expected = {name: {r: f"{rate:.2f}" for r, rate in test["pass_rate"].items()}
                for name, test in data["tests"].items()}
    expected["card passed"] = {r: f"{rate:.2f}" for r, rate in data["cards_passed"].items()}
    assert docs == expected
