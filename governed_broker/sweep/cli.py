"""Subcommands ``sweep``, ``collect`` and ``status`` (registered by ``governed_broker.cli``).

Exit codes: 0 every planned run done, 1 some run failed or is unfinished, 2 configuration error.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from governed_broker.sweep.plan import PARAM_PREFIX, SweepPlan


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``sweep``, ``collect`` and ``status`` to the ``governed-broker`` parser."""
    sweep = subparsers.add_parser(
        "sweep",
        help="run (or resume) the sweep of an experiment YAML",
        description="Run every run of the experiment's 'sweep:' block; re-submitting skips "
        "done runs and retries failed ones (up to sweep.max_attempts).",
    )
    sweep.add_argument("experiment", type=Path, help="experiment YAML with a 'sweep:' section")
    sweep.add_argument("--set", dest="overrides", action="append", default=[],
                       metavar="KEY=VALUE", help="override a setting (repeatable)")
    sweep.add_argument("--out", type=Path, default=None,
                       help="sweep directory (default: outputs/<name>)")
    sweep.add_argument("--executor", choices=["local", "slurm"], default=None,
                       help="where runs execute (default: sweep.executor)")
    sweep.add_argument("--max-workers", type=int, default=None,
                       help="local processes at once (default: sweep.max_workers or CPUs)")
    sweep.add_argument("--dry-run", action="store_true",
                       help="print the run table and what would run; run nothing")
    sweep.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    sweep.set_defaults(func=cmd_sweep)

    collect = subparsers.add_parser(
        "collect", help="write sweep_runs.csv and the combined tables of a sweep directory")
    collect.add_argument("sweep_dir", type=Path)
    collect.set_defaults(func=cmd_collect)

    status = subparsers.add_parser("status", help="print the progress of a sweep directory")
    status.add_argument("sweep_dir", type=Path)
    status.set_defaults(func=cmd_status)


def cmd_sweep(args: argparse.Namespace) -> int:
    """``sweep``: plan, then run (or only print with ``--dry-run``)."""
    from governed_broker.sweep.api import default_sweep_dir, run_sweep
    from governed_broker.sweep.plan import build_plan
    from governed_broker.sweep.state import SweepDir

    if args.max_workers is not None and args.max_workers < 1:
        from governed_broker.config import ConfigError

        raise ConfigError(f"--max-workers {args.max_workers}: must be at least 1")
    if args.dry_run:
        plan = build_plan(args.experiment, args.overrides)
        out = args.out if args.out is not None else default_sweep_dir(plan)
        print(format_plan(plan, SweepDir(out), args.executor or plan.sweep.executor))
        return 0
    result = run_sweep(
        args.experiment,
        args.overrides,
        out_dir=args.out,
        executor=args.executor,
        max_workers=args.max_workers,
        progress=not args.no_progress,
    )
    print(format_status(result.index, result.sweep_dir))
    if result.exhausted:
        print(f"{len(result.exhausted)} failed run(s) not retried: max_attempts reached")
    return result.exit_code


def cmd_collect(args: argparse.Namespace) -> int:
    """``collect``: rewrite the index and combined tables from the runs done so far."""
    from governed_broker.sweep.collect import collect
    from governed_broker.sweep.state import DONE, SweepDir

    index = collect(SweepDir(args.sweep_dir))
    done = int((index["status"] == DONE).sum())
    print(f"{args.sweep_dir}: collected {done} of {len(index)} runs into sweep_runs.csv, "
          "sweep_agents_yearly.parquet, sweep_model_yearly.csv")
    return 0 if done == len(index) else 1


def cmd_status(args: argparse.Namespace) -> int:
    """``status``: counts by status and the failed runs' errors (reads state files only)."""
    from governed_broker.sweep.collect import index_frame, load_plan
    from governed_broker.sweep.state import DONE, SweepDir

    sweep_dir = SweepDir(args.sweep_dir)
    index = index_frame(sweep_dir, load_plan(sweep_dir))
    print(format_status(index, sweep_dir.root))
    return 0 if (index["status"] == DONE).all() else 1


def format_status(index: pd.DataFrame, root: Path) -> str:
    """Counts by status and one line per failed run."""
    counts = index["status"].value_counts()
    parts = [f"{counts.get(s, 0)} {s}" for s in ("done", "running", "failed", "pending")]
    lines = [f"{root}: {len(index)} runs: " + ", ".join(parts)]
    for _, row in index[index["status"] == "failed"].iterrows():
        lines.append(f"  failed {row['run_id']} (attempts {row['attempts']}): {row['error']}")
    return "\n".join(lines)


def format_plan(plan: SweepPlan, sweep_dir, executor: str) -> str:
    """The run table of ``--dry-run``: one line per run with its status in ``sweep_dir``."""
    rows = []
    for run in plan.runs:
        status = sweep_dir.status(run.run_id) if sweep_dir.meta.exists() else "pending"
        row = {"index": run.index, "run_id": run.run_id, "replicate": run.replicate,
               "seed": run.seed}
        row.update({PARAM_PREFIX + k: json.dumps(v) if isinstance(v, list | dict) else v
                    for k, v in run.params.items()})
        row["status"] = "invalid" if run.error else status
        rows.append(row)
    table = pd.DataFrame(rows).to_string(index=False)
    todo = len({r["run_id"] for r in rows if r["status"] not in ("done", "invalid")})
    lines = [table, f"{len(rows)} runs ({todo} distinct to run) with executor {executor} "
                    f"into {sweep_dir.root}"]
    lines += [f"invalid run {r.index}: {r.error}" for r in plan.runs if r.error]
    return "\n".join(lines)
