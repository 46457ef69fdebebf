"""Simulated history as the metrics a cluster's Prometheus keeps: OpenMetrics text with
timestamps (what ``promtool tsdb create-blocks-from openmetrics`` backfills), in the real
exporters' names and labels, one sample per series and scrape, counters cumulative.

The history is ``rollouts`` simulated windows (:func:`simulate_run`, one rolling update
each) placed ``every`` seconds apart from :data:`EPOCH`, with steady traffic between them:
the pods of the last rollout serve the rate, a full conntrack table drops its share and an
upstream idle close fails its share, drawn per scrape (Poisson and binomial) rather than
per request. Every count agrees with the requests: the last sample of each request counter
summed over its series is the simulated total (:class:`MetricsTruth`).

Series written:

* requests, one source: ingress-nginx ``nginx_ingress_controller_requests`` (the
  simulated clients stand for the controller's upstream connections through the Service,
  as with ``service-upstream``; ``controller_pod`` is client mod ``ingress_replicas``), or
  Istio ``istio_requests_total{reporter="source"}`` with Envoy's ``response_flags``
  (``UF`` refused or unanswered connect, ``UH`` no endpoint, ``UC`` connection closed
  under the request, ``UT`` timeout, ``URX`` retries exhausted). ``destination_pod`` is
  not a label Istio exports by default (it takes a custom tag in the telemetry API), so it
  is written only with ``pod_label``; a deleted pod's series end five minutes after it
  exits, as with Istio's metric expiry;
* kube-state-metrics: ``kube_pod_created``, ``kube_pod_deletion_timestamp`` (the pod's
  ``metadata.deletionTimestamp``: the deletion plus its grace period),
  ``kube_pod_status_ready``, ``kube_pod_owner``, ``kube_replicaset_owner``,
  ``kube_pod_container_status_last_terminated_reason`` (while the pod object exists: a
  pod that exits at SIGTERM is gone within :data:`REMOVAL` seconds, so its deletion
  timestamp and exit reason are seen only when a scrape falls in between, as with a real
  kube-state-metrics; the end of its ``kube_pod_created`` series marks it too);
* kube-proxy: ``kubeproxy_network_programming_duration_seconds`` per node (a subset of its
  bucket boundaries), one observation per endpoint change of the Service;
* node-exporter: ``node_nf_conntrack_entries``, ``…_entries_limit``,
  ``…_stat_insert_failed``, ``…_stat_drop`` per node (each dropped SYN counted once).

Node series carry ``instance`` (host:port, as a scrape adds it) and ``node`` (as the usual
Kubernetes service-discovery relabelling adds it), so the two can be joined on ``node``.
"""

from __future__ import annotations

import hashlib
import math
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import TextIO

import numpy as np

from svcdoctor.model.scenario import ConnectionMode, Event, FaultMode
from svcdoctor.simulate.arrays import Floats, Ints
from svcdoctor.simulate.bundle import EPOCH, NAMESPACE, SERVICE
from svcdoctor.simulate.engine import (
    CONNECT_RTT,
    CONNTRACK,
    OK,
    STALE_ENDPOINT,
    Run,
    conntrack_drop,
    conntrack_entries,
    simulate_run,
)
from svcdoctor.simulate.params import ParamError, SimParams
from svcdoctor.simulate.routes import router_rates

