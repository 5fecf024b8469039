"""A toy language model for the readout's tests.

a tokenizer, next-token rules, and the three ways a readout reaches a model (a plain token source, a
llama.cpp-like server, an OpenAI-compatible chat endpoint), all answering from the same rules.

The tokenizer has multi-character pieces (``VL``, ``ele``, ``_house``...) and every printable
ASCII character, and splits text greedily by the longest piece. The model's next-token
probabilities come from ``RULES``: the first rule whose pattern matches the end of the text
so far gives them (listed tokens only: the rest of the mass is beyond any top-k).
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from governed_broker.llm.readout import (
    UNDER_GRAMMAR,
    Candidate,
    ReplyPath,
    Token,
    TokenSampler,
)

PIECES = ["<s>", "<u>", "<a>", '{"', '":', ' "', '",', ' {"', "VL", "V", "L", "M", "H", "None",
          "|", "do", "_nothing", "buy", "_insurance", "ele", "el", "evate", "vate", "_house",
          "_and", "_ins", "ure", "relocate", "elevate", "_", "house", "and", "x", "!"]
VOCAB = PIECES + [chr(c) for c in [10, *range(32, 127)] if chr(c) not in PIECES]

#: (pattern matched at the end of the text, next-token probabilities).
Rules = list[tuple[str, dict[str, float]]]

THREAT_ROOT = {"V": 0.30, "VL": 0.20, "L": 0.15, "H": 0.10, "M": 0.05, "|": 0.10, "None": 0.10}
AFTER_V = {"H": 0.60, "L": 0.20, "|": 0.20}
#: What the walk gives for THREAT_ROOT and AFTER_V (allowed mass 0.8 at the root; after V,
#: H 0.75 and L 0.25).
THREAT_EXPECTED = {"VL": 0.25 + 0.375 * 0.25, "L": 0.1875, "M": 0.0625, "H": 0.125,
                   "VH": 0.375 * 0.75}
DECISION_ROOT = {"do": 0.40, "buy": 0.20, "ele": 0.25, "el": 0.05, "relocate": 0.05,
                 "None": 0.05}
AFTER_ELEVATE = {"_house": 0.5, "_and": 0.3, "_": 0.1, "!": 0.1}
#: What the walk gives for the decision rules (allowed 0.95 at the root; after "elevate",
#: house 5/9 + 1/9 * 0.6 and and 3/9 + 1/9 * 0.4).
DECISION_EXPECTED = {"do_nothing": 0.40 / 0.95, "buy_insurance": 0.20 / 0.95,
                     "elevate_house": 0.30 / 0.95 * 5.6 / 9,
                     "elevate_and_insure": 0.30 / 0.95 * 3.4 / 9, "relocate": 0.05 / 0.95}

RULES: Rules = [
    (r'"threat_appraisal": \{"label": "V$', AFTER_V),
    (r'"threat_appraisal": \{"label": "$', THREAT_ROOT),
    # the coping label depends on the threat label written before it
    (r'"VH".*"coping_appraisal": \{"label": "$', {"H": 0.7, "L": 0.3}),
    (r'"coping_appraisal": \{"label": "$', {"H": 0.2, "L": 0.8}),
    (r'"decision": "ele$', {"vate": 0.8, "x": 0.2}),
    (r'"decision": "el$', {"evate": 1.0}),
    (r'"decision": "elevate_$', {"house": 0.6, "and": 0.4}),
    (r'"decision": "elevate$', AFTER_ELEVATE),
    (r'"decision": "$', DECISION_ROOT),
    # after a settled value: the closing quote competes with the format's "|"
    (r'"(VL|VH|L|M|H)$', {"|": 0.5, '"': 0.3, '",': 0.2}),
]

LABELS = ["VL", "L", "M", "H", "VH"]
ACTIONS = ["do_nothing", "buy_insurance", "elevate_house", "elevate_and_insure", "relocate"]


def schema(actions: Sequence[str] = ACTIONS) -> dict[str, Any]:
    """The decision reply's schema (as ``cognition.schema`` writes it) for these actions."""
    from governed_broker.cognition.schema import decision_json_schema

    return decision_json_schema(list(actions), LABELS)


