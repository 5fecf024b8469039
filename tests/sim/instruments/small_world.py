"""The small scripted world of the instrument tests: households from rows, choices scripted."""

from __future__ import annotations

from typing import Any

from governed_broker.sim import FloodModel
from tests.sim.test_model import POP_HEADER, Scripted


def small_world(experiments, rows: list[str], years: int,
                floods: dict[int, dict[str, float]] | None = None) -> dict[str, Any]:
    """The baseline experiment with ``rows`` as its population.

    No memory, a ring of two neighbours, no mandatory purchase, and ``floods`` (``{year: {zone:
    depth_m}}``) as its fixed hazard (None: the baseline's hazard).
    """
    (experiments.tmp_path / "pop.csv").write_text(
        "# synthetic test population\n" + POP_HEADER + "\n" + "\n".join(rows) + "\n")
    data = experiments.data()
    data["years"] = years
    data["memory"]["engine"] = "none"
    data["population"] = {"source": "test", "file": "pop.csv"}
    if floods is not None:
        data["hazard"] = {"source": "test", "mode": "fixed", "events": [
            {"year": y, "depth_m": depth} for y, depth in floods.items()],
            "zones": {"high": {"annual_probability": 0.02, "median_depth_m": 0.3},
                      "low": {"annual_probability": 0.002, "median_depth_m": 0.2}}}
    data["network"] = {"kind": "ring", "k": 2}
    data["insurance"].pop("mandatory_purchase", None)
    return data


def scripted(experiments, data: dict[str, Any],
             script: dict[tuple[int, int], str]) -> tuple[FloodModel, Scripted]:
    """The world of ``data`` and the scripted maker its households choose with."""
    maker = Scripted(script)
    return FloodModel(experiments.config(data=data), maker), maker
