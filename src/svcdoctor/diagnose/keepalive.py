"""Connection reuse seen without connection ids: keep-alive connections that the backend
closes while the proxy in front still reuses them (the idle-timeout mismatch)."""

from __future__ import annotations

import numpy as np
import polars as pl

from svcdoctor.diagnose.context import Context, Settings
from svcdoctor.diagnose.stats import binom_greater, count_in, proportion_ci
from svcdoctor.model.diagnosis import (
    Caller,
    ClosedByUpstream,
    IdleGaps,
    StaleConnection,
    StaleConnections,
)

# How long the proxy in front keeps an idle upstream connection, by the evidence format
# (documented defaults): ingress-nginx upstream-keepalive-timeout 60 s, AWS ALB idle
# timeout 60 s, GCP external Application Load Balancer backend keep-alive 600 s, AWS NLB
# idle timeout 350 s, Envoy/Istio upstream idle_timeout 1 h (Envoy: "The default idle
# timeout if not otherwise specified is 1 hour", https://www.envoyproxy.io/docs/envoy/
# latest/faq/configuration/timeouts; Istio's DestinationRule connectionPool.http.idleTimeout
# leaves it there, istio/istio#40619: "more than one hour (the default)").
PROXY_IDLE: dict[str, tuple[str, float]] = {
    "nginx-access": ("ingress-nginx (upstream-keepalive-timeout)", 60.0),
    "alb": ("the AWS ALB (idle timeout)", 60.0),
    "gcp": ("the GCP load balancer (backend keep-alive)", 600.0),
    "nlb": ("the AWS NLB (idle timeout)", 350.0),
    "envoy": ("Envoy (upstream idle_timeout)", 3600.0),
    "envoy-json": ("Envoy (upstream idle_timeout)", 3600.0),
}
# The servers' idle keep-alive defaults, the usual other side of the mismatch.
SERVER_IDLE = "Node.js 5 s, gunicorn 2 s, uvicorn 5 s; Go's IdleTimeout falls back to ReadTimeout"
# The shortest idle keep-alive a common server closes at: gunicorn's default 2 s
# (https://docs.gunicorn.org/en/stable/settings.html#keepalive); a reused connection idle
# for less was hardly closed for being idle.
MIN_STALE_IDLE = 2.0
SAMPLE = 200_000  # requests whose gaps stand for the traffic's
GAPS = (1.0, 2.0, 3.0, 4.0, 5.0, 7.5, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0)
# the proxy's own words for "the upstream closed the connection before a response" (nginx,
# Envoy, GCP, ALB as the readers phrase it); a failure to connect is not one
CLOSED = (
    r"prematurely closed|connection_termination|backend_connection_closed_before_data"
    r"|target closed the connection|closed a kept-alive one"
)


def _closed() -> pl.Expr:
    detail = pl.col("detail").cast(pl.Utf8).fill_null("")
    return pl.col("failed") & ((pl.col("outcome") == "eof") | detail.str.contains(CLOSED))


def closed_before_response(frame: pl.DataFrame) -> pl.Series:
    """Failed rows in which the upstream closed the connection before any response."""
    return frame.select(_closed()).to_series()


