"""The statistics helpers agree with scipy.stats (which they avoid importing for speed)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from svcdoctor.diagnose.stats import (
    binom_greater,
    chi2_homogeneity,
    count_in,
    count_in_many,
    placement_test,
    proportion_ci,
)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5000), st.data())
def test_binomial_helpers_match_scipy(n: int, data: st.DataObject) -> None:
    k = data.draw(st.integers(0, n))
    p = data.draw(st.floats(0.001, 0.999))
    low, high = proportion_ci(k, n)
    ci = stats.binomtest(k, n).proportion_ci(method="exact")
    assert low == pytest.approx(ci.low, abs=1e-9)
    assert high == pytest.approx(ci.high, abs=1e-9)
    if k:
        expected = stats.binomtest(k, n, p, alternative="greater").pvalue
        assert binom_greater(k, n, p) == pytest.approx(expected, rel=1e-6, abs=1e-12)


def test_chi_square_matches_scipy() -> None:
    k = np.array([5.0, 50.0, 7.0, 12.0])
    n = np.array([100.0, 120.0, 90.0, 300.0])
    expected = stats.chi2_contingency(np.vstack([k, n - k]), correction=False)[1]
    assert chi2_homogeneity(k, n) == pytest.approx(expected)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.floats(0, 100), min_size=1, max_size=60),
    st.lists(st.tuples(st.floats(0, 100), st.floats(0, 30)), min_size=1, max_size=8),
)
def test_counting_in_a_union_of_intervals(
    points: list[float], spans: list[tuple[float, float]]
) -> None:
    times = np.sort(np.array(points))
    starts = np.array([s for s, _ in spans])
    ends = starts + np.array([w for _, w in spans])
    brute = sum(1 for t in times if any(s <= t <= e for s, e in zip(starts, ends, strict=True)))
    assert count_in(times, starts, ends) == brute
    assert count_in_many(times, starts[None, :], ends[None, :])[0] == brute


def test_placement_test_finds_clustering_and_not_chance() -> None:
    rng = np.random.default_rng(3)
    anchors = np.array([100.0, 130.0, 160.0, 190.0])
    clustered = np.sort(np.concatenate([a + rng.uniform(0, 2, 30) for a in anchors]))
    random_failures = np.sort(rng.uniform(0, 300, 120))

    def stat(failures: np.ndarray) -> object:
        return lambda a: count_in_many(failures, a, a + 2.0)

    assert placement_test(stat(clustered), anchors, (0, 300)) <= 0.01  # type: ignore[arg-type]
    assert placement_test(stat(random_failures), anchors, (0, 300)) > 0.01  # type: ignore[arg-type]
