"""``governed-broker validate EXPERIMENT.yaml [--set K=V ...] [--quick] [--out DIR]``.

Runs the behavioural-validity battery for the experiment's model, prompts and rules, prints its
budget before the first decision, then the card as a table, and writes it (docs/validity.md).
``--budget`` prints the budget and stops. ``--reference NAME`` answers the battery with a
reference respondent instead of the experiment's model (``llm.reference``; its card is written
to ``--out`` only, never stored for runs); with ``--seeds N`` (or several names, or ``all``) it
runs the battery N times per respondent, prints the reference table and, with
``--calibration FILE``, writes the battery's calibration. Exit codes: 0 when the card passes
(``--budget`` and the reference table: 0), 1 when it does not (the card is written either way),
2 for a configuration error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from governed_broker.llm.readout import ReadoutSettings
from governed_broker.validity.readout_cli import (
    DEFAULT_ACCOUNTS,
    add_accounts_option,
    add_view_option,
    reading_settings,
)


def register(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``validate`` to ``subparsers``."""
    parser = subparsers.add_parser(
        "validate", help="measure whether the model's households reason like households",
        description="Run the behavioural-validity battery (configs/validity/) for the "
        "experiment's model, prompts and rules; print and store its card.")
    parser.add_argument("experiment", type=Path, help="experiment YAML file")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a setting (repeatable), as for run")
    parser.add_argument("--quick", action="store_true",
                        help="fewer replicates: a smoke check whose card never opens a gate")
    parser.add_argument("--budget", action="store_true",
                        help="print the battery's decisions, calls, minutes and power; ask "
                        "nothing")
    parser.add_argument("--reference", metavar="NAME",
                        help="answer with a reference respondent instead of the model: deaf, "
                        "random, seed, rule, order:Q, noisy_rule:S, a comma list, or all")
    parser.add_argument("--seeds", type=int, default=1, metavar="N",
                        help="with --reference: run the battery with N battery seeds and print "
                        "how often each test passed (the reference table)")
    parser.add_argument("--calibration", type=Path, default=None, metavar="FILE",
                        help="with --reference: write the calibration (per test pass rates) "
                        "cards quote, e.g. configs/validity/calibration.json")
    parser.add_argument("--readout", choices=("sampled", "distribution"), default="sampled",
                        help="sampled: ask the battery's replies (default); distribution: read "
                        "each vignette's choice distributions once from the model's token "
                        "probabilities and judge the tests from them")
    parser.add_argument("--primary-only", action="store_true",
                        help="with --readout distribution: read only the primary tests' "
                        "vignettes")
    add_accounts_option(parser)
    add_view_option(parser)
    parser.add_argument("--distributions", type=Path, default=None, metavar="FILE",
                        help="with --readout distribution: judge a readout saved by "
                        "`governed-broker readout --json` for this configuration")
    parser.add_argument("--out", type=Path, default=None,
                        help="output directory (default: outputs/<name>-validity)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing output directory of validate")
    parser.add_argument("--no-progress", action="store_true", help="no progress lines")
    parser.set_defaults(func=cmd_validate)
    return parser


