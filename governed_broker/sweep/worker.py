"""What a worker (local process or SLURM array task) does: run its runs, one after another.

Each run is isolated: an exception is recorded in the run's state file (one line) and in
``_sweep/errors/<run_id>.txt`` (the traceback), and the worker goes on with its next run. The
worker rebuilds each configuration from the experiment file and the run's overrides and checks
that it still hashes to the run id, so an experiment edited after submission is an error rather
than silently different results.
"""

from __future__ import annotations

import os
import socket
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from governed_broker.config import ConfigError, ExperimentConfig, load_experiment
from governed_broker.sweep.plan import run_config, run_id_of
from governed_broker.sweep.state import DONE, FAILED, RUNNING, RunState, SweepDir, now_iso

#: ``run_fn(config, out_dir, progress=False)``: runs one experiment into ``out_dir``
#: (``governed_broker.runner.run_experiment`` by default).
RunFunction = Callable[..., Any]


@dataclass(frozen=True)
class WorkItem:
    """One run as a worker receives it (small and picklable).

    Attributes:
        run_id: Expected id (hash of the resolved configuration).
        overrides: All ``--set`` strings (base overrides, then the run's).
        llm_host: URL to use as ``llm.hosts`` for this run, or None to keep the config's.
        error: Planning error: the run is recorded as failed without running.
        base_dir: Directory the experiment's relative paths resolve against (None: the
            experiment file's folder; see ``SweepPlan.base_dir``).
    """

    run_id: str
    overrides: tuple[str, ...]
    llm_host: str | None = None
    error: str | None = None
    base_dir: str | None = None


def default_run_function() -> RunFunction:
    """``governed_broker.runner.run_experiment`` (imported late: it pulls in Mesa)."""
    from governed_broker.runner import run_experiment

    return run_experiment


def task_label() -> str:
    """``<array job>_<index>`` inside a SLURM array task, else ``pid:<pid>``."""
    array, index = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if array and index:
        return f"{array}_{index}"
    job = os.environ.get("SLURM_JOB_ID")
    return job if job else f"pid:{os.getpid()}"


def build_run_config(experiment: Path, item: WorkItem) -> ExperimentConfig:
    """The validated configuration of ``item``, with its LLM host applied.

    Raises:
        ConfigError: the configuration no longer validates or no longer matches the run id.
    """
    config = run_config(load_experiment(experiment, item.overrides, base_dir=item.base_dir))
    actual = run_id_of(config)
    if actual != item.run_id:
        raise ConfigError(
            f"{experiment}: run {item.run_id} now resolves to a different configuration "
            f"({actual}); the experiment or its files changed since the sweep was planned. "
            "Re-submit the sweep to plan it again."
        )
    if item.llm_host and config.llm is not None:
        config = config.model_copy(
            update={"llm": config.llm.model_copy(update={"hosts": (item.llm_host,)})}
        )
    return config


def execute_run(
    sweep_dir: SweepDir, experiment: Path, item: WorkItem, run_fn: RunFunction
) -> str:
    """Run one item unless it is already done; record its state. Returns its final status.

    A published run whose outputs no longer match its manifest is failed with what differs,
    never run over (its directory must be moved away first: nothing is deleted).
    """
    previous = sweep_dir.read_state(item.run_id)
    if sweep_dir.has_manifest(item.run_id):
        problem = sweep_dir.output_problem(item.run_id)
        status = DONE if problem is None else FAILED
        if previous is None or (previous.status, previous.error) != (status, problem):
            sweep_dir.write_state(item.run_id, RunState(
                status, previous.attempts if previous else 0, error=problem,
                finished_at=now_iso() if problem else None))
        return status
    state = RunState(
        status=RUNNING,
        attempts=(previous.attempts if previous else 0) + 1,
        started_at=now_iso(),
        host=socket.gethostname(),
        task_id=task_label(),
    )
    sweep_dir.write_state(item.run_id, state)
    t0 = time.perf_counter()
    try:
        if item.error:
            raise ConfigError(item.error)
        config = build_run_config(experiment, item)
        run_fn(config, sweep_dir.run_dir(item.run_id), progress=False)
        if not sweep_dir.is_done(item.run_id):
            raise RuntimeError(f"run function returned without writing {item.run_id}/manifest.json")
        state.status, state.error = DONE, None
    except Exception as exc:  # noqa: BLE001 - isolation: any run failure is recorded, not raised
        state.status = FAILED
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        state.error = f"{type(exc).__name__}: {first}"[:500]
        sweep_dir.error_file(item.run_id).parent.mkdir(parents=True, exist_ok=True)
        sweep_dir.error_file(item.run_id).write_text(traceback.format_exc(), encoding="utf-8")
    state.finished_at = now_iso()
    state.duration_s = round(time.perf_counter() - t0, 3)
    sweep_dir.write_state(item.run_id, state)
    return state.status


def execute_runs(
    sweep_root: str,
    experiment: str,
    items: Sequence[WorkItem],
    run_fn: RunFunction | None = None,
) -> list[str]:
    """Entry point of one worker task: run ``items`` in order; returns their statuses.

    Module-level and importable, so submitit pickles it by reference.
    """
    sweep_dir = SweepDir(sweep_root)
    fn = run_fn if run_fn is not None else default_run_function()
    return [execute_run(sweep_dir, Path(experiment), item, fn) for item in items]
