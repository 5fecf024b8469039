"""``governed-broker cohort-check``: a cohort run against a full run on a subsample."""

from __future__ import annotations

import json
from pathlib import Path

from governed_broker.cli import main

REPO = Path(__file__).resolve().parents[2]


def _llm() -> str:
    llm = {"backend": "scripted", "model": "stochastic", "cache": {"mode": "off"},
           "script": str(REPO / "benchmarks" / "stochastic_llm.yaml")}
    return f"llm={json.dumps(llm)}"


def test_cohort_check_runs_both_and_reports_the_differences(experiments, tmp_path,
                                                            capsys) -> None:
    path = experiments.write(experiments.data())
    out = tmp_path / "check"
    code = main(["cohort-check", str(path), "--households", "40", "--out", str(out),
                 "--set", "years=3", "--set", "decision.maker=llm", "--set", _llm(),
                 "--set", "memory.engine=humancentric",
                 "--set", "cohort.bins={savings_usd: [10000]}"])
    assert code == 0, capsys.readouterr().err
    report = json.loads((out / "cohort_check.json").read_text())
    assert report["households"] == 40 and report["years"] == 3
    assert report["runs"]["cohort"]["llm_calls"] < report["runs"]["full"]["llm_calls"]
    assert report["runs"]["cohort"]["cohort"]["household_years"] == \
        len((out / "cohort" / "agents_yearly.csv").read_text().splitlines()) - 1
    shares = {r["value"]: r for r in report["actions"]}
    assert abs(sum(r["full"] for r in shares.values()) - 1) < 1e-9
    for r in shares.values():
        assert abs(r["gap_pp"] - 100 * (r["cohort"] - r["full"])) < 1e-9
    assert 0 <= report["threat_label_distance"] <= 1
    assert {b["id"] for b in report["benchmarks"]} and "full" in report["scores"]
    text = (out / "cohort_check.md").read_text()
    assert "Executed actions" in text and "Benchmark targets" in text
    assert text in capsys.readouterr().out


def test_cohort_check_of_a_baseline_experiment_is_a_configuration_error(experiments, tmp_path,
                                                                        capsys) -> None:
    path = experiments.write(experiments.data())
    assert main(["cohort-check", str(path), "--out", str(tmp_path / "c")]) == 2
    assert "cohort-check compares LLM runs" in capsys.readouterr().err
