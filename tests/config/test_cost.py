"""The dry cost estimate of a run, and the limits above which a run must be confirmed."""

from __future__ import annotations

from pathlib import Path

import pytest

from governed_broker.config.base import ConfigError
from governed_broker.config.cost import (
    EMBEDDED_CALL_S,
    REASKS_PER_DECISION,
    estimate_run_cost,
    format_run_cost,
)
from governed_broker.config.hashing import config_hash
from governed_broker.config.loader import load_experiment

REPO = Path(__file__).resolve().parents[2]


def test_baseline_costs_household_years_and_no_llm_calls() -> None:
    cost = estimate_run_cost(load_experiment(REPO / "experiments" / "baseline.yaml"))
    assert (cost.households, cost.years, cost.household_years) == (100, 20, 2000)
    assert cost.llm_calls == 0 and cost.embedded_hours == 0
    assert format_run_cost(cost) == "100 households x 20 years = 2,000 household-years"


def test_demo_counts_every_kind_of_call() -> None:
    cost = estimate_run_cost(load_experiment(REPO / "experiments" / "demo.yaml"))
    config = load_experiment(REPO / "experiments" / "demo.yaml")
    decisions = config.population.size * config.years
    reflections = config.population.size * (config.years // config.reflection.interval_years)
    reasks = round(decisions * REASKS_PER_DECISION)
    assert (cost.decision_calls, cost.reask_calls, cost.reflection_calls) == (
        decisions, reasks, reflections)
    assert cost.llm_calls == decisions + reasks + reflections
    assert cost.embedded_hours == pytest.approx(cost.llm_calls * EMBEDDED_CALL_S / 3600)
    line = format_run_cost(cost)
    assert "\n" not in line and f"{cost.llm_calls} LLM calls" in line
    assert f"{reasks} re-asks expected" in line and "2 idle CPU cores" in line


def test_institutions_and_query_expansions_are_counted(experiments) -> None:
    config = load_experiment(REPO / "experiments" / "demo.yaml",
                             ["rag.enabled=true", "rag.mqe=true", "rag.hyde=true"])
    cost = estimate_run_cost(config)
    assert cost.expansion_calls == 2 * cost.decision_calls
    assert cost.calls_per_decision == pytest.approx(1 + REASKS_PER_DECISION + 2, abs=0.05)


def test_no_time_is_promised_for_a_backend_other_than_the_embedded_model() -> None:
    config = load_experiment(REPO / "experiments" / "demo.yaml",
                             ["llm.backend=ollama", "llm.model=gemma3:4b"])
    line = format_run_cost(estimate_run_cost(config))
    assert "LLM calls" in line and "CPU cores" not in line


def test_a_csv_population_is_counted_by_rows(experiments, repo_root) -> None:
    data = experiments.data()
    csv = repo_root / "configs" / "populations" / "synthetic_100.csv"
    data["population"] = {"source": "s", "file": str(csv)}
    assert estimate_run_cost(experiments.config(data=data)).households == 100


@pytest.mark.parametrize(("overrides", "states", "confirm"), [
    (["population.size=10000000"], "10,000,000 households x 20 years",
     "--set limits.max_household_years=200000000"),
    (["years=1000", "population.size=6", "reflection.interval_years=2",
      "limits.max_llm_calls=5000"], "9,000 decision and reflection calls",
     "--set limits.max_llm_calls=9000"),
])
def test_a_run_above_its_limits_states_its_cost_and_how_to_confirm(overrides, states,
                                                                    confirm) -> None:
    path = REPO / "experiments" / ("demo.yaml" if "years=1000" in overrides else "baseline.yaml")
    with pytest.raises(ConfigError) as info:
        load_experiment(path, overrides)
    assert states in str(info.value) and confirm in str(info.value), str(info.value)
    confirmed = load_experiment(path, [*overrides, confirm.removeprefix("--set ")])
    assert estimate_run_cost(confirmed).household_years >= 6000


def test_default_limits_are_documented_values() -> None:
    config = load_experiment(REPO / "experiments" / "baseline.yaml")
    assert config.limits.max_household_years == 5_000_000
    assert config.limits.max_llm_calls == 20_000


def test_limits_do_not_change_the_config_hash() -> None:
    path = REPO / "experiments" / "baseline.yaml"
    plain = config_hash(load_experiment(path))
    assert config_hash(load_experiment(path, ["limits.max_llm_calls=5"])) == plain
    assert config_hash(load_experiment(path, ["seed=43"])) != plain


@pytest.mark.parametrize("value", ["true", ".inf", "-1", "x"])
def test_limits_must_be_whole_numbers(value) -> None:
    with pytest.raises(ConfigError, match="limits.max_llm_calls"):
        load_experiment(REPO / "experiments" / "baseline.yaml",
                        [f"limits.max_llm_calls={value}"])
