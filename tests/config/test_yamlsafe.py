"""Bounded, safe YAML reading: size, depth and alias expansion limits, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from governed_broker.config.base import ConfigError
from governed_broker.config.loader import load_experiment
from governed_broker.config.yamlsafe import (
    MAX_YAML_BYTES,
    MAX_YAML_DEPTH,
    load_yaml_text,
    read_text_file,
    read_yaml,
)

#: 4.6 KB that expands to 10**10 strings ("billion laughs").
BOMB = "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 10) + "]\n"
    for i in range(9)) + "name: " + "#" * 4000 + "\n"


def test_plain_yaml_and_small_aliases_still_load() -> None:
    data = load_yaml_text("base: &b {x: 1, y: [1, 2]}\nother: *b\n", "t")
    assert data["other"] == {"x": 1, "y": [1, 2]}
    nested = "k: " + "[" * (MAX_YAML_DEPTH - 2) + "1" + "]" * (MAX_YAML_DEPTH - 2)
    assert load_yaml_text(nested, "t")["k"]


@pytest.mark.parametrize(("text", "message"), [
    (BOMB, "expands to more than"),
    ("k: " + "[" * 100_000 + "]" * 100_000, "nested more than"),
    ("k: " + "{a: " * 1000 + "1" + "}" * 1000, "nested more than"),
    ("a: &a [*a]\n", "refers to a node that contains it"),
    ("!!python/object/apply:os.system ['true']\n", "malformed YAML"),
    ("a: [1, 2\n", r"malformed YAML \(line 2"),
])
def test_hostile_yaml_is_a_config_error_naming_the_source(text, message) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        load_yaml_text(text, "exp.yaml")
    assert str(info.value).startswith("exp.yaml: ")
    assert len(str(info.value)) < 300  # a position and a problem, never the text


def test_a_file_above_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("k: " + "x" * MAX_YAML_BYTES + "\n")
    with pytest.raises(ConfigError, match="bytes, more than the 1,048,576"):
        read_yaml(big)


@pytest.mark.parametrize("kind", ["missing", "directory", "binary"])
def test_unreadable_files_are_config_errors(tmp_path: Path, kind: str) -> None:
    path = {"missing": tmp_path / "none.yaml", "directory": tmp_path,
            "binary": tmp_path / "b.yaml"}[kind]
    if kind == "binary":
        path.write_bytes(b"k: \xff\xfe\x00")
    expected = {"missing": "file not found", "directory": "not a regular file",
                "binary": "not UTF-8"}[kind]
    with pytest.raises(ConfigError, match=expected):
        read_text_file(path, "experiment")


def test_a_bomb_in_a_named_file_names_the_field(experiments, tmp_path: Path) -> None:
    bomb = tmp_path / "types.yaml"
    bomb.write_text(BOMB)
    data = experiments.data()
    data["agent_types"] = str(bomb)
    with pytest.raises(ConfigError, match="field 'agent_types'.*expands to more than"):
        experiments.config(data=data)


def test_a_bomb_in_an_override_is_refused(experiments) -> None:
    value = "[" * 5000 + "]" * 5000
    with pytest.raises(ConfigError, match="--set description: YAML refused"):
        load_experiment(experiments.write(experiments.data()), [f"description={value}"])


@pytest.mark.parametrize("text", ["seed: " + "1" * 5000, "when: 2020-13-45",
                                  "x: !!float " + "s" * 500, "x: !!int nope"])
def test_values_yaml_cannot_construct_are_config_errors(text) -> None:
    """Scalars whose form or tag promise another type are malformed YAML.

    PyYAML raises ValueError, not a YAMLError, for them; they are reported as malformed YAML, not a
    traceback, and any quote is short.
    """
    with pytest.raises(ConfigError, match="exp.yaml: malformed YAML: a value cannot be read") \
            as info:
        load_yaml_text(text, "exp.yaml")
    assert len(str(info.value)) < 250


@pytest.mark.parametrize("text, key, first, second", [
    ("seed: 1\nyears: 2\nseed: 3\n", "seed", 1, 3),
    ("hazard:\n  zones:\n    high: {a: 1}\n    high: {a: 2}\n", "high", 3, 4),
    ("k: {a: 1, b: 2, a: 3}\n", "a", 1, 1),
    ("yes: 1\ntrue: 2\n", True, 1, 2),  # YAML 1.1 reads both as the same key
])
def test_a_duplicate_key_is_refused_naming_both_lines(text, key, first, second) -> None:
    with pytest.raises(ConfigError) as info:
        load_yaml_text(text, "exp.yaml")
    message = str(info.value)
    assert message.startswith("exp.yaml:") and f"duplicate key {key!r}" in message
    assert f"line {second}" in message and f"first given on line {first}" in message


def test_merge_keys_may_still_be_overridden() -> None:
    data = load_yaml_text("base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  x: 5\n", "t")
    assert data["other"] == {"x": 5, "y": 2}


def test_a_duplicate_key_in_an_experiment_is_a_configuration_error(experiments,
                                                                   capsys) -> None:
    import yaml

    from governed_broker.cli import main

    path = experiments.write(yaml.safe_dump(experiments.data(), sort_keys=False) + "years: 30\n")
    code = main(["run", str(path), "--out", str(path.parent / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "duplicate key 'years'" in err and "first given on line" in err
    assert not (path.parent / "out").exists()
