"""Embedders: TF-IDF against hand arithmetic, Ollama through a fake client, MiniLM offline."""

from __future__ import annotations

import math

import numpy as np
import pytest

from governed_broker.memory.embedding import (
    EmbedderUnavailable,
    OllamaEmbedder,
    TfidfEmbedder,
    make_embedder,
    normalise_rows,
)


def test_tfidf_matches_hand_computation():
    emb = TfidfEmbedder(["flood flood home", "home insurance"])
    assert emb.dim == 3 and sorted(emb.vocabulary) == ["flood", "home", "insurance"]
    v = emb.embed(["flood home"])[0]
    idf_flood = math.log(3 / 2) + 1  # df 1 of 2 docs, smoothed
    idf_home = math.log(3 / 3) + 1
    raw = np.array([idf_flood, idf_home, 0.0])
    order = [emb.vocabulary[w] for w in ("flood", "home", "insurance")]
    assert np.allclose(v[order], raw / np.linalg.norm(raw), atol=1e-6)
    assert v.dtype == np.float32
    assert not emb.embed(["nothing known here"]).any()  # zero row, honestly
    back = TfidfEmbedder.from_state(emb.state())
    assert np.array_equal(back.embed(["flood home"]), emb.embed(["flood home"]))


def test_embed_rejects_a_single_string_and_normalises():
    emb = TfidfEmbedder(["a b c"])
    with pytest.raises(TypeError):
        emb.embed("a b")
    m = normalise_rows(np.array([[3.0, 4.0], [0.0, 0.0]]))
    assert np.allclose(m, [[0.6, 0.8], [0, 0]])


class FakeOllama:
    def __init__(self, fail: bool = False):
        self.calls, self.fail = [], fail

    def embed(self, model, input):
        self.calls.append((model, list(input)))
        if self.fail:
            raise ConnectionError("connection refused")
        return {"embeddings": [[float(len(t)), 1.0, 0.0] for t in input]}


def test_ollama_embedder_normalises_and_probes_dimension():
    fake = FakeOllama()
    emb = OllamaEmbedder(host="http://x:1", model="nomic-embed-text", client=fake)
    assert emb.dim == 3 and emb.name == "ollama:nomic-embed-text"
    out = emb.embed(["abc", "a"])
    assert out.shape == (2, 3) and np.allclose(np.linalg.norm(out, axis=1), 1.0)
    assert fake.calls[-1] == ("nomic-embed-text", ["abc", "a"])


def test_ollama_errors_say_what_to_do():
    with pytest.raises(EmbedderUnavailable, match="ollama pull nomic-embed-text"):
        OllamaEmbedder(model="nomic-embed-text", client=FakeOllama(fail=True))


def test_ollama_unreachable_with_real_client():
    pytest.importorskip("ollama")
    with pytest.raises(EmbedderUnavailable, match="ollama serve"):
        OllamaEmbedder(host="http://127.0.0.1:9", model="nomic-embed-text", timeout=2)


def test_make_embedder_errors():
    with pytest.raises(ValueError, match="allowed"):
        make_embedder("hash")
    with pytest.raises(ValueError, match="corpus"):
        make_embedder("tfidf")
    assert make_embedder("tfidf", corpus=["a b"]).dim == 2


def test_minilm_offline_semantics(minilm):
    emb = minilm
    v = emb.embed(["My home flooded badly.", "Water poured into my house.",
                   "I bought a new bicycle."])
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2  # paraphrase closer than an unrelated sentence
