"""``governed-broker validate``.

The table, the card files, the cache, the output directory, and ``governed-broker report`` on its
directory.
"""

from __future__ import annotations

import json
import sqlite3

from governed_broker.cli import main


def _validate(path, out, *extra: str) -> int:
    return main(["validate", str(path), "--out", str(out), "--no-progress", *extra])


def _model_calls(out) -> tuple[int, int]:
    """(calls, cache hits) in the call log of a validate directory."""
    with sqlite3.connect(out / "llm_calls.sqlite") as db:
        return db.execute("SELECT count(*), coalesce(sum(cached), 0) FROM calls").fetchone()


def test_validate_prints_the_card_and_writes_it(scripted_file, tmp_path, capsys) -> None:
    out = tmp_path / "v"
    # the constant scripted model does not respond to anything: the card fails, exit 1
    assert _validate(scripted_file, out) == 1
    printed = capsys.readouterr().out
    for name in ("threat_rises_with_depth", "action_order_invariance", "retest_decision",
                 "governance_laundering", "reason_coherence"):
        assert name in printed
    assert "NOT PASSED" in printed and "stored as" in printed
    card = json.loads((out / "validity_card.json").read_text())
    stored = json.loads((tmp_path / "cards" / f"{card['key']}.json").read_text())
    assert stored == card
    assert card["configuration"]["file"] == str(scripted_file)
    for test in card["tests"]:  # the explorer's contract: every test has these
        assert {"name", "family", "statistic", "threshold", "passed", "n"} <= set(test)


def test_second_validate_is_answered_from_the_cache(scripted_file, tmp_path) -> None:
    assert _validate(scripted_file, tmp_path / "a") == 1
    calls, hits = _model_calls(tmp_path / "a")
    card = json.loads((tmp_path / "a" / "validity_card.json").read_text())
    assert hits == 0 and calls >= card["battery"]["decisions"]  # plus re-asks
    assert _validate(scripted_file, tmp_path / "b") == 1
    again, hits_again = _model_calls(tmp_path / "b")
    assert (again, hits_again) == (calls, calls)
    first = json.loads((tmp_path / "a" / "validity_card.json").read_text())
    second = json.loads((tmp_path / "b" / "validity_card.json").read_text())
    assert first["tests"] == second["tests"] and first["key"] == second["key"]


def test_output_directory_rules(scripted_file, tmp_path, capsys) -> None:
    out = tmp_path / "v"
    assert _validate(scripted_file, out) == 1
    assert _validate(scripted_file, out) == 2
    assert "already exists" in capsys.readouterr().err
    assert _validate(scripted_file, out, "--overwrite") == 1
    (out / "notes.txt").write_text("mine")
    assert _validate(scripted_file, out, "--overwrite") == 2
    assert "notes.txt" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "mine"


def test_baseline_experiment_has_no_model_to_validate(experiments, tmp_path, capsys) -> None:
    path = experiments.write(experiments.data())
    assert _validate(path, tmp_path / "v") == 2
    assert "set decision.maker: llm" in capsys.readouterr().err


def test_quick_card_has_its_own_key(scripted_file, tmp_path) -> None:
    assert _validate(scripted_file, tmp_path / "full") == 1
    assert _validate(scripted_file, tmp_path / "quick", "--quick") == 1
    full = json.loads((tmp_path / "full" / "validity_card.json").read_text())
    quick = json.loads((tmp_path / "quick" / "validity_card.json").read_text())
    assert quick["quick"] is True and quick["key"] != full["key"]
    assert quick["battery"]["decisions"] < full["battery"]["decisions"]


def test_a_quick_card_never_passes(scripted_file, tmp_path, monkeypatch) -> None:
    # even when every primary test of the quick battery passed
    monkeypatch.setattr("governed_broker.validity.card.verdict",
                        lambda results: (True, "passed: all 7 primary tests passed"))
    assert _validate(scripted_file, tmp_path / "quick", "--quick") == 1
    card = json.loads((tmp_path / "quick" / "validity_card.json").read_text())
    assert card["passed"] is False
    assert card["verdict"].startswith("not passed: a quick card never passes")


def test_report_of_a_validate_directory(scripted_file, tmp_path) -> None:
    out = tmp_path / "v"
    _validate(scripted_file, out)
    assert main(["report", str(out)]) == 0
    page = (out / "report.html").read_text()
    families = {t["family"] for t in json.loads((out / "validity_card.json").read_text())["tests"]}
    assert "Validity card" in page and page.count("<img") == len(families) == 7  # one each
    assert "threat_rises_with_depth" in page


def test_budget_prints_the_plan_and_asks_nothing(scripted_file, tmp_path, capsys) -> None:
    out = tmp_path / "v"
    assert main(["validate", str(scripted_file), "--budget", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("battery: ") and "decisions" in printed
    assert "time: seconds (scripted backend: no model" in printed
    for name in ("threat_rises_with_depth", "action_order_invariance", "retest_decision"):
        assert name in printed
    assert not out.exists() and not (tmp_path / "responses.sqlite").exists()


def test_seeds_without_a_reference_is_a_configuration_error(scripted_file, capsys) -> None:
    assert main(["validate", str(scripted_file), "--seeds", "5"]) == 2
    assert "need --reference" in capsys.readouterr().err
