"""The identity of a run's inputs: one hash over the settings and the files they name.

``config_hash`` decides whether an unfinished run may be resumed and whether a sweep run is
already done, so it must change whenever anything that can change the outputs changes: every
setting, and the *contents* of every input file (agent types, damage table, population CSV,
hazard schedule, prompt templates, knowledge documents, concepts graph, scripted replies).
Settings that cannot change the outputs are left out (``OPERATIONAL``): the ``sweep`` block
(it describes the ensemble, not the run), ``calibration`` (the targets runs are scored against),
``limits`` (confirmation thresholds), ``validity`` (whether a run may start, not what it
writes), ``cohort`` when it is off and the settings of ``ADDED_LATER`` at their neutral value
(no ``policy_change``, no ``institutions``, no community discount: runs hash as they did before
these existed), the progress bar, and how the LLM is reached and waited for (hosts,
timeouts, transport retries and their back-off, patience, health checks, model pulls, Ollama's
keep-alive): following a timeout error's advice to raise ``llm.timeout_s`` must not make a
partial run impossible to resume.
Settings that may change a reply (model, sampling, context window, concurrency and threads,
which can change numerics, the cache mode) stay in.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from governed_broker.config.base import ConfigError

if TYPE_CHECKING:  # pragma: no cover
    from governed_broker.config.experiment import ExperimentConfig


def input_paths(config: ExperimentConfig) -> dict[str, Path]:
    """Input files and directories of an experiment, keyed by the path as written."""
    named: list[Path | None] = [
        config.agent_types, config.damage.table, config.population.file, config.hazard.file,
        config.hazard.raster.path if config.hazard.raster is not None else None,
    ]
    if config.memory.engine != "none":
        named += [config.memory.concepts_file, config.memory.texts_file]
    institutions = config.institutions
    if institutions is not None:
        named.append(institutions.domain)
        if institutions.llm_makers:
            named.append(institutions.prompts)
    if config.llm is not None and (config.decision.maker == "llm" or (
            institutions is not None and institutions.llm_makers)):
        named.append(config.llm.script)
    if config.decision.maker == "llm":
        named.append(config.governance.context.prompts_dir)
        if config.rag.enabled:
            named += [config.rag.knowledge_dir, config.rag.topics_file]
    return {str(p): config.resolve_path(p) for p in named if p is not None}


def _file_digests(key: str, path: Path) -> dict[str, str]:
    if path.is_dir():
        return {f"{key}/{f.relative_to(path).as_posix()}": _sha256(f)
                for f in sorted(path.rglob("*")) if f.is_file()}
    if not path.is_file():  # a FIFO would block the hash, a device never end it
        raise ConfigError(f"input {key!r}: {path} is neither a directory nor a regular file")
    return {key: _sha256(path)}


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


#: Settings that cannot change a run's outputs, by section (None: the whole section).
OPERATIONAL: dict[str, tuple[str, ...] | None] = {
    "sweep": None,
    "calibration": None,
    "limits": None,
    "validity": None,
    "outputs": ("progress",),
    "llm": ("hosts", "timeout_s", "retries", "backoff_s", "backoff_max_s", "patience_s",
            "keep_alive", "health_check", "auto_pull"),
}


#: Settings added after runs were first made, at the value that does what runs did before they
#: existed: left out of the hash at that value, so earlier runs keep their identity (resumable
#: partial runs, finished sweep runs).
ADDED_LATER: dict[tuple[str, ...], object] = {
    ("policy_change",): None,
    ("institutions",): None,
    ("insurance", "crs_discount"): 0.0,
}


def run_settings(config: ExperimentConfig) -> dict:
    """The settings that identify a run: everything but ``OPERATIONAL``."""
    settings = config.model_dump(mode="json")
    for section, keys in OPERATIONAL.items():
        if keys is None:
            settings.pop(section, None)
        elif isinstance(settings.get(section), dict):
            for key in keys:
                settings[section].pop(key, None)
    if not settings.get("cohort", {}).get("enabled"):
        settings.pop("cohort", None)  # off: runs hash as they did before cohort mode existed
    for path, default in ADDED_LATER.items():
        *parents, key = path
        node = settings
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and key in node and node[key] == default:
            del node[key]
    return settings


def config_hash(config: ExperimentConfig) -> str:
    """Hex sha256 of the run-relevant settings and the contents of every input file."""
    settings = run_settings(config)
    inputs: dict[str, str] = {}
    for key, path in input_paths(config).items():
        inputs.update(_file_digests(key, path))
    text = json.dumps({"settings": settings, "inputs": inputs}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
