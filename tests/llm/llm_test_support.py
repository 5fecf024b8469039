"""Shared pieces of the llm tests: the decision schema and a test completion function."""

from __future__ import annotations

import json
from typing import Any

DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "decision": {"enum": ["do_nothing", "buy_insurance", "elevate_house", "relocate"]},
        "reason": {"type": "string", "minLength": 1, "maxLength": 80},
    },
    "required": ["decision", "reason"],
    "additionalProperties": False,
}


def fake_completion(request: dict[str, Any]) -> dict[str, Any]:
    """A test double of llama-server's chat completion: a function of seed and prompt.

    The reply names the seed and echoes the last message length so tests can see that the
    request reached it unchanged. It is not a model and only used by unit tests.
    """
    seed = int(request.get("seed", 0))
    actions = DECISION_SCHEMA["properties"]["decision"]["enum"]
    last = request["messages"][-1]["content"]
    content = json.dumps(
        {"decision": actions[seed % 4], "reason": f"seed {seed}, prompt {len(last)} chars"}
    )
    return {
        "choices": [{"message": {"role": "assistant", "content": content},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": len(last) // 4 + 1, "completion_tokens": 12},
        "timings": {"prompt_n": len(last) // 4 + 1, "prompt_ms": 1.5, "predicted_n": 12,
                    "predicted_ms": 3.0},
    }
