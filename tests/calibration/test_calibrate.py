"""A small calibration of the baseline on the Passaic hindcast.

200 households, 3 design points x 2 replicates, 13 years; and the run report's observed-vs-simulated
section.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from governed_broker.analysis.report import write_report
from governed_broker.calibration import calibrate
from governed_broker.cli import main
from governed_broker.config import ConfigError, load_experiment
from governed_broker.runner import run_experiment

REPO = Path(__file__).resolve().parents[2]
SMALL = REPO / "experiments" / "passaic_calibration_small.yaml"
HINDCAST_SMALL = REPO / "experiments" / "passaic_hindcast_small.yaml"
TINY = ["population.size=200", "sweep.sampler.n=3", "sweep.replicates=2",
        "sweep.max_workers=1", "outputs.plots=false"]


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    out = tmp_path_factory.mktemp("cal") / "sweep"
    result, sweep = calibrate(SMALL, TINY, out_dir=out, progress=False)
    return result, sweep, out


def test_calibrate_writes_the_region_and_the_best_score(calibrated) -> None:
    result, sweep, out = calibrated
    assert sweep.exit_code == 0
    points = pd.read_csv(out / "calibration" / "points.csv")
    assert len(points) == 3 and set(points["n_runs"]) == {2}
    assert (points["plausible"] == (points["max_implausibility"] <= 3.0)).all()
    summary = json.loads((out / "calibration" / "summary.json").read_text())
    bounds = load_experiment(SMALL).sweep.sampler.bounds
    assert set(summary["region"]) == set(bounds)
    for name, span in summary["region"].items():
        low, high = bounds[name]
        assert low <= span["sampled"][0] <= span["sampled"][1] <= high
        if span["low"] is not None:
            assert span["sampled"][0] <= span["low"] <= span["high"] <= span["sampled"][1]
    best = summary["best"]
    assert best["max_implausibility"] == pytest.approx(points["max_implausibility"].min())
    assert set(best["rmse"]) == {"takeup_sfha", "takeup_non_sfha", "takeup_all"}
    assert summary["n_plausible"] == int(points["plausible"].sum())
    assert "not endorsed by FEMA" in summary["notice"]
    assert (out / "calibration" / "fit.png").stat().st_size > 0
    # 3 points are too few for SALib: the table is written, empty
    assert pd.read_csv(out / "calibration" / "sensitivity.csv").empty


def test_calibrating_again_runs_nothing_and_scores_the_same(calibrated) -> None:
    result, _, out = calibrated
    again, sweep = calibrate(SMALL, TINY, out_dir=out, progress=False)
    assert sweep.executed == []
    pd.testing.assert_frame_equal(again.points, result.points)


def test_calibrate_needs_targets_and_a_sweep(tmp_path, capsys) -> None:
    with pytest.raises(ConfigError, match="no 'calibration:' section"):
        calibrate(SMALL, ["calibration=null"], out_dir=tmp_path / "x", progress=False)
    with pytest.raises(ConfigError, match="needs a 'sweep:' section"):
        calibrate(SMALL, ["sweep=null"], out_dir=tmp_path / "x", progress=False)
    assert main(["calibrate", str(SMALL), "--set", "sweep=null"]) == 2


def test_the_hindcast_files_run_once_and_their_calibrations_sweep() -> None:
    for name in ("passaic_hindcast", "passaic_hindcast_small", "passaic_hindcast_llm"):
        assert load_experiment(REPO / "experiments" / f"{name}.yaml").sweep is None
    assert load_experiment(SMALL).sweep.sampler.n == 60
    sobol = load_experiment(REPO / "experiments" / "passaic_sensitivity_small.yaml").sweep
    assert sobol.sampler.method == "sobol" and sobol.replicates == 1
    assert set(sobol.sampler.bounds) == set(load_experiment(SMALL).sweep.sampler.bounds)
    llm = load_experiment(REPO / "experiments" / "passaic_calibration_llm.yaml").sweep
    assert "llm.temperature" in llm.sampler.bounds


def test_the_small_hindcast_runs_13_years_and_its_report_compares(tmp_path) -> None:
    config = load_experiment(HINDCAST_SMALL, ["population.size=300", "outputs.plots=false"])
    out = run_experiment(config, tmp_path / "run", progress=False).out_dir
    model = pd.read_csv(out / "model_yearly.csv")
    assert model["year"].tolist() == list(range(1, 14))
    # Irene (2011) floods the exposed homes of each zone (placement share: all of them stand
    # on cells wet in 2011), the quiet years none
    agents = pd.read_csv(out / "agents_yearly.csv")
    first = agents[agents["year"] == 1]
    for zone, rule in config.hazard.raster.placement.zones.items():
        flooded = first.loc[first["flood_zone"] == zone, "flooded"]
        assert 0 < rule.share < 1 and flooded.sum() == round(rule.share * len(flooded))
    assert model.loc[model["year"] == 5, "n_flooded"].item() == 0
    report = write_report(out).read_text()
    assert "Hindcast: observed vs simulated" in report and "takeup_sfha" in report


def test_a_training_window_fits_on_its_years_and_scores_the_rest_out_of_sample(
        calibrated, capsys) -> None:
    result, _, out = calibrated
    trained, sweep = calibrate(SMALL, TINY, out_dir=out, progress=False, train=(2011, 2017))
    assert sweep.executed == []
    points = trained.points
    # the fit sees 2012, 2013, 2015 and the 2011 spike only; the test 2018, 2021, 2023
    assert {"test_max_implausibility", "test_plausible", "all_max_implausibility",
            "test_rmse_takeup_sfha"} <= set(points.columns)
    fitted = trained.scores[0].table
    assert set(fitted["calendar_year"].dropna()) <= set(range(2011, 2018))
    assert "spike_2021" not in set(fitted["target"])
    # every year at once is the in-sample fit of the calibration without a window
    pd.testing.assert_series_equal(points["all_max_implausibility"],
                                   result.points["max_implausibility"], check_names=False)
    assert (points["plausible"] == (points["max_implausibility"] <= 3.0)).all()
    summary = json.loads((out / "calibration" / "summary.json").read_text())
    validation = summary["validation"]
    assert validation["train"] == [2011, 2017] and validation["test"] == [2018, 2023]
    assert validation["n_plausible_train"] == int(points["plausible"].sum())
    assert main(["calibrate", str(SMALL), "--out", str(out), "--no-progress",
                 "--train", "2011-2017", *sum((["--set", o] for o in TINY), [])]) == 0
    assert "fitted on 2011-2017" in capsys.readouterr().out
    assert main(["calibrate", str(SMALL), "--train", "2017-2011"]) == 2


def test_a_further_wave_samples_near_the_earlier_waves_best_point(calibrated,
                                                                   tmp_path, capsys) -> None:
    _, _, out = calibrated
    earlier = pd.read_csv(out / "calibration" / "points.csv")
    best = earlier.loc[earlier["max_implausibility"].idxmin()]
    cutoff = f"{best['max_implausibility'] + 1e-9:.12g}"
    args = ["calibrate", str(SMALL), "--out", str(tmp_path / "w2"), "--no-progress",
            "--refocus", str(out), "--refocus-cutoff", cutoff, "--refocus-margin", "0.05",
            *sum((["--set", o] for o in TINY), [])]
    assert main(args) == 0
    assert "wave 2: the box of 1 of 3 points" in capsys.readouterr().out
    summary = json.loads((tmp_path / "w2" / "calibration" / "summary.json").read_text())
    assert summary["wave"]["kept"] == 1 and summary["wave"]["previous"] == str(out)
    points = pd.read_csv(tmp_path / "w2" / "calibration" / "points.csv")
    assert len(points) == 3
    for name, (low, high) in load_experiment(SMALL).sweep.sampler.bounds.items():
        column = "param." + name
        span = 0.05 * (high - low)
        assert summary["wave"]["bounds"][name][0] >= best[column] - span - 1e-12
        # every point of the new wave lies within a twentieth of the range of the best one
        assert (abs(points[column] - best[column]) <= span + 1e-9).all(), name
    assert main(["calibrate", str(SMALL), "--refocus-cutoff", "4"]) == 2
    assert main(["calibrate", str(SMALL), "--refocus-free", "decision.baseline.beta_min"]) == 2
    assert main([*args[:2], "--out", str(out), *args[4:]]) == 2  # not into the earlier wave
    named_folder = [*args[:2], "--out", str(out), "--no-progress", "--refocus",
                    str(out / "calibration"), *args[7:]]
    assert main(named_folder) == 2  # nor when the earlier wave is named by its folder
