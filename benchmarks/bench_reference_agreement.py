"""Distribution cards of the reference respondents beside their sampled cards.

The reference respondents' laws are known (``llm.reference.ReferenceSource``), so each one's
card can be judged from its exact distributions (``validate --readout distribution
--reference NAME``) and set beside what its sampled cards concluded over many battery seeds
(the battery's ``calibration.json``: each test's outcomes over the seeds). Per respondent and
test the table shows the exact statistic and outcome and the sampled outcomes' counts; a
*contradiction* is an exact pass where a sampled card failed, or an exact fail where one
passed. Pure Python, no language model: about 10 s per respondent on 2 cores.

    .venv/bin/python benchmarks/bench_reference_agreement.py [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiment", type=Path, default=ROOT / "experiments" / "demo.yaml")
    parser.add_argument("--json", type=Path, default=None, help="write the table here")
    args = parser.parse_args(argv)

    from governed_broker.config.loader import load_experiment
    from governed_broker.config.resolved import resolve_experiment
    from governed_broker.validity.card import battery_sha256
    from governed_broker.validity.readout_card import validate_distribution
    from governed_broker.validity.reference import reference_experiment
    from governed_broker.validity.validate import prepare

    experiment = resolve_experiment(load_experiment(args.experiment, []))
    battery = prepare(experiment).plan.battery
    calibration = json.loads((battery.directory / "calibration.json").read_text())
    if calibration.get("battery_sha256") != battery_sha256(battery):
        sys.exit("calibration.json is out of date for this battery: regenerate it first")
    rows: list[dict[str, Any]] = []
    contradictions = 0
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as work:
        for name, sampled in calibration["outcomes"].items():
            start = time.perf_counter()
            card = validate_distribution(reference_experiment(experiment, name),
                                         Path(work) / name.replace(":", "-"),
                                         progress=False, store=False).card
            seconds = time.perf_counter() - start
            print(f"\n{name} (distribution card {'PASSED' if card['passed'] else 'NOT PASSED'}; "
                  f"sampled cards passed {calibration['cards_passed'][name]:.0%} of "
                  f"{calibration['runs']}; {seconds:.1f} s)")
            for t in card["tests"]:
                counts = sampled.get(t["name"], {})
                bad = counts.get("fail", 0) if t["outcome"] == "pass" else \
                    counts.get("pass", 0) if t["outcome"] == "fail" else 0
                contradictions += bool(bad)
                value = "-" if t["statistic"] is None else f"{t['statistic']:+.3f}"
                shown = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
                print(f"  {t['name']:<36} {value:>7} {t['outcome']:<15} sampled: {shown}"
                      f"{'   <- contradiction' if bad else ''}")
                rows.append({"respondent": name, "test": t["name"],
                             "statistic": t["statistic"], "exact": t["outcome"],
                             "sampled": counts, "contradiction": bool(bad)})
    print(f"\n{contradictions} contradictions in {len(rows)} (respondent, test) pairs; load "
          f"average {load[0]:.2f} before, {os.getloadavg()[0]:.2f} after")
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": rows, "contradictions": contradictions,
                                         "calibration_runs": calibration["runs"]},
                                        indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