SCRAPE = 15.0  # seconds between samples (Prometheus' common scrape interval)
EXPIRY = 300.0  # a deleted pod's request series end this long after it exits
REMOVAL = 2.0  # seconds from a pod's exit until its object is gone (kubelet → API)
MAX_SAMPLES = 200_000_000  # a bound on one file: series x scrapes
# kube-proxy's network-programming buckets are 0.25 s … 300 s (80 of them); these are a
# subset of its boundaries, so histogram_quantile over them stays meaningful
PROGRAMMING_BUCKETS = (0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
IDLE_CLOSE = 8  # a class beyond the engine's mechanisms: the server closed an idle connection
CLASSES = 9
OLD_HASH, NEW_HASH = "7f6d5c4b3", "5b4c3d2e1"  # the engine's ReplicaSet hashes (window 0)
SAFE = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet of Kubernetes' pod-template hashes
INGRESS = "ingress-nginx"
UNKNOWN = "unknown"  # Istio's value for a label it cannot fill (no pod was reached)
DESTINATION = f"{SERVICE}.{NAMESPACE}.svc.cluster.local"


class Source(StrEnum):
    """Which proxy's request counters the history holds."""

    NGINX = "nginx"
    ISTIO = "istio"


@dataclass(frozen=True, slots=True)
class MetricsPlan:
    """How the history is laid out: ``rollouts`` windows ``every`` seconds apart (window
    starts; ``None``: back to back), the request source, whether Istio series carry
    ``destination_pod``, the scrape interval, the upstream's keep-alive (idle) timeout
    when it is shorter than the client's (``None``: no mismatch), and the scrape interval
    of the per-node series (kube-proxy, node-exporter; ``None``: ``scrape``), a multiple
    of ``scrape``: large clusters often scrape node targets less often."""

    rollouts: int = 1
    every: float | None = None
    source: Source = Source.NGINX
    pod_label: bool = False
    scrape: float = SCRAPE
    idle_timeout: float | None = None
    node_scrape: float | None = None

    @property
    def node_every(self) -> int:
        """Scrapes of the request series per scrape of the node series."""
        return round((self.node_scrape or self.scrape) / self.scrape)

    def validate(self, p: SimParams) -> MetricsPlan:
        """Raise ParamError naming the first impossible field; return self."""
        if self.rollouts < 1:
            raise ParamError("rollouts must be at least 1")
        if self.rollouts > 1 and not p.rollout:
            raise ParamError("--rollouts needs a rollout in each window (drop --no-rollout)")
        if self.rollouts > 1 and p.event is not Event.ROLLOUT:
            raise ParamError(
                f"--rollouts: a history of several windows is one of rollouts (each replaces "
                f"every pod); a {p.event} happens once: give --rollouts 1"
            )
        if not (math.isfinite(self.scrape) and self.scrape >= 1):
            raise ParamError("the scrape interval must be at least 1 s")
        if self.every is not None and self.every < p.duration:
            raise ParamError(
                f"every ({self.every:g} s) must be at least the window (duration "
                f"{p.duration:g} s): rollouts would overlap"
            )
        if self.node_scrape is not None and not (
            math.isfinite(self.node_scrape)
            and self.node_scrape >= self.scrape
            and abs(self.node_every * self.scrape - self.node_scrape) < 1e-9
        ):
            raise ParamError("the node scrape interval must be a multiple of the scrape interval")
        if self.pod_label and self.source != Source.ISTIO:
            raise ParamError("the pod label is Istio's destination_pod: use the istio source")
        if self.idle_timeout is not None:
            if not (math.isfinite(self.idle_timeout) and self.idle_timeout > 0):
                raise ParamError("the upstream idle timeout must be greater than 0")
            if p.connection is ConnectionMode.NEW:
                raise ParamError("an upstream idle timeout needs kept-alive connections")
        # per node: kube-proxy's buckets, +Inf, _count and _sum; four conntrack series
        series = p.nodes * (len(PROGRAMMING_BUCKETS) + 3 + 4)
        samples = series * self.span(p) / (self.node_scrape or self.scrape)
        if samples > MAX_SAMPLES:
            raise ParamError(
                f"about {samples:,.0f} samples; one file holds at most {MAX_SAMPLES:,}: "
                "fewer nodes, a shorter history or a longer (node) scrape"
            )
        return self

    def spacing(self, p: SimParams) -> float:
        return p.duration if self.every is None else self.every

    def span(self, p: SimParams) -> float:
        """Seconds from the first window's start to the last one's end."""
        return (self.rollouts - 1) * self.spacing(p) + p.duration


@dataclass(frozen=True, slots=True)
class WindowTruth:
    start: float  # Unix s of the window's start
    rollout_at: float | None  # Unix s of its rollout's start
    requests: int
    failed: int


@dataclass(frozen=True, slots=True)
class MetricsTruth:
    """What the history holds, to check what a reader makes of it. Times are Unix s;
    ``requests`` and ``failed`` are the last values of the request counters summed (every
    window's requests and the steady traffic between); ``windows`` the simulated ones."""

    start: float
    end: float  # the last scrape
    scrape: float
    requests: int
    failed: int
    by_label: Mapping[str, int]  # requests by status (nginx) or "code flags" (istio)
    conntrack_drops: Mapping[str, int]  # per node that dropped
    windows: tuple[WindowTruth, ...]
    bad_pods: tuple[str, ...]
    deleted_pods: tuple[str, ...]
    series: int
    samples: int


# ---------------------------------------------------------------------------- the history


@dataclass(frozen=True, slots=True)
class _Pod:
    name: str
    replicaset: str
    created: float  # seconds from EPOCH
    ready: float
    deleted: float  # inf: never
    exited: float  # inf: never
    killed: bool
    bad: bool

    @property
    def removed(self) -> float:
        return self.exited + REMOVAL


_NGINX_FAULT = {FaultMode.HTTP_5XX: "503", FaultMode.RESET: "502", FaultMode.HANG: "504"}
_ISTIO_FAULT = {
    FaultMode.HTTP_5XX: ("503", "-"),
    FaultMode.RESET: ("503", "UC"),
    FaultMode.HANG: ("504", "UT"),
}


@dataclass(frozen=True, slots=True)
class _Outcomes:
    """Per class of outcome (engine mechanism or idle close) and retry-exhaustion: the
    status and flags a source reports."""

    status: tuple[str, ...]
    flags: tuple[str, ...]

    @classmethod
    def of(cls, p: SimParams, source: Source) -> _Outcomes:
        bad_nginx = _NGINX_FAULT[p.fault]
        bad_istio = _ISTIO_FAULT[p.fault]
        if source == Source.NGINX:
            # OK, stale, none, in-flight, sigkill, stale-conn, bad, conntrack, idle
            codes = ["200", "502", "502", "502", "502", "502", bad_nginx, "504", "502"]
            return cls(tuple(codes * 2 + ["504"] * 2), ("",) * (2 * CLASSES + 2))
        pairs = [
            ("200", "-"),
            ("503", "UF"),
            ("503", "UH"),
            ("503", "UC"),
            ("503", "UC"),
            ("503", "UC"),
            bad_istio,
            ("503", "UF"),
            ("503", "UC"),
        ]
        retried = [(c, "URX" if f == "-" else f"{f},URX") for c, f in pairs]
        retried[0] = pairs[0]
        late = [("503", "UF"), ("503", "UF,URX")]  # a stale endpoint's unanswered connect
        return cls(
            tuple(c for c, _ in pairs + retried + late),
            tuple(f for _, f in pairs + retried + late),
        )

    def label(self, code: int) -> str:
        return (
            self.status[code] if not self.flags[code] else f"{self.status[code]} {self.flags[code]}"
        )


class _History:
    """The builder: counters per series as increments per scrape bucket (each series from
    its first to its last bucket), pods, endpoint-change observations per node."""

    def __init__(self, p: SimParams, plan: MetricsPlan, buckets: int) -> None:
        self.p, self.plan, self.buckets = p, plan, buckets
        # (pod or "", outcome code, controller): chunks of (bucket, count)
        self.requests: dict[tuple[str, int, int], list[tuple[Ints, Ints]]] = {}
        self.pods: dict[str, _Pod] = {}
        self.programming: dict[int, list[tuple[Floats, Floats]]] = {}  # node: (at, seconds)
        self.drops: dict[int, Ints] = {}  # node: drops per bucket
        self.windows: list[WindowTruth] = []

    def bucket(self, t: Floats) -> Ints:
        return np.minimum((t // self.plan.scrape).astype(np.int64), self.buckets - 1)

    def series_span(self, pod: str) -> tuple[int, int]:
        """The buckets a request series lives: a pod's from its creation until it expires
        after the pod's exit; the others' all along."""
        if pod not in self.pods:
            return 0, self.buckets - 1
        info = self.pods[pod]
        first = max(0, math.floor(info.created / self.plan.scrape))
        last = self.buckets - 1
        if math.isfinite(info.exited):
            last = min(last, int((info.exited + EXPIRY) // self.plan.scrape))
        return first, last

    def add_requests(self, pod: str, code: int, ctrl: int, buckets: Ints, counts: Ints) -> None:
        self.requests.setdefault((pod, code, ctrl), []).append((buckets, counts))

    def increments(self, key: tuple[str, int, int]) -> tuple[int, Ints]:
        """A request series' first bucket and its increments per bucket from there."""
        first, last = self.series_span(key[0])
        inc = np.zeros(last - first + 1, dtype=np.int64)
        for buckets, counts in self.requests[key]:
            np.add.at(inc, buckets - first, counts)
        return first, inc

    def add_drops(self, node: int, buckets: Ints, counts: Ints) -> None:
        if node not in self.drops:
            self.drops[node] = np.zeros(self.buckets, dtype=np.int64)
        np.add.at(self.drops[node], buckets, counts)


def _replicaset(generation: int) -> str:
    if generation == 0:
        return OLD_HASH
    if generation == 1:
        return NEW_HASH
    digest = hashlib.sha256(f"{SERVICE}-{generation}".encode()).digest()
    return "".join(SAFE[b % len(SAFE)] for b in digest[:9])


def _codes(run: Run, idle_timeout: float | None) -> np.ndarray:
    """Per request, its outcome class (+ CLASSES when retries were exhausted; the last two
    codes: a stale endpoint that no longer answered)."""
    t = run.traffic
    code = t.mechanism.astype(np.int64)
    if idle_timeout is not None:
        code = np.where(_idle_closed(run, idle_timeout), IDLE_CLOSE, code)
    failed = code != OK
    retried = failed & (t.attempts > 1)
    late = (code == STALE_ENDPOINT) & (t.latency > CONNECT_RTT * 1.5)
    out = code + CLASSES * retried
    return np.asarray(np.where(late, 2 * CLASSES + retried.astype(np.int64), out))


def _idle_closed(run: Run, idle_timeout: float) -> np.ndarray:
    """Requests sent on a kept-alive connection idle at least ``idle_timeout`` since its
    previous response: the server has closed it and the request fails (a served request
    only; the first request on a connection opens it)."""
    t = run.traffic
    order = np.lexsort((t.ts, t.conn))
    conn, ts, end = t.conn[order], t.ts[order], (t.ts + t.latency)[order]
    same = np.zeros(len(ts), dtype=bool)
    same[1:] = conn[1:] == conn[:-1]
    idle = np.zeros(len(ts))
    idle[1:] = ts[1:] - end[:-1]
    closed = np.zeros(len(ts), dtype=bool)
    closed[order] = same & (idle >= idle_timeout)
    return np.asarray(closed & (t.mechanism == OK))


def _window(h: _History, k: int, run: Run, outcomes: _Outcomes) -> None:
    """Window ``k``'s pods, requests, endpoint changes and conntrack drops."""
    p, plan, pods, t = h.p, h.plan, run.pods, run.traffic
    offset = k * plan.spacing(p)
    names = []
    for j in range(pods.count):
        gen = k + (0 if pods.old[j] else 1)
        name = f"{SERVICE}-{_replicaset(gen)}-{j % p.replicas:03d}"
        names.append(name)
        if name in h.pods and pods.old[j]:
            prev = h.pods[name]
            created, ready = prev.created, prev.ready
        else:
            created, ready = offset + float(pods.created[j]), offset + float(pods.ready[j])
        gone = bool(np.isfinite(pods.deleted[j]))
        exited = offset + float(run.exits[j]) if gone else math.inf
        h.pods[name] = _Pod(
            name,
            f"{SERVICE}-{_replicaset(gen)}",
            created,
            ready,
            offset + float(pods.deleted[j]) if gone else math.inf,
            exited if exited <= offset + p.duration else math.inf,
            bool(run.killed[j]),
            bool(pods.bad[j]),
        )
    codes = _codes(run, plan.idle_timeout)
    buckets = h.bucket(offset + t.ts)
    pod_of = np.where(t.backend >= 0, t.backend, pods.count) if plan.pod_label else None
    ctrl = t.client % p.ingress_replicas if plan.source == Source.NGINX else np.zeros(len(t.ts))
    pod_ix = pod_of if pod_of is not None else np.zeros(len(t.ts), dtype=np.int64)
    ncode = len(outcomes.status)
    key = (pod_ix * ncode + codes) * p.ingress_replicas + ctrl.astype(np.int64)
    combined = key * h.buckets + buckets
    uniq, counts = np.unique(combined, return_counts=True)
    keys, bks = uniq // h.buckets, uniq % h.buckets
    for kk in np.unique(keys).tolist():
        sel = keys == kk
        c = kk % p.ingress_replicas
        rest = kk // p.ingress_replicas
        code, pod = rest % ncode, rest // ncode
        pod_name = ""
        if pod_of is not None:
            pod_name = names[pod] if pod < pods.count else UNKNOWN
        h.add_requests(pod_name, int(code), int(c), bks[sel], counts[sel])
    dropped = t.mechanism == CONNTRACK
    for node in np.unique(t.router[dropped]).tolist():
        sel = dropped & (t.router == node)
        b, n = np.unique(buckets[sel], return_counts=True)
        h.add_drops(int(node), b, n)
    _programming(h, run, offset)
    failed = int((codes != OK).sum())
    start = EPOCH + offset
    h.windows.append(
        WindowTruth(start, start + p.rollout_at if p.rollout else None, len(t.ts), failed)
    )


def _programming(h: _History, run: Run, offset: float) -> None:
    """kube-proxy's observations: per node, each endpoint change's delay from the pod's
    change (Ready, deletion) to the rules applied."""
    p, pods, routes = h.p, run.pods, run.routes
    new = np.flatnonzero(~pods.old & (pods.ready <= p.duration))
    gone = np.flatnonzero(np.isfinite(pods.deleted))
    at = np.concatenate([routes.add[new, : p.nodes], routes.remove[gone, : p.nodes]])
    since = np.concatenate([pods.ready[new], pods.deleted[gone]])
    delay = at - since[:, None]
    inside = at <= p.duration
    for node in range(p.nodes):
        ok = inside[:, node]
        if ok.any():
            h.programming.setdefault(node, []).append(
                (offset + at[ok, node], delay[ok, node].astype(np.float64))
            )


def _baseline(h: _History, a: float, b: float, pods: list[str], rng: np.random.Generator) -> None:
    """Steady traffic over [a, b) (seconds from EPOCH) to healthy ``pods``: per scrape
    bucket, requests per router (Poisson); a full table's drops per node, what retries do
    not recover of them, and upstream idle closes (binomial); split over controllers and
    pods (multinomial)."""
    p, plan = h.p, h.plan
    s = plan.scrape
    idx = np.arange(int(a // s), math.ceil(b / s))
    length = np.maximum(np.minimum((idx + 1) * s, b) - np.maximum(idx * s, a), 0.0)
    per_router = rng.poisson(np.outer(length, router_rates(p)))  # (buckets, routers)
    drop = conntrack_drop(p)
    # a retry goes through the same node's table: each attempt is dropped alike
    retryable = p.idempotent * drop**p.retries if p.retries else np.zeros_like(drop)
    final = (1 - p.idempotent if p.retries else 1.0) + retryable
    drops = rng.binomial(per_router[:, : p.nodes], drop * final)
    retried = rng.binomial(
        drops, np.divide(retryable, final, where=final > 0, out=np.zeros_like(drop))
    )
    for node in np.flatnonzero(drops.sum(axis=0)).tolist():
        h.add_drops(node, idx, drops[:, node])
    served = per_router.sum(axis=1) - drops.sum(axis=1)
    idle = np.zeros_like(served)
    if plan.idle_timeout is not None:
        # Poisson requests on each client's one connection: idle ≥ the timeout before one
        idle = rng.binomial(served, math.exp(-p.rate / p.client_count * plan.idle_timeout))
    by_code = {
        OK: served - idle,
        IDLE_CLOSE: idle,
        CONNTRACK: drops.sum(axis=1) - retried.sum(axis=1),
        CONNTRACK + CLASSES: retried.sum(axis=1),
    }
    controllers = p.ingress_replicas if plan.source == Source.NGINX else 1
    share = np.bincount(np.arange(p.client_count) % controllers, minlength=controllers)
    for code, total in by_code.items():
        if not total.any():
            continue
        split = rng.multinomial(total, share / share.sum())  # (buckets, controllers)
        for c in range(controllers):
            if not plan.pod_label:
                h.add_requests("", code, c, idx, split[:, c])
            elif code % CLASSES == CONNTRACK:
                h.add_requests(UNKNOWN, code, c, idx, split[:, c])
            else:
                per_pod = rng.multinomial(split[:, c], np.full(len(pods), 1 / len(pods)))
                for i, pod in enumerate(pods):
                    h.add_requests(pod, code, c, idx, per_pod[:, i])


def _build_history(p: SimParams, seed: int, plan: MetricsPlan) -> _History:
    p.validate()
    plan.validate(p)
    outcomes = _Outcomes.of(p, plan.source)
    span = plan.span(p)
    buckets = math.ceil(span / plan.scrape)
    h = _History(p, plan, buckets)
    rng = np.random.default_rng([seed, 19])
    for k in range(plan.rollouts):
        params = p if k == 0 else replace(p, bad_backends=0)  # the bad pods went at rollout 1
        run = simulate_run(params, seed + k)
        if plan.rollouts > 1:
            _complete(run)
        _window(h, k, run, outcomes)
        if k + 1 < plan.rollouts:
            start = k * plan.spacing(p) + p.duration
            current = [f"{SERVICE}-{_replicaset(k + 1)}-{i:03d}" for i in range(p.replicas)]
            _baseline(h, start, (k + 1) * plan.spacing(p), current, rng)
    return h


def _complete(run: Run) -> None:
    p, pods = run.params, run.pods
    new = int((~pods.old).sum())
    done = bool(np.isfinite(pods.deleted[pods.old]).all()) and new == p.replicas
    if not done or not bool((run.exits[pods.old] <= p.duration).all()):
        raise ParamError(
            "a rollout does not finish inside its window: lengthen --duration (or move "
            "--rollout-at earlier) for --rollouts"
        )


# ---------------------------------------------------------------------------- the text


def _labels(**labels: str) -> str:
    return ",".join(f'{k}="{v}"' for k, v in labels.items())


class _Writer:
    def __init__(self, out: TextIO, scrape: float, buckets: int) -> None:
        self.out = out
        self.scrape = scrape
        fmt = "{:.0f}" if float(scrape).is_integer() else "{:.3f}"
        self.stamps = [fmt.format(EPOCH + i * scrape) for i in range(buckets + 1)]
        self.series = 0
        self.samples = 0

    def family(self, name: str, kind: str, help_text: str) -> None:
        self.out.write(f"# TYPE {name} {kind}\n# HELP {name} {help_text}\n")

    def series_of(
        self,
        head: str,
        first: int,
        values: list[int] | list[float] | list[str],
        every: int = 1,
    ) -> None:
        """One series: ``values[i]`` at scrape ``first + i * every``."""
        stamps = self.stamps[first : first + len(values) * every : every]
        self.out.write("".join([f"{head} {v} {s}\n" for v, s in zip(values, stamps, strict=True)]))
        self.series += 1
        self.samples += len(values)


def _scrapes(h: _History, start: float, end: float) -> tuple[int, int]:
    """The scrapes (indices from 0 to buckets) at which something existing over
    [start, end) (seconds from EPOCH) is seen."""
    s = h.plan.scrape
    if not math.isfinite(start):
        return h.buckets + 1, h.buckets  # never: no scrape
    first = max(0, math.ceil(start / s))
    last = h.buckets if not math.isfinite(end) else min(h.buckets, math.ceil(end / s) - 1)
    return first, last


def _request_head(h: _History, outcomes: _Outcomes, pod: str, code: int, ctrl: int) -> str:
    if h.plan.source == Source.NGINX:
        labels = _labels(
            namespace=NAMESPACE,
            ingress=SERVICE,
            service=SERVICE,
            status=outcomes.status[code],
            method="GET",
            path="/",
            controller_pod=f"{INGRESS}-controller-6c7d8f9b5-{ctrl:03d}",
        )
        return f"nginx_ingress_controller_requests{{{labels}}}"
    extra = {"destination_pod": pod} if h.plan.pod_label else {}
    labels = _labels(
        reporter="source",
        destination_service=DESTINATION,
        destination_service_name=SERVICE,
        destination_service_namespace=NAMESPACE,
        destination_workload=SERVICE,
        destination_workload_namespace=NAMESPACE,
        **extra,
        response_code=outcomes.status[code],
        response_flags=outcomes.flags[code],
    )
    return f"istio_requests_total{{{labels}}}"


def _write_requests(w: _Writer, h: _History, outcomes: _Outcomes) -> dict[str, int]:
    """One series per label set (outcomes that a source reports alike share one)."""
    if h.plan.source == Source.NGINX:
        w.family("nginx_ingress_controller_requests", "unknown", "The total number of requests")
    else:
        w.family("istio_requests", "counter", "Requests seen by the source workload's proxy")
    heads: dict[str, list[tuple[str, int, int]]] = {}
    for key in sorted(h.requests):
        heads.setdefault(_request_head(h, outcomes, *key), []).append(key)
    by_label: dict[str, int] = {}
    for head, keys in heads.items():
        first, inc = h.increments(keys[0])
        for key in keys[1:]:
            inc = inc + h.increments(key)[1]  # one pod: one span
        values = np.concatenate([[0], np.cumsum(inc)]).tolist()
        w.series_of(head, first, values)
        label = outcomes.label(keys[0][1])
        by_label[label] = by_label.get(label, 0) + int(values[-1])
    return by_label


def _write_kube_state(w: _Writer, h: _History) -> None:
    pods = [q for q in h.pods.values() if q.replicaset]
    spans = {q.name: _scrapes(h, q.created, q.removed) for q in pods}
    uid = {q.name: str(uuid.uuid5(uuid.NAMESPACE_URL, f"sim/{q.name}")) for q in pods}

    def each(name: str, kind: str, help_text: str) -> Iterator[_Pod]:
        w.family(name, kind, help_text)
        yield from (q for q in pods if spans[q.name][1] >= spans[q.name][0])

    for q in each("kube_pod_created", "gauge", "Unix creation timestamp"):
        a, b = spans[q.name]
        head = "kube_pod_created{" + _labels(namespace=NAMESPACE, pod=q.name, uid=uid[q.name])
        w.series_of(head + "}", a, [f"{EPOCH + q.created:.0f}"] * (b - a + 1))
    for q in each("kube_pod_deletion_timestamp", "gauge", "Unix deletion timestamp"):
        a, b = _scrapes(h, q.deleted, q.removed)
        if math.isfinite(q.deleted) and b >= a:
            head = "kube_pod_deletion_timestamp{"
            head += _labels(namespace=NAMESPACE, pod=q.name, uid=uid[q.name]) + "}"
            # metadata.deletionTimestamp: when the grace period ends, not when it began
            ends = EPOCH + q.deleted + h.p.grace
            w.series_of(head, a, [f"{ends:.0f}"] * (b - a + 1))
    for q in each("kube_pod_status_ready", "gauge", "Describes whether the pod is ready"):
        a, b = spans[q.name]
        times = np.arange(a, b + 1) * h.plan.scrape
        ready = ((times >= q.ready) & (times < q.exited)).astype(np.int64)
        for condition, values in (("true", ready), ("false", 1 - ready), ("unknown", 0 * ready)):
            head = "kube_pod_status_ready{" + _labels(
                namespace=NAMESPACE, pod=q.name, uid=uid[q.name], condition=condition
            )
            w.series_of(head + "}", a, values.tolist())
    for q in each("kube_pod_owner", "gauge", "Information about the Pod's owner"):
        a, b = spans[q.name]
        head = "kube_pod_owner{" + _labels(
            namespace=NAMESPACE,
            pod=q.name,
            owner_kind="ReplicaSet",
            owner_name=q.replicaset,
            owner_is_controller="true",
        )
        w.series_of(head + "}", a, [1] * (b - a + 1))
    w.family("kube_replicaset_owner", "gauge", "Information about the ReplicaSet's owner")
    first_pod: dict[str, float] = {}
    for q in pods:
        first_pod[q.replicaset] = min(q.created, first_pod.get(q.replicaset, math.inf))
    for rs, created in sorted(first_pod.items()):
        a, b = _scrapes(h, created, math.inf)
        head = "kube_replicaset_owner{" + _labels(
            namespace=NAMESPACE,
            replicaset=rs,
            owner_kind="Deployment",
            owner_name=SERVICE,
            owner_is_controller="true",
        )
        w.series_of(head + "}", a, [1] * (b - a + 1))
    reason = "kube_pod_container_status_last_terminated_reason"
    for q in each(reason, "gauge", "Describes the last reason the container was terminated"):
        a, b = _scrapes(h, q.exited, q.removed)
        if math.isfinite(q.exited) and b >= a:
            head = (
                reason
                + "{"
                + _labels(
                    namespace=NAMESPACE,
                    pod=q.name,
                    uid=uid[q.name],
                    container="app",
                    reason="Error" if q.killed else "Completed",
                )
            )
            w.series_of(head + "}", a, [1] * (b - a + 1))


def _node(n: int) -> str:
    return f"node-{n:04d}"


def _write_kube_proxy(w: _Writer, h: _History) -> None:
    name = "kubeproxy_network_programming_duration_seconds"
    w.family(name, "histogram", "In Cluster Network Programming Latency in seconds")
    every = h.plan.node_every
    scrapes = np.arange(0, h.buckets + 1, every)
    stamps = w.stamps[::every]
    les = [*(f"{b:g}" for b in PROGRAMMING_BUCKETS), "+Inf"]
    for n in range(h.p.nodes):
        parts = h.programming.get(n, [])
        at = np.concatenate([x for x, _ in parts]) if parts else np.zeros(0)
        delay = np.concatenate([d for _, d in parts]) if parts else np.zeros(0)
        order = np.argsort(at, kind="stable")
        obs_bucket, delay = h.bucket(at[order]), delay[order]
        cum = []
        for bound in (*PROGRAMMING_BUCKETS, math.inf):
            cum.append(np.searchsorted(obs_bucket[delay <= bound], scrapes, side="left").tolist())
        total = np.concatenate([[0.0], np.cumsum(delay)])
        sums = total[np.searchsorted(obs_bucket, scrapes, side="left")]
        labels = _labels(instance=f"{_node(n)}:10249", node=_node(n))
        heads = [f'{name}_bucket{{{labels},le="{le}"}}' for le in les]
        lines = []
        for i, stamp in enumerate(stamps):
            lines += [f"{head} {cum[b][i]} {stamp}\n" for b, head in enumerate(heads)]
            lines.append(f"{name}_count{{{labels}}} {cum[-1][i]} {stamp}\n")
            lines.append(f"{name}_sum{{{labels}}} {sums[i]:.6f} {stamp}\n")
        w.out.write("".join(lines))
        w.series += len(heads) + 2
        w.samples += len(lines)


def _write_conntrack(w: _Writer, h: _History) -> dict[str, int]:
    p = h.p
    entries = np.minimum(conntrack_entries(p), p.conntrack_max)
    every = h.plan.node_every
    n_all = h.buckets // every + 1  # node scrapes: every ``every``-th request scrape
    drops: dict[str, int] = {}

    def heads(metric: str) -> Iterator[tuple[int, str]]:
        for n in range(p.nodes):
            yield n, metric + "{" + _labels(instance=f"{_node(n)}:9100", node=_node(n)) + "}"

    w.family("node_nf_conntrack_entries", "gauge", "Number of currently allocated flow entries")
    for n, head in heads("node_nf_conntrack_entries"):
        w.series_of(head, 0, [f"{entries[n]:.0f}"] * n_all, every)
    w.family("node_nf_conntrack_entries_limit", "gauge", "Maximum size of connection table")
    for _, head in heads("node_nf_conntrack_entries_limit"):
        w.series_of(head, 0, [str(p.conntrack_max)] * n_all, every)
    w.family("node_nf_conntrack_stat_insert_failed", "gauge", "Entries for which insertion failed")
    for _, head in heads("node_nf_conntrack_stat_insert_failed"):
        w.series_of(head, 0, [0] * n_all, every)
    w.family("node_nf_conntrack_stat_drop", "gauge", "Packets dropped due to conntrack failure")
    for n, head in heads("node_nf_conntrack_stat_drop"):
        inc = h.drops.get(n)
        if inc is None:
            w.series_of(head, 0, [0] * n_all, every)
            continue
        values = np.concatenate([[0], np.cumsum(inc)])[::every]
        drops[_node(n)] = int(values[-1])
        w.series_of(head, 0, values.tolist(), every)
    return drops


def write_openmetrics(
    out: Path | TextIO, p: SimParams, seed: int = 1, plan: MetricsPlan | None = None
) -> MetricsTruth:
    """Simulate ``plan.rollouts`` windows of ``p`` (seeds ``seed``, ``seed + 1``, …) with
    steady traffic between them and write the cluster's series as OpenMetrics text ending
    in ``# EOF``; return what the history holds."""
    plan = plan or MetricsPlan()
    h = _build_history(p, seed, plan)
    outcomes = _Outcomes.of(p, plan.source)
    if isinstance(out, Path):
        with out.open("w", encoding="utf-8") as f:
            return _write(f, h, outcomes)
    return _write(out, h, outcomes)


def _write(out: TextIO, h: _History, outcomes: _Outcomes) -> MetricsTruth:
    w = _Writer(out, h.plan.scrape, h.buckets)
    by_label = _write_requests(w, h, outcomes)
    _write_kube_state(w, h)
    _write_kube_proxy(w, h)
    drops = _write_conntrack(w, h)
    out.write("# EOF\n")
    ok = outcomes.label(OK)
    requests = sum(by_label.values())
    pods = [q for q in h.pods.values() if q.replicaset]
    return MetricsTruth(
        EPOCH,
        EPOCH + h.buckets * h.plan.scrape,
        h.plan.scrape,
        requests,
        requests - by_label.get(ok, 0),
        dict(sorted(by_label.items())),
        drops,
        tuple(h.windows),
        tuple(q.name for q in pods if q.bad),
        tuple(q.name for q in pods if math.isfinite(q.deleted)),
        w.series,
        w.samples,
    )


__all__ = [
    "EXPIRY",
    "PROGRAMMING_BUCKETS",
    "SCRAPE",
    "MetricsPlan",
    "MetricsTruth",
    "Source",
    "WindowTruth",
    "write_openmetrics",
]
