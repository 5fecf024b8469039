"""A further wave's bounds from an earlier wave's scored points (calibration.refocus)."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governed_broker.calibration.refocus import WaveSettings, refocus
from governed_broker.config import ConfigError

BOUNDS = {"a.x": (0.0, 10.0), "b.y": (-1.0, 1.0)}


def _wave(tmp_path, rows, summary=None):
    folder = tmp_path / "wave1" / "calibration"
    folder.mkdir(parents=True)
    pd.DataFrame(rows).to_csv(folder / "points.csv", index=False)
    if summary is not None:
        (folder / "summary.json").write_text(json.dumps(summary))
    return tmp_path / "wave1"


def _points(xs, ys, scores):
    return [{"param.a.x": x, "param.b.y": y, "n_runs": 3, "max_implausibility": i}
            for x, y, i in zip(xs, ys, scores, strict=True)]


def test_the_box_of_the_kept_points_widened_and_clipped(tmp_path) -> None:
    previous = _wave(tmp_path, _points([1.0, 4.0, 9.0], [-0.9, 0.2, 0.5], [2.5, 3.0, 7.0]))
    wave = refocus(WaveSettings(previous, margin=0.1), BOUNDS, default_cutoff=3.0)
    assert (wave.kept, wave.of, wave.number, wave.cutoff) == (2, 3, 2, 3.0)
    # x: 1..4 widened by 1 (a tenth of 10); y: -0.9..0.2 widened by 0.2, clipped at -1
    assert wave.bounds == {"a.x": pytest.approx((0.0, 5.0)),
                           "b.y": pytest.approx((-1.0, 0.4))}
    assert json.loads(wave.override().split("=", 1)[1]) == {
        k: list(v) for k, v in wave.bounds.items()}


def test_a_looser_cutoff_keeps_more_and_the_wave_number_follows(tmp_path) -> None:
    previous = _wave(tmp_path, _points([1.0, 4.0, 9.0], [-0.9, 0.2, 0.5], [2.5, 3.0, 7.0]),
                     summary={"wave": {"number": 2}})
    wave = refocus(WaveSettings(previous, cutoff=8.0, margin=0.0), BOUNDS, 3.0)
    assert wave.kept == 3 and wave.number == 3
    assert wave.bounds == {"a.x": (1.0, 9.0), "b.y": (-0.9, 0.5)}


def test_a_free_parameter_keeps_the_experiments_bounds_and_is_recorded(tmp_path) -> None:
    previous = _wave(tmp_path, _points([1.0, 4.0, 9.0], [-0.9, 0.2, 0.5], [2.5, 3.0, 7.0]))
    wave = refocus(WaveSettings(previous, margin=0.1, free=("b.y",)), BOUNDS, 3.0)
    assert wave.bounds == {"a.x": pytest.approx((0.0, 5.0)), "b.y": (-1.0, 1.0)}
    assert wave.summary()["free"] == ["b.y"]
    with pytest.raises(ConfigError, match=r"--refocus-free c.z: not a parameter"):
        refocus(WaveSettings(previous, free=("c.z",)), BOUNDS, 3.0)


def test_no_point_under_the_cutoff_names_the_smallest(tmp_path) -> None:
    previous = _wave(tmp_path, _points([1.0, 4.0], [0.0, 0.1], [3.38, float("nan")]))
    with pytest.raises(ConfigError, match=r"at or under 3 \(the smallest is 3.38\).*"
                                          "--refocus-cutoff"):
        refocus(WaveSettings(previous), BOUNDS, 3.0)


def test_another_designs_points_or_no_points_are_refused(tmp_path) -> None:
    previous = _wave(tmp_path, _points([1.0], [0.0], [1.0]))
    with pytest.raises(ConfigError, match="not this design's"):
        refocus(WaveSettings(previous), {"a.x": (0.0, 10.0)}, 3.0)
    with pytest.raises(ConfigError, match="no calibration/points.csv"):
        refocus(WaveSettings(tmp_path / "nowhere"), BOUNDS, 3.0)
    with pytest.raises(ConfigError, match="span no range of a.x"):
        refocus(WaveSettings(previous, margin=0.0), BOUNDS, 3.0)
    with pytest.raises(ConfigError, match="between 0 and 1"):
        refocus(WaveSettings(previous, margin=1.5), BOUNDS, 3.0)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 10), st.floats(-1, 1), st.floats(0, 20)),
                min_size=1, max_size=12),
       st.floats(0.01, 1.0), st.floats(0.0, 20.0))
def test_the_new_box_holds_every_kept_point_and_stays_inside(tmp_path_factory, rows, margin,
                                                              cutoff) -> None:
    kept = [r for r in rows if r[2] <= cutoff]
    previous = _wave(tmp_path_factory.mktemp("h"), _points(*zip(*rows, strict=True)))
    if not kept:
        with pytest.raises(ConfigError):
            refocus(WaveSettings(previous, cutoff, margin), BOUNDS, 3.0)
        return
    wave = refocus(WaveSettings(previous, cutoff, margin), BOUNDS, 3.0)
    for i, name in enumerate(BOUNDS):
        low, high = wave.bounds[name]
        assert BOUNDS[name][0] <= low < high <= BOUNDS[name][1]
        assert all(low <= r[i] <= high for r in kept)
        assert not math.isnan(low)
