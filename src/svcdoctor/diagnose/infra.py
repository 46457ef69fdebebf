"""Infrastructure: conntrack exhaustion, SNAT, and failures tied to one node.

Failures spread evenly over backends and time are the null hypothesis, not this cause:
infrastructure is named only on its own evidence, kernel drops whose bursts line up with
the failures, conntrack counters that grow while requests fail, or failures concentrated
on the clients of one node."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl

from svcdoctor.diagnose.context import Context, Settings
from svcdoctor.diagnose.stats import (
    Floats,
    binom_greater,
    count_in,
    count_in_many,
    merged,
    placement_test,
)
from svcdoctor.model import Assessment, Cause, KernelEvent, iso_utc
from svcdoctor.model.diagnosis import (
    ConntrackCounter,
    CounterGrowth,
    CounterValue,
    InfraDetails,
    KernelAlignment,
    NodeConcentration,
    steps,
)

NEAR = 2.0  # seconds between a kernel line and the failures it explains (clocks, retries)
COVERS = 0.8  # bursts over this share of the traffic leave no quiet time to compare with
RELEVANT = 300.0  # kernel lines further than this from the requests describe other times
COUNTERS = tuple(c.value for c in ConntrackCounter)

FIXES = (
    "raise nf_conntrack_max (kube-proxy --conntrack-max-per-core) on the busy nodes and "
    "watch `conntrack -S` insert_failed",
    "for high fan-out egress, spread SNAT over more source ports/IPs",
    "for NodePort/LoadBalancer Services consider externalTrafficPolicy: Local",
)


def bursts(times: Floats) -> tuple[Floats, Floats]:
    """Kernel lines grouped into bursts: lines less than ``2 * NEAR`` apart are one burst."""
    return merged(times - NEAR, times + NEAR)


def burst_alignment(ctx: Context, s: Settings, times: Floats) -> KernelAlignment:
    """How the failures line up with the bursts of kernel lines.

    Two tests, both on bursts as units (a dense burst is one event, not hundreds): the
    exact binomial test of the failures inside the bursts against the traffic share of the
    bursts, and a placement test that moves whole bursts at random over the traffic. The
    first keeps its power on short windows; the second guards it against failures that
    cluster for other reasons (a rollout) and meet a burst by chance. Aligned: the binomial
    test passes and either the placement test does or the bursts hold most failures."""
    failures = ctx.failure_start_ts
    lo, hi = bursts(times)
    hits = count_in(failures, lo, hi)
    if ctx.attempt_ts.size:
        share = count_in(ctx.attempt_ts, lo, hi) / ctx.attempt_ts.size
    else:
        start, end = ctx.span
        share = min(1.0, float((hi - lo).sum()) / max(end - start, 1e-9))
    p = binom_greater(hits, failures.size, share)
    widths = hi - lo
    placed = placement_test(
        lambda a: count_in_many(failures, a, a + widths), lo, ctx.traffic_span, s.rounds
    )
    explained = hits / failures.size if failures.size else 0.0
    aligned = (
        hits >= s.min_failures
        and p < s.alpha
        and (placed < s.permutation_alpha or explained >= 0.5)
    )
    return KernelAlignment(
        covers_traffic=share >= COVERS,
        bursts=int(lo.size),
        failures_in_bursts=hits,
        traffic_share_of_bursts=round(share, 4),
        binomial_p=float(f"{p:.3g}"),
        placement_p=round(placed, 4),
        explained_fraction=round(explained, 3),
        aligned=aligned,
    )


def _relevant(ctx: Context, events: list[KernelEvent]) -> tuple[list[KernelEvent], list[float]]:
    """Aligned kernel events near the requests, and the times of those far outside them
    (with no requests at all, none is far: there is nothing to be far from)."""
    if ctx.attempt_ts.size == 0 and ctx.failure_ts.size == 0:
        return [e for e in events if e.ts is not None], []
    start, end = ctx.traffic_span
    near: list[KernelEvent] = []
    far: list[float] = []
    for e in events:
        if e.ts is None:
            continue
        if start - RELEVANT <= e.ts <= end + RELEVANT:
            near.append(e)
        else:
            far.append(e.ts)
    return near, far


def counter_growth(ctx: Context, s: Settings) -> CounterGrowth | None:
    """``conntrack -S`` snapshots taken over time: did insert_failed/drop grow while
    requests failed? Each interval between snapshots is a unit: the failures of the
    intervals in which a counter grew, against those intervals' share of the traffic."""
    snaps: dict[tuple[str, str], list[tuple[float, int]]] = {}
    for e in ctx.evidence.kernel:
        if e.kind in COUNTERS and e.ts is not None:
            snaps.setdefault((e.source, e.kind), []).append((e.ts, e.count))
    start, end = ctx.traffic_span
    grew_lo: list[float] = []
    grew_hi: list[float] = []
    covered_lo: list[float] = []
    covered_hi: list[float] = []
    growth = dict.fromkeys(COUNTERS, 0)
    for (_, kind), series in snaps.items():
        series.sort()
        for (t0, c0), (t1, c1) in itertools.pairwise(series):
            if t1 < start or t0 > end:
                continue
            covered_lo.append(t0)
            covered_hi.append(t1)
            if c1 > c0:
                growth[kind] += c1 - c0
                grew_lo.append(t0)
                grew_hi.append(t1)
    if not covered_lo:
        return None
    failures = ctx.failure_start_ts
    lo, hi = np.array(grew_lo), np.array(grew_hi)
    in_growth = count_in(failures, lo, hi) if lo.size else 0
    c_lo, c_hi = np.array(covered_lo), np.array(covered_hi)
    covered_failures = count_in(failures, c_lo, c_hi)
    traffic = ctx.attempt_ts
    covered_traffic = count_in(traffic, c_lo, c_hi) if traffic.size else 0
    share = count_in(traffic, lo, hi) / covered_traffic if lo.size and covered_traffic else 1.0
    p = binom_greater(in_growth, covered_failures, share) if share < 1.0 else 1.0
    return CounterGrowth(
        growth=tuple(CounterValue(ConntrackCounter(k), v) for k, v in growth.items()),
        failures_while_growing=in_growth,
        failures_covered=covered_failures,
        growing_traffic_share=round(share, 4),
        p_value=float(f"{p:.3g}"),
        # one interval holding everything cannot show alignment, only co-occurrence
        aligned=in_growth >= s.min_failures and p < s.alpha,
        co_occurs=sum(growth.values()) > 0 and in_growth >= s.min_failures,
    )


