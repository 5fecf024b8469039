"""The progress of a sweep's runs: done / running / failed, and when the rest will be done.

Shown through ``governed_broker.progress``: one line rewritten on a terminal, plain lines in a
log.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from governed_broker.progress import Progress
from governed_broker.sweep.state import DONE, FAILED, RUNNING, SweepDir


class SweepProgress:
    """Polls the state records of ``run_ids`` and shows how many are done, running, failed.

    The ETA comes from the time the finished runs took.

    Args:
        sweep_dir: The sweep directory.
        run_ids: Runs submitted in this call.
        enabled: False shows nothing.
        label: What the line is about (default ``sweep``).
    """

    def __init__(self, sweep_dir: SweepDir, run_ids: Sequence[str], enabled: bool = True,
                 label: str = "sweep") -> None:
        self.sweep_dir = sweep_dir
        self.run_ids = list(dict.fromkeys(run_ids))
        self.meter = Progress(label, enabled=enabled)
        self.meter.phase("runs", len(self.run_ids))
        self._finished = 0

    def counts(self) -> Counter:
        """Runs by status (``done``, ``failed``, ``running``, ``pending``)."""
        return Counter(self.sweep_dir.status(r) for r in self.run_ids)

    def refresh(self) -> Counter:
        """Re-read the states and update the line; returns the counts."""
        counts = self.counts()
        finished = counts[DONE] + counts[FAILED]
        failed = f", {counts[FAILED]} failed" if counts[FAILED] else ""
        self.meter.relabel(f"runs ({counts[RUNNING]} running{failed}) done")
        if finished > self._finished:
            self.meter.advance(finished - self._finished)
            self._finished = finished
        return counts

    def close(self) -> None:
        """End the progress line."""
        self.refresh()
        self.meter.close()
