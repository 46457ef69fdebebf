"""``diagnose --prometheus``: the four causes from a metrics store's aggregated series.

The same questions as the file-based analyses, asked of per-step counts instead of
requests (``metrics_history`` pulls them): do failures concentrate in the steps after pod
deletions (race: ``metrics_race``); does one pod fail more than the others away from
deletions (backend; ``backend.outlier``); are the failures away from rollouts the upstream
closing kept-alive connections (reuse; Envoy's UC/URX flags); do they fall in the steps a
node's conntrack table drops connections or is nearly full (infra). The result is a
``Diagnosis`` of the same shape and verdict words as the file-based one, plus its rollouts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from svcdoctor.diagnose.backend import outlier, suspect_of, too_few
from svcdoctor.diagnose.context import Settings, untestable
from svcdoctor.diagnose.metrics_history import (
    CONNTRACK,
    DECIDES,
    LIFECYCLE,
    PROGRAMMING,
    Counts,
    Grid,
    History,
    MetricsSource,
    NoRequestSeries,
    ServiceRef,
    choose_step,
    fetch,
    parse_service,
    request_sources,
    services,
)
from svcdoctor.diagnose.metrics_race import Near, assess_race, near_masks, whole
from svcdoctor.diagnose.quantify import nearest_fraction
from svcdoctor.diagnose.rank import next_steps, ranked, strongest
from svcdoctor.diagnose.stats import Floats, binom_greater, proportion_ci
from svcdoctor.model import Assessment, Cause, Diagnosis, EventKind, Outcome
from svcdoctor.model.diagnosis import (
    BackendDetails,
    ClosedByUpstream,
    ConntrackCounter,
    CounterGrowth,
    CounterValue,
    InfraDetails,
    OutcomeCount,
    ReuseDetails,
    Summary,
    Timeline,
    TimelineEvent,
    steps,
)
from svcdoctor.model.evidence import SourceSummary

__all__ = ["MetricsSource", "NoRequestSeries", "analyse", "diagnose_prometheus"]

FULL_TABLE = 0.9  # a conntrack table this full drops new connections on bursts


def diagnose_prometheus(
    client: MetricsSource,
    service: str | None,
    start: float,
    end: float,
    settings: Settings | None = None,
    step: float | None = None,
) -> Diagnosis:
    """Diagnose ``service`` (``NS/NAME``), or every Service with request series in the range
    (the strongest cause leads; the other Services with a cause are ``others``)."""
    if end <= start:
        raise NoRequestSeries("the range is empty: --start must be before --end")
    s = settings or Settings()
    found = client.series_names(start, end)
    sources = request_sources(found)
    grid = Grid(start, end, step or choose_step(start, end))
    if service is not None:
        # the Service's requests from the first counter that has any (a Service behind
        # both an ingress and a mesh is counted by both: Istio's names pods and flags)
        for source in sources:
            one = analyse(fetch(client, parse_service(service, source), grid, found), s)
            if one.summary.requests:
                return one
        names = " or ".join(x.value for x in sources)
        raise NoRequestSeries(f"no requests of Service {service} in {names} in the range")
    refs: dict[str, ServiceRef] = {}
    for source in sources:
        for ref in services(client, source, grid):
            refs.setdefault(ref.key, ref)
    if not refs:
        names = " or ".join(x.value for x in sources)
        raise NoRequestSeries(f"no Service has {names} series in the range")
    each = [analyse(fetch(client, ref, grid, found), s) for ref in refs.values()]
    if len(each) == 1:
        return each[0]
    return strongest(each)


# --- backend -------------------------------------------------------------------------------


def assess_backend(h: History, dels: Floats, s: Settings) -> Assessment:
    """Per pod, away from deletions: one that fails more than the others (``outlier``)."""
    if not h.per_pod:
        return untestable(
            Cause.BACKEND,
            f"{h.source.value} has no pod label: failures cannot be attributed to pods",
            "add destination_pod to istio_requests_total (Telemetry API tag override "
            "from the upstream peer's name) or give per-request logs with the upstream",
            "curl each pod IP directly in a loop and compare",
        )
    away = near_masks(h.pods_grid, dels, s).away
    rows = sorted(
        (pod, whole(c.requests[away].sum()), whole(c.failures[away].sum()))
        for pod, c in h.per_pod.items()
    )
    rows = [r for r in rows if r[1] > 0]
    total_n, total_k = sum(r[1] for r in rows), sum(r[2] for r in rows)
    if len(rows) < 2 or total_k < s.min_failures:
        return too_few(total_k, len(rows), "pods")
    suspects = []
    for pod, n, k in rows:
        found = outlier(n, k, total_n, total_k, len(rows), s)
        if found is None:
            continue
        suspects.append(suspect_of(found, pod, n, k, pod))
    explained = sum(x.failures for x in suspects) / total_k
    evidence, fixes = [], []
    if suspects:
        score = 0.5 + 0.45 * explained
        for x in suspects:
            low, high = x.failure_rate_ci95
            evidence.append(
                f"{x.pod} failed {x.failures} of {x.requests} requests ({x.failure_rate:.2%}, "
                f"95 % CI {low:.2%}-{high:.2%}) while the other pods failed "
                f"{x.others_failure_rate:.3%}: at least {x.rate_ratio_ci95[0]:.3g}x their rate "
                f"(exact conditional test, p = {x.p_value:.3g} over {len(rows)} pods, Bonferroni)"
            )
        evidence.append(
            f"the suspects account for {explained:.0%} of failures away from deletions, "
            f"spread over {len(rows)} pods in total"
        )
        names = ", ".join(x.backend for x in suspects)
        fixes.append(
            f"take {names} out of the Service now (delete the pod or remove its label) and "
            "find why it fails: connection pool, wedged workers, config"
        )
        fixes.append(
            "make the readinessProbe exercise what a request needs (an httpGet endpoint "
            "served by the request workers) so a bad pod leaves the Service"
        )
    else:
        score = 0.1
        evidence.append(
            f"no pod fails more than the others ({len(rows)} pods, {total_k} failures away "
            "from deletions)"
        )
    return Assessment(
        Cause.BACKEND,
        round(score, 3),
        tuple(evidence),
        steps(fixes),
        BackendDetails(len(rows), tuple(suspects), round(explained, 3)),
    )


# --- reuse ---------------------------------------------------------------------------------


def assess_reuse(h: History, counts: Counts, near: Near, s: Settings) -> Assessment:
    """Failures away from rollouts that Envoy flags as the upstream closing the connection
    (UC) or retries exhausted on such closes (URX): kept-alive connections outliving the
    upstream's idle timeout."""
    closed = counts.closed
    if closed is None:
        return untestable(
            Cause.REUSE,
            f"{h.source.value} has no response flags: idle-connection closes cannot be "
            "told from other failures",
            "give the proxy's access log (Envoy %RESPONSE_FLAGS%, nginx $upstream_status) "
            "or Istio's istio_requests_total with response_flags",
        )
    away = near.away
    closed_away = whole(closed[away].sum())
    closed_total = whole(closed.sum())
    failures_away = whole(counts.failures[away].sum())
    share = closed_away / failures_away if failures_away else 0.0
    away_share = closed_away / closed_total if closed_total else 0.0
    pods = len(h.per_pod)
    details = ReuseDetails(
        reused_failure_share=round(share, 3),
        closed_by_upstream=ClosedByUpstream(
            closed_failures=closed_total,
            share_of_failures=round(closed_total / max(int(counts.failures.sum()), 1), 3),
            near_deletions=closed_total - closed_away,
            backends=pods,
            backends_serving=pods,
            spread=pods != 1,
            away_from_deletions=away_share >= 0.5,
        ),
    )
    evidence = [
        f"{closed_away} of {failures_away} failures away from deletions carry Envoy's "
        f"UC/URX flags (the upstream closed a kept-alive connection); {closed_total - closed_away} "
        "more near deletions"
    ]
    fixes: list[str] = []
    if closed_away >= s.min_failures and share >= 0.5 and away_share >= 0.5:
        score = 0.5 + 0.45 * share
    elif closed_away >= s.min_failures and share >= 0.2:
        score = 0.35
    else:
        score = 0.05
    if score >= 0.3:
        fixes.append(
            "make the app's keep-alive idle timeout longer than the proxy's (or set the "
            "DestinationRule trafficPolicy.connectionPool.http.idleTimeout below the app's), "
            "so the proxy closes idle connections first"
        )
        fixes.append(
            "let the mesh retry idempotent requests on reset (retryOn: reset,connect-failure)"
        )
    return Assessment(Cause.REUSE, round(score, 3), tuple(evidence), steps(fixes), details)


