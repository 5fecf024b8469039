"""The sweep directory and the per-run state records.

Layout of a sweep directory::

    SWEEP_DIR/
      <run_id>/                     one complete run (as `governed-broker run` writes it)
      <run_id>.partial/             a run that started and has not finished
      sweep_runs.csv                index: one row per planned run
      sweep_agents_yearly.parquet   combined agents_yearly.csv of the done runs (+ run_id ...)
      sweep_model_yearly.csv        combined model_yearly.csv of the done runs
      _sweep/plan.json              the runs of the last submission
      _sweep/state/<run_id>.json    status, attempts, timings, error of each run
      _sweep/errors/<run_id>.txt    traceback of a run's last failure
      _sweep/slurm/                 submitit folder (sbatch scripts, logs, pickles)

Every run writes its own state file (atomically: temp file + rename), so many workers on a
shared filesystem never write the same file. A run is *done* when its directory holds
``manifest.json`` (``run_experiment`` renames ``.partial`` into place only on success) and its
outputs are still what the manifest says the run wrote (sizes, sha256 and agent rows,
``run_dir.output_problems``); a run whose outputs were cut, edited or deleted afterwards is
*failed*, with what differs, and is never run over: it must be moved away first. Outputs are
verified again only when one of their files changes (``_sweep/verified/<run_id>.json`` keeps
the size, modification time and inode of each file at the last verification).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from governed_broker.config import ConfigError
from governed_broker.run_dir import VERIFIED_OUTPUTS, output_problems

DONE, FAILED, RUNNING, PENDING = "done", "failed", "running", "pending"


def now_iso() -> str:
    """The current UTC time, ISO 8601 with seconds."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file in the same directory and a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass
class RunState:
    """What is known about one run's execution (``_sweep/state/<run_id>.json``).

    Attributes:
        status: ``running``, ``done`` or ``failed``.
        attempts: How many times the run has been started.
        started_at: ISO time of the last start.
        finished_at: ISO time of the last end (done or failed).
        duration_s: Seconds of the last attempt.
        host: Machine of the last attempt.
        task_id: ``pid:<pid>`` locally, the SLURM job id (``<array>_<index>``) on SLURM.
        error: One-line error of the last failure.
    """

    status: str
    attempts: int = 0
    started_at: str | None = None
    finished_at: str | None = None
    duration_s: float | None = None
    host: str | None = None
    task_id: str | None = None
    error: str | None = None


def _stamp(run: Path) -> list[list[Any]]:
    """Name, size, modification time and inode of a run's manifest and outputs.

    What must be unchanged for an earlier verification to hold.
    """
    out = []
    for name in ("manifest.json", *VERIFIED_OUTPUTS):
        try:
            st = os.stat(run / name)
        except OSError:
            continue
        out.append([name, st.st_size, st.st_mtime_ns, st.st_ino])
    return out


#: Runs whose outputs this process verified, with the stamp they were verified at.
_VERIFIED: dict[str, list[list[Any]]] = {}


