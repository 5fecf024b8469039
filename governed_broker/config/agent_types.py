"""The behavioural domain in ``agent_types.yaml``: actions, PMT labels, memory and governance.

``actions`` and ``pmt_labels`` are validated here; the optional ``memory`` and ``governance``
sections by ``config.memory.MemoryParams`` and ``config.broker.GovernanceRules``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import Field, field_validator, model_validator

from governed_broker.config.base import ConfigError, StrictModel, excerpt, printable
from governed_broker.config.broker import GovernanceRules
from governed_broker.config.memory import MemoryParams
from governed_broker.contracts.effects import NO_EFFECT, check_effect

Tenure = Literal["owner", "renter"]


class ActionSpec(StrictModel):
    """One action households may take.

    Attributes:
        description: Plain-language description (used in prompts).
        tenure: Who may take it.
        duration: ``annual`` (lasts a year, must be re-chosen), ``once`` (then permanent) or
            ``permanent`` (ends participation).
        effect: What the world executes: a name of ``contracts.effects.EFFECTS`` (``none``,
            ``insure``, ``elevate`` or ``relocate``), or several joined by ``+``
            (``elevate+insure``: both in the same year, costs summed).
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
        try:
            check_effect(name)
        except ValueError as exc:
            raise ValueError(printable(str(exc), 300)) from None
        return name


#: A label as it appears in prompts, replies, rules and tables: short, no spaces or ``|``.
_LABEL_PATTERN = r"^[A-Za-z][A-Za-z0-9_+-]{0,15}$"


def _word_key(text: str) -> str:
    """How a written label word is compared: case, spaces, hyphens and underscores ignored."""
    return re.sub(r"[\s\-_]+", "", text.lower())


def scale_halves(labels: Sequence[str]) -> tuple[frozenset[str], frozenset[str]]:
    """The low and the high labels of an ordered appraisal scale.

    The lower ``n // 2`` labels are low and the upper ``n // 2`` are high; with an odd number
    of labels the middle one is neither (on ``VL L M H VH``: low ``VL, L``, high ``H, VH``).
    Analysis (PMT coherence) and the validity checks judge labels by these halves, so a
    domain with another scale needs no code.
    """
    half = len(labels) // 2
    return frozenset(labels[:half]), frozenset(labels[len(labels) - half:])


class PMTLabels(StrictModel):
    """The appraisal scale: its labels, what they mean, and how scores map onto them.

    Every part of a run reads the scale from here: the reply schema and the prompt's scale
    line (``$pmt_scale``, ``$pmt_labels`` in ``household.yaml``), the tolerant reply parser,
    the governance rules' ``threat``/``coping`` tests, the baseline's score -> label map and
    the analysis (through the run's manifest).

    Attributes:
        thresholds: Exclusive upper bounds (scores 0..1) of all labels but the last, strictly
            increasing inside (0, 1) (the baseline decision maker's map).
        labels: The labels, lowest first; one more than ``thresholds``.
        words: For every label, the words it stands for. The first is what the prompt says it
            means (``VL = very low``); any of them written instead of the label by a model is
            read as the label and recorded as a repair (case, spaces, hyphens and underscores
            do not matter).
    """

    thresholds: list[float] = Field(min_length=1)
    labels: list[Annotated[str, Field(pattern=_LABEL_PATTERN)]] = Field(min_length=2)
    words: dict[str, list[Annotated[str, Field(min_length=1, max_length=40)]]]

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
        if len(set(self.labels)) != len(self.labels):
            raise ValueError(f"labels must be distinct, got {excerpt(str(self.labels))}")
        self._check_words()
        return self

    def _check_words(self) -> None:
        if set(self.words) != set(self.labels):
            missing = [x for x in self.labels if x not in self.words]
            extra = [x for x in self.words if x not in self.labels]
            raise ValueError(f"words needs one entry per label; missing {missing}, "
                             f"not a label {extra}")
        seen: dict[str, str] = {}
        for label in self.labels:
            if not self.words[label]:
                raise ValueError(f"words.{label} needs at least one word")
            for word in self.words[label]:
                other = seen.setdefault(_word_key(word), label)
                if other != label:
                    raise ValueError(f"the word {word!r} stands for both {other} and {label}")

    def label(self, score: float) -> str:
        """The label of one score."""
        return self.labels[int(np.searchsorted(self.thresholds, score, side="right"))]

    def label_array(self, scores: Sequence[float] | np.ndarray) -> np.ndarray:
        """Labels for an array of scores (vectorised)."""
        idx = np.searchsorted(np.asarray(self.thresholds), np.asarray(scores), side="right")
        return np.asarray(self.labels, dtype=object)[idx]

    def prompt_scale(self) -> str:
        """The scale as the prompt states it: ``VL = very low, L = low, ...``."""
        return ", ".join(f"{label} = {self.words[label][0]}" for label in self.labels)

    def choices(self) -> str:
        """The labels as the reply format lists them: ``VL|L|M|H|VH``."""
        return "|".join(self.labels)

    def read_word(self, text: str) -> str | None:
        """The label a written word stands for (``"Very High"`` -> ``VH``), else None."""
        key = _word_key(text)
        for label in self.labels:
            if any(_word_key(w) == key for w in self.words[label]):
                return label
        return None


def check_action_ids(named: Mapping[str, Iterable[str]], actions: Iterable[str],
                     source: Path | str, domain_file: Path | str) -> None:
    """Every action id a YAML file names is an action of the domain.

    Args:
        named: Per place in ``source`` (``topic 'elevation'``), the action ids it names.
        actions: The domain's action ids.
        source: The file that names them.
        domain_file: The ``agent_types.yaml`` they must be actions of.

    Raises:
        ConfigError: One message naming ``source``, each place and its unknown ids.
    """
    known = list(actions)
    problems = [f"{where} names {sorted(set(ids) - set(known))}"
                for where, ids in named.items() if set(ids) - set(known)]
    if problems:
        raise ConfigError(f"{source}: {'; '.join(problems)}, which {domain_file} does not have "
                          f"(its actions: {', '.join(known)}); rename them in {source} too")


class AgentTypesConfig(StrictModel):
    """The validated ``agent_types.yaml``."""

    actions: dict[str, ActionSpec] = Field(min_length=1)
    pmt_labels: PMTLabels
    memory: MemoryParams | None = None
    governance: GovernanceRules | None = None

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

    @model_validator(mode="after")
    def _rule_labels_on_scale(self) -> AgentTypesConfig:
        for rule in self.governance.rules if self.governance is not None else []:
            for part in ("threat", "coping"):
                off = [x for x in getattr(rule.when, part) or [] if x not in self.pmt_labels.labels]
                if off:
                    listed = excerpt(", ".join(off))
                    raise ValueError(
                        f"governance rule {rule.id!r}: when.{part} label(s) {listed} are not on "
                        f"the pmt_labels scale {self.pmt_labels.labels}"
                    )
        return self

    @model_validator(mode="after")
    def _rules_name_actions(self) -> AgentTypesConfig:
        if self.governance is not None:
            self.governance.check_actions(self.actions)
        return self

    @property
    def default_action(self) -> str:
        """Id of the default action."""
        return next(a for a, spec in self.actions.items() if spec.default)

    def actions_with_effect(self, effect: str) -> list[str]:
        """Ids of the actions with a given effect, in file order."""
        return [a for a, spec in self.actions.items() if spec.effect == effect]
