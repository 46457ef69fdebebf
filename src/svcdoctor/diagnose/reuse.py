"""Step 5: the client side. Connection reuse pins clients to backends, so failures land on
the clients that held connections, at the moment a pod exits."""

from __future__ import annotations

import numpy as np
import polars as pl

from svcdoctor.diagnose.context import Context, Settings
from svcdoctor.diagnose.keepalive import (
    closed_connections,
    idle_gaps,
    mismatch_fix,
    stale_connections,
    stale_pairs,
)
from svcdoctor.diagnose.stats import binom_greater, chi2_homogeneity, count_in
from svcdoctor.model import Assessment, Cause, EventKind, LifecycleEvent
from svcdoctor.model.diagnosis import (
    ClientConcentration,
    ClientFailures,
    ExitFailures,
    ReusedConnections,
    ReuseDetails,
    SkewedBackend,
    StaleConnections,
    steps,
)

# "every request opened a new connection" is a claim about the traffic: not drawn from
# fewer requests with known connections than this
MIN_FOR_NO_REUSE = 20
# a deleted pod whose requests stop this long before the evidence ends has stopped serving
# (the exit window's width, 2 s, with a margin): an assumption of this tool
STOPPED_FOR = 5.0


def client_concentration(ctx: Context) -> ClientConcentration | None:
    """How few clients carry most failures, against their share of traffic (chi-square)."""
    if not ctx.has_client:
        return None
    rows = ctx.frame.filter((pl.col("role") != "error_log") & pl.col("client").is_not_null())
    per = rows.group_by("client").agg(pl.len().alias("n"), pl.col("failed").sum().alias("k"))
    total_k = int(per.get_column("k").sum())
    if per.height < 2 or total_k == 0:
        return None
    per = per.sort(["k", "client"], descending=[True, False])  # ties: by name
    k = per.get_column("k").to_numpy()
    n = per.get_column("n").to_numpy()
    top = int(np.searchsorted(np.cumsum(k) / total_k, 0.8) + 1)
    p = chi2_homogeneity(k.astype(float), n.astype(float))
    return ClientConcentration(
        clients=per.height,
        clients_with_80pct_of_failures=top,
        their_traffic_share=round(float(n[:top].sum() / n.sum()), 3),
        p_value=float(f"{p:.3g}"),
        worst_clients=tuple(
            ClientFailures(str(c), int(rn), int(rk))
            for c, rn, rk in per.head(5).select("client", "n", "k").iter_rows()
        ),
    )


def new_backend_share(ctx: Context) -> tuple[SkewedBackend, ...]:
    """Backends created during the evidence that got far less than a fair share."""
    if not ctx.has_backend:
        return ()
    created = {
        e.pod: e.ts
        for e in ctx.evidence.events
        if e.kind is EventKind.CREATE and e.pod and e.ts > ctx.start + 1
    }
    if not created:
        return ()
    rows = ctx.frame.filter((pl.col("role") == "request") & pl.col("backend").is_not_null())
    skewed = []
    for backend in rows.get_column("backend").unique().to_list():
        pod = ctx.pod_of(backend)
        if pod is None or pod.name not in created:
            continue
        after = rows.filter(pl.col("ts") >= created[pod.name] + 5)
        if after.height < 50:
            continue
        share = after.filter(pl.col("backend") == backend).height / after.height
        fair = 1 / max(after.get_column("backend").n_unique(), 1)
        if share < 0.3 * fair:
            skewed.append(SkewedBackend(pod.name, round(share, 4), round(fair, 4)))
    return tuple(skewed)


def reused_excess(ctx: Context, failures: pl.DataFrame, reused: int) -> ReusedConnections | None:
    """Do failures sit on reused connections more than requests do? With one long-lived
    connection per client nearly every request is on a reused one, and so is any failure:
    the share alone says nothing, the exact test against the traffic's share does."""
    if not ctx.has_conn or failures.height == 0:
        return None
    known = ctx.frame.filter((pl.col("role") == "request") & pl.col("reused").is_not_null())
    if known.height == 0:
        return None
    share = int(known.get_column("reused").sum()) / known.height
    return ReusedConnections(
        traffic_share=round(share, 4),
        p_value=float(f"{binom_greater(reused, failures.height, share):.3g}"),
    )


