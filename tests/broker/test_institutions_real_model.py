"""LLM institutions with the real embedded model (CI: ``-m real_llm``).

The small ``experiments/institutions_embedded.yaml`` at 2 years. No test asserts a particular policy
(a 0.5B model's judgement is not under test); they assert that every institutional decision is
explained by its record and that nothing put in force breaks a limit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from broker_helpers import REPO

from governed_broker.config.loader import load_experiment, load_institutions
from governed_broker.contracts.institutions import INSTITUTION_STATUSES, InstitutionSituation
from governed_broker.sim.institution_rules import limit_violations

pytestmark = pytest.mark.real_llm


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    from governed_broker.runner import run_experiment

    tmp = tmp_path_factory.mktemp("real-institutions")
    config = load_experiment(REPO / "experiments" / "institutions_embedded.yaml", [
        "years=2", "population.size=10", "outputs.plots=false",
        f"llm.cache.path={tmp / 'cache.sqlite'}"])
    run_experiment(config, tmp / "run", progress=False)
    return tmp / "run"


def test_every_institutional_decision_is_explained_and_within_the_limits(run_dir) -> None:
    domain = load_institutions(REPO / "institutions.yaml")
    records = [json.loads(x) for x in (run_dir / "institutions.jsonl").read_text().splitlines()]
    assert [(r["year"], r["institution"]) for r in records] == [
        (1, "government"), (1, "insurer"), (2, "government"), (2, "insurer")]
    for r in records:
        assert r["decision_maker"].startswith("llm:embedded/")
        assert r["status"] in INSTITUTION_STATUSES and r["status"] != "rule"
        assert len(r["attempts"]) == 1 + r["retries"]
        for attempt in r["attempts"]:
            assert attempt["raw"] and (attempt["parsed"] or attempt["parse_error"])
        situation = InstitutionSituation(r["institution"], r["year"], r["facts"],
                                         r["levers_before"], r["in_force_before"])
        assert limit_violations(domain.of(r["institution"]), situation, r["levers"]) == []
        if r["status"] in ("approved", "retry_approved"):
            assert r["levers"] == r["final_proposal"]
        else:
            assert r["fallback"]
    inst = pd.read_csv(run_dir / "institutions_yearly.csv")
    assert list(inst["government_status"]) == [r["status"] for r in records[::2]]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["institutions"]["government"]["llm"]["backend"]["kind"] == "embedded"
