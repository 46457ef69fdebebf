"""Steps 2 and 4: failures after pod deletions (the endpoint-removal race) and the
shutdown path (preStop, SIGTERM, grace period, SIGKILL)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from svcdoctor.diagnose.context import Context, Settings
from svcdoctor.diagnose.stats import Floats, count_in, count_in_many, merged, placement_test
from svcdoctor.model import Assessment, Cause, EventKind, LifecycleEvent

BIN = 0.25  # seconds per lag bin
TOLERANCE = 0.5  # clock skew allowed between sources, on top of their resolution
WIDTHS = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0)  # candidate race windows of the test


def excess_in_windows(ctx: Context, failures: Floats, anchors: Floats, width: float) -> float:
    """Failures within ``width`` s after the anchors, minus what their traffic share predicts."""
    hits, expected = _hits_expected(ctx, failures, anchors, width)
    return hits - expected


def _hits_expected(
    ctx: Context, failures: Floats, anchors: Floats, width: float
) -> tuple[int, float]:
    """Failures within ``width`` s after the anchors, and how many the failure rate away
    from every anchor (beyond the widest window) predicts for the traffic inside."""
    lo = -(ctx.resolution + TOLERANCE)
    widest = max(WIDTHS[-1], width)
    hits = count_in(failures, anchors + lo, anchors + width)
    near = count_in(failures, anchors + lo, anchors + widest)
    inside: float
    away: float
    if ctx.attempt_ts.size:
        inside = count_in(ctx.attempt_ts, anchors + lo, anchors + width)
        away = ctx.attempt_ts.size - count_in(ctx.attempt_ts, anchors + lo, anchors + widest)
    else:  # no denominators: time stands in for traffic
        inside = anchors.size * (width - lo)
        away = max(ctx.end - ctx.start - anchors.size * (widest - lo), 1.0)
    rate = (failures.size - near) / away if away > 0 else 0.0
    return hits, rate * inside


def scan_statistic(ctx: Context, failures: Floats, anchors: Floats) -> Floats:
    """Kulldorff's log-likelihood ratio, maximised over the candidate windows: how much
    more failures concentrate after the anchors than the overall failure rate predicts.
    Sharp for a 1 s race, still sensitive to a 30 s one; the permutation test accounts for
    taking the maximum. ``anchors``: one set per row; returns one value per row."""
    lo = -(ctx.resolution + TOLERANCE)
    total = failures.size
    best = np.zeros(anchors.shape[0])
    for width in WIDTHS:
        hits = count_in_many(failures, anchors + lo, anchors + width)
        if ctx.attempt_ts.size:
            share = count_in_many(ctx.attempt_ts, anchors + lo, anchors + width)
            share /= ctx.attempt_ts.size
        else:
            share = np.minimum(
                1.0, anchors.shape[1] * (width - lo) / max(ctx.end - ctx.start, 1e-9)
            )
        expected = total * share
        with np.errstate(divide="ignore", invalid="ignore"):
            llr = hits * np.log(hits / expected) + np.where(
                hits < total, (total - hits) * np.log((total - hits) / (total - expected)), 0.0
            )
        llr = np.where((expected > 0) & (hits > expected), llr, 0.0)
        best = np.maximum(best, np.nan_to_num(llr))
    return best


def race_window(ctx: Context, failures: Floats, s: Settings) -> dict[str, Any] | None:
    """The lag after deletion within which the excess failures fall (99 % of them), from
    the lag histogram minus the baseline failure rate measured away from deletions."""
    dels = ctx.deletion_ts
    tol = ctx.resolution + TOLERANCE
    if failures.size == 0 or dels.size == 0:
        return None
    # each failure belongs to the latest deletion at or before it (recorded times are floored,
    # so a failure after the real deletion is never before the recorded one); failures just
    # before the first deletion keep a small negative lag (clock skew between sources)
    idx = np.maximum(np.searchsorted(dels, failures, "right") - 1, 0)
    lags = failures - dels[idx]
    lags = lags[(lags >= -tol) & (lags <= s.max_lag)]
    edges = np.arange(-tol, s.max_lag + BIN, BIN)
    observed, _ = np.histogram(lags, edges)
    inside = count_in(failures, dels - tol, dels + s.max_lag)
    covered = _covered(dels - tol, dels + s.max_lag)
    outside_time = max(ctx.end - ctx.start - covered, 0.0)
    base = (failures.size - inside) / outside_time if outside_time > 1.0 else 0.0
    seg_end = np.minimum(np.append(dels[1:] - tol, np.inf), dels + s.max_lag)
    lo = dels[:, None] + edges[None, :-1]
    hi = dels[:, None] + edges[None, 1:]
    exposure = np.clip(
        np.minimum(hi, seg_end[:, None]) - np.maximum(lo, (dels - tol)[:, None]), 0, None
    ).sum(axis=0)
    excess = np.clip(observed - base * exposure, 0, None)
    total = float(excess.sum())
    if total < s.min_failures:
        return None
    cumulative = np.cumsum(excess) / total
    window = float(edges[1:][np.searchsorted(cumulative, 0.99)])
    excess_lags = np.repeat((edges[:-1] + edges[1:]) / 2, np.round(excess).astype(int))
    return {
        "window_seconds": round(max(window, BIN) + ctx.resolution + ctx.request_resolution, 2),
        "median_lag_seconds": round(float(np.median(excess_lags)), 2) if excess_lags.size else None,
        "excess_failures": round(total, 1),
        "baseline_failures_per_second": round(base, 4),
    }


def _covered(starts: Floats, ends: Floats) -> float:
    s, e = merged(starts, ends)
    return float((e - s).sum())


def _around(moments: Floats, resolution: float) -> tuple[Floats, Floats]:
    """The intervals in which a failure is "at" one of the moments (a SIGKILL, an exit)."""
    return moments - 1.0 - resolution, moments + 1.0 + resolution


def _outside(times: Floats, moments: Floats, resolution: float) -> Floats:
    """The times not at any of the moments: failures the SIGKILLs do not explain."""
    if moments.size == 0 or times.size == 0:
        return times
    starts, ends = merged(*_around(np.sort(moments), resolution))
    idx = np.searchsorted(starts, times, "right") - 1
    inside = (idx >= 0) & (times <= ends[np.clip(idx, 0, None)])
    return times[~inside]


def _span_text(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:g}" if low == high else f"{low:g}-{high:g}"


def _latency_p999(ctx: Context) -> float | None:
    """p99.9 latency of successful requests, from at most a million evenly spread rows."""
    ok = (pl.col("role") == "request") & ~pl.col("failed") & pl.col("latency_ms").is_not_null()
    step = max(1, ctx.frame.height // 1_000_000)
    values = ctx.frame.gather_every(step).filter(ok).get_column("latency_ms").to_numpy()
    if values.size < 20:
        return None
    rank = min(int(np.ceil(0.999 * values.size)), values.size - 1)
    return float(np.partition(values, rank)[rank]) / 1000  # a selection, not a full sort


def _shutdown_path(ctx: Context) -> dict[str, Any]:
    """SIGKILLs (exit 137) of deleted pods, failed preStop hooks, deletion → exit times."""
    killed = []
    for pod in ctx.evidence.pods:
        for ex in pod.exits:
            if ex.exit_code == 137 and ex.reason != "OOMKilled" and pod.name in ctx.deletions:
                took = (ex.finished_at - ctx.deletions[pod.name]) if ex.finished_at else None
                killed.append(
                    {
                        "pod": pod.name,
                        "container": ex.container,
                        "seconds_after_deletion": round(took, 1) if took else None,
                        "grace_seconds": pod.grace_seconds,
                        "at": ex.finished_at,
                    }
                )
    if not killed:  # events only: exits recorded as lifecycle events
        for e in ctx.evidence.events:
            if e.kind is EventKind.EXIT and e.exit_code == 137 and e.pod in ctx.deletions:
                killed.append(
                    {
                        "pod": e.pod,
                        "container": e.message,
                        "at": e.ts,
                        "seconds_after_deletion": round(e.ts - ctx.deletions[e.pod], 1),
                        "grace_seconds": None,
                    }
                )
    exits = np.array(sorted(k["at"] for k in killed if k["at"] is not None))
    at_kill = count_in(ctx.failure_ts, *_around(exits, ctx.resolution)) if exits.size else 0
    early, late = _hook_failures(ctx)
    return {
        "sigkilled": killed,
        "failures_at_sigkill": at_kill,
        "kill_moments": exits,
        "failed_prestop_hooks": len(early),
        "failed_prestop_pods": sorted({e.pod for e in early if e.pod}),
        "prestop_past_grace_pods": sorted({e.pod for e in late if e.pod}),
    }


def _hook_failures(ctx: Context) -> tuple[list[LifecycleEvent], list[LifecycleEvent]]:
    """FailedPreStopHook events: those that failed early (the pod got no preStop delay) and
    those at the end of the grace period (the hook outlived it and was cut there)."""
    grace = {p.name: p.grace_seconds for p in ctx.evidence.pods if p.grace_seconds}
    early, late = [], []
    for e in ctx.evidence.events:
        if e.kind is not EventKind.PRESTOP_FAILED:
            continue
        deleted = ctx.deletions.get(e.pod or "")
        limit = grace.get(e.pod or "")
        # late: at the end of the grace period, and clearly after the deletion (with a grace
        # period of a second or two the two cannot be told apart: counted as early)
        after = e.ts - deleted if deleted is not None else 0.0
        if limit and after >= limit - 1.0 - ctx.resolution and after > 1.0 + ctx.resolution:
            late.append(e)
        else:
            early.append(e)
    return early, late


def assess_race(
    ctx: Context, s: Settings, manifest_notes: list[str], explained_backends: list[str]
) -> Assessment:
    """``explained_backends``: backends already shown to fail on their own, left out."""
    if not ctx.deletions:
        return Assessment(
            Cause.RACE,
            0.0,
            evidence=("no pod deletions in the evidence: the race cannot be tested",),
            collect=(
                "capture `kubectl get events -o json` and `kubectl get pods -o json` "
                "covering the next rollout",
            ),
        )
    shutdown = _shutdown_path(ctx)
    failures = _outside(
        ctx.new_conn_failures_without(explained_backends), shutdown["kill_moments"], ctx.resolution
    )
    dels = ctx.deletion_ts
    observed = excess_in_windows(ctx, failures, dels, s.test_window)
    p = placement_test(lambda a: scan_statistic(ctx, failures, a), dels, ctx.traffic_span, s.rounds)
    explained = observed / failures.size if failures.size else 0.0
    # failures on reused connections are the race's only if it explains them too: the score
    # weighs the race by its share of all failures, so reuse ranks first when it is most
    on_reused = ctx.frame.filter(pl.col("failed") & pl.col("reused").fill_null(False)).height
    share = observed / (failures.size + on_reused) if failures.size + on_reused else 0.0
    window = race_window(ctx, failures, s) if p < 0.05 else None
    evidence: list[str] = []
    fixes: list[str] = []
    details: dict[str, Any] = {
        "deletions": len(ctx.deletions),
        "p_value": round(p, 4),
        "excess_failures": round(observed, 1),
        "explained_fraction": round(max(explained, 0.0), 3),
        "clock_resolution_seconds": ctx.resolution,
        **{k: v for k, v in shutdown.items() if k != "kill_moments"},
    }
    if p < s.permutation_alpha and observed >= s.min_failures:
        score = 0.55 + 0.4 * min(1.0, max(share, 0.0))
    elif p < 0.05 and observed >= s.min_failures:
        score = 0.35
    else:
        score = 0.05
    which = "on new connections " if ctx.has_conn else ""
    evidence.append(
        f"{round(observed):d} more failures {which}than traffic predicts in the "
        f"{s.test_window:g} s after {len(ctx.deletions)} pod deletions "
        f"({max(explained, 0.0):.0%} of those failures; permutation p = {p:.3g})"
    )
    if window:
        details.update(window)
        evidence.append(
            f"the excess failures end {window['window_seconds']:g} s after deletion "
            f"(median lag {window['median_lag_seconds']} s): the observed race window"
        )
        prestop = math.ceil(window["window_seconds"] + max(2.0, 0.5 * window["window_seconds"]))
        latency = _latency_p999(ctx)
        grace = math.ceil(prestop + (latency if latency is not None else 10.0) + 5)
        details["recommended_prestop_seconds"] = prestop
        details["recommended_grace_seconds"] = grace
        details["latency_p999_seconds"] = round(latency, 3) if latency is not None else None
        fixes.append(
            f"add a preStop sleep of {prestop} s (the observed {window['window_seconds']:g} s "
            f"window plus margin) and terminationGracePeriodSeconds: {grace} (preStop + "
            + (f"p99.9 latency {latency:.1f} s" if latency is not None else "10 s requests")
            + " + 5 s):\n  lifecycle: {preStop: {sleep: {seconds: "
            + str(prestop)
            + "}}}\n"
            f"  terminationGracePeriodSeconds: {grace}"
        )
        fixes.append(
            "on SIGTERM stop accepting new connections, finish in-flight requests, "
            "then exit (graceful shutdown)"
        )
    if shutdown["sigkilled"]:
        graces = sorted({k["grace_seconds"] for k in shutdown["sigkilled"] if k["grace_seconds"]})
        took = [
            k["seconds_after_deletion"]
            for k in shutdown["sigkilled"]
            if k["seconds_after_deletion"] is not None
        ]
        evidence.append(
            f"{len(shutdown['sigkilled'])} containers of deleted pods exited 137 (SIGKILL) "
            + (f"{_span_text(took)} s after deletion " if took else "")
            + (f"= the grace period ({', '.join(map(str, graces))} s) " if graces else "")
            + f"with {shutdown['failures_at_sigkill']} failures at those moments"
        )
        latency = _latency_p999(ctx)
        longest = latency if latency is not None else 10.0
        need = max(
            details.get("recommended_grace_seconds") or 0,
            math.ceil(max(graces, default=30) + longest + 5),
        )
        details["recommended_grace_seconds"] = need
        fixes.insert(
            0,
            "the grace period is too short: the kubelet SIGKILLs the container "
            "mid-request; raise terminationGracePeriodSeconds to at least "
            f"{need} (preStop + the longest request + margin)",
        )
        if shutdown["failures_at_sigkill"] >= s.min_failures:
            score = max(score, 0.7)
        else:
            score = max(score, 0.35)
    if shutdown["prestop_past_grace_pods"]:
        pods = shutdown["prestop_past_grace_pods"]
        evidence.append(
            f"{len(pods)} preStop hooks ran past the grace period ({', '.join(pods[:3])}): "
            "the kubelet cut them and sent SIGTERM with 2 s left"
        )
        fixes.append(
            "make terminationGracePeriodSeconds longer than the preStop sleep plus the "
            "longest request"
        )
    if shutdown["failed_prestop_hooks"]:
        evidence.append(
            f"{shutdown['failed_prestop_hooks']} FailedPreStopHook events "
            f"({', '.join(shutdown['failed_prestop_pods'][:3])}): those pods got no "
            "preStop delay at all"
        )
        fixes.append(
            "fix the preStop hook (an image without a shell needs the native "
            "`sleep` action, Kubernetes ≥ 1.30)"
        )
        score = max(score, 0.35) if score >= 0.3 else score
    evidence.extend(manifest_notes)
    return Assessment(Cause.RACE, round(score, 3), tuple(evidence), tuple(fixes), details)
