"""Steps 2 and 4: failures after pod deletions (the endpoint-removal race) and the
shutdown path (preStop, SIGTERM, grace period, SIGKILL)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl

from svcdoctor.checks import has_shell, prestop_hook, racing
from svcdoctor.diagnose.context import Context, Settings, untestable
from svcdoctor.diagnose.hops import hop_legs, leg_text
from svcdoctor.diagnose.stats import Floats, count_in, count_in_many, merged, placement_test
from svcdoctor.model import (
    DEFAULT_GRACE_SECONDS,
    Assessment,
    Cause,
    EventKind,
    LifecycleEvent,
    remedy,
)
from svcdoctor.model.diagnosis import (
    FixStep,
    RaceDetails,
    RaceWindow,
    RemedyPatch,
    ShutdownPath,
    SigKill,
)
from svcdoctor.model.patch import PodPatch
from svcdoctor.model.remedy import RACE_RULES

BIN = 0.25  # seconds per lag bin
# a container's state.terminated.finishedAt is RFC 3339 to the second (k8s.io/apimachinery
# metav1.Time marshals whole seconds): the exit happened within the second it names
EXIT_RESOLUTION = 1.0
TOLERANCE = 0.5  # clock skew allowed between sources, on top of their resolution
WIDTHS = (1.0, 2.0, 5.0, 10.0, 20.0, 30.0)  # candidate race windows of the test
GRACEFUL_SHUTDOWN = (
    "on SIGTERM stop accepting new connections, finish in-flight requests, "
    "then exit (graceful shutdown)"
)


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


QUANTILE = 0.99  # the window: the lag by which this share of the excess failures happened
BOOTSTRAP_ROUNDS = 400  # resamples of the deletions for the window's interval
BOOTSTRAP_SEED = 17


def race_window(
    ctx: Context, failures: Floats, s: Settings, own: Floats | None = None
) -> RaceWindow | None:
    """The race window: the lag after deletion by which ``QUANTILE`` (99 %) of the excess
    failures happened (the lag histogram minus the baseline failure rate measured away from
    deletions), plus the clocks' resolutions; with a 95 % percentile-bootstrap interval over
    deletions (each resample draws deletions with replacement and carries their failures and
    exposure; seeded, vectorised as one matrix product).

    ``own``: per failure, the deletion of the pod it was sent to (NaN when unknown). A
    failure with one belongs to that deletion, or to none when it precedes it by more than
    the clocks allow; one without belongs to the latest deletion the clocks allow. Coarse
    clocks never move a failure to an earlier pod's deletion (whole-second nginx times and
    deletions 12 s apart made a 1-2 s race look 12 s long).

    Every failed attempt counts once at its start (a failure's lag is when the request hit the
    closed port, whatever its latency), so an attempt a proxy retried (a masked ``502`` before
    a ``200``) and a plain failure give the same lag."""
    dels = ctx.deletion_ts
    tol = ctx.resolution + ctx.request_resolution + TOLERANCE
    if failures.size == 0 or dels.size == 0:
        return None
    # each failure belongs to the latest deletion at or before it, give or take the clocks'
    # resolution and skew: a failure logged just before a deletion (a start time computed
    # from a floored end time) keeps a small negative lag instead of counting as the previous
    # deletion's straggler
    idx = np.maximum(np.searchsorted(dels, failures + tol, "right") - 1, 0)
    if own is not None:
        known = ~np.isnan(own)
        at = np.clip(np.searchsorted(dels, np.where(known, own, 0.0)), 0, dels.size - 1)
        idx = np.where(known & (dels[at] == own), at, idx)
    lags = failures - dels[idx]
    keep = (lags >= -tol) & (lags <= s.max_lag)
    lags, idx = lags[keep], idx[keep]
    edges = np.arange(-tol, s.max_lag + BIN, BIN)
    bins = edges.size - 1
    column = np.clip(np.searchsorted(edges, lags, "right") - 1, 0, bins - 1)
    # failures and exposure per deletion and lag bin: rows are what the bootstrap resamples
    per_del = np.bincount(idx * bins + column, minlength=dels.size * bins).reshape(dels.size, bins)
    inside = count_in(failures, dels - tol, dels + s.max_lag)
    covered = _covered(dels - tol, dels + s.max_lag)
    outside_time = max(ctx.end - ctx.start - covered, 0.0)
    base = (failures.size - inside) / outside_time if outside_time > 1.0 else 0.0
    seg_end = np.minimum(np.append(dels[1:] - tol, np.inf), dels + s.max_lag)
    lo = dels[:, None] + edges[None, :-1]
    hi = dels[:, None] + edges[None, 1:]
    exposure = np.clip(
        np.minimum(hi, seg_end[:, None]) - np.maximum(lo, (dels - tol)[:, None]), 0, None
    )
    excess = np.clip(per_del.sum(axis=0) - base * exposure.sum(axis=0), 0, None)
    total = float(excess.sum())
    if total < s.min_failures:
        return None
    # a measured lag is the true one, minus up to the request clock's resolution (its time
    # floored) plus up to the deletion clock's (its time floored): the true window lies
    # within [measured - deletion's, measured + request's]. The window is said at the top
    # of that range and its interval widened to both ends; the plan covers the bootstrap's
    # upper bound centred in it, so coarse clocks alone do not lengthen the preStop.
    below, above = ctx.resolution, ctx.request_resolution
    shift = (above - below) / 2
    window = _quantile_lag(excess[None, :], edges)[0]
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    weights = rng.multinomial(dels.size, np.full(dels.size, 1 / dels.size), BOOTSTRAP_ROUNDS)
    resampled = np.clip(weights @ per_del - base * (weights @ exposure), 0, None)
    boot = _quantile_lag(resampled, edges)
    ci_low, ci_high = np.percentile(boot, [2.5, 97.5])
    excess_lags = np.repeat((edges[:-1] + edges[1:]) / 2, np.round(excess).astype(int))
    seconds = max(float(window) + above, BIN)
    return RaceWindow(
        seconds=round(seconds, 2),
        ci95=(
            round(max(min(float(ci_low) - below, seconds), 0.0), 2),
            round(max(float(ci_high) + above, seconds), 2),
        ),
        definition=f"lag after deletion by which {QUANTILE:.0%} of the excess failures "
        "happened, plus the request clock's resolution; 95 % bootstrap interval over "
        "deletions, widened by the clocks' resolution",
        median_lag_seconds=round(float(np.median(excess_lags)), 2) if excess_lags.size else None,
        excess_failures=round(total, 1),
        baseline_failures_per_second=round(base, 4),
        clock_seconds=round(below + above, 3),
        plan_seconds=round(max(float(ci_high) + shift, float(window) + shift, BIN), 2),
    )


def _quantile_lag(excess: np.ndarray, edges: Floats) -> Floats:
    """Per row of excess counts per lag bin: the upper edge of the bin where the cumulative
    share reaches ``QUANTILE`` (at least one bin wide; 0 for an empty row)."""
    cumulative = np.cumsum(excess, axis=1)
    totals = cumulative[:, -1:]
    reached = cumulative >= QUANTILE * np.where(totals > 0, totals, np.inf)
    at = np.argmax(reached, axis=1)
    upper = edges[1:][at]
    return np.where(totals[:, 0] > 0, np.maximum(upper, BIN), 0.0)


def _longest(latency: float | None, s: Settings) -> float:
    """The longest request the grace period must cover: the p99.9 latency can raise the
    user's assumption (lint's ``--max-request-seconds``) but not lower it (the evidence
    cannot show no request is longer)."""
    return max(latency or 0.0, s.checks.max_request_seconds)


def remedy_patches(
    ctx: Context, window_high: float, latency: float | None, s: Settings
) -> list[tuple[RemedyPatch, remedy.ShutdownPlan, float]]:
    """The patch, its plan and the seconds its app drains by itself, per racing container
    of the bundle's manifests (one generic patch when it holds none), planned by the remedy
    model from the window's upper bound with the user's margin, Kubernetes version and apps
    that drain by themselves (lint's settings; lint's assumed propagation is what the window
    measured)."""
    facts = remedy.ShutdownFacts(
        window_seconds=window_high,
        source=remedy.WindowSource.DIAGNOSED,
        margin_seconds=s.checks.margin_seconds,
        kube_version=s.checks.kube_version,
        longest_request_seconds=_longest(latency, s),
    )
    inventory = ctx.evidence.inventory
    out = []
    for w, c in racing(inventory) if inventory is not None else []:
        sleep = c.prestop.sleep_seconds if c.prestop else None
        # lint's `drains`: the seconds an app keeps serving after SIGTERM shorten its preStop;
        # an untold drain is not trusted here, the failures measured say it is too short
        argv = (*c.command, *c.args)
        drain = s.checks.drain_of(
            w.ref.kind, w.ref.name, c.image, argv, env=dict(c.env), headers=c.probe_headers
        )
        drained = drain.seconds if drain and drain.seconds is not None else 0.0
        plan = remedy.plan_shutdown(
            replace(
                facts,
                drain_seconds=drained,
                current_prestop_seconds=sleep,
                current_grace_seconds=w.template.effective_grace_seconds,
                has_shell=has_shell(c),
            )
        )
        grace = (
            plan.grace_seconds if plan.grace_seconds != w.template.effective_grace_seconds else None
        )
        hook = prestop_hook(c, plan)
        if c.prestop is not None and c.prestop.handler == "httpGet":
            # the app's own drain endpoint: only the app can wait longer
            hook = None
            plan = replace(plan, rules=tuple(r for r in plan.rules if r not in RACE_RULES))
        patch = PodPatch(w.ref.kind, c.name, grace, prestop=hook)
        out.append((_patch(str(w.ref), c.name, plan, patch), plan, drained))
    if not out:
        plan = remedy.plan_shutdown(facts)
        generic = "your Deployment (container 'app': use its name)"
        out.append((_patch(generic, "app", plan, generic_patch(plan)), plan, 0.0))
    return out


def generic_patch(plan: remedy.ShutdownPlan) -> PodPatch:
    """The plan as a Deployment patch when the workload's manifest is unknown: ``app``
    stands for the container's name."""
    return PodPatch("Deployment", "app", plan.grace_seconds, prestop=remedy.planned_hook(plan))


