"""Compare validity cards of configuration variants side by side (issue 13's variant table).

Usage: python benchmarks/validity_variants.py CARD.json [CARD.json ...]

Each card is a ``validity_card.json`` written by ``governed-broker validate`` (or a stored card
from the card directory). The table has one row per card: what was overridden (the
``--set`` settings other than the thread and concurrency counts, which are not part of the
card's key; the thread count is shown with the seconds per call, and docs/llm_backends.md says
how it can still change llama.cpp's replies), the card key, how many tests passed / failed /
could not be measured, the directional tests passed, a few headline statistics ("n/a" where a
test has no statistic; the card's note says why), and the cost of a decision in tokens
(hardware-independent) and in seconds per uncached LLM call on the machine that made the card's
last uncached calls.

Prints a Markdown table, so that the variant table in docs/validity.md is this script's output,
not hand-copied figures.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

#: Settings outside the card's key (how fast a card is made): not shown as a variant.
SPEED_ONLY = ("llm.threads", "llm.concurrency")
#: Headline statistics: (column title, test name).
HEADLINES = (
    ("threat~depth rho", "threat_rises_with_depth"),
    ("insure~premium rho", "insurance_falls_with_premium"),
    ("order TV", "action_order_invariance"),
    ("retest decision alpha", "retest_decision"),
    ("laundering", "governance_laundering"),
    ("contradiction", "reason_coherence"),
)


def _variant(card: dict[str, Any]) -> str:
    overrides = [o for o in card["configuration"].get("overrides", [])
                 if o.split("=", 1)[0] not in SPEED_ONLY]
    return ", ".join(overrides) or "(as configured)"


def _statistic(test: dict[str, Any]) -> str:
    value = test.get("statistic")
    return "n/a" if value is None else f"{value:.2f}"  # the card's note says why


def row(card: dict[str, Any]) -> list[str]:
    """One table row of a card (see the module docstring for the columns)."""
    tests = {t["name"]: t for t in card["tests"]}
    summary = card["summary"]
    directional = [t for t in card["tests"] if t["family"] == "directional"]
    calls = card["llm"]["stats"]["calls"]
    cache = card["llm"]["stats"]["cache"]
    decisions = card["battery"]["decisions"]
    misses = cache.get("misses", 0)
    per_call = (f"{calls['uncached_llm_seconds'] / misses:.1f} "
                f"({card['llm']['backend'].get('threads', '?')} threads)" if misses else "-")
    return [
        _variant(card),
        card["key"][:12],
        f"{summary['passed']}/{summary['failed']}/{summary['not_measurable']}",
        f"{sum(bool(t['passed']) for t in directional)} of {len(directional)}",
        *(_statistic(tests[name]) if name in tests else "-" for _, name in HEADLINES),
        f"{calls['calls'] / decisions:.2f}",
        f"{(calls['prompt_tokens'] + calls['completion_tokens']) / decisions:,.0f}",
        per_call,
    ]


HEADER = ["variant", "card", "pass/fail/n.a.", "directional", *(t for t, _ in HEADLINES),
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