class SweepDir:
    """Paths and state records of one sweep directory.

    Args:
        root: The sweep directory.
        record_checks: Keep each verification of a run's outputs in ``_sweep/verified/``
            (False for readers that must not write into the sweep, such as the explorer;
            verifications are then kept in this process only).
    """

    def __init__(self, root: str | Path, record_checks: bool = True) -> None:
        self.root = Path(root).resolve()
        self.record_checks = record_checks

    @property
    def meta(self) -> Path:
        """Bookkeeping folder ``_sweep``."""
        return self.root / "_sweep"

    @property
    def plan_file(self) -> Path:
        """The sweep's plan file."""
        return self.meta / "plan.json"

    @property
    def slurm_folder(self) -> Path:
        """Where SLURM writes its job files."""
        return self.meta / "slurm"

    def run_dir(self, run_id: str) -> Path:
        """Directory of a complete run."""
        return self.root / run_id

    def partial_dir(self, run_id: str) -> Path:
        """Working directory of an unfinished run (``runner.partial_dir``)."""
        return self.root / f"{run_id}.partial"

    def state_file(self, run_id: str) -> Path:
        """The state file of run ``run_id``."""
        return self.meta / "state" / f"{run_id}.json"

    def error_file(self, run_id: str) -> Path:
        """The error file of run ``run_id``."""
        return self.meta / "errors" / f"{run_id}.txt"

    def is_done(self, run_id: str) -> bool:
        """Whether the run finished.

        Its directory holds ``manifest.json`` and its outputs match it (``output_problem``).
        """
        return self.has_manifest(run_id) and self.output_problem(run_id) is None

    def has_manifest(self, run_id: str) -> bool:
        """Whether the run's directory holds ``manifest.json`` (it was published)."""
        return (self.run_dir(run_id) / "manifest.json").is_file()

    def output_problem(self, run_id: str) -> str | None:
        """Why a published run's outputs are not what its manifest says it wrote.

        None: they are. Verified again only when one of its files changed since the last time.
        """
        run = self.run_dir(run_id)
        stamp = _stamp(run)
        cache = self.meta / "verified" / f"{run_id}.json"
        if _VERIFIED.get(str(run)) == stamp:
            return None
        try:
            if json.loads(cache.read_text(encoding="utf-8")) == stamp:
                _VERIFIED[str(run)] = stamp
                return None
        except (OSError, ValueError):
            pass
        try:
            manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
            problems = (output_problems(run, manifest) if isinstance(manifest, dict)
                        else ["manifest.json is not a JSON object"])
        except (OSError, ValueError) as exc:
            problems = [f"manifest.json cannot be read ({type(exc).__name__})"]
        if problems:
            return (f"{run_id}: its outputs are not what the run wrote (" + "; ".join(problems[:3])
                    + f"); move {run} away and re-submit to run it again")
        _VERIFIED[str(run)] = stamp
        if self.record_checks:
            try:  # a cache only: a read-only sweep directory is verified once per process
                write_atomic(cache, json.dumps(stamp) + "\n")
            except OSError:
                pass
        return None

    def read_state(self, run_id: str) -> RunState | None:
        """The run's state record, or None when it never started."""
        path = self.state_file(run_id)
        if not path.is_file():
            return None
        try:
            return RunState(**json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{path}: corrupt run state ({exc}); delete it to re-run") from exc

    def write_state(self, run_id: str, state: RunState) -> None:
        """Write run ``run_id``'s state atomically."""
        write_atomic(self.state_file(run_id), json.dumps(asdict(state), indent=1) + "\n")

    def status(self, run_id: str, state: RunState | None = None) -> str:
        """``done``, ``failed``, ``running`` or ``pending`` (never started).

        Only a complete run directory (``is_done``) makes a run done: a state file that says
        ``done`` while ``manifest.json`` is missing (the directory was deleted or moved) gives
        ``pending``, and the next submission runs it again; a published run whose outputs do
        not match its manifest is ``failed`` (``output_problem``).
        """
        if self.has_manifest(run_id):
            return DONE if self.output_problem(run_id) is None else FAILED
        state = state if state is not None else self.read_state(run_id)
        if state is None or state.status == DONE:
            return PENDING
        return state.status

    def write_plan(self, plan_json: dict[str, Any]) -> None:
        """Write the sweep's plan atomically."""
        write_atomic(self.plan_file, json.dumps(plan_json, indent=1) + "\n")

    def read_plan_json(self) -> dict[str, Any]:
        """The stored plan; a clear error when ``root`` is not a sweep directory."""
        if not self.plan_file.is_file():
            raise ConfigError(
                f"{self.root}: not a sweep directory (no _sweep/plan.json); pass the --out "
                "directory of `governed-broker sweep`"
            )
        try:
            return json.loads(self.plan_file.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ConfigError(f"{self.plan_file}: corrupt plan ({exc})") from exc
