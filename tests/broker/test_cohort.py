"""Cohort mode: cohorts by binned situation, k seeded conversations per cohort.

One seeded draw per member, per-member feasibility, one audit record per household, cohorts.jsonl,
resume.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from broker_helpers import make_situation

from governed_broker.broker.cohort import cohort_key, describe_key
from governed_broker.config.base import ConfigError
from governed_broker.runner import run_experiment
from governed_broker.sim.model import FloodModel

REPO = Path(__file__).resolve().parents[2]
STOCHASTIC = REPO / "benchmarks" / "stochastic_llm.yaml"
BINS = "cohort.bins={savings_usd: [5000, 20000], floods_experienced: [1, 3]}"


def _settings(households: int = 60, years: int = 4, cohort: bool = True) -> list[str]:
    llm = {"backend": "scripted", "model": "stochastic", "script": str(STOCHASTIC),
           "cache": {"mode": "off"}}
    return [f"population.size={households}", f"years={years}", "memory.engine=humancentric",
            "decision.maker=llm", f"llm={json.dumps(llm)}", "reflection.enabled=true",
            "hazard.zones.high.annual_probability=0.5", "hazard.zones.high.flooded_share=1",
            f"cohort.enabled={str(cohort).lower()}",
            BINS]


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_key_is_the_categorical_facts_and_the_bins() -> None:
    bins = {"savings_usd": [5000.0, 20000.0], "years_since_flood": [2.0]}
    a = make_situation(agent_id=1, savings_usd=6000.0, years_since_flood=None)
    assert cohort_key(a, bins) == cohort_key(make_situation(agent_id=2, savings_usd=19999.0,
                                                            years_since_flood=None), bins)
    for other in (make_situation(savings_usd=20000.0, years_since_flood=None),
                  make_situation(savings_usd=6000.0, years_since_flood=1),
                  make_situation(savings_usd=6000.0, years_since_flood=None, flooded=False),
                  make_situation(savings_usd=6000.0, years_since_flood=None,
                                 affordable={"elevate_house": False})):
        assert cohort_key(other, bins) != cohort_key(a, bins)
    words = describe_key(cohort_key(a, bins), bins)
    assert words["savings_usd"] == [5000.0, 20000.0] and words["years_since_flood"] is None
    assert words["tenure"] == "owner" and words["affordable"]["do_nothing"] is True


def test_a_cohort_run_decides_every_household_with_fewer_calls(experiments, tmp_path) -> None:
    full = run_experiment(experiments.config(_settings(cohort=False)), tmp_path / "full",
                          progress=False).out_dir
    out = run_experiment(experiments.config(_settings()), tmp_path / "cohort",
                         progress=False).out_dir
    manifest = json.loads((out / "manifest.json").read_text())
    calls = manifest["llm"]["stats"]["calls"]["calls"]
    full_calls = json.loads((full / "manifest.json").read_text())["llm"]["stats"]["calls"]["calls"]
    assert calls < full_calls
    decisions, cohorts = _lines(out / "decisions.jsonl"), _lines(out / "cohorts.jsonl")
    agents = (out / "agents_yearly.csv").read_text().splitlines()[1:]
    assert len(decisions) == len(agents)  # one record per household-year
    for year in range(1, 5):
        sizes = [c["size"] for c in cohorts if c["year"] == year]
        members = [a for c in cohorts if c["year"] == year for a in c["members"]]
        assert sum(sizes) == len(members) == len(set(members))
        assert sorted(members) == sorted(d["agent_id"] for d in decisions if d["year"] == year)
    assert max(c["size"] for c in cohorts) > 1
    for c in cohorts:  # at most k samples, never more than members; draws add up
        assert len(c["samples"]) == min(5, c["size"])
        assert sum(s["drawn"] for s in c["samples"]) == c["size"]
        assert c["representative"] == min(c["members"])
    stats = manifest["llm"]["cohort"]
    assert stats["household_years"] == len(decisions) and stats["samples"] == 5
    assert "cohort k=5" in manifest["decision_maker"]


def test_members_take_their_drawn_sample_unless_they_cannot(experiments, tmp_path) -> None:
    out = run_experiment(experiments.config(_settings()), tmp_path / "run",
                         progress=False).out_dir
    by_cohort = {(c["year"], c["cohort"]): c for c in _lines(out / "cohorts.jsonl")}
    outcomes = Counter()
    for d in _lines(out / "decisions.jsonl"):
        info = d["cohort"]
        sample = by_cohort[(d["year"], info["id"])]["samples"][info["sample"]]
        assert d["threat_label"] == sample["threat_label"]
        if d["backstop"] is None:
            assert d["executed_action"] == sample["action"]
            outcomes["as sampled"] += 1
        else:  # refused for this member only: its own situation, the fallback executed
            assert d["status"] == "rejected" and d["executed_action"] == "do_nothing"
            outcomes["refused"] += 1
        assert d["attempts"], "the drawn conversation's attempts are in the member's record"
    assert outcomes["as sampled"] > 0
    reflections = _lines(out / "reflections.jsonl")
    assert all("cohort" in r for r in reflections)
    assert len({r["cohort"]["representative"] for r in reflections}) < len(reflections)


def test_cohort_runs_are_reproducible_and_resume_identically(experiments, tmp_path,
                                                             monkeypatch) -> None:
    config = experiments.config(_settings(households=40, years=4))
    reference = run_experiment(config, tmp_path / "reference", progress=False).out_dir
    again = run_experiment(config, tmp_path / "again", progress=False).out_dir
    real = FloodModel.reflection_phase

    def crash(self, *args, **kwargs):
        if self.year == 3:
            raise RuntimeError("killed")
        return real(self, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(FloodModel, "reflection_phase", crash)
        with pytest.raises(RuntimeError, match="killed"):
            run_experiment(config, tmp_path / "resumed", progress=False)
    resumed = run_experiment(config, tmp_path / "resumed", progress=False)
    assert resumed.resumed_from_year == 2
    for name in ("agents_yearly.csv", "model_yearly.csv", "cohorts.jsonl"):
        expected = (reference / name).read_bytes()
        assert (again / name).read_bytes() == expected, name
        assert (resumed.out_dir / name).read_bytes() == expected, name


def test_cohort_mode_needs_the_llm_broker_and_known_bins(experiments) -> None:
    with pytest.raises(ConfigError, match="cohort.enabled.*'baseline'"):
        experiments.config(["cohort.enabled=true"])
    with pytest.raises(ConfigError, match="unknown field 'savings'"):
        experiments.config(["cohort.bins={savings: [1, 2]}"])
    with pytest.raises(ConfigError, match="finite and increasing"):
        experiments.config(["cohort.bins={savings_usd: [2, 1]}"])


def test_scripted_choices_are_checked_when_the_experiment_loads(experiments, tmp_path) -> None:
    script = tmp_path / "bad.yaml"
    script.write_text("- {pattern: x, choices: [{weight: -1, reply: a}]}\n")
    llm = {"backend": "scripted", "script": str(script), "cache": {"mode": "off"}}
    with pytest.raises(ConfigError, match="rule 0 must be a mapping"):
        experiments.config(["decision.maker=llm", f"llm={json.dumps(llm)}"])
