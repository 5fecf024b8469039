r"""Does the readout predict what the model's sampler writes? Both views against real draws.

For each chosen vignette of the validity battery (the experiment's own prompts), the reply is
drawn ``--draws`` times up to one field (``--field``: threat, coping or action; the reply's
schema is cut after its top-level property, ``up_to``), each draw with the seed of the sampled
card's replicate k (as a sampled account of the readout). At each draw the field's position is
read from the token probabilities and its distribution taken in both views
(``llm.readout``): ``sampler`` (llama.cpp's chain at the request's temperature and truncation,
with the grammar's redraw: ``llm.sampler_chain``) and ``model`` (the raw distribution
renormalised over the allowed tokens). The value each draw wrote is a draw from its own
position's distribution in the right view, so over the draws the written values must match
the mean of the right view's distributions within sampling error; the script prints, per
vignette and view, the expected mean rank (labels) or shares (actions) against the observed,
and a chi-square test of the counts (cells expected below 1e-9 merged into their neighbour).

    .venv/bin/python benchmarks/bench_sampler_view.py --field threat --draws 100 \
        --uses threat_rises_with_depth --json /tmp/sampler_view.json

Run it alone on the machine. The draws of a vignette are a readout's sampled accounts: the
first evaluates the prompt whole (about 10 s for the 0.5B model on 2 cores), the others reuse
that evaluation and cost their generated tokens (``ReadoutSettings.prompt_reuse``), unless
``--whole-prompts``. The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIELDS = {"threat": "threat_appraisal.label", "coping": "coping_appraisal.label",
          "action": "decision"}


def up_to(schema: dict[str, Any], field: str) -> dict[str, Any]:
    """The reply schema down to the top-level property holding ``field``.

    The grammar allows the same tokens up to the field's value, and the draw stops after that
    property instead of writing the rest of the reply.
    """
    names = list(schema["properties"])
    kept = names[:names.index(field.split(".")[0]) + 1]
    return {**schema, "properties": {n: schema["properties"][n] for n in kept},
            "required": [n for n in schema.get("required", names) if n in kept]}


def chi_square(counts: list[int], expected: list[float]) -> float:
    """P of the counts against the expected shares; cells expected below 1e-9 merged."""
    from scipy.stats import chisquare

    n = sum(counts)
    cells_o, cells_e = [], []
    for o, e in zip(counts, expected, strict=True):
        if e < 1e-9 and cells_e:
            cells_o[-1] += o
            cells_e[-1] += e
        else:
            cells_o.append(o)
            cells_e.append(e)
    if cells_e[0] < 1e-9 and len(cells_e) > 1:
        cells_o[1] += cells_o.pop(0)
        cells_e[1] += cells_e.pop(0)
    if len(cells_e) < 2:
        return 1.0
    total = sum(cells_e)
    return float(chisquare(cells_o, [n * e / total for e in cells_e]).pvalue)


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    from governed_broker.config.loader import load_experiment
    from governed_broker.config.resolved import resolve_experiment
    from governed_broker.llm import build_backend
    from governed_broker.llm.logprobs import token_source
    from governed_broker.llm.readout import (
        UNDER_GRAMMAR,
        ReadoutSettings,
        read_distributions,
    )
    from governed_broker.validity.battery import load_battery
    from governed_broker.validity.plan import common_seed, plan_battery
    from governed_broker.validity.probe import Prober
    from governed_broker.validity.readout import vignette_request
    from governed_broker.validity.situations import zone_probabilities

    overrides = ["llm.cache.mode=off", *([f"llm.model={args.model}"] if args.model else [])]
    experiment = resolve_experiment(load_experiment(args.experiment, overrides))
    config = experiment.config
    battery = load_battery(config.resolve_path(config.validity.battery_dir), experiment.domain)
    plan = plan_battery(battery, experiment.domain, zone_probabilities(experiment))
    vignettes = [v for v in plan.vignettes.values()
                 if v.arm == "main" and any(args.uses in u for u in v.uses)][:args.vignettes]
    if not vignettes:
        raise SystemExit(f"no main-arm vignette is used by a test matching {args.uses!r}")
    assert config.llm is not None
    backend = build_backend(config.llm, config.base_dir)
    source = token_source(backend)
    field = FIELDS[args.field]
    seeds = [common_seed(plan.battery.tests.seed, k, 0) for k in range(args.draws)]
    rows = []
    with tempfile.TemporaryDirectory() as work:
        prober = Prober(experiment, plan, Path(work), backend=backend)
        try:
            for v in vignettes:
                request, _ = vignette_request(prober, v)
                cut = replace(request, json_schema=up_to(request.json_schema, field),
                              max_tokens=args.max_tokens or request.max_tokens)
                start = time.perf_counter()
                settings = ReadoutSettings(accounts=args.draws,
                                           prompt_reuse=not args.whole_prompts)
                readout = read_distributions(source, cut, settings, seeds)
                read = readout.field(field)
                values = list(read.values)
                counts = [sum(a.value == x for a in read.accounts) for x in values]
                views = {"sampler": list(read.probabilities),
                         "model": [sum(a.root.distribution(UNDER_GRAMMAR).get(x, 0.0)
                                       for a in read.accounts) / len(read.accounts)
                                   for x in values]}
                rows.append({
                    "vignette": v.key, "uses": v.uses, "spec": v.spec.model_dump(mode="json"),
                    "field": field, "values": values, "draws": args.draws, "counts": counts,
                    "redrawn": readout.redrawn,
                    "seconds": round(time.perf_counter() - start, 1),
                    "views": {name: {"expected": shares, "p": chi_square(counts, shares),
                                     "mean_rank": sum(i * p for i, p in enumerate(shares))}
                              for name, shares in views.items()},
                    "observed_mean_rank": sum(i * c for i, c in enumerate(counts)) / args.draws})
                print(line(rows[-1]), flush=True)
        finally:
            prober.broker.close()
    return rows


def line(row: dict[str, Any]) -> str:
    views = "; ".join(f"{name}: expected {v['mean_rank']:.2f}, p {v['p']:.3f}"
                      for name, v in row["views"].items())
    return (f"{row['vignette']} ({row['uses'][0]}): {row['draws']} draws, mean rank observed "
            f"{row['observed_mean_rank']:.2f}; {views} ({row['seconds']} s, "
            f"{row['redrawn']} drawn again)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="catalogue model (default: the "
                        "experiment's)")
    parser.add_argument("--experiment", type=Path, default=ROOT / "experiments" / "demo.yaml")
    parser.add_argument("--field", choices=sorted(FIELDS), default="threat")
    parser.add_argument("--uses", default="threat_rises_with_depth",
                        help="read the main-arm vignettes of tests whose name contains this")
    parser.add_argument("--vignettes", type=int, default=3)
    parser.add_argument("--draws", type=int, default=100)
    parser.add_argument("--max-tokens", type=int, default=None,
                        help="stop each draw after this many tokens (the threat label is "
                        "written within the first 30; default: the experiment's)")
    parser.add_argument("--whole-prompts", action="store_true",
                        help="evaluate the prompt whole for every draw (about 10 s more each)")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    before = os.getloadavg()
    rows = measure(args)
    after = os.getloadavg()
    print(f"load average before {before[0]:.2f}, after {after[0]:.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps({"loadavg": [before, after], "rows": rows},
                                        indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
