"""Time the baseline world: 1,000 and 10,000 households x 30 years.

Usage: python benchmarks/bench_world.py [--sizes 1000 10000] [--years 30]

Prints, per size, the seconds of the simulation alone (FloodModel.step, baseline decisions)
and of a complete run (run_experiment: simulation plus CSV, manifest and plot), and seconds per
agent-year (wall clock, and CPU time of this process, which is less sensitive to
other load on the machine). Target: 10,000 x 30 in under 30 s on 2 cores.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from governed_broker.config import load_experiment
from governed_broker.config.resolved import resolve_experiment
from governed_broker.runner import build_decision_maker, run_experiment
from governed_broker.sim import FloodModel

EXPERIMENT = Path(__file__).resolve().parent.parent / "experiments" / "baseline.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--years", type=int, default=30)
    args = parser.parse_args()
    for size in args.sizes:
        config = load_experiment(
            EXPERIMENT, [f"population.size={size}", f"years={args.years}", "outputs.plots=false"]
        )
        agent_years = size * args.years
        with tempfile.TemporaryDirectory() as tmp:
            t0, c0 = time.perf_counter(), time.process_time()
            model = FloodModel(config, build_decision_maker(resolve_experiment(config), Path(tmp)))
            for _ in range(args.years):
                model.step()
            sim, sim_cpu = time.perf_counter() - t0, time.process_time() - c0
            t0, c0 = time.perf_counter(), time.process_time()
            run_experiment(config, Path(tmp) / "run", progress=False)
            full, full_cpu = time.perf_counter() - t0, time.process_time() - c0
        print(
            f"{size:>6} households x {args.years} years: simulation {sim:6.2f} s wall "
            f"({sim_cpu:.2f} s CPU, {sim / agent_years:.2e} s/agent-year); full run with "
            f"outputs {full:6.2f} s wall ({full_cpu:.2f} s CPU, {full / agent_years:.2e} "
            "s/agent-year)"
        )


if __name__ == "__main__":
    main()