def _patch(obj: str, container: str, plan: remedy.ShutdownPlan, patch: PodPatch) -> RemedyPatch:
    return RemedyPatch(obj, container, plan.rules, plan.prestop_seconds, plan.grace_seconds, patch)


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


def _failure_starts(ctx: Context, backends: list[str], kills: Floats) -> tuple[Floats, Floats]:
    """When the failures on new connections started (sorted), leaving out the given backends
    and the failures that ended at a SIGKILL: the moment a request met the closed port, not
    when the client gave up (a timeout ends its full timeout later) nor when a proxy logged
    a retried attempt, so masked and plain failures share the same lag. With each, the
    deletion of the pod it was sent to (NaN when not known)."""
    rows = ctx.frame.filter(pl.col("failed") & (pl.col("reused").is_null() | ~pl.col("reused")))
    if backends:
        rows = rows.filter(~pl.col("backend").is_in(backends).fill_null(False))
    starts = rows.get_column("ts").to_numpy()
    own = _own_deletions(ctx, rows)
    if kills.size and starts.size:
        ends = rows.get_column("ended").to_numpy()
        lo, hi = merged(*_around(np.sort(kills), ctx.resolution))
        idx = np.searchsorted(lo, ends, "right") - 1
        keep = ~((idx >= 0) & (ends <= hi[np.clip(idx, 0, None)]))
        starts, own = starts[keep], own[keep]
    order = np.argsort(starts, kind="stable")
    return starts[order], own[order]


