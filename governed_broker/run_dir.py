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
  (``kill -9`` included), so an interrupted run can always be resumed. A lock file deleted or
  replaced while its run writes (``rm`` on a shared node) no longer excludes anyone: the holder
  checks that its lock is still the file on disk before each year, each checkpoint and
  publishing (``RunLock.verify``) and stops with ``LockLostError`` otherwise.
* **Outputs as written** (``output_problems``): the manifest records the size and sha256 of
  every output table and audit file as the run wrote them and the number of agent rows; a run
  is published, and a sweep counts it done, only when the files on disk still match.
"""

from __future__ import annotations

import csv
import errno
import fcntl
import hashlib
import json
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

from governed_broker.config.base import ConfigError, excerpt

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
    _check_name_lengths(requested, resolved)
    for path in (resolved, partial_dir(resolved)):
        if path.is_symlink() or (path.exists() and not path.is_dir()):
            raise ConfigError(f"--out {str(requested)!r}: {path} exists and is not a directory "
                              "(or is a symbolic link); choose another --out")
    return resolved


#: Longest file name (bytes) and path (bytes) most file systems take (Linux NAME_MAX and
#: PATH_MAX less room for what a run writes inside its directory).
NAME_MAX_BYTES, PATH_MAX_BYTES = 255, 3800
#: The longest suffix a run adds to its directory's name (``<out>.partial``).
_SUFFIX = ".partial"


def _check_name_lengths(requested: Path, resolved: Path, flag: str = "--out") -> None:
    """Refuse, before anything is created, a name or path no file system holds.

    The name is checked with ``.partial`` added, as the run's working directory has it.
    """
    longest = NAME_MAX_BYTES - len(_SUFFIX)
    for part in resolved.parts:
        size = len(os.fsencode(part))
        if size > longest:
            raise ConfigError(
                f"{flag} {excerpt(str(requested), 60)}: the name {excerpt(part, 40)} has "
                f"{size} bytes; a file system takes at most {NAME_MAX_BYTES}, and a run "
                f"adds '{_SUFFIX}', so a run directory's name may have at most {longest}")
    if len(os.fsencode(str(resolved))) > PATH_MAX_BYTES:
        raise ConfigError(f"{flag} {excerpt(str(requested), 60)}: the path is longer than the "
                          f"{PATH_MAX_BYTES} bytes a run directory may have; choose a shorter one")


def create_out_dir(path: Path, flag: str = "--out") -> None:
    """Create a directory (and its parents) given on the command line.

    Raises:
        ConfigError: naming ``flag``, when no file system can hold its name or it cannot be
            created there (``/proc``, a read-only disk).
    """
    path = Path(path)
    _check_name_lengths(path, path.expanduser().resolve(), flag)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{flag} {path}: cannot create {exc.filename or path} "
                          f"({exc.strerror or exc}); choose a directory you may write to"
                          ) from None


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


class LockLostError(RuntimeError):
    """The run's lock file was deleted or replaced while it ran.

    Another run may now write into the same directory, so this one stops without writing or
    publishing more.
    """


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
        """Take the lock.

        Raises:
            ConfigError: naming the process that holds it, or saying why the lock cannot be
                created where ``--out`` points (the first file a run creates).
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._take()
        except OSError as exc:
            raise ConfigError(
                f"--out {self.path.with_suffix('')}: cannot create {exc.filename or self.path} "
                f"({exc.strerror or exc}); choose a directory you may write to") from None

    def _take(self) -> None:
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

    def verify(self) -> None:
        """Check that the lock file on disk is still the one this run locked.

        Raises:
            LockLostError: it was deleted or replaced (and so excludes no other run).
        """
        if self._fd is not None and self._same_file(self._fd):
            return
        out = self.path.with_suffix("")
        raise LockLostError(
            f"the lock {self.path} was deleted or replaced while this run was writing, so "
            f"another run may now be writing to {out}; this run stopped without writing more "
            f"or publishing. Look at {out} (or {partial_dir(out)}) once no run is writing "
            "there, and resume or re-run it; never delete the lock file of a running run")

    def release(self) -> None:
        """Remove the lock file, if it is still this run's, and release the lock.

        Idempotent.
        """
        if self._fd is None:
            return
        try:
            if self._same_file(self._fd):  # another run's lock file is left alone
                self.path.unlink(missing_ok=True)  # while still locked: nobody takes it between
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


