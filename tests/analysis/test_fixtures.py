"""The committed sample outputs follow the contract, and our measures agree with the model."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from governed_broker.analysis import adaptation_trajectories, load_run, load_sweep


def test_trajectories_match_model_yearly(fixtures_dir: Path):
    run = load_run(fixtures_dir / "baseline_run")
    ours = adaptation_trajectories(run.agents).set_index("year")
    model = run.model.set_index("year")
    for column in ("share_insured", "share_elevated", "share_relocated",
                   "share_insured_and_elevated", "share_no_measure"):
        # model_yearly.csv is written with 6 decimals
        assert ours[column].to_numpy() == pytest.approx(model[column].to_numpy(), abs=1e-6)


def test_ablation_fixture_labels(fixtures_dir: Path):
    groups = pd.read_csv(fixtures_dir / "ablation" / "groups.csv")
    assert set(groups["decision_maker"]) == {"baseline"}  # labelled truthfully: not LLM runs
    for run_dir in groups["run"]:
        run = load_run(fixtures_dir / "ablation" / run_dir)
        assert set(run.agents["decision_maker"]) == {"baseline"}


def test_sweep_fixture_loads(fixtures_dir: Path):
    sweep = load_sweep(fixtures_dir / "sensitivity_sweep")
    assert len(sweep.parameters) == 3 and len(sweep.runs) == 20
    assert set(sweep.agents["run_id"]) == set(sweep.runs["run_id"])


def test_scripted_broker_run_uses_the_audit(fixtures_dir: Path):
    from governed_broker.analysis import governance_workload, infeasible_proposal_rate

    run = load_run(fixtures_dir / "scripted_broker_run")
    assert run.manifest["decision_maker"].startswith("llm:scripted/")  # not a language model
    assert run.decisions is not None and len(run.decisions) == len(run.agents)
    infeasible = infeasible_proposal_rate(run.agents, run.decisions)
    assert infeasible["source"] == "decisions.jsonl:rules"
    # the script proposes elevation to renters and to households that cannot afford it
    assert infeasible["n_infeasible"] > 0
    workload = governance_workload(run.agents).iloc[0]
    assert workload["n_retries"] == run.agents["retries"].sum() > 0


def test_embedded_llm_run_is_a_real_model_run_explained_by_its_audit(fixtures_dir: Path):
    """The committed demo run of the embedded model (8 households x 4 years)."""
    from governed_broker.analysis import governance_workload, summarise_run

    run = load_run(fixtures_dir / "embedded_llm_run")
    assert run.manifest["decision_maker"].startswith("llm:embedded/qwen2.5-coder-0.5b")
    assert run.manifest["llm"]["backend"]["sha256"] == (
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32")
    assert run.decisions is not None and len(run.decisions) == len(run.agents) == 32
    # every model call is an attempt of a decision or a reflection in the audit
    lines = (fixtures_dir / "embedded_llm_run" / "reflections.jsonl").read_text().splitlines()
    reflections = [json.loads(x) for x in lines]
    attempts = sum(len(r["attempts"]) for r in [*run.decisions, *reflections])
    assert run.manifest["llm"]["stats"]["calls"]["calls"] == attempts
    for row, rec in zip(run.agents.itertuples(), run.decisions, strict=True):
        assert (row.year, row.agent_id) == (rec["year"], rec["agent_id"])
        assert row.executed_action == rec["executed_action"]
        assert len(rec["attempts"]) == 1 + rec["retries"]
    # a decision with a readable reply has the last read reply's appraisal; one that never got
    # a readable reply (parse_failed at every attempt) has none
    for row, rec in zip(run.agents.itertuples(), run.decisions, strict=True):
        read = [a["parsed"] for a in rec["attempts"] if a.get("parsed")]
        if read:
            assert row.threat_label == read[-1]["threat_appraisal"]["label"]
        else:
            assert rec["status"] == "parse_failed" and pd.isna(row.threat_label)
    assert set(run.agents["threat_label"].dropna()) <= {"VL", "L", "M", "H", "VH"}
    assert governance_workload(run.agents).iloc[0]["n_decisions"] == 32
    summary = summarise_run(run)
    assert summary.metric_version and len(summary.trajectories) == 4
