"""Hazard modes come from a name registry.

A new one is a ``Hazard`` subclass plus one ``HAZARD_MODES`` entry.

``ToyHazard`` below is such a class (here, in this test file): every zone floods 0.5 m deep in
even years and stays dry in odd ones. Registering it lets a run use it end to end.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from governed_broker.config.base import ConfigError
from governed_broker.config.world import HAZARD_MODES, HazardConfig
from governed_broker.runner import run_experiment
from governed_broker.sim.hazard import (
    FixedScheduleHazard,
    Hazard,
    StochasticHazard,
    make_hazard,
)

DEPTH_M = 0.5


class ToyHazard(Hazard):
    """Every zone floods ``DEPTH_M`` deep in even years."""

    def _zone_statistics(self) -> tuple[np.ndarray, np.ndarray]:
        n = len(self.zones)
        return np.full(n, 0.5), np.full(n, DEPTH_M)

    def zone_depths(self, year: int) -> np.ndarray:
        return np.full(len(self.zones), DEPTH_M if year % 2 == 0 else 0.0)


@pytest.fixture
def toy(monkeypatch) -> None:
    """``ToyHazard`` registered as ``toy``."""
    monkeypatch.setitem(HAZARD_MODES, "toy", f"{__name__}:ToyHazard")


def test_a_registered_mode_runs_an_experiment(experiments, tmp_path, toy) -> None:
    config = experiments.config(["years=4", "population.size=5",
                                 'hazard={"source": "t", "mode": "toy"}'])
    out = run_experiment(config, tmp_path / "run", progress=False).out_dir
    rows = pd.read_csv(out / "model_yearly.csv")
    assert rows["flood_occurred"].tolist() == [False, True, False, True]
    assert rows["mean_depth_flooded_m"].tolist()[1::2] == [DEPTH_M, DEPTH_M]


def test_the_factory_builds_the_registered_mode(toy) -> None:
    hazard = make_hazard(HazardConfig(source="t", mode="toy"), ["a", "b"], 1, 4)
    assert isinstance(hazard, ToyHazard)
    np.testing.assert_allclose(hazard.household_depths(2, np.array([0, 1])), [0.5, 0.5])
    fixed = HazardConfig(source="t", mode="fixed", events=[{"year": 1, "depth_m": {"a": 1}}],
                         zones={"a": {"annual_probability": 0.1, "median_depth_m": 1}})
    assert type(make_hazard(fixed, ["a"], 1, 4)) is FixedScheduleHazard
    stochastic = HazardConfig(source="t", mode="stochastic",
                              zones={"a": {"annual_probability": 0.1, "median_depth_m": 1}})
    assert type(make_hazard(stochastic, ["a"], 1, 4)) is StochasticHazard


def test_an_unknown_mode_is_a_configuration_error(experiments) -> None:
    with pytest.raises(ConfigError, match="unknown hazard mode 'tidal'; registered: "
                                          "'fixed', 'stochastic' or 'raster'"):
        experiments.config(["hazard.mode=tidal"])


def test_a_broken_registry_entry_says_so(monkeypatch) -> None:
    monkeypatch.setitem(HAZARD_MODES, "ghost", "no_such_module:Hazard")
    config = HazardConfig(source="t", mode="ghost")
    with pytest.raises(ConfigError, match="cannot load its class 'no_such_module:Hazard'"):
        make_hazard(config, ["a"], 1, 4)