def _before_own_deletion(ctx: Context, starts: Floats, own: Floats) -> int:
    """Failures that started before their own pod's deletion by more than the clocks'
    resolution and skew allow."""
    tol = ctx.resolution + ctx.request_resolution + TOLERANCE
    known = ~np.isnan(own)
    return int(np.sum(starts[known] - own[known] < -tol))


def _own_deletions(ctx: Context, rows: pl.DataFrame) -> Floats:
    """Per row, the deletion moment of the pod behind its backend (NaN when unknown)."""
    if not ctx.has_backend or rows.height == 0:
        return np.full(rows.height, np.nan)
    deleted = {}
    for backend in rows.get_column("backend").drop_nulls().unique().to_list():
        pod = ctx.pod_of(str(backend))
        if pod is not None and pod.name in ctx.deletions:
            deleted[str(backend)] = ctx.deletions[pod.name]
    if not deleted:
        return np.full(rows.height, np.nan)
    moment = (
        pl.col("backend")
        .cast(pl.Utf8)
        .replace_strict(deleted, default=None, return_dtype=pl.Float64)
    )
    return rows.select(moment.fill_null(np.nan)).to_series().to_numpy()


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


def _exit_estimate(ts: float) -> float:
    """An exit time as the best estimate it allows: a whole-second one (a container's
    ``finishedAt``, RFC 3339 to the second) stands for the second after it, so its middle."""
    return ts + EXIT_RESOLUTION / 2 if float(ts).is_integer() else ts


