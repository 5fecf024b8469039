"""Sweeps through the real SLURM cluster (submitit job arrays), compared with local runs."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import cloudpickle
import pandas as pd
import pytest
import sweep_fakes
from conftest_sweep import TWELVE, write_experiment

from governed_broker.sweep import run_sweep
from governed_broker.sweep.slurm import cluster_max_array_size

pytestmark = pytest.mark.slurm
# sweep_fakes is not installed: ship its functions to the jobs by value.
cloudpickle.register_pickle_by_value(sweep_fakes)


def _sweep(path, out, executor, run_fn=sweep_fakes.fake_run):
    return run_sweep(path, out_dir=out, executor=executor, run_fn=run_fn, progress=False)


def test_twelve_run_sweep_matches_local(slurm_cluster, tmp_path):
    """12 real baseline runs (20 households x 3 years) on SLURM and locally."""
    sweep = {**TWELVE, "slurm": {"partition": slurm_cluster, "time": "00:10:00",
                                 "runs_per_task": 2, "max_array_size": 4}}
    path = write_experiment(tmp_path, sweep)
    on_slurm = _sweep(path, tmp_path / "slurm", "slurm", run_fn=None)
    assert on_slurm.exit_code == 0, on_slurm.index[["status", "error"]]
    local = _sweep(path, tmp_path / "local", "local", run_fn=None)
    assert local.exit_code == 0
    # 12 runs, 2 per task -> 6 tasks; arrays of at most 4 tasks -> 2 arrays
    tasks = on_slurm.index["task_id"]
    assert tasks.str.fullmatch(r"\d+_\d+").all()
    assert tasks.nunique() == 6 and tasks.str.split("_").str[0].nunique() == 2
    for name in ("sweep_model_yearly.csv", "sweep_agents_yearly.parquet"):
        assert (tmp_path / "slurm" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()
    for run_id in local.index["run_id"]:
        for name in ("agents_yearly.csv", "model_yearly.csv"):
            on_slurm_bytes = (tmp_path / "slurm" / run_id / name).read_bytes()
            assert on_slurm_bytes == (tmp_path / "local" / run_id / name).read_bytes()
    keep = ["run_id", "seed", "param.population.size", "param.insurance.loading", "status"]
    pd.testing.assert_frame_equal(on_slurm.index[keep], local.index[keep])
    assert cluster_max_array_size() is not None


def _wait_for_marker(markers, timeout_s=180):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [p for p in markers.glob("*.json")] if markers.is_dir() else []
        if found:
            return found[0]
        time.sleep(0.5)
    raise AssertionError(f"no task reached the slow run within {timeout_s} s")


def test_failing_run_and_killed_task_then_resubmission(slurm_cluster, tmp_path):
    sweep = {"parameters": {"population.size": [10, 13, 17, 20]}, "max_attempts": 3,
             "slurm": {"partition": slurm_cluster, "time": "00:10:00"}}
    path, out = write_experiment(tmp_path, sweep), tmp_path / "sweep"
    box = {}
    worker = threading.Thread(target=lambda: box.update(result=_sweep(path, out, "slurm")))
    worker.start()
    marker = _wait_for_marker(out / "_test_markers")
    info = json.loads(marker.read_text())
    killed_id = marker.stem
    subprocess.run(["scancel", f"{info['array_job']}_{info['array_task']}"], check=True)
    worker.join(timeout=240)
    assert not worker.is_alive(), "the sweep did not notice the cancelled task"
    first = box["result"]
    assert first.exit_code == 1
    index = first.index.set_index("param.population.size")
    assert list(index["status"]) == ["done", "failed", "failed", "done"]
    assert "deliberate failure" in index.loc[13, "error"]
    assert index.loc[17, "run_id"] == killed_id
    assert "ended early" in index.loc[17, "error"]
    assert (out / f"{killed_id}.partial").is_dir()

    second = _sweep(path, out, "slurm")
    index = second.index.set_index("param.population.size")
    assert sorted(second.executed) == sorted(index.loc[[13, 17], "run_id"])
    assert index.loc[17, "status"] == "done" and index.loc[17, "attempts"] == 2
    assert index.loc[13, "status"] == "failed" and index.loc[13, "attempts"] == 2
    assert second.exit_code == 1
    # the resumed run equals a run that was never interrupted
    fresh = tmp_path / "fresh"
    (fresh / "_test_markers").mkdir(parents=True)  # so the fake's slow first attempt is skipped
    (fresh / "_test_markers" / marker.name).write_text(marker.read_text())
    _sweep(path, fresh, "local")
    for name in ("agents_yearly.csv", "model_yearly.csv"):
        assert (out / killed_id / name).read_bytes() == (fresh / killed_id / name).read_bytes()


def test_start_script_is_idempotent(slurm_cluster):
    from pathlib import Path

    start = Path(__file__).resolve().parent / "start_slurm.sh"
    again = subprocess.run(["bash", str(start)], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert "starting" not in again.stderr and "stopping" not in again.stderr
    assert "SLURM cluster 'ci' up" in again.stderr
    state = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True)
    assert state.stdout.strip().split()[0] in {"idle", "mix", "alloc", "comp"}
