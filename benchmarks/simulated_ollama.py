"""A simulated Ollama server for benchmarks/bench_scale.py (run as its own process).

Usage: python benchmarks/simulated_ollama.py --slots 8 --latency 0.08

Serves Ollama's HTTP API with the project's test server (tests/llm/ollama_test_server.py):
``--slots`` requests generate at once, each takes ``--latency`` seconds, the others wait in the
server's queue. Replies come from the instant script (benchmarks/instant_llm.yaml), matched on
the last user message as the scripted backend matches. Prints the server's URL on the first
line and serves until its standard input closes. NOT a language model.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests" / "llm"))

from ollama_test_server import OllamaTestServer  # noqa: E402


def script_completion(script: Path):
    """A completion function (llama-server request -> reply) answering from ``script``."""
    rules = [(re.compile(r["pattern"], re.S), r["reply"] if isinstance(r["reply"], str)
              else json.dumps(r["reply"])) for r in yaml.safe_load(script.read_text())]

    def complete(request: dict) -> dict:
        users = [m["content"] for m in request["messages"] if m.get("role") == "user"]
        text = next(reply for pattern, reply in rules if pattern.search(users[-1]))
        return {"choices": [{"message": {"role": "assistant", "content": text},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": sum(len(m["content"]) for m in request["messages"])
                          // 4, "completion_tokens": len(text) // 4}}

    return complete


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, required=True)
    parser.add_argument("--latency", type=float, required=True, help="seconds per request")
    parser.add_argument("--model", default="instant")
    args = parser.parse_args()
    server = OllamaTestServer(script_completion(HERE / "instant_llm.yaml"), model=args.model,
                              slots=args.slots)
    server.delay_s = args.latency
    server.requests = _Discard()  # keep no request bodies: a year sends thousands
    with server:
        print(server.host, flush=True)
        sys.stdin.read()
    return 0


class _Discard(list):
    def append(self, item) -> None:  # noqa: D102 - drops what the test server records
        return None


if __name__ == "__main__":
    sys.exit(main())