def reply(threat: str = "VH", coping: str = "H", decision: str = "do_nothing",
          reason: str = "x") -> str:
    """A reply in the layout of the format the prompt shows.

    The defaults are the greedy reply under ``RULES``.
    """
    return (f'{{"threat_appraisal": {{"label": "{threat}", "reason": "{reason}"}},\n '
            f'"coping_appraisal": {{"label": "{coping}", "reason": "{reason}"}},\n '
            f'"decision": "{decision}", "reason": ""}}')


class Tokenizer:
    """Greedy longest-piece tokenisation over ``VOCAB`` and ``extra`` pieces."""

    def __init__(self, extra: Sequence[str] = ()) -> None:
        self.vocab = VOCAB + list(extra)
        self.ids = {p: i for i, p in enumerate(self.vocab)}
        self.longest = max(len(p) for p in self.vocab)

    def encode(self, text: str) -> list[int]:
        out, i = [], 0
        while i < len(text):
            for n in range(min(self.longest, len(text) - i), 0, -1):
                if text[i:i + n] in self.ids:
                    out.append(self.ids[text[i:i + n]])
                    i += n
                    break
            else:
                raise ValueError(f"no piece for {text[i]!r}")
        return out

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.vocab[i] for i in ids)

    def token(self, piece_id: int) -> Token:
        return Token(self.vocab[piece_id].encode(), piece_id)


TOKENIZER = Tokenizer()


def next_tokens(text: str, rules: Rules = RULES) -> dict[str, float]:
    """The model's next-token probabilities after ``text`` (listed tokens only)."""
    for pattern, probs in rules:
        if re.search(pattern, text, re.S):
            return probs
    return {'"': 1.0}


def top(text: str, k: int, rules: Rules = RULES, shift: float = 0.0,
        tokenizer: Tokenizer = TOKENIZER) -> list[Candidate]:
    """The ``k`` most probable next tokens after ``text``.

    The log-probability of the n-th is moved by ``n * shift``, as a differently rounded
    evaluation would move them.
    """
    ranked = sorted(next_tokens(text, rules).items(), key=lambda kv: -kv[1])[:k]
    return [Candidate(tokenizer.token(tokenizer.ids[p]), math.log(q) + n * shift)
            for n, (p, q) in enumerate(ranked)]


class ToySource:
    """A ``TokenSource`` over the rules: the replies are given, the prompt is a string.

    Args:
        greedy_text: The greedy reply (a request at temperature 0).
        rules: The model's next-token probabilities.
        tokenizer: How replies are split into tokens.
        sampled: The reply drawn with each seed (a request at a temperature above 0).
        sampler: How its replies are drawn (default: from the rules under the grammar).

    Attributes:
        asked: The text after which each position was read.
        requests: The path requests, in order.
        reused: Whether each path was asked to reuse the previous path's prompt evaluation.
    """

    name = "toy"

    def __init__(self, greedy_text: str, rules: Rules = RULES,
                 tokenizer: Tokenizer = TOKENIZER,
                 sampled: dict[int, str] | None = None,
                 sampler: TokenSampler = UNDER_GRAMMAR) -> None:
        self.greedy_text = greedy_text
        self._sampler = sampler
        self.rules = rules
        self.tokenizer = tokenizer
        self.sampled = sampled or {}
        self.asked: list[str] = []
        self.requests: list[Any] = []
        self.reused: list[bool] = []

    def path(self, request: Any, reuse_prompt: bool = False) -> ReplyPath:
        self.requests.append(request)
        self.reused.append(reuse_prompt)
        text = self.greedy_text if request.temperature == 0 else self.sampled[request.seed]
        ids = self.tokenizer.encode(text)
        return ReplyPath(text, tuple(self.tokenizer.token(i) for i in ids),
                         prompt=request.messages[-1]["content"])

    def sampler(self, request: Any) -> TokenSampler:
        return self._sampler

    def top_tokens(self, reply: ReplyPath, prefix: Sequence[Token], k: int) -> list[Candidate]:
        text = reply.prompt + b"".join(t.text for t in prefix).decode()
        self.asked.append(text[len(reply.prompt):])
        return top(text, k, self.rules, tokenizer=self.tokenizer)


def template(messages: Sequence[dict[str, str]]) -> str:
    """The toy chat template."""
    marks = {"system": "<s>", "user": "<u>", "assistant": "<a>"}
    return "".join(marks[m["role"]] + m["content"] for m in messages) + "<a>"


