"""``extends:``: an experiment built on another one in the same directory."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from governed_broker.config import ConfigError, load_experiment


@pytest.fixture
def exps(repo_root: Path, tmp_path: Path) -> Path:
    shutil.copytree(repo_root / "configs", tmp_path / "configs")
    shutil.copy(repo_root / "agent_types.yaml", tmp_path / "agent_types.yaml")
    (tmp_path / "experiments").mkdir()
    shutil.copy(repo_root / "experiments" / "baseline.yaml", tmp_path / "experiments")
    return tmp_path / "experiments"


def test_child_merges_mappings_and_replaces_values(exps: Path) -> None:
    (exps / "child.yaml").write_text(
        "extends: baseline.yaml\nname: child\nyears: 3\npopulation: {size: 7}\n")
    child = load_experiment(exps / "child.yaml")
    base = load_experiment(exps / "baseline.yaml")
    assert (child.name, child.years, child.population.size) == ("child", 3, 7)
    # untouched keys of a merged mapping are inherited
    assert child.population.generate == base.population.generate
    assert child.insurance == base.insurance


def test_null_removes_an_inherited_key(exps: Path) -> None:
    (exps / "child.yaml").write_text(
        "extends: baseline.yaml\nname: child\nhazard:\n  mode: fixed\n"
        "  household_sigma: null\n  events: [{year: 2, depth_m: {high: 1.0}}]\n")
    config = load_experiment(exps / "child.yaml")
    assert config.hazard.mode == "fixed" and config.hazard.events[0].year == 2
    assert config.hazard.household_sigma == 0.0  # the default, not the inherited 0.5
    assert config.hazard.zones == load_experiment(exps / "baseline.yaml").hazard.zones


def test_grandchild_chain_and_overrides(exps: Path) -> None:
    (exps / "child.yaml").write_text("extends: baseline.yaml\nname: child\nyears: 3\n")
    (exps / "grandchild.yaml").write_text("extends: child.yaml\nname: grandchild\n")
    config = load_experiment(exps / "grandchild.yaml", ["years=5"])
    assert (config.name, config.years) == ("grandchild", 5)


@pytest.mark.parametrize(("text", "message"), [
    ("extends: ../baseline.yaml\n", "same directory"),
    ("extends: [baseline.yaml]\n", "same directory"),
    ("extends: missing.yaml\n", "file not found"),
    ("extends: loop.yaml\n", "cycle"),
])
def test_bad_extends_is_a_clear_error(exps: Path, text: str, message: str) -> None:
    (exps / "loop.yaml").write_text(text + "name: loop\n")
    with pytest.raises(ConfigError, match=message):
        load_experiment(exps / "loop.yaml")


def test_set_null_removes_a_key_as_extends_does(exps: Path) -> None:
    base = load_experiment(exps / "baseline.yaml")
    assert base.relocation.buyout_share != 1.0
    cleared = load_experiment(exps / "baseline.yaml", ["relocation.buyout_share=null"])
    assert cleared.relocation.buyout_share == 1.0  # the field's default
    (exps / "child.yaml").write_text(
        "extends: baseline.yaml\nname: child\nrelocation: {buyout_share: null}\n")
    assert load_experiment(exps / "child.yaml").relocation == cleared.relocation
    with pytest.raises(ConfigError, match="insurance"):  # a required setting cannot go
        load_experiment(exps / "baseline.yaml", ["insurance=null"])
