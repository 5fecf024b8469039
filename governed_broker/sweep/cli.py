"""Subcommands ``sweep``, ``branch``, ``collect`` and ``status``.

Registered by ``governed_broker.cli``.

Exit codes: 0 every planned run done, 1 some run failed or is unfinished (``branch``: or an
arm's history differs from its parent's), 2 configuration error.
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
    _register_branch(subparsers)

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


def _register_branch(subparsers: argparse._SubParsersAction) -> None:
    """Add ``branch`` (``governed_broker.sweep.branch``)."""
    branch = subparsers.add_parser(
        "branch",
        help="fork a finished run (or sweep of its seeds) at a year into policy arms",
        description="Re-simulate a finished run (or every run of a finished sweep of replicate "
        "seeds of one configuration) as a reference arm and one arm per --arm, each arm with "
        "its policy settings changed from year T; check that every arm repeats the parent's "
        "years before T byte for byte; write a sweep directory that `report` compares arm "
        "by arm. Re-running the same command resumes it.",
    )
    branch.add_argument("run_dir", type=Path, metavar="RUN_DIR",
                        help="a finished run directory, or a finished sweep directory whose "
                             "runs differ only in their seed")
    branch.add_argument("--from-year", type=int, required=True, metavar="T",
                        help="first year of the arms' policies (2 to the parent's years)")
    branch.add_argument("--arm", dest="arms", action="append", required=True,
                        metavar="NAME=SETTING=VALUE[,...]",
                        help="an arm: policy settings from year T, values parsed as YAML "
                             "(e.g. risk=insurance.pricing=risk_based), or NAME=@FILE.yaml "
                             "holding a mapping of settings (e.g. a buyout: section); repeat "
                             "for more arms")
    branch.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="sweep.KEY=VALUE",
                        help="an execution setting of the branch's sweep (sweep.executor, "
                             "sweep.max_workers, sweep.max_attempts, sweep.slurm.*, "
                             "sweep.llm_hosts; repeatable)")
    branch.add_argument("--out", type=Path, default=None,
                        help="branch directory (default: <RUN_DIR>-branch-T<T> beside RUN_DIR)")
    branch.add_argument("--executor", choices=["local", "slurm"], default=None,
                        help="where runs execute (default: sweep.executor, local)")
    branch.add_argument("--max-workers", type=int, default=None,
                        help="local processes at once (default: sweep.max_workers or CPUs)")
    branch.add_argument("--dry-run", action="store_true",
                        help="print the arms and the run table; run and write nothing")
    branch.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    branch.set_defaults(func=cmd_branch)


def cmd_branch(args: argparse.Namespace) -> int:
    """``branch``: check and plan (exit 2 on any problem, nothing written).

    Then run the arms and check their history against the parent's.
    """
    from governed_broker.sweep.branch import (
        describe,
        format_differences,
        plan_branch,
        run_branch,
    )
    from governed_broker.sweep.state import SweepDir

    if args.max_workers is not None and args.max_workers < 1:
        from governed_broker.config import ConfigError

        raise ConfigError(f"--max-workers {args.max_workers}: must be at least 1")
    branch = plan_branch(args.run_dir, args.from_year, args.arms, overrides=args.overrides,
                         out_dir=args.out)
    print(describe(branch))
    if args.dry_run:
        executor = args.executor or branch.plan.sweep.executor
        print(format_plan(branch.plan, SweepDir(branch.out_dir), executor))
        return 0
    result = run_branch(branch, executor=args.executor, max_workers=args.max_workers,
                        progress=not args.no_progress)
    print(format_status(result.sweep.index, result.sweep.sweep_dir))
    if result.sweep.exhausted:
        print(f"{len(result.sweep.exhausted)} failed run(s) not retried: max_attempts reached")
    differences = format_differences(result)
    if differences:
        print(f"history check FAILED: {len(differences)} file(s) of the arms differ from the "
              f"parent before year {branch.from_year} (the reference arm: in any year):")
        print("\n".join(f"  {line}" for line in differences))
    else:
        decisions = (f"; decisions.jsonl record for record in {result.with_decisions}, apart "
                     "from run ids, timings and cache flags" if result.with_decisions else "")
        print(f"history check passed: {result.checked} run(s) repeat the parent's years "
              f"1-{branch.from_year - 1} (the reference arm: every year): the yearly tables "
              f"byte for byte{decisions}")
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
    # a parameter a run does not set (a branch's reference arm has no policy change) shows "-"
    table = pd.DataFrame(rows).to_string(index=False, na_rep="-")
    todo = len({r["run_id"] for r in rows if r["status"] not in ("done", "invalid")})
    lines = [table, f"{len(rows)} runs ({todo} distinct to run) with executor {executor} "
                    f"into {sweep_dir.root}"]
    lines += [f"invalid run {r.index}: {r.error}" for r in plan.runs if r.error]
    return "\n".join(lines)
