r"""Untrusted text made safe: bounded JSON parsing and sanitised strings.

Replies of a language model are untrusted input: they may be huge, nested a hundred thousand
levels deep, hold lone UTF-16 surrogates (``"\ud800"``, which no UTF-8 file can store), NUL
bytes or other control characters, or numbers JSON cannot represent (``1e999``, ``NaN``). Every
consumer (the audit files, the memory store, the next prompt) receives text through
``clean_text`` and JSON through ``loads_bounded``, so none of these can crash a run; what was
changed is reported so that the caller records it as a repair.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

#: Longest reply text kept (characters). A decision reply is a few hundred characters (reasons
#: are capped at 100); 20,000 leaves room for verbose models and bounds parsing and audit size.
MAX_REPLY_CHARS = 20_000
#: Deepest JSON nesting parsed. A decision reply nests 3 levels; Python's parser recurses per
#: level, so the bound keeps ``RecursionError`` out of reach.
MAX_JSON_DEPTH = 32

_SURROGATES = re.compile("[\ud800-\udfff]")
# C0 controls except tab and newline, DEL and the C1 controls (NEL included); carriage returns
# and the Unicode line and paragraph separators become newlines below, because many readers
# of JSON lines (str.splitlines, JavaScript) split a line at them.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_LINE_BREAKS = re.compile("\r\n|[\r\u2028\u2029]")
#: Any character one of the three above would change (most texts have none).
_ANY_CHANGE = re.compile("[\ud800-\udfff\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def clean_text(text: str, max_chars: int = MAX_REPLY_CHARS) -> tuple[str, list[str]]:
    r"""Text that any UTF-8 file, JSON line, SQLite column or prompt accepts, and what changed.

    Lone surrogates become U+FFFD; ``\r\n``, ``\r``, U+2028 and U+2029 become ``\n``;
    other control characters (C0 with NUL, DEL, C1 with NEL; tab and newline kept) are
    removed; text beyond ``max_chars`` is cut off.

    Args:
        text: Untrusted text (a non-string is converted with ``str``, and that is reported).
        max_chars: Characters kept.

    Returns:
        ``(clean text, notes)``; each note says what was changed, for the audit.
    """
    if isinstance(text, str) and len(text) <= max_chars and not _ANY_CHANGE.search(text):
        return text, []
    notes: list[str] = []
    if not isinstance(text, str):
        notes.append(f"reply of type {type(text).__name__} converted to text")
        text = str(text)
    if len(text) > max_chars:
        notes.append(f"reply cut from {len(text)} to {max_chars} characters")
        text = text[:max_chars]
    text, n = _SURROGATES.subn("\ufffd", text)
    if n:
        notes.append(f"{n} lone surrogate(s) replaced by U+FFFD")
    text, n = _LINE_BREAKS.subn("\n", text)
    if n:
        notes.append(f"{n} carriage return(s) or line separator(s) made newlines")
    text, n = _CONTROLS.subn("", text)
    if n:
        notes.append(f"{n} control character(s) removed")
    return text, notes


def nesting_depth(text: str) -> int:
    """The deepest bracket nesting of JSON text, found in one pass without recursion.

    Brackets inside strings do not count; unbalanced text gives the depth reached.
    """
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def loads_bounded(text: str, *, max_chars: int = MAX_REPLY_CHARS,
                  max_depth: int = MAX_JSON_DEPTH) -> Any:
    """``json.loads`` for untrusted text: bounded size and depth, finite numbers only.

    Raises:
        ValueError: the text is too long, too deeply nested, not JSON, or holds ``NaN``,
            ``Infinity`` or a number beyond the float range; the message says which.
    """
    if len(text) > max_chars:
        raise ValueError(f"reply of {len(text)} characters exceeds {max_chars}")
    # no deeper than it has opening brackets: most replies need no scan
    if text.count("[") + text.count("{") > max_depth:
        depth = nesting_depth(text)
        if depth > max_depth:
            raise ValueError(f"reply nested {depth} levels deep; at most {max_depth} are parsed")
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError as exc:  # pragma: no cover - the depth check comes first
        raise ValueError("reply nested too deeply") from exc


def clean_json_strings(value: Any, max_chars: int = MAX_REPLY_CHARS) -> tuple[Any, list[str]]:
    r"""``value`` (parsed JSON) with every string, keys included, passed through ``clean_text``.

    A JSON escape such as ``"\ud800"`` is plain ASCII in the reply text but becomes a lone
    surrogate once parsed, so parsed values are cleaned too. Nesting is bounded by the parser
    (``MAX_JSON_DEPTH``), so the recursion here is shallow.

    Returns:
        ``(clean value, notes)``; one note per kind of change, prefixed "in parsed strings".
    """
    notes: set[str] = set()

    def walk(node: Any) -> Any:
        if isinstance(node, str):
            if len(node) <= max_chars and not _ANY_CHANGE.search(node):
                return node  # clean_text's own first test, without its call (hot path)
            text, changed = clean_text(node, max_chars)
            notes.update(re.sub(r"\d+ ", "", n) for n in changed)
            return text
        if isinstance(node, dict):
            return {walk(k): walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    cleaned = walk(value)
    return cleaned, [f"in parsed strings: {n}" for n in sorted(notes)]
