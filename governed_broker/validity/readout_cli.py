"""``governed-broker readout EXPERIMENT.yaml [--top-k N] [--accounts N] [--json FILE] ...``.

Reads the distributions of the validity battery's vignettes from the experiment's model's
token probabilities (``validity.readout``; docs/validity.md "Exact distributions") and prints,
per vignette, the threat, coping and action distributions, then, per monotone or share test,
the expected measure at each level. Exit codes: 0, 1 for a backend that cannot be read or a
readout that fails, 2 for a configuration error.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from governed_broker.llm.readout import VIEWS, ReadoutSettings

#: Sampled accounts the readout commands read the coping label and the action over, by default
#: (the library's default, ``ReadoutSettings``, is the greedy path); docs/validity.md "Cards
#: from distributions" gives the measurement behind it.
DEFAULT_ACCOUNTS = 8


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``readout`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "readout", help="read the model's choice distributions on the validity vignettes",
        description="Read the threat, coping and action distributions of every vignette of "
        "the validity battery from the model's token probabilities (embedded backend, or an "
        "OpenAI-compatible server that returns logprobs) and print them.")
    parser.add_argument("experiment", type=Path, help="experiment YAML file")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a setting (repeatable), as for run")
    parser.add_argument("--top-k", type=int, default=None, metavar="N",
                        help="tokens read at each position (default 20; at most 20 on a "
                        "server)")
    add_accounts_option(parser)
    add_view_option(parser)
    parser.add_argument("--json", type=Path, default=None, metavar="FILE",
                        help="also write every distribution and the positions read to FILE")
    parser.add_argument("--primary-only", action="store_true",
                        help="read only the vignettes of the primary tests (the card's verdict)")
    parser.add_argument("--no-progress", action="store_true", help="no progress lines")
    parser.set_defaults(func=cmd_readout)
    return parser


def cmd_readout(args: argparse.Namespace) -> int:
    """Load the experiment, read its battery, print the distributions; 0 on success."""
    from governed_broker.config.base import ConfigError
    from governed_broker.config.loader import load_experiment
    from governed_broker.config.resolved import resolve_experiment
    from governed_broker.run_dir import write_atomic
    from governed_broker.validity.readout import ProgressLine, read_battery

    if args.top_k is not None and args.top_k < 1:
        raise ConfigError(f"--top-k must be at least 1, got {args.top_k}")
    settings = reading_settings(args, args.top_k)
    experiment = resolve_experiment(load_experiment(args.experiment, args.overrides))
    result = read_battery(experiment, settings,
                          progress=None if args.no_progress else ProgressLine(),
                          primary_only=args.primary_only)
    print(format_readout(result))
    if args.json is not None:
        write_atomic(args.json, json.dumps(result.to_json(), indent=1) + "\n")
        print(f"\nwrote {args.json}")
    return 0


def add_accounts_option(parser: argparse.ArgumentParser) -> None:
    """``--accounts N``: read the fields after generated text over N sampled accounts."""
    parser.add_argument(
        "--accounts", type=int, default=None, metavar="N",
        help="read the coping label and the action over N replies drawn with the run's "
        f"sampler (the sampled card's first N replicate seeds) and average (default "
        f"{DEFAULT_ACCOUNTS}); 0: along the greedy reply only (the choice after the most "
        "probable account, which can differ from what sampled replies choose)")


def add_view_option(parser: argparse.ArgumentParser) -> None:
    """``--view sampler|model``: the distribution the run's sampler draws from, or the model's."""
    parser.add_argument(
        "--view", choices=VIEWS, default=None,
        help="sampler (default): the distributions the run's sampler draws replies from (its "
        "temperature and truncation: what a sampled card estimates); model: the model's own "
        "distributions under the reply grammar (temperature 1, no truncation), the only view "
        "of an OpenAI-compatible server")
    parser.add_argument(
        "--whole-prompts", action="store_true",
        help="evaluate a vignette's prompt whole for every sampled account (by default the "
        "accounts after the first reuse the first's evaluation: the same distributions up to "
        "rounding, in about a third of the time)")


def reading_settings(args: argparse.Namespace, top_k: int | None = None) -> ReadoutSettings:
    """The ``ReadoutSettings`` of ``--accounts``, ``--view``, ``--whole-prompts``."""
    return ReadoutSettings(top_k=top_k or ReadoutSettings.top_k, accounts=accounts_option(args),
                           view=args.view or "sampler", prompt_reuse=not args.whole_prompts)


def accounts_option(args: argparse.Namespace) -> int:
    """The ``--accounts`` given, or the default; a negative number is a configuration error."""
    from governed_broker.config.base import ConfigError

    accounts = DEFAULT_ACCOUNTS if args.accounts is None else args.accounts
    if accounts < 0:
        raise ConfigError(f"--accounts must be 0 or more, got {accounts}")
    return accounts


def _dist(dist: dict[str, float]) -> str:
    return "  ".join(f"{value} {p:.3f}" for value, p in dist.items())


def format_readout(result: Any) -> str:
    """Per vignette its three distributions, then per test the expectation at each level."""
    p = result.provenance
    along = (f"over {p['accounts']} sampled accounts" if p.get("accounts")
             else "along the greedy path")
    view = ("the distributions the run's sampler draws from" if p.get("view") == "sampler"
            else "the model's distributions under the grammar")
    lines = [f"{p['source']}: {p['vignettes']} vignettes read {along}, {p['passes']} positions "
             f"read (top {p['top_k']}), {p['wall_s']} s; {view}", ""]
    for v in result.vignettes:
        r = v.reply
        lines.append(f"{v.vignette.key} {v.vignette.arm}: {', '.join(v.vignette.uses)}")
        for measure, name in (("threat", "threat_appraisal.label"),
                              ("coping", "coping_appraisal.label"), ("action", "decision")):
            f = r.field(name)
            mean = (f"  E[rank] {result.expected(v, measure):.2f}"
                    if measure != "action" else "")
            lost = (f"; unresolved {f.unresolved_mass:.3f}"
                    if f.unresolved_mass >= 0.0005 else "")
            written = (f"{len(f.accounts)} accounts wrote "
                       f"{', '.join(sorted({a.value for a in f.accounts}))}" if f.accounts
                       else f"greedy {f.path_value}")
            lines.append(f"  {measure:<7}{_dist(f.distribution())}{mean}  ({written}; "
                         f"forbidden {f.forbidden_mass:.3f}{lost})")
    lines += ["", "expected measure by level (label ranks from 0 = "
              f"{result.labels[0]}; share: probability of an action with the effect)"]
    for t in result.level_means():
        means = " / ".join(f"{lv['label']}: {lv['mean']:.3f}" for lv in t["levels"])
        lines.append(f"  {t['test']} ({t['measure']}, {t['expect']}): {means}")
    return "\n".join(lines)
