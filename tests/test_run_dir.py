"""Run directories: confinement, what --overwrite may delete, one writer, resumable finishing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import governed_broker.runner as runner_mod
from governed_broker.cli import main
from governed_broker.config.base import ConfigError
from governed_broker.run_dir import (
    RunLock,
    check_out_dir,
    describe_foreign,
    lock_path,
    remove_leftovers,
)
from governed_broker.runner import partial_dir, run_experiment

OUTPUTS = ("agents_yearly.csv", "model_yearly.csv")


@pytest.fixture
def workspace(tmp_path, monkeypatch) -> Path:
    """A working directory holding a sentinel file and one finished run under outputs/."""
    cwd = tmp_path / "project"
    (cwd / "outputs" / "precious").mkdir(parents=True)
    (cwd / "sentinel.txt").write_text("keep me")
    (cwd / "outputs" / "precious" / "manifest.json").write_text("{}")
    monkeypatch.chdir(cwd)
    return cwd


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "a/b", "x.partial", "x.lock"])
def test_names_that_escape_or_collide_are_refused(experiments, workspace, capsys, name) -> None:
    data = experiments.data()
    data["name"] = name
    path = experiments.write(data)
    before = _tree(workspace)
    assert main(["run", str(path), "--set", "years=2", "--overwrite"]) == 2
    assert "field 'name'" in capsys.readouterr().err
    assert _tree(workspace) == before


@pytest.mark.parametrize("out", ["..", ".", "outputs/..", "outputs/precious/../.."])
def test_out_at_or_above_the_working_directory_is_refused(experiments, workspace, capsys,
                                                          out) -> None:
    path = experiments.write(experiments.data())
    before = _tree(workspace)
    assert main(["run", str(path), "--set", "years=2", "--out", out, "--overwrite"]) == 2
    assert "working directory or a parent" in capsys.readouterr().err
    assert _tree(workspace) == before
    assert (workspace / "sentinel.txt").read_text() == "keep me"


def test_overwrite_refuses_a_folder_of_runs(experiments, workspace, capsys) -> None:
    path = experiments.write(experiments.data())
    before = _tree(workspace)
    assert main(["run", str(path), "--set", "years=2", "--out", "outputs", "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert "does not look like one governed_broker run" in err and "precious" in err
    assert _tree(workspace) == before


def test_overwrite_refuses_a_foreign_manifest(experiments, workspace, capsys) -> None:
    path = experiments.write(experiments.data())
    assert main(["run", str(path), "--set", "years=2", "--out", "outputs/precious",
                 "--overwrite"]) == 2
    assert "manifest.json is not one governed_broker writes" in capsys.readouterr().err
    assert (workspace / "outputs" / "precious" / "manifest.json").read_text() == "{}"


def test_overwrite_replaces_our_own_run(experiments, workspace) -> None:
    path = experiments.write(experiments.data())
    assert main(["run", str(path), "--set", "years=2", "--out", "outputs/r"]) == 0
    first = (workspace / "outputs" / "r" / "manifest.json").read_text()
    assert main(["run", str(path), "--set", "years=3", "--out", "outputs/r", "--overwrite"]) == 0
    assert json.loads((workspace / "outputs" / "r" / "manifest.json").read_text())["years"] == 3
    assert first != (workspace / "outputs" / "r" / "manifest.json").read_text()
    assert not lock_path(workspace / "outputs" / "r").exists()


def test_a_symlinked_work_directory_is_refused(tmp_path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "run.partial").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ConfigError, match="symbolic link"):
        check_out_dir(tmp_path / "run", cwd=tmp_path / "elsewhere")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="not a directory"):
        check_out_dir(tmp_path / "file", cwd=tmp_path / "elsewhere")


def test_describe_foreign_names_strangers(tmp_path) -> None:
    (tmp_path / "agents_yearly.csv").write_text("")
    assert describe_foreign(tmp_path, finished=False) is None
    (tmp_path / "thesis.tex").write_text("")
    assert "thesis.tex" in describe_foreign(tmp_path, finished=False)


def test_overwrite_may_replace_an_empty_directory_only(experiments, workspace) -> None:
    path = experiments.write(experiments.data())
    (workspace / "outputs" / "empty").mkdir()
    assert main(["run", str(path), "--set", "years=2", "--out", "outputs/empty"]) == 2
    assert main(["run", str(path), "--set", "years=2", "--out", "outputs/empty",
                 "--overwrite"]) == 0
    assert (workspace / "outputs" / "empty" / "manifest.json").is_file()
    assert describe_foreign(workspace / "outputs" / "precious", finished=True) is not None


def test_remove_leftovers_deletes_only_temporary_files_and_follows_no_link(tmp_path) -> None:
    work, outside = tmp_path / "run.partial", tmp_path / "outside"
    (work / "memories" / ".tmp-half.md").parent.mkdir(parents=True)
    (work / "memories" / ".tmp-half.md").write_text("half")
    (work / "memories" / "1.md").write_text("kept")
    (work / ".tmp-manifest.json").write_text("{")
    (work / ".tmp-replaced" / "memories").mkdir(parents=True)
    (work / "agents_yearly.csv").write_text("kept")
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me")
    (work / ".tmp-link").symlink_to(outside, target_is_directory=True)
    remove_leftovers(work)
    assert _tree(work) == ["agents_yearly.csv", "memories", "memories/1.md"]
    assert (outside / "precious.txt").read_text() == "keep me"


_HOLD = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from governed_broker.run_dir import RunLock
    lock = RunLock(Path(sys.argv[1]))
    lock.acquire()
    print("locked", flush=True)
    time.sleep(60)
""")


