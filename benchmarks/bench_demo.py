"""The README demo, cold, timed: what a new user waits for on this machine.

Runs ``experiments/demo.yaml`` (or another experiment) as ``run.py`` does, in a subprocess, with
an empty response cache (a fresh SQLite file in a temporary directory; the model itself comes
from the model cache, so the download is not timed), and prints one line per figure: wall
seconds, LLM calls made by kind against the estimate printed before the run, seconds per call,
tokens, and the machine's load (``uptime``) before and after, with the number of usable cores.

    python benchmarks/bench_demo.py                       # the demo as shipped
    python benchmarks/bench_demo.py --busy 2              # beside two busy processes
    python benchmarks/bench_demo.py --set llm.threads=1   # a lever, measured the same way
    python benchmarks/bench_demo.py --json out.json       # the figures as JSON too

Busy processes are Python loops (``--busy N``), started before the run and stopped after it.
Run it under the shared lock on a shared machine (``flock /work/notes/heavy.lock ...``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ESTIMATE = re.compile(r"about ([\d,]+) LLM calls")


def load() -> str:
    """``uptime``'s load averages (1, 5, 15 min)."""
    return os.getloadavg().__repr__()


def busy(n: int) -> list[subprocess.Popen]:
    """``n`` processes that keep one core each busy."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def calls_by_tag(log: Path) -> dict[str, dict[str, float]]:
    """Calls, seconds and tokens of a run's call log, by tag."""
    with sqlite3.connect(f"file:{log}?mode=ro", uri=True) as db:
        rows = db.execute("SELECT tag, COUNT(*), SUM(latency_s), SUM(prompt_tokens), "
                          "SUM(completion_tokens), SUM(cached) FROM calls GROUP BY tag").fetchall()
    return {tag: {"calls": n, "seconds": round(s, 1), "prompt_tokens": p,
                  "completion_tokens": c, "cached": k} for tag, n, s, p, c, k in rows}


def run(experiment: Path, overrides: list[str], tmp: Path) -> dict:
    """One cold run; its figures."""
    out = tmp / "run"
    cmd = [sys.executable, str(REPO / "run.py"), str(experiment), "--out", str(out),
           "--set", f"llm.cache.path={tmp / 'responses.sqlite'}", "--no-progress"]
    for setting in overrides:
        cmd += ["--set", setting]
    before = load()
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"the run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    match = ESTIMATE.search(done.stderr)
    tags = calls_by_tag(out / "llm_calls.sqlite")
    calls = sum(t["calls"] for t in tags.values())
    seconds = sum(t["seconds"] for t in tags.values())
    decisions = len((out / "decisions.jsonl").read_text(encoding="utf-8").splitlines())
    return {
        "experiment": str(experiment.relative_to(REPO)) if experiment.is_relative_to(REPO)
        else str(experiment),
        "overrides": overrides,
        "wall_s": round(wall, 1),
        "calls": calls,
        "calls_estimated": int(match.group(1).replace(",", "")) if match else None,
        "decisions": decisions,
        "calls_per_decision": round(tags.get("decision", {}).get("calls", 0)
                                    / max(1, decisions), 2),
        "s_per_call": round(seconds / max(1, calls), 2),
        "by_tag": tags,
        "load_before": before,
        "load_after": load(),
        "usable_cores": len(os.sched_getaffinity(0)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", nargs="?", type=Path,
                        default=REPO / "experiments" / "demo.yaml")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="a setting for the run (repeatable)")
    parser.add_argument("--busy", type=int, default=0, help="busy processes beside the run")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    hogs = busy(args.busy)
    try:
        with tempfile.TemporaryDirectory(prefix="bench_demo_") as tmp:
            figures = run(args.experiment.resolve(), args.overrides, Path(tmp))
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    figures["busy_processes"] = args.busy
    est, made = figures["calls_estimated"], figures["calls"]
    off = f"{(est - made) / made:+.0%}" if est and made else "n/a"
    print(f"demo cold: {figures['wall_s']:.0f} s wall, {made} LLM calls (estimated {est}, "
          f"{off}), {figures['s_per_call']:.1f} s/call, "
          f"{figures['calls_per_decision']:.2f} calls per decision")
    for tag, t in sorted(figures["by_tag"].items()):
        print(f"  {tag}: {t['calls']} calls, {t['seconds']:.0f} s, "
              f"{t['prompt_tokens'] / t['calls']:.0f} prompt and "
              f"{t['completion_tokens'] / t['calls']:.0f} generated tokens per call")
    print(f"  settings: {' '.join(args.overrides) or '(as shipped)'}; busy processes beside: "
          f"{args.busy}; usable cores: {figures['usable_cores']}")
    print(f"  load average (1, 5, 15 min) before {figures['load_before']}, after "
          f"{figures['load_after']}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