def _shutdown_path(ctx: Context) -> ShutdownPath:
    """SIGKILLs (exit 137) of deleted pods, failed preStop hooks, deletion → exit times."""
    killed = []
    for pod in ctx.evidence.pods:
        for ex in pod.exits:
            if ex.exit_code == 137 and ex.reason != "OOMKilled" and pod.name in ctx.deletions:
                took = (
                    _exit_estimate(ex.finished_at) - ctx.deletions[pod.name]
                    if ex.finished_at
                    else None
                )
                killed.append(
                    SigKill(
                        pod=pod.name,
                        container=ex.container,
                        seconds_after_deletion=round(took, 1) if took else None,
                        grace_seconds=pod.grace_seconds,
                        at=ex.finished_at,
                    )
                )
    if not killed:  # events only: exits recorded as lifecycle events
        for e in ctx.evidence.events:
            if e.kind is EventKind.EXIT and e.exit_code == 137 and e.pod in ctx.deletions:
                killed.append(
                    SigKill(
                        pod=e.pod,
                        container=e.message,
                        seconds_after_deletion=round(e.ts - ctx.deletions[e.pod], 1),
                        grace_seconds=None,
                        at=e.ts,
                    )
                )
    exits = np.array(sorted(k.at for k in killed if k.at is not None))
    at_kill = count_in(ctx.failure_ts, *_around(exits, ctx.resolution)) if exits.size else 0
    early, late = _hook_failures(ctx)
    return ShutdownPath(
        sigkilled=tuple(killed),
        failures_at_sigkill=at_kill,
        kill_moments=tuple(exits.tolist()),
        failed_prestop_hooks=len(early),
        failed_prestop_pods=tuple(sorted({e.pod for e in early if e.pod})),
        prestop_past_grace_pods=tuple(sorted({e.pod for e in late if e.pod})),
    )


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


def _grace_for_kills(
    ctx: Context, s: Settings, details: RaceDetails, graces: list[int]
) -> tuple[int, str]:
    """The one grace period a diagnosis with SIGKILLs states, and how it was reached: the
    remedy model's for the preStop the containers have (lint's SVD102 number), or the
    window's plan when it asks more; without manifests, the preStop bounded by the grace
    period the pods had."""
    longest = _longest(_latency_p999(ctx), s)
    planned = details.recommended_grace_seconds or 0
    inventory = ctx.evidence.inventory
    if inventory is not None and racing(inventory):
        kept = max(p.grace_seconds for _, p, _ in remedy_patches(ctx, 0.0, _latency_p999(ctx), s))
        if planned > kept:
            return planned, "the race window's plan: preStop + the longest request + margin"
        return kept, (
            f"the preStop it has + the longest request {longest:g} s + "
            f"{s.checks.margin_seconds:g} s margin"
        )
    bound = remedy.needed_grace(
        max(graces, default=DEFAULT_GRACE_SECONDS), longest, s.checks.margin_seconds
    )
    if planned >= bound:
        return planned, "the race window's plan: preStop + the longest request + margin"
    return bound, "a preStop of at most the grace period it had + the longest request + margin"