def _holder(out: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", _HOLD, str(out)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_second_writer_is_refused_and_a_killed_holder_releases(experiments, tmp_path,
                                                                 capsys) -> None:
    out = tmp_path / "run"
    path = experiments.write(experiments.data())
    holder = _holder(out)
    try:
        assert main(["run", str(path), "--set", "years=2", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"held by PID {holder.pid}" in err and "another run is writing" in err
        assert not out.exists() and not partial_dir(out).exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert main(["run", str(path), "--set", "years=2", "--out", str(out)]) == 0


def test_lock_is_exclusive_within_a_process(tmp_path) -> None:
    with RunLock(tmp_path / "x"), pytest.raises(ConfigError, match=f"PID {os.getpid()}"):
        RunLock(tmp_path / "x").acquire()
    with RunLock(tmp_path / "x"):  # released and removed: takes it again
        assert lock_path(tmp_path / "x").is_file()


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(tmp_path) -> None:
    target = tmp_path / "thesis.tex"
    target.write_text("years of work")
    lock_path(tmp_path / "x").symlink_to(target)
    with pytest.raises(ConfigError, match="not a regular file"):
        RunLock(tmp_path / "x").acquire()
    assert target.read_text() == "years of work"
    lock_path(tmp_path / "y").mkdir()
    with pytest.raises(ConfigError, match="not a regular file"):
        RunLock(tmp_path / "y").acquire()


class Crash(RuntimeError):
    """Stands for a process dying at a chosen point."""


def _die(monkeypatch, target, name: str) -> None:
    def crashing(*args, **kwargs):
        raise Crash(name)

    monkeypatch.setattr(target, name, crashing)


@pytest.mark.parametrize("where", ["summary_plot", "manifest", "publish"])
def test_a_kill_while_finishing_never_reruns_a_year(experiments, tmp_path, monkeypatch,
                                                    where) -> None:
    data = experiments.data()
    data["outputs"]["plots"] = True
    config = experiments.config(["years=4"], data=data)
    reference = run_experiment(config, tmp_path / "reference", progress=False).out_dir
    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        if where == "summary_plot":
            import governed_broker.sim.plots as plots
            _die(patch, plots, "summary_plot")
        elif where == "manifest":
            original = runner_mod.write_atomic

            def crash_on_manifest(path, text):
                if path.name == "manifest.json":
                    raise Crash("manifest")
                return original(path, text)

            patch.setattr(runner_mod, "write_atomic", crash_on_manifest)
        else:
            _die(patch, runner_mod, "remove_checkpoints")
        with pytest.raises(Crash):
            run_experiment(config, out, progress=False)
    assert partial_dir(out).is_dir() and not out.exists()
    steps: list[int] = []
    real_step = runner_mod.FloodModel.step
    monkeypatch.setattr(runner_mod.FloodModel, "step",
                        lambda self: steps.append(self.year) or real_step(self))
    result = run_experiment(config, out, progress=False)
    assert steps == []  # every year had been simulated: finishing only
    assert result.out_dir == out.resolve() and not partial_dir(out).exists()
    for name in OUTPUTS:
        assert (out / name).read_bytes() == (reference / name).read_bytes()
    assert (out / "summary.png").is_file() and not (out / "checkpoints").exists()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["n_agent_rows"] == json.loads(
        (reference / "manifest.json").read_text())["n_agent_rows"]


@pytest.mark.parametrize("out", ["/proc/governed-broker-run", "/proc/self/x/run",
                                 "a" * 300, "outputs/" + "b" * 250])
def test_an_out_that_cannot_be_created_is_a_configuration_error(experiments, workspace,
                                                                 capsys, out) -> None:
    path = experiments.write(experiments.data())
    before = _tree(workspace)
    assert main(["run", str(path), "--set", "years=2", "--out", out]) == 2
    err = capsys.readouterr().err
    assert "\nconfiguration error: --out" in err and "not expected" not in err
    assert len(err) < 600 and _tree(workspace) == before


@pytest.mark.parametrize("name", ["CON", "con", "Nul", "aux.v2", "COM1", "lpt9.tar", "prn",
                                  "run."])
def test_names_windows_cannot_hold_are_refused(experiments, workspace, capsys, name) -> None:
    data = experiments.data()
    data["name"] = name
    path = experiments.write(data)
    assert main(["run", str(path), "--set", "years=2"]) == 2
    err = capsys.readouterr().err
    assert "field 'name'" in err and "Windows" in err
    assert not (workspace / "outputs" / name).exists()


def test_a_lock_deleted_or_replaced_is_no_longer_held_and_not_removed(tmp_path) -> None:
    from governed_broker.run_dir import LockLostError

    lock = RunLock(tmp_path / "x")
    lock.acquire()
    lock.verify()  # still its own
    lock.path.unlink()
    with pytest.raises(LockLostError, match="deleted or replaced"):
        lock.verify()
    with RunLock(tmp_path / "x") as other:  # a second run takes the new file
        lock.release()  # the first one's release leaves the second one's lock in place
        assert other.path.is_file()
        other.verify()


def test_a_run_whose_lock_is_deleted_stops_and_leaves_the_new_writer_alone(
        experiments, tmp_path, monkeypatch, capsys) -> None:
    """N3: a run whose lock is deleted stops; the run that took the directory over finishes.

    ``<out>.lock`` deleted while a run writes, a second run resumes the same directory and
    finishes; the first must not write another row nor publish (it exited 0 with a year of
    rows missing).
    """
    config = experiments.config(["years=4"])
    reference = run_experiment(config, tmp_path / "reference", progress=False).out_dir
    out = tmp_path / "run"
    path = experiments.write(experiments.data())
    args = ["run", str(path), "--set", "years=4", "--out", str(out)]
    real_step = runner_mod.FloodModel.step
    second: list = []

    def step_with_intruder(self) -> None:
        real_step(self)
        if self.year == 2 and not second:  # someone deletes the lock; another run resumes
            lock_path(out).unlink()
            second.append(subprocess.run([sys.executable, "-m", "governed_broker.cli", *args],
                                         capture_output=True, text=True, check=False))

    monkeypatch.setattr(runner_mod.FloodModel, "step", step_with_intruder)
    code = main(args)
    err = capsys.readouterr().err
    assert code == 1 and "lock" in err and "not expected" not in err, err
    assert second and second[0].returncode == 0, second[0].stderr
    for name in OUTPUTS:  # the second run's outputs, untouched by the first
        assert (out / name).read_bytes() == (reference / name).read_bytes()
    assert not partial_dir(out).exists()


def test_publishing_refuses_outputs_that_differ_from_what_the_run_wrote(
        experiments, tmp_path, monkeypatch) -> None:
    config = experiments.config(["years=3"])
    out = tmp_path / "run"
    real_finalise = runner_mod._finalise

    def truncate_then_finalise(config, work, manifest) -> None:
        agents = work / "agents_yearly.csv"
        agents.write_bytes(agents.read_bytes()[:-500])  # another writer cut the table
        real_finalise(config, work, manifest)

    monkeypatch.setattr(runner_mod, "_finalise", truncate_then_finalise)
    with pytest.raises(RuntimeError, match="agents_yearly.csv"):
        run_experiment(config, out, progress=False)
    assert not out.exists()


def test_output_problems_count_rows_as_a_csv_reader_does(tmp_path) -> None:
    from governed_broker.run_dir import output_problems

    table = tmp_path / "agents_yearly.csv"
    for text, rows in (("a,b\n1,2\n3,4\n", 2), ("a,b\n1,2\n3,", 2), ('a,b\n1,"x\ny"\n', 1),
                       ("a,b\n", 0)):
        table.write_text(text)
        assert output_problems(tmp_path, {"n_agent_rows": rows}) == []
        assert "has" in output_problems(tmp_path, {"n_agent_rows": rows + 1})[0]
    forged = {"n_agent_rows": 0, "outputs": {"../../etc/passwd": {"bytes": 1, "sha256": "x"}}}
    assert "unknown output" in output_problems(tmp_path, forged)[0]