#: Output files whose size and sha256 the manifest records (``output_problems``).
VERIFIED_OUTPUTS = ("agents_yearly.csv", "model_yearly.csv", "decisions.jsonl",
                    "reflections.jsonl", "cohorts.jsonl", "institutions_yearly.csv",
                    "institutions.jsonl")
#: The agent table, whose data rows the manifest counts (``n_agent_rows``).
AGENT_TABLE = "agents_yearly.csv"


def output_problems(run: Path, manifest: dict) -> list[str]:
    """How the outputs in ``run`` differ from what its manifest says the run wrote.

    A recorded file missing, of another size or sha256, and the agent table's data rows
    against ``n_agent_rows`` (an empty list: they match). Manifests written before sizes and
    digests were recorded are checked on rows only. Each file is read once.

    Args:
        run: A run directory (or a ``.partial`` one about to be published).
        manifest: Its ``manifest.json`` (or the manifest about to be written).
    """
    problems = []
    recorded = manifest.get("outputs")
    scans: dict[str, _Scan] = {}
    for name, expected in (recorded if isinstance(recorded, dict) else {}).items():
        if name not in VERIFIED_OUTPUTS:  # never a path a forged manifest chose
            problems.append(f"the manifest records an unknown output {excerpt(name, 40)!r}")
            continue
        if not (run / name).is_file():
            problems.append(f"{name} is missing")
            continue
        scan = scans[name] = _Scan.of(run / name)
        if not isinstance(expected, dict) or (scan.size, scan.sha256) != (
                expected.get("bytes"), expected.get("sha256")):
            wrote = expected if isinstance(expected, dict) else {}
            problems.append(f"{name} has {scan.size:,} bytes (sha256 {scan.sha256[:12]}...), "
                            f"the run wrote {wrote.get('bytes')} (sha256 "
                            f"{str(wrote.get('sha256'))[:12]}...)")
    path = run / AGENT_TABLE
    rows = None if not path.is_file() else scans.get(AGENT_TABLE, _Scan.of(path)).data_rows(path)
    if rows != manifest.get("n_agent_rows"):
        problems.append(f"{AGENT_TABLE} has {rows} data rows, the manifest "
                        f"{manifest.get('n_agent_rows')} (n_agent_rows)")
    return problems


@dataclass(frozen=True)
class _Scan:
    """One pass over a file.

    Its size, sha256, line breaks, whether a quote occurs and whether its last line is cut
    short (no final line break).
    """

    size: int
    sha256: str
    breaks: int
    quoted: bool
    unterminated: bool

    @classmethod
    def of(cls, path: Path) -> _Scan:
        digest, size, breaks, quoted, last = hashlib.sha256(), 0, 0, False, b"\n"
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
                size += len(block)
                breaks += block.count(b"\n")
                quoted = quoted or b'"' in block
                last = block[-1:]
        return cls(size, digest.hexdigest(), breaks, quoted, size > 0 and last != b"\n")

    def data_rows(self, path: Path) -> int:
        """Data rows of the CSV file (with a header) it scanned.

        A line cut short counts, as a CSV reader reads it; a file with quoted fields (which
        may hold line breaks) is read as CSV.
        """
        if self.quoted:
            with open(path, encoding="utf-8", errors="replace", newline="") as f:
                return max(0, sum(1 for _ in csv.reader(f)) - 1)
        return max(0, self.breaks + int(self.unterminated) - 1)
