"""Kill-and-resume equivalence: an interrupted run, resumed, ends byte-identical."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from governed_broker.checkpoint import CHECKPOINT_DIR, CheckpointWriter, latest_checkpoint
from governed_broker.runner import OutputExistsError, partial_dir, run_experiment
from governed_broker.sim.model import FloodModel

OUTPUTS = ("agents_yearly.csv", "model_yearly.csv")
# memory on, so that engine items, generator states and memory.sqlite are part of the state
SETTINGS = ["years=7", "population.size=25", "memory.engine=humancentric"]


class Crash(RuntimeError):
    """Stands for a process dying at a chosen point."""


def _read(run: Path) -> dict[str, bytes]:
    files = {name: (run / name).read_bytes() for name in OUTPUTS}
    files["memories/1.md"] = (run / "memories" / "1.md").read_bytes()
    return files


@pytest.fixture
def reference(experiments, tmp_path) -> dict[str, bytes]:
    config = experiments.config(SETTINGS)
    return _read(run_experiment(config, tmp_path / "reference", progress=False).out_dir)


def _crash_in(monkeypatch, target, name: str, year: int) -> None:
    original = getattr(target, name)

    def crashing(*args, **kwargs):
        model = next((a for a in args if isinstance(a, FloodModel)), None)
        model = model or kwargs.get("model") or args[0]
        if model.year == year:
            raise Crash(f"{name} in year {year}")
        return original(*args, **kwargs)

    monkeypatch.setattr(target, name, crashing)


@pytest.mark.parametrize(("target", "name", "year"), [
    (FloodModel, "hazard_phase", 1),        # before anything of year 1 was written
    (FloodModel, "execution_phase", 3),     # mid-year, after decisions
    (FloodModel, "reflection_phase", 5),    # after execution, before consolidation
    (CheckpointWriter, "write", 4),         # rows written, checkpoint not yet
])
def test_resume_after_crash_is_identical(
    experiments, tmp_path, monkeypatch, reference, target, name, year
) -> None:
    config = experiments.config(SETTINGS)
    out = tmp_path / "run"
    with monkeypatch.context() as m:
        _crash_in(m, target, name, year)
        with pytest.raises(Crash):
            run_experiment(config, out, progress=False)
    assert not out.exists() and partial_dir(out).exists()
    result = run_experiment(config, out, progress=False)
    assert result.resumed_from_year == (None if year == 1 else year - 1)
    assert _read(out) == reference
    assert not (out / CHECKPOINT_DIR).exists()


def test_resume_refuses_another_configuration(experiments, tmp_path, monkeypatch) -> None:
    out = tmp_path / "run"
    with monkeypatch.context() as m:
        _crash_in(m, FloodModel, "hazard_phase", 3)
        with pytest.raises(Crash):
            run_experiment(experiments.config(SETTINGS), out, progress=False)
    other = experiments.config([*SETTINGS, "seed=7"])
    with pytest.raises(OutputExistsError, match="different configuration"):
        run_experiment(other, out, progress=False)
    run_experiment(other, out, progress=False, overwrite=True)  # discards the other run
    assert (out / "agents_yearly.csv").exists()


KILL_SETTINGS = ["years=40", "population.size=150", "memory.engine=humancentric"]


def test_sigkill_then_resume_is_identical(experiments, tmp_path) -> None:
    """A real SIGKILL of a running `run.py` process at an arbitrary moment after year 2."""
    root = Path(__file__).resolve().parent.parent
    reference = run_experiment(experiments.config(KILL_SETTINGS), tmp_path / "reference",
                               progress=False).out_dir
    path = experiments.write(experiments.data(), "kill.yaml")
    out = tmp_path / "killed"
    args = [sys.executable, "run.py", str(path), "--out", str(out), "--no-progress",
            *(x for s in KILL_SETTINGS for x in ("--set", s))]
    proc = subprocess.Popen(args, cwd=root)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        ckpt = latest_checkpoint(partial_dir(out))
        if ckpt is not None and ckpt.year >= 2:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not out.exists(), "the run finished before it could be killed; make it longer"
    assert subprocess.run(args, cwd=root).returncode == 0
    assert _read(out) == _read(reference)


def _audit(run: Path, name: str) -> list[dict]:
    """Audit records without what legitimately differs between processes.

    Timings, cache flags: a resumed year's calls are answered again.
    """
    volatile = {"latency_s", "cached", "cache_hits", "llm"}

    def clean(value):
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k not in volatile}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return [clean(json.loads(line)) for line in (run / name).read_text().splitlines()]


def test_llm_run_with_reflection_resumes_identically(experiments, tmp_path, monkeypatch,
                                                     repo_root) -> None:
    """The governed broker (scripted backend), reflection and memory across a crash."""
    llm = {"backend": "scripted", "model": "resume",
           "script": str(repo_root / "tests" / "fixtures" / "scripted_resume.yaml"),
           "cache": {"mode": "off"}}
    settings = ["years=5", "population.size=12", "memory.engine=humancentric",
                "decision.maker=llm", f"llm={json.dumps(llm)}", "reflection.enabled=true",
                "hazard.zones.high.annual_probability=0.6", "hazard.zones.high.flooded_share=1"]
    config = experiments.config(settings)
    reference = run_experiment(config, tmp_path / "reference", progress=False).out_dir
    out = tmp_path / "run"
    with monkeypatch.context() as m:
        _crash_in(m, FloodModel, "reflection_phase", 3)
        with pytest.raises(Crash):
            run_experiment(config, out, progress=False)
    assert run_experiment(config, out, progress=False).resumed_from_year == 2
    assert _read(out) == _read(reference)
    for name in ("decisions.jsonl", "reflections.jsonl"):
        assert _audit(out, name) == _audit(reference, name), name
    statuses = {r["status"] for r in _audit(out, "decisions.jsonl")}
    assert "retry_approved" in statuses  # the governance path was exercised
