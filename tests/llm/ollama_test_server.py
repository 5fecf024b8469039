"""TEST CODE: a stdlib HTTP server that speaks Ollama's HTTP API, for end-to-end tests.

No Ollama server can be installed in CI, so this server lets the ``ollama`` backend be tested
with the official ``ollama`` client. It serves ``/``, ``/api/version``, ``/api/tags``,
``/api/ps``, ``/api/show``, ``/api/chat`` and ``/api/generate`` (durations in nanoseconds,
``format`` as a JSON schema or ``"json"``, streaming as NDJSON), plus the OpenAI-style
``/v1/models`` and ``/v1/chat/completions``. Replies come from a *completion function* that
takes a llama-server style request dict and returns its reply dict: in the real-model tests it
is the embedded model (``xllamacpp.Server.handle_chat_completions``); in fast unit tests a
small deterministic function defined in the test. Fault injection (``fail_next``, ``delay_s``)
exercises retries and timeouts.

It is not a product feature and must never be used as a stand-in for a real Ollama server.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CompletionFn = Callable[[dict[str, Any]], dict[str, Any]]

_SAMPLING_KEYS = ("temperature", "top_p", "top_k", "seed", "stop", "repeat_penalty", "min_p")


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def _to_llama_request(body: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
    options = body.get("options") or {}
    request: dict[str, Any] = {"messages": messages, "cache_prompt": True}
    for key in _SAMPLING_KEYS:
        if key in options:
            request[key] = options[key]
    if "num_predict" in options:
        request["max_tokens"] = options["num_predict"]
    fmt = body.get("format")
    if fmt == "json":
        request["response_format"] = {"type": "json_object"}
    elif isinstance(fmt, dict):
        request["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "reply", "schema": fmt},
        }
    return request


class _Server(ThreadingHTTPServer):
    # connections waiting to be accepted: the default 5 resets clients that open dozens at once
    request_queue_size = 256


class OllamaTestServer:
    """A threaded Ollama-API server on 127.0.0.1 backed by ``complete``.

    Args:
        complete: The completion function (llama-server request dict -> reply dict).
        model: The one model name served (as ``/api/tags`` lists it).
        digest: The digest ``/api/tags`` reports for it.
        port: 0 picks a free port.
        slots: Generations served at once (default 1, like ``OLLAMA_NUM_PARALLEL=1``).

    Use as a context manager; ``host`` is the URL to give the client.
    """

    def __init__(
        self,
        complete: CompletionFn,
        model: str = "qwen2.5-coder:0.5b",
        digest: str = "sha256:" + "0" * 64,
        port: int = 0,
        slots: int = 1,
    ) -> None:
        self.complete = complete
        self.model = model
        self.digest = digest
        self.lock = threading.BoundedSemaphore(slots)  # generations in flight at most
        self.delay_s = 0.0
        self.fail_statuses: list[int] = []
        self.requests: list[dict[str, Any]] = []
        self.stopped = False  # set on exit: open keep-alive connections are dropped too
        self._httpd = _Server(("127.0.0.1", port), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def host(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def fail_next(self, *statuses: int) -> None:
        """Answer the next generation requests with these HTTP statuses (e.g. 503)."""
        self.fail_statuses.extend(statuses)

    def __enter__(self) -> OllamaTestServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped = True
        self._httpd.shutdown()
        self._httpd.server_close()

    # -- request handling ---------------------------------------------------------------

    def _generate(self, body: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
        start = time.perf_counter()
        with self.lock:
            if self.delay_s:
                time.sleep(self.delay_s)
            reply = self.complete(_to_llama_request(body, messages))
        if "choices" not in reply:
            raise RuntimeError(f"completion failed: {reply.get('error', reply)}")
        timings = reply.get("timings", {})
        usage = reply.get("usage", {})
        choice = reply["choices"][0]
        return {
            "content": choice["message"].get("content") or "",
            "done_reason": "length" if choice.get("finish_reason") == "length" else "stop",
            "prompt_eval_count": int(timings.get("prompt_n", usage.get("prompt_tokens", 0))),
            "prompt_eval_duration": int(timings.get("prompt_ms", 0) * 1e6),
            "eval_count": int(timings.get("predicted_n", usage.get("completion_tokens", 0))),
            "eval_duration": int(timings.get("predicted_ms", 0) * 1e6),
            "total_duration": int((time.perf_counter() - start) * 1e9),
            "load_duration": 0,
        }

    def _model_entry(self) -> dict[str, Any]:
        return {
            "name": self.model,
            "model": self.model,
            "modified_at": _now(),
            "size": 491400064,
            "digest": self.digest,
            "details": {
                "format": "gguf",
                "family": "qwen2",
                "families": ["qwen2"],
                "parameter_size": "0.5B",
                "quantization_level": "Q4_K_M",
            },
        }

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # TCP_NODELAY, as Ollama's server has: headers and body leave in two writes, and
            # with Nagle's algorithm the body waits for the client's delayed ACK (~40 ms)
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                return

            def _gone(self) -> bool:
                # a stopped server answers nothing, also on keep-alive connections opened
                # before: like a process that went away, the client sees the connection closed
                if server.stopped:
                    self.close_connection = True
                return server.stopped

            def _send(self, status: int, body: Any, content_type: str = "application/json"):
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> dict[str, Any]:
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length) or b"{}")

            def do_HEAD(self) -> None:  # noqa: N802 - http.server naming
                if self._gone():
                    return
                self._send(200, b"", "text/plain")

            def do_GET(self) -> None:  # noqa: N802
                if self._gone():
                    return
                if self.path == "/":
                    self._send(200, b"Ollama is running", "text/plain")
                elif self.path == "/api/version":
                    self._send(200, {"version": "0.0.0-test-server"})
                elif self.path == "/api/tags":
                    self._send(200, {"models": [server._model_entry()]})
                elif self.path == "/api/ps":
                    entry = {**server._model_entry(), "expires_at": _now(), "size_vram": 0}
                    self._send(200, {"models": [entry]})
                elif self.path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": server.model}]})
                else:
                    self._send(404, {"error": f"no route {self.path}"})

            def do_POST(self) -> None:  # noqa: N802
                if self._gone():
                    return
                try:
                    body = self._body()
                    server.requests.append({"path": self.path, **body})
                    if self.path == "/api/show":
                        self._show(body)
                    elif self.path in ("/api/chat", "/api/generate"):
                        self._chat(body, chat=self.path == "/api/chat")
                    elif self.path == "/v1/chat/completions":
                        self._openai(body)
                    else:
                        self._send(404, {"error": f"no route {self.path}"})
                except Exception as exc:  # noqa: BLE001 - reported to the client as HTTP 500
                    self._send(500, {"error": f"{type(exc).__name__}: {exc}"})

            def _known_model(self, body: dict[str, Any]) -> bool:
                name = body.get("model") or body.get("name") or ""
                if name in (server.model, server.model.split(":")[0]):
                    return True
                self._send(404, {"error": f"model '{name}' not found"})
                return False

            def _injected_failure(self) -> bool:
                if server.fail_statuses:
                    status = server.fail_statuses.pop(0)
                    self._send(status, {"error": f"injected HTTP {status}"})
                    return True
                return False

            def _show(self, body: dict[str, Any]) -> None:
                if self._known_model(body):
                    self._send(200, {
                        "modelfile": f"FROM {server.model}",
                        "parameters": "",
                        "template": "{{ .Prompt }}",
                        "details": server._model_entry()["details"],
                        "model_info": {"general.architecture": "qwen2"},
                        "capabilities": ["completion"],
                        "modified_at": _now(),
                    })

            def _chat(self, body: dict[str, Any], chat: bool) -> None:
                if not self._known_model(body) or self._injected_failure():
                    return
                if chat:
                    messages = list(body.get("messages") or [])
                else:
                    messages = [{"role": "system", "content": body["system"]}] if body.get(
                        "system") else []
                    if body.get("prompt"):
                        messages.append({"role": "user", "content": body["prompt"]})
                base = {"model": server.model, "created_at": _now()}
                if not messages:  # a "load the model" call
                    empty = {"role": "assistant", "content": ""} if chat else ""
                    key = "message" if chat else "response"
                    self._send(200, {**base, key: empty, "done": True, "done_reason": "load"})
                    return
                result = server._generate(body, messages)
                content = result.pop("content")
                key = "message" if chat else "response"
                value = (lambda c: {"role": "assistant", "content": c}) if chat else (lambda c: c)
                final = {**base, key: value(""), "done": True, **result}
                if body.get("stream", True):
                    first = {**base, key: value(content), "done": False}
                    lines = json.dumps(first) + "\n" + json.dumps(final) + "\n"
                    self._send(200, lines.encode(), "application/x-ndjson")
                else:
                    self._send(200, {**final, key: value(content)})

            def _openai(self, body: dict[str, Any]) -> None:
                if not self._known_model(body) or self._injected_failure():
                    return
                with server.lock:
                    if server.delay_s:
                        time.sleep(server.delay_s)
                    request = {k: v for k, v in body.items() if k != "model"}
                    self._send(200, server.complete(request))

        return Handler
