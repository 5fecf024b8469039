"""Which directory the explorer reads, and reading files a running run is still writing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.explore.files import (
    complete_text,
    read_csv_complete,
    read_jsonl_complete,
    resolve_target,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_a_finished_run_a_running_one_and_a_sweep_are_told_apart(tmp_path: Path) -> None:
    assert resolve_target(FIXTURES / "baseline_run").kind == "run"
    assert resolve_target(FIXTURES / "sensitivity_sweep").kind == "sweep"
    work = tmp_path / "out.partial"
    work.mkdir()
    (work / "agents_yearly.csv").write_text("year\n")
    for name in (tmp_path / "out", work):  # named either way
        target = resolve_target(name)
        assert target.kind == "run" and target.path == tmp_path / "out"
        assert target.run_location() == (work, True)
    work.rename(tmp_path / "out")  # the run finished: followed to its final place
    assert resolve_target(tmp_path / "out").run_location() == (tmp_path / "out", False)


@pytest.mark.parametrize("make, message", [
    (lambda p: p, "not a run or sweep directory"),
    (lambda p: p / "missing", "no such directory"),
])
def test_other_directories_are_refused_with_what_was_expected(tmp_path, make, message) -> None:
    with pytest.raises(AnalysisInputError, match=message):
        resolve_target(make(tmp_path))


def test_a_run_that_went_away_says_so(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "baseline_run", tmp_path / "run")
    target = resolve_target(tmp_path / "run")
    shutil.rmtree(tmp_path / "run")
    with pytest.raises(AnalysisInputError, match="has gone"):
        target.run_location()


def test_only_complete_lines_are_read(tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text("year,n\n1,10\n2,2")  # the last row is being written
    assert complete_text(csv) == "year,n\n1,10\n"
    assert read_csv_complete(csv)["year"].tolist() == ["1"]
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text('{"a": 1}\n{"a": 2}\n{"a": ')
    assert read_jsonl_complete(jsonl) == [{"a": 1}, {"a": 2}]
    assert read_csv_complete(tmp_path / "absent.csv") is None
    jsonl.write_text('{"a": 1}\n[1]\n')
    with pytest.raises(AnalysisInputError, match="line 2 is not a JSON object"):
        read_jsonl_complete(jsonl)
