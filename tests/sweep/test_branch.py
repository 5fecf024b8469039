"""``governed-broker branch``: policy arms forked from a finished run at year T.

The parents are real baseline runs (30 households x 6 years, floods likely in the SFHA-like
zone so that a buyout programme has owners to offer to before T) and the arms real runs in
worker processes; the shared history is checked here from the files themselves, not only by
the command's own check.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from governed_broker.analysis.loaders import load_sweep
from governed_broker.analysis.policy import BRANCH_FILE as REPORTED_BRANCH_FILE
from governed_broker.analysis.policy import paired_arm_differences
from governed_broker.analysis.report import write_report
from governed_broker.analysis.sensitivity import run_outcomes
from governed_broker.cli import main
from governed_broker.config import ConfigError, load_experiment
from governed_broker.runner import run_experiment
from governed_broker.sweep.api import run_sweep
from governed_broker.sweep.branch import BRANCH_FILE, check_arm_settings, parse_arm
from governed_broker.sweep.history import compare_decisions, compare_yearly_csv

REPO = Path(__file__).resolve().parents[2]
T = 4
#: The parent: experiments/baseline.yaml, small, with floods likely in zone high (30 % a year)
#: so that owners have been flooded before year T.
PARENT_SETTINGS = ["population.size=30", "years=6", "outputs.plots=false",
                   "outputs.progress=false", "hazard.zones.high.annual_probability=0.3"]
#: A buyout section (as in experiments/policy_buyout.yaml, open to owners flooded once).
BUYOUT = {"buyout": {"source": "test: experiments/policy_buyout.yaml with one flood",
                     "min_floods": 1, "substantial_damage_share": 0.3, "price_share": 1.0,
                     "annual_budget_usd": 2_000_000, "allocation": "by_need"}}


def branch(*argv: str) -> int:
    """``governed-broker branch ...`` in this process (its runs in worker processes)."""
    return main(["branch", *argv, "--no-progress"])


def rows_before(path: Path, year: int | None) -> list[str]:
    """The header and the rows of a yearly table for years before ``year`` (all: None)."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    return [lines[0]] + [line for line in lines[1:]
                         if year is None or int(line.split(",", 1)[0]) < year]


def year_rows(path: Path, year: int) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line for line in lines[1:] if int(line.split(",", 1)[0]) == year]


@pytest.fixture(scope="module")
def branched(tmp_path_factory) -> dict:
    """A baseline parent branched at T=4 into risk-based pricing and a buyout programme."""
    root = tmp_path_factory.mktemp("branch")
    parent = root / "status_quo"
    run_experiment(load_experiment(REPO / "experiments" / "baseline.yaml", PARENT_SETTINGS),
                   parent, progress=False)
    arm_file = root / "buyout_arm.yaml"
    arm_file.write_text(yaml.safe_dump(BUYOUT), encoding="utf-8")
    argv = [str(parent), "--from-year", str(T), "--arm", "risk=insurance.pricing=risk_based",
            "--arm", f"buyout=@{arm_file}"]
    code = branch(*argv)
    out = root / f"status_quo-branch-T{T}"
    index = pd.read_csv(out / "sweep_runs.csv") if out.is_dir() else None
    return {"root": root, "parent": parent, "out": out, "code": code, "argv": argv,
            "index": index}


def test_arms_share_years_before_t_byte_for_byte_and_differ_from_t(branched) -> None:
    parent, out, index = branched["parent"], branched["out"], branched["index"]
    assert branched["code"] == 0
    assert list(index["param.case"]) == ["status_quo", "risk", "buyout"]
    assert set(index["status"]) == {"done"} and set(index["seed"]) == {42}
    manifest = json.loads((parent / "manifest.json").read_text())
    runs = dict(zip(index["param.case"], index["run_id"], strict=True))
    # the reference arm is the parent's configuration: the same id, the same files in every year
    assert runs["status_quo"] == manifest["config_hash"][:12]
    for name in ("agents_yearly.csv", "model_yearly.csv"):
        assert (out / runs["status_quo"] / name).read_bytes() == (parent / name).read_bytes()
        for arm in ("risk", "buyout"):
            assert rows_before(out / runs[arm] / name, T) == rows_before(parent / name, T)
            assert len(rows_before(parent / name, T)) > 1  # years 1-3 have rows
    # ... and from year T the arms do what their policies say
    for arm in ("risk", "buyout"):
        model = out / runs[arm] / "model_yearly.csv"
        assert year_rows(model, T) != year_rows(parent / "model_yearly.csv", T)
    reference = pd.read_csv(parent / "model_yearly.csv").set_index("year")
    risk = pd.read_csv(out / runs["risk"] / "model_yearly.csv").set_index("year")
    buyout = pd.read_csv(out / runs["buyout"] / "model_yearly.csv").set_index("year")
    assert (risk.loc[:T - 1, "total_premiums_usd"]
            == reference.loc[:T - 1, "total_premiums_usd"]).all()
    assert risk.loc[T, "total_premiums_usd"] != reference.loc[T, "total_premiums_usd"]
    assert buyout.loc[:T - 1, "total_buyout_usd"].sum() == 0
    assert buyout.loc[T:, "total_buyout_usd"].sum() > 0 == reference["total_buyout_usd"].sum()


