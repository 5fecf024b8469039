"""The gate: runs find and record the card of their configuration.

``block`` refuses a run or sweep without a passing card (exit 2, nothing written); ``warn`` records
the warning.
"""

from __future__ import annotations

import hashlib
import json

import pytest
import validity_households as hh
import yaml

from governed_broker.cli import main
from governed_broker.validity.gate import check_gate
from governed_broker.validity.validate import validate


def _make_card(experiment, tmp_path, policy=hh.rational) -> dict:
    """A card for the experiment's configuration, made by a scripted household.

    The key is the configuration's, whatever backend answers.
    """
    return validate(experiment, tmp_path / "validity", backend=hh.backend(policy, "p"),
                    progress=False).card


def _run(path, out, *sets: str) -> int:
    args = ["run", str(path), "--out", str(out), "--no-progress"]
    for s in sets:
        args += ["--set", s]
    return main(args)


def test_block_without_a_card_refuses_and_writes_nothing(scripted_file, tmp_path,
                                                         capsys) -> None:
    out = tmp_path / "run"
    assert _run(scripted_file, out, "validity.gate=block") == 2
    err = capsys.readouterr().err
    assert "validity.gate is 'block'" in err and "no validity card" in err
    assert "governed-broker validate" in err
    assert not out.exists() and not (tmp_path / "run.partial").exists()


def test_block_with_a_failing_card_names_the_failed_tests(scripted_file, scripted_experiment,
                                                          tmp_path, capsys) -> None:
    card = _make_card(scripted_experiment("validity.gate=block"), tmp_path, hh.ignores_depth)
    assert card["passed"] is False
    assert _run(scripted_file, tmp_path / "run", "validity.gate=block") == 2
    err = capsys.readouterr().err
    assert "threat_rises_with_depth (inconclusive: spearman_rho 0" in err
    assert "bound > +0.20" in err


def test_block_with_a_passing_card_runs_and_records_it(scripted_file, scripted_experiment,
                                                       tmp_path) -> None:
    card = _make_card(scripted_experiment(), tmp_path)
    assert card["passed"] is True
    out = tmp_path / "run"
    assert _run(scripted_file, out, "validity.gate=block") == 0
    manifest = json.loads((out / "manifest.json").read_text())
    copied = (out / "validity_card.json").read_bytes()
    assert manifest["validity"]["status"] == "passed"
    assert manifest["validity"]["key"] == card["key"]
    assert manifest["validity"]["card_sha256"] == hashlib.sha256(copied).hexdigest()
    assert json.loads(copied) == card


def test_the_card_is_shared_by_seeds_but_not_by_prompts_or_rules(scripted_experiment,
                                                                 tmp_path) -> None:
    _make_card(scripted_experiment(), tmp_path)
    assert check_gate(scripted_experiment("seed=7")).record["status"] == "passed"
    assert check_gate(scripted_experiment("population.size=9")).record["status"] == "passed"
    for other in ("governance.profile=relaxed", "llm.temperature=0.2",
                  "insurance.loading=1.5", "memory.engine=none"):
        assert check_gate(scripted_experiment(other)).record["status"] == "missing", other


def test_warn_records_the_warning_in_the_manifest_and_report(scripted_file, tmp_path,
                                                            capsys) -> None:
    out = tmp_path / "run"
    assert _run(scripted_file, out, "validity.gate=warn") == 0
    assert "warning: there is no validity card" in capsys.readouterr().err
    record = json.loads((out / "manifest.json").read_text())["validity"]
    assert record["status"] == "missing" and "no validity card" in record["warning"]
    assert main(["report", str(out)]) == 0
    html = (out / "report.html").read_text()
    assert "Behavioural validity" in html and "no validity card" in html


def test_gate_off_records_a_card_when_there_is_one(scripted_file, scripted_experiment,
                                                   tmp_path) -> None:
    out = tmp_path / "run"
    assert _run(scripted_file, out) == 0
    assert json.loads((out / "manifest.json").read_text())["validity"] == \
        {"gate": "off", "status": "missing", "key": None}
    card = _make_card(scripted_experiment(), tmp_path)
    assert _run(scripted_file, out, "validity.gate=off") == 2  # exists: needs --overwrite
    assert main(["run", str(scripted_file), "--out", str(out), "--overwrite",
                 "--no-progress"]) == 0
    record = json.loads((out / "manifest.json").read_text())["validity"]
    assert record["status"] == "passed" and record["key"] == card["key"]
    assert (out / "validity_card.json").is_file()


def test_baseline_runs_have_nothing_to_validate(experiments, tmp_path) -> None:
    path = experiments.write(experiments.data())
    out = tmp_path / "base"
    assert _run(path, out, "validity.gate=block", "population.size=5", "years=1") == 0
    record = json.loads((out / "manifest.json").read_text())["validity"]
    assert record["status"] == "not_applicable"


def test_sweep_with_block_refuses_before_writing(scripted_file, tmp_path, capsys) -> None:
    data = yaml.safe_load(scripted_file.read_text())
    data["sweep"] = {"replicates": 2, "executor": "local", "max_workers": 1}
    data["validity"]["gate"] = "block"
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "sweep_out"
    assert main(["sweep", str(path), "--out", str(out), "--no-progress"]) == 2
    assert "validity.gate is 'block'" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("gate", ["warn", "block"])
def test_unreadable_battery_stops_a_gated_run(scripted_file, tmp_path, gate, capsys) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "vignettes.yaml").write_text("source: x\n")
    (broken / "tests.yaml").write_text("source: x\n")
    assert _run(scripted_file, tmp_path / "run", f"validity.gate={gate}",
                f"validity.battery_dir={broken}") == 2
    assert "cannot be looked up" in capsys.readouterr().err


def test_a_template_edit_needs_a_new_card(scripted_experiment, tmp_path) -> None:
    experiment = scripted_experiment()
    _make_card(experiment, tmp_path)
    source = experiment.config.resolve_path(experiment.config.governance.context.prompts_dir)
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    text = (source / "household.yaml").read_text()
    (prompts / "household.yaml").write_text(text.replace("Your savings are now",
                                                         "Your savings amount to"))
    edited = scripted_experiment(f"governance.context.prompts_dir={prompts}")
    assert check_gate(edited).record["status"] == "missing"


def test_a_broken_stored_card_is_never_used(scripted_file, scripted_experiment, tmp_path,
                                            capsys) -> None:
    card = _make_card(scripted_experiment(), tmp_path)
    (tmp_path / "cards" / f"{card['key']}.json").write_text("{not json")
    assert _run(scripted_file, tmp_path / "run", "validity.gate=block") == 2
    assert "not a readable validity card" in capsys.readouterr().err
    record = check_gate(scripted_experiment()).record  # gate off: recorded, not fatal
    assert record["status"] == "unavailable" and "not a readable" in record["note"]


def test_with_the_gate_off_a_failing_lookup_never_stops_a_run(scripted_experiment, tmp_path,
                                                              monkeypatch) -> None:
    from governed_broker.validity import gate

    _make_card(scripted_experiment(), tmp_path)  # a stored card: the key is computed

    def broken(experiment):
        raise RuntimeError("lookup broke")

    monkeypatch.setattr(gate, "card_of", broken)
    record = check_gate(scripted_experiment()).record
    assert record == {"gate": "off", "status": "unavailable",
                      "note": "RuntimeError: lookup broke"}
    with pytest.raises(RuntimeError):
        check_gate(scripted_experiment("validity.gate=warn"))