# --- infra ---------------------------------------------------------------------------------


def drop_correlation(failures: Floats, drops: Floats) -> tuple[float, float]:
    """Pearson's r between failures and conntrack drops per step, with its one-sided
    p-value (t distribution): the test when a table is under pressure all the time, so
    the steps of pressure carry all the traffic and cannot be compared with others."""
    n = failures.size
    if n < 4 or failures.std() == 0 or drops.std() == 0:
        return 0.0, 1.0
    from scipy.special import stdtr

    r = float(np.corrcoef(failures, drops)[0, 1])
    t = r * math.sqrt((n - 2) / max(1e-12, 1 - r * r))
    return r, float(stdtr(n - 2, -t))


def assess_infra(h: History, counts: Counts, near: Near, s: Settings) -> Assessment:
    """Failures away from deletions in the steps when a node's conntrack table failed
    inserts, dropped, or was nearly full, against those steps' share of traffic; when the
    pressure never lets up, the failures per step against the drops per step."""
    ct = h.conntrack
    if ct is None:
        return untestable(
            Cause.INFRA,
            "no conntrack series (node-exporter): infrastructure cannot be tested",
            "scrape node-exporter's conntrack collector (node_nf_conntrack_stat_insert_"
            "failed, node_nf_conntrack_entries, _limit) or give `dmesg` of the nodes",
        )
    grew: Floats = ct.insert_failed + ct.drop
    full = ct.fill >= FULL_TABLE if ct.fill is not None else np.zeros(h.grid.n, dtype=bool)
    pressure = (grew > 0) | full
    away = near.away
    k, n = counts.failures, counts.requests
    k_all, n_all = whole(k[away].sum()), float(n[away].sum())
    k_in = whole(k[away & pressure].sum())
    share = float(n[away & pressure].sum()) / n_all if n_all else 0.0
    p = binom_greater(k_in, k_all, share) if share > 0 else 1.0
    r, p_r = drop_correlation(k[away], grew[away])
    by_time = p < s.alpha and k_in >= s.min_failures
    by_count = p_r < s.alpha and r >= 0.5 and k_in >= s.min_failures
    aligned = by_time or by_count
    counters = (
        CounterValue(ConntrackCounter.INSERT_FAILED, whole(ct.insert_failed.sum())),
        CounterValue(ConntrackCounter.DROP, whole(ct.drop.sum())),
    )
    growth = CounterGrowth(
        growth=counters,
        failures_while_growing=k_in,
        failures_covered=k_all,
        growing_traffic_share=round(share, 4),
        p_value=float(f"{min(p, p_r) if by_count else p:.3g}"),
        aligned=aligned,
        co_occurs=bool(pressure.any()),
    )
    details = InfraDetails(0, 0, 0, counters, counter_growth=growth)
    worst = max(ct.nodes, key=lambda x: (x.insert_failed + x.drop, x.fill or 0.0), default=None)
    fills = [x.fill for x in ct.nodes if x.fill is not None]
    fullest = max(fills, default=None)
    table = f", tables at most {fullest:.0%} full" if fullest is not None else ""
    if not pressure.any():
        evidence = [
            f"no conntrack pressure on {len(ct.nodes)} nodes: no insert failures or drops" + table
        ]
    else:
        hot = [x for x in ct.nodes if x.insert_failed + x.drop > 0]
        most = (
            f", most {worst.node}: {worst.insert_failed + worst.drop} insert failures and "
            "drops" + (f", its table up to {worst.fill:.0%} full" if worst.fill else "")
            if worst is not None and hot
            else ""
        )
        evidence = [
            f"{k_in} of {k_all} failures away from deletions fall in the steps of conntrack "
            f"pressure ({share:.1%} of the traffic; binomial p = {p:.3g}); per step, failures "
            f"follow the drops with r = {r:.2f} (p = {p_r:.3g}); {len(hot)} of "
            f"{len(ct.nodes)} nodes dropped{most}"
        ]
    node = worst.node if worst is not None else "the nodes"
    fixes: list[str] = []
    if aligned:
        explained = (k_in - k_all * share) / k_all if by_time and k_all else max(r, 0.0)
        score = 0.5 + 0.45 * max(0.0, min(1.0, explained))
        fixes.append(
            f"raise net.netfilter.nf_conntrack_max on {node} (kube-proxy "
            "--conntrack-max-per-core / --conntrack-min) and find what fills it "
            "(`conntrack -S`, short-lived connections, SNAT)"
        )
    elif pressure.any():
        score = 0.2
    else:
        score = 0.05
    return Assessment(Cause.INFRA, round(score, 3), tuple(evidence), steps(fixes), details)


