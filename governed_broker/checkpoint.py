"""Year-end checkpoints of a run, so that an interrupted run resumes where it stopped.

After every completed year the runner flushes its output files, appends the year's memory
changes to ``<run>.partial/checkpoints/memory.jsonl`` and writes
``<run>.partial/checkpoints/year-NNNN/`` with:

* ``state.npz``: every household array of the world and what neighbours saw last year
  (``numpy.savez`` with ``allow_pickle=False``: numbers and booleans only);
* ``state.json``: the year, the config hash, the byte size of every output file (and of the
  memory log) at that moment and Mesa's generator states.

Household memories grow with the run, so they are not saved whole: ``memory.jsonl`` is an
append-only log with one line per completed year holding what changed in every household's
memory that year (``FloodModel.memory_changes``: memories formed, the few fields of earlier
memories that retrieval changed, generator states, procedural and metacognitive records that
changed, facts learned). A checkpoint costs what the year added, not what the run holds, and
resuming replays the log on freshly built memories. The log is tracked like an output file
(size and digest per checkpoint), so lines of an interrupted year are cut off on resume.

Checkpoints verify themselves: ``state.json`` also records the sha256 of every tracked output
file's prefix up to its recorded size and of the memory store's rows up to the checkpoint year,
and ``SHA256SUMS.json`` (written last) the sha256 of ``state.npz`` and ``state.json``. Resuming
checks all of it before anything is changed and refuses (``CheckpointError``, exit code 2) on
any difference, so an edited, truncated or deleted file never yields a silently different run.
The digests are kept as running hashes (``CheckpointWriter``): each checkpoint hashes only what
was appended since the previous one, so their cost stays linear in the length of the run.

A checkpoint directory is written under a temporary name and renamed into place, so a run
killed at any moment (SIGKILL included) leaves either the old or the new checkpoint, never a
half-written one. Resuming cuts every output file back to the sizes recorded in the checkpoint
(rows of the interrupted year are written again), drops the interrupted year's memories from
``memory.sqlite`` and restores the state; every draw after that comes from generators keyed by
(seed, year) or restored exactly, so the finished outputs are byte-identical to those of an
uninterrupted run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from governed_broker.config.base import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from governed_broker.sim.model import FloodModel

CHECKPOINT_DIR = "checkpoints"
#: The memory log (see the module documentation), appended to like an output file.
MEMORY_LOG = f"{CHECKPOINT_DIR}/memory.jsonl"
#: Files a run appends to while it runs (the outputs and the memory log); their sizes are
#: recorded per checkpoint.
TRACKED_FILES = ("agents_yearly.csv", "model_yearly.csv", "decisions.jsonl", "reflections.jsonl",
                 "cohorts.jsonl", "institutions_yearly.csv", "institutions.jsonl", MEMORY_LOG)
#: Version of the checkpoint layout; a checkpoint of another one is not resumed (3: the
#: household state holds the aid certificates of ``sim.instruments.certificates`` and the
#: agent table their two columns; 4: it holds each home's flood payments,
#: ``preferred_risk.loss_history``).
FORMAT = 4
#: Written last into a checkpoint: the sha256 of its other files.
SUMS_FILE = "SHA256SUMS.json"
MEMORY_STORE = "memory.sqlite"
_CHUNK = 1 << 20


class CheckpointError(ConfigError):
    """A checkpoint cannot be trusted (edited, truncated or missing files); nothing was changed.

    A ``ConfigError``, so the command line exits with code 2 and prints the message alone.
    """


@dataclass(frozen=True)
class Checkpoint:
    """A completed checkpoint on disk.

    Attributes:
        path: Its directory.
        year: The last completed year.
        config_hash: Hash of the configuration of the run that wrote it.
        rows: Rows of ``agents_yearly.csv`` written so far.
        sizes: Byte size of each tracked output file at the checkpoint.
        digests: sha256 of each tracked file's first ``sizes[name]`` bytes.
        memory_digest: sha256 of the memory store's rows up to ``year`` (None: no store).
    """

    path: Path
    year: int
    config_hash: str
    rows: int
    sizes: dict[str, int]
    digests: dict[str, str]
    memory_digest: str | None


def _year_dir(work: Path, year: int) -> Path:
    return work / CHECKPOINT_DIR / f"year-{year:04d}"


class CheckpointWriter:
    """Writes a run's year-end checkpoints, carrying running digests from year to year.

    Args:
        work: The run's working directory.
        config_hash: Hash of the run's configuration.
        resumed: The digests of the verified checkpoint a resumed run continues from (None:
            a fresh run).
    """

    def __init__(self, work: Path, config_hash: str, resumed: Verified | None = None) -> None:
        self.work = work
        self.config_hash = config_hash
        start = resumed or Verified({}, {}, hashlib.sha256(), 0)
        self._files = {n: start.files.get(n, hashlib.sha256()) for n in TRACKED_FILES}
        self._sizes = {n: start.sizes.get(n, 0) for n in TRACKED_FILES}
        self._memory, self._memory_rid = start.memory, start.memory_rid

    def write(self, model: FloodModel, rows: int) -> Path:
        """Write the checkpoint of the year ``model`` just completed; remove older ones."""
        self._log_memory(model)
        for name in TRACKED_FILES:  # durable before the checkpoint that points at their sizes
            path = self.work / name
            if path.exists():
                with open(path, "rb") as f:
                    os.fsync(f.fileno())
        digests = {name: self._advance(name) for name in TRACKED_FILES
                   if (self.work / name).exists()}
        arrays, state = model.state()
        meta = {
            "format": FORMAT,
            "config_hash": self.config_hash,
            "rows": rows,
            "sizes": dict(self._sizes_now()),
            "digests": digests,
            "memory_digest": self._advance_memory(model),
            **state,
        }
        return _write_dir(self.work, model.year, arrays, meta)

    def outputs(self) -> dict[str, dict[str, Any]]:
        """Size and sha256 of every output file as of the last checkpoint.

        The memory log, a work file, is left out. This is what the manifest records
        (``run_dir.output_problems``).
        """
        return {n: {"bytes": self._sizes[n], "sha256": self._files[n].hexdigest()}
                for n in self._sizes_now() if n != MEMORY_LOG}

    def _log_memory(self, model: FloodModel) -> None:
        """Append the year's memory changes to the memory log (one line per year)."""
        changes = model.memory_changes()
        if changes is None:
            return
        line = json.dumps({"year": model.year, "households": changes}, separators=(",", ":"))
        path = self.work / MEMORY_LOG
        path.parent.mkdir(exist_ok=True)
        with open(path, "a", encoding="ascii") as f:  # json.dumps escapes non-ASCII
            f.write(line + "\n")

    def _sizes_now(self) -> dict[str, int]:
        return {n: self._sizes[n] for n in TRACKED_FILES if (self.work / n).exists()}

    def _advance(self, name: str) -> str:
        """Hash what was appended to ``name`` since the last checkpoint."""
        path, hasher = self.work / name, self._files[name]
        size = path.stat().st_size
        with open(path, "rb") as f:
            f.seek(self._sizes[name])
            _feed(f, hasher, size - self._sizes[name])
        self._sizes[name] = size
        return hasher.hexdigest()

    def _advance_memory(self, model: FloodModel) -> str | None:
        store = model.memory_store
        if store is None:
            return None
        self._memory_rid = store.digest_rows(self._memory, after_rid=self._memory_rid)
        return self._memory.hexdigest()


