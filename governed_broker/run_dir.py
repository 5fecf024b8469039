"""Safety of run directories: where a run may write, what ``--overwrite`` may delete, one writer.

A run writes into ``<out>.partial/`` and renames it to ``<out>`` when it has finished. Three
rules keep that from ever destroying data that is not one of our runs:

* **Confinement** (``check_out_dir``): ``<out>`` is resolved (``..`` and symbolic links
  followed) and refused when it is the working directory, one of its parents, the home
  directory or a filesystem root, or when it exists and is not a directory.
* **Recognition** (``describe_foreign``): ``--overwrite`` replaces, and a resume continues, only
  a directory that is recognisably one run of ours: a finished run has a ``manifest.json`` with
  the keys every manifest carries, an unfinished one our checkpoint layout, and neither holds
  anything but the files and folders a run writes (an empty directory holds nothing to lose
  and may be replaced too). Anything else (another run's folder, a folder of runs, a source
  tree) is refused with what was found, never deleted.
* **One writer** (``RunLock``): ``<out>.lock`` beside the output is locked with ``flock`` for
  the whole run, so a second run into the same ``--out`` is refused instead of interleaving its
  rows with the first one's. The operating system releases the lock when the process dies
  (``kill -9`` included), so an interrupted run can always be resumed.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import stat
from pathlib import Path

from governed_broker.config.base import ConfigError

#: Files a run writes into its directory (SQLite side files included).
RUN_FILES = frozenset({
    "agents_yearly.csv", "model_yearly.csv", "manifest.json", "config.yaml", "summary.png",
    "decisions.jsonl", "reflections.jsonl", "cohorts.jsonl", "memory.sqlite", "llm_calls.sqlite",
    "memory.sqlite-wal", "memory.sqlite-shm", "memory.sqlite-journal",
    "llm_calls.sqlite-wal", "llm_calls.sqlite-shm", "llm_calls.sqlite-journal",
    "validity_card.json", "institutions_yearly.csv", "institutions.jsonl",
})
#: Folders a run writes (``checkpoints`` only while unfinished).
RUN_FOLDERS = frozenset({"memories", "checkpoints"})
#: Keys every manifest of ours has; a ``manifest.json`` without them is not ours.
MANIFEST_KEYS = frozenset({"name", "config_hash", "seed", "years", "decision_maker",
                           "n_agent_rows"})
#: Prefix of the temporary files a run writes before renaming them into place.
TMP_PREFIX = ".tmp-"


def partial_dir(out_dir: Path) -> Path:
    """The working directory of a run that has not finished (``<out_dir>.partial``)."""
    out_dir = Path(out_dir)
    return out_dir.with_name(out_dir.name + ".partial")


def lock_path(out_dir: Path) -> Path:
    """The lock file of a run directory (``<out_dir>.lock``, beside it)."""
    out_dir = Path(out_dir)
    return out_dir.with_name(out_dir.name + ".lock")


def check_out_dir(out_dir: str | Path, cwd: Path | None = None) -> Path:
    """Resolve a run directory and refuse places a run must never write to or delete.

    Args:
        out_dir: The requested run directory (``--out`` or ``outputs/<name>``).
        cwd: The working directory (default: the current one).

    Returns:
        The resolved, absolute run directory.

    Raises:
        ConfigError: the directory is the working directory or a parent of it, the home
            directory, a filesystem root, or an existing non-directory.
    """
    requested = Path(out_dir)
    resolved = requested.expanduser().resolve()
    cwd = (cwd or Path.cwd()).resolve()
    if resolved == Path(resolved.anchor) or resolved == _home():
        raise ConfigError(f"--out {str(requested)!r}: resolves to {resolved}, a filesystem root "
                          "or the home directory; choose a run directory of its own")
    if resolved == cwd or resolved in cwd.parents:
        raise ConfigError(
            f"--out {str(requested)!r}: resolves to {resolved}, which is the working directory "
            f"or a parent of it; a run directory must be a folder of its own, e.g. "
            f"outputs/<name>")
    for path in (resolved, partial_dir(resolved)):
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            raise ConfigError(f"--out {str(requested)!r}: {path} exists and is not a directory "
                              "(or is a symbolic link); choose another --out")
    return resolved


def _home() -> Path | None:
    """The resolved home directory (None when the system cannot tell)."""
    try:
        return Path.home().resolve()
    except RuntimeError:
        return None


def describe_foreign(path: Path, *, finished: bool) -> str | None:
    """Why ``path`` is not recognisably one run of ours (None: it is one).

    Args:
        path: An existing directory.
        finished: True for a finished run directory (needs our ``manifest.json``), False for
            a ``.partial`` working directory (may hold only run files and checkpoints).
    """
    names = sorted(os.listdir(path))
    strangers = [n for n in names
                 if n not in RUN_FILES and n not in RUN_FOLDERS and not n.startswith(TMP_PREFIX)]
    strangers += [n for n in names if n in RUN_FOLDERS and not (path / n).is_dir()]
    strangers += [n for n in names if (path / n).is_symlink()]
    if strangers:
        shown = ", ".join(sorted(set(strangers))[:5])
        return f"it holds {len(set(strangers))} entr(y/ies) a run does not write ({shown})"
    if finished and names:  # an empty directory holds nothing to lose
        return _manifest_problem(path / "manifest.json")
    return None


def _manifest_problem(manifest: Path) -> str | None:
    if not manifest.is_file():
        return "it has no manifest.json"
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return "its manifest.json is not readable JSON"
    if not isinstance(data, dict) or not MANIFEST_KEYS <= set(data):
        return "its manifest.json is not one governed_broker writes"
    return None


def require_own_run(path: Path, *, finished: bool, action: str) -> None:
    """Raise ``ConfigError`` unless ``path`` is recognisably one run of ours.

    Args:
        path: An existing directory.
        finished: See ``describe_foreign``.
        action: What would be done to it, for the message (e.g. "replace").
    """
    problem = describe_foreign(path, finished=finished)
    if problem is not None:
        raise ConfigError(
            f"refusing to {action} {path}: it does not look like one governed_broker run "
            f"({problem}); nothing was changed. Choose another --out, or move it away yourself")


def remove_run_dir(path: Path, *, finished: bool) -> None:
    """Delete a run directory after checking it is one of ours (never follows symlinks)."""
    if path.is_symlink():
        raise ConfigError(f"refusing to delete {path}: it is a symbolic link")
    require_own_run(path, finished=finished, action="delete")
    shutil.rmtree(path)


def remove_leftovers(work: Path) -> None:
    """Delete the temporary files a killed run left in ``work``.

    The ``.tmp-*`` files in ``work`` and its ``memories/`` (half-written files never renamed into
    place); never follows symlinks.
    """
    for folder in (work, work / "memories"):
        if folder.is_symlink() or not folder.is_dir():
            continue
        for entry in os.scandir(folder):
            if not entry.name.startswith(TMP_PREFIX):
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``path`` through a temporary file renamed into place (never half-written)."""
    tmp = path.with_name(TMP_PREFIX + path.name)
    mode = "wb" if isinstance(data, bytes) else "w"
    with open(tmp, mode, **({} if isinstance(data, bytes) else {"encoding": "utf-8"})) as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class RunLock:
    """An exclusive, non-blocking ``flock`` on ``<out>.lock`` for the duration of a run.

    The lock file holds the PID of its holder (for the refusal message) and is removed on
    release. A holder re-checks after locking that the file it locked is still the one on disk,
    so a run that loses the race against a release-and-unlink tries again instead of holding a
    lock nobody else can see.
    """

    def __init__(self, out_dir: Path) -> None:
        self.path = lock_path(out_dir)
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise ``ConfigError`` naming the process that holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for _ in range(10):
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                    raise
                raise ConfigError(
                    f"another run is writing to {self.path.with_suffix('')} (lock {self.path} "
                    f"held by PID {self._holder()}); wait for it to finish or choose another "
                    "--out") from None
            if self._same_file(fd):
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                self._fd = fd
                return
            os.close(fd)  # the file was released and unlinked meanwhile: lock the new one
        raise ConfigError(f"cannot lock {self.path}: it keeps being replaced")

    def release(self) -> None:
        """Remove the lock file and release the lock (idempotent)."""
        if self._fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)  # while still locked: nobody can take it between
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def _open(self) -> int:
        # O_NOFOLLOW: a symbolic link planted as <out>.lock must not make the PID written below
        # truncate whatever file it points to
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
                raise
            raise ConfigError(f"cannot lock {self.path}: it exists and is not a regular file "
                              "(a symbolic link or a folder); move it away") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise ConfigError(f"cannot lock {self.path}: it exists and is not a regular file; "
                              "move it away")
        return fd

    def _same_file(self, fd: int) -> bool:
        try:
            on_disk = os.stat(self.path)
        except FileNotFoundError:
            return False
        mine = os.fstat(fd)
        return (on_disk.st_dev, on_disk.st_ino) == (mine.st_dev, mine.st_ino)

    def _holder(self) -> str:
        try:
            text = self.path.read_text(encoding="ascii", errors="replace").strip()
        except OSError:
            return "unknown"
        return text if text.isdigit() else "unknown"

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
