"""A run killed part-way and resumed, for the tests that hold a resumed run to a whole one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


def resumed_after_kill(config: Any, tmp_path: Path, year: int) -> tuple[Path, Path]:
    """Run ``config`` whole, and again killed in ``year`` (after its decisions) then resumed.

    Returns:
        The resumed run's folder and the whole run's, to compare their outputs.
    """
    from governed_broker.runner import partial_dir, run_experiment
    from governed_broker.sim.model import FloodModel

    reference = run_experiment(config, tmp_path / "ref", progress=False).out_dir
    original = FloodModel.execution_phase

    def crash(self, decisions):
        if self.year == year:
            raise RuntimeError(f"killed in year {year}")
        return original(self, decisions)

    out = tmp_path / "run"
    with pytest.MonkeyPatch.context() as m:
        m.setattr(FloodModel, "execution_phase", crash)
        with pytest.raises(RuntimeError, match="killed"):
            run_experiment(config, out, progress=False)
    assert partial_dir(out).exists()
    assert run_experiment(config, out, progress=False).resumed_from_year == year - 1
    return out, reference
