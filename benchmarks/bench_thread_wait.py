"""How llama.cpp's idle threads wait, measured: seconds per call and the replies, arm by arm.

The embedded runtime (xllamacpp) is an OpenMP build: between two operations of a token, each of
llama.cpp's threads waits at a barrier for the others, and libgomp decides how it waits, from
its environment read once when the library loads (``OMP_WAIT_POLICY``, ``GOMP_SPINCOUNT``).
Each arm is a fresh process with its own environment that makes the same decision requests (the
realistic PMT prompts of ``bench_llm.py``, same seeds) through the project's embedded backend;
arms run in turn, the order reversed every round (A B, B A, ...), so that a machine whose speed
drifts weighs on every arm alike. Prints per arm the median seconds per call, the ratio to the
first arm pair by pair, the process's CPU seconds per second of a call (on idle cores near the
thread count when waiting threads spin; on busy ones capped by the process's share, which
spinning then wastes), the load (``uptime``) at each run, and whether every arm gave the same
text for every request (a wait policy that changed a reply would have to be in the cache key).

    python benchmarks/bench_thread_wait.py                        # shipped vs libgomp default
    python benchmarks/bench_thread_wait.py --busy 2 --rounds 3    # beside two busy processes
    python benchmarks/bench_thread_wait.py --arm shipped: --arm spin:GOMP_SPINCOUNT=300000
    python benchmarks/bench_thread_wait.py --arm two: --arm one:threads=1 --busy 2

An arm is ``NAME:VAR=VALUE,VAR=VALUE`` (``NAME:`` adds nothing to the environment); the
pseudo-variable ``threads=N`` sets that arm's thread count instead of ``--threads`` (replies
differ between thread counts, so they are compared within one count). The ``OMP_*``/``GOMP_*``
variables of this process are removed from every arm first.
Timings are only comparable on a machine doing nothing else; on a shared machine, run heavy jobs
one at a time (e.g. ``flock /tmp/heavy.lock python benchmarks/...``) and report the load.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The default arms: as shipped (no variable set), and libgomp's own default (300,000 spins
#: per wait, its documented default: what every run had before the backend chose to sleep).
DEFAULT_ARMS = ("shipped:", "libgomp-default:GOMP_SPINCOUNT=300000")


def child(requests: int, threads: int, max_tokens: int) -> None:
    """One arm: the decisions through the embedded backend, one JSON line per call."""
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_llm import decision_request  # noqa: PLC0415 - the arm's environment comes first

    from governed_broker.config.llm import LLMConfig  # noqa: PLC0415
    from governed_broker.llm import build_backend  # noqa: PLC0415

    backend = build_backend(LLMConfig(threads=threads, prompt_cache=False))
    for index in range(requests):
        start, cpu = time.perf_counter(), time.process_time()
        reply = backend.chat(decision_request(index, max_tokens))
        print(json.dumps({
            "index": index,
            "s": round(time.perf_counter() - start, 2),
            "cpu_s": round(time.process_time() - cpu, 2),
            "tokens": reply.completion_tokens,
            "sha": hashlib.sha256(reply.text.encode()).hexdigest()[:16],
            "wait": backend.describe().get("thread_wait"),
        }), flush=True)


def arm_env(spec: str, threads: int) -> tuple[str, dict[str, str], int]:
    """The name, environment and thread count of an arm ``NAME:VAR=VALUE,...``."""
    name, _, assignments = spec.partition(":")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    for item in filter(None, assignments.split(",")):
        key, _, value = item.partition("=")
        if key == "threads":
            threads = int(value)
        else:
            env[key] = value
    return name, env, threads


def run_arm(spec: str, args: argparse.Namespace) -> dict:
    """One process of one arm: its calls and the load before it."""
    name, env, threads = arm_env(spec, args.threads)
    before = os.getloadavg()
    done = subprocess.run(
        [sys.executable, __file__, "--child", "--requests", str(args.requests),
         "--threads", str(threads), "--max-tokens", str(args.max_tokens)],
        env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"arm {name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    calls = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {"arm": name, "threads": threads, "calls": calls,
            "load": [round(x, 2) for x in before]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arm", action="append", help="NAME:VAR=VALUE,... (repeatable)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of every arm")
    parser.add_argument("--requests", type=int, default=3, help="decisions per run")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads")
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument("--busy", type=int, default=0, help="busy processes beside the runs")
    parser.add_argument("--json", type=Path, help="also write every run's figures here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.requests, args.threads, args.max_tokens)
        return
    arms = args.arm or list(DEFAULT_ARMS)
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.busy)]
    runs = []
    try:
        for round_ in range(args.rounds):
            for spec in arms if round_ % 2 == 0 else arms[::-1]:
                runs.append(run_arm(spec, args) | {"round": round_})
                last = runs[-1]
                print(f"round {round_} {last['arm']}: "
                      f"{[c['s'] for c in last['calls']]} s, load {last['load']}", flush=True)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    report(runs, arms, args)


def report(runs: list[dict], arms: list[str], args: argparse.Namespace) -> None:
    """Median s/call per arm, paired ratios to the first arm, and the replies' identity."""
    names = [spec.partition(":")[0] for spec in arms]
    by_arm = {n: [r for r in runs if r["arm"] == n] for n in names}
    counts = sorted({r["threads"] for r in runs})
    print(f"threads {counts}, {args.requests} decisions a run, {args.rounds} rounds, "
          f"{args.busy} busy processes beside")
    for name in names:
        per_call = [c["s"] for r in by_arm[name] for c in r["calls"]]
        ratios = [sum(c["s"] for c in a["calls"]) / sum(c["s"] for c in b["calls"])
                  for a, b in zip(by_arm[name], by_arm[names[0]], strict=True)]
        waits = {c["wait"] for r in by_arm[name] for c in r["calls"]}
        cpu_per_s = sum(c["cpu_s"] for r in by_arm[name] for c in r["calls"]) / sum(per_call)
        print(f"  {name} ({by_arm[name][0]['threads']} threads): "
              f"median {statistics.median(per_call):.1f} s/call "
              f"(min {min(per_call):.1f}, max {max(per_call):.1f}); run time / "
              f"{names[0]}'s, pair by pair: {[round(x, 2) for x in ratios]}; "
              f"CPU s per s {cpu_per_s:.2f}; loads {[r['load'][0] for r in by_arm[name]]}; "
              f"wait {sorted(map(str, waits))}")
    texts = {(r["threads"], c["index"], c["sha"]) for r in runs for c in r["calls"]}
    same = len(texts) == args.requests * len(counts)
    print(f"  replies: {'the same text' if same else 'DIFFERENT texts'} for every request in "
          f"every run of every arm with the same thread count ({len(texts)} distinct "
          f"(threads, request, text) for {args.requests} requests x {len(counts)} counts)")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "same_replies": same}, indent=1) + "\n",
                             encoding="utf-8")


if __name__ == "__main__":
    main()
