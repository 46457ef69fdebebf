"""The backends picture's numbers: failures per backend pod with their interval, the
diagnosis' suspects flagged, and per client-backend pair (who is pinned to the bad pod)."""

from __future__ import annotations

import polars as pl

from svcdoctor.diagnose import upstreams
from svcdoctor.diagnose.context import Context, build
from svcdoctor.diagnose.stats import proportion_ci
from svcdoctor.model import Cause, Evidence
from svcdoctor.model.breakdown import BackendRate, Breakdown, PairRate
from svcdoctor.model.diagnosis import BackendDetails, Diagnosis


def _suspects(diagnosis: Diagnosis) -> set[str]:
    """The backends the diagnosis singled out (as the request log names them)."""
    details = diagnosis.cause(Cause.BACKEND).details
    if not isinstance(details, BackendDetails):
        return set()
    return {s.backend for s in details.suspects}


def build_breakdown(evidence: Evidence, diagnosis: Diagnosis) -> Breakdown | None:
    """The breakdown of a diagnosis of ``evidence`` (see ``breakdown_of``), from the
    evidence of the diagnosed Service."""
    return breakdown_of(build(upstreams.of_service(evidence, diagnosis.service)), diagnosis)


def breakdown_of(ctx: Context, diagnosis: Diagnosis) -> Breakdown | None:
    """Requests and failures per backend over every attempt the backends received (failed
    attempts a proxy retried count: the backend failed them; error-log rows do not: they
    have no denominator), and per client-backend pair when the rows name clients. ``None``
    when no row names a backend: there is nothing to draw."""
    if not ctx.has_backend:
        return None
    rows = ctx.frame.filter((pl.col("role") != "error_log") & pl.col("backend").is_not_null())
    if rows.height == 0:
        return None
    suspects = _suspects(diagnosis)
    per = rows.group_by("backend").agg(pl.len().alias("n"), pl.col("failed").sum().alias("k"))
    backends = []
    for backend, n, k in per.select(pl.col("backend").cast(pl.Utf8), "n", "k").iter_rows():
        pod = ctx.pod_of(backend)
        backends.append(
            BackendRate(
                backend=backend,
                pod=pod.name if pod else None,
                requests=int(n),
                failures=int(k),
                rate=int(k) / int(n),
                ci95=proportion_ci(int(k), int(n)),
                suspect=backend in suspects,
            )
        )
    backends.sort(key=lambda b: (not b.suspect, b.name, b.backend))
    pairs: tuple[PairRate, ...] = ()
    if ctx.has_client:
        by_pair = (
            rows.filter(pl.col("client").is_not_null())
            .group_by("client", "backend")
            .agg(pl.len().alias("n"), pl.col("failed").sum().alias("k"))
            .select(pl.col("client").cast(pl.Utf8), pl.col("backend").cast(pl.Utf8), "n", "k")
            .sort("client", "backend")
        )
        pairs = tuple(
            PairRate(client, backend, int(n), int(k), int(k) / int(n))
            for client, backend, n, k in by_pair.iter_rows()
        )
    return Breakdown(tuple(backends), pairs, diagnosis.service)
