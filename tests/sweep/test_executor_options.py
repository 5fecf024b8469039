"""Pieces of the executors that need no cluster: sbatch options, chunking, LLM hosts, progress."""

from __future__ import annotations

import os
import subprocess

import pytest

from governed_broker.config import ConfigError
from governed_broker.config.sweep import SlurmConfig
from governed_broker.sweep.local import describe_exit
from governed_broker.sweep.plan import llm_host_for
from governed_broker.sweep.progress import SweepProgress
from governed_broker.sweep.slurm import SlurmExecutor, chunk, submitit_parameters
from governed_broker.sweep.state import FAILED, RUNNING, RunState, SweepDir
from governed_broker.sweep.worker import WorkItem


def test_submitit_parameters_from_yaml_options():
    options = SlurmConfig(partition="short", time="1-00:00:00", cpus_per_task=4, mem_gb=8,
                          gpus_per_node=1, account="proj42", qos="normal",
                          extra={"constraint": "skylake"}, setup=["module load python/3.11"],
                          array_parallelism=16)
    params = submitit_parameters(options, "ablation")
    assert params == {
        "name": "gb-ablation", "timeout_min": 1440, "nodes": 1, "tasks_per_node": 1,
        "cpus_per_task": 4, "mem_gb": 8, "gpus_per_node": 1, "slurm_partition": "short",
        "slurm_account": "proj42", "slurm_qos": "normal", "slurm_array_parallelism": 16,
        "slurm_additional_parameters": {"constraint": "skylake"},
        "slurm_setup": ["module load python/3.11"],
    }
    minimal = submitit_parameters(SlurmConfig(), "x")
    assert "mem_gb" not in minimal and "slurm_partition" not in minimal


def test_submitit_writes_the_expected_sbatch_directives(tmp_path, monkeypatch):
    import submitit

    # submitit refuses to build a SLURM executor where no `srun` is on PATH; this test only
    # renders the sbatch file (nothing is submitted), so a stand-in lets it run anywhere
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    executor = submitit.AutoExecutor(folder=tmp_path, cluster="slurm")
    options = SlurmConfig(partition="debug", time="00:30:00", mem_gb=2, account="proj42",
                          extra={"exclusive": True, "constraint": "sky lake"},
                          setup=["module load python/3.11"], array_parallelism=3)
    executor.update_parameters(**submitit_parameters(options, "x"))
    script = executor._executor._make_submission_file_text("python -m worker", "uid")
    directives = {line for line in script.splitlines() if line.startswith("#SBATCH")}
    for expected in ("--partition=debug", "--time=30", "--mem=2GB", "--account=proj42",
                     "--job-name=gb-x", "--cpus-per-task=1", "--nodes=1",
                     "--ntasks-per-node=1", "--exclusive", "--constraint='sky lake'"):
        assert f"#SBATCH {expected}" in directives, expected
    assert "module load python/3.11" in script.splitlines()
    assert not any("--qos" in d or "--gpus-per-node" in d for d in directives)


def test_chunking_respects_array_size():
    tasks = chunk(list(range(23)), 2)
    assert [len(t) for t in tasks] == [2] * 11 + [1]
    arrays = chunk(tasks, 5)
    assert [len(a) for a in arrays] == [5, 5, 2]
    assert [x for a in arrays for t in a for x in t] == list(range(23))


def test_llm_host_depends_only_on_the_run_id():
    hosts = ["http://a:11434", "http://b:11434", "http://c:11434"]
    ids = [f"{n:012x}" for n in (0, 1, 2, 3, 0xABCDEF012345)]
    assert [llm_host_for(i, hosts) for i in ids] == [hosts[int(i, 16) % 3] for i in ids]
    assert llm_host_for("invalid-1234abcd", hosts) == llm_host_for("invalid-1234abcd", hosts)
    assert llm_host_for("0123456789ab", []) is None


def test_worker_applies_llm_host(experiment, tmp_path):
    from governed_broker.sweep.plan import build_plan
    from governed_broker.sweep.worker import build_run_config

    path = experiment({"parameters": {"insurance.loading": [1.1]}})
    plan = build_plan(path, ["llm.backend=ollama", "llm.model=gemma3:4b"])
    run = plan.runs[0]
    item = WorkItem(run.run_id, tuple(plan.run_overrides(run)), "http://gpu7:11434")
    assert build_run_config(path, item).llm.hosts == ("http://gpu7:11434",)


def test_exit_descriptions():
    assert "SIGKILL" in describe_exit(-9)
    assert "exited with code 3" in describe_exit(3)


def test_progress_counts(tmp_path):
    sweep_dir = SweepDir(tmp_path)
    sweep_dir.write_state("a", RunState(RUNNING, 1))
    sweep_dir.write_state("b", RunState(FAILED, 1))
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "manifest.json").write_text("{}")
    progress = SweepProgress(sweep_dir, ["a", "b", "c", "d"], enabled=False)
    counts = progress.refresh()
    assert counts == {"running": 1, "failed": 1, "done": 1, "pending": 1}
    progress.close()


