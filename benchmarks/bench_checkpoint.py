"""Time the year-end checkpoints and the part of them spent on their digests.

Usage: python benchmarks/bench_checkpoint.py [--size 1000] [--years 30]

Runs the baseline world with the human-centric memory on (so the memory store and every
household's memory state are checkpointed) and prints, per block of years, milliseconds per
checkpoint in all and milliseconds of it spent hashing (the running sha256 of the output
files' new bytes and of the memory store's new rows). Both are meant to cost the same in year
30 as in year 1 (linear in run length): memories are logged as each year's changes
(``checkpoints/memory.jsonl``), not saved whole. ``benchmarks/bench_scale.py`` also prints the
bytes written per checkpoint.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import governed_broker.checkpoint as ckpt
from governed_broker.config import load_experiment
from governed_broker.runner import run_experiment

EXPERIMENT = Path(__file__).resolve().parent.parent / "experiments" / "baseline.yaml"


def _timed(name: str, log: list[float]):
    original = getattr(ckpt.CheckpointWriter, name)

    def wrapper(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            log.append(time.perf_counter() - t0)

    setattr(ckpt.CheckpointWriter, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--years", type=int, default=30)
    args = parser.parse_args()
    configs = EXPERIMENT.parent.parent / "configs"
    concepts = configs / "knowledge" / "flood_concepts.yaml"
    texts = configs / "prompts" / "memory.yaml"
    config = load_experiment(EXPERIMENT, [
        f"population.size={args.size}", f"years={args.years}", "outputs.plots=false",
        "memory.engine=humancentric", f"memory.concepts_file={concepts}",
        f"memory.texts_file={texts}"])
    writes: list[float] = []
    hashing: list[float] = []
    _timed("write", writes)
    _timed("_advance", hashing)
    _timed("_advance_memory", hashing)
    with tempfile.TemporaryDirectory() as tmp:
        run_experiment(config, Path(tmp) / "run", progress=False)
    per_year = len(hashing) // len(writes)
    block = max(1, args.years // 6)
    print(f"{args.size} households x {args.years} years, memory on")
    print("years      checkpoint ms   of which digests ms")
    for start in range(0, args.years, block):
        w = writes[start:start + block]
        h = hashing[start * per_year:(start + block) * per_year]
        print(f"{start + 1:>3}-{start + len(w):<3}    {1000 * sum(w) / len(w):>10.1f}   "
              f"{1000 * sum(h) / len(w):>12.2f}")


if __name__ == "__main__":
    main()
