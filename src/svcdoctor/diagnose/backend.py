"""Step 3: one backend that fails while the Service keeps sending it traffic."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from svcdoctor.diagnose.context import Context, Settings, untestable
from svcdoctor.diagnose.stats import binom_greater, merged, proportion_ci
from svcdoctor.model import Assessment, Cause, Inventory, PodInfo, selector_matches
from svcdoctor.model.diagnosis import BackendDetails, Suspect, steps


def steady_counts(ctx: Context, s: Settings) -> pl.DataFrame:
    """Requests (``n``) and failures (``k``) per backend away from pod deletions, where the
    race would pollute them. Counted as all rows minus the few near deletions, so ten
    million rows are never copied."""
    rows = ctx.frame.filter((pl.col("role") != "error_log") & pl.col("backend").is_not_null())

    def counts(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.group_by("backend").agg(pl.len().alias("n"), pl.col("failed").sum().alias("k"))

    total = counts(rows)
    dels = ctx.deletion_ts
    if dels.size == 0:
        return total.sort("backend")
    # rows are in start order: the rows near deletions are a few contiguous slices
    lo, hi = merged(dels - ctx.resolution - 0.5, dels + s.test_window)
    ts = rows.get_column("ts").to_numpy()
    first, last = np.searchsorted(ts, lo, "left"), np.searchsorted(ts, hi, "right")
    near = counts(
        pl.concat([rows.slice(int(a), int(b - a)) for a, b in zip(first, last, strict=True)])
    )
    return (
        total.join(near, on="backend", how="left", suffix="_near")
        .select(
            "backend",
            (pl.col("n") - pl.col("n_near").fill_null(0)).alias("n"),
            (pl.col("k") - pl.col("k_near").fill_null(0)).alias("k"),
        )
        .filter(pl.col("n") > 0)
        .sort("backend")
    )


def _readiness_of(inventory: Inventory | None, pod: PodInfo | None) -> str | None:
    """The readiness probe the pod's workload declares, as a short description."""
    if inventory is None or pod is None:
        return None
    for w in inventory.workloads:
        same_labels = bool(w.template.labels) and selector_matches(w.template.labels, pod.labels)
        if same_labels or pod.name.startswith(f"{w.ref.name}-"):
            probes = [c.readiness for c in w.template.containers]
            if not any(probes):
                return f"{w.ref} has no readinessProbe"
            return "; ".join(f"{p.handler} {' '.join(p.target[1:]).strip()}" for p in probes if p)
    return None


def too_few(failures: int, groups: int, what: str) -> Assessment:
    """Too few failures away from deletions (or too few ``what``) to single one out."""
    return Assessment(
        Cause.BACKEND,
        0.05,
        evidence=(
            f"{failures} failures among {groups} {what} away from deletions: "
            "too few to single one out",
        ),
        details=BackendDetails(groups),
    )


def assess_backend(ctx: Context, s: Settings) -> Assessment:
    if not ctx.has_backend:
        return untestable(
            Cause.BACKEND,
            "no backend column: failures cannot be attributed to pods",
            "add a backend column (the pod IP:port that served each request: "
            "ingress-nginx $upstream_addr, Envoy %UPSTREAM_HOST%)",
            "curl each pod IP directly in a loop and compare",
        )
    per = steady_counts(ctx, s)
    total_n, total_k = int(per.get_column("n").sum()), int(per.get_column("k").sum())
    if per.height < 2 or total_k < s.min_failures:
        return too_few(total_k, per.height, "backends")
    suspects = tuple(
        x
        for backend, n, k in per.select("backend", "n", "k").iter_rows()
        if (x := _suspect(ctx, s, str(backend), int(n), int(k), total_n, total_k, per.height))
    )
    explained = sum(x.failures for x in suspects) / total_k
    evidence = []
    fixes = []
    if suspects:
        score = 0.5 + 0.45 * explained
        for x in suspects:
            who = f"{x.pod} ({x.ip})" if x.pod else x.backend
            low, high = x.failure_rate_ci95
            ratio = x.rate_ratio_ci95[0]
            evidence.append(
                f"{who} failed {x.failures} of {x.requests} requests "
                f"({x.failure_rate:.2%}, 95 % CI {low:.2%}-{high:.2%}) while the other "
                f"backends failed {x.others_failure_rate:.3%}: at least {ratio:.3g}x their "
                f"rate (exact conditional test, p = {x.p_value:.3g} over {per.height} "
                "backends, Bonferroni)"
            )
            if x.ready:
                probe = x.readiness_probe
                evidence.append(
                    f"{who} stayed Ready: readiness did not catch it"
                    + (
                        f" (readinessProbe: {probe}): the probe is shallower than the failure"
                        if probe
                        else ""
                    )
                )
        evidence.append(
            f"the suspects account for {explained:.0%} of failures away from "
            f"deletions, spread over {per.height} backends in total"
        )
        names = ", ".join(x.pod or x.backend for x in suspects)
        fixes.append(
            f"take {names} out of the Service now (delete the pod or remove its "
            "label) and find why it fails: connection pool, wedged workers, config"
        )
        fixes.append(
            "make the readinessProbe exercise what a request needs (an httpGet "
            "endpoint served by the request workers) so a bad pod leaves the Service"
        )
    else:
        score = 0.1
        evidence.append(
            f"no backend fails more than the others ({per.height} backends, "
            f"{total_k} failures away from deletions)"
        )
    return Assessment(
        Cause.BACKEND,
        round(score, 3),
        tuple(evidence),
        steps(fixes),
        BackendDetails(per.height, suspects, round(explained, 3)),
    )


