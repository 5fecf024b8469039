"""Command line: ``governed-broker run EXPERIMENT.yaml [--set k=v ...] [--out DIR]``.

``run`` reads the YAML it is given: an experiment with a ``sweep:`` block runs its sweep
(exactly as ``governed-broker sweep``, with ``--dry-run``, ``--executor`` and ``--max-workers``),
any other experiment runs once.

Exit codes: 0 success, 2 configuration error (message on stderr, no traceback, nothing
written), 1 runtime failure, 141 when the reader of the output left (``... | head``: quietly).
Expected runtime failures (a missing backend package or model, an unreachable LLM server, a
full disk, a missing optional package) print one line without a traceback; ``--debug``
(anywhere on the command line) adds the traceback. An unexpected failure
(a bug) always prints its traceback. Further subcommands come from the modules in
``SUBCOMMAND_MODULES``, each exposing ``register(subparsers)`` that adds its parser with
``set_defaults(func=...)``; ``func(args) -> int`` is called with the parsed arguments.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sqlite3
import sys
import threading
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from governed_broker import __version__
from governed_broker.config.base import ConfigError

#: Modules that add subcommands (each has ``register(subparsers)``); a missing one is an error.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "governed_broker.sweep.cli",  # sweep, collect, status
    "governed_broker.analysis.cli",  # report
    "governed_broker.llm.cli",  # model pull|verify|list
    "governed_broker.calibration.cli",  # calibrate
    "governed_broker.explore.cli",  # explore
    "governed_broker.validity.cli",  # validate
    "governed_broker.validity.readout_cli",  # readout
)
#: ``OSError`` numbers that are the machine's state, not a bug: said in one line.
EXPECTED_ERRNOS = {errno.ENOSPC: "disk full", errno.EDQUOT: "disk quota exceeded",
                   errno.EROFS: "read-only file system", errno.EACCES: "permission denied",
                   errno.EPERM: "operation not permitted"}
DEBUG_FLAG = "--debug"
#: Exit code when the reader of standard output has gone (128 + SIGPIPE, as a shell reports it).
SIGPIPE_EXIT = 128 + signal.SIGPIPE


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="governed-broker",
        description="LLM-driven agent-based models of household flood adaptation.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(DEBUG_FLAG, action="store_true",
                        help="print the traceback of a runtime failure (may be given anywhere)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_run_parser(sub)
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def add_run_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``run``."""
    from governed_broker.explore.cli import add_server_options

    run = sub.add_parser(
        "run", help="run an experiment YAML (its sweep, when it has a 'sweep:' block)",
        description="Run one experiment and write its outputs; an experiment with a 'sweep:' "
        "block runs its sweep, exactly as `governed-broker sweep`.")
    run.add_argument("experiment", type=Path, help="experiment YAML file")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a setting, e.g. --set seed=7 --set population.size=50 "
                          "(value parsed as YAML; repeatable)")
    run.add_argument("--out", type=Path, default=None,
                     help="output (or sweep) directory (default: outputs/<name>)")
    run.add_argument("--overwrite", action="store_true",
                     help="replace an existing output directory (single runs; a sweep resumes)")
    run.add_argument("--dry-run", action="store_true",
                     help="print what would run (a sweep's run table) and run nothing")
    run.add_argument("--executor", choices=["local", "slurm"], default=None,
                     help="sweeps: where runs execute (default: sweep.executor)")
    run.add_argument("--max-workers", type=int, default=None,
                     help="sweeps: local processes at once (default: sweep.max_workers or CPUs)")
    run.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    run.add_argument("--explore", action="store_true",
                     help="also open the run explorer on the output, live while it runs")
    add_server_options(run)
    run.set_defaults(func=cmd_run)
    return run


