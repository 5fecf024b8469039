"""Helpers of the sweep and SLURM tests: small experiment files with a ``sweep:`` block."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def write_experiment(directory: Path, sweep: dict, *, size: int = 20, years: int = 3,
                     name: str = "tiny_sweep") -> Path:
    """A copy of experiments/baseline.yaml (absolute file references), tiny, with ``sweep``."""
    data = yaml.safe_load((REPO / "experiments" / "baseline.yaml").read_text(encoding="utf-8"))
    data["name"] = name
    data["agent_types"] = str(REPO / "agent_types.yaml")
    data["damage"]["table"] = str((REPO / "experiments" / data["damage"]["table"]).resolve())
    memory = data.setdefault("memory", {})  # the default concepts and texts files are relative
    memory["concepts_file"] = str(REPO / "configs" / "knowledge" / "flood_concepts.yaml")
    memory["texts_file"] = str(REPO / "configs" / "prompts" / "memory.yaml")
    data["population"]["size"] = size
    data["years"] = years
    data["outputs"] = {"plots": False, "progress": False}
    data["sweep"] = sweep
    path = directory / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


#: The 12-run sweep of the issue: 2 sizes x 3 insurance loadings x 2 replicates.
TWELVE = {
    "parameters": {"population.size": [10, 20], "insurance.loading": [1.1, 1.2, 1.3]},
    "replicates": 2,
    "max_workers": 2,
}
