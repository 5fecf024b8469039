"""The battery's statistics against published worked examples and hand-computed cases."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governed_broker.validity import stats


def test_icc_2_1_matches_shrout_and_fleiss() -> None:
    # Shrout & Fleiss (1979), Table 2: 6 targets x 4 judges; ICC(2,1) = 0.29
    table = [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]]
    assert stats.icc_2_1(table) == pytest.approx(0.29, abs=0.005)


def test_icc_is_one_for_perfect_agreement_and_undefined_without_variance() -> None:
    assert stats.icc_2_1([[1, 1, 1], [3, 3, 3], [0, 0, 0]]) == pytest.approx(1.0)
    assert stats.icc_2_1([[2, 2], [2, 2], [2, 2]]) is None
    assert stats.icc_2_1([[1, 2]]) is None  # one target


def test_krippendorff_nominal_matches_the_worked_example() -> None:
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability", nominal example:
    # 4 coders, 12 units, missing values; alpha = 0.743
    data = [[1, 1, None, 1], [2, 2, 3, 2], [3, 3, 3, 3], [3, 3, 3, 3], [2, 2, 2, 2],
            [1, 2, 3, 4], [4, 4, 4, 4], [1, 1, 2, 1], [2, 2, 2, 2], [None, 5, 5, 5],
            [None, None, 1, 1], [None, None, 3, None]]
    units = [[v for v in unit if v is not None] for unit in data]
    assert stats.krippendorff_nominal(units) == pytest.approx(0.743, abs=0.001)


def test_krippendorff_undefined_when_everyone_agrees_on_one_value() -> None:
    assert stats.krippendorff_nominal([["a", "a"], ["a", "a", "a"]]) is None
    assert stats.krippendorff_nominal([["a"], ["b"]]) is None  # nothing pairable


def test_total_variation_and_its_permutation_test() -> None:
    assert stats.total_variation(["a", "a"], ["a", "b"]) == pytest.approx(0.5)
    assert stats.tv_permutation_p(["a"] * 8, ["b"] * 8, 2000, 1) < 0.01
    assert stats.tv_permutation_p(["a", "b"] * 4, ["b", "a"] * 4, 2000, 1) == 1.0
    # seeded: the same p-value every time
    assert stats.tv_permutation_p(list("aabb"), list("abbb"), 500, 7) == \
        stats.tv_permutation_p(list("aabb"), list("abbb"), 500, 7)


def test_spearman_one_sided_and_undefined() -> None:
    rho, p = stats.spearman([0, 0, 1, 1, 2, 2], [0, 1, 1, 2, 2, 3], "greater")
    assert rho > 0.8 and p < 0.05
    rho_less, p_less = stats.spearman([0, 0, 1, 1, 2, 2], [0, 1, 1, 2, 2, 3], "less")
    assert rho_less == rho and p_less > 0.9
    assert stats.spearman([0, 1, 2], [1, 1, 1], "greater") == (None, None)


@given(st.lists(st.sampled_from("abcd"), min_size=1, max_size=20),
       st.lists(st.sampled_from("abcd"), min_size=1, max_size=20))
def test_total_variation_is_a_bounded_symmetric_distance(a: list[str], b: list[str]) -> None:
    tv = stats.total_variation(a, b)
    assert 0.0 <= tv <= 1.0 + 1e-12
    assert tv == pytest.approx(stats.total_variation(b, a))
    assert stats.total_variation(a, list(reversed(a))) == pytest.approx(0.0)