def cmd_run(args: argparse.Namespace) -> int:
    """``run``: the sweep of a YAML with a ``sweep:`` block, else one run."""
    from governed_broker.config.resolved import load_resolved

    experiment = load_resolved(args.experiment, args.overrides)
    config = experiment.config
    if config.sweep is not None:
        return _run_sweep(args)
    for flag, value in (("--executor", args.executor), ("--max-workers", args.max_workers)):
        if value is not None:
            raise ConfigError(f"{flag}: {args.experiment} has no 'sweep:' block, so it runs once "
                              "in this process; remove the flag, or add a sweep block")
    return _run_once(args, experiment)


def _run_once(args: argparse.Namespace, experiment) -> int:
    from governed_broker.config.cost import estimate_run_cost, format_run_cost
    from governed_broker.run_dir import partial_dir
    from governed_broker.runner import OutputExistsError, run_experiment

    config = experiment.config
    out = args.out if args.out is not None else Path("outputs") / config.name
    print(f"{config.name}: {format_run_cost(estimate_run_cost(config))}", file=sys.stderr)
    if args.dry_run:
        print(f"dry run: would write {out} ({config.years} years); nothing was run")
        return 0
    explorer = _explorer(args, out, lambda: out.is_dir() or partial_dir(out).is_dir())
    try:
        result = run_experiment(experiment, out, progress=not args.no_progress,
                                overwrite=args.overwrite)
    except BaseException as exc:
        if explorer is not None:
            explorer.stop()
        if isinstance(exc, OutputExistsError):
            raise ConfigError(str(exc)) from exc
        if isinstance(exc, KeyboardInterrupt):
            raise Interrupted(resume_hint(partial_dir(out), config.years)) from None
        raise
    print(
        f"wrote {result.out_dir} ({result.n_households} households x {result.years} years, "
        f"{result.n_agent_rows} agent rows, {result.seconds:.1f} s, {result.decision_maker})"
    )
    return _keep_exploring(explorer, 0)


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with what was kept and how to go on (the message printed)."""


def resume_hint(work: Path, years: int) -> str:
    """What an interrupted run kept in ``work`` (its ``.partial`` directory) and how to go on."""
    from governed_broker.checkpoint import CheckpointError, latest_checkpoint

    try:
        ckpt = latest_checkpoint(work) if work.is_dir() else None
    except CheckpointError:
        ckpt = None
    again = "run the same command again"
    if ckpt is None:
        return (f"interrupted before the first year finished; {again} to start it (the LLM "
                "replies already made are cached and come back at once)")
    return (f"interrupted: {work} keeps years 1-{ckpt.year} of {years}; {again} to resume "
            f"from year {ckpt.year + 1}")


def _run_sweep(args: argparse.Namespace) -> int:
    from governed_broker.sweep.api import default_sweep_dir
    from governed_broker.sweep.cli import cmd_sweep
    from governed_broker.sweep.plan import build_plan

    if args.overwrite:
        raise ConfigError(f"--overwrite: {args.experiment} has a 'sweep:' block; a sweep "
                          "resumes into its directory (done runs are kept), so there is "
                          "nothing to overwrite; choose another --out to start afresh")
    explorer = None
    if args.explore and not args.dry_run:
        out = args.out or default_sweep_dir(build_plan(args.experiment, args.overrides))
        explorer = _explorer(args, out, lambda: (out / "_sweep" / "plan.json").is_file())
    try:
        code = cmd_sweep(args)
    except BaseException:
        if explorer is not None:
            explorer.stop()
        raise
    return _keep_exploring(explorer, code)


def _explorer(args: argparse.Namespace, out: Path, present):
    """With ``--explore``: an explorer that starts once ``present()`` (None without)."""
    if not args.explore:
        return None
    from governed_broker.explore.server import Explorer, check_dependencies, exposure_warning

    check_dependencies()  # before anything runs: a missing extra is said at once
    warning = exposure_warning(args.host)
    if warning is not None:
        print(warning, file=sys.stderr, flush=True)
    explorer = Explorer(out, args.host, args.port)
    explorer.start_when_present(present, lambda line: print(line, file=sys.stderr, flush=True))
    return explorer


def _keep_exploring(explorer, code: int) -> int:
    """After the run: keep the explorer open until Ctrl-C, then return the run's code."""
    if explorer is not None and explorer.started():
        explorer.wait(announce=lambda: print(
            f"the explorer stays open at {explorer.url}; Ctrl-C to stop it",
            file=sys.stderr, flush=True))
    return code


