"""Pieces of the executors that need no cluster: sbatch options, chunking, LLM hosts, progress."""

from __future__ import annotations

from governed_broker.config.sweep import SlurmConfig
from governed_broker.sweep.local import describe_exit
from governed_broker.sweep.progress import SweepProgress
from governed_broker.sweep.slurm import chunk, submitit_parameters, with_llm_hosts
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


def test_submitit_accepts_the_parameters(tmp_path):
    import submitit

    executor = submitit.AutoExecutor(folder=tmp_path, cluster="slurm")
    executor.update_parameters(**submitit_parameters(SlurmConfig(partition="debug",
                                                                 extra={"exclusive": True}), "x"))


def test_chunking_respects_array_size():
    tasks = chunk(list(range(23)), 2)
    assert [len(t) for t in tasks] == [2] * 11 + [1]
    arrays = chunk(tasks, 5)
    assert [len(a) for a in arrays] == [5, 5, 2]
    assert [x for a in arrays for t in a for x in t] == list(range(23))


def test_llm_hosts_round_robin_by_task():
    items = [WorkItem(f"r{i}", ()) for i in range(6)]
    hosts = [i.llm_host for i in with_llm_hosts(items, ["http://a:11434", "http://b:11434"], 2)]
    assert hosts == ["http://a:11434"] * 2 + ["http://b:11434"] * 2 + ["http://a:11434"] * 2
    assert with_llm_hosts(items, [], 2) == items


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
