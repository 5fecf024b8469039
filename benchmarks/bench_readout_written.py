r"""Within a readout: do its sampled accounts write what its distributions expect?

A readout over n sampled accounts (``readout --json``, or a card's ``readout.json``) keeps,
for every vignette and field, what each account wrote (``value``) and the distribution read at
that account's position (``distribution``, in the readout's view). The value written is a draw
from the distribution the sampler used there, so if the readout reads that distribution, over
all accounts the values written and the distributions read must agree within sampling error.

The error is not that of n x vignettes independent draws: account k of every vignette is drawn
with the same seed (common random numbers, as the sampled card's replicate k), and similar
prompts give similar texts, so the sampler's random numbers at a field repeat across vignettes
and an account's draws move together (measured: one seed of the 1.5B model wrote threat "very
high" at 11 of 15 vignettes, another "low" or below at 14). The script therefore compares, per
seed, the mean written with the mean expected over the vignettes, and tests the mean of those
differences across the seeds (a paired t-test with n - 1 degrees of freedom); it prints the
naive z (all draws independent) beside it, to show how far that one misleads. A value expected
fewer than 5 times in all gets no t (its differences are mostly the expectation itself).

Per field the measure is the mean rank for a label (0 for the scale's first) and the share of
each action for the decision. It reads one JSON file and asks no model:

    .venv/bin/python benchmarks/bench_readout_written.py \
        docs/validity_cards/readout/1p5b_primary_accounts4_sampler_readout.json [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from scipy import stats


def measures(field: dict[str, Any], labels: list[str]) -> dict[str, list[str]]:
    """The measures of a field: name -> the values it scores (ranked, or the one shared)."""
    values = list(field["distribution"])
    if values == labels:
        return {"mean rank": values}
    return {f"share {v}": [v] for v in values}


def score(name: str, values: list[str], value_or_law: Any) -> float:
    """A written value's score, or a distribution's expected score, under one measure."""
    if name == "mean rank":
        if isinstance(value_or_law, str):
            return float(values.index(value_or_law))
        return sum(values.index(v) * p for v, p in value_or_law.items())
    if isinstance(value_or_law, str):
        return float(value_or_law == values[0])
    return value_or_law.get(values[0], 0.0)


def compare(readout: dict[str, Any]) -> list[dict[str, Any]]:
    """Per field and measure: written against expected, by seed and over all accounts."""
    labels = list(readout["labels"])
    rows = []
    names = [f["field"] for f in readout["vignettes"][0]["reply"]["fields"]]
    for fi, field_name in enumerate(names):
        first = readout["vignettes"][0]["reply"]["fields"][fi]
        for name, values in measures(first, labels).items():
            by_seed: dict[int, list[tuple[float, float, float]]] = defaultdict(list)
            for vignette in readout["vignettes"]:
                for account in vignette["reply"]["fields"][fi].get("accounts", []):
                    law = account["distribution"]
                    expected = score(name, values, law)
                    second = (sum(values.index(v) ** 2 * p for v, p in law.items())
                              if name == "mean rank" else expected)
                    by_seed[account["seed"]].append(
                        (score(name, values, account["value"]), expected,
                         second - expected ** 2))
            if not by_seed:
                continue
            rows.append(_row(field_name, name, by_seed))
    return rows


def _row(field_name: str, name: str,
         by_seed: dict[int, list[tuple[float, float, float]]]) -> dict[str, Any]:
    draws = [d for rows in by_seed.values() for d in rows]
    written = statistics.fmean(d[0] for d in draws)
    expected = statistics.fmean(d[1] for d in draws)
    naive_se = math.sqrt(sum(d[2] for d in draws)) / len(draws)
    diffs = [statistics.fmean(d[0] - d[1] for d in rows) for rows in by_seed.values()]
    row = {"field": field_name, "measure": name, "accounts": len(by_seed),
           "draws": len(draws), "written": written, "expected": expected,
           "naive_z": (written - expected) / naive_se if naive_se > 0 else None,
           "seed_differences": diffs}
    # a value expected fewer than 5 times in all: the seeds' differences are then mostly the
    # expectation itself, and a t-test of them says nothing
    if len(diffs) > 1 and expected * len(draws) >= 5 and statistics.stdev(diffs) > 0:
        se = statistics.stdev(diffs) / math.sqrt(len(diffs))
        t = statistics.fmean(diffs) / se
        row |= {"t": t, "p": float(2 * stats.t.sf(abs(t), len(diffs) - 1))}
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("readout", type=Path, help="a saved readout over sampled accounts")
    parser.add_argument("--json", type=Path, default=None, help="write the rows here")
    args = parser.parse_args(argv)
    readout = json.loads(args.readout.read_text(encoding="utf-8"))
    provenance = readout.get("provenance", {})
    print(f"{args.readout}: {provenance.get('source')}, {provenance.get('accounts')} accounts, "
          f"view {provenance.get('view', 'model')}")
    rows = compare(readout)
    print(f"{'field':24} {'measure':22} {'written':>8} {'expected':>9} {'naive z':>8} "
          f"{'t (seeds)':>9} {'p':>6}")
    for r in rows:
        naive = f"{r['naive_z']:8.2f}" if r["naive_z"] is not None else f"{'-':>8}"
        t = f"{r['t']:9.2f} {r['p']:6.3f}" if "t" in r else f"{'-':>9} {'-':>6}"
        print(f"{r['field']:24} {r['measure']:22} {r['written']:8.3f} {r['expected']:9.3f} "
              f"{naive} {t}")
    if args.json is not None:
        args.json.write_text(json.dumps({"readout": str(args.readout), "rows": rows},
                                        indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
