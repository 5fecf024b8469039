"""Agreement of a readout's distributions with sampled replies to the same prompts.

For each chosen vignette of the validity battery, the script asks the experiment's model
``--replies`` times with the request the sampled battery sends for replicates 0, 1, ...
(``plan.common_seed``: the battery's own seeds; response cache off) and sets the labels and
actions of those replies beside the readout's distributions (``governed-broker readout --json``
or a distribution card's ``readout.json``, made for the same configuration):

* ``raw``: the readout's distribution (the model's, renormalised under the reply grammar);
* ``sampler``: what llama.cpp's sampler draws from the same token probabilities, worked out
  position by position from the tokens read (top 20 only): its chain (top-k 40, top-p, min-p,
  temperature) on the raw candidates; a token the grammar forbids is drawn again from the chain
  applied to the allowed tokens only (llama.cpp ``common_sampler_sample``, grammar second);
* ``observed``: the sampled replies' shares, with the p-values of chi-square goodness-of-fit
  tests of the counts against the sampler's prediction and against the raw distribution
  (categories pooled below 5 expected).

The threat label is read at its fixed prefix, so its prediction is the model's. Along the
greedy path the coping label and the action are read after the greedy threat label and reason,
while a sampled reply writes them after its own sampled account: their gap measures that
conditioning too. Read over sampled accounts (``readout --accounts N``), both predictions are
the means over the accounts. Run it alone on the machine:

    .venv/bin/python benchmarks/bench_readout_agreement.py \
        --readout outputs/demo-validity-readout/readout.json --replies 30
"""

from __future__ import annotations

import argparse
import json
import math
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


def chain(candidates: list[tuple[Any, float]], temperature: float, top_k: int, top_p: float,
          min_p: float) -> dict[Any, float]:
    """llama.cpp's default sampler chain on (key, raw logprob) candidates: the draw's law."""
    ranked = sorted(candidates, key=lambda c: -c[1])[:top_k]
    if not ranked:
        return {}
    z = [math.exp(lp) for _, lp in ranked]
    total = sum(z)
    kept, cum = [], 0.0
    for (key, lp), w in zip(ranked, z, strict=True):
        kept.append((key, lp))
        cum += w / total
        if cum >= top_p:
            break
    best = kept[0][1]
    if min_p > 0:
        kept = [(k, lp) for k, lp in kept if lp >= best + math.log(min_p)]
    weights = {k: math.exp((lp - best) / temperature) for k, lp in kept}
    s = sum(weights.values())
    return {k: w / s for k, w in weights.items()}


def predicted(node: dict[str, Any], sampling: dict[str, Any]) -> dict[str, float]:
    """The sampler's law over a field's values from a readout tree (``FieldDistribution``)."""
    params = {"temperature": sampling.get("temperature") or 0.8,
              "top_k": sampling.get("top_k") or 40, "top_p": sampling.get("top_p") or 0.95,
              "min_p": sampling.get("min_p") if sampling.get("min_p") is not None else 0.05}
    branches = node["branches"]
    allowed = [(i, b["logprob"]) for i, b in enumerate(branches)]
    forbidden = [(("forbidden", j), lp) for j, (_, lp) in enumerate(node["forbidden"])]
    free = chain(allowed + forbidden, **params)
    constrained = chain(allowed, **params)
    redraw = sum(p for k, p in free.items() if isinstance(k, tuple))
    out: dict[str, float] = {}
    for i, b in enumerate(branches):
        p = free.get(i, 0.0) + redraw * constrained.get(i, 0.0)
        below = {b["value"]: 1.0} if "value" in b else predicted(b["child"], sampling)
        for value, q in below.items():
            out[value] = out.get(value, 0.0) + p * q
    s = sum(out.values())
    return {k: v / s for k, v in out.items()} if s > 0 else out


def chi_square_p(counts: dict[str, int], expected: dict[str, float]) -> float | None:
    """Goodness of fit of ``counts`` to ``expected`` shares (small categories pooled)."""
    from scipy import stats

    n = sum(counts.values())
    cells = sorted(set(counts) | set(expected), key=lambda k: -expected.get(k, 0.0))
    obs, exp, pool_o, pool_e = [], [], 0, 0.0
    for c in cells:
        e = n * expected.get(c, 0.0)
        if e >= 5:
            obs.append(counts.get(c, 0))
            exp.append(e)
        else:
            pool_o += counts.get(c, 0)
            pool_e += e
    if pool_e > 0 or pool_o > 0:
        obs.append(pool_o)
        exp.append(max(pool_e, 1e-9))
    if len(obs) < 2:
        return None
    return float(stats.chisquare(obs, exp).pvalue)


