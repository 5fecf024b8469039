"""SIGKILL at seeded random moments, then resume, again and again: outputs stay byte-identical.

A real ``run.py`` process is killed after a delay drawn from a seeded generator, the same
command is run again (it resumes from the last checkpoint, or only finishes a run killed while
finishing), and so on until one completes. Whatever moment the kills hit (start-up, a year in
progress, a checkpoint being written, finishing), the final CSVs equal those of a run that was
never interrupted. Deterministic finishing-phase kills are in ``test_run_dir.py``.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from governed_broker.runner import partial_dir, run_experiment

ROOT = Path(__file__).resolve().parent.parent
OUTPUTS = ("agents_yearly.csv", "model_yearly.csv")


def _kill_until_done(args: list[str], out: Path, rng: random.Random, low: float,
                     high: float, max_starts: int = 10) -> int:
    """Start ``args`` repeatedly, SIGKILLing each after U(low, high) s; returns kills made."""
    kills = 0
    for _ in range(max_starts):
        if out.is_dir() and not partial_dir(out).exists():
            return kills  # the last kill landed after the run was moved into place
        proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        deadline = time.monotonic() + rng.uniform(low, high)
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
            continue
        err = proc.stderr.read().decode()
        assert proc.returncode == 0, err
        return kills
    subprocess.run(args, cwd=ROOT, check=True, capture_output=True)
    return kills


def _args(path: Path, out: Path, settings: list[str]) -> list[str]:
    return [sys.executable, "run.py", str(path), "--out", str(out), "--no-progress",
            *(x for s in settings for x in ("--set", s))]


BASELINE = ["years=60", "population.size=150", "memory.engine=humancentric"]


@pytest.mark.parametrize("seed", [1, 2])
def test_baseline_survives_random_kills(experiments, tmp_path, seed) -> None:
    reference = run_experiment(experiments.config(BASELINE), tmp_path / "reference",
                               progress=False).out_dir
    path = experiments.write(experiments.data(), "kill.yaml")
    out = tmp_path / "killed"
    kills = _kill_until_done(_args(path, out, BASELINE), out, random.Random(seed), 0.8, 3.0)
    print(f"SIGKILLs before completion: {kills}")
    assert kills >= 1, "no kill landed; make the run longer"
    assert not partial_dir(out).exists()
    for name in OUTPUTS:
        assert (out / name).read_bytes() == (reference / name).read_bytes(), (name, kills)
    for name in ("memories/1.md", "memories/150.md"):
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name


def test_governed_llm_run_survives_random_kills(experiments, tmp_path, repo_root) -> None:
    llm = {"backend": "scripted", "model": "resume",
           "script": str(repo_root / "tests" / "fixtures" / "scripted_resume.yaml"),
           "cache": {"mode": "off"}}
    settings = ["years=12", "population.size=120", "memory.engine=humancentric",
                "decision.maker=llm", f"llm={json.dumps(llm)}", "reflection.enabled=true",
                "hazard.zones.high.annual_probability=0.6"]
    reference = run_experiment(experiments.config(settings), tmp_path / "reference",
                               progress=False).out_dir
    path = experiments.write(experiments.data(), "kill.yaml")
    out = tmp_path / "killed"
    kills = _kill_until_done(_args(path, out, settings), out, random.Random(7), 1.2, 3.0)
    print(f"SIGKILLs before completion: {kills}")
    assert kills >= 1, "no kill landed; make the run longer"
    for name in OUTPUTS:
        assert (out / name).read_bytes() == (reference / name).read_bytes(), (name, kills)
    decided = [json.loads(line)["executed_action"]
               for line in (out / "decisions.jsonl").read_text().splitlines()]
    expected = [json.loads(line)["executed_action"]
                for line in (reference / "decisions.jsonl").read_text().splitlines()]
    assert decided == expected