def closed_connections(ctx: Context, s: Settings) -> ClosedByUpstream | None:
    """Failures where the upstream closed the connection, away from pod deletions and
    spread over the backends: kept-alive connections that backends close by themselves."""
    rows = ctx.frame.filter(pl.col("role") != "error_log")
    closed = rows.filter(closed_before_response(rows))
    failed = int(rows.get_column("failed").sum())
    if closed.height < s.min_failures or failed == 0:
        return None
    ends = np.sort(closed.get_column("ended").to_numpy())
    dels = ctx.deletion_ts
    near = count_in(ends, dels - ctx.resolution - 1.0, dels + s.test_window) if dels.size else 0
    backends = closed.get_column("backend").drop_nulls().n_unique()
    serving = rows.get_column("backend").drop_nulls().n_unique()
    return ClosedByUpstream(
        closed_failures=closed.height,
        share_of_failures=round(closed.height / failed, 3),
        near_deletions=near,
        backends=backends,
        backends_serving=serving,
        spread=serving == 0 or backends >= max(2, serving // 2),
        away_from_deletions=near <= 0.2 * closed.height,
    )


def stale_connections(ctx: Context) -> StaleConnections | None:
    """Failures where the upstream closed a reused connection before a response, after it
    sat idle at least ``MIN_STALE_IDLE`` and longer than any idle gap it survived before
    (after at least two requests):
    with connection ids, one such failure already shows where the idle timeout lies
    (between the two gaps). Only the connections of such failures are looked at."""
    if not ctx.has_conn:
        return None
    rows = ctx.frame.filter((pl.col("role") != "error_log") & pl.col("conn").is_not_null())
    closed = rows.filter(closed_before_response(rows) & pl.col("reused").fill_null(False))
    if closed.height == 0:
        return None
    conns = closed.get_column("conn").unique().implode()
    mine = (
        rows.filter(pl.col("conn").is_in(conns))
        .with_columns(_closed().alias("x"))
        .sort(["conn", "ts"], maintain_order=True)
        .with_columns(
            (pl.col("ts") - pl.col("ended").shift(1)).over("conn").alias("gap"),
            pl.int_range(pl.len()).over("conn").alias("before"),
        )
        .with_columns(pl.col("gap").cum_max().shift(1).over("conn").alias("survived"))
    )
    # at least two requests before it (an idle gap it survived): a connection id seen only
    # once before may be a recycled source port (a new connection), not a kept-alive one
    hits = mine.filter(
        pl.col("x")
        & (pl.col("before") >= 2)
        & (pl.col("gap") >= MIN_STALE_IDLE)
        & (pl.col("gap") > pl.col("survived"))
    ).sort("ts")
    if hits.height == 0:
        return None
    failed = int(rows.get_column("failed").sum())
    return StaleConnections(
        failures=hits.height,
        of_failures=failed,
        min_idle_seconds=MIN_STALE_IDLE,
        examples=tuple(
            StaleConnection(
                conn=str(r["conn"]),
                backend=None if r["backend"] is None else str(r["backend"]),
                at=float(r["ts"]),
                idle_seconds=round(float(r["gap"]), 3),
                longest_survived_seconds=round(float(r["survived"]), 3),
                requests_before=int(r["before"]),
            )
            for r in hits.head(5).iter_rows(named=True)
        ),
    )


def stale_pairs(ctx: Context, s: Settings) -> StaleConnections | None:
    """Without connection ids, in a proxy's log: failures where the upstream closed the
    connection before a response, on a proxy → backend pair idle at least
    ``MIN_STALE_IDLE`` but less than the proxy's own idle timeout (so its pool still held a
    connection to reuse), away from pod deletions (there the race may explain them)."""
    proxy = proxy_in_front(ctx)
    if ctx.has_conn or not ctx.has_backend or proxy is None:
        return None
    rows = ctx.frame.filter((pl.col("role") == "request") & pl.col("backend").is_not_null())
    closed = rows.filter(_closed())
    if closed.height == 0:
        return None
    key = ["source", "backend"]
    before = rows.select(*key, pl.col("ts").alias("__prev"), pl.col("ended").alias("__end"))
    gapped = (
        closed.select(*key, "ts")
        .join_asof(
            before,
            left_on="ts",
            right_on="__prev",
            by=key,
            strategy="backward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        .with_columns((pl.col("ts") - pl.col("__end")).alias("gap"))
        .filter((pl.col("gap") >= MIN_STALE_IDLE) & (pl.col("gap") < proxy[1]))
    )
    dels = ctx.deletion_ts
    if dels.size and gapped.height:
        starts = gapped.get_column("ts").to_numpy()
        idx = np.searchsorted(dels, starts + ctx.resolution + 1.0, "right") - 1
        lag = starts - dels[np.clip(idx, 0, None)]
        gapped = gapped.filter(pl.Series(~((idx >= 0) & (lag <= s.test_window))))
    if gapped.height == 0:
        return None
    return StaleConnections(
        failures=gapped.height,
        of_failures=int(rows.get_column("failed").sum()),
        min_idle_seconds=MIN_STALE_IDLE,
        examples=tuple(
            StaleConnection(
                conn=f"{proxy[0].split(' (')[0]} → {r['backend']}",
                backend=str(r["backend"]),
                at=float(r["ts"]),
                idle_seconds=round(float(r["gap"]), 3),
                longest_survived_seconds=None,
                requests_before=None,
            )
            for r in gapped.sort("ts").head(5).iter_rows(named=True)
        ),
    )


def _key(rows: pl.DataFrame, key: list[str]) -> list[pl.Expr]:
    """The as-of join's group key: two categorical columns as one integer (their codes
    side by side; null when either is null, as a null never matches), which the join
    groups ten million rows by in half the time of the pair; other columns as they are."""
    if len(key) != 2 or not all(isinstance(rows.schema[c], pl.Categorical) for c in key):
        return [pl.col(c) for c in key]
    first, second = (pl.col(c).to_physical().cast(pl.UInt64) for c in key)
    return [(first * 2**32 + second).alias("__key")]


def _gaps(rows: pl.DataFrame, left: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    """For each row of ``left``: the time since the previous request of the same ``key``
    in ``rows`` ended (rows are in start order: an as-of join, no sort of the big frame)."""
    by = _key(rows, key)
    before = rows.select(*by, pl.col("ts").alias("prev_ts"), pl.col("ended").alias("prev_end"))
    return (
        left.select(*by, "ts", "of_failures")
        .join_asof(
            before,
            left_on="ts",
            right_on="prev_ts",
            by=[e.meta.output_name() for e in by],
            strategy="backward",
            allow_exact_matches=False,
            check_sortedness=False,
        )
        .select((pl.col("ts") - pl.col("prev_end")).alias("gap"), "of_failures")
        .drop_nulls("gap")
    )


def idle_gaps(ctx: Context, s: Settings) -> IdleGaps | None:
    """Do failures follow idle gaps? For each request, the time since the previous request
    from the same caller to the same backend ended (caller: the client, and for proxy logs
    the proxy itself, whose pool holds the connections). If the failures sit on requests
    after gaps longer than some G far more than the traffic does (exact binomial test,
    Bonferroni over the candidate G and callers), the backend closed connections idle for
    about G while the caller still reused them.

    The gaps of every failure are measured; the traffic's share of long gaps comes from
    all requests, or from a random sample of ``SAMPLE`` of them (taking the upper end of
    its 95 % interval, so sampling never makes the test bolder)."""
    if not ctx.has_backend:
        return None
    callers = [Caller.SOURCE] + ([Caller.CLIENT] if ctx.has_client else [])
    rows = (  # only the columns the gaps need: the sample and the joins carry no others
        ctx.frame.lazy()
        .filter((pl.col("role") == "request") & pl.col("backend").is_not_null())
        .select(*(c.value for c in callers), "backend", "ts", "ended", "failed")
        .collect()
    )
    failed = rows.filter(pl.col("failed"))
    if failed.height < s.min_failures:
        return None
    sampled = rows.height > SAMPLE
    traffic = rows.sample(SAMPLE, seed=0).sort("ts") if sampled else rows
    both = pl.concat(
        [
            failed.with_columns(pl.lit(True).alias("of_failures")),
            traffic.with_columns(pl.lit(False).alias("of_failures")),
        ]
    ).sort("ts")
    best: tuple[float, IdleGaps] | None = None
    for caller in callers:
        gaps = _gaps(rows, both, [caller.value, "backend"])
        fail_gaps = gaps.filter("of_failures").get_column("gap").to_numpy()
        all_gaps = gaps.filter(~pl.col("of_failures")).get_column("gap").to_numpy()
        k_all = fail_gaps.size
        if k_all < s.min_failures or all_gaps.size == 0:
            continue
        for threshold in GAPS:
            k_g = int((fail_gaps >= threshold).sum())
            m_g = int((all_gaps >= threshold).sum())
            if k_g < s.min_failures or k_g < 0.5 * k_all or m_g == all_gaps.size:
                continue
            share = proportion_ci(m_g, all_gaps.size)[1] if sampled else m_g / all_gaps.size
            p = min(1.0, binom_greater(k_g, k_all, share) * len(GAPS) * len(callers))
            n_g = share * rows.height
            rate_after = k_g / max(n_g, 1.0)
            rate_before = (k_all - k_g) / max(rows.height - n_g, 1.0)
            if p < s.alpha and rate_after >= 2 * rate_before and (best is None or p < best[0]):
                found = IdleGaps(
                    caller=caller,
                    gap_seconds=threshold,
                    server_idle_seconds=round(
                        float(np.quantile(fail_gaps[fail_gaps >= threshold], 0.05)), 1
                    ),
                    failures_after_gap=k_g,
                    failures=k_all,
                    traffic_share_after_gap=round(m_g / all_gaps.size, 5),
                    rate_after_gap=round(rate_after, 5),
                    rate_otherwise=round(rate_before, 6),
                    p_value=float(f"{p:.3g}"),
                )
                best = (p, found)
    return best[1] if best is not None else None


def proxy_in_front(ctx: Context) -> tuple[str, float] | None:
    """The proxy whose logs these are, with its documented upstream idle timeout."""
    formats = {src.format for src in ctx.evidence.sources if src.rows}
    for fmt, known in PROXY_IDLE.items():
        if fmt in formats:
            return known
    return None


def mismatch_fix(ctx: Context, server_idle: float | None) -> str:
    """The keep-alive fix with the numbers of this evidence."""
    proxy = proxy_in_front(ctx)
    seen = f"about {server_idle:g} s" if server_idle else "a shorter time"
    if proxy is None:
        return (
            f"the backends close idle keep-alive connections after {seen} while callers "
            f"reuse them longer: make the server's idle timeout longer than the callers' "
            f"(defaults: {SERVER_IDLE}), or the callers' shorter"
        )
    name, idle = proxy
    longer = int(idle) + 5
    shorter = max(int(server_idle or 2) - 1, 1)
    return (
        f"the backends close idle keep-alive connections after {seen} but {name} keeps "
        f"them up to {idle:g} s and reuses them: make the app's idle timeout longer than "
        f"{idle:g} s (Node.js: server.keepAliveTimeout = {longer * 1000} and headersTimeout "
        f"above it; gunicorn --keep-alive {longer}; uvicorn --timeout-keep-alive {longer}; "
        f"Go http.Server IdleTimeout: {longer}s), or the proxy's shorter than the app's "
        f"({shorter} s; defaults: {SERVER_IDLE})"
    )
