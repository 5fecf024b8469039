"""How often the validity card passes a respondent that follows the facts in most replies.

Usage: python benchmarks/validity_noisy_rule.py [--experiment experiments/demo.yaml]
       [--share 0.25] [--seeds 50]

Runs the shipped battery, through the real broker and rules, on the reference respondent
``noisy_rule:S`` (the rule's reply, or a uniformly random one in a share S of its replies;
``governed_broker.llm.reference``) once per battery seed, and prints how many of its cards
passed, with a 95 % Wilson interval, and how often each primary test passed. The target
(docs/validity.md "Reference respondents"): a 75 %-faithful rule (S = 0.25) passes the card in
at least 80 % of seeds. Exit code 1 when it does not. Not a timed test: about 5 s per seed on 2
cores.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from governed_broker.config.loader import load_experiment
from governed_broker.config.resolved import resolve_experiment
from governed_broker.validity import stats
from governed_broker.validity.reference import calibrate

TARGET = 0.8


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--experiment", type=Path, default=Path("experiments/demo.yaml"))
    parser.add_argument("--share", type=float, default=0.25,
                        help="share of uniformly random replies (default 0.25)")
    parser.add_argument("--seeds", type=int, default=50)
    args = parser.parse_args()
    name = f"noisy_rule:{args.share:g}"
    experiment = resolve_experiment(load_experiment(args.experiment, []))
    start = time.perf_counter()
    calibration = calibrate(experiment, [name], args.seeds)
    tally = calibration.tallies[name]
    rate = tally.cards_passed / tally.runs
    interval = stats.rate_evidence(tally.cards_passed, tally.runs, TARGET, 0.025)
    assert interval is not None
    print(f"{name}: card passed in {tally.cards_passed} of {tally.runs} battery seeds "
          f"({calibration.seeds[0]}-{calibration.seeds[-1]}): {rate:.2f}, 95 % interval "
          f"[{interval.lower:.2f}, {interval.upper:.2f}]; target >= {TARGET:.2f}; "
          f"{time.perf_counter() - start:.0f} s")
    for test in calibration.plan.battery.tests.tests:
        if test.primary:
            print(f"  {test.name:38s} passed {tally.rate(test.name):.2f}  "
                  f"{dict(sorted(tally.outcomes[test.name].items()))}")
    return 0 if rate >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
