"""``benchmarks/validity_variants.py``: the variant table is read off the cards themselves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from governed_broker.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def variants(load_benchmark):
    return load_benchmark("validity_variants")


def test_one_row_per_card_with_its_own_figures(scripted_file, tmp_path, variants) -> None:
    cards = []
    for name, extra in (("a", []), ("b", ["--set", "llm.threads=3",
                                          "--set", "llm.temperature=0.3"])):
        out = tmp_path / name
        assert main(["validate", str(scripted_file), "--out", str(out), "--no-progress",
                     *extra]) == 1
        cards.append(json.loads((out / "validity_card.json").read_text()))
    lines = variants.table(cards).splitlines()
    assert len(lines) == 2 + len(cards)
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True))
            for line in lines[2:]]
    assert rows[0]["variant"] == "(as configured)"
    # the thread count is not part of the card's key: not shown as a variant
    assert rows[1]["variant"] == "llm.temperature=0.3"
    for row, card in zip(rows, cards, strict=True):
        s = card["summary"]
        assert row["card"] == card["key"][:12]
        assert row["pass/fail/inconclusive"] == \
            f"{s['passed']}/{s['failed']}/{s['inconclusive']}"
        assert row["verdict"] == "not passed"
        assert row["primary passed"] == "1 of 7"  # the order test: always do_nothing
        # the constant scripted model gives one threat label whatever the depth: rho 0
        depth = next(t for t in card["tests"] if t["name"] == "threat_rises_with_depth")
        assert row["threat~depth rho"] == \
            f"0.00 [{depth['lower']:.2f}, {depth['upper']:.2f}]"
        calls = card["llm"]["stats"]["calls"]["calls"]
        assert row["calls/decision"] == f"{calls / card['battery']['decisions']:.2f}"
    assert rows[0]["card"] != rows[1]["card"]


def test_a_card_of_another_instrument_is_refused(variants) -> None:
    old = json.loads((ROOT / "docs" / "validity_cards" / "instrument_1" /
                      "default.json").read_text())
    with pytest.raises(SystemExit, match="made with another instrument"):
        variants.table([old])