def cmd_validate(args: argparse.Namespace) -> int:
    """Load the experiment, run the battery, print the card; 0 if it passes, else 1."""
    from governed_broker.config.base import ConfigError
    from governed_broker.config.loader import load_experiment
    from governed_broker.config.resolved import resolve_experiment
    from governed_broker.validity.budget import budget_lines
    from governed_broker.validity.validate import prepare, validate

    experiment = resolve_experiment(load_experiment(args.experiment, args.overrides))
    source = {"file": str(args.experiment), "overrides": list(args.overrides)}
    if args.seeds < 1:
        raise ConfigError(f"--seeds must be at least 1, got {args.seeds}")
    if args.reference is None and (args.calibration is not None or args.seeds != 1):
        raise ConfigError("--seeds and --calibration need --reference (the respondents the "
                          "battery is calibrated on)")
    if args.readout == "distribution":
        return _distribution_card(experiment, source, args)
    if (args.primary_only or args.distributions is not None or args.accounts is not None
            or args.view is not None or args.whole_prompts):
        raise ConfigError("--primary-only, --accounts, --view, --whole-prompts and "
                          "--distributions need --readout distribution")
    if args.reference is not None:
        names = _reference_names(args.reference)
        if args.seeds > 1 or len(names) > 1 or args.calibration is not None:
            ignored = [flag for flag, on in (("--budget", args.budget), ("--quick", args.quick),
                                             ("--out", args.out is not None),
                                             ("--overwrite", args.overwrite)) if on]
            if ignored:
                raise ConfigError(f"{', '.join(ignored)}: not for the reference table (several "
                                  "respondents, --seeds above 1 or --calibration), which runs "
                                  "the whole battery once per respondent and seed and writes "
                                  "no output directory; ask one respondent for those")
            return _reference_table(experiment, names, args)
        from governed_broker.validity.reference import reference_experiment

        experiment = reference_experiment(experiment, names[0])
        source["reference"] = names[0]
        if args.out is None:
            slug = names[0].replace(":", "-")
            args.out = Path("outputs") / f"{experiment.config.name}-validity-reference-{slug}"
    if args.budget:
        prepared = prepare(experiment, args.quick)
        print("\n".join(budget_lines(prepared.plan, prepared.budget)))
        print(readout_budget_line(prepared.plan, ReadoutSettings(accounts=DEFAULT_ACCOUNTS)))
        return 0

    def announce(prepared: Any) -> None:
        print("\n".join(budget_lines(prepared.plan, prepared.budget)), flush=True)

    result = validate(experiment, args.out, quick=args.quick, overwrite=args.overwrite,
                      progress=not args.no_progress, source=source, announce=announce,
                      store=args.reference is None)
    print()
    print(format_card(result.card))
    where = f"; stored as {result.stored}" if result.stored else " (reference: not stored)"
    print(f"\nwrote {result.out_dir / 'validity_card.json'}{where}")
    return 0 if result.card["passed"] else 1


def readout_budget_line(plan: Any, settings: ReadoutSettings) -> str:
    """What ``--readout distribution`` with ``settings`` reads instead of sampled decisions."""
    from governed_broker.validity.readout import READ_ARMS, primary_vignettes

    accounts = settings.accounts
    read = [v for v in plan.vignettes.values() if v.arm in READ_ARMS]
    paths = (f"{accounts} sampled replies (up to the action)" if accounts
             else "one greedy reply")
    replies = len(read) * max(accounts, 1)
    prompts = len(read) if settings.prompt_reuse else replies
    return (f"readout budget (--readout distribution, --accounts {accounts}): {len(read)} "
            f"vignettes ({len(primary_vignettes(plan))} with --primary-only), {paths} and a "
            f"few one-token passes each: {replies} replies from {prompts} prompt evaluations "
            f"instead of {plan.decisions()} sampled decisions")


def _distribution_card(experiment: Any, source: dict[str, Any], args: argparse.Namespace
                       ) -> int:
    """``--readout distribution``: the card judged from the model's distributions."""
    from governed_broker.config.base import ConfigError
    from governed_broker.validity.budget import budget_lines
    from governed_broker.validity.readout_card import validate_distribution
    from governed_broker.validity.validate import prepare

    if args.quick or args.seeds != 1 or args.calibration is not None:
        raise ConfigError("--readout distribution reads the experiment's model once per "
                          "vignette: --quick, --seeds and --calibration do not apply")
    if args.reference is not None:
        from governed_broker.validity.reference import reference_experiment

        names = _reference_names(args.reference)
        if len(names) != 1:
            raise ConfigError("--readout distribution takes one reference respondent")
        experiment = reference_experiment(experiment, names[0])
        source["reference"] = names[0]
        if args.out is None:
            args.out = Path("outputs") / (f"{experiment.config.name}-validity-readout-"
                                          f"reference-{names[0].replace(':', '-')}")
    if args.distributions is not None and (args.view is not None or args.whole_prompts):
        raise ConfigError("--view, --whole-prompts: a saved readout (--distributions) is "
                          "judged as it was read")
    settings = reading_settings(args)
    prepared = prepare(experiment)
    print("\n".join(budget_lines(prepared.plan, prepared.budget)))
    print(readout_budget_line(prepared.plan, settings), flush=True)
    if args.budget:
        return 0
    source["readout"] = "distribution"
    result = validate_distribution(experiment, args.out, settings=settings,
                                   primary_only=args.primary_only,
                                   saved=args.distributions, overwrite=args.overwrite,
                                   progress=not args.no_progress, source=source,
                                   store=args.reference is None)
    print()
    print(format_card(result.card))
    where = (f"stored as {result.stored} (a distribution card: a run's gate reads sampled "
             "cards only)" if result.stored else "reference: not stored")
    print(f"\nwrote {result.out_dir / 'validity_card.json'}; {where}")
    return 0 if result.card["passed"] else 1


