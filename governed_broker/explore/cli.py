"""The ``explore`` sub-command: ``governed-broker explore RUN_OR_SWEEP_DIR [--port N]``.

Registered by ``governed_broker.cli``. Exit codes: 0 when the explorer was stopped (Ctrl-C),
1 when it cannot start (missing ``explore`` extra, port in use, server failure), 2 when the
directory is not a run or sweep directory.
"""

from __future__ import annotations

import argparse
import sys
import webbrowser
from pathlib import Path

from governed_broker.config.base import ConfigError


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``explore`` to the ``governed-broker`` parser."""
    parser = subparsers.add_parser(
        "explore", help="open a run or sweep in the browser (the run explorer)",
        description="Serve the run explorer for a finished run, a running one (its files are "
        "read as they grow) or a sweep, on this machine; open the printed address in a "
        "browser. Needs the 'explore' extra (make setup installs it).")
    parser.add_argument("directory", type=Path, metavar="RUN_OR_SWEEP_DIR")
    add_server_options(parser)
    parser.set_defaults(func=cmd_explore)
    return parser


def add_server_options(parser: argparse.ArgumentParser) -> None:
    """``--host``, ``--port`` and ``--open`` (shared with ``run --explore``)."""
    from governed_broker.explore.server import DEFAULT_HOST, DEFAULT_PORT

    parser.add_argument("--host", default=DEFAULT_HOST,
                        help=f"interface to listen on (default {DEFAULT_HOST}: this machine "
                             "only; reach it from elsewhere through an SSH tunnel; any other "
                             "is warned about)")
    parser.add_argument("--port", type=int, default=None,
                        help=f"port (default: the first free one from {DEFAULT_PORT})")
    parser.add_argument("--open", dest="open_browser", action="store_true",
                        help="also open the address in this machine's web browser")


def cmd_explore(args: argparse.Namespace) -> int:
    """Check, start the server, print its address, wait for Ctrl-C."""
    from governed_broker.analysis.errors import AnalysisInputError
    from governed_broker.explore.files import resolve_target
    from governed_broker.explore.server import Explorer, check_dependencies, exposure_warning

    check_dependencies()
    try:
        target = resolve_target(args.directory)
    except AnalysisInputError as exc:
        raise ConfigError(str(exc)) from exc
    warning = exposure_warning(args.host)
    if warning is not None:
        print(warning, file=sys.stderr, flush=True)
    explorer = Explorer(target.path, args.host, args.port)
    url = explorer.start()
    print(f"explorer of {target.path} at {url} (Ctrl-C to stop; server log: {explorer.log})",
          flush=True)
    if args.open_browser:
        webbrowser.open(url)
    explorer.wait()
    print("explorer stopped", file=sys.stderr)
    return 0
