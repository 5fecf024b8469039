"""SIGKILL at seeded random moments, then resume, again and again: outputs stay byte-identical.

A real ``run.py`` process is killed after a delay drawn from a seeded generator, the same
command is run again (it resumes from the last checkpoint, or only finishes a run killed while
finishing), and so on until one completes. Whatever moment the kills hit (start-up, a year in
progress, a checkpoint being written, finishing), the final CSVs equal those of a run that was
never interrupted.

Finishing is only a small part of a run, so random delays seldom hit it: the second half
SIGKILLs a real process at each step of finishing in turn (a wrapper around the CLI sends
``SIGKILL`` to its own process when a chosen function is reached) and checks that the resumed
run re-simulates no year and ends with exactly the files of an uninterrupted run.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from governed_broker.checkpoint import CheckpointError, latest_checkpoint
from governed_broker.run_dir import lock_path
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
    if out.is_dir() and not partial_dir(out).exists():
        return kills  # the last kill landed after the run was moved into place (run again,
        # the finished output would be refused: exit 2, as CI saw once on a loaded machine)
    subprocess.run(args, cwd=ROOT, check=True, capture_output=True)
    return kills


def _args(path: Path, out: Path, settings: list[str]) -> list[str]:
    return [sys.executable, "run.py", str(path), "--out", str(out), "--no-progress",
            *(x for s in settings for x in ("--set", s))]


BASELINE = ["years=60", "population.size=150", "memory.engine=humancentric"]


@pytest.mark.parametrize("seed", [1])
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


def _governed_settings(repo_root: Path, years: int, households: int,
                       flood_chance: float) -> list[str]:
    """Overrides for a governed run of the scripted resume model with memory and reflection.

    Whose high zone floods every home with ``flood_chance`` a year.
    """
    llm = {"backend": "scripted", "model": "resume",
           "script": str(repo_root / "tests" / "fixtures" / "scripted_resume.yaml"),
           "cache": {"mode": "off"}}
    return [f"years={years}", f"population.size={households}", "memory.engine=humancentric",
            "decision.maker=llm", f"llm={json.dumps(llm)}", "reflection.enabled=true",
            f"hazard.zones.high.annual_probability={flood_chance}",
            "hazard.zones.high.flooded_share=1"]


def test_governed_llm_run_survives_random_kills(experiments, tmp_path, repo_root) -> None:
    settings = _governed_settings(repo_root, years=12, households=120, flood_chance=0.6)
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


def _kill_after_checkpoint(args: list[str], out: Path, year: int) -> None:
    """Start ``args`` and SIGKILL it as soon as the checkpoint of ``year`` is on disk.

    Or a later one.
    """
    proc = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            ckpt = latest_checkpoint(partial_dir(out))
        except CheckpointError:  # read while the run replaced it: look again
            continue
        if ckpt is not None and ckpt.year >= year:
            break
        time.sleep(0.02)
    assert proc.poll() is None, proc.stderr.read().decode()
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_a_30_year_governed_run_killed_twice_resumes_identically(experiments, tmp_path,
                                                                 repo_root) -> None:
    """Thirty years of memories, reflections and governed decisions.

    Killed after year 10 and again after year 25, the resumed run replays 25 years of the memory log
    and ends with the files of an uninterrupted run.
    """
    settings = _governed_settings(repo_root, years=30, households=40, flood_chance=0.4)
    reference = run_experiment(experiments.config(settings), tmp_path / "reference",
                               progress=False).out_dir
    out = tmp_path / "killed"
    args = _args(experiments.write(experiments.data(), "kill.yaml"), out, settings)
    for year in (10, 25):
        _kill_after_checkpoint(args, out, year)
        assert not out.exists(), "the run finished before it could be killed"
    subprocess.run(args, cwd=ROOT, check=True, capture_output=True)
    assert json.loads((out / "manifest.json").read_text())["resumed_from_year"] >= 25
    for name in (*OUTPUTS, "memories/1.md", "memories/40.md"):
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name
    for name in ("decisions.jsonl", "reflections.jsonl"):
        assert _audit(out / name) == _audit(reference / name), name


def _audit(path: Path) -> list[dict]:
    """Audit records without what differs between processes (timings, cache flags)."""
    volatile = {"latency_s", "cached", "cache_hits", "llm"}

    def clean(value):
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if k not in volatile}
        return [clean(v) for v in value] if isinstance(value, list) else value

    return [clean(json.loads(line)) for line in path.read_text().splitlines()]


#: Runs the CLI with one function replaced by a SIGKILL of the process itself (argv: steps
#: log, kill point, CLI arguments). Every simulated year is appended to the steps log.
_KILL_AT = textwrap.dedent("""
    import os, shutil, signal, sys
    from pathlib import Path
    import governed_broker.runner as runner
    from governed_broker.cli import main

    steps_log, point, args = sys.argv[1], sys.argv[2], sys.argv[3:]
    real_step, real_replace, real_rmtree = runner.FloodModel.step, os.replace, shutil.rmtree

    def die(*_args, **_kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    def step(self):
        with open(steps_log, "a") as f:
            f.write(f"{self.year}\\n")
        return real_step(self)

    def replace(src, dst, *a, **k):
        if (point == "manifest" and Path(dst).name == "manifest.json"
                or point == "rename" and str(src).endswith(".partial")):
            die()  # the temporary manifest is written, not yet in place / the run not moved
        return real_replace(src, dst, *a, **k)

    def rmtree(path, *a, **k):
        if point == "replace_old" and (Path(path) / "manifest.json").is_file():
            for name in ("manifest.json", "agents_yearly.csv"):  # half-way through deleting
                (Path(path) / name).unlink()
            die()
        return real_rmtree(path, *a, **k)

    runner.FloodModel.step, os.replace, shutil.rmtree = step, replace, rmtree
    if point == "markdown":
        import governed_broker.sim.household_memory as household
        real_export, written = household.export_markdown, []

        def export(*a, **k):
            written.append(1)
            return die() if len(written) == 10 else real_export(*a, **k)

        household.export_markdown = export
    elif point == "plot":
        import governed_broker.sim.plots as plots
        plots.summary_plot = die
    elif point == "checkpoints":
        runner.remove_checkpoints = die
    sys.exit(main(["run", *args]))
""")

#: Steps of finishing, in the order a run reaches them; each kill resumes into the next.
FINISHING = ("markdown", "plot", "manifest", "checkpoints", "rename")
SMALL = ["years=6", "population.size=30", "memory.engine=humancentric", "outputs.plots=true"]


def _run_killed_at(point: str, args: list[str], steps_log: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _KILL_AT, str(steps_log), point, *args[2:]],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _assert_same_run(out: Path, reference: Path) -> None:
    assert _listing(out) == _listing(reference)
    for name in (*OUTPUTS, "memories/1.md", "memories/30.md"):
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name
    assert not partial_dir(out).exists() and not lock_path(out).exists()


def test_a_kill_at_each_step_of_finishing_reruns_no_year(experiments, tmp_path) -> None:
    reference = run_experiment(experiments.config(SMALL), tmp_path / "reference",
                               progress=False).out_dir
    out, steps = tmp_path / "killed", tmp_path / "steps.log"
    args = _args(experiments.write(experiments.data(), "kill.yaml"), out, SMALL)
    for point in FINISHING:
        proc = _run_killed_at(point, args, steps)
        assert proc.returncode == -signal.SIGKILL, (point, proc.stderr)
        work = partial_dir(out)
        assert work.is_dir() and not out.exists(), point
        assert (work / "manifest.json").is_file() == (point in ("checkpoints", "rename")), point
    assert _run_killed_at("none", args, steps).returncode == 0
    assert steps.read_text().split() == [str(y) for y in range(6)]  # all in the first process
    _assert_same_run(out, reference)
    # the manifest was written by the run resumed after the kill at "manifest": from year 6
    assert json.loads((out / "manifest.json").read_text())["resumed_from_year"] == 6


def test_a_kill_while_deleting_the_replaced_run_resumes(experiments, tmp_path) -> None:
    reference = run_experiment(experiments.config(SMALL), tmp_path / "reference",
                               progress=False).out_dir
    out, steps = tmp_path / "replaced", tmp_path / "steps.log"
    run_experiment(experiments.config(["years=3"]), out, progress=False)  # the run replaced
    args = [*_args(experiments.write(experiments.data(), "kill.yaml"), out, SMALL),
            "--overwrite"]
    proc = _run_killed_at("replace_old", args, steps)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    proc = _run_killed_at("none", args, steps)
    assert proc.returncode == 0, proc.stderr
    assert len(steps.read_text().split()) == 6
    _assert_same_run(out, reference)
