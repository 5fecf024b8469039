"""Loaders: typed tables from run directories, clear errors for malformed files."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from analysis_helpers import make_agents, make_model

from governed_broker.analysis.errors import AnalysisInputError
from governed_broker.analysis.loaders import load_run, load_sweep


def _write_run(path: Path, agents: pd.DataFrame | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    agents = agents if agents is not None else make_agents(
        [{"year": 1, "agent_id": 2, "insured_after": True, "threat_label": None},
         {"year": 1, "agent_id": 1, "proposed_action": None}]
    )
    agents.to_csv(path / "agents_yearly.csv", index=False)
    make_model([1]).to_csv(path / "model_yearly.csv", index=False)
    return path


def test_round_trip_types(tmp_path: Path):
    run = load_run(_write_run(tmp_path / "r1"))
    a = run.agents
    assert list(a["agent_id"]) == [1, 2]  # sorted by (year, agent_id)
    assert str(a["insured_after"].dtype) == "boolean"
    assert a.loc[1, "insured_after"] is True or bool(a.loc[1, "insured_after"]) is True
    assert pd.isna(a.loc[1, "threat_label"]) and pd.isna(a.loc[0, "proposed_action"])
    assert str(a["years_since_flood"].dtype) == "Int64"
    assert run.decisions is None and run.manifest == {} and run.run_id == "r1"


def test_decisions_and_manifest(tmp_path: Path):
    path = _write_run(tmp_path / "r")
    (path / "manifest.json").write_text(json.dumps({"seed": 1}))
    (path / "decisions.jsonl").write_text('{"year": 1}\n\n{"year": 2}\n')
    run = load_run(path)
    assert run.manifest == {"seed": 1}
    assert [d["year"] for d in run.decisions] == [1, 2]
    (path / "decisions.jsonl").write_text('{"year": 1}\nnot json\n')
    with pytest.raises(AnalysisInputError, match="line 2 is not JSON"):
        load_run(path)


def test_bad_boolean_names_file_column_value(tmp_path: Path):
    path = _write_run(tmp_path / "r")
    text = (path / "agents_yearly.csv").read_text().replace("True", "yes", 1)
    (path / "agents_yearly.csv").write_text(text)
    with pytest.raises(AnalysisInputError, match=r"agents_yearly.csv.*must be True/False.*'yes'"):
        load_run(path)


def test_missing_column(tmp_path: Path):
    agents = make_agents([{"year": 1, "agent_id": 1}]).drop(columns=["executed_action"])
    path = _write_run(tmp_path / "r", agents)
    with pytest.raises(AnalysisInputError, match="missing column.*executed_action"):
        load_run(path)


def test_empty_required_cell(tmp_path: Path):
    agents = make_agents([{"year": 1, "agent_id": 1}])
    agents["executed_action"] = pd.NA
    path = _write_run(tmp_path / "r", agents)
    with pytest.raises(AnalysisInputError, match="'executed_action' is empty in row 2"):
        load_run(path)


def test_not_a_directory(tmp_path: Path):
    with pytest.raises(AnalysisInputError, match="not a directory"):
        load_run(tmp_path / "nope")


def test_sweep_loader(tmp_path: Path):
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    pd.DataFrame(
        {"run_id": ["a", "b", "c"], "status": ["done", "done", "failed"], "seed": [1, 2, 3],
         "insurance.loading": ["1.1", "1.3", "1.5"]}
    ).to_csv(sweep / "sweep_runs.csv", index=False)
    agents = [make_agents([{"year": 1, "agent_id": 1}]).assign(run_id=r) for r in "ab"]
    pd.concat(agents).to_parquet(sweep / "sweep_agents_yearly.parquet")
    pd.concat([make_model([1]).assign(run_id=r) for r in "ab"]).to_csv(
        sweep / "sweep_model_yearly.csv", index=False)
    data = load_sweep(sweep)
    assert data.parameters == ["insurance.loading"]
    assert list(data.runs["run_id"]) == ["a", "b"]
    assert data.runs["insurance.loading"].tolist() == [1.1, 1.3]
    assert len(data.agents) == 2 and set(data.model["run_id"]) == {"a", "b"}
    with pytest.raises(AnalysisInputError, match="no sweep_runs.csv"):
        load_sweep(tmp_path)


def test_load_groups(tmp_path: Path):
    from governed_broker.analysis.loaders import load_groups

    for name in ("a/r1", "a/r2", "b/r1"):
        _write_run(tmp_path / name)
    pd.DataFrame({"group": ["a", "a", "b"], "run": ["a/r1", "a/r2", "b/r1"]}).to_csv(
        tmp_path / "groups.csv", index=False)
    groups = load_groups(tmp_path)
    assert {k: len(v) for k, v in groups.items()} == {"a": 2, "b": 1}
    pd.DataFrame({"group": ["x"], "run": ["../elsewhere"]}).to_csv(
        tmp_path / "groups.csv", index=False)
    with pytest.raises(AnalysisInputError, match="outside"):
        load_groups(tmp_path)
