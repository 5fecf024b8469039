"""The shipped battery on the reference respondents whose truth is known.

The deaf, random and seed-driven ones pass no test of a response to the facts and never the card;
the order-follower fails the order test; the rule passes the card. Each respondent's card is made
once for the module through the real battery, broker and rules (``validate --reference``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from governed_broker.cli import main
from governed_broker.config.loader import load_experiment
from governed_broker.config.resolved import resolve_experiment
from governed_broker.validity.reference import RESPONSIVENESS, reference_experiment
from governed_broker.validity.validate import validate

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cards(tmp_path_factory):
    """The card of each reference respondent on experiments/demo.yaml's world.

    Each is made on first use.
    """
    root = tmp_path_factory.mktemp("reference")
    demo = resolve_experiment(load_experiment(REPO / "experiments" / "demo.yaml",
                                              [f"validity.cards_dir={root / 'cards'}"]))
    made: dict[str, dict] = {}

    def card(name: str) -> dict:
        if name not in made:
            result = validate(reference_experiment(demo, name),
                              root / name.replace(":", "-"), progress=False, store=False)
            made[name] = result.card
        return made[name]

    return card


@pytest.mark.parametrize("name", ["deaf", "random", "seed"])
def test_respondents_that_do_not_respond_pass_no_responsiveness_test(cards, name) -> None:
    card = cards(name)
    assert card["configuration"]["model"]["backend"] == "reference"
    responsive = [t for t in card["tests"] if t["family"] in RESPONSIVENESS]
    assert len(responsive) == 9
    passed = [t["name"] for t in responsive if t["outcome"] == "pass"]
    assert passed == [], f"{name} passed {passed}"
    assert card["passed"] is False


def test_the_deaf_respondent_fails_what_it_cannot_show(cards) -> None:
    tests = {t["name"]: t for t in cards("deaf")["tests"]}
    # one answer to every vignette: rho taken as 0, and 105 replies exclude 0.2
    depth = tests["threat_rises_with_depth"]
    assert depth["statistic"] == 0.0 and depth["outcome"] == "fail"
    assert tests["retest_threat"]["outcome"] == "fail"
    # a constant answer is perfectly invariant: invariance is necessary, not sufficient
    assert tests["action_order_invariance"]["outcome"] == "pass"


def test_the_order_follower_fails_the_order_test(cards) -> None:
    card = cards("order:0.45")
    order = next(t for t in card["tests"] if t["name"] == "action_order_invariance")
    assert order["outcome"] == "fail" and order["lower"] > 0.25
    assert card["passed"] is False
    assert "action_order_invariance (fail)" in card["verdict"]


def test_the_rule_passes_the_card_and_every_test(cards) -> None:
    card = cards("rule")
    assert card["passed"] is True, card["verdict"]
    assert {t["name"]: t["outcome"] for t in card["tests"] if t["outcome"] != "pass"} == {}
    # the shipped calibration belongs to this battery: every test quotes it
    assert card["calibration"]["status"] == "current"
    assert all(t["calibration"]["pass_rate"]["rule"] == 1.0 for t in card["tests"])


def test_validate_reference_prints_the_budget_first_and_stores_nothing(tmp_path, capsys) -> None:
    out = tmp_path / "card"
    code = main(["validate", str(REPO / "experiments" / "demo.yaml"), "--reference", "deaf",
                 "--out", str(out), "--no-progress",
                 "--set", f"validity.cards_dir={tmp_path / 'cards'}"])
    printed = capsys.readouterr().out
    assert code == 1
    assert printed.index("battery: 950 decisions") < printed.index("90% interval")
    assert "reference: not stored" in printed and not (tmp_path / "cards").exists()
    card = json.loads((out / "validity_card.json").read_text())
    assert card["configuration"]["reference"] == "deaf"
    assert card["battery"]["budget"]["decisions"] == card["battery"]["decisions"] == 950


def test_unknown_reference_respondent_is_a_configuration_error(tmp_path, capsys) -> None:
    assert main(["validate", str(REPO / "experiments" / "demo.yaml"), "--reference",
                 "psychic", "--budget"]) == 2
    assert "unknown reference respondent 'psychic'" in capsys.readouterr().err