# --- one Service ---------------------------------------------------------------------------


def _replicas(h: History) -> int | None:
    """The median number of the workloads' pods alive over the range."""
    made = [p for p in h.pods if p.created is not None]
    if not made:
        return len(h.per_pod) or None
    t = h.grid.t
    alive = np.zeros(t.size)
    for p in made:
        alive += (t >= (p.created or 0.0)) & (t < (p.deleted or np.inf))
    count = int(np.median(alive))
    return count or None


def _without(counts: Counts, pods: Sequence[Counts]) -> Counts:
    """The Service's counts minus those of pods already explained (bad backends)."""
    if not pods:
        return counts
    return Counts(
        np.clip(counts.requests - sum(p.requests for p in pods), 0, None),
        np.clip(counts.failures - sum(p.failures for p in pods), 0, None),
        counts.closed,
    )


def _sources(h: History) -> tuple[tuple[SourceSummary, ...], tuple[str, ...]]:
    """The metrics read (``rows``: what each gave: steps, pods or nodes) and, for each
    missing one, what it would have decided."""
    nodes = len(h.conntrack.nodes) if h.conntrack else 0
    what: dict[str, tuple[int, str]] = {
        h.source.value: (
            h.grid.n,
            f"steps of {h.grid.step:g} s"
            + (f"; {len(h.per_pod)} pods by destination_pod" if h.per_pod else ""),
        ),
        "kube_pod_created": (sum(p.created is not None for p in h.pods), "pods"),
        "kube_pod_deletion_timestamp": (
            sum(p.deleted is not None for p in h.pods),
            "pods deleted (or gone between two scrapes)",
        ),
        "kube_pod_owner": (sum(p.replicaset is not None for p in h.pods), "pods with an owner"),
        "kube_replicaset_owner": (
            len({p.replicaset for p in h.pods if p.replicaset}),
            "ReplicaSets",
        ),
        "kube_pod_container_status_last_terminated_reason": (len(h.sigkilled), "pods ended Error"),
        PROGRAMMING: (int(h.programming_p99 is not None), "p99 over the range"),
    }
    wanted = [h.source.value, *LIFECYCLE, *CONNTRACK, PROGRAMMING]
    read = tuple(
        SourceSummary(
            path=name,
            format="prometheus",
            rows=what.get(name, (nodes, ""))[0],
            start=h.grid.start,
            end=h.grid.end,
            note=what.get(name, (nodes, "nodes"))[1],
        )
        for name in wanted
        if name in h.found
    )
    missing = tuple(
        f"metric {name} not found: it would have decided {DECIDES[name]}"
        for name in wanted
        if name not in h.found
    )
    return read, missing


