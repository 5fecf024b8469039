"""JSON text of the parts every LLM call repeats, encoded once.

The response cache (for its key) and the call log encode each request's messages and reply
schema as JSON; most of those bytes recur: the system message in every call, the schema in
most, the household's message in its cache key and in its log row. ``messages_json`` and
``schema_json`` give exactly what ``json.dumps`` gives with the named options (``OPTIONS``),
encoding each long string once while it is in use (by identity; a remembered object is kept
alive, so its id cannot be reused while it is remembered) and schema objects once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any

#: ``json.dumps`` options by name: the cache key's canonical form, and the call log's forms.
OPTIONS: dict[str, dict[str, Any]] = {
    "canonical": {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False},
    "utf8": {"ensure_ascii": False},
    "ascii": {},
    "sorted_ascii": {"sort_keys": True},
}
#: Per form: keys sorted, item separator, key separator, ASCII only.
_LAYOUT = {"canonical": (True, ",", ":", False), "utf8": (False, ", ", ": ", False),
           "ascii": (False, ", ", ": ", True), "sorted_ascii": (True, ", ", ": ", True)}
#: One encoder per form (``json.dumps`` with options builds a new encoder per call).
ENCODERS = {form: json.JSONEncoder(**options) for form, options in OPTIONS.items()}
_REMEMBERED = 512  # entries kept; all are forgotten when full (a run reuses a few at a time)
_LONG = 64  # characters from which a string is remembered
_memo: dict[Any, Any] = {}


def _remember(key: Any, make: Callable[[], Any]) -> Any:
    found = _memo.get(key)
    if found is None:
        if len(_memo) >= _REMEMBERED:
            _memo.clear()
        found = _memo[key] = make()
    return found


def _string(text: str, ascii_only: bool) -> str:
    """``json.dumps(text, ensure_ascii=ascii_only)``, remembered for long strings."""
    encode = encode_basestring_ascii if ascii_only else encode_basestring
    if len(text) < _LONG:
        return encode(text)
    if ascii_only and text.isascii() and "\x7f" not in text:
        # both forms escape the same characters of such a text (only the ASCII form escapes
        # DEL and beyond): one encoding serves the prompt hash, the cache key and the call log
        ascii_only, encode = False, encode_basestring
    return _remember((ascii_only, id(text)), lambda: (text, encode(text)))[1]


def message_json(message: Mapping[str, Any], form: str) -> str:
    """``json.dumps(dict(message), **OPTIONS[form])``."""
    role, content = message.get("role"), message.get("content")
    if len(message) != 2 or type(role) is not str or type(content) is not str:
        return ENCODERS[form].encode(dict(message))  # not a plain chat message
    sort, item_sep, key_sep, ascii_only = _LAYOUT[form]
    role_part = _ROLE_KEY[ascii_only] + key_sep + _string(role, ascii_only)
    content_part = _CONTENT_KEY[ascii_only] + key_sep + _string(content, ascii_only)
    if sort or next(iter(message)) == "content":
        return "{" + content_part + item_sep + role_part + "}"
    return "{" + role_part + item_sep + content_part + "}"


_ROLE_KEY = {False: encode_basestring("role"), True: encode_basestring_ascii("role")}
_CONTENT_KEY = {False: encode_basestring("content"), True: encode_basestring_ascii("content")}


def messages_json(messages: Sequence[Mapping[str, Any]], form: str) -> str:
    """``json.dumps([dict(m) for m in messages], **OPTIONS[form])``."""
    return "[" + _LAYOUT[form][1].join(message_json(m, form) for m in messages) + "]"


def schema_json(schema: Mapping[str, Any] | None, form: str) -> str:
    """``json.dumps(schema, **OPTIONS[form])``.

    Remembered by the object's identity (a schema must not be changed once it was sent: the broker's
    and reflection's never are).
    """
    if schema is None:
        return "null"
    # the entry holds the object, so no other object can have its id while it is remembered
    return _remember((form, id(schema)),
                     lambda: (schema, ENCODERS[form].encode(schema)))[1]
