"""Tolerant parsing of decision replies, for backends that cannot constrain their output.

Small models without grammar-constrained decoding wrap JSON in code fences, add a sentence
before it, leave trailing commas, write labels as words ("high") or give a bare label instead of
an appraisal object. ``parse_decision`` repairs exactly these cases and records every repair it
made; anything else is a parse failure with a message the broker sends back to the model. It
never guesses an action from prose.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from governed_broker.cognition.schema import DecisionReply
from governed_broker.cognition.sentences import whole_sentences
from governed_broker.config.agent_types import PMTLabels
from governed_broker.contracts.text import clean_json_strings, loads_bounded

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")

_APPRAISALS = ("threat_appraisal", "coping_appraisal")
_FIELDS = (*_APPRAISALS, "decision", "reason")


@dataclass(frozen=True)
class ParseResult:
    """The outcome of parsing one reply.

    Attributes:
        reply: The validated reply, or None when parsing failed.
        repairs: Human-readable notes of every repair applied, in order.
        error: Why parsing failed (None on success); sent back to the model.
        data: The JSON object as extracted (before repairs), for the audit.
    """

    reply: DecisionReply | None
    repairs: tuple[str, ...] = ()
    error: str | None = None
    data: Any = None

    @property
    def ok(self) -> bool:
        """Whether a valid reply was obtained."""
        return self.reply is not None


def extract_json_object(text: str) -> tuple[dict[str, Any] | None, list[str], str | None]:
    """Find the JSON object in ``text``, repairing fences, surrounding prose, trailing commas.

    Returns:
        ``(object or None, repairs, error or None)``.
    """
    repairs: list[str] = []
    body = text.strip()
    if not body:
        return None, repairs, "the reply was empty"
    fence = _FENCE.search(body)
    if fence:
        body = fence.group(1).strip()
        repairs.append("removed a markdown code fence")
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        return None, repairs, "the reply contains no JSON object"
    if start > 0 or end < len(body) - 1:
        repairs.append("removed text around the JSON object")
        body = body[start : end + 1]
    try:
        obj = loads_bounded(body)
    except json.JSONDecodeError:
        fixed = _TRAILING_COMMA.sub(r"\1", body)
        try:
            obj = loads_bounded(fixed)
        except json.JSONDecodeError as exc:
            return None, repairs, f"the reply is not valid JSON ({exc.msg} at character {exc.pos})"
        except ValueError as exc:
            return None, repairs, f"the reply cannot be used: {exc}"
        repairs.append("removed trailing comma(s)")
    except ValueError as exc:  # too long, too deep, non-finite numbers
        return None, repairs, f"the reply cannot be used: {exc}"
    if not isinstance(obj, dict):
        return None, repairs, "the reply is not a JSON object"
    obj, cleaned = clean_json_strings(obj)
    return obj, repairs + cleaned, None


def _normalise_label(value: Any, field: str, repairs: list[str], scale: PMTLabels) -> Any:
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text in scale.labels:
        return text
    label = text.upper() if text.upper() in scale.labels else scale.read_word(text)
    if label is not None:
        repairs.append(f"{field} label {value!r} read as {label}")
        return label
    return value


def _normalise_appraisal(obj: dict[str, Any], field: str, repairs: list[str],
                         scale: PMTLabels) -> None:
    value = obj.get(field)
    if isinstance(value, str):
        repairs.append(f"{field} given as a bare label {value!r}; reason left empty")
        value = {"label": value, "reason": ""}
    if isinstance(value, dict):
        value = dict(value)
        value["label"] = _normalise_label(value.get("label"), field, repairs, scale)
        obj[field] = value


def _normalise_action(value: Any, known_actions: Collection[str], repairs: list[str]) -> Any:
    if not isinstance(value, str) or value in known_actions:
        return value
    candidate = re.sub(r"[\s\-]+", "_", value.strip().lower())
    if candidate in known_actions:
        repairs.append(f"decision {value!r} read as {candidate}")
        return candidate
    return value


def _shorten_reasons(obj: dict[str, Any], max_chars: int, repairs: list[str]) -> None:
    """Keep whole sentences of overlong reasons (never cut one in the middle)."""
    holders: list[tuple[dict[str, Any], str]] = [(obj, "reason")]
    holders += [(obj[f], f"{f}.reason") for f in _APPRAISALS if isinstance(obj.get(f), dict)]
    for holder, name in holders:
        if isinstance(holder.get("reason"), str):
            holder["reason"], note, _ = whole_sentences(holder["reason"], max_chars)
            if note is not None:
                repairs.append(f"{name}: {note}")


def _validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:4]:
        where = ".".join(str(p) for p in err["loc"]) or "reply"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def parse_decision(
    text: str,
    known_actions: Collection[str],
    scale: PMTLabels,
    max_reason_chars: int = 200,
    parsed: Mapping[str, Any] | None = None,
) -> ParseResult:
    """Parse and validate a decision reply, repairing the common small-model slips.

    Args:
        text: The raw reply.
        known_actions: Action ids of the skill registry; a decision outside them is an error
            (whether this household may take it is the rules' business, not the parser's).
        scale: The domain's appraisal scale; labels off it are errors, and its words (``high``,
            ``very-low``) are read as its labels (a recorded repair).
        max_reason_chars: Longer reasons keep their leading whole sentences that fit (at least
            the first; ``cognition.sentences``), a recorded repair.
        parsed: The backend's own parse of ``text`` (used when it is a JSON object).

    Returns:
        A ``ParseResult``; ``repairs`` lists each repair made.
    """
    if isinstance(parsed, Mapping):
        data, repairs = clean_json_strings(dict(parsed))
        error = None
    else:
        data, repairs, error = extract_json_object(text)
    if data is None:
        return ParseResult(None, tuple(repairs), error)
    raw = json.loads(json.dumps(data))
    obj = dict(data)
    missing = [f for f in ("threat_appraisal", "coping_appraisal", "decision") if f not in obj]
    if missing:
        return ParseResult(None, tuple(repairs), f"missing field(s): {', '.join(missing)}", raw)
    extra = sorted(k for k in obj if k not in _FIELDS)
    if extra:
        repairs.append(f"ignored unexpected field(s) {extra}")
        for key in extra:
            del obj[key]
    if "reason" not in obj:
        repairs.append("missing reason left empty")
        obj["reason"] = ""
    for field in _APPRAISALS:
        _normalise_appraisal(obj, field, repairs, scale)
    obj["decision"] = _normalise_action(obj["decision"], known_actions, repairs)
    _shorten_reasons(obj, max_reason_chars, repairs)
    try:
        reply = DecisionReply.model_validate(obj, context={"labels": scale.labels})
    except ValidationError as exc:
        return ParseResult(None, tuple(repairs), _validation_message(exc), raw)
    if reply.decision not in known_actions:
        return ParseResult(
            None,
            tuple(repairs),
            f"decision {reply.decision!r} is not an action id; use one of the listed ids",
            raw,
        )
    return ParseResult(reply, tuple(repairs), None, raw)
