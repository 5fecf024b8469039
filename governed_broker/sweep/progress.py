"""A progress bar over the runs of a sweep: done / running / failed (tqdm, quiet off a TTY)."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence

from tqdm import tqdm

from governed_broker.sweep.state import DONE, FAILED, RUNNING, SweepDir


class SweepProgress:
    """Polls the state records of ``run_ids`` and shows how many are done, running, failed.

    Args:
        sweep_dir: The sweep directory.
        run_ids: Runs submitted in this call.
        enabled: False hides the bar; True shows it only when stderr is a terminal.
    """

    def __init__(self, sweep_dir: SweepDir, run_ids: Sequence[str], enabled: bool = True) -> None:
        self.sweep_dir = sweep_dir
        self.run_ids = list(dict.fromkeys(run_ids))
        show = enabled and sys.stderr.isatty()
        self.bar = tqdm(total=len(self.run_ids), unit="run", desc="sweep", disable=not show)

    def counts(self) -> Counter:
        """Runs by status (``done``, ``failed``, ``running``, ``pending``)."""
        return Counter(self.sweep_dir.status(r) for r in self.run_ids)

    def refresh(self) -> Counter:
        """Re-read the states and update the bar; returns the counts."""
        counts = self.counts()
        finished = counts[DONE] + counts[FAILED]
        self.bar.update(finished - self.bar.n)
        self.bar.set_postfix(
            done=counts[DONE], running=counts[RUNNING], failed=counts[FAILED], refresh=False
        )
        self.bar.refresh()
        return counts

    def close(self) -> None:
        """End the progress line."""
        self.refresh()
        self.bar.close()
