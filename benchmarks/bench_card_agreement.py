"""A distribution card beside a sampled card of the same configuration: do they agree?

The sampled card (``governed-broker validate``) keeps, per level of each directional test and
per arm of each invariance test, the counts of what its replies chose; the distribution card
(``validate --readout distribution``) keeps the distributions read at the same vignettes. For
each such vignette the script sets the readout's distribution beside the sampled shares:

* the level's expected measure as each card gives it (label rank, 0 for the scale's first
  label; or the share of the test's effect), and their difference;
* the total variation between the readout's distribution and the sampled shares;
* the p-value of a chi-square goodness-of-fit test of the sampled counts against the readout's
  distribution (categories pooled below 5 expected). A readout in the sampler's view (the
  default since 2026-11-28, ``readout.view: sampler``) is what the sampled replies are drawn
  from; one in the model's view (temperature 1, no truncation) is not, and there a small
  p-value can be the sampler's sharpening as much as a wrong readout.

With ``--readout-json`` (the card directory's ``readout.json``, whose sampled accounts each
keep their distribution) a level's two expectations also get their standard errors: the
sampled one from its replies, the readout's from the spread of its accounts' expectations
(a readout over n accounts is a Monte Carlo mean, and the chi-square above treats it as
exact), and ``z``, their difference over the combined error.

Then, per test, the two cards' outcomes side by side: the card-level agreement the readout is
for. It reads two card JSON files and asks no model:

    .venv/bin/python benchmarks/bench_card_agreement.py \
        --sampled outputs/demo-validity/validity_card.json \
        --readout outputs/demo-validity-readout/validity_card.json \
        [--readout-json outputs/demo-validity-readout/readout.json] [--json FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

from scipy import stats


def chi_square_p(counts: dict[str, int], expected: dict[str, float]) -> float | None:
    """Goodness of fit of ``counts`` to the probabilities ``expected``; categories pooled.

    Categories with fewer than 5 expected are pooled into one (and that one too, if still
    small, into the largest). None with fewer than two categories left.
    """
    n = sum(counts.values())
    mass = sum(expected.values())
    if n == 0 or mass <= 0:
        return None
    # the card stores rounded probabilities: rescaled so the expected counts sum to n, as
    # scipy requires to 1e-8
    expected = {k: p / mass for k, p in expected.items()}
    keys = sorted(set(counts) | set(expected), key=lambda k: -expected.get(k, 0.0))
    cells: list[tuple[float, float]] = []
    small_obs = small_exp = 0.0
    for k in keys:
        e = expected.get(k, 0.0) * n
        if e < 5:
            small_obs += counts.get(k, 0)
            small_exp += e
        else:
            cells.append((counts.get(k, 0), e))
    if small_exp > 0 or small_obs > 0:
        if small_exp >= 5 or not cells:
            cells.append((small_obs, small_exp))
        else:
            o, e = cells[-1]
            cells[-1] = (o + small_obs, e + small_exp)
    if len(cells) < 2 or any(e <= 0 for _, e in cells):
        return None
    return float(stats.chisquare([o for o, _ in cells], [e for _, e in cells]).pvalue)


def _shares(counts: dict[str, int]) -> dict[str, float]:
    n = sum(counts.values())
    return {k: c / n for k, c in counts.items()} if n else {}


def _tv(p: dict[str, float], q: dict[str, float]) -> float:
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in set(p) | set(q))


def _indicator(counts: dict[str, float], mean: float) -> dict[str, float]:
    """Per value its weight in the level's mean: the rank (labels) or 0/1 (a share's effect).

    A share test's actions with the effect are the subset of the readout's counts that sums to
    its mean; a label test's mean is the expected rank in the scale's order.
    """
    values = list(counts)
    if abs(sum(i * counts[v] for i, v in enumerate(values)) - mean) < 1e-4:
        return {v: float(i) for i, v in enumerate(values)}
    for size in range(1, len(values) + 1):
        for chosen in itertools.combinations(values, size):
            if abs(sum(counts[v] for v in chosen) - mean) < 1e-4:
                return {v: float(v in chosen) for v in values}
    raise ValueError(f"no weighting of {values} gives the level's mean {mean}")


def standard_errors(counts: dict[str, int], weights: dict[str, float],
                    accounts: list[dict[str, float]]) -> tuple[float, float]:
    """The sampled expectation's standard error, and the readout's over its accounts."""
    values = [weights.get(k, 0.0) for k, c in counts.items() for _ in range(c)]
    sampled = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    means = [sum(weights.get(k, 0.0) * p for k, p in a.items()) for a in accounts]
    read = statistics.stdev(means) / math.sqrt(len(means)) if len(means) > 1 else 0.0
    return sampled, read


def account_laws(readout_json: dict[str, Any] | None) -> dict[tuple[str, str], list[Any]]:
    """(test, level or arm) -> each account's distribution of the field the test measures."""
    if readout_json is None:
        return {}
    fields = {"threat": 0, "coping": 1}
    out: dict[tuple[str, str], list[Any]] = {}
    for v in readout_json["vignettes"]:
        for use in v["uses"]:
            test, _, level = use.partition(":")
            out[(test, level)] = v["reply"]["fields"]  # the field is picked by the test
    return {k: [fields, f] for k, f in out.items()}


