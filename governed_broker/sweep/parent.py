"""The parent of a branch.

A finished run, or a finished sweep of replicate seeds of one configuration, whose configuration
still resolves to what it ran.

``governed-broker branch`` re-simulates the parent's years before the policy change in every
arm, so the parent's saved ``config.yaml`` must re-load, against the folder its manifest
records (``config_base_dir``: relative paths are kept as written), to the manifest's
``config_hash``. When it does not (an input file was edited, or this version of governed_broker
resolves the settings differently), the arms could not share the parent's history and the
branch is refused (``ConfigError``, exit 2) with what differs.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from governed_broker.config import ConfigError, ExperimentConfig, load_experiment
from governed_broker.config.hashing import config_hash, input_paths
from governed_broker.config.yamlsafe import read_yaml
from governed_broker.run_dir import MANIFEST_KEYS, partial_dir
from governed_broker.sweep.collect import index_frame, load_plan
from governed_broker.sweep.plan import run_config
from governed_broker.sweep.state import DONE, SweepDir

#: Files every finished run holds that a branch reads.
RUN_FILES = ("manifest.json", "config.yaml", "agents_yearly.csv", "model_yearly.csv")
#: Keys of the manifest a branch needs beyond those every manifest has.
BRANCH_MANIFEST_KEYS = MANIFEST_KEYS | {"config_base_dir", "started_at"}
#: An arm name: what a sweep case name may be.
_CASE_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class ParentRun:
    """One finished run of the parent.

    Attributes:
        path: Its run directory.
        seed: Its experiment seed (the arms' replicate with this seed is compared with it).
        config_hash: The ``config_hash`` its manifest records.
    """

    path: Path
    seed: int
    config_hash: str


@dataclass(frozen=True)
class Parent:
    """What is branched.

    Attributes:
        path: ``RUN_DIR``, resolved.
        kind: ``run`` (one run directory) or ``sweep`` (a sweep directory of replicate seeds).
        config_file: The ``config.yaml`` the arms are loaded from (a sweep's first run's; the
            other runs differ from it only in their seed).
        base_dir: The folder its relative paths resolve against (manifest ``config_base_dir``).
        config: The re-loaded configuration of the first run (verified against its hash).
        runs: Its runs, in the parent's order (one for a run directory).
    """

    path: Path
    kind: str
    config_file: Path
    base_dir: Path
    config: ExperimentConfig
    runs: tuple[ParentRun, ...]

    @property
    def name(self) -> str:
        """The reference arm's name: the parent directory's name as a sweep case name."""
        return _CASE_CHARS.sub("_", self.path.name).strip("_.-") or "parent"

    @property
    def years(self) -> int:
        """Simulated years of every run of the parent."""
        return self.config.years

    def to_json(self) -> dict[str, Any]:
        """The parent as ``branch.json`` records it."""
        return {
            "path": str(self.path),
            "kind": self.kind,
            "name": self.config.name,
            "config_file": str(self.config_file),
            "config_base_dir": str(self.base_dir),
            "years": self.years,
            "runs": [{"path": str(r.path), "seed": r.seed, "config_hash": r.config_hash}
                     for r in self.runs],
        }


def read_parent(run_dir: str | Path) -> Parent:
    """Read and check the parent of a branch.

    Args:
        run_dir: A finished run directory, or a finished sweep directory whose runs are one
            configuration with different seeds.

    Raises:
        ConfigError: not a finished run or sweep of ours, runs that differ in more than their
            seed, or a configuration that no longer resolves to the hash it ran with.
    """
    path = Path(run_dir).expanduser().resolve()
    if not path.is_dir():
        if partial_dir(path).is_dir():
            raise ConfigError(f"RUN_DIR {run_dir}: the run has not finished ({partial_dir(path)} "
                              "holds it); finish it with the command that started it first")
        raise ConfigError(f"RUN_DIR {run_dir}: no such directory")
    if SweepDir(path).plan_file.is_file():
        return _sweep_parent(path)
    manifest = read_manifest(path, f"RUN_DIR {run_dir}")
    config_file, base_dir = path / "config.yaml", Path(manifest["config_base_dir"])
    config = reload_config(config_file, base_dir, manifest, [])
    run = ParentRun(path, int(manifest["seed"]), manifest["config_hash"])
    return _checked(Parent(path, "run", config_file, base_dir, config, (run,)))


def read_manifest(run: Path, where: str) -> dict[str, Any]:
    """The manifest of a finished run of ours, with the files a branch reads present.

    Raises:
        ConfigError: unfinished, not ours, or a file missing.
    """
    manifest_path = run / "manifest.json"
    if not manifest_path.is_file():
        unfinished = partial_dir(run).is_dir() or (run / "checkpoints").is_dir()
        raise ConfigError(
            f"{where}: " + ("the run has not finished; finish it first" if unfinished else
                            "not a finished governed_broker run (no manifest.json); pass a "
                            "directory written by `governed-broker run` or `sweep`"))
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{where}: {manifest_path} is not readable JSON ({exc})") from exc
    missing_keys = sorted(BRANCH_MANIFEST_KEYS - set(manifest)) if isinstance(
        manifest, dict) else sorted(BRANCH_MANIFEST_KEYS)
    if missing_keys:
        raise ConfigError(f"{where}: {manifest_path} is not the manifest of a finished "
                          f"governed_broker run (missing {', '.join(missing_keys)})")
    missing = [name for name in RUN_FILES if not (run / name).is_file()]
    if missing:
        raise ConfigError(f"{where}: the run lacks {', '.join(missing)}; a branch compares its "
                          "arms with these files")
    return manifest


def reload_config(config_file: Path, base_dir: Path, manifest: dict[str, Any],
                  overrides: list[str]) -> ExperimentConfig:
    """A run's saved configuration, re-loaded and checked against its manifest's hash.

    Raises:
        ConfigError: it no longer loads, or it resolves to another hash (what differs is said).
    """
    try:
        config = run_config(load_experiment(config_file, overrides, base_dir=base_dir))
    except ConfigError as exc:
        raise ConfigError(
            f"{config_file} no longer loads with relative paths against {base_dir} ({exc}); "
            "the branch could not share the parent's history") from exc
    now = config_hash(config)
    if now != manifest["config_hash"]:
        raise ConfigError(
            f"{config_file.parent}: its configuration now resolves to config hash {now[:12]}, "
            f"not the {manifest['config_hash'][:12]} it ran with: "
            f"{explain_difference(config_file, config, manifest)}. The branch could not share "
            "the parent's history (its arms would not re-simulate the parent's years); restore "
            "the inputs, or run the parent again and branch the new run")
    return config


def explain_difference(config_file: Path, config: ExperimentConfig,
                       manifest: dict[str, Any]) -> str:
    """What differs between a run's configuration now and when it ran, as far as can be told.

    The manifest records only the hash, so: settings that re-load differently from the saved
    ``config.yaml`` (a newer governed_broker with other defaults), and input files modified
    after the run started.
    """
    saved = read_yaml(config_file)
    changed = _differing_paths(saved if isinstance(saved, dict) else {},
                               config.model_dump(mode="json"))
    reasons = []
    if changed:
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5
                                          else "")
        version = (manifest.get("packages") or {}).get("governed-broker")
        reasons.append(f"its settings re-load differently ({shown}; it ran with governed_broker "
                       f"{version or 'of unknown version'})")
    started = datetime.fromisoformat(manifest["started_at"]).timestamp()
    modified = [str(f) for f in _input_files(config) if f.stat().st_mtime > started]
    if modified:
        shown = ", ".join(modified[:5]) + (f" and {len(modified) - 5} more"
                                           if len(modified) > 5 else "")
        reasons.append(f"input file(s) modified after it started ({manifest['started_at']}): "
                       f"{shown}")
    return "; ".join(reasons) or (
        "the contents of an input file differ from when it ran (none was modified after it "
        "started, so the file cannot be named)")


def _input_files(config: ExperimentConfig) -> list[Path]:
    files: list[Path] = []
    for path in input_paths(config).values():
        if path.is_dir():
            files += sorted(f for f in path.rglob("*") if f.is_file())
        elif path.is_file():
            files.append(path)
    return files


def _differing_paths(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted paths whose values differ between two JSON-like trees."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in [*old, *(k for k in new if k not in old)]:
            out += _differing_paths(old.get(key), new.get(key), f"{prefix}{key}.")
        return out
    return [] if old == new else [prefix.rstrip(".")]


def _sweep_parent(path: Path) -> Parent:
    """A finished sweep whose runs are one configuration with different seeds."""
    sweep_dir = SweepDir(path)
    plan = load_plan(sweep_dir)
    index = index_frame(sweep_dir, plan).drop_duplicates("run_id")
    unfinished = index[index["status"] != DONE]
    if len(unfinished):
        raise ConfigError(
            f"RUN_DIR {path}: the sweep has not finished ({len(unfinished)} of {len(index)} runs "
            f"not done, e.g. {unfinished['run_id'].iloc[0]}: {unfinished['status'].iloc[0]}); "
            "re-submit it until `governed-broker status` says every run is done")
    run_dirs = [sweep_dir.run_dir(str(r)) for r in index["run_id"]]
    manifests = [read_manifest(r, f"RUN_DIR {path}: run {r.name}") for r in run_dirs]
    first, base_dir = run_dirs[0] / "config.yaml", Path(manifests[0]["config_base_dir"])
    config = reload_config(first, base_dir, manifests[0], [])
    runs = []
    for run_dir, manifest in zip(run_dirs, manifests, strict=True):
        seed = int(manifest["seed"])
        if config_hash(config.model_copy(update={"seed": seed})) != manifest["config_hash"]:
            own = reload_config(run_dir / "config.yaml", Path(manifest["config_base_dir"]),
                                manifest, [])  # raises when its inputs changed
            changed = _differing_paths(config.model_dump(mode="json"),
                                       own.model_dump(mode="json"))
            raise ConfigError(
                f"RUN_DIR {path}: run {run_dir.name} differs from run {run_dirs[0].name} in more "
                f"than its seed ({', '.join(p for p in changed if p != 'seed')[:300]}); a "
                "branch forks one configuration: branch a sweep of replicate seeds, or each "
                "of its runs")
        runs.append(ParentRun(run_dir, seed, manifest["config_hash"]))
    return _checked(Parent(path, "sweep", first, base_dir, config, tuple(runs)))


def _checked(parent: Parent) -> Parent:
    """Refuse parents a branch cannot pair: repeated seeds, or a policy change of their own."""
    seeds = [r.seed for r in parent.runs]
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        raise ConfigError(f"RUN_DIR {parent.path}: seed(s) {twice} run more than once; the arms "
                          "are paired with the parent by seed")
    change = parent.config.policy_change
    if change is not None:
        raise ConfigError(
            f"RUN_DIR {parent.path}: the parent has a policy_change of its own (from year "
            f"{change.from_year}); an arm's change would replace it, so the arms would not share "
            "its history. Branch a run without one")
    return parent
