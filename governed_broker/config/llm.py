"""LLM backend settings (owned by the llm package; see README "LLM backends")."""

from __future__ import annotations

from typing import Literal

from governed_broker.config.base import StrictModel


class LLMConfig(StrictModel):
    """Which backend and model to use. Extended by the llm package."""

    backend: Literal["embedded", "ollama", "openai", "scripted"]
    model: str
