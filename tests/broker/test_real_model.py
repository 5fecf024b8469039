"""The governed broker with the real embedded model in a tiny full run (CI: ``-m real_llm``).

3 households x 2 years, human-centric memory, reflection on. No test asserts a particular
decision (a 0.5B model's judgement is not under test); they assert that every decision is
explained by its audit record and that nothing infeasible was executed.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from broker_helpers import REPO

from governed_broker.config.loader import load_experiment

pytestmark = pytest.mark.real_llm


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    from governed_broker.runner import run_experiment

    tmp = tmp_path_factory.mktemp("real")
    llm = {"backend": "embedded", "cache": {"path": str(tmp / "cache.sqlite")}}
    config = load_experiment(REPO / "experiments" / "demo.yaml", [
        "decision.maker=llm", f"llm={json.dumps(llm)}", "years=2", "population.size=3",
        "reflection.enabled=true", "reflection.interval_years=1",
        "memory.engine=humancentric", "outputs.plots=false"])
    run_experiment(config, tmp / "run", progress=False)
    return tmp / "run"


def test_every_decision_is_explained_by_its_audit(run_dir):
    with (run_dir / "agents_yearly.csv").open() as f:
        rows = list(csv.DictReader(f))
    records = [json.loads(x) for x in (run_dir / "decisions.jsonl").read_text().splitlines()]
    assert len(records) == len(rows) > 0
    for row, rec in zip(rows, records, strict=True):
        assert (int(row["year"]), int(row["agent_id"])) == (rec["year"], rec["agent_id"])
        assert rec["decision_maker"].startswith("llm:embedded/")
        assert rec["status"] == row["status"]
        assert rec["status"] in ("approved", "retry_approved", "unresolved", "rejected",
                                 "parse_failed")
        assert rec["executed_action"] in rec["allowed_actions"]
        assert rec["affordable"][rec["executed_action"]]
        assert len(rec["attempts"]) == 1 + rec["retries"]
        for attempt in rec["attempts"]:
            assert attempt["raw"] and (attempt["parsed"] or attempt["parse_error"])
            assert attempt["prompt_tokens"] > 0 and attempt["completion_tokens"] > 0
        errors = [f for f in rec["attempts"][-1]["rules"]
                  if f["fired"] and f["severity"] == "ERROR"]
        if rec["status"] in ("approved", "retry_approved"):
            assert rec["executed_action"] == rec["final_proposal"] and not errors
        elif rec["status"] == "unresolved":  # kept by on_exhausted: keep, violation recorded
            assert rec["executed_action"] == rec["final_proposal"] and errors
        else:
            assert rec["fallback"] and rec["executed_action"] == "do_nothing"


def test_reflections_are_recorded(run_dir):
    records = [json.loads(x) for x in (run_dir / "reflections.jsonl").read_text().splitlines()]
    assert records, "reflection is on: one record per household and year"
    for rec in records:
        assert rec["status"] in ("ok", "rejected", "skipped", "parse_failed")
        if rec["status"] == "ok":
            assert 1 <= len(rec["insights"]) == len(rec["insight_ids"]) <= 3
