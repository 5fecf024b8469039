"""The behavioural domain in ``agent_types.yaml``: actions, PMT labels, memory and governance.

``actions`` and ``pmt_labels`` are validated here. The optional ``memory`` and ``governance``
sections are validated by the models their packages define (``config.memory.MemoryParams`` and
``config.broker.GovernanceRules``), imported when those models exist.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from governed_broker.config.base import StrictModel, excerpt
from governed_broker.contracts.effects import EFFECTS, NO_EFFECT

Tenure = Literal["owner", "renter"]


class ActionSpec(StrictModel):
    """One action households may take.

    Attributes:
        description: Plain-language description (used in prompts).
        tenure: Who may take it.
        duration: ``annual`` (lasts a year, must be re-chosen), ``once`` (then permanent) or
            ``permanent`` (ends participation).
        effect: What the world executes: a name of ``contracts.effects.EFFECTS`` (``none``,
            ``insure``, ``elevate`` or ``relocate``).
        default: The action executed when a decision is infeasible or rejected (exactly one).
        concept: The semantic-memory concept of the measure (``configs/knowledge/
            flood_concepts.yaml``) whose facts households recall when deciding (None: none).
    """

    description: str = Field(min_length=1)
    tenure: list[Tenure] = Field(min_length=1)
    duration: Literal["annual", "once", "permanent"]
    effect: str
    default: bool = False
    concept: str | None = None

    @field_validator("effect")
    @classmethod
    def _known_effect(cls, name: str) -> str:
        if name not in EFFECTS:
            raise ValueError(f"unknown effect {excerpt(name)}; known: {', '.join(EFFECTS)}")
        return name


class PMTLabels(StrictModel):
    """Maps continuous appraisals (0..1) to labels.

    ``thresholds`` are the exclusive upper bounds of all labels but the last, strictly
    increasing inside (0, 1); ``labels`` has one more entry than ``thresholds``.
    """

    thresholds: list[float] = Field(min_length=1)
    labels: list[str] = ["VL", "L", "M", "H", "VH"]

    @model_validator(mode="after")
    def _consistent(self) -> PMTLabels:
        t = self.thresholds
        if any(not 0.0 < x < 1.0 for x in t) or any(b <= a for a, b in zip(t, t[1:], strict=False)):
            raise ValueError(f"thresholds must be strictly increasing within (0, 1), got "
                             f"{excerpt(str(t))}")
        if len(self.labels) != len(t) + 1:
            raise ValueError(
                f"labels needs len(thresholds)+1 = {len(t) + 1} entries, got {len(self.labels)}"
            )
        return self

    def label(self, score: float) -> str:
        """The label of one score."""
        return self.labels[int(np.searchsorted(self.thresholds, score, side="right"))]

    def label_array(self, scores: Sequence[float] | np.ndarray) -> np.ndarray:
        """Labels for an array of scores (vectorised)."""
        idx = np.searchsorted(np.asarray(self.thresholds), np.asarray(scores), side="right")
        return np.asarray(self.labels, dtype=object)[idx]


def _validate_with(module: str, cls_name: str, value: Any) -> Any:
    """Validate ``value`` with ``module.cls_name`` when that model exists, else keep the dict.

    The memory and broker packages define these models; until they do, the section is kept as
    a plain mapping (it is validated as soon as the model is importable).
    """
    if value is None:
        return None
    try:
        cls = getattr(importlib.import_module(module), cls_name)
    except (ImportError, AttributeError):
        if not isinstance(value, dict):
            raise ValueError(f"must be a mapping, got {type(value).__name__}") from None
        return value
    return cls.model_validate(value)


class AgentTypesConfig(StrictModel):
    """The validated ``agent_types.yaml``."""

    actions: dict[str, ActionSpec] = Field(min_length=1)
    pmt_labels: PMTLabels
    memory: Any = None
    governance: Any = None

    @field_validator("memory", mode="before")
    @classmethod
    def _memory(cls, value: Any) -> Any:
        return _validate_with("governed_broker.config.memory", "MemoryParams", value)

    @field_validator("governance", mode="before")
    @classmethod
    def _governance(cls, value: Any) -> Any:
        return _validate_with("governed_broker.config.broker", "GovernanceRules", value)

    @model_validator(mode="after")
    def _one_default(self) -> AgentTypesConfig:
        defaults = [a for a, spec in self.actions.items() if spec.default]
        if len(defaults) != 1:
            raise ValueError(
                f"exactly one action must have 'default: true', found {len(defaults)}: {defaults}"
            )
        default = self.actions[defaults[0]]
        if default.effect != NO_EFFECT or set(default.tenure) != {"owner", "renter"}:
            raise ValueError(
                f"the default action '{defaults[0]}' must have effect '{NO_EFFECT}' and be open to "
                "owners and renters (it is what infeasible decisions fall back to)"
            )
        return self

    @property
    def default_action(self) -> str:
        """Id of the default action."""
        return next(a for a, spec in self.actions.items() if spec.default)

    def actions_with_effect(self, effect: str) -> list[str]:
        """Ids of the actions with a given effect, in file order."""
        return [a for a, spec in self.actions.items() if spec.effect == effect]
