"""Shared pieces of every configuration model.

All configuration models forbid unknown keys so that a typo in a YAML file is an error that
names the field, never a silently ignored setting.
"""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

#: Error type of a bool given where a number belongs (``format_validation_error`` names the
#: field from its context).
BOOL_NUMBER = "bool_number"


class StrictModel(BaseModel):
    """Base class for configuration sections.

    Unknown keys are errors, values are frozen, every number must be finite (``.nan`` and
    ``.inf`` are refused) and ``true``/``false`` are never accepted where a number belongs
    (pydantic would otherwise read them as 1 and 0). Where the word ``off`` is a valid value
    (a ``Literal`` that lists it, also as a dict's values), ``false`` means ``"off"``: YAML 1.1
    reads an unquoted ``off``, in a file or a ``--set``, as false.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True,
                              allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        for name, field in cls.model_fields.items():
            value = data.get(field.alias or name, data.get(name))
            if _bool_where_number(field.annotation, value):
                raise PydanticCustomError(
                    BOOL_NUMBER, "true/false is not a number here; write a number",
                    {"field": name, "value": repr(value)[:80]})
        offs = {}
        for name, field in cls.model_fields.items():
            key = field.alias or name
            if key in data and (off := _yaml_off(field.annotation, data[key])) is not data[key]:
                offs[key] = off
        return {**data, **offs} if offs else data


def _alternatives(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _alternatives(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [a for arg in typing.get_args(annotation) for a in _alternatives(arg)]
    return [annotation]


def _accepts_off(annotation: Any) -> bool:
    return any(typing.get_origin(alt) is typing.Literal and "off" in typing.get_args(alt)
               for alt in _alternatives(annotation))


def _yaml_off(annotation: Any, value: Any) -> Any:
    """``value`` with a ``False`` read as ``"off"`` where ``annotation`` accepts ``"off"``.

    Itself, or the values of a dict.
    """
    if value is False and _accepts_off(annotation):
        return "off"
    if isinstance(value, dict):
        for alt in _alternatives(annotation):
            args = typing.get_args(alt)
            if typing.get_origin(alt) is dict and len(args) == 2 and _accepts_off(args[1]):
                return {k: "off" if v is False else v for k, v in value.items()}
    return value


def _bool_where_number(annotation: Any, value: Any) -> bool:
    """Whether ``value`` holds a bool where ``annotation`` wants a number.

    Also inside dicts and lists of numbers.
    """
    alts = _alternatives(annotation)
    if bool in alts or Any in alts:
        return False
    if isinstance(value, bool):
        return any(a in (int, float) for a in alts)
    for alt in alts:
        origin, args = typing.get_origin(alt), typing.get_args(alt)
        if origin is dict and len(args) == 2 and isinstance(value, dict):
            return any(_bool_where_number(args[1], v) for v in value.values())
        if origin in (list, tuple) and args and isinstance(value, list | tuple):
            return any(_bool_where_number(args[0], v) for v in value)
    return False


def excerpt(value: Any, limit: int = 80) -> str:
    """A short, printable excerpt of a value for an error message.

    Messages may quote what the user wrote, never pages of a file (a mistyped path can name a
    system file): containers are shown by type and size only, text is cut to ``limit``
    characters (about one line) and non-printable characters (controls, escapes that could
    move a terminal's cursor) are shown as ``?``.

    Args:
        value: What to quote.
        limit: Longest excerpt (characters), ellipsis included.
    """
    if isinstance(value, dict | list | tuple | set | frozenset):
        return f"a {type(value).__name__} of {len(value)} item(s)"
    shown = repr(value[: limit + 1]) if isinstance(value, str | bytes) else repr(value)
    return printable(shown, limit)


def printable(text: str, limit: int) -> str:
    """``text`` with non-printable characters shown as ``?`` and cut to ``limit`` characters.

    For text taken from a file or a setting into a message without quotes (a key, a zone
    name): terminal escapes cannot act and one value cannot flood the console.

    Args:
        text: What to show.
        limit: Longest result (characters), ellipsis included.
    """
    shown = "".join(c if c.isprintable() else "?" for c in text[: limit + 1])
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


#: Names Windows reserves for devices, with or without an extension (``CON``, ``nul.txt``): a
#: run or arm so named could not be copied to a Windows share or laptop.
WINDOWS_RESERVED = frozenset({"CON", "PRN", "AUX", "NUL", *(f"COM{i}" for i in range(10)),
                              *(f"LPT{i}" for i in range(10))})


def portable_name_problem(name: str) -> str | None:
    """Why ``name`` (a run's or an arm's, which becomes a file name) is not portable, or None.

    Not portable: a device name Windows reserves (``WINDOWS_RESERVED``, in any case, with or
    without an extension) and a name ending in ``.`` or a space (which Windows drops).
    """
    if name.split(".")[0].upper() in WINDOWS_RESERVED:
        return (f"{name.split('.')[0]!r} is a device name Windows reserves (CON, PRN, AUX, NUL, "
                "COM0-9, LPT0-9), with or without an extension; choose another name")
    if name.endswith((".", " ")):
        return "must not end in '.' or a space (Windows drops them from file names)"
    return None


#: Longest configuration-error message (characters) and longest line in it. Messages are
#: built to be short; this is the backstop for any that quotes more than it should.
MAX_MESSAGE_CHARS = 8000
MAX_MESSAGE_LINE_CHARS = 2000


def bounded_message(message: str) -> str:
    """A message made safe to print.

    Every line printable (tabs kept) and at most ``MAX_MESSAGE_LINE_CHARS`` long, the whole at most
    ``MAX_MESSAGE_CHARS``.
    """
    lines = [printable(line.replace("\t", " "), MAX_MESSAGE_LINE_CHARS)
             for line in message[: MAX_MESSAGE_CHARS * 2].split("\n")]
    text = "\n".join(lines)
    if len(text) > MAX_MESSAGE_CHARS or len(message) > MAX_MESSAGE_CHARS * 2:
        text = text[: MAX_MESSAGE_CHARS - 40] + f"\n... ({len(message):,} characters, cut)"
    return text


class ConfigError(Exception):
    """A configuration problem the user must fix (exit code 2 on the command line).

    The message names the file, the field path, the bad value and what is allowed. It is
    made printable and bounded in length when the error is created (``bounded_message``), so
    no message can carry a terminal escape or pages of a file, whoever builds it.
    """

    def __init__(self, *args: object) -> None:
        if len(args) == 1 and isinstance(args[0], str):
            args = (bounded_message(args[0]),)
        super().__init__(*args)
