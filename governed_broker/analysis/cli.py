"""The ``report`` sub-command: ``governed-broker report RUN_OR_SWEEP_DIR [--out FILE]``.

``register(subparsers)`` adds the sub-command to the main parser (governed_broker.cli); the
handler returns the process exit code: 0 on success, 2 when the directory or a file in it does
not follow the output contract (the message names the file and field).
"""

from __future__ import annotations

import argparse
import sys

from governed_broker.analysis.errors import AnalysisInputError


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``report`` to ``subparsers``; the parsed namespace gets ``func=run_report_command``."""
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
    return parser


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
