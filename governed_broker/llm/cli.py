"""``governed-broker model pull|verify|list``: manage the embedded backend's model cache.

``register(subparsers)`` adds the ``model`` command to the main CLI's sub-parsers; the handler
returns an exit code (0 ok, 1 failure such as a download or sha256 error, 2 unknown model).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from governed_broker.llm.base import LLMError
from governed_broker.llm.catalogue import default_model_name, get_model_spec, load_catalogue
from governed_broker.llm.model_store import model_file, models_dir, pull_model, verify_model


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``model {pull,verify,list}`` to an ``argparse`` sub-parsers object.

    The parser's default ``func`` is :func:`run_model_command` (``args.func(args) -> int``).
    """
    parser = subparsers.add_parser(
        "model",
        help="download, verify or list embedded LLM models",
        description="Manage the embedded backend's models (cache: $GOVERNED_BROKER_CACHE or "
        "~/.cache/governed_broker).",
    )
    actions = parser.add_subparsers(dest="model_action", required=True)
    pull = actions.add_parser("pull", help="download, assemble and verify a catalogue model")
    pull.add_argument("name", nargs="?", help="catalogue name (default: the default model)")
    pull.add_argument("--force", action="store_true", help="download again even if present")
    verify = actions.add_parser("verify", help="recompute a pulled model's sha256")
    verify.add_argument("name", nargs="?", help="catalogue name (default: the default model)")
    actions.add_parser("list", help="list catalogue models and whether they are pulled")
    parser.set_defaults(func=run_model_command)
    return parser


def _unknown(exc: LLMError) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return 2


def run_model_command(args: argparse.Namespace) -> int:
    """Execute a parsed ``model`` command; return the process exit code."""
    if args.model_action == "list":
        return _list()
    name = args.name or default_model_name()
    try:
        spec = get_model_spec(name)
    except LLMError as exc:
        return _unknown(exc)
    try:
        if args.model_action == "pull":
            path = pull_model(spec.name, force=args.force)
        else:
            print(f"verifying {model_file(spec)} ...", file=sys.stderr)
            path = verify_model(spec, full=True)
    except LLMError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{spec.name}\tOK\tsha256:{spec.sha256}\t{path}")
    return 0


def _list() -> int:
    default, models = load_catalogue()
    print(f"models directory: {models_dir()}")
    for name, spec in sorted(models.items()):
        present = "pulled" if model_file(spec).is_file() else "not pulled"
        marker = " (default)" if name == default else ""
        print(f"{name}{marker}\t{spec.size / 1e6:.0f} MB\t{present}\tlicence: {spec.license}")
        if spec.description:
            print(f"    {spec.description}")
    return 0
