"""Tampered checkpoints are refused (exit 2, nothing changed); honest leftovers still resume."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from governed_broker.checkpoint import CHECKPOINT_DIR, MEMORY_LOG, SUMS_FILE, CheckpointError
from governed_broker.cli import main
from governed_broker.runner import partial_dir, run_experiment
from governed_broker.sim.model import FloodModel

SETTINGS = ["years=6", "population.size=25", "memory.engine=humancentric"]
OUTPUTS = ("agents_yearly.csv", "model_yearly.csv")


class Crash(RuntimeError):
    """Stands for a process dying at a chosen point."""


@pytest.fixture
def interrupted(experiments, tmp_path, monkeypatch) -> tuple[Path, list[str]]:
    """A run killed in year 4 (checkpoint of year 3 on disk) and the CLI args to resume it."""
    path = experiments.write(experiments.data())
    out = tmp_path / "run"
    real = FloodModel.hazard_phase

    def crash(self, *args, **kwargs):
        if self.year == 3:  # year 4 begins: years 1-3 are checkpointed
            raise Crash("killed")
        return real(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(FloodModel, "hazard_phase", crash)
        with pytest.raises(Crash):
            run_experiment(experiments.config(SETTINGS), out, progress=False)
    args = ["run", str(path), "--out", str(out), "--no-progress",
            *(x for s in SETTINGS for x in ("--set", s))]
    return out, args


def _checkpoint(out: Path) -> Path:
    (ckpt,) = sorted((partial_dir(out) / CHECKPOINT_DIR).glob("year-*"))
    return ckpt


def _edit_json(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def _flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def _edit_memory(out: Path) -> None:
    # closed here: the last connection's close moves the WAL into memory.sqlite, which must
    # happen before the test's snapshot, not whenever the connection is collected
    with closing(sqlite3.connect(partial_dir(out) / "memory.sqlite")) as conn, conn:
        conn.execute("UPDATE episodes SET content = content || '!' WHERE rid = 1")


TAMPERS = {
    "year_changed": (lambda o: _edit_json(_checkpoint(o) / "state.json",
                                          lambda d: d.update(year=1)), "state.json was changed"),
    "sizes_changed": (lambda o: _edit_json(_checkpoint(o) / "state.json",
                                           lambda d: d["sizes"].update({OUTPUTS[0]: 10})),
                      "state.json was changed"),
    "state_npz_flipped": (lambda o: _flip(_checkpoint(o) / "state.npz", 200),
                          "state.npz was changed"),
    "sums_deleted": (lambda o: (_checkpoint(o) / SUMS_FILE).unlink(), "unreadable or incomplete"),
    "output_cut": (lambda o: (partial_dir(o) / OUTPUTS[0]).write_bytes(
        (partial_dir(o) / OUTPUTS[0]).read_bytes()[:100]), "fewer than"),
    "output_edited": (lambda o: _flip(partial_dir(o) / OUTPUTS[1], 60), "differ from"),
    "output_deleted": (lambda o: (partial_dir(o) / OUTPUTS[1]).unlink(), "is missing"),
    "memory_deleted": (lambda o: (partial_dir(o) / "memory.sqlite").unlink(),
                       "memory.sqlite is missing"),
    "memory_row_edited": (_edit_memory, "memories in memory.sqlite"),
    "memory_log_edited": (lambda o: _flip(partial_dir(o) / MEMORY_LOG, 40),
                          "checkpoints/memory.jsonl differ from"),
    "memory_log_cut": (lambda o: (partial_dir(o) / MEMORY_LOG).write_bytes(
        (partial_dir(o) / MEMORY_LOG).read_bytes()[:100]), "fewer than"),
    "memory_log_deleted": (lambda o: (partial_dir(o) / MEMORY_LOG).unlink(),
                           "checkpoints/memory.jsonl is missing"),
}


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith(("-wal", "-shm"))}


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_tampered_checkpoint_is_refused(interrupted, capsys, tamper) -> None:
    out, args = interrupted
    edit, expected = TAMPERS[tamper]
    edit(out)
    before = _snapshot(partial_dir(out))
    assert main(args) == 2
    err = capsys.readouterr().err
    assert expected in err and "Nothing was changed" in err and "--overwrite" in err
    assert "Traceback" not in err
    assert _snapshot(partial_dir(out)) == before
    assert main([*args, "--overwrite"]) == 0  # the way out the message names works


def test_leftover_rows_beyond_the_checkpoint_still_resume_identically(
        interrupted, experiments, tmp_path) -> None:
    out, args = interrupted
    with open(partial_dir(out) / OUTPUTS[0], "ab") as f:
        f.write(b"4,half a row of the interrupted ye")
    reference = run_experiment(experiments.config(SETTINGS), tmp_path / "reference",
                               progress=False).out_dir
    assert main(args) == 0
    for name in OUTPUTS:
        assert (out / name).read_bytes() == (reference / name).read_bytes()


def test_a_checkpoint_of_another_format_is_refused(interrupted, capsys) -> None:
    out, args = interrupted
    _edit_json(_checkpoint(out) / "state.json", lambda d: d.pop("format"))
    sums = _checkpoint(out) / SUMS_FILE  # an honest file of another version: digests agree
    _edit_json(sums, lambda d: d.update({"state.json": _sha256(_checkpoint(out) / "state.json")}))
    before = _snapshot(partial_dir(out))
    assert main(args) == 2
    assert "written by another version of governed_broker" in capsys.readouterr().err
    assert _snapshot(partial_dir(out)) == before


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _llm_settings(repo_root: Path) -> list[str]:
    llm = {"backend": "scripted", "model": "resume",
           "script": str(repo_root / "tests" / "fixtures" / "scripted_resume.yaml"),
           "cache": {"mode": "off"}}
    return ["years=4", "population.size=8", "memory.engine=humancentric",
            "decision.maker=llm", f"llm={json.dumps(llm)}", "reflection.enabled=true",
            "hazard.zones.high.annual_probability=0.6", "hazard.zones.high.flooded_share=1"]


@pytest.mark.parametrize("name", ["decisions.jsonl", "reflections.jsonl"])
def test_edited_audit_log_of_an_llm_run_is_refused(experiments, tmp_path, monkeypatch,
                                                   repo_root, name) -> None:
    """The governed broker's audit logs are checkpointed prefixes like the CSVs."""
    config = experiments.config(_llm_settings(repo_root))
    out = tmp_path / "run"
    real = FloodModel.hazard_phase

    def crash(self, *args, **kwargs):
        if self.year == 3:
            raise Crash("killed")
        return real(self, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(FloodModel, "hazard_phase", crash)
        with pytest.raises(Crash):
            run_experiment(config, out, progress=False)
    log = partial_dir(out) / name
    assert log.stat().st_size > 0, f"the run wrote no {name}; the test would prove nothing"
    text = log.read_text(encoding="utf-8")
    log.write_text(text.replace('"', "'", 1), encoding="utf-8")  # same size, one byte edited
    before = _snapshot(partial_dir(out))
    with pytest.raises(CheckpointError, match=rf"{name} differ from .*sha256 .*recorded"):
        run_experiment(config, out, progress=False)
    assert _snapshot(partial_dir(out)) == before
