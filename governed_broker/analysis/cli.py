"""The ``report`` and ``cohort-check`` sub-commands.

``governed-broker report RUN_OR_SWEEP_DIR [--out FILE]`` writes the HTML report;
``governed-broker cohort-check EXPERIMENT.yaml --out DIR [--households 500]`` compares cohort
mode with a full run (``analysis.cohort``).

``register(subparsers)`` adds the sub-command to the main parser (governed_broker.cli); the
handler returns the process exit code: 0 on success, 2 when the directory or a file in it does
not follow the output contract (the message names the file and field).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from governed_broker.analysis.errors import AnalysisInputError


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``report`` and ``cohort-check`` to ``subparsers`` (each sets ``func``)."""
    parser = subparsers.add_parser(
        "report",
        help="write a self-contained HTML report of a run or sweep directory",
        description="Analyse a run or sweep directory (measures, figures, validation against "
        "configs/benchmarks.yaml) and write one self-contained HTML file.",
    )
    parser.add_argument("directory", metavar="RUN_OR_SWEEP_DIR", help="run or sweep directory")
    parser.add_argument("--out", metavar="FILE", default=None,
                        help="output HTML file (default: RUN_OR_SWEEP_DIR/report.html)")
    parser.add_argument("--benchmarks", metavar="YAML", default=None,
                        help="benchmark targets (default: configs/benchmarks.yaml)")
    parser.add_argument("--targets", metavar="YAML", default=None,
                        help="hindcast targets for a run's observed-vs-simulated section "
                             "(default: the run's calibration.targets, if any)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.set_defaults(func=run_report_command)
    check = subparsers.add_parser(
        "cohort-check",
        help="compare a cohort-mode run with a full per-household run on a subsample",
        description="Run an LLM experiment on a subsample twice, household by household and "
        "by cohort, and report the differences in action shares, appraisal distributions and "
        "benchmark fit, and the calls and seconds each took (docs/running.md, Cohort mode).",
    )
    check.add_argument("experiment", type=Path, help="experiment YAML file (with cohort: bins)")
    check.add_argument("--households", type=int, default=500,
                       help="households of the subsample (default 500)")
    check.add_argument("--out", type=Path, required=True,
                       help="directory for the two runs and the report")
    check.add_argument("--set", dest="overrides", action="append", default=[],
                       metavar="KEY=VALUE", help="override a setting (repeatable)")
    check.add_argument("--overwrite", action="store_true",
                       help="replace runs left in --out by an earlier check")
    check.set_defaults(func=run_cohort_check_command)
    return parser


def run_cohort_check_command(args: argparse.Namespace) -> int:
    """Run both runs, write ``cohort_check.md``/``.json``, print the report. Exit code."""
    from governed_broker.analysis.cohort import cohort_check, markdown, write_report
    from governed_broker.config.base import ConfigError
    from governed_broker.runner import OutputExistsError

    try:
        check = cohort_check(args.experiment, args.out, args.households, args.overrides,
                             overwrite=args.overwrite)
    except OutputExistsError as exc:
        raise ConfigError(f"{exc} (or pass --overwrite to cohort-check)") from exc
    path = write_report(check, args.out)
    print(markdown(check))
    print(path)
    return 0


def run_report_command(args: argparse.Namespace) -> int:
    """Write the report; print its path. Returns the exit code."""
    from governed_broker.analysis.report import write_report

    try:
        path = write_report(args.directory, args.out, args.benchmarks, args.targets,
                            progress=not args.no_progress)
    except AnalysisInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0
