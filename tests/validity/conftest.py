"""Fixtures of the validity tests: the demo experiment answered by scripted households."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from governed_broker.config import load_experiment
from governed_broker.config.resolved import ResolvedExperiment, resolve_experiment

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parents[1] / "benchmarks"

#: A scripted model for runs and the CLI: medium appraisals, always do nothing.
CONSTANT_SCRIPT = [{"pattern": ".", "reply": {
    "threat_appraisal": {"label": "M", "reason": "scripted"},
    "coping_appraisal": {"label": "M", "reason": "scripted"},
    "decision": "do_nothing", "reason": "scripted: nothing this year"}}]


#: Replies per vignette of the small battery the scripted tests use (the shipped battery asks
#: hundreds of decisions; tests/validity/test_reference.py runs it whole).
SMALL_REPLICATES = 4


def small_battery(target: Path, replicates: int = SMALL_REPLICATES) -> Path:
    """A copy of the shipped battery in ``target`` asking each vignette few times.

    At most ``replicates`` times (``max_replicates``); every test, level and grid kept.
    """
    shutil.copytree(HERE.parent.parent / "configs" / "validity", target)
    tests = yaml.safe_load((target / "tests.yaml").read_text())
    tests["max_replicates"] = replicates
    (target / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    return target


@pytest.fixture
def scripted_file(experiments, tmp_path: Path) -> Path:
    """The small test world decided by the constant scripted model, as a YAML file.

    Memory on, cards and response cache in ``tmp_path``, the small battery.
    """
    script = tmp_path / "constant.yaml"
    script.write_text(yaml.safe_dump(CONSTANT_SCRIPT))
    data = experiments.data()
    data.update(years=2)
    data["population"]["size"] = 4
    data["decision"] = {"maker": "llm"}
    data["llm"] = {"backend": "scripted", "script": str(script),
                   "cache": {"path": str(tmp_path / "responses.sqlite")}}
    data["memory"]["engine"] = "humancentric"
    data["validity"] = {"battery_dir": str(small_battery(tmp_path / "battery")),
                        "cards_dir": str(tmp_path / "cards")}
    return experiments.write(data)


@pytest.fixture
def scripted_experiment(scripted_file: Path):
    """A function of ``--set`` overrides giving ``scripted_file`` as a ResolvedExperiment."""

    def make(*overrides: str) -> ResolvedExperiment:
        return resolve_experiment(load_experiment(scripted_file, list(overrides)))

    return make


@pytest.fixture
def load_benchmark() -> Callable[[str], ModuleType]:
    """Import a script of benchmarks/ by its name (the folder is not a package)."""
    def load(name: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return load