def compare(sampled: dict[str, Any], readout: dict[str, Any],
            readout_json: dict[str, Any] | None = None) -> dict[str, Any]:
    """Per test: both outcomes, and per vignette (level or arm) the two laws side by side."""
    laws = account_laws(readout_json)
    out = []
    read_tests = {t["name"]: t for t in readout["tests"]}
    for test in sampled["tests"]:
        other = read_tests.get(test["name"])
        if other is None:
            continue
        row: dict[str, Any] = {"test": test["name"], "primary": test["primary"],
                               "sampled": test["outcome"], "readout": other["outcome"],
                               "sampled_statistic": test["statistic"],
                               "readout_statistic": other["statistic"], "vignettes": []}
        for label, counts, dist, means in _pairs(test, other):
            entry = {"at": label, "n": sum(counts.values()),
                     "sampled": _shares(counts), "readout": dist,
                     "tv": round(_tv(_shares(counts), dist), 4),
                     "chi_square_p": chi_square_p(counts, dist)}
            if None not in means:
                entry.update(expected_sampled=round(means[0], 4),
                             expected_readout=round(means[1], 4),
                             difference=round(means[1] - means[0], 4))
                field = _field_of(test, laws.get((test["name"], label)))
                if field is not None and field.get("accounts"):
                    weights = _indicator(dist, means[1])
                    se_s, se_r = standard_errors(
                        counts, weights, [a["distribution"] for a in field["accounts"]])
                    entry.update(se_sampled=round(se_s, 4), se_readout=round(se_r, 4),
                                 z=round((means[1] - means[0]) / math.hypot(se_s, se_r), 2))
            row["vignettes"].append(entry)
        out.append(row)
    return {"sampled_key": sampled["key"], "readout_key": readout["key"],
            "accounts": (readout.get("readout") or {}).get("accounts", 0), "tests": out}


def _field_of(test: dict[str, Any], found: list[Any] | None) -> dict[str, Any] | None:
    """The readout's field a test measures at one of its vignettes (None: not read)."""
    if found is None:
        return None
    fields, read = found
    measure = (test.get("detail") or {}).get("measure", "")
    return read[fields.get(measure, 2)]


def _pairs(test: dict[str, Any], other: dict[str, Any]) -> list[tuple[Any, ...]]:
    """(where, sampled counts, readout distribution, (the two means)) of a test's vignettes.

    The mean is the level's expected measure as each card computed it (label rank, or the
    share of the test's effect); invariance arms have none.
    """
    detail, read = test.get("detail") or {}, other.get("detail") or {}
    if "levels" in detail and "levels" in read:
        by_label = {lv["label"]: lv for lv in read["levels"]}
        return [(lv["label"], lv["counts"], by_label[lv["label"]]["counts"],
                 (lv.get("mean"), by_label[lv["label"]].get("mean")))
                for lv in detail["levels"]
                if lv.get("counts") and by_label.get(lv["label"], {}).get("counts")]
    if "base" in detail and "base" in read:
        return [(arm, detail[arm], read[arm], (None, None)) for arm in ("base", "variant")]
    return []


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sampled", type=Path, required=True, help="a sampled card's JSON")
    parser.add_argument("--readout", type=Path, required=True,
                        help="a distribution card's JSON of the same configuration")
    parser.add_argument("--readout-json", type=Path, default=None,
                        help="the distribution card's readout.json (its accounts): standard "
                        "errors and z of each level's two expectations")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    sampled = json.loads(args.sampled.read_text())
    readout = json.loads(args.readout.read_text())
    readout_json = (json.loads(args.readout_json.read_text())
                    if args.readout_json is not None else None)
    if (sampled.get("readout") or {"kind": "sampled"})["kind"] != "sampled":
        sys.exit(f"{args.sampled}: not a sampled card")
    made_for = (readout.get("readout") or {}).get("configuration_key")
    if made_for != sampled["key"]:
        sys.exit(f"{args.readout}: a distribution card of configuration {str(made_for)[:12]}, "
                 f"not of the sampled card's {sampled['key'][:12]}")
    result = compare(sampled, readout, readout_json)
    agree = sum(t["sampled"] == t["readout"] for t in result["tests"])
    print(f"sampled card {sampled['key'][:12]} vs distribution card {readout['key'][:12]} "
          f"({result['accounts']} sampled accounts): {agree} of {len(result['tests'])} "
          "outcomes agree")
    for t in result["tests"]:
        mark = "P" if t["primary"] else " "
        print(f"{mark} {t['test']:<38} sampled {t['sampled']:<15} "
              f"{_fmt(t['sampled_statistic']):>7}   readout {t['readout']:<15} "
              f"{_fmt(t['readout_statistic']):>7}")
        for v in t["vignettes"]:
            print(f"      {v['at']:<34} n {v['n']:>3}  E sampled {_fmt(v.get('expected_sampled'))}"
                  f"  readout {_fmt(v.get('expected_readout'))}  TV {v['tv']:.2f}"
                  f"  chi-square p {_fmt(v['chi_square_p'])}"
                  + (f"  z {v['z']:+.2f} (SE {v['se_sampled']:.2f} / {v['se_readout']:.2f})"
                     if "z" in v else ""))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
