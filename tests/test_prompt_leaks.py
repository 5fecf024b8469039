"""What households are told, end to end: no fact from outside their memory or the declared map.

A governed run with the scripted backend records every prompt (``governance.audit.prompts``);
the floods of a fixed schedule come in year 1 only, so in later years a prompt may mention them
only through a memory that holds them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from governed_broker.runner import run_experiment

SCRIPT = Path(__file__).resolve().parent / "fixtures" / "scripted_resume.yaml"


def _prompts(experiments, tmp_path, engine: str, schedule: list[dict]) -> list[dict]:
    llm = {"backend": "scripted", "model": "leaks", "script": str(SCRIPT),
           "cache": {"mode": "off"}}
    data = experiments.data()
    data["hazard"] = {**data["hazard"], "mode": "fixed", "events": schedule,
                      "household_sigma": 0.0}
    data["hazard"]["zones"] = {z: {**spec, "flooded_share": 1.0}
                               for z, spec in data["hazard"]["zones"].items()}
    # nobody insured at the start: no lender requires a policy (required households start insured)
    data["insurance"].pop("mandatory_purchase", None)
    config = experiments.config(["years=3", "population.size=6", "decision.maker=llm",
                                 f"llm={json.dumps(llm)}", f"memory.engine={engine}",
                                 "governance.audit.prompts=true",
                                 "population.generate.zone_shares={high: 1.0}",
                                 "population.generate.initial_insured={}",
                                 "population.generate.initial_elevated={}"], data=data)
    out = run_experiment(config, tmp_path / engine, progress=False).out_dir
    return [json.loads(line) for line in (out / "decisions.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("engine", ["none", "window"])
def test_a_memoryless_arm_is_never_told_an_earlier_flood(experiments, tmp_path, engine):
    records = _prompts(experiments, tmp_path, engine,
                       [{"year": 1, "depth_m": {"high": 0.9}}])
    first = [r for r in records if r["year"] == 1]
    assert all(r["state_before"]["flooded"] for r in first)  # everyone flooded in year 1
    assert "A flood reached your home" in first[0]["prompt"][1]["content"]
    for record in (r for r in records if r["year"] == 3):
        user = record["prompt"][1]["content"]
        assert "flood reached your home" not in user and "0.9" not in user
        assert "flooded" not in user.lower(), user  # no history line, no memory of year 1
        # the chance stated is the map's (2 % a year), not the schedule's 1 in 3
        assert "1 in 50 (2%)" in user


def test_human_centric_memory_carries_the_flood_forward(experiments, tmp_path):
    records = _prompts(experiments, tmp_path, "humancentric",
                       [{"year": 1, "depth_m": {"high": 0.9}}])
    later = [r["prompt"][1]["content"] for r in records if r["year"] == 3]
    assert any("flooded 0.9 m deep" in user for user in later)
