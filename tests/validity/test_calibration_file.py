"""The shipped calibration belongs to the shipped battery, and the docs quote it exactly.

``configs/validity/calibration.json`` is written by the command in docs/validity.md (the
reference respondents through the battery, 50 seeds, about 10-15 minutes: too slow for CI).
These tests catch the ways it goes stale: the battery edited without regenerating it (every
card would then say ``out_of_date``), the judging code changed without bumping
``validity.CALIBRATION_VERSION`` (the first battery seed of two reference respondents, judged
again in seconds, must give the outcomes the file stored), and the table in docs/validity.md
drifting from the file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from governed_broker.config import load_agent_types
from governed_broker.config.loader import load_experiment
from governed_broker.config.resolved import resolve_experiment
from governed_broker.validity import CALIBRATION_VERSION
from governed_broker.validity.battery import load_battery
from governed_broker.validity.card import CALIBRATION_FILE, calibration_of
from governed_broker.validity.reference import calibrate

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


def test_a_calibration_by_other_judging_code_is_out_of_date(tmp_path):
    battery = tmp_path / "validity"
    shutil.copytree(BATTERY, battery)
    domain = load_agent_types(REPO / "agent_types.yaml")
    assert calibration_of(load_battery(battery, domain))["status"] == "current"
    data = json.loads((battery / CALIBRATION_FILE).read_text(encoding="utf-8"))
    data["calibration_version"] = CALIBRATION_VERSION - 1
    (battery / CALIBRATION_FILE).write_text(json.dumps(data), encoding="utf-8")
    stale = calibration_of(load_battery(battery, domain))
    assert stale["status"] == "out_of_date" and "calibration version" in stale["note"]


def test_the_first_battery_seed_is_judged_as_the_calibration_says(tmp_path):
    """The deaf and the rule respondents at the first battery seed, through the real battery.

    A change of any outcome means the judging code changed: bump ``CALIBRATION_VERSION`` and
    regenerate the calibration (docs/validity.md).
    """
    data = json.loads((BATTERY / CALIBRATION_FILE).read_text(encoding="utf-8"))
    demo = resolve_experiment(load_experiment(REPO / "experiments" / "demo.yaml",
                                              [f"validity.cards_dir={tmp_path / 'cards'}"]))
    again = calibrate(demo, ["deaf", "rule"], 1)
    assert again.seeds == [data["first_seed"]["seed"]]
    for name, tally in again.tallies.items():
        stored = data["first_seed"]["outcomes"][name]
        moved = {t: (stored.get(t), o) for t, o in tally.first.items() if stored.get(t) != o}
        assert not moved, (f"{name}: outcomes moved (calibrated, now): {moved}; bump "
                           "validity.CALIBRATION_VERSION and regenerate the calibration")
