"""Infrastructure: conntrack exhaustion, SNAT, and failures tied to one node."""

from __future__ import annotations

import numpy as np
import polars as pl

from svcdoctor.diagnose.context import Context, Settings
from svcdoctor.diagnose.stats import binom_greater, count_in, count_in_many, placement_test
from svcdoctor.model import Assessment, Cause


def assess_infra(
    ctx: Context, s: Settings, manifest_notes: list[str], other_scores: list[float]
) -> Assessment:
    drops = [e for e in ctx.evidence.kernel if e.kind == "conntrack_full"]
    aligned = np.array(sorted(e.ts for e in drops if e.aligned and e.ts is not None))
    counters = {e.kind: e.count for e in ctx.evidence.kernel if e.ts is None}
    evidence: list[str] = []
    messages = sum(e.count for e in drops)
    details: dict[str, object] = {
        "conntrack_full_messages": messages,
        "conntrack_counters": counters,
    }
    score = 0.05
    failures = ctx.failure_ts
    if aligned.size and failures.size:
        near = count_in(failures, aligned - 2, aligned + 2)
        p = placement_test(
            lambda a: count_in_many(failures, a - 2, a + 2), aligned, ctx.span, s.rounds
        )
        details.update({"failures_near_conntrack_drops": near, "p_value": round(p, 4)})
        evidence.append(
            f"{messages} 'nf_conntrack: table full, "
            f"dropping packet' messages; {near} failures within 2 s of them "
            f"(permutation p = {p:.3g})"
        )
        if p < s.permutation_alpha and near >= s.min_failures:
            score = 0.5 + 0.45 * min(1.0, near / failures.size)
        else:
            score = 0.35
    elif drops:
        evidence.append(
            f"{sum(e.count for e in drops)} conntrack 'table full' messages, but "
            "their times are seconds since boot and cannot be aligned"
        )
        score = 0.35
    if counters.get("insert_failed") or counters.get("drop"):
        evidence.append(
            f"conntrack -S: insert_failed={counters.get('insert_failed', 0)}, "
            f"drop={counters.get('drop', 0)}"
        )
        score = max(score, 0.35)
    node_share = _node_concentration(ctx, s)
    if node_share:
        details["node_concentration"] = node_share
        evidence.append(
            f"node {node_share['node']} has {node_share['failure_share']:.0%} of "
            f"failures with {node_share['traffic_share']:.0%} of traffic"
        )
        score = max(score, 0.4)
    collect: list[str] = []
    if not ctx.evidence.kernel:
        collect.append(
            "collect `dmesg -T` (or `journalctl -k`) and `conntrack -S` from the "
            "nodes of the failing clients"
        )
        if failures.size >= s.min_failures and max(other_scores, default=0) < 0.3:
            evidence.append(
                "failures are spread evenly over backends and time, the "
                "signature infrastructure drops share"
            )
            score = max(score, 0.3)
    fixes = []
    if score >= 0.3:
        fixes = [
            "raise nf_conntrack_max (kube-proxy --conntrack-max-per-core) on the busy "
            "nodes and check `conntrack -S` insert_failed",
            "for high fan-out egress, spread SNAT over more source ports/IPs",
            "for NodePort/LoadBalancer Services consider externalTrafficPolicy: Local",
        ]
    evidence.extend(manifest_notes)
    return Assessment(
        Cause.INFRA,
        round(score, 3),
        tuple(evidence) or ("no kernel, node or conntrack evidence",),
        tuple(fixes),
        details,
        tuple(collect),
    )


def _node_concentration(ctx: Context, s: Settings) -> dict[str, object] | None:
    rows = ctx.frame.filter((pl.col("role") != "error_log") & pl.col("node").is_not_null())
    if rows.height == 0:
        return None
    per = rows.group_by("node").agg(pl.len().alias("n"), pl.col("failed").sum().alias("k"))
    k_total, n_total = int(per.get_column("k").sum()), int(per.get_column("n").sum())
    if per.height < 2 or k_total < 5:
        return None
    top = per.sort("k", descending=True).row(0, named=True)
    failure_share, traffic_share = top["k"] / k_total, top["n"] / n_total
    p = binom_greater(int(top["k"]), k_total, traffic_share)
    if failure_share >= 0.8 and traffic_share <= 0.6 and p < s.alpha:
        return {
            "node": top["node"],
            "failure_share": round(failure_share, 3),
            "traffic_share": round(traffic_share, 3),
        }
    return None
