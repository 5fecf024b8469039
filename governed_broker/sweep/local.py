"""The ``local`` executor: at most ``max_workers`` runs at once, each in its own process.

Every run gets a fresh process (forked from a ``forkserver`` that has the package imported, so
starting one is cheap). A process pool would be lighter, but when one pool worker dies (out of
memory, SIGKILL) ``concurrent.futures`` breaks the whole pool and kills the runs in the other
workers too; with one process per run, a run that dies takes nothing else with it and its exit
status says exactly which run it was.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from multiprocessing.connection import wait
from pathlib import Path

from governed_broker.sweep.progress import SweepProgress
from governed_broker.sweep.state import SweepDir
from governed_broker.sweep.worker import RunFunction, WorkItem, execute_runs

#: Modules the fork server imports once, so that each run's process starts fast (importing
#: Mesa, pandas and SciPy costs seconds per process otherwise).
PRELOAD = ["governed_broker.sweep.worker", "governed_broker.sim.damage", "governed_broker.runner"]


def _context() -> multiprocessing.context.BaseContext:
    if "forkserver" in multiprocessing.get_all_start_methods():
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        return context
    return multiprocessing.get_context("spawn")


def describe_exit(code: int | None) -> str:
    """Why a run's process ended without finishing: its exit code or signal."""
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"worker process killed by {name} (out of memory or killed) before the run finished"
    return f"worker process exited with code {code} before the run finished"


class LocalExecutor:
    """Runs work items on this machine, ``max_workers`` at a time (default: CPU count)."""

    name = "local"

    def __init__(self, max_workers: int | None = None) -> None:
        self.max_workers = max_workers or os.cpu_count() or 1

    def execute(
        self,
        sweep_dir: SweepDir,
        experiment: Path,
        items: list[WorkItem],
        run_fn: RunFunction | None,
        progress: SweepProgress,
    ) -> dict[str, str]:
        """Run ``items``; returns ``{run_id: error}`` for runs whose process died."""
        context = _context()
        queue = list(items)
        running: dict[int, tuple[multiprocessing.process.BaseProcess, WorkItem]] = {}
        lost: dict[str, str] = {}
        try:
            while queue or running:
                while queue and len(running) < self.max_workers:
                    item = queue.pop(0)
                    process = context.Process(
                        target=execute_runs,
                        args=(str(sweep_dir.root), str(experiment), [item], run_fn),
                        name=f"sweep-run-{item.run_id}",
                    )
                    process.start()
                    running[process.sentinel] = (process, item)
                for sentinel in wait(list(running), timeout=1.0):
                    process, item = running.pop(sentinel)
                    process.join()
                    if process.exitcode != 0:
                        lost[item.run_id] = describe_exit(process.exitcode)
                progress.refresh()
        finally:
            # Interrupted (Ctrl-C): stop the runs in flight; they resume on re-submission.
            for process, _ in running.values():
                process.terminate()
            for process, _ in running.values():
                process.join()
        return lost
