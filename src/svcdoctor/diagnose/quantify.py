"""Step 1 of the investigation: how many requests fail, how, and is it a round fraction?"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import polars as pl

from svcdoctor.diagnose.context import Context
from svcdoctor.diagnose.stats import binom_fits, proportion_ci
from svcdoctor.model import iso_utc as iso


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
        visible = ctx.frame.filter(pl.col("backend").is_not_null())
        # one pod may serve on several ports: count hosts, not IP:port pairs
        host = pl.col("backend").cast(pl.Utf8).str.replace(r":\d+$", "")
        shares = visible.group_by(host).len().get_column("len")
        total = int(shares.sum())
        busy = int((shares >= 0.01 * total).sum()) if total else 0
        if busy:
            return busy
    alive = [p for p in ctx.evidence.pods if p.deleted_at is None]
    return len(alive) or None


def nearest_fraction(k: int, n: int, replicas: int | None) -> dict[str, Any] | None:
    """The j/N nearest to k/n and whether k/n is consistent with it (binomial test)."""
    if not replicas or n == 0 or k == 0:
        return None
    rate = k / n
    j = min(max(round(rate * replicas), 1), replicas)
    p = binom_fits(k, n, j / replicas)
    return {
        "fraction": f"{j}/{replicas}",
        "value": j / replicas,
        "p_value": p,
        "consistent": p >= 0.01,
        "simplified": str(Fraction(j, replicas)),
    }


def quantify(ctx: Context) -> dict[str, Any]:
    frame = ctx.frame
    visible = frame.filter(pl.col("role") == "request")
    n = visible.height
    k = int(visible.get_column("failed").sum()) if n else 0
    by_outcome = {
        r["outcome"]: r["len"]
        for r in visible.group_by("outcome").len().sort("outcome").iter_rows(named=True)
    }
    masked = frame.filter((pl.col("role") == "masked") & pl.col("failed"))
    logged = frame.filter(pl.col("role") == "error_log")
    replicas = replica_count(ctx)
    span = ctx.traffic_span
    low, high = proportion_ci(k, n)
    return {
        "requests": n,
        "errors": k,
        "error_rate": k / n if n else None,
        "error_rate_ci95": [low, high] if n else None,
        "by_outcome": by_outcome,
        "masked_by_retries": masked.height,
        "masked_by_outcome": {
            r["outcome"]: r["len"]
            for r in masked.group_by("outcome").len().sort("outcome").iter_rows(named=True)
        },
        "error_log_failures": logged.height,
        "error_log_hosts": _hosts(logged),
        "start": iso(span[0]) if frame.height or ctx.evidence.events else None,
        "end": iso(span[1]) if frame.height or ctx.evidence.events else None,
        "duration_seconds": round(span[1] - span[0], 3),
        "replicas": replicas,
        "nearest_fraction": nearest_fraction(k, n, replicas),
        "deletions": len(ctx.deletions),
    }


def _hosts(rows: pl.DataFrame) -> list[tuple[str, int]]:
    """The backend hosts (IP without port) of failure rows, most failures first."""
    if rows.height == 0:
        return []
    host = pl.col("backend").cast(pl.Utf8).str.replace(r":\d+$", "").str.strip_chars("[]")
    counts = (
        rows.filter(pl.col("backend").is_not_null())
        .group_by(host.alias("host"))
        .len()
        .sort(["len", "host"], descending=[True, False])
        .head(5)
    )
    return [(str(h), int(n)) for h, n in counts.iter_rows()]


def timeline(ctx: Context) -> dict[str, Any]:
    """Per-second requests and failures, and the lifecycle moments, for the plots."""
    seconds: Any
    requests: Any
    failures: Any
    if ctx.attempt_ts.size:
        origin = float(np.floor(ctx.attempt_ts[0]))
        width = int(ctx.attempt_ts[-1] - origin) + 1
        requests = np.bincount((ctx.attempt_ts - origin).astype(np.int64), minlength=width)
        inside = ctx.failure_ts[(ctx.failure_ts >= origin) & (ctx.failure_ts < origin + width)]
        failures = np.bincount((inside - origin).astype(np.int64), minlength=width)[:width]
        seconds = origin + np.arange(width)
    else:
        seconds = requests = failures = np.zeros(0)
    return {
        "second": seconds.tolist(),
        "requests": requests.tolist(),
        "failures": failures.tolist(),
        "events": [(e.ts, e.kind.value, e.pod or "") for e in ctx.evidence.events],
        "endpoints": [
            (
                c.ts,
                c.address,
                "removed" if c.removed else "not-ready" if c.ready is False else "ready",
            )
            for c in ctx.evidence.endpoints
            if c.ts is not None
        ],
    }
