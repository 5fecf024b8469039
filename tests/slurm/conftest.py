"""The ``slurm_cluster`` fixture: a real single-node SLURM cluster for @pytest.mark.slurm tests.

It runs ``tests/slurm/start_slurm.sh`` (idempotent: about 15 s on a fresh Debian machine,
about 1 s when already up) and, at the end of the session, ``stop_slurm.sh`` if this session
started the cluster (set ``KEEP_SLURM=1`` to leave it running). Tests skip only where SLURM
cannot be started at all (not Linux, not root, neither apt-get nor SLURM installed); with
``RUN_SLURM_TESTS=1`` (set it in CI) they fail instead of skipping.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
START, STOP = HERE / "start_slurm.sh", HERE / "stop_slurm.sh"
sys.path.insert(0, str(HERE.parent / "sweep"))  # sweep_fakes and the sweep test helpers


def cannot_start_reason() -> str | None:
    """Why a SLURM cluster cannot be started on this machine, or None."""
    if not sys.platform.startswith("linux"):
        return "SLURM tests need Linux"
    if os.geteuid() != 0:
        return "starting SLURM needs root (tests/slurm/start_slurm.sh installs and starts daemons)"
    if shutil.which("apt-get") is None and shutil.which("slurmctld") is None:
        return "neither apt-get nor slurmctld found: cannot install or start SLURM"
    return None


def _controller_up() -> bool:
    if shutil.which("scontrol") is None:
        return False
    ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
    return ping.returncode == 0 and "UP" in ping.stdout


@pytest.fixture(scope="session")
def slurm_cluster():
    """Start (or reuse) the single-node cluster; yields the partition name."""
    reason = cannot_start_reason()
    if reason:
        if os.environ.get("RUN_SLURM_TESTS") == "1":
            pytest.fail(f"RUN_SLURM_TESTS=1 but {reason}")
        pytest.skip(reason)
    was_up = _controller_up()
    started = subprocess.run(["bash", str(START)], capture_output=True, text=True, timeout=900)
    if started.returncode != 0:
        pytest.fail(f"{START} failed (exit {started.returncode}):\n{started.stderr[-4000:]}")
    yield os.environ.get("SLURM_PARTITION", "debug")
    if not was_up and os.environ.get("KEEP_SLURM") != "1":
        subprocess.run(["bash", str(STOP)], capture_output=True, text=True, timeout=300)
