"""build_decision_maker from an experiment, and the broker inside a full run of the world."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml
from broker_helpers import REPO, read_jsonl

from governed_broker.broker.factory import build_decision_maker
from governed_broker.config.base import ConfigError
from governed_broker.config.loader import load_experiment

SCRIPT = [
    {"pattern": "lessons", "reply": {"insights": ["I live in a flood zone.", "Insurance helps.",
                                                  "Savings matter."]}},
    {"pattern": "cannot be accepted", "reply": {
        "threat_appraisal": {"label": "L", "reason": "r"},
        "coping_appraisal": {"label": "M", "reason": "r"}, "decision": "do_nothing",
        "reason": "changed my mind"}},
    {"pattern": ".", "reply": {
        "threat_appraisal": {"label": "H", "reason": "r"},
        "coping_appraisal": {"label": "M", "reason": "r"}, "decision": "do_nothing",
        "reason": "wait and see"}},
]


def experiment(tmp_path: Path, *overrides: str):
    script = tmp_path / "script.yaml"
    script.write_text(yaml.safe_dump(SCRIPT))
    llm = {"backend": "scripted", "model": "s", "script": str(script), "cache": {"mode": "off"}}
    return load_experiment(REPO / "experiments" / "demo.yaml", [
        "decision.maker=llm", f"llm={json.dumps(llm)}", "years=2", "population.size=5",
        "outputs.plots=false", *overrides])


def test_factory_builds_a_broker_writing_into_the_run_dir(tmp_path):
    config = experiment(tmp_path, "governance.profile=relaxed", "reflection.enabled=true")
    broker = build_decision_maker(config, tmp_path / "run")
    try:
        assert broker.name.startswith("llm:scripted/scripted:s@sha256:")
        assert broker.rules.profile == "relaxed" and broker.reflection is not None
        assert broker.run_id.startswith("demo-") and len(broker.run_id) == len("demo-") + 12
    finally:
        broker.close()
    assert (tmp_path / "run" / "decisions.jsonl").exists()
    assert (tmp_path / "run" / "reflections.jsonl").exists()


def test_missing_governance_section_is_an_error_unless_disabled(tmp_path):
    types = yaml.safe_load((REPO / "agent_types.yaml").read_text())
    del types["governance"]
    (tmp_path / "types.yaml").write_text(yaml.safe_dump(types))
    config = experiment(tmp_path, f"agent_types={tmp_path / 'types.yaml'}")
    with pytest.raises(ConfigError, match="no 'governance:' section"):
        build_decision_maker(config, tmp_path / "run")
    config = experiment(tmp_path, f"agent_types={tmp_path / 'types.yaml'}",
                        "governance.profile=disabled")
    build_decision_maker(config, tmp_path / "run2").close()


def _run(config, out: Path):
    from governed_broker.runner import run_experiment

    run_experiment(config, out, progress=False)
    with (out / "agents_yearly.csv").open() as f:
        return list(csv.DictReader(f))


def test_full_run_audit_matches_the_csv_and_is_reproducible(tmp_path):
    config = experiment(tmp_path, "reflection.enabled=true")
    rows = _run(config, tmp_path / "a")
    records = read_jsonl(tmp_path / "a" / "decisions.jsonl")
    assert [(r["year"], r["agent_id"]) for r in records] == [
        (int(r["year"]), int(r["agent_id"])) for r in rows]
    for row, rec in zip(rows, records, strict=True):
        assert row["status"] == rec["status"] == "retry_approved"
        assert row["proposed_action"] == rec["proposed_action"] == "do_nothing"
        assert row["executed_action"] == rec["executed_action"]
        assert int(row["retries"]) == rec["retries"] == 1
        assert (row["threat_label"], row["coping_label"]) == ("L", "M")
        assert rec["rules_fired"][0]["id"] == "high_threat_inaction"
    _run(config, tmp_path / "b")
    for name in ("agents_yearly.csv", "model_yearly.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
