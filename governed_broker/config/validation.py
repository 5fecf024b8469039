"""Validating configuration data against the pydantic models, with messages a user can act on.

``validate_model`` turns pydantic's errors into one ``ConfigError`` that names the file, each
field path, the bad value (quoted only from the experiment file the user wrote) and what is
allowed. The annotation helpers tell which keys a section has, for these messages and for
``--set`` overrides (``config.loader``).
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from governed_broker.config.base import BOOL_NUMBER, ConfigError, excerpt, printable


class _Unquoted:
    """Stands for a value that is not quoted in a message."""



def _unwrap(annotation: Any) -> list[Any]:
    """The concrete alternatives of a (possibly Optional / Annotated / Union) annotation."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        out: list[Any] = []
        for arg in typing.get_args(annotation):
            out.extend(_unwrap(arg))
        return out
    return [annotation]


def child_annotation(annotation: Any, key: str) -> tuple[bool, Any]:
    """Whether ``key`` may appear under a field of type ``annotation``, and its type."""
    for alt in _unwrap(annotation):
        if isinstance(alt, type) and issubclass(alt, BaseModel):
            if key in alt.model_fields:
                return True, alt.model_fields[key].annotation
        elif typing.get_origin(alt) in (dict, Mapping) or alt in (dict, Any):
            args = typing.get_args(alt)
            return True, args[1] if len(args) == 2 else Any
        elif alt is Any:
            return True, Any
    return False, None


def allowed_keys(annotation: Any) -> list[str]:
    """The keys a mapping of type ``annotation`` allows (its model's fields), for messages."""
    for alt in _unwrap(annotation):
        if isinstance(alt, type) and issubclass(alt, BaseModel):
            return list(alt.model_fields)
    return []




def _annotation_at(model: type[BaseModel], loc: tuple[Any, ...]) -> Any:
    annotation: Any = model
    for key in loc:
        ok, annotation = child_annotation(annotation, str(key))
        if not ok:
            return None
    return annotation


#: Most problems one validation message lists (the rest are counted): a file that is not
#: what a field expects can fail on every one of thousands of keys.
MAX_LISTED_PROBLEMS = 20


def _field_name(loc: tuple[Any, ...]) -> str:
    """A dotted field path for a message.

    Keys come from a file, so each is made printable and short (pydantic's own location parts, e.g.
    ``function-after[...]``, are dropped).
    """
    parts = [printable(str(p), 40) for p in loc if not (isinstance(p, str) and "[" in p)]
    return printable(".".join(parts), 160) or "(top level)"


def format_validation_error(
    exc: ValidationError, source: Path, model: type[BaseModel], quote_values: bool = True
) -> str:
    """Turn a pydantic error into lines naming the file, field, bad value and what is allowed.

    Values are quoted (as short excerpts) only with ``quote_values``: for the experiment file
    the user wrote, not for other files, which a mistyped path may point at a system file.
    Field names and pydantic's messages (which may repeat a value) are made printable and
    short; at most ``MAX_LISTED_PROBLEMS`` problems are listed.
    """
    lines = [f"{source}: invalid configuration ({exc.error_count()} problem(s)):"]
    for err in exc.errors(include_url=False)[:MAX_LISTED_PROBLEMS]:
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and "[" in p))
        value = err.get("input") if quote_values else _Unquoted()
        if err["type"] == BOOL_NUMBER:
            loc, value = (*loc, err["ctx"]["field"]), err["ctx"]["value"]
        field, msg = _field_name(loc), printable(str(err["msg"]), 300)
        if err["type"] == "extra_forbidden":
            allowed = allowed_keys(_annotation_at(model, loc[:-1]))
            lines.append(
                f"  - field '{field}': unknown key ({_shown(value, 'value')}); "
                f"allowed keys: {', '.join(allowed) if allowed else '(none)'}"
            )
        elif err["type"] == "missing":
            lines.append(f"  - field '{field}': required but missing")
        elif err["type"] == BOOL_NUMBER:
            lines.append(f"  - field '{field}': {msg} (got {printable(str(value), 80)})")
        else:
            lines.append(f"  - field '{field}': {msg} ({_shown(value, 'got')})")
    if exc.error_count() > MAX_LISTED_PROBLEMS:
        lines.append(f"  - ... and {exc.error_count() - MAX_LISTED_PROBLEMS} more problem(s)")
    return "\n".join(lines)


def _shown(value: Any, word: str) -> str:
    """``<word> <excerpt>``, or ``value not shown`` for a value from a file not quoted."""
    return "value not shown" if isinstance(value, _Unquoted) else f"{word} {excerpt(value)}"


def validate_model(
    model: type[BaseModel], data: Any, source: Path, context: dict[str, Any] | None = None,
    quote_values: bool = False,
) -> Any:
    """``model.model_validate`` with errors turned into ``ConfigError``.

    Args:
        model: The pydantic model.
        data: The parsed YAML (a mapping).
        source: The file it was read from, named in every message.
        context: Validation context (e.g. ``base_dir`` for relative paths).
        quote_values: Quote bad values in messages (see ``format_validation_error``).
    """
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: expected a mapping of settings at the top level, got "
            f"{type(data).__name__}")
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source, model, quote_values)) from exc
