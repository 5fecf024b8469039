"""ConfigError messages are printable and bounded whoever builds them; excerpts are short.

Configuration models read YAML's unquoted ``off`` (false) as the word where it is a value.
"""

from __future__ import annotations

import pickle
from typing import Literal

import pytest
from pydantic import ValidationError

from governed_broker.config.base import (
    MAX_MESSAGE_CHARS,
    MAX_MESSAGE_LINE_CHARS,
    ConfigError,
    StrictModel,
    printable,
)


def test_a_config_error_message_is_printable_and_bounded() -> None:
    raw = "exp.yaml: field 'x': \x1b[2J\x07bad\tvalue\n" + "y" * 50_000 + "\n" + "z\n" * 20_000
    text = str(ConfigError(raw))
    assert text.startswith("exp.yaml: field 'x': ?[2J?bad value\n")
    assert all(c.isprintable() or c == "\n" for c in text)
    assert len(text) <= MAX_MESSAGE_CHARS
    assert max(len(line) for line in text.splitlines()) <= MAX_MESSAGE_LINE_CHARS
    assert text.endswith("characters, cut)")


def test_a_short_message_is_unchanged_and_survives_pickling() -> None:
    error = ConfigError("exp.yaml: field 'years': must be <= 1000 (got 5000)\n  - second line")
    assert str(error) == "exp.yaml: field 'years': must be <= 1000 (got 5000)\n  - second line"
    assert str(pickle.loads(pickle.dumps(error))) == str(error)


def test_printable_cuts_and_replaces() -> None:
    assert printable("ab\x00c", 10) == "ab?c"
    assert printable("x" * 100, 10) == "xxxxxxx..."


class _Switches(StrictModel):
    mode: Literal["on", "off"] = "on"
    maybe: Literal["off", "warn"] | None = None
    per_rule: dict[str, Literal["ERROR", "off"]] = {}
    level: Literal["low", "high"] = "low"
    flag: bool = True


def test_yaml_off_is_the_word_off_only_where_off_is_a_value() -> None:
    switches = _Switches.model_validate(
        {"mode": False, "maybe": False, "per_rule": {"a": False, "b": "ERROR"}, "flag": False})
    assert (switches.mode, switches.maybe, switches.flag) == ("off", "off", False)
    assert switches.per_rule == {"a": "off", "b": "ERROR"}
    for bad in ({"level": False}, {"mode": True}, {"per_rule": {"a": True}}):
        with pytest.raises(ValidationError):
            _Switches.model_validate(bad)
