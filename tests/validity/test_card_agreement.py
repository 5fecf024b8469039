"""``benchmarks/bench_card_agreement.py``: a distribution card beside a sampled card."""

from __future__ import annotations

import json

import pytest

from governed_broker.validity.readout_card import validate_distribution
from governed_broker.validity.reference import reference_experiment
from governed_broker.validity.validate import validate


@pytest.fixture
def bench(load_benchmark):
    return load_benchmark("bench_card_agreement")


def test_the_rule_respondents_two_cards_agree(scripted_experiment, tmp_path, bench, capsys):
    experiment = reference_experiment(scripted_experiment(), "rule")
    sampled = validate(experiment, tmp_path / "sampled", progress=False, store=False)
    readout = validate_distribution(experiment, tmp_path / "readout", progress=False,
                                    store=False)
    out = tmp_path / "agreement.json"
    assert bench.main(["--sampled", str(sampled.out_dir / "validity_card.json"),
                       "--readout", str(readout.out_dir / "validity_card.json"),
                       "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    primaries = [t for t in result["tests"] if t["primary"]]
    assert primaries and all(t["sampled"] == t["readout"] == "pass" for t in primaries)
    depth = next(t for t in result["tests"] if t["test"] == "threat_rises_with_depth")
    # the rule answers one label per vignette: the sampled shares are the readout's law
    assert all(v["tv"] == 0.0 and v["difference"] == 0.0 for v in depth["vignettes"])
    assert "outcomes agree" in capsys.readouterr().out


def test_cards_of_two_configurations_are_refused(scripted_experiment, tmp_path, bench):
    rule = reference_experiment(scripted_experiment(), "rule")
    deaf = reference_experiment(scripted_experiment(), "deaf")
    sampled = validate(rule, tmp_path / "sampled", progress=False, store=False)
    readout = validate_distribution(deaf, tmp_path / "readout", progress=False, store=False)
    with pytest.raises(SystemExit, match="not of the sampled card's"):
        bench.main(["--sampled", str(sampled.out_dir / "validity_card.json"),
                    "--readout", str(readout.out_dir / "validity_card.json")])


def test_chi_square_pools_the_small_categories(bench):
    assert bench.chi_square_p({"a": 50, "b": 50}, {"a": 0.5, "b": 0.5}) == pytest.approx(1.0)
    assert bench.chi_square_p({"a": 90, "b": 10}, {"a": 0.5, "b": 0.5}) < 1e-10
    # c and d expect 1 each: pooled with each other, then into b
    assert bench.chi_square_p({"a": 50, "b": 48, "c": 1, "d": 1},
                              {"a": 0.5, "b": 0.48, "c": 0.01, "d": 0.01}) == pytest.approx(1.0)
    assert bench.chi_square_p({}, {"a": 1.0}) is None
