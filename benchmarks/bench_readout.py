r"""Time of one distribution readout per vignette against sampled calls, per embedded model.

For each model and each of the first ``--vignettes`` vignettes of the validity battery (the
experiment's own prompts, as ``validate`` sends them), in this order:

1. a sampled call as the battery makes its first replicate (the catalogue's sampling, a fresh
   seed; llama.cpp's prompt cache holds only the system message shared with the previous
   vignette's prompt),
2. a sampled call as it makes each further replicate (the same prompt again: it is reused
   whole from the cache, only the reply is generated),
3. a readout (``llm.readout``: ``--accounts`` sampled paths, default 8 as the readout commands,
   or the greedy path with 0, each with the prompt evaluated whole, then a pass per position
   read), with the paths and the passes timed apart.

The response cache is not used. The machine's load average is printed before and after each
model (the figures depend on it); run it alone on the machine:

    .venv/bin/python benchmarks/bench_readout.py \
        --model qwen2.5-coder-0.5b-instruct-q4_k_m --model qwen2.5-coder-1.5b-instruct-q4_k_m
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class Timed:
    """A token source that times its paths and its passes."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name = inner, inner.name
        self.path_s: list[float] = []
        self.pass_s: list[float] = []

    def path(self, request):
        start = time.perf_counter()
        try:
            return self.inner.path(request)
        finally:
            self.path_s.append(time.perf_counter() - start)

    def sampler(self, request):
        return self.inner.sampler(request)

    def top_tokens(self, reply, prefix, k):
        start = time.perf_counter()
        try:
            return self.inner.top_tokens(reply, prefix, k)
        finally:
            self.pass_s.append(time.perf_counter() - start)


def measure(model: str, experiment_file: Path, n: int, threads: int | None,
            accounts: int) -> dict[str, Any]:
    from governed_broker.config.loader import load_experiment
    from governed_broker.config.resolved import resolve_experiment
    from governed_broker.llm import build_backend
    from governed_broker.llm.embedded import load_server
    from governed_broker.llm.logprobs import token_source
    from governed_broker.llm.readout import ReadoutSettings, read_distributions
    from governed_broker.validity.battery import load_battery
    from governed_broker.validity.plan import common_seed, plan_battery
    from governed_broker.validity.probe import Prober
    from governed_broker.validity.readout import vignette_request
    from governed_broker.validity.situations import zone_probabilities

    overrides = [f"llm.model={model}", "llm.cache.mode=off"]
    if threads is not None:
        overrides.append(f"llm.threads={threads}")
    experiment = resolve_experiment(load_experiment(experiment_file, overrides))
    config = experiment.config
    battery = load_battery(config.resolve_path(config.validity.battery_dir), experiment.domain)
    plan = plan_battery(battery, experiment.domain, zone_probabilities(experiment))
    vignettes = [v for v in plan.vignettes.values() if v.arm == "main"][:n]
    assert config.llm is not None
    backend = build_backend(config.llm, config.base_dir)
    start = time.perf_counter()
    load_server(backend.settings)  # type: ignore[attr-defined]
    load_s = time.perf_counter() - start
    source = Timed(token_source(backend))
    rows = []
    with tempfile.TemporaryDirectory() as work:
        prober = Prober(experiment, plan, Path(work), backend=backend)
        try:
            for i, v in enumerate(vignettes):
                request, _ = vignette_request(prober, v)
                first = backend.chat(replace(request, seed=1000 + i))
                again = backend.chat(replace(request, seed=2000 + i))
                seeds = [common_seed(plan.battery.tests.seed, k, 0) for k in range(accounts)]
                readout = read_distributions(source, request, ReadoutSettings(accounts=accounts),
                                             seeds or None)
                paths = max(accounts, 1)
                rows.append({
                    "vignette": v.key, "uses": v.uses[0],
                    "sampled_first_s": first.latency_s, "sampled_replicate_s": again.latency_s,
                    "sampled_tokens": [first.completion_tokens, again.completion_tokens],
                    "prompt_tokens": first.prompt_tokens, "readout_s": readout.seconds,
                    "accounts": accounts, "path_s": statistics.median(source.path_s[-paths:]),
                    "passes": readout.passes,
                    "pass_s": statistics.median(source.pass_s[-readout.passes:]),
                    "path_chars": len(readout.path),
                    "threat": readout.field("threat_appraisal.label").distribution()})
                print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
        finally:
            prober.broker.close()
    return {"model": model, "load_s": round(load_s, 2), "threads": backend.describe()["threads"],
            "rows": rows}


def summary(result: dict[str, Any]) -> str:
    rows = result["rows"]

    def med(key: str) -> float:
        return statistics.median(r[key] for r in rows)

    ratio_first = statistics.median(r["readout_s"] / r["sampled_first_s"] for r in rows)
    ratio_rep = statistics.median(r["readout_s"] / r["sampled_replicate_s"] for r in rows)
    return (f"{result['model']} ({result['threads']} threads, {len(rows)} vignettes, load "
            f"{result['load_s']} s): sampled first {med('sampled_first_s'):.1f} s, replicate "
            f"{med('sampled_replicate_s'):.1f} s; readout {med('readout_s'):.1f} s "
            f"({rows[0]['accounts']} accounts; a path {med('path_s'):.1f} s, "
            f"{med('passes'):.0f} passes of "
            f"{1000 * med('pass_s'):.0f} ms); readout / sampled: {ratio_first:.2f} (first), "
            f"{ratio_rep:.2f} (replicate)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", default=None,
                        help="catalogue model (repeatable; default: the catalogue default)")
    parser.add_argument("--experiment", type=Path, default=ROOT / "experiments" / "demo.yaml")
    parser.add_argument("--vignettes", type=int, default=4)
    parser.add_argument("--threads", type=int, default=None,
                        help="llm.threads (default: all usable cores; 1 is faster on a busy "
                        "machine)")
    parser.add_argument("--accounts", type=int, default=8,
                        help="sampled accounts per readout (0: the greedy path)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    from governed_broker.llm.catalogue import default_model_name

    results = []
    for model in args.model or [default_model_name()]:
        before = os.getloadavg()
        result = measure(model, args.experiment, args.vignettes, args.threads, args.accounts)
        result["loadavg_before"], result["loadavg_after"] = before, os.getloadavg()
        results.append(result)
        print(summary(result))
        print(f"  load average before {before[0]:.2f}, after {result['loadavg_after'][0]:.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
