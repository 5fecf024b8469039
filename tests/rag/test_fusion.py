"""Reciprocal rank fusion: the formula and deterministic tie-breaking."""

from __future__ import annotations

import pytest

from governed_broker.rag.fusion import reciprocal_rank_fusion


def test_scores_follow_the_formula() -> None:
    fused = dict(reciprocal_rank_fusion([["a", "b"], ["b", "c"]], k=60))
    assert fused["a"] == pytest.approx(1 / 61)
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["c"] == pytest.approx(1 / 62)


def test_agreement_beats_a_single_first_place() -> None:
    order = [item for item, _ in reciprocal_rank_fusion([["a", "b"], ["c", "b"], ["d", "b"]])]
    assert order[0] == "b"


def test_ties_break_by_first_ranking_then_rank() -> None:
    # a and c tie (both rank 1 once); a appears in the earlier ranking
    assert [i for i, _ in reciprocal_rank_fusion([["a"], ["c"]])] == ["a", "c"]
    assert [i for i, _ in reciprocal_rank_fusion([["c"], ["a"]])] == ["c", "a"]


def test_duplicates_within_a_ranking_count_once() -> None:
    fused = dict(reciprocal_rank_fusion([["a", "a", "b"]], k=1))
    assert fused == {"a": pytest.approx(1 / 2), "b": pytest.approx(1 / 3)}


def test_bad_k_is_rejected() -> None:
    with pytest.raises(ValueError, match="k"):
        reciprocal_rank_fusion([["a"]], k=0)
