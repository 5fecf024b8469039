"""A scripted LLM backend for fast, deterministic tests of everything above the LLM layer.

It never pretends to be a language model: its ``kind`` is ``"scripted"`` and its model id starts
with ``scripted:``, and both appear in every output a run writes. A script is a list of rules;
each rule matches the last user message (a regular expression) and gives a reply, either a fixed
string / JSON-serialisable object, or a callable of the request. Rules with ``times`` are used
that many times and then skipped, which lets a test script "wrong answer first, right answer on
retry".
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from governed_broker.llm.base import LLMBackend, LLMError, LLMRequest, LLMResponse
from governed_broker.llm.reliability import parse_json_reply

Reply = str | dict | list | Callable[[LLMRequest], Any]


@dataclass
class ScriptRule:
    """One scripted reply: used when ``pattern`` matches the prompt (``re.search``)."""

    pattern: str
    reply: Reply
    times: int | None = None  # None: unlimited
    used: int = 0


class ScriptedBackend(LLMBackend):
    """Replies from a script of (pattern -> reply) rules; the first matching live rule wins.

    Args:
        rules: Rules or ``(pattern, reply)`` / ``(pattern, reply, times)`` tuples.
        name: Label in the model id, e.g. ``"always-insure"``.
        match_on: ``"last_user"`` (default) matches the last user message, ``"all"`` the whole
            conversation joined by newlines.
        keep_calls: Keep every request in ``calls`` (tests inspect them; a run from a
            configuration does not, so a long run does not hold every prompt in memory).
    """

    kind = "scripted"
    supports_schema = True
    max_concurrency = 8

    def __init__(
        self,
        rules: Sequence[ScriptRule | tuple],
        name: str = "script",
        match_on: str = "last_user",
        keep_calls: bool = True,
    ) -> None:
        self.rules = [r if isinstance(r, ScriptRule) else ScriptRule(*r) for r in rules]
        self.model_id = f"scripted:{name}"
        self.match_on = match_on
        self.keep_calls = keep_calls
        self.calls: list[LLMRequest] = []
        self._texts: dict[int, str] = {}  # rule index -> JSON text of its fixed reply

    def _prompt_text(self, request: LLMRequest) -> str:
        if self.match_on == "all":
            return "\n".join(m["content"] for m in request.messages)
        users = [m["content"] for m in request.messages if m.get("role") == "user"]
        return users[-1] if users else ""

    def _reply_for(self, request: LLMRequest) -> str:
        text = self._prompt_text(request)
        for index, rule in enumerate(self.rules):
            if rule.times is not None and rule.used >= rule.times:
                continue
            if re.search(rule.pattern, text, flags=re.S):
                rule.used += 1
                if callable(rule.reply):
                    return _text(rule.reply(request))
                if index not in self._texts:
                    self._texts[index] = _text(rule.reply)
                return self._texts[index]
        raise LLMError(
            f"scripted backend {self.model_id!r}: no rule matches the prompt "
            f"(first 200 chars: {text[:200]!r}); add a rule for it"
        )

    async def achat(self, request: LLMRequest) -> LLMResponse:
        """The first scripted reply whose pattern matches the prompt."""
        start = time.perf_counter()
        if self.keep_calls:
            self.calls.append(request)
        text = self._reply_for(request)
        parsed = None
        if request.json_schema is not None:
            parsed, _ = parse_json_reply(text)  # as a real backend parses: bounded, never raises
        prompt_chars = sum(len(m["content"]) for m in request.messages)
        return LLMResponse(
            text=text,
            parsed=parsed,
            prompt_tokens=max(1, prompt_chars // 4),
            completion_tokens=max(1, len(text) // 4),
            latency_s=time.perf_counter() - start,
            backend=self.kind,
            model=self.model_id,
        )


def _text(reply: Any) -> str:
    return reply if isinstance(reply, str) else json.dumps(reply)
