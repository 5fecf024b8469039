"""Running a sweep: plan, skip what is done, execute the rest, record, collect.

``run_sweep`` is idempotent: re-submitting the same experiment into the same directory skips
done runs (by run id, a hash of the resolved configuration), runs again those that never
finished (interrupted or killed), retries failed runs until they have failed ``max_attempts``
times, and rewrites the index and combined tables. One failing run never stops the others; the
result's ``exit_code`` is 0 only when every planned run is done.
"""

from __future__ import annotations

import json
import os
import re
import socket
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from governed_broker.config import ConfigError
from governed_broker.run_dir import create_out_dir
from governed_broker.sweep.collect import collect, summary
from governed_broker.sweep.plan import PlannedRun, SweepPlan, build_plan, llm_host_for
from governed_broker.sweep.progress import SweepProgress
from governed_broker.sweep.state import (
    DONE,
    FAILED,
    RUNNING,
    RunState,
    SweepDir,
    now_iso,
    write_atomic,
)
from governed_broker.sweep.worker import RunFunction, WorkItem


@dataclass
class SweepResult:
    """Outcome of one submission.

    Attributes:
        sweep_dir: The sweep directory.
        index: ``sweep_runs.csv`` as a table.
        executed: Run ids started in this submission.
        exhausted: Failed run ids not retried (``max_attempts`` reached).
    """

    sweep_dir: Path
    index: pd.DataFrame
    executed: list[str] = field(default_factory=list)
    exhausted: list[str] = field(default_factory=list)

    @property
    def counts(self) -> Counter:
        """Planned runs by status."""
        return summary(self.index)

    @property
    def exit_code(self) -> int:
        """0 when every planned run is done, else 1."""
        return 0 if self.counts[DONE] == len(self.index) else 1


def default_sweep_dir(plan: SweepPlan) -> Path:
    """``outputs/<experiment name>`` under the current directory."""
    return Path("outputs") / plan.name


def runs_to_execute(
    sweep_dir: SweepDir, plan: SweepPlan, max_attempts: int
) -> tuple[list[PlannedRun], list[PlannedRun], list[PlannedRun]]:
    """Split the plan's unfinished runs into (to run, invalid, exhausted).

    A run still executing in a queued SLURM task of an earlier submission (state ``running``
    with that task's id) is left alone, so that no run is ever executed twice at once.
    """
    todo, invalid, exhausted = [], [], []
    seen: set[str] = set()
    live: set[str] | None = None
    for run in plan.runs:
        if run.run_id in seen or sweep_dir.is_done(run.run_id):
            continue
        seen.add(run.run_id)
        if run.error:
            invalid.append(run)
            continue
        state = sweep_dir.read_state(run.run_id)
        if state is not None and state.status == FAILED and state.attempts >= max_attempts:
            exhausted.append(run)
        elif state is not None and state.status == RUNNING and _slurm_task(state.task_id):
            if live is None:
                live = _live_slurm_jobs(sweep_dir, run.run_id, state.task_id)
            if state.task_id not in live:
                todo.append(run)
        else:
            todo.append(run)
    return todo, invalid, exhausted


def _live_slurm_jobs(sweep_dir: SweepDir, run_id: str, task_id: str) -> set[str]:
    """The queued SLURM jobs; an error saying what to do when the queue cannot be read."""
    from governed_broker.sweep.slurm import live_slurm_jobs

    try:
        return live_slurm_jobs()
    except ConfigError as exc:
        raise ConfigError(
            f"{sweep_dir.state_file(run_id)}: run {run_id} was running in SLURM task {task_id} "
            f"of an earlier submission, and {exc}, so it cannot be told whether that task is "
            "still running (running it again could execute it twice at once). Re-submit from "
            "a login node of that cluster where `squeue` works; or, if you are sure no job of "
            "this sweep is queued any more, delete the state files of its runs that are "
            "'running' (`governed-broker status` lists them) and re-submit."
        ) from exc


def _slurm_task(task_id: str | None) -> bool:
    return bool(task_id) and re.fullmatch(r"\d+(_\d+)?", task_id) is not None


def make_executor(plan: SweepPlan, executor: str, max_workers: int | None):
    """The executor named ``executor`` configured from the plan's sweep settings."""
    if executor == "local":
        from governed_broker.sweep.local import LocalExecutor

        return LocalExecutor(max_workers or plan.sweep.max_workers)
    if executor == "slurm":
        from governed_broker.sweep.slurm import SlurmExecutor

        return SlurmExecutor(plan.sweep.slurm, plan.name)
    raise ConfigError(f"--executor {executor!r}: allowed: local, slurm")


