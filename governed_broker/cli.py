"""Command line: ``governed-broker run EXPERIMENT.yaml [--set k=v ...] [--out DIR]``.

Exit codes: 0 success, 2 configuration error (message on stderr, no traceback, nothing
written), 1 runtime failure. Further subcommands come from the modules in ``SUBCOMMAND_MODULES``,
each exposing ``register(subparsers)`` that adds its parser with ``set_defaults(func=...)``;
``func(args) -> int`` is called with the parsed arguments.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path

from governed_broker import __version__
from governed_broker.config.base import ConfigError

#: Modules that add subcommands (each has ``register(subparsers)``); a missing one is an error.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "governed_broker.sweep.cli",  # sweep, collect, status
    "governed_broker.analysis.cli",  # report
    "governed_broker.llm.cli",  # model pull|verify|list
    "governed_broker.calibration.cli",  # calibrate
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="governed-broker",
        description="LLM-driven agent-based models of household flood adaptation.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_run_parser(sub)
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def add_run_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``run``."""
    run = sub.add_parser("run", help="run one experiment YAML",
                         description="Run one experiment and write its outputs.")
    run.add_argument("experiment", type=Path, help="experiment YAML file")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a setting, e.g. --set seed=7 --set population.size=50 "
                          "(value parsed as YAML; repeatable)")
    run.add_argument("--out", type=Path, default=None,
                     help="output directory (default: outputs/<name>)")
    run.add_argument("--overwrite", action="store_true",
                     help="replace an existing output directory")
    run.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    run.set_defaults(func=cmd_run)
    return run


def cmd_run(args: argparse.Namespace) -> int:
    """``run``: load, validate, simulate, write."""
    from governed_broker.config.cost import estimate_run_cost, format_run_cost
    from governed_broker.config.loader import load_experiment
    from governed_broker.runner import OutputExistsError, run_experiment

    config = load_experiment(args.experiment, args.overrides)
    out = args.out if args.out is not None else Path("outputs") / config.name
    print(f"{config.name}: {format_run_cost(estimate_run_cost(config))}", file=sys.stderr)
    try:
        result = run_experiment(config, out, progress=not args.no_progress,
                                overwrite=args.overwrite)
    except OutputExistsError as exc:
        raise ConfigError(str(exc)) from exc
    print(
        f"wrote {result.out_dir} ({result.n_households} households x {result.years} years, "
        f"{result.n_agent_rows} agent rows, {result.seconds:.1f} s, {result.decision_maker})"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``governed-broker`` and ``run.py``; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the CLI reports any failure with exit code 1
        traceback.print_exc(file=sys.stderr)
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
