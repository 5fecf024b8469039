"""LLM backends behind one small interface, with a response cache and a call log.

Backends: ``embedded`` (llama.cpp in-process via xllamacpp, the default), ``ollama`` (the
official client against one or several servers), ``openai`` (OpenAI-compatible servers such
as llama.cpp server or vLLM) and ``scripted`` (fixed replies for tests, never presented as a
model). Build one with :func:`backend_from_config`.
"""

from governed_broker.llm.base import (
    LLMBackend,
    LLMError,
    LLMRequest,
    LLMResponse,
    LLMTimeoutError,
    LLMTransportError,
)
from governed_broker.llm.cache import ResponseCache, cache_key
from governed_broker.llm.call_log import CallLog
from governed_broker.llm.factory import backend_from_config, build_backend
from governed_broker.llm.reliability import RetryPolicy
from governed_broker.llm.scripted import ScriptedBackend, ScriptRule
from governed_broker.llm.wrappers import BackendWrapper, CachedBackend, LoggedBackend

__all__ = [
    "BackendWrapper",
    "CachedBackend",
    "CallLog",
    "LLMBackend",
    "LLMError",
    "LLMRequest",
    "LLMResponse",
    "LLMTimeoutError",
    "LLMTransportError",
    "LoggedBackend",
    "ResponseCache",
    "RetryPolicy",
    "ScriptRule",
    "ScriptedBackend",
    "backend_from_config",
    "build_backend",
    "cache_key",
]