def failures_at_exits(ctx: Context, reused: pl.DataFrame) -> ExitFailures | None:
    """Failures on reused connections right when their own backend's container exited,
    against the traffic's share of such moments (requests to a pod within 2 s of its
    exit). Without backends, any exit counts and time stands in for the pairing.

    The exits are the containers' ``finishedAt`` (pods' ``lastState``/``state``); where no
    pod snapshot has them (a deleted pod is gone from ``kubectl get pods``, and its
    ``Killing`` event is the start of its shutdown, a preStop before the exit), each
    deleted pod's exit is the moment it stopped serving: the last request it served after
    its deletion, when requests kept reaching it after that (``_stopped_serving``)."""
    if reused.height == 0:
        return None
    moments = sorted(e.ts for e in ctx.evidence.events if e.kind is EventKind.EXIT and e.pod)
    exits = [e for e in ctx.evidence.events if e.kind is EventKind.EXIT and e.pod]
    exit_of = _exit_by_backend(ctx, exits) if ctx.has_backend and exits else {}
    if not exits and ctx.has_backend:
        exit_of = _stopped_serving(ctx)
        moments = sorted(exit_of.values())
    if not moments:
        return None
    lo_pad, hi_pad = 1.0 + ctx.resolution, 2.0
    requests = ctx.frame.filter(pl.col("role") == "request")
    reused = _backend_of_conn(ctx, reused) if exit_of else reused
    if exit_of and reused.get_column("backend").null_count() > 0.5 * reused.height:
        exit_of = {}  # most failures name no pod: time alone pairs them with exits
    if exit_of:

        def at_own_exit(frame: pl.DataFrame, column: str) -> int:
            moment = (
                pl.col("backend")
                .cast(pl.Utf8)
                .replace_strict(exit_of, default=None, return_dtype=pl.Float64)
            )
            lag = pl.col(column) - moment
            return int(frame.select(((lag >= -lo_pad) & (lag <= hi_pad)).sum()).item() or 0)

        hits = at_own_exit(reused, "ended")
        share = at_own_exit(requests, "ts") / max(requests.height, 1)
    else:
        lo, hi = np.array(moments) - lo_pad, np.array(moments) + hi_pad
        hits = count_in(np.sort(reused.get_column("ended").to_numpy()), lo, hi)
        traffic = ctx.attempt_ts
        share = (
            count_in(traffic, lo, hi) / traffic.size
            if traffic.size
            else min(1.0, float((hi - lo).sum()) / max(ctx.end - ctx.start, 1e-9))
        )
    return ExitFailures(
        failures=hits,
        own_backend=bool(exit_of),
        traffic_share=round(share, 4),
        p_value=float(f"{binom_greater(hits, reused.height, max(share, 1e-9)):.3g}"),
    )


def aligned_with_exits(a: Assessment, s: Settings) -> bool:
    """Whether the reuse assessment rests on failures aligned with pod exits (a lifecycle
    test against the traffic's own share): a pattern no failure-rate floor may hide."""
    d = a.details
    at_exit = d.failures_at_exit_on_reused if isinstance(d, ReuseDetails) else None
    return (
        at_exit is not None
        and at_exit.failures >= s.min_failures
        and at_exit.p_value < s.alpha
        and a.score >= 0.3
    )


def _backend_of_conn(ctx: Context, failures: pl.DataFrame) -> pl.DataFrame:
    """The failures, each without a backend given the backend its connection last served
    (a client's log: a request that got no response names no pod, but the connection it
    was sent on went to one)."""
    missing = failures.filter(pl.col("backend").is_null() & pl.col("conn").is_not_null())
    if missing.height == 0:
        return failures
    conns = missing.get_column("conn").unique().implode()
    served = (
        ctx.frame.filter(pl.col("conn").is_in(conns) & pl.col("backend").is_not_null())
        .select("conn", pl.col("ts").alias("__ts"), pl.col("backend").cast(pl.Utf8).alias("__b"))
        .sort("__ts")
    )
    return (
        failures.with_columns(pl.col("backend").cast(pl.Utf8))
        .sort("ts")
        .join_asof(
            served,
            left_on="ts",
            right_on="__ts",
            by="conn",
            strategy="backward",
            check_sortedness=False,
        )
        .with_columns(pl.coalesce("backend", "__b").alias("backend"))
        .drop("__ts", "__b")
    )


