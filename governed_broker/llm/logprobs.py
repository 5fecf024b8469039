"""Token probabilities from the backends that expose them (the readout's sources).

``token_source(backend)`` gives the ``llm.readout.TokenSource`` of a backend:

* ``embedded`` (llama.cpp in-process): the prompt is rendered by the model's own chat template
  and tokenised by the loaded server (its ``/apply-template`` and ``/tokenize`` routes), so it
  is exactly the prompt a run sends; a path (greedy, or drawn with the request's sampling) is
  generated with the prompt evaluated whole (``cache_prompt: false``), and each position after
  it is read from the server's ``/completion`` with token ids (``n_probs``: the raw
  log-probabilities of the whole vocabulary's top tokens, before grammar and temperature),
  reusing that evaluation. The positions read thus depend only on the request (its seed), the
  model and ``llm.threads``, never on the call before. A path asked with ``reuse_prompt`` (a
  readout's accounts after the first, whose prompt the previous path evaluated whole) is sent
  with ``cache_prompt: true``: llama.cpp keeps the slot's evaluation of the whole prompt and
  evaluates its last token again (to have its logits), so the path costs its generated tokens.
  With several slots (``llm.concurrency``), llama.cpp picks the slot whose cached prompt is most
  like the request's (``slot_prompt_similarity``), the one holding this prompt.
* ``openai`` (an OpenAI-compatible server that returns ``logprobs``: llama.cpp's
  ``llama-server``, vLLM): a path is a chat completion with ``logprobs``; a position
  after it is a one-token chat completion that continues the path's text as the assistant's
  message (``continue_final_message``, vLLM's name; llama-server continues a final assistant
  message by itself) with ``top_logprobs`` (at most 20, the API's limit). The path is asked
  for with ``cache_prompt: false`` (llama-server's field; a server that refuses it answers
  with an HTTP error, which the readout names), so its prompt is evaluated whole, as the
  embedded source's is (``true`` with ``reuse_prompt``). The server tokenises that text
  again, and a readout is as deterministic as the server.

Every other backend (``ollama``, ``scripted``, ...) cannot be read: ``token_source`` says so
and what to use instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from governed_broker.llm.base import LLMBackend, LLMError, LLMRequest
from governed_broker.llm.readout import Candidate, ReadoutError, ReplyPath, Token, TokenSource
from governed_broker.llm.reliability import openai_response_format
from governed_broker.llm.sampler_chain import LlamaCppSampler
from governed_broker.llm.wrappers import BackendWrapper

#: Most alternatives an OpenAI-style ``top_logprobs`` may ask for.
OPENAI_MAX_TOP = 20


def token_source(backend: LLMBackend) -> TokenSource:
    """The token probabilities of ``backend`` (its cache and call-log layers looked through).

    Raises:
        LLMError: The backend does not expose token probabilities; the message names it and
            what to use instead.
    """
    inner: Any = backend
    while isinstance(inner, BackendWrapper):
        inner = inner.inner
    if inner.kind == "embedded":
        from governed_broker.llm.embedded import load_server

        return LlamaCppSource(load_server(inner.settings), f"embedded {inner.model_id}")
    if inner.kind == "openai":
        return ChatLogprobsSource(inner.bases[0], inner.model, headers=inner.headers,
                                  timeout_s=inner.policy.timeout_s)
    if inner.kind == "reference":
        from governed_broker.llm.reference import ReferenceSource

        return ReferenceSource(inner)
    raise LLMError(
        f"the {inner.kind} backend ({inner.model_id}) does not give this framework token "
        "probabilities, so its choice distributions cannot be read; use llm.backend: embedded "
        "(a catalogue model, or any GGUF file as llm.model_path) or llm.backend: openai with a "
        "server that returns logprobs (llama.cpp's llama-server, vLLM), or sample replies")


def _top(entries: Sequence[dict[str, Any]]) -> list[Candidate]:
    """Candidates from OpenAI-style ``top_logprobs`` entries.

    ``bytes`` is preferred to the token's text, which may hold a partial character.
    """
    return [Candidate(_token(e), float(e["logprob"])) for e in entries]


def _token(entry: dict[str, Any]) -> Token:
    raw = entry.get("bytes")
    text = bytes(raw) if raw is not None else str(entry["token"]).encode("utf-8")
    return Token(text, entry.get("id"))


def _logprob_steps(data: Any, where: str) -> list[dict[str, Any]]:
    try:
        steps = data["choices"][0]["logprobs"]["content"]
    except (KeyError, IndexError, TypeError):
        steps = None
    if not steps:
        raise LLMError(f"{where} returned no token log-probabilities (logprobs) in "
                       f"{str(data)[:300]}; use a server that returns them (llama-server, vLLM)")
    return steps


class LlamaCppSource:
    """A llama.cpp server in the process, read token by token (see the module docstring).

    Args:
        server: The loaded ``xllamacpp.Server`` (``handle_completions`` and the HTTP routes at
            ``listening_address``).
        name: The model, for messages and provenance.
    """

    def __init__(self, server: Any, name: str) -> None:
        self.server = server
        self.name = name
        self.address = str(server.listening_address).rstrip("/")

    def _post(self, route: str, payload: dict[str, Any]) -> dict[str, Any]:
        from governed_broker.llm.openai_backend import _import_httpx

        reply = _import_httpx().post(self.address + route, json=payload, timeout=60.0)
        if reply.status_code != 200:
            raise LLMError(f"{self.name}: {route} answered HTTP {reply.status_code}: "
                           f"{reply.text[:300]}")
        return reply.json()

    def prompt_ids(self, request: LLMRequest) -> list[int]:
        """The token ids of the request's prompt, as the chat route renders it."""
        text = self._post("/apply-template", {"messages": [dict(m) for m in request.messages]})
        tokens = self._post("/tokenize", {"content": text["prompt"], "add_special": False})
        return [int(t) for t in tokens["tokens"]]

    def _complete(self, payload: dict[str, Any]) -> dict[str, Any]:
        result = self.server.handle_completions(payload)
        if not isinstance(result, dict) or "choices" not in result:
            detail = result.get("error") if isinstance(result, dict) else result
            raise LLMError(f"{self.name} returned an error: {detail}")
        return result

    def path(self, request: LLMRequest, reuse_prompt: bool = False) -> ReplyPath:
        """The reply drawn as a run draws it, its prompt evaluated whole unless ``reuse_prompt``.

        The request's temperature, truncation and seed, as the embedded backend sends them.
        """
        ids = self.prompt_ids(request)
        result = self._complete({
            "prompt": ids, "n_predict": request.max_tokens, "temperature": request.temperature,
            # as the embedded backend: 32-bit seeds, 0xFFFFFFFF meaning "random"
            "seed": request.seed % (2**32 - 1), **request.sampling_options(),
            "json_schema": request.json_schema, "cache_prompt": reuse_prompt,
            # the chosen token's id with each step (after sampling: no sort of the vocabulary)
            "n_probs": 1, "post_sampling_probs": True})
        steps = _logprob_steps(result, self.name)
        return ReplyPath(result["choices"][0]["text"], tuple(_token(s) for s in steps), ids)

    def sampler(self, request: LLMRequest) -> LlamaCppSampler:
        """llama.cpp's sampler with the request's settings (``llm.sampler_chain``)."""
        return LlamaCppSampler.of(request)

    def top_tokens(self, reply: ReplyPath, prefix: Sequence[Token], k: int
                   ) -> list[Candidate]:
        """The top ``k`` tokens after the prompt's ids and ``prefix`` (``n_probs``)."""
        result = self._complete({
            "prompt": [*reply.prompt, *(t.id for t in prefix)], "n_predict": 1,
            "temperature": 0.0, "seed": 0, "n_probs": k, "cache_prompt": True})
        return _top(_logprob_steps(result, self.name)[0]["top_logprobs"])