def test_runs_still_running_in_a_live_slurm_task_are_not_resubmitted(experiment, tmp_path,
                                                                     monkeypatch):
    from governed_broker.sweep import slurm
    from governed_broker.sweep.api import runs_to_execute
    from governed_broker.sweep.plan import build_plan

    plan = build_plan(experiment({"parameters": {"insurance.loading": [1.1, 1.2, 1.3]}}))
    sweep_dir = SweepDir(tmp_path / "s")
    a, b, c = (r.run_id for r in plan.runs)
    sweep_dir.write_state(a, RunState(RUNNING, 1, task_id="77_3"))   # task still queued
    sweep_dir.write_state(b, RunState(RUNNING, 1, task_id="77_4"))   # task gone: rerun
    sweep_dir.write_state(c, RunState(FAILED, 3, task_id="pid:1"))   # attempts exhausted
    monkeypatch.setattr(slurm, "live_slurm_jobs", lambda: {"77_3", "78"})
    todo, invalid, exhausted = runs_to_execute(sweep_dir, plan, max_attempts=3)
    assert [r.run_id for r in todo] == [b]
    assert [r.run_id for r in exhausted] == [c] and invalid == []


@pytest.mark.parametrize("failure", ["missing", "error"])
def test_unreadable_slurm_queue_is_an_error_not_dead_tasks(experiment, tmp_path, monkeypatch,
                                                          failure):
    from governed_broker.sweep import slurm
    from governed_broker.sweep.api import runs_to_execute
    from governed_broker.sweep.plan import build_plan

    if failure == "missing":
        monkeypatch.setattr(slurm.shutil, "which", lambda name: None)
    else:
        def failing_squeue(*args, **kwargs):
            raise subprocess.CalledProcessError(1, args[0], stderr="slurm_load_jobs error: "
                                                "Unable to contact slurm controller\n")

        monkeypatch.setattr(slurm.shutil, "which", lambda name: "/usr/bin/" + name)
        monkeypatch.setattr(slurm.subprocess, "run", failing_squeue)
    with pytest.raises(ConfigError, match="cannot list the SLURM queue"):
        slurm.live_slurm_jobs()
    plan = build_plan(experiment({"parameters": {"insurance.loading": [1.1, 1.2]}}))
    sweep_dir = SweepDir(tmp_path / "s")
    a, b = (r.run_id for r in plan.runs)
    sweep_dir.write_state(b, RunState(FAILED, 1, task_id="pid:5"))
    assert [r.run_id for r in runs_to_execute(sweep_dir, plan, 3)[0]] == [a, b]  # no SLURM run
    sweep_dir.write_state(a, RunState(RUNNING, 1, task_id="77_3"))
    with pytest.raises(ConfigError, match=f"run {a} was running in SLURM task 77_3"):
        runs_to_execute(sweep_dir, plan, max_attempts=3)


def test_unknown_max_array_size_is_announced(monkeypatch, capsys):
    from governed_broker.sweep import slurm

    executor = SlurmExecutor.__new__(SlurmExecutor)
    executor.options = SlurmConfig()
    monkeypatch.setattr(slurm, "cluster_max_array_size", lambda: None)
    assert executor.array_size() == slurm.ASSUMED_MAX_ARRAY_SIZE
    warning = capsys.readouterr().err
    assert "MaxArraySize" in warning and "sweep.slurm.max_array_size" in warning
    executor.options = SlurmConfig(max_array_size=50)
    assert executor.array_size() == 50 and capsys.readouterr().err == ""
    monkeypatch.setattr(slurm, "cluster_max_array_size", lambda: 20)
    assert executor.array_size() == 20


def test_a_done_state_without_its_run_directory_is_not_done(experiment, tmp_path):
    from governed_broker.sweep.api import runs_to_execute
    from governed_broker.sweep.collect import collect
    from governed_broker.sweep.plan import build_plan
    from governed_broker.sweep.state import DONE, PENDING

    plan = build_plan(experiment({"parameters": {"insurance.loading": [1.1]}}))
    sweep_dir = SweepDir(tmp_path / "s")
    run_id = plan.runs[0].run_id
    sweep_dir.write_plan(plan.to_json())
    sweep_dir.write_state(run_id, RunState(DONE, 1))  # its directory was deleted since
    assert sweep_dir.status(run_id) == PENDING
    index = collect(sweep_dir, plan, force=True)
    assert list(index["status"]) == [PENDING] and "manifest.json is missing" in index["error"][0]
    assert [r.run_id for r in runs_to_execute(sweep_dir, plan, 3)[0]] == [run_id]
