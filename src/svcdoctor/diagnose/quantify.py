"""Step 1 of the investigation: how many requests fail, how, and is it a round fraction?"""

from __future__ import annotations

import numpy as np
import polars as pl
from numpy.typing import NDArray

from svcdoctor.diagnose.context import Context
from svcdoctor.diagnose.stats import Floats, binom_fits, proportion_ci
from svcdoctor.model import Outcome
from svcdoctor.model.diagnosis import (
    EndpointMark,
    EndpointState,
    HostCount,
    NearestFraction,
    OutcomeCount,
    RoundTimeout,
    Summary,
    Timeline,
    TimelineEvent,
)

# Timeouts people configure, in seconds: ingress-nginx proxy-connect-timeout 5 s and
# proxy-read/send-timeout 60 s (ingress-nginx docs/user-guide/nginx-configuration/
# configmap.md), Envoy's route timeout 15 s (envoyproxy.io FAQ "How do I configure
# timeouts?"), AWS ALB idle timeout 60 s, and the round values clients use.
ROUND_TIMEOUTS = (5.0, 10.0, 15.0, 30.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0)


def round_timeouts(frame: pl.DataFrame) -> tuple[RoundTimeout, ...]:
    """Failed attempts whose duration is a round timeout or just over it (by 50 ms, or
    0.2 % of it: 120.001 s is a 120 s timer that fired, not a slow answer)."""
    failed = frame.filter(pl.col("failed") & pl.col("latency_ms").is_not_null())
    if failed.height == 0:
        return ()
    seconds = failed.get_column("latency_ms").to_numpy() / 1000
    out = []
    for limit in ROUND_TIMEOUTS:
        hits = int(((seconds >= limit) & (seconds <= limit + max(0.05, 0.002 * limit))).sum())
        if hits:
            out.append(RoundTimeout(limit, hits))
    return tuple(out)


def retried(frame: pl.DataFrame, masked: pl.DataFrame) -> tuple[int, int]:
    """Of the failed attempts a proxy retried (``masked``), how many belong to a request
    that succeeded in the end, and how many to one whose every try failed. An attempt and
    its request share the log line (its source, start and client)."""
    if masked.height == 0:
        return 0, 0
    keys = ["__s", "ts", "__c"]

    def keyed(rows: pl.DataFrame) -> pl.DataFrame:
        return rows.with_columns(
            pl.col("source").cast(pl.Utf8).alias("__s"),
            pl.col("client").cast(pl.Utf8).fill_null("").alias("__c"),
        )

    attempts = keyed(masked).select(keys)
    finals = (
        keyed(frame.filter(pl.col("role") == "request"))
        .join(attempts.unique(), on=keys, how="semi")
        .select(*keys, pl.col("failed").alias("__f"))
        .unique(keys)
    )
    linked = attempts.join(finals, on=keys, how="inner").get_column("__f")
    failed_too = int(linked.sum())
    return linked.len() - failed_too, failed_too


def replica_count(ctx: Context) -> int | None:
    """N: from Deployments/ReplicaSets, else backend hosts carrying traffic, else live pods."""
    if ctx.evidence.replicas_hint:
        return ctx.evidence.replicas_hint
    alive = [p for p in ctx.evidence.pods if p.deleted_at is None and p.created_at is not None]
    if alive and ctx.attempt_ts.size:  # pods running at the start of the traffic
        start = float(ctx.attempt_ts[0])
        running = [
            p
            for p in ctx.evidence.pods
            if p.created_at is not None
            and p.created_at <= start
            and (p.deleted_at or np.inf) > start
        ]
        if running:
            return len(running)
    if ctx.has_backend:
        # one pod may serve on several ports: count hosts, not IP:port pairs (the host is
        # cut from each distinct backend, not from every row)
        host = pl.col("backend").cast(pl.Utf8).str.replace(r":\d+$", "")
        shares = (
            ctx.frame.lazy()
            .filter(pl.col("backend").is_not_null())
            .group_by("backend")
            .len()
            .group_by(host)
            .agg(pl.col("len").sum())
            .collect()
            .get_column("len")
        )
        total = int(shares.sum())
        busy = int((shares >= 0.01 * total).sum()) if total else 0
        if busy:
            return busy
    alive = [p for p in ctx.evidence.pods if p.deleted_at is None]
    return len(alive) or None


def nearest_fraction(k: int, n: int, replicas: int | None) -> NearestFraction | None:
    """The j/N nearest to k/n and whether k/n is consistent with it (binomial test)."""
    if not replicas or n == 0 or k == 0:
        return None
    rate = k / n
    j = min(max(round(rate * replicas), 1), replicas)
    p = binom_fits(k, n, j / replicas)
    return NearestFraction(j, replicas, p, p >= 0.01)


