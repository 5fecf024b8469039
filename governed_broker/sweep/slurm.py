"""The ``slurm`` executor: submitit job arrays.

Runs are grouped into array tasks of ``runs_per_task`` runs, and tasks into arrays of at most
MaxArraySize tasks (submitit never splits an array itself; a too-large array is rejected by
sbatch). Each task runs ``worker.execute_runs`` on its runs. The coordinator (this process)
waits for the jobs, showing progress from the runs' state files. A task that dies (scancel,
node failure, time limit, out of memory) is reported by submitit once accounting (slurmdbd)
sees it; its unfinished runs are then recorded as failed by the caller and are retried on
re-submission.

On a real cluster the sweep directory must be on a filesystem that the login and compute nodes
share, and the Python environment must exist at the same path on the compute nodes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from governed_broker.config import ConfigError
from governed_broker.config.sweep import SlurmConfig
from governed_broker.sweep.progress import SweepProgress
from governed_broker.sweep.state import SweepDir
from governed_broker.sweep.worker import RunFunction, WorkItem, execute_runs

#: Array size assumed when neither ``scontrol`` nor ``sweep.slurm.max_array_size`` gives one
#: (SLURM's default MaxArraySize is 1001, i.e. indices 0..1000).
ASSUMED_MAX_ARRAY_SIZE = 1000


def cluster_max_array_size() -> int | None:
    """MaxArraySize from ``scontrol show config``, or None when it cannot be read."""
    try:
        out = subprocess.run(
            ["scontrol", "show", "config"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"^MaxArraySize\s*=\s*(\d+)", out, re.MULTILINE)
    return int(match.group(1)) if match else None


def live_slurm_jobs() -> set[str]:
    """Ids of this user's jobs in the SLURM queue.

    ``<job>`` and ``<array job>_<task>``, one line per array task.

    Raises:
        ConfigError: ``squeue`` is not installed here or fails. Without the queue, runs still
            executing in a queued task cannot be told from dead ones, and running them again
            would execute them twice into the same directory.
    """
    if shutil.which("squeue") is None:
        raise ConfigError("cannot list the SLURM queue: 'squeue' is not on PATH")
    try:
        out = subprocess.run(
            ["squeue", "--me", "--array", "-h", "-o", "%i"], capture_output=True, text=True,
            timeout=60, check=True,
        ).stdout
    except subprocess.CalledProcessError as exc:
        detail = (exc.stderr or "").strip().splitlines()
        raise ConfigError(
            f"cannot list the SLURM queue: squeue exited with code {exc.returncode}"
            + (f" ({detail[0]})" if detail else "")
        ) from exc
    except (OSError, subprocess.SubprocessError) as exc:
        raise ConfigError(f"cannot list the SLURM queue: squeue failed ({exc})") from exc
    return {line.strip() for line in out.splitlines() if line.strip()}


def chunk(items: list[Any], size: int) -> list[list[Any]]:
    """Consecutive groups of at most ``size`` items."""
    return [items[i : i + size] for i in range(0, len(items), size)]


def submitit_parameters(options: SlurmConfig, name: str) -> dict[str, Any]:
    """Parameters for ``submitit.AutoExecutor.update_parameters`` from the YAML options."""
    params: dict[str, Any] = {
        "name": options.job_name or f"gb-{name}",
        "timeout_min": options.timeout_min,
        "nodes": 1,
        "tasks_per_node": 1,
        "cpus_per_task": options.cpus_per_task,
    }
    if options.mem_gb is not None:
        params["mem_gb"] = options.mem_gb
    if options.gpus_per_node:
        params["gpus_per_node"] = options.gpus_per_node
    optional = {
        "slurm_partition": options.partition,
        "slurm_account": options.account,
        "slurm_qos": options.qos,
        "slurm_array_parallelism": options.array_parallelism,
    }
    params.update({k: v for k, v in optional.items() if v is not None})
    if options.extra:
        params["slurm_additional_parameters"] = dict(options.extra)
    if options.setup:
        params["slurm_setup"] = list(options.setup)
    return params


class SlurmExecutor:
    """Submits work items as submitit job arrays and waits for them."""

    name = "slurm"

    def __init__(self, options: SlurmConfig, experiment_name: str) -> None:
        if shutil.which("sbatch") is None:
            raise ConfigError(
                "sweep.executor is 'slurm' but 'sbatch' is not on PATH: run on a SLURM login "
                "node (or load its module), or use --executor local"
            )
        try:
            import submitit  # noqa: F401
        except ImportError as exc:
            raise ConfigError(
                "the slurm executor needs submitit: pip install submitit"
            ) from exc
        self.options = options
        self.experiment_name = experiment_name
        self.poll_s = 2.0
        self.jobs: list[Any] = []

    def array_size(self) -> int:
        """Largest array to submit.

        The YAML cap and the cluster's MaxArraySize, whichever is smaller (array indices run
        0..MaxArraySize-1).

        When ``scontrol`` cannot tell MaxArraySize, ``sweep.slurm.max_array_size`` is used
        as given; without it, ``ASSUMED_MAX_ARRAY_SIZE`` is assumed, with a warning on stderr.
        """
        configured = self.options.max_array_size
        cluster = cluster_max_array_size()
        if cluster is None and configured is None:
            print(
                "warning: could not read MaxArraySize from `scontrol show config`; assuming "
                f"arrays of at most {ASSUMED_MAX_ARRAY_SIZE} tasks (SLURM's default MaxArraySize "
                "is 1001). If sbatch rejects the array, set sweep.slurm.max_array_size to your "
                "cluster's MaxArraySize (`--set sweep.slurm.max_array_size=N`).",
                file=sys.stderr,
                flush=True,
            )
            return ASSUMED_MAX_ARRAY_SIZE
        return min(s for s in (configured, cluster) if s is not None)

    def execute(
        self,
        sweep_dir: SweepDir,
        experiment: Path,
        items: list[WorkItem],
        run_fn: RunFunction | None,
        progress: SweepProgress,
    ) -> dict[str, str]:
        """Submit ``items`` and wait; returns ``{run_id: error}`` for runs of failed tasks."""
        import submitit

        per_task = self.options.runs_per_task
        tasks = chunk(items, per_task)
        executor = submitit.AutoExecutor(folder=sweep_dir.slurm_folder / "%j", cluster="slurm")
        executor.update_parameters(**submitit_parameters(self.options, self.experiment_name))
        submitted: list[tuple[Any, list[WorkItem]]] = []
        for group in chunk(tasks, self.array_size()):
            n = len(group)
            jobs = executor.map_array(
                execute_runs,
                [str(sweep_dir.root)] * n,
                [str(experiment)] * n,
                group,
                [run_fn] * n,
            )
            submitted.extend(zip(jobs, group, strict=True))
        self.jobs = [job for job, _ in submitted]
        while not all(job.done() for job, _ in submitted):
            progress.refresh()
            time.sleep(self.poll_s)
        lost: dict[str, str] = {}
        for job, group in submitted:
            try:
                job.result()
            except Exception as exc:  # noqa: BLE001 - a dead task is recorded, never raised
                message = _first_line(exc)
                for item in group:
                    lost[item.run_id] = f"SLURM task {job.job_id} ended early: {message}"
        return lost


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {line}"[:400]
