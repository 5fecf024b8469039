"""``sweep``, ``collect`` and ``status`` subcommands, with the real baseline runner."""

from __future__ import annotations

import argparse

import pandas as pd
import pytest

from governed_broker.cli import main as cli_main
from governed_broker.config import ConfigError
from governed_broker.sweep.cli import register


def run_cli(argv: list[str]) -> int:
    """Parse with a parser holding only the sweep subcommands, then dispatch like the CLI."""
    parser = argparse.ArgumentParser(prog="governed-broker")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"configuration error: {exc}")
        return 2


SWEEP = {"parameters": {"insurance.loading": [1.1, 1.3]}, "replicates": 2, "max_workers": 2}


def test_dry_run_prints_the_table_and_writes_nothing(experiment, tmp_path, capsys):
    path, out = experiment(SWEEP), tmp_path / "out"
    assert run_cli(["sweep", str(path), "--dry-run", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "param.insurance.loading" in text and "4 runs (4 distinct to run)" in text
    assert not out.exists()


def test_sweep_status_collect_with_real_runs(experiment, tmp_path, capsys):
    path, out = experiment(SWEEP), tmp_path / "out"
    assert run_cli(["sweep", str(path), "--out", str(out), "--no-progress"]) == 0
    assert "4 runs: 4 done, 0 running, 0 failed, 0 pending" in capsys.readouterr().out
    index = pd.read_csv(out / "sweep_runs.csv")
    for run_id in index["run_id"]:
        manifest = out / run_id / "manifest.json"
        assert manifest.is_file() and (out / run_id / "agents_yearly.csv").is_file()
    model = pd.read_csv(out / "sweep_model_yearly.csv")
    assert len(model) == 4 * 3 and model["run_id"].nunique() == 4
    agents = pd.read_parquet(out / "sweep_agents_yearly.parquet")
    own = pd.read_csv(out / index["run_id"][0] / "agents_yearly.csv")
    assert list(agents.columns[:4]) == ["run_id", "replicate", "seed", "param.insurance.loading"]
    assert list(agents.columns[4:]) == list(own.columns)
    assert (agents["run_id"] == index["run_id"][0]).sum() == len(own)
    # same seed, different insurance loading: different premiums; replicates differ by seed
    assert index["seed"].nunique() == 2

    (out / "sweep_model_yearly.csv").unlink()
    assert run_cli(["collect", str(out)]) == 0
    assert pd.read_csv(out / "sweep_model_yearly.csv").equals(model)
    assert run_cli(["status", str(out)]) == 0
    assert "4 done" in capsys.readouterr().out
    # the analysis package reads what the sweep wrote
    from governed_broker.analysis.loaders import load_sweep

    data = load_sweep(out)
    assert data.parameters == ["param.insurance.loading"] and len(data.runs) == 4


def test_failed_run_gives_exit_code_1(experiment, tmp_path, capsys):
    sweep = {"parameters": {"population.size": [20, -3]}}
    path, out = experiment(sweep), tmp_path / "out"
    assert run_cli(["sweep", str(path), "--out", str(out), "--no-progress"]) == 1
    text = capsys.readouterr().out
    assert "1 done" in text and "1 failed" in text and "population.size" in text
    assert run_cli(["status", str(out)]) == 1


def test_configuration_errors_exit_2(experiment, tmp_path, capsys):
    path = experiment(SWEEP)
    assert run_cli(["sweep", str(path), "--set", "sweep.replicates=0", "--dry-run"]) == 2
    assert "sweep.replicates" in capsys.readouterr().out
    assert run_cli(["status", str(tmp_path)]) == 2
    assert "not a sweep directory" in capsys.readouterr().out
    assert run_cli(["sweep", str(tmp_path / "missing.yaml")]) == 2


@pytest.mark.skipif("governed_broker.sweep.cli" not in
                    __import__("governed_broker.cli").cli.SUBCOMMAND_MODULES,
                    reason="governed_broker.cli does not register the sweep commands yet")
def test_wired_into_governed_broker_cli(experiment, tmp_path):
    path = experiment(SWEEP)
    assert cli_main(["sweep", str(path), "--dry-run", "--out", str(tmp_path / "o")]) == 0


def test_run_runs_the_sweep_of_a_yaml_with_a_sweep_block(experiment, tmp_path, capsys):
    """``python run.py X.yaml`` reads the YAML it is given: a sweep block runs the sweep."""
    path, out = experiment(SWEEP), tmp_path / "out"
    assert cli_main(["run", str(path), "--out", str(out), "--dry-run"]) == 0
    assert "4 runs (4 distinct to run) with executor local" in capsys.readouterr().out
    assert not out.exists()
    assert cli_main(["run", str(path), "--out", str(out), "--no-progress",
                     "--max-workers", "1"]) == 0
    assert "4 runs: 4 done" in capsys.readouterr().out
    assert len(pd.read_csv(out / "sweep_runs.csv")) == 4
    assert cli_main(["run", str(path), "--out", str(out), "--overwrite"]) == 2
    assert "a sweep resumes" in capsys.readouterr().err


def test_collect_and_status_fail_runs_whose_outputs_do_not_match_their_manifests(
        experiment, tmp_path, capsys):
    """N4: a truncated agents_yearly.csv was called done (4 of 210 rows collected, exit 0)."""
    path, out = experiment(SWEEP), tmp_path / "out"
    assert run_cli(["sweep", str(path), "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    run_ids = list(pd.read_csv(out / "sweep_runs.csv")["run_id"])
    damaged = run_ids[1:]
    tables = [out / run_id / "agents_yearly.csv" for run_id in damaged]
    data = tables[0].read_bytes()
    tables[0].write_bytes(data[: len(data) // 3])  # cut short
    data = tables[1].read_bytes()  # same size and rows, other bytes: the digest tells
    tables[1].write_bytes(data.replace(b",False,", b",True,,", 1)[: len(data)])
    tables[2].unlink()
    assert run_cli(["collect", str(out)]) == 1
    assert "collected 1 of 4" in capsys.readouterr().out
    index = pd.read_csv(out / "sweep_runs.csv").set_index("run_id")
    assert list(index.loc[damaged, "status"]) == ["failed"] * 3
    assert all("agents_yearly.csv" in e for e in index.loc[damaged, "error"])
    assert set(pd.read_parquet(out / "sweep_agents_yearly.parquet")["run_id"]) == {run_ids[0]}
    assert run_cli(["status", str(out)]) == 1
    status = capsys.readouterr().out
    assert all(f"failed {r}" in status for r in damaged)
    # the explorer lists them as failed too, and writes nothing into the sweep
    import shutil

    from governed_broker.explore.sweep_index import sweep_runs

    shutil.rmtree(out / "_sweep" / "verified")
    listed = sweep_runs(out).set_index("run_id")
    assert list(listed.loc[damaged, "status"]) == ["failed"] * 3
    assert not (out / "_sweep" / "verified").exists()
    # re-submitting does not run over what is there: it says what to do
    assert run_cli(["sweep", str(path), "--out", str(out), "--no-progress"]) == 1
    index = pd.read_csv(out / "sweep_runs.csv").set_index("run_id")
    assert all("move" in e for e in index.loc[damaged, "error"])
    assert all(t.parent.is_dir() for t in tables)


@pytest.mark.parametrize("out", ["/proc/governed-broker-sweep", "s" * 300])
def test_a_sweep_out_that_cannot_be_created_is_exit_2(experiment, tmp_path, capsys, out,
                                                       monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli_main(["sweep", str(experiment(SWEEP)), "--out", out, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "configuration error: --out" in err and "not expected" not in err
