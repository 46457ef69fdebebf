"""Causes need their own evidence: background noise names none, weak but provable signals
are found (a pod failing 3 % beside pods failing 0 %, keep-alive gaps without connection
ids, a dense kernel burst in a short window), and one proxy log is diagnosed per Service."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import polars as pl
import pytest

from svcdoctor.diagnose import diagnose
from svcdoctor.diagnose.upstreams import UnknownService
from svcdoctor.evidence.requests import conform
from svcdoctor.model import Cause, Diagnosis, Evidence, KernelEvent, Outcome, SourceSummary, Verdict
from svcdoctor.model.diagnosis import BackendDetails, ConntrackCounter, InfraDetails, ReuseDetails

T0 = 1_796_205_600.0


def frame(rng: np.random.Generator, n: int, duration: float, pods: int = 8) -> dict[str, object]:
    ts = np.sort(rng.uniform(0, duration, n))
    return {
        "ts": T0 + ts,
        "outcome": np.full(n, "ok", dtype=object),
        "latency_ms": rng.gamma(2.0, 10.0, n),
        "client": rng.integers(0, 40, n).astype(str),
        "backend": np.array([f"10.0.0.{i + 10}:8080" for i in range(pods)])[
            rng.integers(0, pods, n)
        ],
    }


def evidence(columns: dict[str, object], fmt: str = "csv", **more: object) -> Evidence:
    data = {k: list(v) if isinstance(v, np.ndarray) else v for k, v in columns.items()}
    requests = conform(pl.DataFrame(data).lazy(), "requests.csv").collect().sort("ts")
    ts = requests.get_column("ts")
    source = SourceSummary("requests.csv", fmt, requests.height, ts.min(), ts.max())  # type: ignore[arg-type]
    return Evidence(requests=requests, sources=(source,), **more)  # type: ignore[arg-type]


def score(d: Diagnosis, cause: Cause) -> float:
    return next(a.score for a in d.causes if a.cause is cause)


def test_a_handful_of_random_504s_is_background_not_a_cause() -> None:
    rng = np.random.default_rng(1)
    cols = frame(rng, 275_125, 3600)
    outcome = cols["outcome"]
    assert isinstance(outcome, np.ndarray)
    outcome[rng.choice(outcome.size, 9, replace=False)] = "timeout"
    d = diagnose(evidence(cols))
    assert d.primary is None, [(a.cause, a.score, a.evidence) for a in d.causes]
    assert d.next_steps[0].startswith("no cause: 9 background failures in 275125 requests")
    assert "95 % CI" in d.next_steps[0]
    assert score(d, Cause.INFRA) < 0.3


def test_a_pod_failing_3_percent_beside_pods_failing_none_is_found_with_its_interval() -> None:
    rng = np.random.default_rng(2)
    cols = frame(rng, 12_511, 600)
    backend, outcome = cols["backend"], cols["outcome"]
    assert isinstance(backend, np.ndarray)
    assert isinstance(outcome, np.ndarray)
    bad = np.flatnonzero(backend == "10.0.0.13:8080")
    outcome[rng.choice(bad, int(0.03 * bad.size), replace=False)] = "http_error"
    d = diagnose(evidence(cols))
    assert d.primary is not None
    assert d.primary.cause is Cause.BACKEND
    assert isinstance(d.primary.details, BackendDetails)
    (suspect,) = d.primary.details.suspects
    assert suspect.backend == "10.0.0.13:8080"
    low, high = suspect.failure_rate_ci95
    assert low < 0.03 < high
    assert suspect.rate_ratio_ci95[0] > 2


def test_random_failures_make_no_backend_suspect() -> None:
    rng = np.random.default_rng(3)
    cols = frame(rng, 50_000, 600)
    outcome = cols["outcome"]
    assert isinstance(outcome, np.ndarray)
    outcome[rng.random(outcome.size) < 0.004] = "reset"  # 0.4 %, every pod alike
    d = diagnose(evidence(cols))
    assert score(d, Cause.BACKEND) < 0.3
    assert score(d, Cause.INFRA) < 0.3  # spread evenly is the null, not infrastructure


def kernel(times: list[float], source: str = "dmesg.txt") -> tuple[KernelEvent, ...]:
    return tuple(KernelEvent(T0 + t, "conntrack_full", 1, source) for t in times)


def burst_failures(rng: np.random.Generator, cols: dict[str, object], lo: float, hi: float) -> None:
    ts, outcome = cols["ts"], cols["outcome"]
    assert isinstance(ts, np.ndarray)
    assert isinstance(outcome, np.ndarray)
    inside = (ts >= T0 + lo) & (ts <= T0 + hi)
    outcome[inside & (rng.random(ts.size) < 0.3)] = "timeout"


def test_a_dense_kernel_burst_over_most_failures_in_a_short_window_is_infra() -> None:
    rng = np.random.default_rng(4)
    cols = frame(rng, 3000, 60)
    burst_failures(rng, cols, 20, 32)
    lines = list(np.arange(20, 32, 0.05))  # hundreds of lines: one burst
    d = diagnose(evidence(cols, kernel=kernel(lines)))
    assert d.primary is not None
    assert d.primary.cause is Cause.INFRA
    assert isinstance(d.primary.details, InfraDetails)
    fit = d.primary.details.kernel_alignment
    assert fit is not None
    assert fit.bursts == 1
    assert fit.aligned


def test_kernel_lines_from_days_before_and_one_insert_failed_do_not_raise_infra() -> None:
    rng = np.random.default_rng(5)
    cols = frame(rng, 20_000, 600)
    outcome = cols["outcome"]
    assert isinstance(outcome, np.ndarray)
    outcome[rng.random(outcome.size) < 0.002] = "timeout"
    old = kernel([-3 * 86400 + x for x in range(50)])
    counters = (KernelEvent(None, "insert_failed", 1, "conntrack-S.txt"),)
    d = diagnose(evidence(cols, kernel=old + counters))
    infra = next(a for a in d.causes if a.cause is Cause.INFRA)
    assert infra.score < 0.3
    assert any("far from the requests" in e for e in infra.evidence)
    assert any("one snapshot cannot tell" in e for e in infra.evidence)


def test_conntrack_counters_growing_while_requests_fail_point_at_infra() -> None:
    rng = np.random.default_rng(6)
    cols = frame(rng, 30_000, 600)
    burst_failures(rng, cols, 300, 360)
    snaps = tuple(
        KernelEvent(T0 + t, "insert_failed", c, "conntrack-S.txt")
        for t, c in [(0, 10), (120, 10), (240, 10), (300, 10), (360, 900), (480, 900), (600, 900)]
    )
    d = diagnose(evidence(cols, kernel=snaps))
    assert d.primary is not None
    assert d.primary.cause is Cause.INFRA
    assert isinstance(d.primary.details, InfraDetails)
    growth = d.primary.details.counter_growth
    assert growth is not None
    assert growth.of(ConntrackCounter.INSERT_FAILED) == 890


def keepalive_traffic(seed: int, server_idle: float) -> dict[str, object]:
    """Low traffic through ingress-nginx (60 s keep-alive) to pods closing idle connections
    after ``server_idle`` s: the first request after a longer gap meets a closed socket."""
    rng = np.random.default_rng(seed)
    cols = frame(rng, 4000, 3600, pods=4)
    ts, backend, outcome = cols["ts"], cols["backend"], cols["outcome"]
    assert isinstance(ts, np.ndarray)
    assert isinstance(backend, np.ndarray)
    assert isinstance(outcome, np.ndarray)
    for b in np.unique(backend):
        idx = np.flatnonzero(backend == b)
        gaps = np.diff(ts[idx], prepend=-np.inf)
        hit = idx[(gaps > server_idle) & (gaps < 60) & (rng.random(idx.size) < 0.5)]
        outcome[hit] = "eof"
    cols["detail"] = np.where(
        outcome == "eof", "upstream prematurely closed connection while reading response", None
    )
    return cols


def test_keepalive_mismatch_is_found_without_connection_ids_and_fixed_with_numbers() -> None:
    d = diagnose(evidence(keepalive_traffic(7, 5.0), fmt="nginx-access"))
    assert d.primary is not None
    assert d.primary.cause is Cause.REUSE, [(a.cause, a.score, a.evidence) for a in d.causes]
    assert isinstance(d.primary.details, ReuseDetails)
    gaps = d.primary.details.idle_gaps
    assert gaps is not None
    assert 4.0 <= gaps.server_idle_seconds <= 6.0
    fix = d.primary.fixes[0].text
    assert "ingress-nginx" in fix
    assert "60 s" in fix
    assert "keepAliveTimeout = 65000" in fix


def test_one_ingress_log_is_diagnosed_per_service() -> None:
    rng = np.random.default_rng(8)
    cols = frame(rng, 40_000, 600)
    upstream = np.array(["shop-web-80", "shop-cart-8080", "shop-api-80", "auth-login-80"])
    cols["upstream"] = upstream[rng.integers(0, 4, 40_000)]
    outcome = cols["outcome"]
    assert isinstance(outcome, np.ndarray)
    # each Service its own pods; one pod of shop-api fails 5 %
    backend = np.char.add(np.char.add(cols["upstream"], "/"), np.asarray(cols["backend"]))
    cols["backend"] = backend
    bad = np.flatnonzero(backend == "shop-api-80/10.0.0.12:8080")
    outcome[rng.choice(bad, int(0.05 * bad.size), replace=False)] = "http_error"
    d = diagnose(evidence(cols, fmt="nginx-access"))
    assert d.service == "shop-api-80"
    assert d.primary is not None
    assert d.primary.cause is Cause.BACKEND
    assert d.summary.requests < 12_000  # the other Services do not dilute it
    assert d.others == ()
    assert d.summary.upstreams is not None
    assert d.summary.upstreams[0].upstream == "shop-api-80"
    assert d.summary.upstreams[0].cause is Cause.BACKEND
    picked = diagnose(evidence(cols, fmt="nginx-access"), service="shop/cart")
    assert picked.service == "shop/cart"
    assert picked.primary is None
    with pytest.raises(UnknownService, match="no such upstream"):
        diagnose(evidence(cols, fmt="nginx-access"), service="shop/nope")


def test_client_aborts_are_not_failures() -> None:
    rng = np.random.default_rng(9)
    cols = frame(rng, 10_000, 600)
    outcome = cols["outcome"]
    assert isinstance(outcome, np.ndarray)
    outcome[rng.random(outcome.size) < 0.05] = "aborted"
    d = diagnose(evidence(cols))
    assert d.summary.errors == 0
    assert d.summary.outcome_count(Outcome.ABORTED) > 300
    assert all(a.verdict is Verdict.UNLIKELY for a in d.causes)


def test_request_logs_and_events_that_do_not_overlap_are_flagged_first() -> None:
    from svcdoctor.model import EventKind, LifecycleEvent

    rng = np.random.default_rng(10)
    cols = frame(rng, 5000, 600)
    # zone-less local times read as UTC: the events sit two hours away from the requests
    events = tuple(
        LifecycleEvent(T0 + 7200 + 60 * i, EventKind.DELETE, f"api-{i}", "events.json")
        for i in range(4)
    )
    base = evidence(cols)
    kube = SourceSummary("events.json", "kubectl-json", 4, T0 + 7200, T0 + 7380)
    d = diagnose(Evidence(base.requests, events=events, sources=(*base.sources, kube)))
    (warning,) = d.summary.warnings
    assert "4 of 4 pod deletions" in warning
    assert "--clock-offset" in warning
    shifted = tuple(replace(e, ts=e.ts - 7200) for e in events)
    aligned = Evidence(base.requests, events=shifted, sources=(*base.sources, kube))
    assert diagnose(aligned).summary.warnings == ()
