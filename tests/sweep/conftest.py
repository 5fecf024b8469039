"""Fixtures of the sweep tests (helpers live in conftest_sweep.py, shared with tests/slurm)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sweep_fakes, also for workers

from conftest_sweep import write_experiment  # noqa: E402


@pytest.fixture
def experiment(tmp_path: Path):
    """``experiment(sweep_dict, **kw) -> Path`` writing into ``tmp_path``."""

    def make(sweep: dict, **kwargs) -> Path:
        return write_experiment(tmp_path, sweep, **kwargs)

    return make
