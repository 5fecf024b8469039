"""Shared test fixtures (kept minimal: packages add their own in their test folders)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def repo_root() -> Path:
    """The repository root."""
    return REPO_ROOT


class Experiments:
    """Builds small experiment files from ``experiments/baseline.yaml`` in a temporary folder."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path

    def data(self) -> dict[str, Any]:
        """The baseline world at small size (20 households, 10 years, ``name: demo``) as a dict.

        Relative paths made absolute; no plots/progress.
        """
        base = REPO_ROOT / "experiments" / "baseline.yaml"
        data = yaml.safe_load(base.read_text())
        data.update(name="demo", years=10)
        data["population"]["size"] = 20
        data["agent_types"] = str((base.parent / data["agent_types"]).resolve())
        data["damage"]["table"] = str((base.parent / data["damage"]["table"]).resolve())
        configs = REPO_ROOT / "configs"
        data.setdefault("memory", {})["concepts_file"] = str(
            configs / "knowledge" / "flood_concepts.yaml")
        data["memory"]["texts_file"] = str(configs / "prompts" / "memory.yaml")
        data.setdefault("governance", {})["context"] = {"prompts_dir": str(configs / "prompts")}
        data.setdefault("rag", {})["knowledge_dir"] = str(configs / "knowledge")
        data["outputs"] = {"plots": False, "progress": False}
        return copy.deepcopy(data)

    def write(self, data: dict[str, Any] | str, name: str = "exp.yaml") -> Path:
        """Write a dict (as YAML) or raw text to ``tmp_path/name``."""
        path = self.tmp_path / name
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
        return path

    def config(self, overrides: list[str] | tuple[str, ...] = (), data: dict | None = None):
        """A validated experiment (demo by default) with ``--set`` overrides."""
        from governed_broker.config import load_experiment

        return load_experiment(self.write(data or self.data()), list(overrides))


@pytest.fixture
def experiments(tmp_path: Path) -> Experiments:
    """Factory of small experiment files (see ``Experiments``)."""
    return Experiments(tmp_path)
