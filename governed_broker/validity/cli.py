"""``governed-broker validate EXPERIMENT.yaml [--set K=V ...] [--quick] [--out DIR]``.

Runs the behavioural-validity battery for the experiment's model, prompts and rules, prints
the card as a table and writes it (docs/validity.md). Exit codes: 0 when the card passes, 1
when a test failed (the card is written either way), 2 for a configuration error.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


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
    parser.add_argument("--out", type=Path, default=None,
                        help="output directory (default: outputs/<name>-validity)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing output directory of validate")
    parser.add_argument("--no-progress", action="store_true", help="no progress lines")
    parser.set_defaults(func=cmd_validate)
    return parser


def cmd_validate(args: argparse.Namespace) -> int:
    """Load the experiment, run the battery, print the card; 0 if it passes, else 1."""
    from governed_broker.config.resolved import load_resolved
    from governed_broker.validity.validate import validate

    result = validate(load_resolved(args.experiment, args.overrides), args.out, quick=args.quick,
                      overwrite=args.overwrite, progress=not args.no_progress,
                      source={"file": str(args.experiment), "overrides": list(args.overrides)})
    print(format_card(result.card))
    print(f"\nwrote {result.out_dir / 'validity_card.json'}; stored as {result.stored}")
    return 0 if result.card["passed"] else 1


def _num(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def format_card(card: dict[str, Any]) -> str:
    """The card as a plain-text table: one line per test, then the verdict and costs."""
    rows = [("test", "family", "statistic", "value", "threshold", "p", "n", "result")]
    for t in card["tests"]:
        verdict = {True: "pass", False: "FAIL", None: "n/a"}[t["passed"]]
        rows.append((t["name"], t["family"], t["statistic_name"], _num(t["statistic"]),
                     f"{t['comparison']} {t['threshold']:g}", _num(t["p_value"]), str(t["n"]),
                     verdict))
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
        f"card {card['key'][:12]}: {'PASSED' if card['passed'] else 'NOT PASSED'} "
        f"({s['passed']} passed, {s['failed']} failed, {s['not_measurable']} not measurable)"
        f"{' [quick: never opens a gate]' if card['quick'] else ''}",
        f"model {model['backend']}/{name}, "
        f"profile {cfg['profile']}; {card['battery'].get('decisions')} decisions, "
        f"{card['timing'].get('wall_s')} s wall, {card['timing'].get('cpu_s')} s CPU",
    ]
    notes = [f"  {t['name']}: {t['note']}" for t in card["tests"] if t.get("note")]
    if notes:
        lines += ["notes:", *notes]
    return "\n".join(lines)
