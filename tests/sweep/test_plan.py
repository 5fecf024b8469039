"""Expanding a sweep block into runs: grid, samplers, replicates, ids, invalid points."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from conftest_sweep import TWELVE
from hypothesis import example, given
from hypothesis import strategies as st

from governed_broker.config import ConfigError, load_experiment
from governed_broker.config.sweep import SamplerConfig
from governed_broker.sweep.plan import (
    build_plan,
    format_override,
    replicate_seed,
    run_id_of,
    sample_points,
)


def test_grid_times_replicates_in_order(experiment):
    plan = build_plan(experiment(TWELVE))
    assert len(plan.runs) == 12
    assert [r.index for r in plan.runs] == list(range(12))
    assert [(r.params["population.size"], r.params["insurance.loading"], r.replicate)
            for r in plan.runs[:4]] == [(10, 1.1, 0), (10, 1.1, 1), (10, 1.2, 0), (10, 1.2, 1)]
    assert len({r.run_id for r in plan.runs}) == 12
    assert plan.parameter_names == ["population.size", "insurance.loading"]


def test_run_id_is_hash_of_resolved_config_and_stable(experiment):
    path = experiment(TWELVE)
    plan = build_plan(path)
    again = build_plan(path)
    assert [r.run_id for r in plan.runs] == [r.run_id for r in again.runs]
    for run in plan.runs[:3]:
        config = load_experiment(path, plan.run_overrides(run))
        assert run_id_of(config) == run.run_id
        assert config.seed == run.seed
        assert config.population.size == run.params["population.size"]


def test_editing_an_unswept_setting_changes_every_id(experiment):
    path = experiment(TWELVE)
    before = {r.run_id for r in build_plan(path).runs}
    after = {r.run_id for r in build_plan(path, ["years=4"]).runs}
    assert not before & after


def test_editing_an_input_file_changes_every_id_and_a_host_changes_none(experiment, tmp_path):
    from conftest_sweep import REPO

    agent_types = tmp_path / "agent_types_copy.yaml"
    agent_types.write_bytes((REPO / "agent_types.yaml").read_bytes())
    path = experiment(TWELVE)
    overrides = [f"agent_types={agent_types}", "llm.backend=ollama", "llm.model=gemma3:4b"]
    before = [r.run_id for r in build_plan(path, overrides).runs]
    other_host = [r.run_id for r in build_plan(path, [*overrides, "llm.hosts=[http://x:1]"]).runs]
    assert other_host == before
    with open(agent_types, "a", encoding="utf-8") as handle:
        handle.write("\n# edited\n")
    after = {r.run_id for r in build_plan(path, overrides).runs}
    assert not set(before) & after


def test_replicate_seeds_from_seed_sequence():
    assert replicate_seed(42, 0) == 42
    expected = np.random.SeedSequence(42).spawn(3)[2].generate_state(1, dtype=np.uint64)[0] >> 1
    assert replicate_seed(42, 2) == int(expected)
    seeds = [replicate_seed(42, r) for r in range(50)]
    assert len(set(seeds)) == 50 and all(0 <= s < 2**63 for s in seeds)
    assert replicate_seed(43, 1) != replicate_seed(42, 1)


def test_more_replicates_keep_existing_runs(experiment):
    one = build_plan(experiment({**TWELVE, "replicates": 1}))
    two = build_plan(experiment(TWELVE))
    assert {r.run_id for r in one.runs} <= {r.run_id for r in two.runs}


@pytest.mark.parametrize("method,n,expected", [("lhs", 7, 7), ("sobol", 4, 4 * (2 + 2))])
def test_samplers_cover_bounds_deterministically(method, n, expected):
    sampler = SamplerConfig(method=method, n=n, second_order=False,
                            bounds={"insurance.loading": (1.0, 1.5), "population.size": (5, 9)},
                            integer=["population.size"])
    points = sample_points(sampler, seed=42)
    assert len(points) == expected
    assert points == sample_points(sampler, seed=42)
    assert points != sample_points(sampler, seed=7)
    for p in points:
        assert 1.0 <= p["insurance.loading"] <= 1.5
        assert isinstance(p["population.size"], int) and 5 <= p["population.size"] <= 9


def test_sampler_points_times_grid(experiment):
    sweep = {"parameters": {"memory.engine": ["none", "window"]},
             "sampler": {"method": "lhs", "n": 3, "bounds": {"insurance.loading": [1.0, 1.5]}}}
    plan = build_plan(experiment(sweep))
    assert len(plan.runs) == 6
    assert {r.sample_method for r in plan.runs} == {"lhs"}
    config = load_experiment(plan.experiment, plan.run_overrides(plan.runs[4]))
    assert config.insurance.loading == plan.runs[4].params["insurance.loading"]
    assert config.memory.engine == "window"


def test_dict_field_paths(experiment):
    sweep = {"parameters": {"memory.overrides.decay_rate": [0.1, 0.2],
                            "memory.engine": ["humancentric"]}}
    plan = build_plan(experiment(sweep))
    config = load_experiment(plan.experiment, plan.run_overrides(plan.runs[1]))
    assert config.memory.overrides["decay_rate"] == 0.2


def test_invalid_combination_becomes_failed_run(experiment):
    plan = build_plan(experiment({"parameters": {"population.size": [10, -5]}}))
    assert plan.runs[0].error is None
    assert "population.size" in plan.runs[1].error
    assert plan.runs[1].run_id.startswith("invalid-")


def test_all_invalid_or_unknown_path_is_config_error(experiment):
    with pytest.raises(ConfigError, match="no valid run"):
        build_plan(experiment({"parameters": {"population.size": [-1, -5]}}))
    with pytest.raises(ConfigError, match="populaton"):
        build_plan(experiment({"parameters": {"populaton.size": [10]}}))


def test_no_sweep_block_and_duplicates(experiment, tmp_path):
    path = experiment(TWELVE)
    data = yaml.safe_load(path.read_text())
    del data["sweep"]
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="no 'sweep:' section"):
        build_plan(path)
    with pytest.raises(ConfigError, match="same configuration"):
        build_plan(experiment({"parameters": {"population.size": [10, 10]}}))


@given(st.floats(allow_nan=False, allow_infinity=False)
       | st.integers(-10**12, 10**12) | st.booleans() | st.text(max_size=20))
@example("\x85")  # a YAML line break: must be escaped
def test_override_values_round_trip_through_yaml(value):
    text = format_override("a", value)
    assert yaml.safe_load(text.split("=", 1)[1]) == value


def test_cases_apply_several_settings_together(experiment):
    sweep = {"cases": {"A": {"governance.profile": "disabled", "memory.engine": "window"},
                       "C": {"governance.profile": "strict", "memory.engine": "humancentric"}},
             "parameters": {"insurance.loading": [1.1, 1.2]}, "replicates": 2}
    plan = build_plan(experiment(sweep))
    assert len(plan.runs) == 8
    assert plan.parameter_names == ["case", "governance.profile", "memory.engine",
                                    "insurance.loading"]
    last = plan.runs[-1]
    assert last.params == {"case": "C", "governance.profile": "strict",
                           "memory.engine": "humancentric", "insurance.loading": 1.2}
    config = load_experiment(plan.experiment, plan.run_overrides(last))
    assert config.governance.profile == "strict" and config.memory.engine == "humancentric"
    assert config.seed == last.seed == replicate_seed(42, 1)


def test_a_path_in_cases_and_grid_is_rejected(experiment):
    sweep = {"cases": {"A": {"memory.engine": "window"}},
             "parameters": {"memory.engine": ["none"]}}
    with pytest.raises(ConfigError, match="more than one"):
        build_plan(experiment(sweep))
