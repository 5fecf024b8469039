"""The local executor end to end with a fake run function: outputs, resume, isolation."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import sweep_fakes
from conftest_sweep import TWELVE

from governed_broker.sweep import SweepDir, build_plan, run_sweep


def _run(path, out, **kwargs):
    return run_sweep(path, out_dir=out, run_fn=sweep_fakes.fake_run, progress=False, **kwargs)


def test_twelve_runs_index_and_combined_tables(experiment, tmp_path):
    path = experiment(TWELVE)
    out = tmp_path / "sweep"
    result = _run(path, out)
    assert result.exit_code == 0 and result.counts["done"] == 12
    index = pd.read_csv(out / "sweep_runs.csv")
    plan = build_plan(path)
    assert list(index["run_id"]) == [r.run_id for r in plan.runs]
    assert list(index.columns[:7]) == ["run_id", "index", "replicate", "seed", "sample_method",
                                       "param.population.size", "param.insurance.loading"]
    assert (index["status"] == "done").all() and (index["attempts"] == 1).all()
    assert index["error"].isna().all()
    model = pd.read_csv(out / "sweep_model_yearly.csv")
    agents = pd.read_parquet(out / "sweep_agents_yearly.parquet")
    assert len(model) == 12 * 3
    assert len(agents) == 6 * 3 * 10 + 6 * 3 * 20
    # the combined tables are the runs' own tables, in plan order, with leading run columns
    first = plan.runs[5]
    own = pd.read_csv(out / first.run_id / "agents_yearly.csv")
    part = agents[agents["run_id"] == first.run_id].reset_index(drop=True)
    assert part["param.insurance.loading"].eq(1.3).all() and part["seed"].eq(first.seed).all()
    pd.testing.assert_frame_equal(part[own.columns].astype(own.dtypes.to_dict()), own,
                                  check_dtype=False)
    assert list(dict.fromkeys(agents["run_id"])) == [r.run_id for r in plan.runs]


def test_resubmission_does_no_work_and_reruns_are_identical(experiment, tmp_path):
    path, out = experiment(TWELVE), tmp_path / "sweep"
    _run(path, out)
    calls = sweep_fakes.calls(out)
    stamp = (out / "sweep_agents_yearly.parquet").stat().st_mtime_ns
    again = _run(path, out)
    assert again.exit_code == 0 and again.executed == []
    assert sweep_fakes.calls(out) == calls
    assert (out / "sweep_agents_yearly.parquet").stat().st_mtime_ns == stamp
    # a sub-sweep in another directory has the same run ids and byte-identical outputs
    subset = {"parameters": {"population.size": [10], "insurance.loading": [1.1, 1.2]},
              "replicates": 2}
    other = tmp_path / "other"
    plan = _run(experiment(subset), other).index
    assert len(plan) == 4
    for run_id in plan["run_id"]:
        for name in ("agents_yearly.csv", "model_yearly.csv"):
            assert (other / run_id / name).read_bytes() == (out / run_id / name).read_bytes()


def test_failing_run_is_isolated_and_retried_up_to_max_attempts(experiment, tmp_path):
    sweep = {"parameters": {"population.size": [10, 13, 20]}, "max_workers": 2,
             "max_attempts": 2}
    path, out = experiment(sweep), tmp_path / "sweep"
    first = _run(path, out)
    assert first.exit_code == 1
    index = pd.read_csv(out / "sweep_runs.csv").set_index("param.population.size")
    assert list(index["status"]) == ["done", "failed", "done"]
    assert "deliberate failure for population.size=13" in index.loc[13, "error"]
    failed_id = index.loc[13, "run_id"]
    assert "ValueError" in (out / "_sweep" / "errors" / f"{failed_id}.txt").read_text()
    second = _run(path, out)  # retry: attempt 2 of 2
    assert second.executed == [failed_id] and second.exit_code == 1
    third = _run(path, out)  # exhausted: nothing runs
    assert third.executed == [] and third.exhausted == [failed_id]
    assert sweep_fakes.calls(out).count(failed_id) == 2
    assert pd.read_csv(out / "sweep_runs.csv").set_index("run_id").loc[failed_id,
                                                                       "attempts"] == 2


def test_killed_worker_is_recorded_and_completed_on_resubmission(experiment, tmp_path):
    sweep = {"parameters": {"population.size": [10, 19, 20, 21]}, "max_workers": 2}
    path, out = experiment(sweep), tmp_path / "sweep"
    first = _run(path, out)
    index = pd.read_csv(out / "sweep_runs.csv").set_index("param.population.size")
    assert index.loc[19, "status"] == "failed"
    assert "killed by SIGKILL" in index.loc[19, "error"]
    assert first.exit_code == 1
    assert (index.drop(19)["status"] == "done").all()
    killed = index.loc[19, "run_id"]
    assert (out / f"{killed}.partial").is_dir()
    second = _run(path, out)
    assert second.exit_code == 0 and second.executed == [killed]
    assert json.loads((out / "_sweep" / "state" / f"{killed}.json").read_text())["attempts"] == 2
    assert not (out / f"{killed}.partial").exists()


def test_invalid_combination_is_failed_without_stopping_others(experiment, tmp_path):
    path, out = experiment({"parameters": {"population.size": [10, -5]}}), tmp_path / "s"
    result = _run(path, out)
    assert result.exit_code == 1
    index = pd.read_csv(out / "sweep_runs.csv")
    assert list(index["status"]) == ["done", "failed"]
    assert "invalid configuration" in index.loc[1, "error"]
    assert sweep_fakes.calls(out) == [index.loc[0, "run_id"]]


def test_edited_experiment_is_detected_by_the_worker(experiment, tmp_path):
    from governed_broker.sweep.state import SweepDir as SD
    from governed_broker.sweep.worker import WorkItem, execute_runs

    path = experiment({"parameters": {"population.size": [10]}})
    plan = build_plan(path)
    run = plan.runs[0]
    item = WorkItem(run.run_id, tuple(plan.run_overrides(run)) + ("years=5",))
    out = tmp_path / "s"
    assert execute_runs(str(out), str(path), [item], sweep_fakes.fake_run) == ["failed"]
    state = SD(out).read_state(run.run_id)
    assert "changed since the sweep was planned" in state.error


def test_second_submission_into_a_busy_directory_is_refused(experiment, tmp_path):
    import os
    import subprocess
    import sys

    from governed_broker.config import ConfigError

    out = tmp_path / "s"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (out / "_sweep").mkdir(parents=True)
        import socket
        (out / "_sweep" / "lock").write_text(json.dumps({"host": socket.gethostname(),
                                                         "pid": sleeper.pid}))
        with pytest.raises(ConfigError, match="already running"):
            _run(experiment(TWELVE), out)
    finally:
        os.kill(sleeper.pid, 9)
        sleeper.wait()
    assert SweepDir(out).meta.is_dir()


def test_coinciding_sampler_points_share_one_run(experiment, tmp_path):
    sweep = {"sampler": {"method": "sobol", "n": 2, "second_order": False,
                         "bounds": {"population.size": [10, 10.4], "insurance.loading": [1.0, 1.5]},
                         "integer": ["population.size"]}, "max_workers": 2}
    path, out = experiment(sweep), tmp_path / "s"
    result = _run(path, out)
    assert result.exit_code == 0 and len(result.index) == 2 * (2 + 2)
    unique = result.index["run_id"].nunique()
    assert unique < len(result.index)  # the integer column makes Saltelli rows coincide
    assert sorted(sweep_fakes.calls(out)) == sorted(set(result.index["run_id"]))
    assert (result.index["sample_method"] == "sobol").all()
    model = pd.read_csv(out / "sweep_model_yearly.csv")
    assert model["run_id"].nunique() == unique and len(model) == unique * 3


def test_a_retried_run_keeps_its_llm_host(experiment, tmp_path):
    from governed_broker.sweep.plan import llm_host_for

    hosts = ["http://gpu01:11434", "http://gpu02:11434", "http://gpu03:11434"]
    sweep = {"parameters": {"population.size": [10, 13, 20, 21]}, "max_workers": 2,
             "max_attempts": 2, "llm_hosts": hosts}
    path, out = experiment(sweep), tmp_path / "sweep"
    llm = ["llm.backend=ollama", "llm.model=gemma3:4b"]
    first = _run(path, out, overrides=llm)
    failed = pd.read_csv(out / "sweep_runs.csv").set_index("param.population.size").loc[13,
                                                                                       "run_id"]
    second = _run(path, out, overrides=llm)  # only the failed run, now first in the to-do list
    assert len(first.executed) == 4 and second.executed == [failed]
    calls = sweep_fakes.hosts(out)
    assert len(calls) == 5 and [c for c in calls if c[0] == failed] == [
        (failed, llm_host_for(failed, hosts))] * 2
    assert all(host == llm_host_for(run_id, hosts) for run_id, host in calls)
