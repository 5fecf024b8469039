"""Governance, reflection and knowledge-base settings (owned by the broker/cognition/rag code)."""

from __future__ import annotations

from typing import Literal

from governed_broker.config.base import StrictModel


class GovernanceConfig(StrictModel):
    """Governance profile and retry budgets. Extended by the broker package."""

    profile: Literal["strict", "relaxed", "disabled"] = "strict"
    max_retries: int = 3


class ReflectionConfig(StrictModel):
    """Yearly reflection (LLM insights). Extended by the cognition package."""

    enabled: bool = False


class RAGConfig(StrictModel):
    """Knowledge base retrieval. Extended by the rag package."""

    enabled: bool = False
