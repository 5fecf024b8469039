"""Exact inner-product vector index (FAISS ``IndexIDMap2(IndexFlatIP)``).

Embeddings are unit length, so inner product = cosine similarity. The flat index is exact
(no approximation to explain in a paper), supports removal by id and restriction of a search
to a candidate id set (the structured filter of the episodic store). docs/memory.md gives
the measurements behind the choice.
"""

from __future__ import annotations

import numpy as np

FAISS_INSTALL = "pip install faiss-cpu  (extra 'memory')"


def _faiss():
    try:
        import faiss
    except ImportError as exc:
        raise ImportError(
            f"the episodic store's vector index needs FAISS: {FAISS_INSTALL}") from exc
    return faiss


class FaissFlatIndex:
    """Exact cosine search over unit vectors keyed by non-negative int64 ids.

    Args:
        dim: Vector dimension.
        threads: OpenMP threads FAISS uses (process-wide setting; None leaves it alone). One
            thread is fastest for the single-query searches of the store: measured 1.3 ms
            against 48 ms with two threads for 10,000 x 384 vectors on a loaded 2-core machine
            (OpenMP spin-waiting), see ``benchmarks/bench_memory.py``.
    """

    def __init__(self, dim: int, threads: int | None = 1) -> None:
        self._faiss = _faiss()
        if threads is not None:
            self._faiss.omp_set_num_threads(int(threads))
        self.dim = int(dim)
        self._index = self._faiss.IndexIDMap2(self._faiss.IndexFlatIP(self.dim))

    @property
    def ntotal(self) -> int:
        """Number of stored vectors."""
        return int(self._index.ntotal)

    def add(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Add vectors (rows) under ``ids``."""
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape[1] != self.dim:
            raise ValueError(f"vectors must have shape (n, {self.dim}), got {vecs.shape}")
        self._index.add_with_ids(vecs, np.ascontiguousarray(ids, dtype=np.int64))

    def remove(self, ids: np.ndarray) -> int:
        """Remove ids (absent ids are ignored); return how many were removed."""
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if ids.size == 0:
            return 0
        return int(self._index.remove_ids(self._faiss.IDSelectorBatch(ids)))

    def reset(self) -> None:
        """Remove everything."""
        self._index.reset()

    def search(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` most similar ids (and similarities), optionally among ``allowed`` ids."""
        if self.ntotal == 0 or k <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, self.dim)
        params = None
        if allowed is not None:
            allowed = np.ascontiguousarray(allowed, dtype=np.int64)
            if allowed.size == 0:
                return np.zeros(0, np.int64), np.zeros(0, np.float32)
            k = min(k, int(allowed.size))
            params = self._faiss.SearchParameters(sel=self._faiss.IDSelectorBatch(allowed))
        k = min(k, self.ntotal)
        sims, ids = self._index.search(q, k, params=params)
        keep = ids[0] >= 0
        return ids[0][keep], sims[0][keep]
