"""``diagnose --prometheus``, the race: do failures concentrate in the steps after pod
deletions (a placement test of the deletions against the failure rate away from them), how
long is the window after each deletion that fits the excess (least squares, bootstrapped
over rollouts), and which shutdown plan covers it (``svcdoctor.model.remedy``). Also the
masks over the grid's bins that every cause of ``metrics`` counts near and away from
deletions with."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from svcdoctor.diagnose.context import Settings, untestable
from svcdoctor.diagnose.metrics_history import Counts, Grid, History
from svcdoctor.diagnose.race import GRACEFUL_SHUTDOWN, generic_patch, measured, race_score
from svcdoctor.diagnose.stats import Floats, placement_test, proportion_ci
from svcdoctor.model import Assessment, Cause, remedy
from svcdoctor.model.diagnosis import (
    FixStep,
    RaceWindow,
    RemedyPatch,
    Rollout,
    ShutdownPath,
    SigKill,
)

TOLERANCE = 1.0  # seconds before a deletion still counted near it (clocks of two exporters)
ROLLOUT_GAP = 120.0  # deletions further apart than this belong to different rollouts
SAME_ROLLOUT_GAP = 1800.0  # …unless they scale down the same ReplicaSet
WINDOW_GRID = 0.25  # seconds between the candidate race windows of the fit
BOOTSTRAP_ROUNDS = 400
BOOTSTRAP_SEED = 17


def whole(value: float) -> int:
    """A sum of per-step counts as the whole number it is."""
    return int(np.rint(value))


# --- where the deletions are, on the grid ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Near:
    """Masks over the bins: ``near`` touches ``[d - TOLERANCE, d + test_window]`` of a
    deletion ``d``; ``after`` the rest of ``max_lag``; ``away`` neither (the baseline)."""

    near: np.ndarray
    after: np.ndarray

    @property
    def away(self) -> np.ndarray:
        out: np.ndarray = ~(self.near | self.after)
        return out


def _bin_span(grid: Grid, lo: Floats, hi: Floats) -> tuple[np.ndarray, np.ndarray]:
    """First and last bin (inclusive, clipped) whose ``(t - step, t]`` meets ``[lo, hi]``."""
    first = np.ceil((lo - grid.start) / grid.step - 1e-9).astype(np.int64)
    last = np.ceil((hi + grid.step - grid.start) / grid.step - 1e-9).astype(np.int64) - 1
    return np.clip(first, 0, grid.n), np.clip(last, -1, grid.n - 1)


def _mask(grid: Grid, lo: Floats, hi: Floats) -> np.ndarray:
    first, last = _bin_span(grid, lo, hi)
    marks = np.zeros(grid.n + 1, dtype=np.int64)
    keep = last >= first
    np.add.at(marks, first[keep], 1)
    np.add.at(marks, last[keep] + 1, -1)
    out: np.ndarray = np.cumsum(marks[:-1]) > 0
    return out


def near_masks(grid: Grid, dels: Floats, s: Settings) -> Near:
    near = _mask(grid, dels - TOLERANCE, dels + s.test_window)
    after = _mask(grid, dels - TOLERANCE, dels + s.max_lag) & ~near
    return Near(near, after)


def _union_sums(cum: Floats, first: np.ndarray, last: np.ndarray) -> Floats:
    """Per row: the sum of the values over the union of bin ranges ``[first, last]``
    (``cum``: cumulative sums with a leading 0); overlaps count once, no Python loop."""
    order = np.argsort(first, axis=1)
    lo = np.take_along_axis(first, order, axis=1)
    hi = np.take_along_axis(last, order, axis=1) + 1  # exclusive
    reach = np.maximum.accumulate(hi, axis=1)
    previous = np.concatenate([np.zeros((lo.shape[0], 1), np.int64), reach[:, :-1]], axis=1)
    begin = np.maximum(lo, previous)
    stop = np.maximum(hi, begin)
    sums: Floats = (cum[stop] - cum[begin]).sum(axis=1)
    return sums


# --- race --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RaceFit:
    """The window fitted to the excess failures, overall and per rollout."""

    window: RaceWindow | None
    per_rollout: tuple[float | None, ...]


def _overlaps(
    grid: Grid, dels: Floats, widths: Floats, max_lag: float
) -> tuple[np.ndarray, Floats]:
    """The bins that windows after the deletions reach, and per such bin and candidate
    width ``w`` the seconds of ``[d, d + w]`` inside it, summed over the deletions ``d``."""
    span = math.ceil(max_lag / grid.step) + 2
    first, _ = _bin_span(grid, dels, dels)
    idx = first[:, None] + np.arange(span)[None, :]  # deletions x lags
    ends = grid.start + grid.step * idx
    lo = np.maximum(ends - grid.step, dels[:, None])
    cover = np.clip(  # deletions x lags x widths
        np.minimum(ends[:, :, None], dels[:, None, None] + widths[None, None, :]) - lo[:, :, None],
        0,
        None,
    )
    ok = (idx >= 0) & (idx < grid.n)
    bins, where = np.unique(idx[ok], return_inverse=True)
    out = np.zeros((bins.size, widths.size))
    np.add.at(out, where, cover[ok])
    return bins, out


def fit_window(
    grid: Grid, counts: Counts, dels: Floats, groups: Sequence[Floats], base: float, s: Settings
) -> RaceFit:
    """The race window: the length ``W`` of a failure window after each deletion, failing a
    constant share of the traffic, that best fits the excess failures per step (least
    squares; the steps are coarser than the window, but deletions fall at every offset in
    them, which places ``W`` within a step). The 95 % interval bootstraps rollouts
    (``groups``: the deletions of each)."""
    widths = np.arange(WINDOW_GRID, s.max_lag + WINDOW_GRID / 2, WINDOW_GRID)
    excess = counts.failures - base * counts.requests
    rate = counts.requests / grid.step
    a_rows, b_rows, c_rows, totals = [], [], [], []
    for group in groups:
        bins, cover = _overlaps(grid, group, widths, s.max_lag)
        e, xs = excess[bins], cover * rate[bins, None]
        a_rows.append(e @ xs)
        b_rows.append((xs * xs).sum(axis=0))
        c_rows.append(float(e @ e))
        totals.append(float(np.clip(e, 0, None).sum()))
    a, b, c = np.array(a_rows), np.array(b_rows), np.array(c_rows)

    def fitted(a_: Floats, b_: Floats, c_: Floats) -> tuple[Floats, Floats]:
        """Per row: the shortest and the longest width with the least squared error (the
        share fitted per width). Deletions at the same offsets in their steps fit a range
        of widths equally well; the longest is what a remedy must cover."""
        with np.errstate(divide="ignore", invalid="ignore"):
            residual = c_[:, None] - np.where(a_ > 0, a_ * a_ / b_, 0.0)
        residual = np.where(b_ > 0, residual, np.inf)
        least = residual.min(axis=1, keepdims=True)
        tied = residual <= least + 1e-9 * np.maximum(np.abs(least), 1.0)
        shortest: Floats = widths[np.argmax(tied, axis=1)]
        longest: Floats = widths[widths.size - 1 - np.argmax(tied[:, ::-1], axis=1)]
        return shortest, longest

    low_w, high_w = fitted(a, b, c)
    per_rollout = tuple(
        float((lo + hi) / 2) if t >= s.min_failures else None
        for lo, hi, t in zip(low_w, high_w, totals, strict=True)
    )
    total = float(np.clip(excess[_mask(grid, dels, dels + s.max_lag)], 0, None).sum())
    if total < s.min_failures or not a.size:
        return RaceFit(None, per_rollout)
    one_low, one_high = fitted(a.sum(axis=0)[None, :], b.sum(axis=0)[None, :], c.sum()[None])
    window = float((one_low[0] + one_high[0]) / 2)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    n = len(groups)
    weights = rng.multinomial(n, np.full(n, 1 / n), BOOTSTRAP_ROUNDS).astype(float)
    boot_low, boot_high = fitted(weights @ a, weights @ b, weights @ c)
    low, high = np.percentile(boot_low, 2.5), np.percentile(boot_high, 97.5)
    return RaceFit(
        RaceWindow(
            seconds=round(window, 2),
            ci95=(round(float(low), 2), round(float(high), 2)),
            definition=(
                "length of the failure window after each deletion that best fits the excess "
                f"failures per {grid.step:g} s step (least squares); 95 % bootstrap interval "
                "over rollouts"
            ),
            median_lag_seconds=round(window / 2, 2),
            excess_failures=round(total, 1),
            baseline_failures_per_second=round(base * float(rate.mean()), 4),
        ),
        per_rollout,
    )


def rollouts_of(h: History, dels: Floats) -> list[Floats]:
    """The deletions grouped into rollouts: by the ReplicaSet being scaled down (when
    kube_pod_owner names it), split where deletions are more than ``ROLLOUT_GAP`` apart
    (``SAME_ROLLOUT_GAP`` within one ReplicaSet); sorted by start."""
    owner = {p.deleted: (p.workload, p.replicaset or "") for p in h.pods if p.deleted is not None}
    keyed: dict[tuple[str, str], list[float]] = {}
    for d in dels.tolist():
        keyed.setdefault(owner.get(d, ("", "")), []).append(d)
    groups: list[Floats] = []
    for (_, rs), times in keyed.items():
        arr = np.sort(np.array(times, dtype=np.float64))
        gap = SAME_ROLLOUT_GAP if rs else ROLLOUT_GAP
        groups.extend(np.split(arr, np.flatnonzero(np.diff(arr) > gap) + 1))
    return sorted(groups, key=lambda g: float(g[0]))


def _generic_remedy(
    workloads: Sequence[str], window_high: float, s: Settings
) -> tuple[RemedyPatch, int, int]:
    """The shutdown plan for the window's upper bound (with the user's longest request,
    margin and Kubernetes version: lint's settings), as a patch for the workloads (the
    container name is not in the metrics: ``app`` stands for it)."""
    plan = remedy.plan_shutdown(
        remedy.ShutdownFacts(
            window_seconds=window_high,
            source=remedy.WindowSource.DIAGNOSED,
            longest_request_seconds=s.checks.max_request_seconds,
            margin_seconds=s.checks.margin_seconds,
            kube_version=s.checks.kube_version,
        )
    )
    obj = (
        ", ".join(f"Deployment {w}" for w in workloads) or "your Deployment"
    ) + " (container 'app': use its name)"
    patch = RemedyPatch(
        obj, "app", plan.rules, plan.prestop_seconds, plan.grace_seconds, generic_patch(plan)
    )
    return patch, plan.prestop_seconds, plan.grace_seconds


def assess_race(
    h: History, counts: Counts, dels: Floats, near: Near, s: Settings
) -> tuple[Assessment, tuple[Rollout, ...]]:
    """Failures in the steps after deletions against the failure rate away from them."""
    if dels.size == 0:
        missing = "kube_pod_deletion_timestamp" not in h.found
        if missing:
            return untestable(
                Cause.RACE,
                "kube_pod_deletion_timestamp is not in the store: the race cannot be tested",
                "scrape kube-state-metrics (kube_pod_deletion_timestamp, kube_pod_owner)",
            ), ()
        return untestable(
            Cause.RACE,
            "no pod of the Service was deleted in the range: no rollout to test",
            "widen --since/--start to include a rollout",
        ), ()
    grid = h.grid
    k, n = counts.failures, counts.requests
    away = near.away
    ka, na = float(k[away].sum()), float(n[away].sum())
    base = ka / na if na else 0.0
    kn, nn = float(k[near.near].sum()), float(n[near.near].sum())
    total_k, total_n = float(k.sum()), float(n.sum())
    cum_k = np.concatenate([[0.0], np.cumsum(k)])
    cum_n = np.concatenate([[0.0], np.cumsum(n)])

    def statistic(anchors: Floats) -> Floats:
        first, last = _bin_span(grid, anchors - TOLERANCE, anchors + s.test_window)
        hits = _union_sums(cum_k, first, last)
        traffic = _union_sums(cum_n, first, last)
        out: Floats = hits - total_k * traffic / max(total_n, 1.0)
        return out

    p = placement_test(statistic, dels, (grid.start - grid.step, grid.end), s.rounds)
    excess = kn - base * nn
    explained = excess / total_k if total_k else 0.0
    groups = rollouts_of(h, dels)
    fit = fit_window(grid, counts, dels, groups, base, s) if p < 0.05 else None
    rollouts = _rollout_rows(h, counts, groups, base, fit, s)
    near_low, near_high = proportion_ci(whole(kn), whole(nn))
    base_low, base_high = proportion_ci(whole(ka), whole(na))
    evidence = [
        f"{whole(kn)} of {whole(nn)} requests failed in the steps within {s.test_window:g} s "
        f"after {dels.size} pod deletions in {len(groups)} rollouts ({kn / nn if nn else 0:.3%}, "
        f"95 % CI {near_low:.3%}-{near_high:.3%}) against {base:.3%} away from deletions "
        f"({base_low:.3%}-{base_high:.3%}): "
        f"{round(excess)} more failures than the baseline predicts ({max(explained, 0):.0%} of "
        f"all failures; placement test of the deletions, p = {p:.3g})"
    ]
    killed = tuple(
        SigKill(pod=pod, container=None, seconds_after_deletion=None, grace_seconds=None, at=None)
        for pod in h.sigkilled
    )
    details = measured(
        int(dels.size), p, excess, explained, grid.step, ShutdownPath(sigkilled=killed)
    )
    score = race_score(p, excess, explained, s)
    fixes: list[FixStep] = []
    window = fit.window if fit else None
    floor = h.programming_p99
    if floor is not None:
        evidence.append(
            f"kube-proxy's network programming took up to {floor:.3g} s (99th percentile over "
            "the nodes): a deleted pod stays routable at least that long"
        )
    if window is not None and score >= 0.3:
        workloads = sorted({p.workload for p in h.pods})
        cover = max(window.ci95[1], floor or 0.0)
        patch, prestop, grace = _generic_remedy(workloads, cover, s)
        details = replace(
            details,
            window=window,
            recommended_prestop_seconds=prestop,
            recommended_grace_seconds=grace,
            remedy=(patch,),
        )
        evidence.append(
            f"the failures after each deletion fit a window of {window.seconds:g} s (95 % "
            f"interval {window.ci95[0]:g}-{window.ci95[1]:g} s, from {grid.step:g} s steps): "
            "the observed race window"
        )
        text = (
            f"{' '.join(patch.rules) or 'SVD101/SVD102'}: preStop sleep {prestop} s (the "
            f"window's 95 % upper bound {window.ci95[1]:g} s"
            + (f" or kube-proxy's p99 {floor:.3g} s" if floor and floor > window.ci95[1] else "")
            + " + margin) and "
            f"terminationGracePeriodSeconds {grace} (preStop + longest request "
            f"{s.checks.max_request_seconds:g} s + {s.checks.margin_seconds:g} s), "
            f"for {patch.object}"
        )
        fixes.append(FixStep(text, patch.patch, patch.object))
        fixes.append(FixStep(GRACEFUL_SHUTDOWN))
    if killed:
        evidence.append(
            f"{len(killed)} pods' containers last ended with reason Error "
            f"({', '.join(h.sigkilled[:3])}): SIGKILLed at the end of the grace period?"
        )
    return Assessment(Cause.RACE, round(score, 3), tuple(evidence), tuple(fixes), details), rollouts


def _rollout_rows(
    h: History,
    counts: Counts,
    groups: list[Floats],
    base: float,
    fit: RaceFit | None,
    s: Settings,
) -> tuple[Rollout, ...]:
    rows = []
    for i, group in enumerate(groups):
        mask = _mask(h.grid, np.array([group[0] - TOLERANCE]), np.array([group[-1] + s.max_lag]))
        n, k = whole(counts.requests[mask].sum()), whole(counts.failures[mask].sum())
        low, high = proportion_ci(k, n)
        names = {p.workload for p in h.pods if p.deleted is not None and p.deleted in group}
        rows.append(
            Rollout(
                start=float(group[0]),
                end=float(group[-1]),
                workloads=tuple(sorted(names)),
                deletions=int(group.size),
                requests=n,
                failures=k,
                expected_failures=round(base * n, 2),
                failure_rate=round(k / n, 6) if n else None,
                failure_rate_ci95=(round(low, 6), round(high, 6)),
                window_seconds=fit.per_rollout[i] if fit else None,
            )
        )
    return tuple(rows)
