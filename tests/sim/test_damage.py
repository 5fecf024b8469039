"""Depth-damage tables: interpolation, clamping, sourced table files."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from governed_broker.config import ConfigError
from governed_broker.config.damage import DamageCurve, load_damage_table
from governed_broker.sim.damage import damages_usd

TABLES = ("huizinga_log_fit", "fema_one_story_no_basement")


@pytest.fixture(params=TABLES)
def table(request, repo_root: Path):
    return load_damage_table(repo_root / "configs" / "damage" / f"{request.param}.yaml")


def test_linear_interpolation_between_points() -> None:
    curve = DamageCurve(depth_m=[0.0, 1.0, 3.0], fraction=[0.0, 0.5, 0.9])
    got = curve(np.array([0.5, 1.0, 2.0, 2.5]))
    np.testing.assert_allclose(got, [0.25, 0.5, 0.7, 0.8])


def test_dry_and_beyond_last_point() -> None:
    curve = DamageCurve(depth_m=[0.0, 1.0], fraction=[0.1, 0.6])
    np.testing.assert_allclose(curve(np.array([-1.0, 0.0, 5.0])), [0.0, 0.0, 0.6])


def test_huizinga_table_matches_the_log_fit(repo_root: Path) -> None:
    t = load_damage_table(repo_root / "configs" / "damage" / "huizinga_log_fit.yaml")
    for depth in (0.05, 0.5, 1.0, 2.0, 5.0):
        expected = 0.1746 * math.log(depth) + 0.6483
        assert t.structure(np.array([depth]))[0] == pytest.approx(expected, abs=1e-4)
    assert t.structure(np.array([7.0]))[0] == 1.0


def test_fema_table_points_converted_from_feet(repo_root: Path) -> None:
    t = load_damage_table(repo_root / "configs" / "damage" / "fema_one_story_no_basement.yaml")
    for feet, fraction in ((2, 0.288), (4, 0.492), (8, 0.670), (15, 0.868)):
        assert t.structure(np.array([feet * 0.3048]))[0] == pytest.approx(fraction)


@given(st.lists(st.floats(min_value=0.0, max_value=20.0), min_size=2, max_size=20))
def test_fractions_are_monotone_and_bounded(depths) -> None:
    curve = DamageCurve(depth_m=[0.0, 0.5, 2.0, 6.0], fraction=[0.0, 0.4, 0.8, 1.0])
    d = np.sort(np.array(depths))
    f = curve(d)
    assert np.all((f >= 0) & (f <= 1)) and np.all(np.diff(f) >= -1e-12)


def test_damages_in_dollars(table) -> None:
    d_s, d_c = damages_usd(table, np.array([0.0, 1.0]), np.array([200e3, 200e3]),
                           np.array([100e3, 100e3]))
    assert d_s[0] == 0 and d_c[0] == 0
    assert d_s[1] == pytest.approx(200e3 * table.structure(np.array([1.0]))[0])


def test_bad_table_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nsource: y\nstructure: {depth_m: [0, 1], fraction: [0, 1.5]}\n"
                    "contents: {depth_m: [0, 1], fraction: [0, 1]}\n")
    with pytest.raises(ConfigError, match="structure"):
        load_damage_table(path)