class ChatLogprobsSource:
    """An OpenAI-compatible chat endpoint with ``logprobs`` (see the module docstring).

    Args:
        base_url: Base URL ending in ``/v1`` (the backend's first host).
        model: The model name the server expects.
        headers: HTTP headers (the bearer token, when the server needs one).
        timeout_s: Seconds a request may take.
        client: An ``httpx.Client`` to use (tests); default: a new one.
    """

    def __init__(self, base_url: str, model: str, headers: dict[str, str] | None = None,
                 timeout_s: float = 300.0, client: Any = None) -> None:
        from governed_broker.llm.openai_backend import _import_httpx

        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.name = f"openai {model} at {base_url}"
        self.client = client or _import_httpx().Client(headers=headers or {},
                                                       timeout=timeout_s)

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        reply = self.client.post(self.url, json={"model": self.model, **payload})
        if reply.status_code != 200:
            raise LLMError(f"{self.name}: HTTP {reply.status_code}: {reply.text[:300]}")
        return reply.json()

    def path(self, request: LLMRequest, reuse_prompt: bool = False) -> ReplyPath:
        """The reply through chat completions (the request's sampling), with its tokens' bytes.

        ``reuse_prompt`` is llama-server's ``cache_prompt`` (it picks the slot holding the most
        similar prompt); vLLM caches prefixes by itself.
        """
        messages = [dict(m) for m in request.messages]
        data = self._post({"messages": messages, "temperature": request.temperature,
                           # as the openai backend sends them
                           "seed": request.seed % (2**31), **request.sampling_options(),
                           "max_tokens": request.max_tokens, "logprobs": True,
                           # llama-server: evaluated whole, never reused from another
                           # prompt's call (reused, P(VL) read 0.034 away)
                           "cache_prompt": reuse_prompt,
                           "top_logprobs": 1,  # the tokens are what is needed here
                           "response_format": openai_response_format(request.json_schema)})
        steps = _logprob_steps(data, self.name)
        tokens = tuple(_token(s) for s in steps)
        return ReplyPath(b"".join(t.text for t in tokens).decode("utf-8"), tokens, messages)

    def sampler(self, request: LLMRequest) -> LlamaCppSampler:
        """Not known: the API does not say which server answers, and they sample differently.

        vLLM applies the temperature before its truncation, llama-server after.
        """
        raise ReadoutError(
            f"{self.name}: an OpenAI-compatible server does not say how it samples, so the "
            "distribution its replies are drawn from cannot be worked out; read the model's "
            "own distribution (--view model) and compare sampled cards at temperature 1 "
            "without truncation")

    def top_tokens(self, reply: ReplyPath, prefix: Sequence[Token], k: int
                   ) -> list[Candidate]:
        """The top ``k`` tokens after ``prefix``, read by continuing the reply's text."""
        if k > OPENAI_MAX_TOP:
            raise ReadoutError(f"{self.name}: an OpenAI-compatible server gives at most "
                               f"{OPENAI_MAX_TOP} top_logprobs; read with top_k <= 20")
        try:
            written = b"".join(t.text for t in prefix).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ReadoutError(f"{self.name}: a position inside a character cannot be read "
                               "through a chat endpoint") from exc
        turn: dict[str, Any] = {"messages": reply.prompt}
        if written:
            turn = {"messages": [*reply.prompt, {"role": "assistant", "content": written}],
                    "continue_final_message": True, "add_generation_prompt": False}
        data = self._post({**turn, "max_tokens": 1, "temperature": 0.0, "seed": 0,
                           "logprobs": True, "top_logprobs": k})
        return _top(_logprob_steps(data, self.name)[0]["top_logprobs"])