def assess_infra(ctx: Context, s: Settings, manifest_notes: list[str]) -> Assessment:
    drops = [e for e in ctx.evidence.kernel if e.kind == "conntrack_full"]
    suppressed = sum(e.count for e in ctx.evidence.kernel if e.kind == "suppressed")
    relevant, stale = _relevant(ctx, [e for e in drops if e.aligned])
    unaligned = [e for e in drops if not e.aligned or e.ts is None]
    # one snapshot since boot per counter (the last reported wins)
    snapshot = {e.kind: e.count for e in ctx.evidence.kernel if e.ts is None and e.kind in COUNTERS}
    evidence: list[str] = []
    fit: KernelAlignment | None = None
    score = 0.05
    failures = ctx.failure_start_ts
    if relevant and failures.size:
        times = np.array(sorted(e.ts for e in relevant if e.ts is not None))
        fit = burst_alignment(ctx, s, times)
        more = (
            f" (and {suppressed} more suppressed by the kernel's rate limit)" if suppressed else ""
        )
        evidence.append(
            f"{len(relevant)} 'nf_conntrack: table full, dropping packet' lines{more} in "
            f"{fit.bursts} burst{'s' if fit.bursts != 1 else ''}; "
            f"{fit.failures_in_bursts} of {failures.size} failures "
            f"fall within {NEAR:g} s of them, where {fit.traffic_share_of_bursts:.1%} of "
            f"the traffic is (binomial p = {fit.binomial_p:.3g}, burst placement "
            f"p = {fit.placement_p:.3g})"
        )
        messages = len(relevant) + suppressed
        if fit.aligned:
            score = 0.5 + 0.45 * fit.explained_fraction
        elif fit.covers_traffic and failures.size >= s.min_failures:
            evidence.append(
                "the kernel dropped packets throughout the requests: with no quiet time to "
                "compare, alignment cannot be tested and the co-occurrence is the evidence"
            )
            score = 0.6 if messages >= 0.1 * failures.size else 0.45
        else:
            evidence.append("the failures do not line up with the drops: they hit other traffic")
            score = 0.2
    elif relevant and ctx.attempt_ts.size == 0:
        evidence.append(
            f"{len(relevant)} conntrack 'table full' lines: the node dropped new connections; "
            "with no request log it cannot be told whether these are the failures you see"
        )
        score = 0.35
    elif relevant:
        evidence.append(f"{len(relevant)} conntrack 'table full' lines, and no failed requests")
    if stale:
        evidence.append(
            f"{len(stale)} conntrack 'table full' lines from {iso_utc(min(stale))} to "
            f"{iso_utc(max(stale))}, far from the requests: not counted"
        )
    if unaligned and not relevant and ctx.attempt_ts.size == 0:
        # no request log to line them up with: judged on their own, whatever their clock
        evidence.append(
            f"{len(unaligned)} conntrack 'table full' lines (times in seconds since boot): "
            "the node dropped new connections; with no request log it cannot be told "
            "whether these are the failures you see"
        )
        score = max(score, 0.35)
    elif unaligned and not relevant:
        evidence.append(
            f"{len(unaligned)} conntrack 'table full' lines whose times are seconds since "
            "boot: they cannot be lined up with the failures"
        )
        score = max(score, 0.35 if failures.size >= s.min_failures else 0.1)
    growth = counter_growth(ctx, s)
    if growth:
        grew = ", ".join(f"{g.counter} +{g.count}" for g in growth.growth if g.count)
        evidence.append(
            f"conntrack -S over the requests: {grew or 'no growth'}; "
            f"{growth.failures_while_growing} of {growth.failures_covered} failures "
            f"while a counter grew (p = {growth.p_value:.3g})"
        )
        if growth.aligned:
            score = max(score, 0.6)
        elif growth.co_occurs:
            score = max(score, 0.35)
    elif any(snapshot.values()):
        evidence.append(
            f"conntrack -S: insert_failed={snapshot.get('insert_failed', 0)}, "
            f"drop={snapshot.get('drop', 0)} since the node booted: one snapshot cannot "
            "tell whether they grew during the failures"
        )
    node = _node_concentration(ctx, s)
    if node:
        evidence.append(
            f"node {node.node} has {node.failure_share:.0%} of failures with "
            f"{node.traffic_share:.0%} of traffic (binomial p = {node.p_value:.3g})"
        )
        score = max(score, 0.45 + 0.3 * node.failure_share)
    collect: list[str] = []
    if not relevant and not growth and failures.size >= s.min_failures:
        collect.append(
            "to rule infrastructure in or out: `dmesg -T` (or `journalctl -k`) from the "
            "nodes of the failing clients, and `conntrack -S` twice, before and after "
            "failures (`date -u; conntrack -S` in a loop)"
        )
    evidence.extend(manifest_notes)
    details = InfraDetails(
        conntrack_full_lines=len(drops),
        suppressed_messages=suppressed,
        lines_far_from_requests=len(stale),
        conntrack_counters=tuple(CounterValue(ConntrackCounter(k), v) for k, v in snapshot.items()),
        kernel_alignment=fit,
        counter_growth=growth,
        node_concentration=node,
    )
    return Assessment(
        Cause.INFRA,
        round(min(score, 0.95), 3),
        tuple(evidence) or ("no kernel, node or conntrack evidence",),
        steps(FIXES) if score >= 0.3 else (),
        details,
        tuple(collect),
    )


def _node_concentration(ctx: Context, s: Settings) -> NodeConcentration | None:
    rows = ctx.frame.filter((pl.col("role") != "error_log") & pl.col("node").is_not_null())
    if rows.height == 0:
        return None
    per = rows.group_by("node").agg(pl.len().alias("n"), pl.col("failed").sum().alias("k"))
    k_total, n_total = int(per.get_column("k").sum()), int(per.get_column("n").sum())
    if per.height < 2 or k_total < s.min_failures:
        return None
    top = per.sort("k", descending=True).row(0, named=True)
    failure_share, traffic_share = top["k"] / k_total, top["n"] / n_total
    p = min(1.0, binom_greater(int(top["k"]), k_total, traffic_share) * per.height)
    if failure_share >= 0.8 and traffic_share <= 0.6 and p < s.alpha:
        return NodeConcentration(
            node=str(top["node"]),
            failure_share=round(failure_share, 3),
            traffic_share=round(traffic_share, 3),
            p_value=float(f"{p:.3g}"),
        )
    return None