@dataclass(frozen=True, slots=True)
class Outlier:
    """Why a group (a backend, a node's route) is singled out: the test's p-value
    (Bonferroni over the groups), the 95 % interval of the ratio of its failure rate to the
    others', and the others' failure rate."""

    p_value: float
    rate_ratio_ci95: tuple[float, float]
    others_failure_rate: float


def outlier(n: int, k: int, total_n: int, total_k: int, groups: int, s: Settings) -> Outlier | None:
    """The group of ``n`` requests and ``k`` failures, among ``total_n``/``total_k`` in
    ``groups`` groups, when it fails more than the others by more than chance (and by at
    least ``s.min_backend_ratio`` and ``s.min_backend_excess``), else None.

    Given all failures, the number in this group is Binomial(total failures, its traffic
    share) when every group fails alike: the exact conditional test of two Poisson rates,
    which stays exact when the other groups fail 0 times. Its interval, turned into the
    ratio of this group's rate to the others', is the effect reported; fewer than
    ``s.min_failures`` failures in all single out nothing. ``diagnose`` and
    ``probe`` single out bad backends (and ``probe`` bad nodes) with it."""
    rest_n, rest_k = total_n - n, total_k - k
    if k == 0 or rest_n == 0 or total_k < s.min_failures:
        return None
    p = min(1.0, binom_greater(k, total_k, n / total_n) * groups)
    rate, rest_rate = k / n, rest_k / rest_n
    low, high = proportion_ci(k, total_k)  # this group's share of the failures

    def ratio(pi: float) -> float:
        return math.inf if pi >= 1.0 else (pi / (1 - pi)) * (rest_n / n)

    if p >= s.alpha or ratio(low) < s.min_backend_ratio or rate - rest_rate < s.min_backend_excess:
        return None
    return Outlier(
        float(f"{p:.3g}"),
        (round(ratio(low), 3), round(min(ratio(high), 1e9), 3)),
        round(rest_rate, 6),
    )


def _suspect(
    ctx: Context, s: Settings, backend: str, n: int, k: int, total_n: int, total_k: int, pods: int
) -> Suspect | None:
    """The backend as a suspect when it is an :func:`outlier`, else None."""
    found = outlier(n, k, total_n, total_k, pods, s)
    if found is None:
        return None
    pod = ctx.pod_of(backend)
    return replace(
        suspect_of(found, backend, n, k, pod.name if pod else None),
        ip=(pod.ip if pod and pod.ip else backend.rsplit(":", 1)[0]),
        node=pod.node if pod else None,
        ready=_was_ready(ctx, pod, backend),
        readiness_probe=_readiness_of(ctx.evidence.inventory, pod),
    )


def suspect_of(found: Outlier, backend: str, n: int, k: int, pod: str | None) -> Suspect:
    """The backend :func:`outlier` singled out, with its ``k`` failures of ``n`` requests
    (the rate's 95 % interval) and the test's numbers; where it runs is the caller's."""
    low, high = proportion_ci(k, n)
    return Suspect(
        backend=backend,
        pod=pod,
        ip="",
        node=None,
        requests=n,
        failures=k,
        failure_rate=round(k / n, 5),
        failure_rate_ci95=(round(low, 5), round(high, 5)),
        others_failure_rate=found.others_failure_rate,
        rate_ratio_ci95=found.rate_ratio_ci95,
        p_value=found.p_value,
        ready=None,
        readiness_probe=None,
    )


def _was_ready(ctx: Context, pod: PodInfo | None, backend: str) -> bool | None:
    if pod is not None and pod.ready is not None:
        return pod.ready
    host = backend.rsplit(":", 1)[0]
    states = [c.ready for c in ctx.evidence.endpoints if c.address == host and not c.removed]
    return bool(states[-1]) if states else None