def _mean(dists: list[dict[str, float]]) -> dict[str, float]:
    keys = {k for d in dists for k in d}
    return {k: sum(d.get(k, 0.0) for d in dists) / len(dists) for k in keys}


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", type=Path, default=ROOT / "experiments" / "demo.yaml")
    parser.add_argument("--readout", type=Path, required=True, help="readout JSON")
    parser.add_argument("--vignette", action="append", default=None,
                        help="vignette key (repeatable; default: the lowest and highest "
                        "level of threat_rises_with_depth)")
    parser.add_argument("--replies", type=int, default=30)
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)

    from governed_broker.config.loader import load_experiment
    from governed_broker.config.resolved import resolve_experiment
    from governed_broker.llm import build_backend
    from governed_broker.llm.sampling import resolve_sampling
    from governed_broker.validity.plan import common_seed
    from governed_broker.validity.probe import Prober
    from governed_broker.validity.readout import vignette_request
    from governed_broker.validity.validate import prepare

    data = json.loads(args.readout.read_text())
    experiment = resolve_experiment(load_experiment(args.experiment, []))
    prepared = prepare(experiment)
    if data["provenance"].get("configuration_key") != prepared.key:
        sys.exit(f"{args.readout}: made for another configuration than {args.experiment}")
    # the same requests with the response cache off (not part of the configuration's key)
    experiment = resolve_experiment(load_experiment(args.experiment, ["llm.cache.mode=off"]))
    plan = prepared.plan
    levels = plan.levels["threat_rises_with_depth"]
    keys = args.vignette or [levels[0].vignette, levels[-1].vignette]
    by_key = {v["vignette"]: v for v in data["vignettes"]}
    config = experiment.config
    assert config.llm is not None
    sampling = {k: v for k, v in vars(resolve_sampling(config.llm)).items()}
    backend = build_backend(config.llm, config.base_dir)
    rows = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as work:
        prober = Prober(experiment, plan, Path(work), backend=backend)
        try:
            for key in keys:
                request, _ = vignette_request(prober, plan.vignettes[key])
                start = time.perf_counter()
                replies = []
                for r in range(args.replies):
                    text = backend.chat(replace(request, seed=common_seed(plan.battery.tests.seed,
                                                                          r, 0))).text
                    reply = json.loads(text)
                    replies.append({"threat": reply["threat_appraisal"]["label"],
                                    "coping": reply["coping_appraisal"]["label"],
                                    "action": reply["decision"]})
                seconds = time.perf_counter() - start
                fields = {f["field"]: f for f in by_key[key]["reply"]["fields"]}
                row: dict[str, Any] = {"vignette": key, "uses": plan.vignettes[key].uses,
                                       "replies": len(replies), "sampled_s": round(seconds, 1)}
                for measure, name in FIELDS.items():
                    counts: dict[str, int] = {}
                    for rep in replies:
                        counts[rep[measure]] = counts.get(rep[measure], 0) + 1
                    # over sampled accounts, the mean of what the sampler draws after each
                    trees = [a["tree"] for a in fields[name].get("accounts", [])] or [
                        fields[name]["tree"]]
                    sampler = _mean([predicted(tree, sampling) for tree in trees])
                    row[measure] = {
                        "raw": by_key[key][measure], "sampler": sampler,
                        "observed": {k: c / len(replies) for k, c in counts.items()},
                        "greedy": fields[name]["path_value"],
                        "chi_square_p": chi_square_p(counts, sampler),
                        "chi_square_p_raw": chi_square_p(counts, by_key[key][measure])}
                rows.append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
        finally:
            prober.broker.close()
    result = {"experiment": str(args.experiment), "readout": str(args.readout),
              "sampling": sampling, "loadavg_before": load_before,
              "loadavg_after": os.getloadavg(), "rows": rows}
    for row in rows:
        print(f"{row['vignette']} ({', '.join(row['uses'])}; {row['replies']} replies, "
              f"{row['sampled_s']} s)")
        for measure in FIELDS:
            m = row[measure]
            fmt = "  ".join
            print(f"  {measure:<7}raw      " + fmt(f"{k} {v:.2f}" for k, v in m["raw"].items()))
            print("         sampler  " + fmt(f"{k} {v:.2f}" for k, v in m["sampler"].items()))
            print("         observed " + fmt(f"{k} {v:.2f}" for k, v in m["observed"].items())
                  + f"   (chi-square p vs sampler {_p(m['chi_square_p'])}, vs raw "
                  f"{_p(m['chi_square_p_raw'])})")
    print(f"load average before {load_before[0]:.2f}, after {result['loadavg_after'][0]:.2f}")
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
