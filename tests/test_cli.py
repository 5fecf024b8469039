"""The command line, in process: exit codes, messages, nothing written on bad input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from governed_broker.cli import main


def run_cli(args: list[str]) -> int:
    return main(args)


def test_run_succeeds(experiments, tmp_path, capsys) -> None:
    path = experiments.write(experiments.data())
    code = run_cli(["run", str(path), "--out", str(tmp_path / "out"), "--set", "years=3"])
    assert code == 0 and (tmp_path / "out" / "agents_yearly.csv").is_file()
    assert "wrote" in capsys.readouterr().out


def _bad_yaml_text(experiments) -> Path:
    return experiments.write("name: x\nseed: [1, 2\nyears: 3\n")


def _edit(experiments, edit) -> Path:
    data = experiments.data()
    edit(data)
    return experiments.write(data)


BAD_CONFIGS = {
    "malformed_yaml": (lambda e: _bad_yaml_text(e), [], "malformed YAML (line"),
    "not_a_mapping": (lambda e: e.write("- 1\n- 2\n"), [], "expected a mapping"),
    "missing_file": (lambda e: e.tmp_path / "nope.yaml", [], "file not found"),
    "wrong_type": (lambda e: _edit(e, lambda d: d.update(years="ten")), [], "field 'years'"),
    "negative_count": (lambda e: _edit(e, lambda d: d["population"].update(size=-3)), [],
                       "population.size"),
    "unknown_key": (lambda e: _edit(e, lambda d: d.update(yeers=3)), [], "field 'yeers'"),
    "unknown_nested_key": (lambda e: _edit(e, lambda d: d["hazard"].update(depth=1)), [],
                           "hazard.depth"),
    "missing_required": (lambda e: _edit(e, lambda d: d.pop("insurance")), [],
                         "field 'insurance': required"),
    "missing_damage_table": (lambda e: _edit(e, lambda d: d["damage"].update(table="x.yaml")),
                             [], "damage.table"),
    "missing_agent_types": (lambda e: _edit(e, lambda d: d.update(agent_types="none.yaml")), [],
                            "agent_types"),
    "missing_population_csv": (
        lambda e: _edit(e, lambda d: d.update(population={"source": "s", "file": "p.csv"})),
        [], "population.file"),
    "probability_above_one": (
        lambda e: _edit(e, lambda d: d["hazard"]["zones"]["high"].update(annual_probability=2)),
        [], "hazard.zones.high.annual_probability"),
    "zone_shares_not_one": (
        lambda e: _edit(e, lambda d: d["population"]["generate"]["zone_shares"].update(high=0.9)),
        [], "zone_shares must sum to 1"),
    "missing_source": (lambda e: _edit(e, lambda d: d["insurance"].pop("source")), [],
                       "insurance.source"),
    "bad_override_syntax": (lambda e: e.write(e.data()), ["years"], "KEY.PATH=VALUE"),
    "unknown_override": (lambda e: e.write(e.data()), ["hazard.kind=x"], "hazard.kind"),
    "bad_override_value": (lambda e: e.write(e.data()), ["seed=-1"], "field 'seed'"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_config_exits_2_with_message_and_writes_nothing(case, experiments, tmp_path,
                                                             capsys) -> None:
    make, overrides, needle = BAD_CONFIGS[case]
    path = make(experiments)
    out = tmp_path / "out"
    args = ["run", str(path), "--out", str(out)]
    for o in overrides:
        args += ["--set", o]
    code = run_cli(args)
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err, err
    assert "Traceback" not in err and err.startswith("configuration error:")
    if case not in ("bad_override_syntax",):
        assert str(path) in err or str(path.name) in err
    assert not out.exists() and not (tmp_path / "out.partial").exists()


def test_existing_output_is_exit_2(experiments, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    code = run_cli(["run", str(experiments.write(experiments.data())), "--out", str(out)])
    assert code == 2 and "--overwrite" in capsys.readouterr().err


def test_runtime_failure_is_exit_1(experiments, tmp_path, monkeypatch, capsys) -> None:
    import governed_broker.runner as runner

    def explode(experiment, run_dir):
        raise RuntimeError("no backend")

    monkeypatch.setattr(runner, "build_decision_maker", explode)
    out = tmp_path / "out"
    code = run_cli(["run", str(experiments.write(experiments.data())), "--out", str(out)])
    assert code == 1 and "no backend" in capsys.readouterr().err and not out.exists()


def test_config_error_from_the_decision_maker_leaves_nothing(experiments, tmp_path,
                                                            monkeypatch, capsys) -> None:
    import governed_broker.runner as runner
    from governed_broker.config import ConfigError

    def refuse(experiment, run_dir):
        raise ConfigError("llm.model: unknown model 'x'")

    monkeypatch.setattr(runner, "build_decision_maker", refuse)
    out = tmp_path / "out"
    code = run_cli(["run", str(experiments.write(experiments.data())), "--out", str(out)])
    assert code == 2 and "unknown model" in capsys.readouterr().err
    assert not out.exists() and not (tmp_path / "out.partial").exists()


def test_run_py_is_a_thin_wrapper(repo_root, experiments, tmp_path) -> None:
    path = experiments.write(experiments.data())
    proc = subprocess.run(
        [sys.executable, str(repo_root / "run.py"), str(path), "--out", str(tmp_path / "o"),
         "--set", "years=2", "--no-progress"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    bad = subprocess.run([sys.executable, str(repo_root / "run.py"), str(tmp_path / "nope.yaml")],
                         capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_sweep_options_on_a_single_run_are_refused(experiments, capsys) -> None:
    path = experiments.write(experiments.data())
    assert run_cli(["run", str(path), "--executor", "slurm"]) == 2
    assert "has no 'sweep:' block" in capsys.readouterr().err


def test_dry_run_of_a_single_run_runs_nothing(experiments, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    assert run_cli(["run", str(experiments.write(experiments.data())), "--out", str(out),
                    "--dry-run"]) == 0
    assert "nothing was run" in capsys.readouterr().out and not out.exists()


def test_run_py_dry_run_of_the_ablation_sweep_prints_its_plan(repo_root, tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, str(repo_root / "run.py"), str(repo_root / "experiments" /
         "ablation_sweep.yaml"), "--dry-run", "--out", str(tmp_path / "s")],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "9 runs (9 distinct to run) with executor local" in proc.stdout
    assert not (tmp_path / "s").exists()


def _fail_with(monkeypatch, exc: BaseException) -> None:
    import governed_broker.runner as runner

    def explode(experiment, run_dir):
        raise exc

    monkeypatch.setattr(runner, "build_decision_maker", explode)


EXPECTED_FAILURES = {
    "missing_backend": (lambda: __import__("governed_broker.llm.base", fromlist=["x"]).LLMError(
        "the embedded backend needs the xllamacpp package: pip install ..."),
        "error: the embedded backend needs the xllamacpp package"),
    "unreachable_server": (lambda: __import__(
        "governed_broker.llm.base", fromlist=["x"]).LLMTransportError(
        "cannot reach Ollama at http://127.0.0.1:9"), "error: cannot reach Ollama"),
    "disk_full": (lambda: OSError(28, "No space left on device", "/data/out"),
                  "error: disk full: /data/out (No space left on device)"),
}


@pytest.mark.parametrize("case", list(EXPECTED_FAILURES))
def test_expected_failures_are_one_line_and_debug_adds_the_traceback(
        case, experiments, tmp_path, monkeypatch, capsys) -> None:
    make, message = EXPECTED_FAILURES[case]
    _fail_with(monkeypatch, make())
    path = str(experiments.write(experiments.data()))
    assert run_cli(["run", path, "--out", str(tmp_path / "a")]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and "--debug" in err
    assert run_cli(["run", path, "--out", str(tmp_path / "b"), "--debug"]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback (most recent call last)" in err


def test_an_unexpected_failure_shows_its_traceback(experiments, tmp_path, monkeypatch,
                                                   capsys) -> None:
    _fail_with(monkeypatch, ZeroDivisionError("division by zero"))
    assert run_cli(["run", str(experiments.write(experiments.data())), "--out",
                    str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and "not expected" in err


def test_explore_without_its_extra_fails_before_running(experiments, tmp_path, monkeypatch,
                                                        capsys) -> None:
    from governed_broker.explore import server

    def missing():
        raise server.ExplorerError("the explorer needs Solara, which is not installed: pip ...")

    monkeypatch.setattr(server, "check_dependencies", missing)
    out = tmp_path / "out"
    code = run_cli(["run", str(experiments.write(experiments.data())), "--out", str(out),
                    "--explore"])
    err = capsys.readouterr().err
    assert code == 1 and "needs Solara" in err and "Traceback" not in err
    assert not out.exists() and not (tmp_path / "out.partial").exists()
    assert run_cli(["explore", str(tmp_path / "nowhere")]) == 1  # checked first, same message


def test_a_reader_that_leaves_early_ends_the_command_quietly(repo_root) -> None:
    """``governed-broker ... | head -1``: no BrokenPipeError, no "unexpected failure".

    The reader's end of the pipe is closed before the command writes anything, so its first
    write finds the reader gone (reading one line first and then closing raced with the
    command). Standard output is block-buffered, as for a user without PYTHONUNBUFFERED: the
    output is then written when the command ends.
    """
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has left
    proc = subprocess.Popen(
        [sys.executable, "-m", "governed_broker.cli", "validate",
         str(repo_root / "experiments" / "demo.yaml"), "--budget"],
        stdout=write_end, stderr=subprocess.PIPE, cwd=repo_root,
        env={k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"})  # buffered
    os.close(write_end)
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert "Error" not in err and "unexpected" not in err, err
    reader = subprocess.run(  # a reader that stays gets the whole budget
        [sys.executable, "-m", "governed_broker.cli", "validate",
         str(repo_root / "experiments" / "demo.yaml"), "--budget"],
        capture_output=True, cwd=repo_root, timeout=60)
    assert reader.returncode == 0 and reader.stdout.startswith(b"battery:")