def measured(
    deletions: int,
    p: float,
    excess: float,
    explained: float,
    resolution: float,
    shutdown: ShutdownPath,
) -> RaceDetails:
    """The race details of a placement test: its p, the excess failures after the deletions
    and the share of the failures they explain (rounded as reported)."""
    return RaceDetails(
        deletions=deletions,
        p_value=round(p, 4),
        excess_failures=round(excess, 1),
        explained_fraction=round(max(explained, 0.0), 3),
        clock_resolution_seconds=resolution,
        shutdown=shutdown,
    )


def race_score(p: float, excess: float, share: float, s: Settings) -> float:
    """The race's score: significant excess failures after deletions weigh by ``share``,
    the fraction of the failures they explain."""
    if p < s.permutation_alpha and excess >= s.min_failures:
        return 0.55 + 0.4 * min(1.0, max(share, 0.0))
    if p < 0.05 and excess >= s.min_failures:
        return 0.35
    return 0.05


def assess_race(
    ctx: Context, s: Settings, manifest_notes: list[str], explained_backends: list[str]
) -> Assessment:
    """``explained_backends``: backends already shown to fail on their own, left out."""
    if not ctx.deletions:
        return untestable(
            Cause.RACE,
            "no pod deletions in the evidence: the race cannot be tested",
            "capture `kubectl get events -o json` and `kubectl get pods -o json` "
            "covering the next rollout",
        )
    shutdown = _shutdown_path(ctx)
    kills = np.array(shutdown.kill_moments)
    failures = _outside(ctx.new_conn_failures_without(explained_backends), kills, ctx.resolution)
    dels = ctx.deletion_ts
    observed = excess_in_windows(ctx, failures, dels, s.test_window)
    p = placement_test(lambda a: scan_statistic(ctx, failures, a), dels, ctx.traffic_span, s.rounds)
    explained = observed / failures.size if failures.size else 0.0
    # failures on reused connections are the race's only if it explains them too: the score
    # weighs the race by its share of all failures, so reuse ranks first when it is most
    on_reused = ctx.frame.filter(pl.col("failed") & pl.col("reused").fill_null(False)).height
    share = observed / (failures.size + on_reused) if failures.size + on_reused else 0.0
    starts, own = _failure_starts(ctx, explained_backends, kills)
    window = race_window(ctx, starts, s, own) if p < 0.05 else None
    evidence: list[str] = []
    fixes: list[FixStep] = []
    legs = hop_legs(ctx, ctx.resolution + TOLERANCE)
    caught = max((leg.failures for leg in legs), default=0)  # the slowest leg holds the most
    details = replace(
        measured(len(ctx.deletions), p, observed, explained, ctx.resolution, shutdown),
        window=window,
        hops=legs,
    )
    score = race_score(p, observed, share, s)
    if caught >= s.min_failures:  # each one named: sent to a pod its hop had not yet left
        score = max(score, 0.55 + 0.4 * min(1.0, caught / max(failures.size + on_reused, 1)))
    which = "on new connections " if ctx.has_conn else ""
    evidence.append(
        f"{round(observed):d} more failures {which}than traffic predicts in the "
        f"{s.test_window:g} s after {len(ctx.deletions)} pod deletions "
        f"({max(explained, 0.0):.0%} of those failures; permutation p = {p:.3g})"
    )
    early = _before_own_deletion(ctx, starts, own)
    if early >= s.min_failures:
        evidence.append(
            f"{early} failures came more than the clocks allow "
            f"({ctx.resolution + ctx.request_resolution + TOLERANCE:g} s) before the deletion "
            "of the pod they were sent to: they are attributed to no deletion; if the "
            "deletion times are late (events stamped by a slow kubelet) or the clocks "
            "differ, align them with --clock-offset SOURCE=SECONDS"
        )
    if window:
        evidence.append(
            f"99 % of the excess failures happen within {window.seconds:g} s after "
            f"deletion (95 % interval {window.ci95[0]:g}-{window.ci95[1]:g}"
            f" s; median lag {window.median_lag_seconds} s): the observed race window"
        )
    if window or caught >= s.min_failures:
        latency = _latency_p999(ctx)
        cover = 0.0
        what_covers = ""
        if window:
            cover = window.plan_seconds if window.plan_seconds is not None else window.ci95[1]
            what_covers = f"the window's 95 % upper bound {cover:g} s"
        if legs and legs[0].covers > cover:  # a hop's own log shows a longer leg
            cover = legs[0].covers
            what_covers = f"the slowest hop's leg, {legs[0].by} up to {cover:g} s"
        plans = remedy_patches(ctx, cover, latency, s)
        details = replace(
            details,
            latency_p999_seconds=round(latency, 3) if latency is not None else None,
            recommended_prestop_seconds=max(x.prestop_seconds for x, _, _ in plans),
            recommended_grace_seconds=max(x.grace_seconds for x, _, _ in plans),
            remedy=tuple(x for x, _, _ in plans),
            plan=replace(
                plans[0][1],
                prestop_seconds=max(x.prestop_seconds for x, _, _ in plans),
                grace_seconds=max(x.grace_seconds for x, _, _ in plans),
            ),
        )
        for patch, plan, drained in plans:
            drains = f" - {drained:g} s its app drains by itself" if drained else ""
            clocks = (
                f", its {window.clock_seconds:g} s of clock resolution aside"
                if window is not None and window.clock_seconds
                else ""
            )
            text = (
                f"{plan.rule_text or 'SVD101/SVD102'}: preStop sleep {plan.prestop_seconds} s "
                f"({what_covers}{clocks} + margin{drains}) and "
                f"terminationGracePeriodSeconds {plan.grace_seconds} (preStop "
                f"{f'+ drain {drained:g} s ' if drained else ''}+ longest request "
                f"{_longest(latency, s):g} s + {s.checks.margin_seconds:g} s, never below "
                f"what the object has or the default 30 s), for {patch.object}"
            )
            fixes.append(FixStep(text, patch.patch, patch.object))
        fixes.append(FixStep(GRACEFUL_SHUTDOWN))
    evidence.extend(leg_text(leg) for leg in legs)
    if shutdown.sigkilled:
        graces = sorted({k.grace_seconds for k in shutdown.sigkilled if k.grace_seconds})
        took = [
            k.seconds_after_deletion
            for k in shutdown.sigkilled
            if k.seconds_after_deletion is not None
        ]
        spread = EXIT_RESOLUTION / 2 + ctx.resolution
        evidence.append(
            f"{len(shutdown.sigkilled)} containers of deleted pods exited 137 (SIGKILL) "
            + (f"{_span_text(took)} s (±{spread:g} s) after deletion " if took else "")
            + (
                f"at the end of the grace period ({', '.join(map(str, graces))} s) "
                if graces
                else ""
            )
            + f"with {shutdown.failures_at_sigkill} failures at those moments"
        )
        need, how = _grace_for_kills(ctx, s, details, graces)
        details = replace(details, recommended_grace_seconds=need)
        fixes.insert(
            0,
            FixStep(
                "SVD102: the grace period is too short: the kubelet SIGKILLs the container "
                f"mid-request; set terminationGracePeriodSeconds {need} ({how})"
            ),
        )
        if shutdown.failures_at_sigkill >= s.min_failures:
            score = max(score, 0.7)
        else:
            score = max(score, 0.35)
    if shutdown.prestop_past_grace_pods:
        pods = shutdown.prestop_past_grace_pods
        evidence.append(
            f"{len(pods)} preStop hooks ran past the grace period ({', '.join(pods[:3])}): "
            "the kubelet cut them and sent SIGTERM with 2 s left"
        )
        fixes.append(
            FixStep(
                "SVD102: make terminationGracePeriodSeconds longer than the preStop sleep plus "
                "the longest request"
            )
        )
    if shutdown.failed_prestop_hooks:
        evidence.append(
            f"{shutdown.failed_prestop_hooks} FailedPreStopHook events "
            f"({', '.join(shutdown.failed_prestop_pods[:3])}): those pods got no "
            "preStop delay at all"
        )
        fixes.append(
            FixStep(
                "SVD104: fix the preStop hook (an image without a shell needs the native "
                "`sleep` action, Kubernetes ≥ 1.30)"
            )
        )
        score = max(score, 0.35) if score >= 0.3 else score
    evidence.extend(manifest_notes)
    return Assessment(Cause.RACE, round(score, 3), tuple(evidence), tuple(fixes), details)