def _stopped_serving(ctx: Context) -> dict[str, float]:
    """For each backend whose pod was deleted: the last request it served at or after its
    deletion, when that is more than ``STOPPED_FOR`` s before the request evidence ends (it
    served through its deletion, then stopped: the moment the app exited, as near as the
    requests tell it)."""
    served = ctx.frame.filter(
        (pl.col("role") == "request") & ~pl.col("failed") & pl.col("backend").is_not_null()
    )
    if not ctx.deletions or served.height == 0:
        return {}
    last = served.group_by(pl.col("backend").cast(pl.Utf8)).agg(pl.col("ts").max())
    end = ctx.traffic_span[1]
    out = {}
    for backend, ts in last.iter_rows():
        pod = ctx.pod_of(str(backend))
        deleted = ctx.deletions.get(pod.name if pod is not None else str(backend))
        if deleted is not None and deleted - ctx.resolution <= ts < end - STOPPED_FOR:
            out[str(backend)] = float(ts)
    return out


def _exit_by_backend(ctx: Context, exits: list[LifecycleEvent]) -> dict[str, float]:
    """The first container exit of the pod behind each backend seen in the requests."""
    first: dict[str, float] = {}
    for e in exits:
        if e.pod:
            first[e.pod] = min(first.get(e.pod, e.ts), e.ts)
    backends = ctx.frame.get_column("backend").drop_nulls().unique().to_list()
    out = {}
    for backend in backends:
        pod = ctx.pod_of(str(backend))
        if pod is not None and pod.name in first:
            out[str(backend)] = first[pod.name]
    return out


def assess_reuse(
    ctx: Context, s: Settings, manifest_notes: list[str], race_explains: float = 0.0
) -> Assessment:
    """``race_explains``: the share of failures the race already explains; the idle-gap
    analysis (the costliest here) runs only when enough failures are left to explain."""
    closed = closed_connections(ctx, s)
    gaps = idle_gaps(ctx, s) if race_explains < 0.8 else None
    collect = []
    if not ctx.has_conn and not gaps:
        collect.append(
            "add a conn column (an id per client connection) to tell reused "
            "connections from new ones"
        )
    if not ctx.has_client:
        collect.append("add a client column to see whether failures concentrate on clients")
    failures = ctx.frame.filter(pl.col("failed") & (pl.col("role") != "error_log"))
    reused = failures.filter(pl.col("reused").fill_null(False))
    reused_share = reused.height / failures.height if failures.height else 0.0
    conc = client_concentration(ctx)
    skew = new_backend_share(ctx)
    on_reused = reused_excess(ctx, failures, reused.height)
    at_exit = failures_at_exits(ctx, reused)
    evidence: list[str] = []
    score = 0.05
    known = _with_known_conn(ctx) if on_reused is not None else 0
    if on_reused is not None and on_reused.traffic_share == 0 and known >= MIN_FOR_NO_REUSE:
        evidence.append("every request opened a new connection: nothing was reused")
    elif on_reused is not None and failures.height >= s.min_failures:
        evidence.append(
            f"{reused_share:.0%} of {failures.height} failures happened on reused "
            f"(keep-alive) connections, which carry {on_reused.traffic_share:.0%} of the "
            f"requests (binomial p = {on_reused.p_value:.3g})"
        )
        significant = on_reused.p_value < s.alpha and reused.height >= s.min_failures
        if significant and reused_share >= 0.5:
            score = 0.45 + 0.3 * reused_share
    if at_exit is not None and at_exit.failures >= s.min_failures:
        exited = any(e.kind is EventKind.EXIT for e in ctx.evidence.events)
        evidence.append(
            f"{at_exit.failures} failures on reused connections within 2 s of "
            + ("their own backend's" if at_exit.own_backend else "a")
            + (
                " container exit"
                if exited
                else " deleted pod's last served request (when it stopped serving: no "
                "container exit times were given)"
            )
            + f", where {at_exit.traffic_share:.1%} of the traffic is (binomial "
            f"p = {at_exit.p_value:.3g}): connections held to a terminating pod broke when "
            "it exited"
        )
        share = at_exit.failures / max(failures.height, 1)
        if at_exit.p_value < s.alpha and share >= 0.2:  # a cause of many failures
            score = max(score, 0.6 + 0.3 * share)
        elif at_exit.p_value < s.alpha and share >= 0.1:  # of some, among others
            score = max(score, 0.35)
    if conc and conc.p_value < s.alpha:
        evidence.append(
            f"{conc.clients_with_80pct_of_failures} of {conc.clients} clients hold 80 % of "
            f"failures with {conc.their_traffic_share:.0%} of traffic "
            f"(chi-square p = {conc.p_value:.3g})"
        )
        if conc.their_traffic_share < 0.6:
            score = max(score, 0.35) + (0.15 if score >= 0.45 else 0.0)
    if skew:
        names = ", ".join(f"{x.pod} ({x.share:.1%} vs fair {x.fair_share:.0%})" for x in skew[:3])
        evidence.append(f"new pods get little traffic from existing clients: {names}")
        if failures.height >= s.min_failures:  # skew alone is no cause of failures
            score = max(score, 0.35)
    if closed and closed.share_of_failures >= 0.5:
        evidence.append(
            f"{closed.closed_failures} failures ({closed.share_of_failures:.0%}) are the "
            f"upstream closing the connection before a response, on {closed.backends} of "
            f"{closed.backends_serving} backends, {closed.near_deletions} of them near a "
            "pod deletion"
        )
        if closed.spread and closed.away_from_deletions:
            evidence.append(
                "spread over the backends and not tied to deletions: kept-alive connections "
                "that the backends close by themselves"
            )
            score = max(score, 0.4)
    if gaps:
        evidence.append(
            f"{gaps.failures_after_gap} of {gaps.failures} failures follow an idle gap of "
            f"{gaps.gap_seconds:g} s or more on the same {gaps.caller}→backend pair "
            f"({gaps.rate_after_gap:.2%} of such requests fail, {gaps.rate_otherwise:.3%} "
            f"of the others; binomial p = {gaps.p_value:.3g}): the backend closed "
            f"connections idle for about {gaps.server_idle_seconds:g} s while they were "
            "still reused"
        )
        score = max(score, 0.6 + 0.3 * gaps.failures_after_gap / gaps.failures)
    stale = stale_connections(ctx) or stale_pairs(ctx, s)
    if stale:
        evidence.append(_stale_text(stale))
        share = stale.failures / max(stale.of_failures, 1)
        # one line is a signature, not a statistic: "possible"; many, most of the failures,
        # on connections known by their ids (a pair's may have been refused instead)
        paired = stale.examples[0].requests_before is None
        many = stale.failures >= s.min_failures and share >= 0.5 and not paired
        score = max(score, 0.6 + 0.3 * share if many else 0.35)
    if not evidence:
        evidence.append("no sign of connection reuse in the failures")
    evidence.extend(manifest_notes)
    fixes = []
    if gaps or stale or (closed and score >= 0.3 and not ctx.has_conn):
        fixes.append(mismatch_fix(ctx, gaps.server_idle_seconds if gaps else None))
    if score >= 0.3:
        fixes += [
            "bound connection lifetime: client max connection age / idle timeout, or the "
            "server's (gRPC MaxConnectionAge, HTTP keep-alive max requests)",
            "on SIGTERM answer with `Connection: close` (HTTP/1.1) or GOAWAY (HTTP/2) before "
            "exiting, so clients move their connections in time",
            "for gRPC: a headless Service with client-side round_robin, or a mesh that "
            "balances per request",
        ]
    details = ReuseDetails(
        reused_failure_share=round(reused_share, 3),
        client_concentration=conc,
        reused_connections=on_reused,
        failures_at_exit_on_reused=at_exit,
        skewed_new_backends=skew,
        closed_by_upstream=closed,
        idle_gaps=gaps,
        stale_connections=stale,
    )
    return Assessment(
        Cause.REUSE,
        round(min(score, 0.95), 3),
        tuple(evidence),
        steps(fixes),
        details,
        tuple(collect),
    )


