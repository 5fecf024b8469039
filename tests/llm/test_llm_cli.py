"""`model pull|verify|list` through the register() hook and argparse."""

from __future__ import annotations

import argparse

from governed_broker.llm.catalogue import default_model_name
from governed_broker.llm.cli import register


def run(*argv):
    parser = argparse.ArgumentParser(prog="governed-broker")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.func(args)


def test_list_shows_catalogue_and_state(model_cache, capsys):
    assert run("model", "list") == 0
    out = capsys.readouterr().out
    assert f"{default_model_name()} (default)" in out and "not pulled" in out
    assert str(model_cache / "models") in out


def test_verify_of_a_missing_model_fails_with_the_pull_command(model_cache, capsys):
    assert run("model", "verify") == 1
    assert f"run `governed-broker model pull {default_model_name()}`" in capsys.readouterr().err


def test_verify_of_a_wrong_file_fails(model_cache, capsys):
    (model_cache / "models").mkdir(parents=True)
    (model_cache / "models" / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf").write_bytes(b"x")
    assert run("model", "verify", "qwen2.5-coder-0.5b-instruct-q4_k_m") == 1
    assert "has 1 bytes, expected 491400064" in capsys.readouterr().err


def test_unknown_model_is_exit_code_2(model_cache, capsys):
    assert run("model", "pull", "no-such-model") == 2
    assert "unknown embedded model 'no-such-model'" in capsys.readouterr().err