def _reference_names(text: str) -> list[str]:
    from governed_broker.config.base import ConfigError
    from governed_broker.llm.reference import check_name
    from governed_broker.validity.reference import RESPONDENTS

    names = list(RESPONDENTS) if text == "all" else [n.strip() for n in text.split(",")]
    try:
        return [check_name(n) for n in names]
    except ValueError as exc:
        raise ConfigError(f"--reference: {exc}") from None


def _reference_table(experiment: Any, names: list[str], args: argparse.Namespace) -> int:
    from governed_broker.run_dir import write_atomic
    from governed_broker.validity.reference import calibrate, calibration_json, table

    def progress(line: str) -> None:
        if not args.no_progress:
            print(line, file=sys.stderr, flush=True)

    calibration = calibrate(experiment, names, args.seeds, progress)
    print(table(calibration))
    if args.calibration is not None:
        command = (f"governed-broker validate {args.experiment} --reference "
                   f"{args.reference} --seeds {args.seeds} --calibration {args.calibration}")
        data = calibration_json(calibration, command)
        write_atomic(args.calibration, json.dumps(data, indent=2) + "\n")
        print(f"\nwrote {args.calibration}")
    return 0


def _num(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_card(card: dict[str, Any]) -> str:
    """The card as a plain-text table: one line per test, then the verdict and costs."""
    sampled = (card.get("readout") or {"kind": "sampled"})["kind"] == "sampled"
    # a sampled card's bounds are two one-sided 95 % bounds; a distribution card's are not
    rows = [("test", "", "statistic", "value", "90% interval" if sampled else "bounds", "needs",
             "p", "n", "result")]
    for t in card["tests"]:
        interval = ("-" if t["lower"] is None and t["upper"] is None else
                    f"[{_num(t['lower'], 2)}, {_num(t['upper'], 2)}]")
        p = t["p_adjusted"] if t["primary"] else t["p_value"]
        rows.append((t["name"], "P" if t["primary"] else "", t["statistic_name"],
                     _num(t["statistic"]), interval, f"{t['comparison']} {t['threshold']:g}",
                     _num(p), str(t["n"]), t["outcome"].replace("_", " ").upper()
                     if t["outcome"] == "fail" else t["outcome"].replace("_", " ")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    s, cfg = card["summary"], card["configuration"]
    model = cfg["model"]
    name = model.get("model") or model.get("model_path") or "script " + ",".join(
        sha[:12] for sha in (model.get("script_sha256") or {}).values())
    lines += [
        "",
        "P: primary test (the card passes when every one passes; p Holm-adjusted across them)."
        " The interval's bounds are one-sided 95 %; 'needs' is what the bound must clear.",
        f"card {card['key'][:12]}: {'PASSED' if card['passed'] else 'NOT PASSED'} - "
        f"{card['verdict']}{' [quick: never opens a gate]' if card['quick'] else ''}",
        f"{s['passed']} passed, {s['failed']} failed, {s['inconclusive']} inconclusive, "
        f"{s['not_informative']} not informative, {s['not_measurable']} not measurable",
        f"model {model['backend']}/{name}, "
        f"profile {cfg['profile']}; {card['battery'].get('decisions')} decisions, "
        f"{card['timing'].get('wall_s')} s wall, {card['timing'].get('cpu_s')} s CPU",
    ]
    readout = card.get("readout") or {"kind": "sampled"}
    if readout["kind"] == "distribution":
        accounts = readout.get("accounts") or 0
        lines[lines.index("") + 1] = (
            "P: primary test (the card passes when every one passes). Judged from the "
            "distributions, no p-value; the interval is how far the probability the readout "
            "did not read can move the value" + (
                f", widened by the Monte Carlo error of the {accounts} sampled accounts the "
                "coping label and the action were read over (bootstrap, one-sided 95 %, "
                "primary tests Bonferroni)." if accounts else
                "; the coping label and the action are read after the greedy account."))
        lines[-1] = (f"model {model['backend']}/{name}, profile {cfg['profile']}; judged from "
                     f"the distributions of {card['battery'].get('vignettes')} vignettes "
                     f"(read in {card['timing'].get('wall_s')} s), no sampled replies; "
                     + ("the distributions the run's sampler draws from"
                        if readout.get("view") == "sampler"
                        else "the model's distributions under the grammar (temperature 1)"))
    notes = [f"  {t['name']}: {t['note']}" for t in card["tests"] if t.get("note")]
    if notes:
        lines += ["notes:", *notes]
    return "\n".join(lines)