def _with_known_conn(ctx: Context) -> int:
    """Requests whose connection is known."""
    known = (pl.col("role") == "request") & pl.col("reused").is_not_null()
    return int(ctx.frame.select(known.sum()).item() or 0)


def _stale_text(stale: StaleConnections) -> str:
    """The stale-connection failures, with the first one's gaps quoted."""
    x = stale.examples[0]
    if x.longest_survived_seconds is None or x.requests_before is None:
        return (
            f"{stale.failures} of {stale.of_failures} failures: the upstream closed the "
            f"connection before a response after the pair sat idle (first: {x.conn}, idle "
            f"{x.idle_seconds:g} s, less than the proxy keeps idle connections), away from "
            "pod deletions: a kept-alive connection the backend had closed after a shorter "
            "idle timeout (keep-alive mismatch), unless connections were refused"
        )
    return (
        f"{stale.failures} of {stale.of_failures} failures: the upstream closed a kept-alive "
        f"connection reused after sitting idle (first: {x.conn}"
        + (f" to {x.backend}" if x.backend and x.backend not in x.conn else "")
        + f", idle {x.idle_seconds:g} s after {x.requests_before} requests on it, whose "
        f"longest idle gap before was {x.longest_survived_seconds:g} s):"
        " an idle timeout between the two closed it while the caller still reused it "
        "(keep-alive mismatch)"
    )
