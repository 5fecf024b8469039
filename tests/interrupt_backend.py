"""A stand-in for the embedded model in Ctrl-C tests.

The real ``EmbeddedBackend`` (worker thread, streamed reply, cancellation) in front of a fake
llama.cpp server that "reads its prompt" for ``FAKE_PROMPT_S`` seconds and then streams a fixed
valid reply a few characters every ``FAKE_TOKEN_S`` seconds, or every second once the file
``FAKE_SLOW_FLAG`` exists (a call then takes about 15 s unless it is stopped). Registered as the
backend ``fake_embedded`` by ``install``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

DECISION = {"threat_appraisal": {"label": "M", "reason": "a flood could reach us"},
            "coping_appraisal": {"label": "M", "reason": "we could pay for insurance"},
            "decision": "do_nothing", "reason": "nothing has happened to us yet"}
INSIGHTS = {"insights": ["I live where floods happen."]}


class FakeServer:
    def handle_chat_completions(self, payload, callback):
        schema = json.dumps(payload.get("response_format", {}))
        text = json.dumps(INSIGHTS if "insights" in schema else DECISION)
        time.sleep(float(os.environ.get("FAKE_PROMPT_S", "0")))
        gap = float(os.environ.get("FAKE_TOKEN_S", "0"))
        if os.path.exists(os.environ.get("FAKE_SLOW_FLAG", "/nonexistent")):
            gap = 1.0
        for i in range(0, len(text), 8):
            if callback({"choices": [{"index": 0, "delta": {"content": text[i:i + 8]},
                                      "finish_reason": None}]}):
                return
            time.sleep(gap)
        callback({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        callback({"choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 40}})


def build(cfg, base_dir):
    from governed_broker.llm import embedded

    embedded.load_server = lambda settings: FakeServer()
    model = Path(os.environ["FAKE_MODEL_FILE"])
    return embedded.EmbeddedBackend(embedded.EmbeddedSettings(model), model_name="fake",
                                    sha256="0" * 64, timeout_s=cfg.timeout_s)


def install() -> None:
    from governed_broker.config.llm import LLM_BACKENDS

    LLM_BACKENDS["fake_embedded"] = "interrupt_backend:build"