def _outcomes(rows: pl.DataFrame) -> tuple[OutcomeCount, ...]:
    """Rows per outcome, in the outcomes' order (one comparison of the enum per outcome:
    a tenth of the cost of grouping ten million rows)."""
    counts = rows.select((pl.col("outcome") == o.value).sum().alias(o.value) for o in Outcome)
    return tuple(OutcomeCount(o, int(c)) for o, c in zip(Outcome, counts.row(0), strict=True) if c)


def quantify(ctx: Context) -> Summary:
    """The summary numbers of the request evidence; the inputs, warnings and the floor are
    the caller's to add."""
    frame = ctx.frame
    visible = frame.filter(pl.col("role") == "request")
    n = visible.height
    k = int(visible.get_column("failed").sum()) if n else 0
    masked = frame.filter((pl.col("role") == "masked") & pl.col("failed"))
    recovered, failed_too = retried(frame, masked)
    logged = frame.filter(pl.col("role") == "error_log")
    replicas = replica_count(ctx)
    span = ctx.traffic_span
    timed = bool(frame.height or ctx.evidence.events)
    return Summary(
        requests=n,
        errors=k,
        error_rate=k / n if n else None,
        error_rate_ci95=proportion_ci(k, n) if n else None,
        by_outcome=_outcomes(visible),
        masked_by_retries=masked.height,
        masked_by_outcome=_outcomes(masked),
        error_log_failures=logged.height,
        error_log_hosts=_hosts(logged),
        start=span[0] if timed else None,
        end=span[1] if timed else None,
        duration_seconds=round(span[1] - span[0], 3),
        replicas=replicas,
        nearest_fraction=nearest_fraction(k, n, replicas),
        deletions=len(ctx.deletions),
        masked_recovered=recovered,
        masked_unrecovered=failed_too,
        round_timeouts=round_timeouts(frame),
    )


def _hosts(rows: pl.DataFrame) -> tuple[HostCount, ...]:
    """The backend hosts (IP without port) of failure rows, most failures first."""
    if rows.height == 0:
        return ()
    host = pl.col("backend").cast(pl.Utf8).str.replace(r":\d+$", "").str.strip_chars("[]")
    counts = (
        rows.filter(pl.col("backend").is_not_null())
        .group_by(host.alias("host"))
        .len()
        .sort(["len", "host"], descending=[True, False])
        .head(5)
    )
    return tuple(HostCount(str(h), int(n)) for h, n in counts.iter_rows())


def _per_second(stamps: Floats, origin: float, width: int) -> NDArray[np.int64]:
    """How many of the sorted ``stamps`` fall in each of the ``width`` seconds from the
    whole second ``origin``: two binary searches a second, not a pass over the rows. Where
    ``stamps - origin`` could round (negative or huge times), each row is binned."""
    if origin >= 0 and (stamps.size == 0 or stamps[-1] < 2.0**52):
        edges = origin + np.arange(width + 1)
        return np.diff(np.searchsorted(stamps, edges, "left"))
    inside = stamps[(stamps >= origin) & (stamps < origin + width)]
    return np.bincount((inside - origin).astype(np.int64), minlength=width)[:width]


def _state(removed: bool, ready: bool | None) -> EndpointState:
    if removed:
        return EndpointState.REMOVED
    return EndpointState.NOT_READY if ready is False else EndpointState.READY


def timeline(ctx: Context) -> Timeline:
    """Per-second requests and failures, and the lifecycle moments, for the plots."""
    if ctx.attempt_ts.size:
        origin = float(np.floor(ctx.attempt_ts[0]))
        width = int(ctx.attempt_ts[-1] - origin) + 1
        seconds = origin + np.arange(width)
        requests = _per_second(ctx.attempt_ts, origin, width)
        failures = _per_second(ctx.failure_ts, origin, width)
    else:
        seconds = np.zeros(0)
        requests = failures = np.zeros(0, dtype=np.int64)
    return Timeline(
        second=tuple(seconds.tolist()),
        requests=tuple(requests.tolist()),
        failures=tuple(failures.tolist()),
        events=tuple(TimelineEvent(e.ts, e.kind, e.pod or "") for e in ctx.evidence.events),
        endpoints=tuple(
            EndpointMark(c.ts, c.address, _state(c.removed, c.ready))
            for c in ctx.evidence.endpoints
            if c.ts is not None
        ),
    )
