"""Fixtures of the llm tests: a deterministic completion function and test servers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the test server module lives next to the tests

from llm_test_support import fake_completion  # noqa: E402
from ollama_test_server import OllamaTestServer  # noqa: E402


@pytest.fixture
def fake_server():
    """An Ollama-API test server backed by ``fake_completion``."""
    with OllamaTestServer(fake_completion, model="qwen2.5-coder:0.5b") as server:
        yield server


@pytest.fixture
def model_cache(tmp_path, monkeypatch):
    """An empty model cache directory ($GOVERNED_BROKER_CACHE)."""
    monkeypatch.setenv("GOVERNED_BROKER_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"