def _write_dir(work: Path, year: int, arrays: dict[str, np.ndarray],
               meta: dict[str, Any]) -> Path:
    final = _year_dir(work, year)
    tmp = final.with_name(f".{final.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    np.savez(tmp / "state.npz", allow_pickle=False, **arrays)
    (tmp / "state.json").write_text(json.dumps(meta), encoding="utf-8")
    sums = {name: _file_digest(tmp / name) for name in ("state.npz", "state.json")}
    (tmp / SUMS_FILE).write_text(json.dumps(sums), encoding="utf-8")
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    for old in (work / CHECKPOINT_DIR).glob("year-*"):
        if old != final:
            shutil.rmtree(old)
    return final


def latest_checkpoint(work: Path) -> Checkpoint | None:
    """The newest complete checkpoint of an unfinished run (None when there is none).

    Raises:
        CheckpointError: its files are missing, unreadable or do not match their digests.
    """
    done = sorted((work / CHECKPOINT_DIR).glob("year-*")) if work.is_dir() else []
    if not done:
        return None
    path = done[-1]  # only the newest is kept; it was renamed into place complete
    try:
        sums = json.loads((path / SUMS_FILE).read_text(encoding="utf-8"))
        for name in ("state.npz", "state.json"):
            found = _file_digest(path / name)
            if found != sums[name]:
                raise _refuse(work, f"{path / name} was changed after it was written "
                                    f"(sha256 {found[:12]}..., recorded {sums[name][:12]}...)")
        meta = json.loads((path / "state.json").read_text(encoding="utf-8"))
        if meta.get("format") != FORMAT:
            raise _refuse(work, f"checkpoint {path} was written by another version of "
                                f"governed_broker (checkpoint format {meta.get('format', 1)}, "
                                f"this version reads {FORMAT}); resume it with that version")
        return Checkpoint(path, int(meta["year"]), meta["config_hash"], int(meta["rows"]),
                          {k: int(v) for k, v in meta["sizes"].items()},
                          dict(meta["digests"]), meta["memory_digest"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise _refuse(work, f"checkpoint {path} is unreadable or incomplete "
                            f"({type(exc).__name__}: {exc})") from exc


@dataclass
class Verified:
    """Running digests of a verified checkpoint, for the ``CheckpointWriter`` that continues.

    Attributes:
        files: sha256 state of each tracked file's prefix.
        sizes: The prefix sizes (bytes).
        memory: sha256 state of the memory store's rows up to the checkpoint year.
        memory_rid: The last store row fed into ``memory``.
    """

    files: dict[str, Any]
    sizes: dict[str, int]
    memory: Any
    memory_rid: int


def verify_checkpoint(work: Path, checkpoint: Checkpoint) -> Verified:
    """Check every output prefix and the memory store against ``checkpoint``; change nothing.

    Bytes beyond a file's recorded size (rows of the interrupted year) are allowed: resuming
    cuts them off.

    Raises:
        CheckpointError: a tracked file or the store is missing, shorter or different.
    """
    files, sizes = {}, {}
    for name, size in checkpoint.sizes.items():
        path = work / name
        if not path.is_file():
            raise _refuse(work, f"{name} is missing but the checkpoint of year "
                                f"{checkpoint.year} recorded {size} bytes")
        if path.stat().st_size < size:
            raise _refuse(work, f"{name} has {path.stat().st_size} bytes, fewer than the "
                                f"{size} recorded at the checkpoint of year {checkpoint.year}")
        hasher = hashlib.sha256()
        with open(path, "rb") as f:
            _feed(f, hasher, size)
        found, recorded = hasher.hexdigest(), str(checkpoint.digests.get(name))
        if found != recorded:
            raise _refuse(work, f"the first {size} bytes of {name} differ from what the "
                                f"checkpoint of year {checkpoint.year} recorded (edited?; "
                                f"sha256 {found[:12]}..., recorded {recorded[:12]}...)")
        files[name], sizes[name] = hasher, size
    memory, rid = _verify_memory(work, checkpoint)
    return Verified(files, sizes, memory, rid)


def _verify_memory(work: Path, checkpoint: Checkpoint) -> tuple[Any, int]:
    hasher = hashlib.sha256()
    if checkpoint.memory_digest is None:
        return hasher, 0
    from governed_broker.memory.episodic import digest_episode_rows

    store_path = work / MEMORY_STORE
    if not store_path.is_file():
        raise _refuse(work, f"{MEMORY_STORE} is missing but the checkpoint of year "
                            f"{checkpoint.year} covers its memories")
    try:  # read-only: verification changes nothing
        conn = sqlite3.connect(f"{store_path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            rid = digest_episode_rows(conn, hasher, max_year=checkpoint.year)
        finally:
            conn.close()
    except (sqlite3.Error, ValueError) as exc:
        raise _refuse(work, f"{MEMORY_STORE} is unreadable ({exc})") from exc
    found = hasher.hexdigest()
    if found != checkpoint.memory_digest:
        raise _refuse(work, f"the memories in {MEMORY_STORE} up to year {checkpoint.year} "
                            f"differ from what the checkpoint recorded (edited?; sha256 "
                            f"{found[:12]}..., recorded {str(checkpoint.memory_digest)[:12]}...)")
    return hasher, rid


def _refuse(work: Path, problem: str) -> CheckpointError:
    return CheckpointError(
        f"cannot resume {work}: {problem}. Nothing was changed. To keep its outputs, move "
        f"{work} away; to start again, pass --overwrite")


def _feed(f: Any, hasher: Any, n: int) -> None:
    """Feed the next ``n`` bytes of ``f`` into ``hasher``."""
    while n > 0:
        chunk = f.read(min(_CHUNK, n))
        if not chunk:
            break
        hasher.update(chunk)
        n -= len(chunk)


def _file_digest(path: Path) -> str:
    hasher = hashlib.sha256()
    with open(path, "rb") as f:
        _feed(f, hasher, path.stat().st_size)
    return hasher.hexdigest()


def rewind_outputs(work: Path, checkpoint: Checkpoint) -> None:
    """Cut the output files back to their size at the checkpoint (drop later rows)."""
    for name in TRACKED_FILES:
        path = work / name
        size = checkpoint.sizes.get(name)
        if size is None:
            path.unlink(missing_ok=True)
        elif path.exists():
            with open(path, "r+b") as f:
                f.truncate(size)
        else:
            raise _refuse(work, f"{name} is missing but the checkpoint of year "
                                f"{checkpoint.year} recorded {size} bytes")


def restore(model: FloodModel, checkpoint: Checkpoint) -> None:
    """Put a freshly built model into the state of ``checkpoint`` (after ``rewind_outputs``)."""
    work = checkpoint.path.parent.parent
    meta = json.loads((checkpoint.path / "state.json").read_text(encoding="utf-8"))
    memory = _memory_log(work, checkpoint) if MEMORY_LOG in checkpoint.sizes else iter(())
    with np.load(checkpoint.path / "state.npz", allow_pickle=False) as data:
        model.restore({k: data[k] for k in data.files}, meta, memory)
    if model.memory_store is not None:
        model.memory_store.remove_sessions_after(model.year)


def _memory_log(work: Path, checkpoint: Checkpoint) -> Iterator[list[Any]]:
    """The memory changes of years 1..checkpoint.year, in order.

    From the (verified and cut back) memory log, read a line at a time (a basin-size run's log is
    gigabytes).
    """
    number = 0
    with open(work / MEMORY_LOG, encoding="ascii") as f:
        for number, line in enumerate(f, start=1):
            entry = json.loads(line)
            if entry.get("year") != number:
                raise _refuse(work, f"line {number} of {MEMORY_LOG} is for year "
                                    f"{entry.get('year')}, not {number}")
            yield entry["households"]
    if number != checkpoint.year:
        raise _refuse(work, f"{MEMORY_LOG} holds {number} years, the checkpoint "
                            f"{checkpoint.year}")


def remove_checkpoints(work: Path) -> None:
    """Delete the checkpoints of a run that finished (they are not outputs)."""
    shutil.rmtree(work / CHECKPOINT_DIR, ignore_errors=True)
