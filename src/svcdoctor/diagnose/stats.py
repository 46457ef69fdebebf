"""Statistics shared by the analyses (scipy does the distributions)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

Floats = NDArray[np.float64]


def proportion_ci(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval of a binomial proportion."""
    if n == 0:
        return (0.0, 1.0)
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return (float(ci.low), float(ci.high))


def binom_greater(k: int, n: int, p: float) -> float:
    """P(X ≥ k) for X ~ Binomial(n, p): is k failures out of n more than chance?"""
    if n == 0 or k == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(k, n, min(max(p, 1e-12), 1 - 1e-12), alternative="greater").pvalue)


def binom_fits(k: int, n: int, p: float) -> float:
    """Two-sided p-value that k of n is consistent with rate p."""
    if n == 0:
        return 1.0
    from scipy.stats import binomtest

    return float(binomtest(k, n, p).pvalue)


def merged(starts: Floats, ends: Floats) -> tuple[Floats, Floats]:
    """The union of intervals as sorted, disjoint intervals."""
    if starts.size == 0:
        return starts, ends
    order = np.argsort(starts)
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > reach[:-1]
    group = np.cumsum(new) - 1
    out_s = s[new]
    out_e = np.zeros(out_s.size)
    np.maximum.at(out_e, group, e)
    return out_s, out_e


def count_in(times: Floats, starts: Floats, ends: Floats) -> int:
    """How many sorted ``times`` fall in the union of [start, end] intervals."""
    s, e = merged(starts, ends)
    return int((np.searchsorted(times, e, "right") - np.searchsorted(times, s, "left")).sum())


def placement_test(
    statistic: Callable[[Floats], float],
    anchors: Floats,
    span: tuple[float, float],
    rounds: int = 499,
    seed: int = 0,
) -> float:
    """Permutation p-value for a statistic of anchor times (e.g. pod deletions).

    The failures stay exactly as observed, bursts and all, and the anchors are placed at
    random over the span: a test that stays valid when failures cluster in time, which a
    binomial test of independent requests is not. (Shifting the anchors together is not an
    option: a rollout deletes pods at a regular pace, and shifts by that period line the
    anchors up with the real deletions again.)
    """
    observed = statistic(anchors)
    start, end = span
    if end <= start or anchors.size == 0:
        return 1.0
    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(rounds):
        placed = np.sort(rng.uniform(start, end, anchors.size))
        if statistic(placed) >= observed:
            hits += 1
    return (hits + 1) / (rounds + 1)
