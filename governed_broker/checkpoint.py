"""Year-end checkpoints of a run, so that an interrupted run resumes where it stopped.

After every completed year the runner flushes its output files and writes
``<run>.partial/checkpoints/year-NNNN/`` with:

* ``state.npz``: every household array of the world and what neighbours saw last year
  (``numpy.savez`` with ``allow_pickle=False``: numbers and booleans only);
* ``state.json``: the year, the config hash, the byte size of every output file at that moment,
  Mesa's generator states and every household's memory (engine items and generator state,
  procedural and metacognitive records).

A checkpoint directory is written under a temporary name and renamed into place, so a run
killed at any moment (SIGKILL included) leaves either the old or the new checkpoint, never a
half-written one. Resuming cuts every output file back to the sizes recorded in the checkpoint
(rows of the interrupted year are written again), drops the interrupted year's memories from
``memory.sqlite`` and restores the state; every draw after that comes from generators keyed by
(seed, year) or restored exactly, so the finished outputs are byte-identical to those of an
uninterrupted run.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from governed_broker.sim.model import FloodModel

CHECKPOINT_DIR = "checkpoints"
#: Output files a run appends to while it runs; their sizes are recorded per checkpoint.
TRACKED_FILES = ("agents_yearly.csv", "model_yearly.csv", "decisions.jsonl", "reflections.jsonl")
_TAKEN, _PREV = "taken_once/", "prev/"


@dataclass(frozen=True)
class Checkpoint:
    """A completed checkpoint on disk.

    Attributes:
        path: Its directory.
        year: The last completed year.
        config_hash: Hash of the configuration of the run that wrote it.
        rows: Rows of ``agents_yearly.csv`` written so far.
        sizes: Byte size of each tracked output file at the checkpoint.
    """

    path: Path
    year: int
    config_hash: str
    rows: int
    sizes: dict[str, int]


def _year_dir(work: Path, year: int) -> Path:
    return work / CHECKPOINT_DIR / f"year-{year:04d}"


def write_checkpoint(work: Path, model: FloodModel, *, config_hash: str, rows: int) -> Path:
    """Write the checkpoint of the year ``model`` just completed; remove older ones."""
    for name in TRACKED_FILES:  # durable before the checkpoint that points at their sizes
        path = work / name
        if path.exists():
            with open(path, "rb") as f:
                os.fsync(f.fileno())
    final = _year_dir(work, model.year)
    tmp = final.with_name(f".{final.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    np.savez(tmp / "state.npz", allow_pickle=False, **_arrays(model))
    meta = {
        "year": model.year,
        "config_hash": config_hash,
        "rows": rows,
        "sizes": {n: (work / n).stat().st_size for n in TRACKED_FILES if (work / n).exists()},
        "mesa_rng": model.rng.bit_generator.state,
        "python_random": _jsonable(model.random.getstate()),
        "memory": None if model.world_memory is None else model.world_memory.state(),
    }
    (tmp / "state.json").write_text(json.dumps(meta), encoding="utf-8")
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    for old in (work / CHECKPOINT_DIR).glob("year-*"):
        if old != final:
            shutil.rmtree(old)
    return final


def latest_checkpoint(work: Path) -> Checkpoint | None:
    """The newest complete checkpoint of an unfinished run (None when there is none)."""
    done = sorted((work / CHECKPOINT_DIR).glob("year-*")) if work.is_dir() else []
    if not done:
        return None
    path = done[-1]  # only the newest is kept; it was renamed into place complete
    try:
        meta = json.loads((path / "state.json").read_text(encoding="utf-8"))
        return Checkpoint(path, int(meta["year"]), meta["config_hash"], int(meta["rows"]),
                          {k: int(v) for k, v in meta["sizes"].items()})
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RuntimeError(
            f"cannot resume {work}: checkpoint {path / 'state.json'} is unreadable ({exc!r}); "
            f"move {work} away to keep its outputs, or pass --overwrite to start again"
        ) from exc


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
            raise RuntimeError(f"cannot resume {work}: {name} is missing but the checkpoint of "
                               f"year {checkpoint.year} recorded {size} bytes")


def restore(model: FloodModel, checkpoint: Checkpoint) -> None:
    """Put a freshly built model into the state of ``checkpoint``."""
    meta = json.loads((checkpoint.path / "state.json").read_text(encoding="utf-8"))
    with np.load(checkpoint.path / "state.npz", allow_pickle=False) as data:
        hh = model.hh
        for f in fields(hh):
            if f.name != "taken_once":
                getattr(hh, f.name)[...] = data[f.name]
        for action, taken in hh.taken_once.items():
            taken[...] = data[_TAKEN + action]
        model.prev_state = {k[len(_PREV):]: data[k].copy() for k in data.files
                            if k.startswith(_PREV)}
    model.year = int(meta["year"])
    model.rng.bit_generator.state = meta["mesa_rng"]
    model.random.setstate(_tuples(meta["python_random"]))
    if model.world_memory is not None:
        model.world_memory.restore(meta["memory"])
        if model.world_memory.writer is not None:
            model.world_memory.writer.store.remove_sessions_after(model.year)


def remove_checkpoints(work: Path) -> None:
    """Delete the checkpoints of a run that finished (they are not outputs)."""
    shutil.rmtree(work / CHECKPOINT_DIR, ignore_errors=True)


def _arrays(model: FloodModel) -> dict[str, np.ndarray]:
    hh = model.hh
    out = {f.name: getattr(hh, f.name) for f in fields(hh) if f.name != "taken_once"}
    out.update({_TAKEN + a: v for a, v in hh.taken_once.items()})
    out.update({_PREV + k: v for k, v in model.prev_state.items()})
    return out


def _jsonable(value: Any) -> Any:
    return [_jsonable(v) for v in value] if isinstance(value, tuple | list) else value


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value
