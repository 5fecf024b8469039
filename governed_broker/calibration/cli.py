"""Subcommand ``calibrate`` (registered by ``governed_broker.cli``).

Exit codes: 0 every run done and scored, 1 some run failed (the others are scored), 2
configuration error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``calibrate`` to the ``governed-broker`` parser."""
    parser = subparsers.add_parser(
        "calibrate",
        help="run an experiment's sweep and history-match it to observed targets",
        description="Run (or resume) the experiment's 'sweep:' block, score every parameter "
        "point against the 'calibration.targets' file and report the plausible region "
        "(points whose largest implausibility is within the targets' cutoff).",
    )
    parser.add_argument("experiment", type=Path,
                        help="experiment YAML with 'sweep:' and 'calibration:' sections")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a setting (repeatable)")
    parser.add_argument("--out", type=Path, default=None,
                        help="sweep directory (default: outputs/<name>)")
    parser.add_argument("--executor", choices=["local", "slurm"], default=None,
                        help="where runs execute (default: sweep.executor)")
    parser.add_argument("--max-workers", type=int, default=None,
                        help="local processes at once (default: sweep.max_workers or CPUs)")
    parser.add_argument("--train", metavar="FIRST-LAST", default=None,
                        help="fit on these calendar years only and score the observed years "
                        "after them out of sample (default: calibration.train, else all)")
    parser.add_argument("--refocus", type=Path, default=None, metavar="EARLIER_SWEEP_DIR",
                        help="a further wave: sample only the box spanned by that earlier "
                        "calibration's points at or under --refocus-cutoff (default directory "
                        "outputs/<name>-wave<N>)")
    parser.add_argument("--refocus-cutoff", type=float, default=None, metavar="I",
                        help="largest implausibility of the earlier wave's points kept "
                        "(default: the targets' cutoff)")
    parser.add_argument("--refocus-margin", type=float, default=None, metavar="SHARE",
                        help="widen each kept range on both sides by this share of the "
                        "experiment's range (default 0.1)")
    parser.add_argument("--refocus-free", dest="refocus_free", action="append", default=[],
                        metavar="PARAM", help="keep this sampled parameter at the "
                        "experiment's bounds in the new wave, for one the earlier wave's "
                        "fitted years do not identify (repeatable)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.set_defaults(func=cmd_calibrate)


def parse_window(text: str) -> tuple[int, int]:
    """``2011-2017`` -> (2011, 2017).

    Raises:
        ConfigError: not two years joined by '-', or the first after the last.
    """
    from governed_broker.config import ConfigError

    first, sep, last = text.partition("-")
    if not sep or not first.strip().isdigit() or not last.strip().isdigit():
        raise ConfigError(f"--train {text!r}: expected FIRST-LAST calendar years, "
                          "e.g. 2011-2017")
    window = (int(first), int(last))
    if window[0] > window[1]:
        raise ConfigError(f"--train {text!r}: the first year is after the last")
    return window


def cmd_calibrate(args: argparse.Namespace) -> int:
    """``calibrate``: sweep, score, print the region and the best point."""
    from governed_broker.calibration.api import CALIBRATION_DIR, calibrate
    from governed_broker.calibration.refocus import WaveSettings
    from governed_broker.config import ConfigError

    if args.max_workers is not None and args.max_workers < 1:
        raise ConfigError(f"--max-workers {args.max_workers}: must be at least 1")
    train = None if args.train is None else parse_window(args.train)
    wave = None
    if args.refocus is not None:
        margin = {} if args.refocus_margin is None else {"margin": args.refocus_margin}
        wave = WaveSettings(args.refocus, args.refocus_cutoff, free=tuple(args.refocus_free),
                            **margin)
    elif (args.refocus_cutoff is not None or args.refocus_margin is not None
          or args.refocus_free):
        raise ConfigError("--refocus-cutoff, --refocus-margin and --refocus-free need "
                          "--refocus EARLIER_SWEEP_DIR")
    result, sweep = calibrate(args.experiment, args.overrides, out_dir=args.out,
                              executor=args.executor, max_workers=args.max_workers,
                              progress=not args.no_progress, train=train, wave=wave)
    summary = result.summary()
    if summary["wave"] is not None:
        w = summary["wave"]
        print(f"wave {w['number']}: the box of {w['kept']} of {w['of']} points of "
              f"{w['previous']} with max implausibility <= {w['cutoff']:g}, widened by "
              f"{w['margin']:g} of each range"
              + (f"; at the experiment's bounds: {', '.join(w['free'])}" if w["free"] else ""))
    print(f"{summary['n_plausible']} of {summary['n_points']} parameter points plausible "
          f"(max implausibility <= {summary['cutoff']:g})")
    for name, span in summary["region"].items():
        if "values" in span:
            print(f"  {name}: {span['values'] or 'none'} (sampled {span['sampled']})")
        else:
            found = "none" if span["low"] is None else f"{span['low']:.4g} .. {span['high']:.4g}"
            print(f"  {name}: {found} (sampled {span['sampled'][0]:.4g} .. "
                  f"{span['sampled'][1]:.4g})")
    best = summary["best"]
    if best is not None:
        rmse = ", ".join(f"{k} {v:.4f}" for k, v in best["rmse"].items() if v is not None)
        print(f"best point: max implausibility {best['max_implausibility']:.3g}; RMSE {rmse}")
    if summary["validation"] is not None:
        print(out_of_sample_text(summary["validation"]))
    print(f"wrote {sweep.sweep_dir / CALIBRATION_DIR}", file=sys.stderr)
    return sweep.exit_code


def out_of_sample_text(validation: dict) -> str:
    """The training fit beside its out-of-sample score and the in-sample fit, as lines."""
    train, test = validation["train"], validation["test"]
    lines = [f"fitted on {train[0]}-{train[1]}: {validation['n_plausible_train']} points "
             f"plausible; {validation['n_plausible_train_and_test']} of them also on "
             f"{test[0]}-{test[1]}"]
    spread = validation["test_max_implausibility_of_plausible"]
    if spread is not None:
        lines.append(f"  their max implausibility on {test[0]}-{test[1]}: min "
                     f"{spread['min']:.3g}, median {spread['median']:.3g}, max {spread['max']:.3g}")
    best = validation["best_train_point"]
    if best is not None:
        rmse = ", ".join(f"{k} {v:.4f}" for k, v in best["test_rmse"].items() if v is not None)
        lines.append(f"  best training point: max implausibility "
                     f"{best['train_max_implausibility']:.3g} in the window, "
                     f"{best['test_max_implausibility']:.3g} after it; RMSE after it {rmse}")
    whole = validation["in_sample"]
    found = whole["best_max_implausibility"]
    line = (f"in-sample fit (every year): {whole['n_plausible']} points plausible, best "
            f"max implausibility {'n/a' if found is None else f'{found:.3g}'}")
    if whole["best_rmse"]:
        line += "; RMSE " + ", ".join(f"{k} {v:.4f}" for k, v in whole["best_rmse"].items()
                                      if v is not None)
    lines.append(line)
    return "\n".join(lines)
