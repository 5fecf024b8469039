"""The structured reply of a household's decision (docs/decisions.md "How a decision is made").

A reply is a JSON object::

    {"threat_appraisal": {"label": "H", "reason": "..."},
     "coping_appraisal": {"label": "M", "reason": "..."},
     "decision": "buy_insurance",
     "reason": "..."}

``decision_json_schema`` is what the backend is asked to constrain its output to (the decision
is restricted to this household's allowed actions; reasons are bounded by a hard cap, well above
the length asked for, so that no sentence is stopped halfway).
``DecisionReply`` validates a parsed object. Tolerant parsing of unconstrained output lives in
``governed_broker.cognition.repair``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from governed_broker.cognition.sentences import hard_cap


def _listing(labels: Sequence[str]) -> str:
    quoted = [repr(x) for x in labels]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


class Appraisal(BaseModel):
    """One PMT appraisal: a label of the domain's scale and a short reason.

    Validate with ``context={"labels": [...]}`` (the ``pmt_labels`` scale) to check the label;
    without it only a non-empty string is required.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str = Field(min_length=1)
    reason: str = ""

    @field_validator("label", mode="before")
    @classmethod
    def _on_scale(cls, value: Any, info: ValidationInfo) -> Any:
        labels = (info.context or {}).get("labels")
        if labels is not None and value not in labels:
            # the message a Literal gives, so that feedback reads the same whatever the scale
            raise PydanticCustomError("literal_error", "Input should be {expected}",
                                      {"expected": _listing(labels)})
        return value


class DecisionReply(BaseModel):
    """A validated decision reply (labels checked; the action id is checked by the parser)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    threat_appraisal: Appraisal
    coping_appraisal: Appraisal
    decision: str = Field(min_length=1)
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """The reply as a plain JSON-serialisable dict (for the audit)."""
        return self.model_dump(mode="json")


#: Orders of an appraisal's two fields in the reply (``governance.context.appraisal_order``).
APPRAISAL_ORDERS: dict[str, tuple[str, str]] = {
    "label_first": ("label", "reason"),
    "reason_first": ("reason", "label"),
}


def _appraisal_schema(labels: Sequence[str], max_reason_chars: int,
                      order: str) -> dict[str, Any]:
    fields = {
        "label": {"type": "string", "enum": list(labels)},
        "reason": {"type": "string", "maxLength": hard_cap(max_reason_chars)},
    }
    names = APPRAISAL_ORDERS[order]
    return {
        "type": "object",
        "properties": {name: fields[name] for name in names},
        "required": list(names),
        "additionalProperties": False,
    }


def decision_json_schema(
    allowed_actions: Sequence[str], labels: Sequence[str], max_reason_chars: int = 200,
    appraisal_order: str = "label_first",
) -> dict[str, Any]:
    """JSON schema of the decision reply for one household.

    Args:
        allowed_actions: The action ids this household may choose this year (the enum of
            ``decision``), in prompt order.
        labels: The appraisal scale (``pmt_labels.labels``), the enum of each ``label``.
        max_reason_chars: The length a reason is asked to stay within; the schema's
            ``maxLength`` is the hard cap ``cognition.sentences.hard_cap`` (3 times it), so that
            a decoder does not stop a sentence halfway (longer reasons are shortened to whole
            sentences after parsing).
        appraisal_order: ``label_first`` or ``reason_first`` (``APPRAISAL_ORDERS``): the
            order of each appraisal's fields. A grammar-constrained decoder writes properties
            in schema order, so ``reason_first`` makes the model state its reason before it
            commits to a label.

    Returns:
        A JSON-schema dict (draft 2020-12 subset understood by Ollama and llama.cpp grammars).
    """
    if not allowed_actions:
        raise ValueError("a decision schema needs at least one allowed action")
    return {
        "type": "object",
        "properties": {
            "threat_appraisal": _appraisal_schema(labels, max_reason_chars, appraisal_order),
            "coping_appraisal": _appraisal_schema(labels, max_reason_chars, appraisal_order),
            "decision": {"type": "string", "enum": list(allowed_actions)},
            "reason": {"type": "string", "maxLength": hard_cap(max_reason_chars)},
        },
        "required": ["threat_appraisal", "coping_appraisal", "decision", "reason"],
        "additionalProperties": False,
    }


def insights_json_schema(n_insights: int, max_chars: int) -> dict[str, Any]:
    """JSON schema of a reflection reply.

    ``{"insights": [n short strings]}`` (each bounded by the hard cap of ``max_chars``, see
    ``decision_json_schema``).
    """
    return {
        "type": "object",
        "properties": {
            "insights": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": hard_cap(max_chars)},
                "minItems": n_insights,
                "maxItems": n_insights,
            }
        },
        "required": ["insights"],
        "additionalProperties": False,
    }
