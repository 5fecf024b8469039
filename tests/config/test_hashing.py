"""The run hash: every setting that can change an output, none that cannot."""

from __future__ import annotations

from pathlib import Path

import pytest

from governed_broker.config import load_experiment
from governed_broker.config.hashing import OPERATIONAL, config_hash

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "experiments" / "demo.yaml"


@pytest.mark.parametrize("setting", [
    "llm.timeout_s=900", "llm.retries=7", "llm.patience_s=30", "llm.backoff_s=5",
    "llm.backoff_max_s=60", "llm.health_check=false", "llm.auto_pull=false",
    "llm.keep_alive=5m", "outputs.progress=false",
])
def test_operational_settings_leave_the_hash(setting: str) -> None:
    # raising the timeout, as its error message advises, keeps a partial run resumable
    assert config_hash(load_experiment(DEMO, [setting])) == config_hash(load_experiment(DEMO))


@pytest.mark.parametrize("setting", [
    "llm.temperature=0.2", "llm.num_ctx=8192", "llm.max_tokens=128", "llm.concurrency=2",
    "seed=43", "governance.max_retries=1", "outputs.plots=false",
])
def test_settings_that_can_change_outputs_stay_in(setting: str) -> None:
    assert config_hash(load_experiment(DEMO, [setting])) != config_hash(load_experiment(DEMO))


def test_operational_names_are_settings() -> None:
    config = load_experiment(DEMO).model_dump()
    for section, keys in OPERATIONAL.items():
        if keys is not None:
            assert set(keys) <= set(config[section]), section


def test_no_policy_change_hashes_as_before_it_existed_and_a_change_counts() -> None:
    from governed_broker.config.hashing import run_settings

    plain = load_experiment(DEMO)
    assert "policy_change" not in run_settings(plain)
    changed = load_experiment(DEMO, [
        "policy_change={from_year: 3, settings: {elevation.subsidy_share: 0.75}}"])
    assert run_settings(changed)["policy_change"]["from_year"] == 3
    assert config_hash(changed) != config_hash(plain)