def analyse(h: History, settings: Settings | None = None) -> Diagnosis:
    """The differential diagnosis of one Service's history (pure)."""
    s = settings or Settings()
    late = h.deletion_lateness
    late_note: tuple[str, ...] = ()
    if late:  # a deletion known only to a scrape: its failures may come that much later
        # the test window grows by it; the steps away from deletions (the baseline, and the
        # backend test's) shrink only when the test window outgrows the longest lag
        window = s.test_window + late
        s = replace(s, test_window=window, max_lag=max(s.max_lag, window))
        late_note = (
            f"pod deletions are known to a scrape ({late:.3g} s): each is placed at the earliest "
            "it can have been (kube_pod_deletion_timestamp holds when the grace period ends, "
            "so a deletion is at most one scrape before that series' first sample, or where "
            f"the pod's series end); the race's test window is {late:.3g} s longer for it",
        )
    dels = np.sort(
        np.array(
            [
                p.deleted
                for p in h.pods
                if p.deleted is not None and h.grid.start - s.max_lag <= p.deleted <= h.grid.end
            ],
            dtype=np.float64,
        )
    )
    near = near_masks(h.grid, dels, s)
    backend = assess_backend(h, dels, s)
    found = backend.details.suspects if isinstance(backend.details, BackendDetails) else ()
    # the suspects' failures are theirs, not the race's (when their steps are the same)
    same = h.pods_grid == h.grid
    rest = _without(h.counts, [h.per_pod[x.backend] for x in found] if same else [])
    race, rollouts = assess_race(h, rest, dels, near, s)
    reuse = assess_reuse(h, h.counts, near, s)
    infra = assess_infra(h, rest, near, s)
    n, k = whole(h.counts.requests.sum()), whole(h.counts.failures.sum())
    causes = ranked((race, backend, reuse, infra), n, k, none_failed=k == 0 and n > 0, s=s)
    replicas = _replicas(h)
    read, missing = _sources(h)
    summary = Summary(
        requests=n,
        errors=k,
        error_rate=k / n if n else None,
        error_rate_ci95=proportion_ci(k, n) if n else None,
        by_outcome=(OutcomeCount(Outcome.HTTP_ERROR, k),) if k else (),
        masked_by_retries=0,
        masked_by_outcome=(),
        error_log_failures=0,
        error_log_hosts=(),
        start=h.grid.start,
        end=h.grid.end,
        duration_seconds=round(h.grid.end - h.grid.start, 3),
        replicas=replicas,
        nearest_fraction=nearest_fraction(k, n, replicas),
        deletions=int(dels.size),
        sources=read,
        warnings=(*h.warnings, *missing, *late_note),
        floor_rate=s.floor_rate,
    )
    steps = next_steps(causes, summary, s)
    events = tuple(
        TimelineEvent(p.deleted, EventKind.DELETE, p.pod)
        for p in sorted(h.pods, key=lambda p: p.deleted or 0.0)
        if p.deleted is not None and h.grid.start <= p.deleted <= h.grid.end
    )
    return Diagnosis(
        summary,
        tuple(causes),
        steps,
        Timeline(
            second=tuple((h.grid.t - h.grid.step).tolist()),
            requests=tuple(np.rint(h.counts.requests).astype(np.int64).tolist()),
            failures=tuple(np.rint(h.counts.failures).astype(np.int64).tolist()),
            events=events,
            step=h.grid.step,
        ),
        h.service,
        rollouts=rollouts,
    )
