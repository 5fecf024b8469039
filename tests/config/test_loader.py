"""Experiment loading: overrides, path resolution, resolved dump, error messages."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from governed_broker.config import (
    ConfigError,
    ExperimentConfig,
    dump_resolved,
    load_agent_types,
    load_experiment,
)


def test_baseline_experiment_loads_with_defaults(repo_root: Path) -> None:
    config = load_experiment(repo_root / "experiments" / "baseline.yaml")
    assert config.name == "baseline" and config.years == 20
    assert config.population.size == 100 and config.hazard.mode == "stochastic"
    assert config.network.kind == "small_world"
    assert config.decision.baseline.beta_max == 10.0
    assert config.resolve_path(config.agent_types) == (repo_root / "agent_types.yaml").resolve()


def test_relative_paths_resolve_against_the_yaml_directory(repo_root: Path, tmp_path: Path,
                                                           monkeypatch) -> None:
    (tmp_path / "exps").mkdir()
    shutil.copytree(repo_root / "configs", tmp_path / "configs")
    shutil.copy(repo_root / "agent_types.yaml", tmp_path / "agent_types.yaml")
    for name in ("demo.yaml", "baseline.yaml"):  # demo extends baseline
        shutil.copy(repo_root / "experiments" / name, tmp_path / "exps" / name)
    monkeypatch.chdir(tmp_path / "configs")  # a different working directory
    config = load_experiment(Path("../exps/demo.yaml"))
    assert config.resolve_path(config.damage.table).is_file()
    assert config.damage.table == Path("../configs/damage/fema_one_story_no_basement.yaml")


def test_overrides_reach_nested_and_dict_fields(experiments) -> None:
    config = experiments.config([
        "seed=7", "population.size=33", "hazard.zones.high.annual_probability=0.5",
        "hazard.zones.high.flooded_share=1",
        "memory.engine=humancentric", "memory.overrides.decay_rate=0.2",
        "sweep.parameters.seed=[1, 2]",
        "network.kind=ring", "description=hello world",
    ])
    assert config.seed == 7 and config.population.size == 33
    assert config.hazard.zones["high"].annual_probability == 0.5
    assert config.memory.overrides == {"decay_rate": 0.2}
    assert config.sweep.parameters == {"seed": [1, 2]}
    assert config.network.kind == "ring" and config.description == "hello world"


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("seed", "expected KEY.PATH=VALUE"),
        ("=3", "empty key path"),
        ("populaton.size=3", "unknown setting 'populaton'"),
        ("population.sise=3", "allowed keys here"),
        ("seed.x=1", "cannot set a key inside"),
        ("population.size=-5", "population.size"),
        ("years=many", "years"),
    ],
)
def test_bad_overrides_are_config_errors(experiments, override: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        experiments.config([override])
    assert needle in str(info.value)


def test_errors_name_file_field_value_and_allowed(experiments) -> None:
    data = experiments.data()
    data["hazard"]["mode"] = "sometimes"
    path = experiments.write(data)
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    message = str(info.value)
    assert str(path) in message and "hazard.mode" in message
    assert "'sometimes'" in message and "'fixed', 'stochastic' or 'raster'" in message


def test_unknown_key_lists_allowed_keys(experiments) -> None:
    data = experiments.data()
    data["insurance"]["premium_rate"] = 0.02
    with pytest.raises(ConfigError) as info:
        load_experiment(experiments.write(data))
    assert "insurance.premium_rate" in str(info.value)
    assert "rate_structure_per_1000_usd" in str(info.value)


def test_population_zone_without_hazard_is_an_error(experiments) -> None:
    data = experiments.data()
    data["population"]["generate"]["zone_shares"] = {"high": 0.5, "coast": 0.5}
    data["population"]["generate"]["initial_insured"].pop("low")
    data["population"]["generate"]["initial_elevated"].pop("low")
    with pytest.raises(ConfigError, match="coast"):
        load_experiment(experiments.write(data))


def test_resolved_dump_round_trips(experiments) -> None:
    config = experiments.config(["seed=3"])
    text = dump_resolved(config)
    assert text.startswith("# Resolved configuration")
    again = ExperimentConfig.model_validate(yaml.safe_load(text))
    assert again.model_dump() == config.model_dump()


def test_population_csv_is_validated_at_load(experiments, repo_root: Path) -> None:
    source = (repo_root / "configs" / "populations" / "synthetic_100.csv").read_text()
    lines = source.splitlines()
    header_at = next(i for i, line in enumerate(lines) if not line.startswith("#"))
    row = lines[header_at + 1].split(",")
    row[0] = "landlord"
    lines[header_at + 1] = ",".join(row)
    bad = "\n".join(lines) + "\n"
    (experiments.tmp_path / "pop.csv").write_text(bad)
    data = experiments.data()
    data["population"] = {"source": "test", "file": "pop.csv"}
    with pytest.raises(ConfigError) as info:
        load_experiment(experiments.write(data))
    assert "row 1, column 'tenure'" in str(info.value) and "landlord" in str(info.value)


def test_agent_types_file_validates(repo_root: Path) -> None:
    types = load_agent_types(repo_root / "agent_types.yaml")
    assert types.default_action == "do_nothing"
    assert types.actions["elevate_house"].tenure == ["owner"]
    assert types.pmt_labels.label(0.0) == "VL" and types.pmt_labels.label(0.2) == "L"
    assert types.pmt_labels.label(0.99) == "VH"
    assert list(types.pmt_labels.label_array([0.1, 0.5, 0.79, 0.8])) == ["VL", "M", "H", "VH"]


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda d: d["actions"]["buy_insurance"].update(default=True), "exactly one action"),
        (lambda d: d["actions"]["relocate"].update(effect="teleport"), "actions.relocate.effect"),
        (lambda d: d["pmt_labels"].update(thresholds=[0.5, 0.4, 0.6, 0.8]), "strictly increasing"),
        (lambda d: d["actions"]["do_nothing"].update(tenure=[]), "actions.do_nothing.tenure"),
        (lambda d: d["governance"]["rules"][3]["when"].update(threat=["HIGH"]),
         "when.threat label(s) 'HIGH' are not on the pmt_labels scale"),
        (lambda d: d["pmt_labels"]["words"].pop("M"), "words needs one entry per label"),
        (lambda d: d["pmt_labels"]["words"].update(L=["high"]), "stands for both"),
        (lambda d: d["pmt_labels"].update(labels=["VL", "L", "L", "H", "VH"]), "distinct"),
        (lambda d: d["pmt_labels"].update(labels=["VL", "L", "M|N", "H", "VH"]), "pattern"),
    ],
)
def test_bad_agent_types_are_config_errors(repo_root: Path, tmp_path: Path, edit, needle) -> None:
    data = yaml.safe_load((repo_root / "agent_types.yaml").read_text())
    edit(data)
    path = tmp_path / "agent_types.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as info:
        load_agent_types(path)
    assert needle in str(info.value) and str(path) in str(info.value)


@pytest.mark.parametrize(("override", "expected"), [
    ("memory.overrides.decay_rat=0.2", "unknown parameter(s) ['decay_rat']"),
    ("memory.overrides.decay_rate=-5", "memory.overrides"),
])
def test_memory_override_typos_are_configuration_errors(experiments, override, expected) -> None:
    with pytest.raises(ConfigError, match=re.escape(expected)):
        experiments.config(["memory.engine=humancentric", override])


def test_memory_overrides_without_an_engine_are_refused(experiments) -> None:
    with pytest.raises(ConfigError, match="would change nothing"):
        experiments.config(["memory.engine=none", "memory.overrides.decay_rate=0.2"])


@pytest.mark.parametrize(("drop", "needle"), [
    (("trust",), "'trust'"),
    (("trust", "neighbours_otherwise"), "trust.neighbours_otherwise"),
    (("decision", "baseline"), "decision.baseline (the rule's parameters) is missing"),
    (("decision", "baseline", "horizon_years"), "decision.baseline.horizon_years"),
])
def test_behavioural_numbers_come_from_the_yaml(experiments, drop, needle) -> None:
    """Trust steps and the baseline's parameters have no Python defaults.

    An experiment that leaves one out is a configuration error naming it (the numbers and their
    source live in experiments/baseline.yaml).
    """
    data = experiments.data()
    section = data
    for key in drop[:-1]:
        section = section[key]
    del section[drop[-1]]
    with pytest.raises(ConfigError, match=re.escape(needle)):
        experiments.config(data=data)


def test_an_llm_experiment_needs_no_baseline_parameters(experiments, repo_root) -> None:
    data = experiments.data()
    del data["decision"]["baseline"]
    data["decision"]["maker"] = "llm"
    data["llm"] = {"backend": "scripted", "model": "governance-paths",
                   "script": str(repo_root / "tests" / "fixtures" / "scripted_governance.yaml")}
    assert experiments.config(data=data).decision.baseline is None


def test_rule_severity_names_a_rule_of_the_domain(experiments) -> None:
    config = experiments.config(["governance.rule_severity.flooded_threat_very_low=ERROR"])
    assert config.governance.rule_severity == {"flooded_threat_very_low": "ERROR"}
    assert experiments.config(["governance.rule_severity.majority_deviation=off"]
                              ).governance.rule_severity == {"majority_deviation": "off"}
    with pytest.raises(ConfigError) as info:
        experiments.config(["governance.rule_severity.flooded_threat_low=ERROR"])
    message = str(info.value)
    assert "governance.rule_severity" in message and "'flooded_threat_low'" in message
    assert "flooded_threat_very_low" in message  # the rules it could have meant
    with pytest.raises(ConfigError, match="governance.rule_severity"):
        experiments.config(["governance.rule_severity.majority_deviation=FATAL"])