def test_the_branch_records_its_parent_and_the_check(branched) -> None:
    record = json.loads((branched["out"] / BRANCH_FILE).read_text())
    manifest = json.loads((branched["parent"] / "manifest.json").read_text())
    assert record["parent"]["path"] == str(branched["parent"])
    assert record["parent"]["runs"][0]["config_hash"] == manifest["config_hash"]
    assert record["parent"]["config_base_dir"] == str(REPO / "experiments")
    assert record["from_year"] == T and record["reference_arm"] == "status_quo"
    assert record["arms"] == {"risk": {"insurance.pricing": "risk_based"}, **{"buyout": BUYOUT}}
    assert record["verification"]["status"] == "passed"
    assert record["verification"]["runs_checked"] == 3
    assert REPORTED_BRANCH_FILE == BRANCH_FILE


def test_the_report_shows_the_paired_comparison_and_the_parent(branched) -> None:
    text = write_report(branched["out"]).read_text(encoding="utf-8")
    assert "Policy arms: paired differences against status_quo" in text
    assert f"Branched from the run <code>{branched['parent']}</code>" in text
    assert f"at year {T} of 6" in text and "History check: passed" in text
    diffs = paired_arm_differences(run_outcomes(load_sweep(branched["out"])), "status_quo")
    assert set(diffs["arm"]) == {"risk", "buyout"} and set(diffs["n_pairs"]) == {1}


def test_running_the_same_command_again_runs_nothing(branched, capsys) -> None:
    states = branched["out"] / "_sweep" / "state"
    before = {p.name: p.read_text() for p in states.iterdir()}
    capsys.readouterr()
    assert branch(*branched["argv"]) == 0
    assert "3 runs: 3 done" in capsys.readouterr().out
    assert {p.name: p.read_text() for p in states.iterdir()} == before
    # status and collect work on a branch directory as on any sweep
    (branched["out"] / "sweep_model_yearly.csv").unlink()
    assert main(["collect", str(branched["out"])]) == 0
    assert len(pd.read_csv(branched["out"] / "sweep_model_yearly.csv")) == 3 * 6
    assert main(["status", str(branched["out"])]) == 0
    assert "3 runs: 3 done, 0 running, 0 failed, 0 pending" in capsys.readouterr().out


def test_dry_run_prints_the_arms_and_writes_nothing(branched, capsys) -> None:
    out = branched["root"] / "dry"
    assert branch(str(branched["parent"]), "--from-year", "5", "--arm", "a=insurance.loading=1.3",
                  "--out", str(out), "--dry-run") == 0
    text = capsys.readouterr().out
    assert "a: from year 5" in text and "2 runs (2 distinct to run)" in text
    assert "NaN" not in text  # the reference arm sets no policy change: shown as "-"
    assert not out.exists()


@pytest.mark.parametrize(("argv", "message"), [
    (["--from-year", "4", "--arm", "risk"], "--arm 'risk': expected NAME=SETTING=VALUE"),
    (["--from-year", "4", "--arm", "risk=insurance.pricing"],
     "'insurance.pricing' is not SETTING=VALUE"),
    (["--from-year", "4", "--arm", "big=population.size=60"],
     "--arm 'big=population.size=60': 'population.size' is not a policy setting"),
    (["--from-year", "4", "--arm", "x=insurance.pricng=risk_based"],
     "'insurance.pricng' is not a setting of an experiment"),
    (["--from-year", "4", "--arm", "x=insurance.pricing=cheap"],
     "--arm 'x=insurance.pricing=cheap'"),
    (["--from-year", "1", "--arm", "x=insurance.loading=1.3"], "--from-year 1: must be 2 to 6"),
    (["--from-year", "7", "--arm", "x=insurance.loading=1.3"], "--from-year 7: must be 2 to 6"),
    (["--from-year", "4", "--arm", "x=insurance.loading=1.3", "--arm", "x=insurance.loading=1.4"],
     "the name 'x' is another arm's"),
    (["--from-year", "4", "--arm", "status_quo=insurance.loading=1.3"],
     "is the reference arm's"),
    (["--from-year", "4", "--arm", "x=insurance.loading=1.3,insurance.loading=1.4"],
     "'insurance.loading' is given twice"),
    (["--from-year", "4", "--arm", "x=insurance.loading=1.3", "--set", "seed=7"],
     "--set 'seed=7': a branch takes only the execution settings"),
])
def test_bad_arguments_exit_2_naming_the_flag_and_write_nothing(branched, capsys, argv,
                                                                message) -> None:
    before = sorted(p.name for p in branched["root"].iterdir())
    assert branch(str(branched["parent"]), *argv) == 2
    assert message in capsys.readouterr().err
    assert sorted(p.name for p in branched["root"].iterdir()) == before


