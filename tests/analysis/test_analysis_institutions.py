"""Analysis of a run with institutions: the typed institutions table and the report section."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.loaders import load_run
from governed_broker.analysis.report import write_report
from governed_broker.config import load_experiment
from governed_broker.runner import run_experiment

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("inst") / "run"
    run_experiment(load_experiment(REPO / "experiments" / "institutions.yaml", [
        "population.size=20", "years=4", "outputs.plots=false", "buyout=null"]), out,
        progress=False)
    return out


def test_load_run_types_the_institutions_table(run) -> None:
    data = load_run(run)
    table = data.institutions
    assert table is not None and list(table["year"]) == [1, 2, 3, 4]
    assert str(table["loading"].dtype) == "float64"
    assert str(table["grants_offered"].dtype) == "Int64"
    assert table["buyout_budget_usd"].isna().all()  # no buyout programme: empty, allowed
    assert table["loss_ratio"].isna().iloc[0]


def test_a_run_without_its_institutions_table_is_refused(run, tmp_path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    (copy / "institutions_yearly.csv").unlink()
    with pytest.raises(AnalysisInputError, match="institutions_yearly.csv"):
        load_run(copy)


def test_the_report_has_an_institutions_section(run) -> None:
    page = write_report(run, progress=False).read_text(encoding="utf-8")
    assert "<h2>Institutions</h2>" in page and "institutions by year" in page
    assert load_run(REPO / "tests" / "fixtures" / "baseline_run").institutions is None
