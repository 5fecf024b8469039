"""Untrusted text: bounded JSON parsing and sanitising (contracts/text.py)."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governed_broker.contracts.text import (
    MAX_JSON_DEPTH,
    clean_json_strings,
    clean_text,
    loads_bounded,
    nesting_depth,
)


@given(st.text(alphabet=st.characters(codec=None), max_size=300))
@settings(max_examples=300, deadline=None)
def test_clean_text_always_gives_storable_text(text) -> None:
    cleaned, notes = clean_text(text)
    cleaned.encode("utf-8")  # never raises: no lone surrogates
    assert "\x00" not in cleaned and "\r" not in cleaned
    assert (cleaned == text) == (not notes)


@given(st.text(alphabet=st.characters(codec=None), max_size=60))
@settings(max_examples=300, deadline=None)
def test_clean_text_is_its_three_substitutions(text) -> None:
    """The shortcut for text that needs no change gives what the substitutions give."""
    expected = re.sub("[\x00-\x08\x0b-\x1f\x7f-\x9f]", "", re.sub(
        "\r\n|[\r\u2028\u2029]", "\n", re.sub("[\ud800-\udfff]", "\ufffd", text)))
    assert clean_text(text)[0] == expected


def test_clean_text_reports_each_change() -> None:
    cleaned, notes = clean_text("a\ud800b\x00c\r\nd" + "e" * 50, max_chars=20)
    assert cleaned == "a\ufffdbc\nd" + "e" * 12
    assert any("surrogate" in n for n in notes) and any("control" in n for n in notes)
    assert any("cut from 58 to 20" in n for n in notes)


@pytest.mark.parametrize(("text", "depth"), [
    ("{}", 1), ('{"a": [1, {"b": 2}]}', 3), ('"[[[["', 0), ('["\\"[["]', 1), ("[[[", 3),
])
def test_nesting_depth_ignores_brackets_in_strings(text, depth) -> None:
    assert nesting_depth(text) == depth


@pytest.mark.parametrize(("text", "message"), [
    ("[" * 5_000 + "]" * 5_000, "nested"),
    ('{"x": NaN}', "NaN"),
    ('{"x": -Infinity}', "Infinity"),
    ('{"x": 1e999}', "out of range"),
    ('"' + "a" * 30_000 + '"', "exceeds"),
])
def test_loads_bounded_refuses_with_a_reason(text, message) -> None:
    with pytest.raises(ValueError, match=message):
        loads_bounded(text)


def test_loads_bounded_refuses_too_deep_text_among_brackets_in_strings() -> None:
    deep = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    with pytest.raises(ValueError, match="nested 33 levels"):
        loads_bounded(deep)
    assert loads_bounded('["' + "[{" * 40 + '"]') == ["[{" * 40]  # brackets in a string


def test_loads_bounded_parses_ordinary_json() -> None:
    nested = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert loads_bounded('{"a": [1, 2.5, "x"]}') == {"a": [1, 2.5, "x"]}
    assert loads_bounded(nested) == json.loads(nested)


def test_clean_json_strings_cleans_keys_and_values() -> None:
    value, notes = clean_json_strings({"k\ud800": ["a\x00", {"b": "\udfff"}], "n": 1})
    assert value == {"k\ufffd": ["a", {"b": "\ufffd"}], "n": 1}
    assert notes == ["in parsed strings: control character(s) removed",
                     "in parsed strings: lone surrogate(s) replaced by U+FFFD"]


def test_line_separators_and_c1_controls_are_cleaned() -> None:
    cleaned, notes = clean_text("a\u2028b\u2029c\x85d\x9be")
    assert cleaned == "a\nb\ncde"
    assert any("line separator" in n for n in notes) and any("control" in n for n in notes)


@given(st.dictionaries(st.text(max_size=5), st.text(max_size=40), max_size=4))
@settings(max_examples=200, deadline=None)
def test_a_json_line_is_one_line_for_every_reader(record) -> None:
    from governed_broker.contracts.jsonl import to_json_line

    line = to_json_line(record)
    assert len(line.splitlines()) == 1  # str.splitlines breaks at U+2028, U+0085, ...
    assert json.loads(line) == record
    line.encode("utf-8")
