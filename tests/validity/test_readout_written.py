"""``benchmarks/bench_readout_written.py``: a readout's accounts against its own distributions."""

from __future__ import annotations

import json

import pytest

LABELS = ["VL", "L", "M", "H", "VH"]
LAW = {"VL": 0.5, "L": 0.5, "M": 0.0, "H": 0.0, "VH": 0.0}
ACTIONS = {"do_nothing": 0.99, "relocate": 0.01}


@pytest.fixture
def bench(load_benchmark):
    return load_benchmark("bench_readout_written")


def readout(writes: list[str]) -> dict:
    """Ten vignettes, one account per seed; seed k writes ``writes[k][v]`` at vignette v."""
    vignettes = []
    for v in range(10):
        label = {"field": "threat_appraisal.label", "distribution": LAW,
                 "accounts": [{"seed": k, "value": w[v], "distribution": LAW}
                              for k, w in enumerate(writes)]}
        action = {"field": "decision", "distribution": ACTIONS,
                  "accounts": [{"seed": k, "value": "do_nothing", "distribution": ACTIONS}
                               for k in range(len(writes))]}
        vignettes.append({"reply": {"fields": [label, action]}})
    return {"labels": LABELS, "vignettes": vignettes, "provenance": {"accounts": len(writes)}}


def rows(bench, data: dict) -> dict[str, dict]:
    return {r["measure"]: r for r in bench.compare(data)}


def test_a_readout_whose_accounts_write_another_law_is_found(bench):
    # expected mean rank 0.5; the seeds write "very low" 9, 10, 8 and 10 times of 10
    writes = [["VL"] * 9 + ["L"], ["VL"] * 10, ["VL"] * 8 + ["L"] * 2, ["VL"] * 10]
    rank = rows(bench, readout(writes))["mean rank"]
    assert rank["written"] == pytest.approx(0.075) and rank["expected"] == pytest.approx(0.5)
    assert rank["p"] < 0.01


def test_draws_that_move_together_by_seed_are_not_taken_for_a_wrong_readout(bench):
    """Three seeds write "very low" everywhere, one "low": the naive z says 3, the seeds 1."""
    writes = [["VL"] * 10, ["VL"] * 10, ["VL"] * 10, ["L"] * 10]
    rank = rows(bench, readout(writes))["mean rank"]
    assert rank["naive_z"] == pytest.approx(-0.25 / (0.5 / 40 ** 0.5))  # -3.16
    assert rank["t"] == pytest.approx(-1.0) and rank["p"] > 0.3


def test_a_value_expected_rarely_gets_no_t(bench):
    writes = [["VL"] * 9 + ["L"], ["VL"] * 10, ["VL"] * 8 + ["L"] * 2, ["VL"] * 10]
    measured = rows(bench, readout(writes))
    assert "t" not in measured["share relocate"]  # expected 0.4 times in 40
    assert measured["share do_nothing"]["written"] == 1.0


def test_the_script_prints_and_writes_its_rows(bench, tmp_path, capsys):
    path = tmp_path / "readout.json"
    path.write_text(json.dumps(readout([["VL"] * 10, ["L"] * 10])))
    out = tmp_path / "rows.json"
    assert bench.main([str(path), "--json", str(out)]) == 0
    assert "mean rank" in capsys.readouterr().out
    assert json.loads(out.read_text())["rows"][0]["accounts"] == 2