def run_sweep(
    experiment: str | Path,
    overrides: Sequence[str] = (),
    *,
    out_dir: str | Path | None = None,
    executor: str | None = None,
    max_workers: int | None = None,
    run_fn: RunFunction | None = None,
    progress: bool = True,
) -> SweepResult:
    """Plan and run (or resume) the sweep of an experiment YAML.

    Args:
        experiment: Experiment YAML with a ``sweep:`` block.
        overrides: ``--set`` strings applied to the experiment first.
        out_dir: Sweep directory (default ``outputs/<experiment name>``).
        executor: ``local`` or ``slurm`` (default: ``sweep.executor``).
        max_workers: Local processes (default: ``sweep.max_workers`` or the CPU count).
        run_fn: Runs one experiment (default ``governed_broker.runner.run_experiment``);
            must be picklable by reference for the local and slurm executors.
        progress: Show a progress bar (only on a terminal).

    Raises:
        ConfigError: invalid experiment or sweep, executor unavailable, directory in use.
    """
    plan = build_plan(experiment, overrides)
    require_cards(plan, plan.runs)  # before anything is written
    sweep_dir = SweepDir(out_dir if out_dir is not None else default_sweep_dir(plan))
    create_out_dir(sweep_dir.root)
    with SweepLock(sweep_dir):
        return run_plan_locked(plan, sweep_dir, executor=executor, max_workers=max_workers,
                               run_fn=run_fn, progress=progress)


def run_plan_locked(
    plan: SweepPlan,
    sweep_dir: SweepDir,
    *,
    executor: str | None = None,
    max_workers: int | None = None,
    run_fn: RunFunction | None = None,
    progress: bool = True,
) -> SweepResult:
    """Run (or resume) a plan into ``sweep_dir``, whose ``SweepLock`` the caller holds.

    Writes the plan, runs what is not done (retrying failed runs below ``max_attempts``) and
    rewrites the index and combined tables. ``run_sweep`` plans an experiment's sweep block;
    ``sweep.branch`` plans the arms of a branched run; both execute here.
    """
    sweep_dir.write_plan(plan.to_json())
    todo, invalid, exhausted = runs_to_execute(sweep_dir, plan, plan.sweep.max_attempts)
    for run in invalid:
        sweep_dir.write_state(
            run.run_id, RunState(FAILED, 0, finished_at=now_iso(), error=run.error)
        )
    if todo:
        _execute(sweep_dir, plan, todo, executor, max_workers, run_fn, progress)
    index = collect(sweep_dir, plan, force=bool(todo))
    return SweepResult(
        sweep_dir.root, index, [r.run_id for r in todo], [r.run_id for r in exhausted]
    )


def require_cards(plan: SweepPlan, runs: Sequence[PlannedRun]) -> None:
    """Refuse a gated sweep without passing cards before any run starts.

    When a run with ``validity.gate: block`` has no passing validity card (runs that differ only in
    their seed share one card).
    """
    from governed_broker.config.resolved import resolve_experiment
    from governed_broker.validity.gate import check_gate

    swept = any(o.startswith("validity.") for run in runs for o in run.overrides)
    if not swept and plan.load(plan.base_overrides).validity.gate != "block":
        return  # no run is gated: no configuration needs loading
    seen: set[tuple[str, ...]] = set()
    for run in runs:
        overrides = tuple(o for o in plan.run_overrides(run) if not o.startswith("seed="))
        if run.error or overrides in seen:
            continue
        seen.add(overrides)
        config = plan.load(list(overrides))
        if config.validity.gate != "block":
            continue
        try:
            check_gate(resolve_experiment(config))
        except ConfigError as exc:
            raise ConfigError(f"sweep run {run.run_id} {run.params}: {exc}") from exc


def _execute(
    sweep_dir: SweepDir,
    plan: SweepPlan,
    todo: list[PlannedRun],
    executor_name: str | None,
    max_workers: int | None,
    run_fn: RunFunction | None,
    show_progress: bool,
) -> None:
    executor = make_executor(plan, executor_name or plan.sweep.executor, max_workers)
    hosts = plan.sweep.llm_hosts
    base_dir = None if plan.base_dir is None else str(plan.base_dir)
    items = [
        WorkItem(run.run_id, tuple(plan.run_overrides(run)), llm_host_for(run.run_id, hosts),
                 base_dir=base_dir)
        for run in todo
    ]
    progress = SweepProgress(sweep_dir, [r.run_id for r in todo], enabled=show_progress)
    try:
        lost = executor.execute(sweep_dir, plan.experiment, items, run_fn, progress)
    finally:
        progress.close()
    for run_id, message in lost.items():
        state = sweep_dir.read_state(run_id)
        if state is not None and state.status == RUNNING and not sweep_dir.is_done(run_id):
            state.status, state.error, state.finished_at = FAILED, message[:500], now_iso()
            sweep_dir.write_state(run_id, state)


class SweepLock:
    """``_sweep/lock``: refuses a second submission into a directory in use on this host."""

    def __init__(self, sweep_dir: SweepDir) -> None:
        self.path = sweep_dir.meta / "lock"

    def __enter__(self) -> SweepLock:
        if self.path.is_file():
            try:
                owner = json.loads(self.path.read_text(encoding="utf-8"))
            except ValueError:
                owner = {}
            if owner.get("host") == socket.gethostname() and _pid_alive(owner.get("pid")):
                raise ConfigError(
                    f"{self.path.parent.parent}: a sweep (pid {owner['pid']}) is already "
                    "running into this directory; wait for it or stop it first"
                )
        write_atomic(self.path, json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))
        return self

    def __exit__(self, *exc: object) -> None:
        self.path.unlink(missing_ok=True)


def _pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
