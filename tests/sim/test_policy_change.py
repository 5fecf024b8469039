"""A policy change from year T.

Arms share every output byte before T and differ after; a run resumed across T ends as an
uninterrupted one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from governed_broker.runner import partial_dir, run_experiment
from governed_broker.sim.model import FloodModel

BASE = ["years=8", "population.size=40", "memory.engine=humancentric",
        "hazard.zones.high.annual_probability=0.5", "hazard.zones.high.flooded_share=1"]
#: From year 5 elevation is free of charge and premiums are rated by risk: enough to change
#: what the baseline does in 40 households.
CHANGE = ("policy_change={from_year: 5, settings: {elevation.subsidy_share: 1.0, "
          "insurance.pricing: risk_based}}")


def _rows_by_year(run: Path, name: str) -> dict[int, list[str]]:
    lines = (run / name).read_text().splitlines()
    out: dict[int, list[str]] = {}
    for line in lines[1:]:
        out.setdefault(int(line.split(",", 1)[0]), []).append(line)
    return {"header": lines[0], **out}


def test_arms_share_every_byte_before_the_change_and_differ_after(experiments, tmp_path) -> None:
    status_quo = run_experiment(experiments.config(BASE), tmp_path / "a", progress=False).out_dir
    changed = run_experiment(experiments.config([*BASE, CHANGE]), tmp_path / "b",
                             progress=False).out_dir
    for name in ("agents_yearly.csv", "model_yearly.csv"):
        a, b = _rows_by_year(status_quo, name), _rows_by_year(changed, name)
        assert a["header"] == b["header"]
        assert all(a[y] == b[y] for y in range(1, 5)), name
        assert any(a[y] != b[y] for y in range(5, 9)), name
    agents = _rows_by_year(changed, "agents_yearly.csv")
    header = agents["header"].split(",")
    offered = header.index("subsidy_usd")
    elevate = [r.split(",") for y in range(5, 9) for r in agents[y]]
    # from year 5 an elevation is paid in full by the grant
    paid = [float(r[offered]) for r in elevate if r[header.index("executed_action")]
            .startswith("elevate")]
    assert paid and all(p == 80_000.0 for p in paid)


def test_a_run_resumed_across_the_change_is_identical(experiments, tmp_path, monkeypatch) -> None:
    config = experiments.config([*BASE, CHANGE])
    reference = run_experiment(config, tmp_path / "ref", progress=False).out_dir
    original = FloodModel.execution_phase

    def crash(self, decisions):
        if self.year == 6:
            raise RuntimeError("killed in year 6")
        return original(self, decisions)

    out = tmp_path / "run"
    with monkeypatch.context() as m:
        m.setattr(FloodModel, "execution_phase", crash)
        with pytest.raises(RuntimeError, match="killed"):
            run_experiment(config, out, progress=False)
    assert partial_dir(out).exists()
    assert run_experiment(config, out, progress=False).resumed_from_year == 5
    for name in ("agents_yearly.csv", "model_yearly.csv"):
        assert (out / name).read_bytes() == (reference / name).read_bytes()