def expected_failure(exc: BaseException) -> str | None:
    """The one-line message of an expected runtime failure (None: unexpected, a bug).

    Expected: LLM backend errors (missing package or model, unreachable server: their
    messages say what to do), the explorer's start-up errors, another process taking over a
    run's directory (its lock deleted, its outputs changed), and the machine's state (a full
    disk, no permission).
    """
    from governed_broker.explore.server import ExplorerError
    from governed_broker.llm.base import LLMError
    from governed_broker.run_dir import LockLostError
    from governed_broker.runner import OutputsChangedError

    if isinstance(exc, LLMError | ExplorerError | LockLostError | OutputsChangedError):
        return str(exc)
    if isinstance(exc, OSError) and exc.errno in EXPECTED_ERRNOS:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{EXPECTED_ERRNOS[exc.errno]}{where} ({exc.strerror})"
    if isinstance(exc, sqlite3.OperationalError) and "disk is full" in str(exc):
        return f"disk full ({exc})"
    return None


def _second_interrupt_exits() -> None:
    """Install the Ctrl-C handler.

    Ctrl-C raises ``KeyboardInterrupt`` once (the run cleans up and says how to resume); a
    second Ctrl-C during that clean-up ends the process at once. A process started with SIGINT
    ignored (a background job of a script) keeps ignoring it.
    """
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        return
    seen = []

    def on_interrupt(signum: int, frame: Any) -> None:
        if seen:
            os._exit(130)
        seen.append(signum)
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_interrupt)


def _exit_if_generating(code: int) -> None:
    """End the process now when an embedded generation is still finishing on a worker thread.

    One still reading its prompt stops only after it, and the interpreter would wait for it on
    exit; the run's files are already closed and its message printed.
    """
    embedded = sys.modules.get("governed_broker.llm.embedded")
    if embedded is not None and embedded.generations_running():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``governed-broker`` and ``run.py``; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # --debug may follow the subcommand (run.py passes everything after "run"); the parser
    # lists it only for --help
    debug = DEBUG_FLAG in argv
    argv = [a for a in argv if a != DEBUG_FLAG]
    parser = build_parser()
    args = parser.parse_args(argv)
    _second_interrupt_exits()
    try:
        code = int(args.func(args))
        # output still buffered is written here, inside the try: a reader that has left is
        # then seen as such, not as an error while Python flushes at exit (exit 120)
        sys.stdout.flush()
        return code
    except ConfigError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(f"\n{exc}" if str(exc) else "\ninterrupted", file=sys.stderr)
        _exit_if_generating(130)
        return 130
    except BrokenPipeError:
        return _reader_left()
    except Exception as exc:  # noqa: BLE001 - the CLI reports any failure with exit code 1
        message = expected_failure(exc)
        if debug or message is None:
            traceback.print_exc(file=sys.stderr)
        if message is None:
            print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
            print("this failure was not expected; unless the message explains it, please "
                  "report it with the traceback above", file=sys.stderr)
        else:
            hint = "" if debug else f" (add {DEBUG_FLAG} for the traceback)"
            print(f"error: {message}{hint}", file=sys.stderr)
        return 1


def _reader_left() -> int:
    """The reader of standard output closed it (``... | head``): stop quietly.

    Output still buffered goes nowhere (flushing it at exit would raise again); the exit code
    is a shell's for a process ended by SIGPIPE (128 + 13), as for any command cut off by
    ``head``. See the Python documentation, "Note on SIGPIPE".
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return SIGPIPE_EXIT


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
