"""Reciprocal rank fusion of several ranked result lists.

With multi-query expansion and HyDE one search runs several queries, each giving a ranking of
the chunks. Reciprocal rank fusion (Cormack, Clarke and Buettcher, SIGIR 2009) combines them
as ``score(d) = sum over rankings of 1 / (k + rank(d))`` with 1-based ranks. It needs no score
calibration between queries (a HyDE passage and a three-word query give cosines on different
scales) and rewards chunks that several queries agree on. Ties are broken by the first ranking
in which the item appears and then by its rank there, so the order is deterministic.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


def reciprocal_rank_fusion(rankings: Sequence[Sequence[K]], k: int = 60) -> list[tuple[K, float]]:
    """Fuse rankings (best first) into one list of (item, fused score), best first.

    Args:
        rankings: Each ranking lists item keys best first; an item appears at most once per
            ranking (later duplicates are ignored and take no rank).
        k: RRF constant (> 0); larger values flatten the advantage of top ranks.

    Returns:
        Every item of any ranking once, sorted by fused score descending, ties broken by
        (index of the first ranking containing it, its rank there).
    """
    if k <= 0:
        raise ValueError(f"RRF constant k must be > 0, got {k}")
    scores: dict[K, float] = {}
    first_seen: dict[K, tuple[int, int]] = {}
    for r, ranking in enumerate(rankings):
        distinct = list(dict.fromkeys(ranking))  # later duplicates do not take a rank
        for rank, item in enumerate(distinct, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
            first_seen.setdefault(item, (r, rank))
    return sorted(scores.items(), key=lambda kv: (-kv[1], first_seen[kv[0]]))