def test_out_inside_the_parent_or_on_a_finished_run_is_refused(branched, capsys) -> None:
    arm = ["--from-year", "5", "--arm", "a=insurance.loading=1.3"]
    assert branch(str(branched["parent"]), *arm, "--out", str(branched["parent"] / "b")) == 2
    assert "inside the parent" in capsys.readouterr().err
    finished = branched["out"] / branched["index"]["run_id"][0]
    assert branch(str(branched["parent"]), *arm, "--out", str(finished)) == 2
    assert "is a finished run" in capsys.readouterr().err
    assert branch(str(branched["parent"]), *arm, "--out", str(branched["out"])) == 2
    assert f"holds the branch of {branched['parent']} at year {T}" in capsys.readouterr().err
    assert branch(str(branched["out"] / "_sweep"), *arm) == 2
    assert "not a finished governed_broker run" in capsys.readouterr().err


def _own_experiment(directory: Path, **settings) -> Path:
    """A copy of the test parent's experiment with its own damage table file.

    The table is a file beside it (a relative path), so that a test may edit it.
    """
    data = yaml.safe_load((REPO / "experiments" / "baseline.yaml").read_text(encoding="utf-8"))
    data.pop("extends", None)
    data["agent_types"] = str(REPO / "agent_types.yaml")
    shutil.copy((REPO / "experiments" / data["damage"]["table"]).resolve(),
                directory / "damage.yaml")
    data["damage"]["table"] = "damage.yaml"
    data["population"]["size"], data["years"] = 30, 6
    data["hazard"]["zones"]["high"]["annual_probability"] = 0.3
    data["outputs"] = {"plots": False, "progress": False}
    data.update(settings)
    path = directory / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_a_parent_whose_input_file_changed_is_refused(tmp_path, capsys) -> None:
    experiment = _own_experiment(tmp_path)
    run_experiment(load_experiment(experiment), tmp_path / "parent", progress=False)
    argv = [str(tmp_path / "parent"), "--from-year", "3", "--arm", "risk=insurance.loading=1.3"]
    assert branch(*argv, "--dry-run") == 0  # unchanged: it may branch
    capsys.readouterr()
    damage = tmp_path / "damage.yaml"
    damage.write_text(damage.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    assert branch(*argv) == 2
    err = capsys.readouterr().err
    assert "not the" in err and "it ran with" in err
    assert "modified after it started" in err and str(damage) in err
    assert "could not share the parent's history" in err
    assert not (tmp_path / "parent-branch-T3").exists()


def test_a_sweep_of_three_seeds_gives_three_pairs_per_arm(tmp_path) -> None:
    experiment = _own_experiment(tmp_path, name="reps", sweep={"replicates": 3})
    parent = run_sweep(experiment, out_dir=tmp_path / "reps", progress=False)
    assert parent.exit_code == 0
    assert branch(str(tmp_path / "reps"), "--from-year", str(T),
                  "--arm", "risk=insurance.pricing=risk_based") == 0
    out = tmp_path / f"reps-branch-T{T}"
    index = pd.read_csv(out / "sweep_runs.csv")
    assert list(index["param.case"]) == ["reps"] * 3 + ["risk"] * 3
    assert list(index["seed"]) == list(parent.index["seed"]) * 2
    assert list(index["run_id"][:3]) == list(parent.index["run_id"])  # the reference = parent
    diffs = paired_arm_differences(run_outcomes(load_sweep(out)), "reps")
    assert set(diffs["n_pairs"]) == {3} and set(diffs["arm"]) == {"risk"}
    assert diffs["ci_low"].notna().all()
    record = json.loads((out / BRANCH_FILE).read_text())
    assert record["parent"]["kind"] == "sweep" and len(record["parent"]["runs"]) == 3
    assert record["verification"] == {**record["verification"], "status": "passed",
                                      "runs_checked": 6}


SCRIPT = [{"pattern": ".", "choices": [
    {"weight": 1, "reply": {"threat_appraisal": {"label": "H", "reason": "scripted"},
                            "coping_appraisal": {"label": "M", "reason": "scripted"},
                            "decision": "buy_insurance", "reason": "scripted: insure"}},
    {"weight": 1, "reply": {"threat_appraisal": {"label": "L", "reason": "scripted"},
                            "coping_appraisal": {"label": "M", "reason": "scripted"},
                            "decision": "do_nothing", "reason": "scripted: wait"}}]}]


def test_llm_arms_take_shared_years_from_the_cache_and_their_decisions_are_checked(
        tmp_path, capsys) -> None:
    """A governed (scripted) parent.

    The arms' decisions of years 1-2 come from the response cache and equal the parent's apart from
    timings and cache flags; an edited parent decision is a history difference (exit 1) naming the
    arm, the file and the year.
    """
    (tmp_path / "script.yaml").write_text(yaml.safe_dump(SCRIPT), encoding="utf-8")
    experiment = _own_experiment(tmp_path, years=4, decision={"maker": "llm"})
    llm = (f"llm={{backend: scripted, script: {tmp_path / 'script.yaml'}, model: two-choices, "
           f"cache: {{path: {tmp_path / 'cache.sqlite'}}}}}")
    config = load_experiment(experiment, ["population.size=10", llm,
                                          f"governance.context.prompts_dir={REPO}/configs/prompts"])
    run_experiment(config, tmp_path / "parent", progress=False)
    argv = [str(tmp_path / "parent"), "--from-year", "3", "--arm",
            "risk=insurance.pricing=risk_based"]
    assert branch(*argv) == 0
    assert "decisions.jsonl record for record in 2" in capsys.readouterr().out
    index = pd.read_csv(tmp_path / "parent-branch-T3" / "sweep_runs.csv")
    risk = tmp_path / "parent-branch-T3" / index["run_id"][1] / "decisions.jsonl"
    records = [json.loads(line) for line in risk.read_text().splitlines()]
    assert {r["cache_hits"] > 0 for r in records if r["year"] < 3} == {True}
    assert {r["cache_hits"] for r in records if r["year"] >= 3} == {0}  # new prices, new calls

    decisions = tmp_path / "parent" / "decisions.jsonl"
    lines = decisions.read_text().splitlines(keepends=True)
    edited = json.loads(lines[12])
    assert edited["year"] == 2
    edited["reason"] = "edited after the run"
    lines[12] = json.dumps(edited) + "\n"
    decisions.write_text("".join(lines))
    assert branch(*argv) == 1
    out = capsys.readouterr().out
    assert "history check FAILED" in out
    assert "arm risk (seed 42" in out and "arm parent (seed 42" in out
    assert "decisions.jsonl: first differs from the parent's in year 2 (record 13 differs)" in out
    record = json.loads((tmp_path / "parent-branch-T3" / BRANCH_FILE).read_text())
    assert record["verification"]["status"] == "failed"


# ------------------------------------------------------------------------------------------
# Pieces
# ------------------------------------------------------------------------------------------


def test_arm_syntax(tmp_path) -> None:
    arm = parse_arm("a=insurance.pricing=risk_based, insurance.loading=1.3")
    assert arm.settings == {"insurance.pricing": "risk_based", "insurance.loading": 1.3}
    flow = parse_arm("b=buyout={source: s, min_floods: 2, price_share: 1.0},insurance.fee_usd=50")
    assert flow.settings == {"buyout": {"source": "s", "min_floods": 2, "price_share": 1.0},
                             "insurance.fee_usd": 50}
    (tmp_path / "arm.yaml").write_text("buyout: {source: s, min_floods: 2}\n")
    mixed = parse_arm(f"c=@{tmp_path / 'arm.yaml'},insurance.loading=1.2")
    assert mixed.settings == {"buyout": {"source": "s", "min_floods": 2},
                              "insurance.loading": 1.2}
    assert parse_arm("d=buyout=null").settings == {"buyout": None}
    (tmp_path / "list.yaml").write_text("- 1\n")
    for bad, message in [("=insurance.loading=1", "expected NAME="),
                         ("-x=insurance.loading=1", "arm name '-x'"),
                         ("x=insurance.loading=", "has no value"),
                         (f"x=@{tmp_path / 'list.yaml'}", "must hold a mapping"),
                         (f"x=@{tmp_path / 'missing.yaml'}", "file not found")]:
        with pytest.raises(ConfigError, match=message):
            parse_arm(bad)


def test_decision_records_differ_only_in_what_a_re_simulation_may_change(tmp_path) -> None:
    def record(year: int, agent: int, **changes) -> str:
        base = {"run_id": "x-1", "year": year, "agent_id": agent, "executed_action": "none",
                "latency_s": 0.5, "cache_hits": 0,
                "attempts": [{"attempt": 0, "raw": "{}", "latency_s": 0.2, "cached": False,
                              "llm": {"host": "a"}}]}
        return json.dumps({**base, **changes}) + "\n"

    parent, arm = tmp_path / "p.jsonl", tmp_path / "a.jsonl"
    parent.write_text(record(1, 1) + record(2, 1) + record(3, 1))
    volatile = {"run_id": "x-2", "latency_s": 9.0, "cache_hits": 1,
                "attempts": [{"attempt": 0, "raw": "{}", "latency_s": 0.0, "cached": True,
                              "llm": {"host": "b"}}]}
    arm.write_text(record(1, 1, **volatile) + record(2, 1, **volatile)
                   + record(3, 1, executed_action="insure"))
    assert compare_decisions(parent, arm, 3) is None
    assert str(compare_decisions(parent, arm, None)) == (
        "decisions.jsonl: first differs from the parent's in year 3 (record 3 differs)")
    arm.write_text(record(1, 1) + record(2, 1, executed_action="insure"))
    assert compare_decisions(parent, arm, 3).year == 2
    arm.write_text(record(1, 1))
    assert str(compare_decisions(parent, arm, 3)).endswith("(record 2 is only in the parent)")


def test_yearly_tables_compare_raw_records_with_quoted_line_breaks(tmp_path) -> None:
    parent, arm = tmp_path / "p.csv", tmp_path / "a.csv"
    text = 'year,zone,x\n1,"a\nb",1.0\n2,c,2.0\n3,c,3.0\n'
    parent.write_text(text)
    arm.write_text(text.replace("3.0", "3.5"))
    assert compare_yearly_csv(parent, arm, 3) is None
    assert compare_yearly_csv(parent, arm, None).year == 3
    arm.write_text(text.replace('"a\nb"', '"a\nB"'))
    assert compare_yearly_csv(parent, arm, 2).year == 1
    arm.write_text(text.replace("year,zone", "year,zone2"))
    assert compare_yearly_csv(parent, arm, 2).detail == "the header differs from the parent's"


def test_a_run_with_institutions_branches_with_its_institutions_history(tmp_path) -> None:
    parent = tmp_path / "inst"
    run_experiment(load_experiment(REPO / "experiments" / "institutions.yaml", [
        "population.size=30", "years=5", "outputs.plots=false", "outputs.progress=false",
        "hazard.zones.high.annual_probability=0.3"]), parent, progress=False)
    assert branch(str(parent), "--from-year", "3", "--arm",
                  "rich=institutions.government.appropriation_per_household_usd=5000") == 0
    out = tmp_path / "inst-branch-T3"
    index = pd.read_csv(out / "sweep_runs.csv")
    rich = out / index.loc[index["param.case"] == "rich", "run_id"].iloc[0]
    name = "institutions_yearly.csv"
    assert rows_before(rich / name, 3) == rows_before(parent / name, 3)
    assert year_rows(rich / name, 3) != year_rows(parent / name, 3)
    # a parent whose institutions' history the arm did not re-live is caught
    assert compare_yearly_csv(parent / name, rich / name, 4) is not None
    combined = pd.read_csv(out / "sweep_institutions_yearly.csv")
    assert sorted(combined["param.case"].unique()) == ["inst", "rich"]
    assert len(combined) == 2 * 5


@pytest.mark.parametrize("text", ["hunter2-secret-token:\n", "password: hunter2-secret\n",
                                  "github.com:\n  oauth_token: hunter2-secret\n",
                                  "insurance.loadng: 1.2\nhunter2-secret: x\n"])
def test_an_arm_file_that_is_any_file_is_refused_without_quoting_it(tmp_path, text) -> None:
    secret = tmp_path / "secret.yaml"
    secret.write_text(text)
    arm = f"x=@{secret}"
    with pytest.raises(ConfigError) as info:
        check_arm_settings(parse_arm(arm))
    message = str(info.value)
    assert "hunter2" not in message.replace(arm, "") and str(secret) in message
    if "loadng" in text:  # a near miss of a policy setting is still helped
        assert "did you mean 'insurance.loading'" in message


@pytest.mark.parametrize("name", ["CON", "nul", "com1.x", "arm."])
def test_arm_names_windows_cannot_hold_are_refused(name) -> None:
    with pytest.raises(ConfigError, match="Windows"):
        parse_arm(f"{name}=insurance.loading=1.2")