def entry(piece_id: int, logprob: float) -> dict[str, Any]:
    """A token as llama.cpp and OpenAI-style servers list it."""
    piece = VOCAB[piece_id]
    return {"id": piece_id, "token": piece, "bytes": list(piece.encode()), "logprob": logprob}


class ToyLlamaServer:
    """Answers ``handle_completions`` as the embedded llama.cpp server does, from the rules.

    It has a prompt cache (``cache_prompt``: the tokens the slot's previous prompt shares with
    this one are not evaluated again). As with llama.cpp's rounding, the numbers a position
    gives depend on which evaluation computed its context: every reused token computed for
    another prompt (here: another user message) moves them. ``/apply-template`` and
    ``/tokenize`` are served over HTTP.

    Args:
        replies: The greedy reply to each prompt (by its user message).
    """

    def __init__(self, replies: dict[str, str]) -> None:
        self.replies = replies
        self.cached: list[tuple[int, str]] = []  # (token, the user message it was read for)
        self.payloads: list[dict[str, Any]] = []
        self.http = _serve({"/apply-template": lambda p: {"prompt": template(p["messages"])},
                            "/tokenize": lambda p: {"tokens": TOKENIZER.encode(p["content"])}})
        self.listening_address = f"http://127.0.0.1:{self.http.server_address[1]}/"

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()

    def _evaluate(self, prompt: list[int], reuse: bool, owner: str) -> None:
        keep = 0
        if reuse:  # llama.cpp evaluates at least the last token again
            while (keep < min(len(self.cached), len(prompt) - 1)
                   and self.cached[keep][0] == prompt[keep]):
                keep += 1
        self.cached = self.cached[:keep] + [(t, owner) for t in prompt[keep:]]

    def handle_completions(self, payload: dict[str, Any]) -> dict[str, Any]:
        self.payloads.append(payload)
        prompt = list(payload["prompt"])
        text = TOKENIZER.decode(prompt)
        owner = text.split("<u>")[1].split("<a>")[0]
        self._evaluate(prompt, bool(payload.get("cache_prompt", True)), owner)
        if payload["n_predict"] > 1:  # the greedy path
            ids = TOKENIZER.encode(self.replies[owner])
            self.cached += [(i, owner) for i in ids]
            steps = [{**entry(i, 0.0), "prob": 1.0, "top_probs": []} for i in ids]
            return {"choices": [{"text": self.replies[owner], "logprobs": {"content": steps}}]}
        shift = 1e-3 * sum(who != owner for _, who in self.cached)
        tops = [entry(c.token.id, c.logprob) for c in top(text, payload["n_probs"], shift=shift)]
        self.cached.append((tops[0]["id"], owner))
        return {"choices": [{"text": tops[0]["token"],
                             "logprobs": {"content": [{**tops[0], "top_logprobs": tops}]}}]}


def _serve(routes: dict[str, Callable[[dict[str, Any]], dict[str, Any]]]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the http.server name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            data = json.dumps(routes[self.path](body)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def chat_handler(replies: dict[str, str], continues: bool = True, logprobs: bool = True
                 ) -> Callable[[Any], Any]:
    """An ``httpx.MockTransport`` handler answering OpenAI-style chat completions from the rules.

    the greedy reply when a ``response_format`` is given, else one token after the messages
    (continuing a final assistant message when ``continues``, as llama-server and vLLM with
    ``continue_final_message`` do; else after it, as a server that starts a new turn would).
    """
    import httpx

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        messages = body["messages"]
        user = [m for m in messages if m["role"] == "user"][-1]["content"]
        if "response_format" in body:
            ids = TOKENIZER.encode(replies[user])
            steps = [entry(i, 0.0) for i in ids] if logprobs else None
            return httpx.Response(200, json={"choices": [{
                "message": {"content": replies[user]},
                "logprobs": steps and {"content": steps}}]})
        assert body["max_tokens"] == 1 and body["top_logprobs"] <= 20
        if continues and body.get("continue_final_message"):
            context = template(messages[:-1]) + messages[-1]["content"]
        else:  # a new turn after the whole conversation
            context = template(messages)
        tops = [entry(c.token.id, c.logprob) for c in top(context, body["top_logprobs"])]
        return httpx.Response(200, json={"choices": [{
            "message": {"content": tops[0]["token"]},
            "logprobs": {"content": [{**tops[0], "top_logprobs": tops}]}}]})

    return handle
