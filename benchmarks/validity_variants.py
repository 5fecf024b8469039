"""Compare validity cards of configuration variants side by side (issue 13's variant table).

Usage: python benchmarks/validity_variants.py CARD.json [CARD.json ...]

Each card is a ``validity_card.json`` written by ``governed-broker validate`` (or a stored card
from the card directory), of the current card format (a card of another format was made with
another instrument and is refused, never shown beside these). The table has one row per card:
what was overridden (the ``--set`` settings other than the thread and concurrency counts and the
response cache and cards directories, which are not part of the card's key; the thread count is
shown with the seconds per call, and docs/llm_backends.md says how it can still change
llama.cpp's replies), the card key, its
verdict, how many primary tests passed, how many tests passed / failed / were inconclusive, a
few headline statistics with their 90 % interval ("n/a" where a test has no statistic; the
card's note says why), and the cost of a decision in tokens (hardware-independent) and in
seconds per uncached LLM call on the machine that made the card's last uncached calls.

Prints a Markdown table, so that the variant table in docs/validity.md is this script's output,
not hand-copied figures.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from governed_broker.validity.store import CARD_FORMAT

#: Settings outside the card's key (how fast a card is made, where replies and cards are kept):
#: not shown as a variant.
NOT_IN_KEY = ("llm.threads", "llm.concurrency", "llm.cache", "validity.cards_dir")
#: Headline statistics: (column title, test name).
HEADLINES = (
    ("threat~depth rho", "threat_rises_with_depth"),
    ("insure~premium rho", "insurance_falls_with_premium"),
    ("order TV", "action_order_invariance"),
    ("retest threat ICC", "retest_threat"),
    ("laundering", "governance_laundering"),
    ("contradiction", "reason_coherence"),
)


def _variant(card: dict[str, Any]) -> str:
    overrides = [o for o in card["configuration"].get("overrides", [])
                 if not o.split("=", 1)[0].startswith(NOT_IN_KEY)]
    return ", ".join(overrides) or "(as configured)"


def _statistic(test: dict[str, Any]) -> str:
    value = test.get("statistic")
    if value is None:
        return "n/a"  # the card's note says why
    if test.get("lower") is None or test.get("upper") is None:
        return f"{value:.2f}"
    return f"{value:.2f} [{test['lower']:.2f}, {test['upper']:.2f}]"


def row(card: dict[str, Any]) -> list[str]:
    """One table row of a card (see the module docstring for the columns)."""
    if card.get("card_format") != CARD_FORMAT:
        raise SystemExit(f"card {card.get('key', '?')[:12]} has card_format "
                         f"{card.get('card_format')}, not {CARD_FORMAT}: it was made with "
                         "another instrument and is not comparable")
    tests = {t["name"]: t for t in card["tests"]}
    summary = card["summary"]
    primary = [t for t in card["tests"] if t["primary"]]
    calls = card["llm"]["stats"]["calls"]
    cache = card["llm"]["stats"]["cache"]
    decisions = card["battery"]["decisions"]
    misses = cache.get("misses", 0)
    per_call = (f"{calls['uncached_llm_seconds'] / misses:.1f} "
                f"({card['llm']['backend'].get('threads', '?')} threads)" if misses else "-")
    return [
        _variant(card),
        card["key"][:12],
        "passed" if card["passed"] else "not passed",
        f"{sum(t['outcome'] == 'pass' for t in primary)} of {len(primary)}",
        f"{summary['passed']}/{summary['failed']}/{summary['inconclusive']}",
        *(_statistic(tests[name]) if name in tests else "-" for _, name in HEADLINES),
        f"{calls['calls'] / decisions:.2f}",
        f"{(calls['prompt_tokens'] + calls['completion_tokens']) / decisions:,.0f}",
        per_call,
    ]


HEADER = ["variant", "card", "verdict", "primary passed", "pass/fail/inconclusive",
          *(t for t, _ in HEADLINES),
          "calls/decision", "tokens/decision", "s/uncached call"]


def table(cards: list[dict[str, Any]]) -> str:
    """The Markdown table of ``cards``, in the order given."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row(card)) + " |" for card in cards]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cards", nargs="+", type=Path, help="validity_card.json files")
    args = parser.parse_args()
    print(table([json.loads(path.read_text(encoding="utf-8")) for path in args.cards]))


if __name__ == "__main__":
    main()
