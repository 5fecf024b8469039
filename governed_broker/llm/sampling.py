"""The sampling settings a run uses: the experiment's ``llm:`` keys over the model's defaults.

A catalogue model (``models.yaml``) carries the sampling settings measured to suit it
(``sampling:``); any of ``llm.temperature``, ``llm.top_p``, ``llm.top_k``, ``llm.min_p`` set in the
experiment wins over them. A model outside the catalogue (a local GGUF, an Ollama tag, a vLLM
model) gets temperature 0.7 and the server's own defaults for the rest.
"""

from __future__ import annotations

from dataclasses import fields, replace

from governed_broker.config.llm import LLMConfig
from governed_broker.llm.base import Sampling
from governed_broker.llm.catalogue import default_model_name, get_model_spec

#: Temperature of models the catalogue does not describe. source: the measurement protocol of
#: docs/llm_backends.md ("Measurements behind the defaults").
DEFAULT_TEMPERATURE = 0.7


def model_sampling(cfg: LLMConfig) -> Sampling:
    """The defaults of the configured model.

    The catalogue's for an embedded catalogue model, else temperature ``DEFAULT_TEMPERATURE`` and
    nothing else set.
    """
    if cfg.backend == "embedded" and cfg.model_path is None:
        return get_model_spec(cfg.model or default_model_name()).sampling
    return Sampling(temperature=DEFAULT_TEMPERATURE)


def resolve_sampling(cfg: LLMConfig) -> Sampling:
    """The sampling settings requests of this ``llm`` section carry.

    The model's defaults (``model_sampling``) with every setting the experiment gives put over them.

    Raises:
        LLMError: An embedded model name that is not in the catalogue.
    """
    given = {f.name: getattr(cfg, f.name) for f in fields(Sampling)
             if getattr(cfg, f.name) is not None}
    return replace(model_sampling(cfg), **given)
