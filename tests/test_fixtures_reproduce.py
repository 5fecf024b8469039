"""Regression guard: today's code reproduces the committed sample runs under ``tests/fixtures/``.

``tests/fixtures/make_fixtures.py`` wrote them with the real CLI; here the same experiments are
run in-process and their tables compared byte for byte. A change meant to alter behaviour must
regenerate the fixtures (``python tests/fixtures/make_fixtures.py``) and say why in its commit;
a change that should not alter behaviour (a refactoring) must leave this test green.

Some fields of ``decisions.jsonl`` are set aside before comparing: wall-clock latencies
(``latency_s``, and ``original_latency_s`` of a reply served from the cache), which differ
between runs of one configuration; ``cached``, which says whether the user-wide response cache
already held the reply (it depends on what ran before on the machine, not on the run); and
``run_id``, which embeds the config hash; the hash covers the bytes of every input file,
comments included, so editing a comment in ``agent_types.yaml`` changes it without changing
any decision.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from governed_broker.config import load_experiment
from governed_broker.runner import run_experiment

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
BASELINE = ROOT / "experiments" / "baseline.yaml"
TABLES = ("agents_yearly.csv", "model_yearly.csv")

#: Fixture -> the ``--set`` overrides ``make_fixtures.py`` ran ``experiments/baseline.yaml`` with.
RUNS = {
    "baseline_run": ["population.size=30", "years=8", "seed=31"],
    "ablation/no_elevation_subsidy/seed_17": [
        "population.size=20", "years=8", "seed=17", "outputs.plots=false",
        "elevation.subsidy_share=0.0"],
    "scripted_broker_run": [
        "population.size=10", "years=3", "decision.maker=llm",
        f"llm={{backend: scripted, script: {FIXTURES / 'scripted_governance.yaml'}, "
        "model: governance-paths, cache: {mode: 'off'}}", "outputs.plots=false",
        "population.generate.zone_shares={high: 0.5, low: 0.5}"],
}


_SET_ASIDE = frozenset({"latency_s", "original_latency_s", "cached", "run_id"})


def _comparable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: None if k in _SET_ASIDE else _comparable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    return value


def _decisions(path: Path) -> list[Any]:
    return [_comparable(json.loads(line)) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("fixture", list(RUNS))
def test_the_committed_sample_run_is_reproduced(fixture: str, tmp_path: Path) -> None:
    config = load_experiment(BASELINE, RUNS[fixture])
    out = run_experiment(config, tmp_path / "run", progress=False).out_dir
    expected = FIXTURES / fixture
    for table in TABLES:
        assert (out / table).read_bytes() == (expected / table).read_bytes(), (
            f"{table} of {fixture} differs from the committed fixture")
    if (expected / "decisions.jsonl").exists():
        assert _decisions(out / "decisions.jsonl") == _decisions(expected / "decisions.jsonl")
