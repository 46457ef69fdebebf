"""Evidence bundles in the shapes real tools write, with known ground truth (issue 15).

Independent of ``tests/factory.py`` and of svcdoctor's parsers: every line shape here was
taken from public documentation and issue threads (the URL is beside each writer), not from
the readers under test. Traffic is simulated vectorised with numpy (seeded): clients send
bursts of requests separated by idle gaps, a Service of N pods answers, and one cause (or
none) makes a fraction of the requests fail. ``make_bundle(spec, folder)`` writes the
bundle as the files a user would collect and returns the ground truth.

Classes (``Spec.cls``):

* ``healthy``: background noise only (a handful of random 5xx/504, 0-0.04 %), 300-300,000
  requests, sometimes a clean rolling update;
* ``race``: rolling update, each deleted pod keeps receiving new connections for 1-5 s;
* ``backend``: one pod fails 0.5-5 % of its requests, the others ~0 %;
  ``backend-small``: the bad pod fails 3-4.5 %, the others exactly 0 %;
* ``reuse``: keep-alive mismatch (proxy/LB idle timeout 60 s / 600 s vs the app's 2-5 s):
  some requests that reuse a connection idle longer than the app's keep-alive fail with
  "upstream closed" (not tied to deletions);
* ``infra``: conntrack table full on one node: failure bursts, kernel line bursts aligned
  with them, ``conntrack -S`` counters growing during them, failures on that node only;
* ``mixed``: race + backend in one bundle (both must be found);
* ``multi``: an ingress/gateway log with the target Service having a cause (race, backend
  or reuse) and 3+ healthy Services with more traffic;
* traps (ground truth: no cause): ``trap-kernel-old`` (conntrack kernel lines from days
  before the requests), ``trap-insert1`` (``conntrack -S`` with ``insert_failed=1``),
  ``trap-aborts`` (client aborts: nginx 499, Envoy DC, ALB 460, GCP client_disconnected).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from svcdoctor.evidence.write import events_json, pods_json
from svcdoctor.model import EventKind, LifecycleEvent, PodInfo

T0 = 1_796_378_400.0  # 2026-12-04T10:00:00Z

# Which request-log formats each class is written in. GCP load-balancer logs carry no
# pod address that a rollout could be tied to, so race/infra/mixed are not written in it.
FORMATS: dict[str, tuple[str, ...]] = {
    "healthy": (
        "csv",
        "csv-rfc3339",
        "nginx",
        "nginx-old",
        "nginx-kubectl",
        "nginx-kubectl-ts",
        "istio",
        "istio-ts",
        "envoy-json",
        "alb",
        "gcp",
    ),
    "race": ("csv", "nginx", "nginx-old", "nginx-kubectl", "nginx-kubectl-ts", "istio", "alb"),
    "backend": ("csv", "nginx", "nginx-old", "nginx-kubectl", "istio", "envoy-json", "alb"),
    "backend-small": ("csv", "nginx", "istio", "envoy-json"),
    "reuse": ("csv", "nginx", "nginx-kubectl", "istio", "envoy-json", "alb", "gcp"),
    "infra": ("csv", "csv-rfc3339", "nginx-kubectl", "istio"),
    "mixed": ("csv", "nginx", "nginx-kubectl-ts", "istio"),
    "multi": ("nginx", "nginx-kubectl", "istio", "envoy-json"),
    "trap-kernel-old": ("csv", "nginx", "istio"),
    "trap-insert1": ("csv", "nginx-kubectl", "istio"),
    "trap-aborts": ("csv", "nginx", "nginx-kubectl", "istio", "envoy-json", "alb", "gcp"),
}
CLASSES = tuple(FORMATS)
PRIMARY: dict[str, str | None] = {
    "healthy": None,
    "race": "race",
    "backend": "backend",
    "backend-small": "backend",
    "reuse": "reuse",
    "infra": "infra",
    "mixed": "race+backend",
    "multi": None,  # per bundle: the target Service's cause
    "trap-kernel-old": None,
    "trap-insert1": None,
    "trap-aborts": None,
}


@dataclass(frozen=True)
class Spec:
    cls: str
    fmt: str
    seed: int
    max_requests: int = 300_000  # cap n (the quick test uses a smaller one)


@dataclass
class Truth:
    spec: Spec
    label: str  # the truth row of the confusion matrix: a cause, race+backend or none
    causes: frozenset[str]  # every cause that must be found
    service: tuple[str, str] | None = None  # (namespace, name) of the Service with the cause
    params: dict[str, Any] = field(default_factory=dict)

    def accepts(self, primary: str | None) -> bool:
        if not self.causes:
            return primary is None
        return primary in self.causes


# ---------------------------------------------------------------------------- simulation


@dataclass
class Svc:
    namespace: str
    name: str
    port: int
    target_port: int
    pods: list[str]
    ips: list[str]
    nodes: list[str]
    created: list[float]
    deleted: list[float | None]


@dataclass
class Traffic:
    """One row per request (arrays of equal length), ``ts`` = request start (seconds after
    T0), ``status`` 0 = no response."""

    ts: np.ndarray
    latency_ms: np.ndarray
    client: np.ndarray  # client index
    pod: np.ndarray  # index into its Service's pods
    svc: np.ndarray  # Service index
    outcome: np.ndarray  # object: ok refused eof timeout http_error aborted
    status: np.ndarray
    post: np.ndarray  # bool: POST (else GET)


def _bursty(rng: np.random.Generator, n: int, duration: float, clients: int) -> np.ndarray:
    """Request start times and clients: sessions start uniformly, each a burst of
    geometric size with exponential spacing, so a client's requests have idle gaps."""
    mean = rng.uniform(1.5, 6.0)
    sessions = max(1, round(n / mean))
    sizes = rng.geometric(1.0 / mean, sessions)
    starts = rng.uniform(0.0, duration, sessions)
    total = int(sizes.sum())
    steps = rng.exponential(0.15, total)
    first = np.cumsum(sizes) - sizes
    steps[first] = 0.0
    csum = np.cumsum(steps)
    offsets = csum - np.repeat(csum[first], sizes)
    ts = np.repeat(starts, sizes) + offsets
    who = np.repeat(rng.integers(0, clients, sessions), sizes)
    keep = ts < duration
    order = np.argsort(ts[keep], kind="stable")
    return np.stack([ts[keep][order], who[keep][order].astype(float)])


def _pod_names(rng: np.random.Generator, app: str, count: int) -> list[str]:
    alphabet = np.array(list("bcdfghjklmnpqrstvwxz2456789"))
    template = "".join(rng.choice(alphabet, 9))
    return [f"{app}-{template}-{''.join(rng.choice(alphabet, 5))}" for _ in range(count)]


def _service(
    rng: np.random.Generator, namespace: str, name: str, replicas: int, index: int, nodes: int
) -> Svc:
    pods = _pod_names(rng, name, replicas)
    ips = [
        f"10.244.{1 + (index * 40 + i) // 200}.{10 + (index * 40 + i) % 200}"
        for i in range(replicas)
    ]
    port, target = ((80, 8080), (80, 3000), (8080, 8080), (443, 8443))[index % 4]
    return Svc(
        namespace,
        name,
        port,
        target,
        pods,
        ips,
        [f"ip-10-0-{1 + (i % nodes)}-17.ec2.internal" for i in range(replicas)],
        [T0 - 3600.0] * replicas,
        [None] * replicas,
    )


def _roll(rng: np.random.Generator, svc: Svc, duration: float) -> tuple[Svc, np.ndarray]:
    """A rolling update of every pod: new pod i is Ready 2 s before old pod i is deleted;
    returns the Service with both generations and the deletion times (s after T0)."""
    r = len(svc.pods)
    start, span = duration * rng.uniform(0.1, 0.3), duration * rng.uniform(0.4, 0.6)
    deletions = start + span * np.arange(r) / max(r - 1, 1)
    new = _pod_names(rng, svc.name, r)
    new_ips = [f"10.244.{100 + i // 200}.{10 + i % 200 + r}" for i in range(r)]
    return (
        Svc(
            svc.namespace,
            svc.name,
            svc.port,
            svc.target_port,
            svc.pods + new,
            svc.ips + new_ips,
            svc.nodes + svc.nodes[1:] + svc.nodes[:1],
            svc.created + [T0 + float(d) - 2.0 for d in deletions],
            [T0 + float(d) for d in deletions] + [None] * r,
        ),
        deletions,
    )


def _noise(rng: np.random.Generator, t: Traffic, rate: float, mask: np.ndarray) -> int:
    """Background failures: a handful of random 500/502/503 and 504 timeouts."""
    idx = np.flatnonzero(mask & (t.outcome == "ok"))
    k = min(int(rng.poisson(rate * idx.size)), idx.size)
    if not k:
        return 0
    hit = rng.choice(idx, k, replace=False)
    kind = rng.random(k)
    t.outcome[hit] = np.where(kind < 0.8, "http_error", "timeout")
    t.status[hit] = np.where(kind < 0.8, rng.choice([500, 502, 503], k), 504)
    t.latency_ms[hit] = np.where(kind < 0.8, t.latency_ms[hit], 60_000.0)
    return k


def _aborts(rng: np.random.Generator, t: Traffic, rate: float) -> int:
    """Clients that gave up (long requests, the client's own timeout)."""
    idx = np.flatnonzero(t.outcome == "ok")
    k = min(int(rng.binomial(idx.size, rate)), idx.size)
    hit = rng.choice(idx, k, replace=False)
    t.outcome[hit] = "aborted"
    t.status[hit] = 0
    t.latency_ms[hit] = rng.uniform(1000, 30_000, k)
    return k


@dataclass
class Scene:
    """Everything a bundle's files are written from."""

    spec: Spec
    traffic: Traffic
    services: list[Svc]
    clients: int
    client_nodes: np.ndarray  # node index per client
    nodes: int
    bad_node: int | None = None
    bursts: list[tuple[float, float]] = field(default_factory=list)  # infra (s after T0)
    kernel_old: bool = False
    insert_one: bool = False
    duration: float = 0.0
    tz_minutes: int = 0  # the nginx controller's local UTC offset
    retries: bool = False  # nginx retried refused connects on another pod (the default)


def simulate(spec: Spec) -> tuple[Scene, Truth]:
    rng = np.random.default_rng([spec.seed, CLASSES.index(spec.cls), _fmt_id(spec.fmt)])
    cls = spec.cls
    cause = cls
    if cls == "multi":
        cause = ("race", "backend", "reuse")[int(rng.integers(0, 3))]
    duration = float(rng.uniform(120, 900))
    replicas = int(rng.integers(3, 11))
    nodes = int(rng.integers(3, 7))
    params: dict[str, Any] = {"duration_s": round(duration), "replicas": replicas}
    # requests: log-uniform, large enough that the cause leaves >= ~20 failures
    low = 300
    window = float(rng.uniform(1.0, 5.0))
    bad_rate = float(rng.uniform(max(0.005, 0.0012 * replicas), 0.05))
    if cls == "backend-small":
        replicas = int(rng.integers(6, 13))
        params["replicas"] = replicas
        bad_rate = float(rng.uniform(0.03, 0.045))
    # a small cap (the quick test) shortens the capture or raises the rate instead
    room = 0.8 * (spec.max_requests // 8 if cls == "multi" else spec.max_requests)
    if cause in ("race", "mixed"):
        duration = min(duration, max(60.0, room * window / 25))
        params["duration_s"] = round(duration)
        low = int(25 * duration / window)
    if cause in ("backend", "mixed"):
        bad_rate = max(bad_rate, min(0.05, 25 * replicas / room))
    if cause in ("backend", "backend-small", "mixed"):
        low = max(low, int(25 * replicas / bad_rate))
    if cause in ("reuse", "infra"):
        low = 3000
    if cause == "infra":  # conntrack-full bursts: >= ~30 failing requests expected
        k = int(rng.integers(3, 13))
        starts = np.sort(rng.uniform(5, duration - 10, k))
        lengths = rng.uniform(0.3, 3.0, k)
        share = lengths.sum() / duration / (1 if spec.fmt.startswith("nginx") else nodes / 2)
        low = max(low, min(int(30 / (0.8 * share)), int(room)))
    high = max(low + 1, spec.max_requests)
    n = int(np.exp(rng.uniform(np.log(min(low, high - 1)), np.log(high))))
    if cls == "multi":  # the other Services add 4-12 times as many requests
        n = max(min(n, spec.max_requests // 8), min(low, spec.max_requests // 2))
    else:
        n = min(n, spec.max_requests)
    params["requests~"] = n
    # clients: each client→pod pair sees a request every 1-20 s on average, so there are
    # idle gaps longer than an app's keep-alive in every class (not only in reuse)
    pair_gap = float(rng.uniform(1.0, 20.0))
    clients = int(np.clip(pair_gap * n / (duration * replicas), 12, 3000))
    params["clients"] = clients
    target = _service(rng, "shop", "api", replicas, 0, nodes)
    services = [target]
    # a clean rolling update in some healthy and reuse bundles (not in backend ones: the
    # rollout would replace the bad pod)
    rolled = cause in ("race", "mixed") or (cause in ("healthy", "reuse") and rng.random() < 0.3)
    deletions = np.array([])
    if rolled:
        target, deletions = _roll(rng, target, duration)
        services = [target]
        params["rollout"] = True
    ts, who = _bursty(rng, n, duration, clients)
    count = ts.size
    pod = rng.integers(0, replicas, count)
    svc_index = np.zeros(count, dtype=np.int64)
    if cls == "multi":
        extra = int(rng.integers(3, 6))
        names = ["web", "cart", "search", "auth", "payments"]
        parts = [(ts, who, pod, svc_index)]
        for k in range(extra):
            r = int(rng.integers(2, 9))
            services.append(_service(rng, "shop" if k % 2 else "store", names[k], r, k + 1, nodes))
            m = int(count * rng.uniform(1.2, 2.5))
            ets, ewho = _bursty(rng, m, duration, clients)
            parts.append(
                (ets, ewho, rng.integers(0, r, ets.size), np.full(ets.size, k + 1, dtype=np.int64))
            )
        ts = np.concatenate([p[0] for p in parts])
        who = np.concatenate([p[1] for p in parts])
        pod = np.concatenate([p[2] for p in parts])
        svc_index = np.concatenate([p[3] for p in parts])
        order = np.argsort(ts, kind="stable")
        ts, who, pod, svc_index = ts[order], who[order], pod[order], svc_index[order]
        count = ts.size
        params["services"] = len(services)
    client = who.astype(np.int64)
    t = Traffic(
        ts=ts,
        latency_ms=rng.gamma(2.0, rng.uniform(5, 40), count),
        client=client,
        pod=pod,
        svc=svc_index,
        outcome=np.full(count, "ok", dtype=object),
        status=np.full(count, 200, dtype=np.int64),
        post=rng.random(count) < 0.2,
    )
    mine = svc_index == 0
    # the rollout: old pod i until its deletion (+ the race window), then new pod i
    if deletions.size:
        lag = ts - np.where(mine, deletions[np.minimum(pod, replicas - 1)], np.inf)
        racing = mine & (lag >= 0) & (lag < window) if cause in ("race", "mixed") else None
        moved = mine & (lag >= (window if racing is not None else 0.0))
        t.pod = np.where(moved, pod + replicas, pod)
        if racing is not None:
            t.outcome[racing] = "refused"
            t.status[racing] = 0
            t.latency_ms[racing] = rng.uniform(0.2, 3.0, int(racing.sum()))
            params["window_s"] = round(window, 2)
    if cause in ("backend", "backend-small", "mixed"):
        # with a rollout (mixed) the bad pod is the last one replaced, so it serves most
        # of the capture
        bad = replicas - 1 if deletions.size else int(rng.integers(0, replicas))
        hit = mine & (t.pod == bad) & (rng.random(count) < bad_rate) & (t.outcome == "ok")
        t.outcome[hit] = "http_error"
        t.status[hit] = rng.choice([500, 503], int(hit.sum()))
        params.update(bad_pod=target.pods[bad], bad_ip=target.ips[bad], bad_rate=round(bad_rate, 4))
    if cause == "reuse":
        keepalive = float(rng.choice([5.0, 5.0, 2.0]))  # Node.js / uvicorn 5 s, gunicorn 2 s
        idle = 600.0 if spec.fmt == "gcp" else 60.0  # GCP LB 600 s; ALB, nginx 60 s
        key = t.client * 1000 + t.pod
        order = np.lexsort((ts, key))
        gap = np.full(count, np.inf)
        same = key[order][1:] == key[order][:-1]
        gap[order[1:][same]] = np.diff(ts[order])[same]
        stale = mine & (gap > keepalive) & (gap < idle) & (t.outcome == "ok")
        share = stale.sum() / max(mine.sum(), 1)
        goal = max(rng.uniform(0.002, 0.05), 25 / max(int(mine.sum()), 1))
        q = min(1.0, goal / max(share, 1e-9))
        hit = stale & (rng.random(count) < q)
        t.outcome[hit] = "eof"
        t.status[hit] = 0
        t.latency_ms[hit] = rng.uniform(0.5, 5.0, int(hit.sum()))
        params.update(app_keepalive_s=keepalive, lb_idle_s=idle, stale_fail_p=round(float(q), 3))
    client_nodes = rng.integers(0, nodes, clients)
    scene = Scene(spec, t, services, clients, client_nodes, nodes, duration=duration)
    if cause == "infra":
        bad_node = int(rng.integers(0, nodes))
        client_nodes[: max(1, clients // nodes)] = bad_node  # the node has clients
        if spec.fmt.startswith("nginx"):
            client_nodes[:] = bad_node  # one controller pod, on the bad node
        on_node = client_nodes[client] == bad_node
        inside = np.zeros(count, dtype=bool)
        for s, d in zip(starts, lengths, strict=True):
            inside |= (ts >= s) & (ts < s + d)
        cand = inside & on_node & (t.outcome == "ok")
        goal = max(rng.uniform(0.002, 0.05) * count, 25)
        q = min(0.95, goal / max(cand.sum(), 1))
        hit = cand & (rng.random(count) < q)
        t.outcome[hit] = "ctimeout"  # connect timed out (SYN dropped); "timeout" in CSV
        t.status[hit] = 504
        t.latency_ms[hit] = 5000.0 + rng.uniform(0, 5, int(hit.sum()))  # proxy_connect_timeout
        scene.bad_node = bad_node
        scene.bursts = [(float(s), float(d)) for s, d in zip(starts, lengths, strict=True)]
        params.update(bad_node=bad_node, bursts=k, burst_fail_p=round(float(q), 3))
    noise = rng.uniform(0, 0.0004 if cause in ("healthy",) or cls.startswith("trap") else 0.0001)
    params["noise"] = _noise(rng, t, noise, np.ones(count, dtype=bool))
    if cls == "trap-aborts":
        params["aborts"] = _aborts(rng, t, float(rng.uniform(0.001, 0.05)))
    elif rng.random() < 0.3:
        params["aborts"] = _aborts(rng, t, float(rng.uniform(0, 0.002)))
    scene.kernel_old = cls == "trap-kernel-old"
    scene.insert_one = cls == "trap-insert1"
    if spec.fmt.startswith("nginx") and cause in ("race", "mixed") and rng.random() < 0.3:
        # ingress-nginx's default proxy-next-upstream "error timeout" retries a refused
        # connect on the next pod: the client gets the answer, the attempt stays in
        # $upstream_addr / $upstream_status ("10.244.1.12:8080, 10.244.1.14:8080" … "502, 200")
        scene.retries = True
        params["nginx_retries"] = True
    if spec.fmt.startswith("nginx") and rng.random() < 0.4:
        scene.tz_minutes = int(rng.choice([120, 60, -300, 330]))
        params["tz_minutes"] = scene.tz_minutes
    fails = np.isin(t.outcome, ["refused", "eof", "timeout", "ctimeout", "http_error"])
    params["failures"] = int(fails.sum())
    params["requests"] = count
    params["rate_%"] = round(float(100 * fails.sum() / max(count, 1)), 3)
    if cls == "mixed":
        truth = Truth(spec, "race+backend", frozenset({"race", "backend"}), None, params)
    elif cause in ("healthy", "trap-kernel-old", "trap-insert1", "trap-aborts"):
        truth = Truth(spec, "none", frozenset(), None, params)
    else:
        label = "backend" if cause == "backend-small" else cause
        service = (target.namespace, target.name) if cls == "multi" else None
        truth = Truth(spec, label, frozenset({label}), service, params)
        if cls == "multi":
            params["cause"] = label
    return scene, truth


def _fmt_id(fmt: str) -> int:
    return sum(ord(c) * (i + 1) for i, c in enumerate(fmt))


# ---------------------------------------------------------------------------- line shapes

_AGENTS = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/130.0.0.0 Safari/537.36",
    "axios/0.23.0",
    "okhttp/4.12.0",
    "Apache-HttpClient/4.5.14 (Java/17.0.10)",
    "curl/8.5.0",
)


def _client_ip(c: int, internal: bool) -> str:
    if internal:
        return f"10.244.{60 + c // 200}.{10 + c % 200}"
    return f"{(35, 52, 81, 203)[c % 4]}.{190 + c // 4 // 250}.{(c * 7) % 250}.{1 + c // 4 % 250}"


def _tz(minutes: int) -> timezone:
    return timezone(timedelta(minutes=minutes))


def _nginx_time(ts: float, minutes: int) -> str:
    # $time_local: e.g. [03/Nov/2024:06:09:29 +0000] (kubernetes/ingress-nginx#12285)
    return datetime.fromtimestamp(ts, _tz(minutes)).strftime("%d/%b/%Y:%H:%M:%S %z")


def _nginx_error_time(ts: float, minutes: int) -> str:
    # error log: local time, no UTC offset: 2024/11/03 06:09:29 (kubernetes/ingress-nginx#12285)
    return datetime.fromtimestamp(ts, _tz(minutes)).strftime("%Y/%m/%d %H:%M:%S")


def _rfc3339_nano(ts: float) -> str:
    # kubectl logs --timestamps: RFC3339Nano, e.g. 2025-07-28T23:45:27.915419813Z (PodLogOptions)
    base = datetime.fromtimestamp(int(ts), UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{round((ts % 1) * 1e9) % 1_000_000_000:09d}Z"


def _upstream_name(svc: Svc) -> str:
    # $proxy_upstream_name: namespace-service-port, e.g. [pc-dev-summarizer-app-service-4000]
    # (kubernetes/ingress-nginx#9443)
    return f"{svc.namespace}-{svc.name}-{svc.port}"


def _path(svc: Svc, post: bool, i: int) -> str:
    return f"{'POST' if post else 'GET'} /{svc.name}/v1/items/{i % 997} HTTP/1.1"


def nginx_lines(scene: Scene, old: bool) -> list[tuple[float, str, bool]]:
    """ingress-nginx access lines (and error lines for failed upstream connections) as
    (time written, line, is_error).

    Access, current ``upstreaminfo`` (kubernetes.github.io/ingress-nginx/user-guide/
    nginx-configuration/log-format; example lines kubernetes/ingress-nginx#9877, #9443):
    ``$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent
    "$http_referer" "$http_user_agent" $request_length $request_time [$proxy_upstream_name]
    [$proxy_alternative_upstream_name] $upstream_addr $upstream_response_length
    $upstream_response_time $upstream_status $req_id``.
    Older (0.1x-0.2x, github.com/kubernetes/ingress-nginx/pull/373 and
    blog.csdn.net/hxpjava1/article/details/80341575): ``$remote_addr - [$the_real_ip] -
    $remote_user [$time_local] "$request" ... [$proxy_upstream_name] $upstream_addr
    $upstream_response_length $upstream_response_time $upstream_status``.
    Error lines (kubernetes/ingress-nginx#12285, #9443, #6919): ``2024/11/03 06:09:29 [error]
    184#184: *94 upstream prematurely closed connection while reading response header from
    upstream, client: …, server: …, request: "GET / HTTP/1.1", upstream:
    "http://10.244.3.84:5601/", host: "…"``; ``connect() failed (111: Connection refused)
    while connecting to upstream``; ``upstream timed out (110: Connection timed out) while
    connecting to upstream``.
    ``$time_local`` is when the line is written: the request's end."""
    t = scene.traffic
    tz = scene.tz_minutes
    out: list[tuple[float, str, bool]] = []
    rng = np.random.default_rng(scene.spec.seed + 11)
    sizes = rng.integers(80, 4000, t.ts.size)
    ids = rng.integers(0, 2**63 - 1, (t.ts.size, 2))
    conn_no = np.cumsum(rng.integers(1, 40, t.ts.size))
    with_id = rng.random() < 0.5
    for i in range(t.ts.size):
        svc = scene.services[int(t.svc[i])]
        p = int(t.pod[i])
        addr = f"{svc.ips[p]}:{svc.target_port}"
        outcome = t.outcome[i]
        start = float(T0 + t.ts[i])
        lat = float(t.latency_ms[i]) / 1000
        end = start + lat
        status = int(t.status[i])
        up_status, up_len, up_time = str(status), str(sizes[i]), f"{lat:.3f}"
        body = int(sizes[i])
        tried = addr
        if outcome == "refused" and scene.retries:
            alt = p + len(svc.pods) // 2 if len(svc.pods) > p + len(svc.pods) // 2 else 0
            addr = f"{addr}, {svc.ips[alt]}:{svc.target_port}"
            status, up_status, up_len = 200, "502, 200", f"0, {body}"
            up_time = f"0.000, {lat:.3f}"
        elif outcome in ("refused", "eof"):
            status, up_status, up_len, body = 502, "502", "0", 150
            up_time = "0.000" if outcome == "refused" else f"{lat:.3f}"
        elif outcome in ("timeout", "ctimeout"):
            status, up_status, up_len, body = 504, "504", "0", 160
        elif outcome == "http_error":
            up_len = str(body)
        elif outcome == "aborted":
            status, up_status, up_len, body = 499, "-", "0", 0
        remote = _client_ip(int(t.client[i]), internal=False)
        host = f"{svc.name}.example.com"
        request = _path(svc, bool(t.post[i]), i)
        agent = _AGENTS[int(t.client[i]) % len(_AGENTS)]
        stamp = _nginx_time(end, tz)
        rlen = 300 + (i * 7) % 900
        if old:
            line = (
                f'{remote} - [{remote}] - - [{stamp}] "{request}" {status} {body} "-" "{agent}" '
                f"{rlen} {lat:.3f} [{_upstream_name(svc)}] {addr} {up_len} {up_time} {up_status}"
                + (f" {ids[i, 0]:016x}{ids[i, 1]:016x}" if with_id else "")
            )
        else:
            line = (
                f'{remote} - - [{stamp}] "{request}" {status} {body} "-" "{agent}" {rlen} '
                f"{lat:.3f} [{_upstream_name(svc)}] [] {addr} {up_len} {up_time} {up_status} "
                f"{ids[i, 0]:016x}{ids[i, 1]:016x}"
            )
        out.append((end, line, False))
        phrase = {
            "refused": "connect() failed (111: Connection refused) while connecting to upstream",
            "eof": "upstream prematurely closed connection while reading response header "
            "from upstream",
            "ctimeout": "upstream timed out (110: Connection timed out) while connecting to "
            "upstream",
            "timeout": "upstream timed out (110: Connection timed out) while reading response "
            "header from upstream",
        }.get(outcome)
        if phrase:
            when = start if outcome == "refused" else end
            url = request.split(" ")[1]
            out.append(
                (
                    when,
                    f"{_nginx_error_time(when, tz)} [error] 31#31: *{conn_no[i]} {phrase}, "
                    f'client: {remote}, server: {host}, request: "{request}", upstream: '
                    f'"http://{tried}{url}", host: "{host}"',
                    True,
                )
            )
    out.sort(key=lambda x: x[0])
    return out


def controller_banner(start: float, tz: int) -> list[tuple[float, str]]:
    """The controller's start-up output as ``kubectl logs`` shows it (rancher/rke2#3438,
    kubernetes/ingress-nginx#9656): the banner, then klog lines ``W1019 22:17:30.551731
    7 client_config.go:617] …``. klog writes the container's local time."""

    def klog(ts: float, level: str, where: str, msg: str) -> tuple[float, str]:
        d = datetime.fromtimestamp(ts, _tz(tz))
        return ts, f"{level}{d:%m%d %H:%M:%S}.{d.microsecond:06d}       7 {where}] {msg}"

    s = start - 40.0
    banner = [
        "-------------------------------------------------------------------------------",
        "NGINX Ingress controller",
        "  Release:       v1.11.3",
        "  Build:         0106de65cfccb74405a6dfa7d9daffc6f0a6ef1a",
        "  Repository:    https://github.com/kubernetes/ingress-nginx",
        "  nginx version: nginx/1.25.5",
        "",
        "-------------------------------------------------------------------------------",
        "",
    ]
    return [(s, b) for b in banner] + [
        klog(
            s + 0.1,
            "W",
            "client_config.go:659",
            "Neither --kubeconfig nor --master was specified.  Using the inClusterConfig.  "
            "This might not work.",
        ),
        klog(s + 0.1, "I", "main.go:205", '"Creating API client" host="https://10.96.0.1:443"'),
        klog(
            s + 0.2,
            "I",
            "main.go:248",
            '"Running in Kubernetes cluster" major="1" minor="30" git="v1.30.4" '
            'state="clean" commit="a51b3b711150f57ffc1f526a640ec058514ed596" '
            'platform="linux/amd64"',
        ),
        klog(s + 0.4, "I", "nginx.go:271", '"Starting NGINX Ingress controller"'),
        klog(s + 1.5, "I", "controller.go:213", '"Backend successfully reloaded"'),
    ]


def controller_log(scene: Scene, stamps: bool) -> str:
    """``kubectl logs`` of an ingress-nginx controller: banner, klog lines, access and error
    lines interleaved in time; with ``--timestamps`` each line gets an RFC3339Nano prefix."""
    lines = [(ts, text) for ts, text, _ in nginx_lines(scene, old=False)]
    start = T0
    extra = controller_banner(start, scene.tz_minutes)
    rng = np.random.default_rng(scene.spec.seed + 5)
    for ts in np.sort(rng.uniform(T0, T0 + scene.duration, int(rng.integers(1, 5)))):
        d = datetime.fromtimestamp(float(ts), _tz(scene.tz_minutes))
        extra.append(
            (
                float(ts),
                f"I{d:%m%d %H:%M:%S}.{d.microsecond:06d}       7 controller.go:193] "
                '"Configuration changes detected, backend reload required"',
            )
        )
    merged = sorted(extra + lines, key=lambda x: x[0])
    if stamps:
        return "".join(f"{_rfc3339_nano(ts + 0.0004)} {text}\n" for ts, text in merged)
    return "".join(f"{text}\n" for _, text in merged)


_ENVOY = {
    # (code, flags, details, transport failure reason)
    # 503 UC …{connection_termination}: istio/istio#45802, envoyproxy/envoy#14981
    "eof": (503, "UC", "upstream_reset_before_response_started{connection_termination}", "-"),
    # 503 UF …{remote_connection_failure,delayed_connect_error:_111} "delayed_connect_error:_111"
    # istio/istio#51267, #48267 (older: {connection_failure,…}: istio/istio#39758)
    "refused": (
        503,
        "UF",
        "upstream_reset_before_response_started{remote_connection_failure,"
        "delayed_connect_error:_111}",
        "delayed_connect_error:_111",
    ),
    # connect timeout: 503 UF upstream_reset_before_response_started{connection_failure}
    # (envoyproxy/envoy#20311: a too short connect timeout gave exactly this)
    "ctimeout": (503, "UF", "upstream_reset_before_response_started{connection_failure}", "-"),
    # the route's response timeout: 504 UT response_timeout (envoyproxy/envoy#13068)
    "timeout": (504, "UT", "response_timeout", "-"),
    # client gone: response code 0, DC, downstream_remote_disconnect (istio/istio#9292,
    # envoyproxy/envoy#14908)
    "aborted": (0, "DC", "downstream_remote_disconnect", "-"),
}


def _envoy_fields(scene: Scene, i: int, conn: int) -> dict[str, Any]:
    t = scene.traffic
    svc = scene.services[int(t.svc[i])]
    p = int(t.pod[i])
    outcome = t.outcome[i]
    code, flags, details, reason = _ENVOY.get(outcome, (int(t.status[i]), "-", "via_upstream", "-"))
    client = int(t.client[i])
    dur = int(t.latency_ms[i])
    sent = 0 if code in (0,) else (95 if outcome in _ENVOY else 120 + (i * 13) % 3000)
    return {
        "start": float(T0 + t.ts[i]),
        "method": "POST" if t.post[i] else "GET",
        "path": f"/{svc.name}/v1/items/{i % 997}",
        "code": code,
        "flags": flags,
        "details": details,
        "reason": reason,
        "sent": sent,
        "dur": dur,
        "ust": "-" if outcome in _ENVOY else str(max(dur - 1, 0)),
        "rid": f"{(i * 2654435761) % 2**32:08x}-{i % 65536:04x}-4{i % 4096:03x}-a{i % 4096:03x}-"
        f"{(i * 40503) % 2**48:012x}",
        "authority": f"{svc.name}.{svc.namespace}.svc.cluster.local:{svc.port}",
        "host": f"{svc.ips[p]}:{svc.target_port}",
        "cluster": f"outbound|{svc.port}||{svc.name}.{svc.namespace}.svc.cluster.local",
        # the sidecar's port of its connection to the pod (one per keep-alive connection)
        # ("-" when no connection was made: UF lines of istio/istio#51267)
        "local": "-"
        if outcome in ("refused", "ctimeout")
        else f"{_client_ip(client, True)}:{32768 + (conn * 7919) % 28000}",
        "dlocal": f"10.96.{svc.port % 256}.{20 + int(t.svc[i])}:{svc.port}",
        "remote": f"{_client_ip(client, True)}:{30000 + (client * 97) % 30000}",
        "agent": _AGENTS[client % len(_AGENTS)],
    }


def istio_lines(scene: Scene) -> list[tuple[float, str]]:
    """Istio's default text access log (istio 1.15-, support.huaweicloud.com/usermanual-asm/
    asm_01_0142.md; example lines istio/istio#45802, #39758):
    ``[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%"
    %RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS%
    "%UPSTREAM_TRANSPORT_FAILURE_REASON%" %BYTES_RECEIVED% %BYTES_SENT% %DURATION%
    %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%"
    "%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%" %UPSTREAM_CLUSTER%
    %UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_REMOTE_ADDRESS%
    %REQUESTED_SERVER_NAME% %ROUTE_NAME%``. The ``:authority`` is ``host:port``, so the
    first quoted IP-like field is not necessarily the upstream host."""
    out = []
    serial = connections(scene.traffic)
    for i in range(scene.traffic.ts.size):
        f = _envoy_fields(scene, i, int(serial[i]))
        start = datetime.fromtimestamp(f["start"], UTC).isoformat(timespec="milliseconds")
        out.append(
            (
                f["start"] + f["dur"] / 1000,
                f'[{start.replace("+00:00", "Z")}] "{f["method"]} {f["path"]} HTTP/1.1" '
                f'{f["code"]} {f["flags"]} {f["details"]} - "{f["reason"]}" 0 {f["sent"]} '
                f'{f["dur"]} {f["ust"]} "-" "{f["agent"]}" "{f["rid"]}" "{f["authority"]}" '
                f'"{f["host"]}" {f["cluster"]} {f["local"]} {f["dlocal"]} {f["remote"]} - '
                "default",
            )
        )
    out.sort(key=lambda x: x[0])
    return out


def istio_log(scene: Scene, stamps: bool) -> str:
    """``kubectl logs <pod> -c istio-proxy``: pilot-agent start-up lines
    (``2023-12-08T07:39:50.405760Z\\tinfo\\t…``, istio/istio#48267), then access lines."""
    s = T0 - 30
    head = [
        (s, f'{_rfc3339_nano(s)[:26]}Z\tinfo\tFLAG: --concurrency="2"'),
        (s + 1, f"{_rfc3339_nano(s + 1)[:26]}Z\tinfo\tEnvoy proxy is ready"),
    ]
    merged = head + istio_lines(scene)
    if stamps:
        return "".join(f"{_rfc3339_nano(ts)} {text}\n" for ts, text in merged)
    return "".join(f"{text}\n" for _, text in merged)


def envoy_json_log(scene: Scene) -> str:
    """Istio's JSON access log encoding (meshConfig accessLogEncoding: JSON; field names as
    in support.huaweicloud.com/intl/en-us/usermanual-ucs/ucs_02_0074.html): one object a
    line; ``-`` fields are null."""
    rows = []
    serial = connections(scene.traffic)
    for i in range(scene.traffic.ts.size):
        f = _envoy_fields(scene, i, int(serial[i]))
        start = datetime.fromtimestamp(f["start"], UTC).isoformat(timespec="milliseconds")
        rows.append(
            (
                f["start"] + f["dur"] / 1000,
                json.dumps(
                    {
                        "authority": f["authority"],
                        "bytes_received": 0,
                        "bytes_sent": f["sent"],
                        "connection_termination_details": None,
                        "downstream_local_address": f["dlocal"],
                        "downstream_remote_address": f["remote"],
                        "duration": f["dur"],
                        "method": f["method"],
                        "path": f["path"],
                        "protocol": "HTTP/1.1",
                        "request_id": f["rid"],
                        "requested_server_name": None,
                        "response_code": f["code"],
                        "response_code_details": f["details"],
                        "response_flags": f["flags"],
                        "route_name": "default",
                        "start_time": start.replace("+00:00", "Z"),
                        "upstream_cluster": f["cluster"],
                        "upstream_host": f["host"],
                        "upstream_local_address": None if f["local"] == "-" else f["local"],
                        "upstream_service_time": None if f["ust"] == "-" else f["ust"],
                        "upstream_transport_failure_reason": None
                        if f["reason"] == "-"
                        else f["reason"],
                        "user_agent": f["agent"],
                        "x_forwarded_for": None,
                    }
                ),
            )
        )
    rows.sort(key=lambda x: x[0])
    return "".join(f"{r}\n" for _, r in rows)


def alb_log(scene: Scene) -> str:
    """AWS ALB access log entries (docs.aws.amazon.com/elasticloadbalancing/latest/
    application/load-balancer-access-logs.html; the 502/"-" example is from
    repost.aws/knowledge-center/elb-alb-troubleshoot-502-errors quoted in medplum/medplum#2253):
    ``type time elb client:port target:port request_processing_time target_processing_time
    response_processing_time elb_status_code target_status_code received_bytes sent_bytes
    "request" "user_agent" ssl_cipher ssl_protocol target_group_arn "trace_id" "domain_name"
    "chosen_cert_arn" matched_rule_priority request_creation_time "actions_executed"
    "redirect_url" "error_reason" "target:port_list" "target_status_code_list"
    "classification" "classification_reason" conn_trace_id``. ``time`` is when the response
    was sent; ``request_creation_time`` the request's start. 502 + target ``-`` = the target
    closed the connection; 460 = the client closed it."""
    t = scene.traffic
    out = []
    svc = scene.services[0]
    arn = (
        "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/"
        f"k8s-{svc.namespace}-{svc.name}-6c4b1a2f3e/73e2d6bc24d8a067"
    )
    for i in range(t.ts.size):
        s = scene.services[int(t.svc[i])]
        target = f"{s.ips[int(t.pod[i])]}:{s.target_port}"
        start = float(T0 + t.ts[i])
        lat = float(t.latency_ms[i]) / 1000
        outcome = t.outcome[i]
        client = f"{_client_ip(int(t.client[i]), False)}:{1024 + (i * 37) % 60000}"
        elb, tgt, tp, rp = str(int(t.status[i])), str(int(t.status[i])), f"{lat:.3f}", "0.000"
        if outcome in ("eof", "refused"):
            elb, tgt, rp = "502", "-", "-1"
            if outcome == "refused":
                tp = "-1"
        elif outcome in ("timeout", "ctimeout"):
            elb, tgt, tp, rp = "504", "-", "-1", "-1"
        elif outcome == "aborted":
            elb, tgt, tp, rp = "460", "-", "-1", "-1"
        end = start + lat
        when = datetime.fromtimestamp(end, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        created = datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        req = (
            f"{'POST' if t.post[i] else 'GET'} http://api.example.com:80/{s.name}/v1/items HTTP/1.1"
        )
        out.append(
            (
                end,
                f"http {when} app/k8s-shop-api-9f1e2d3c4b/50dc6c495c0c9188 {client} "
                f"{target} 0.000 {tp} {rp} {elb} {tgt} "
                f'{200 + i % 300} {0 if elb == "460" else 150 + i % 2000} "{req}" '
                f'"{_AGENTS[int(t.client[i]) % len(_AGENTS)]}" - - {arn} '
                f'"Root=1-{int(start):08x}-{i:024x}" "-" "-" 0 {created} "forward" "-" "-" '
                f'"{target}" "{tgt}" "-" "-" TID_{i:032x}',
            )
        )
    out.sort(key=lambda x: x[0])
    return "".join(f"{line}\n" for _, line in out)


def gcp_log(scene: Scene) -> str:
    """``gcloud logging read 'resource.type="http_load_balancer"' --format=json``: a JSON
    array, newest first. Entry shape: wazuh/wazuh#9000 and SEKOIA-IO/intake-formats#1211
    (httpRequest.latency "0.000864s", jsonPayload @type LoadBalancerLogEntry, statusDetails,
    resource.labels.backend_service_name); statusDetails values from cloud.google.com/
    load-balancing/docs/https/https-logging-monitoring (backend_connection_closed_before_
    data_sent_to_client: darklang/dark#928). serverIp: the backend that got the request."""
    t = scene.traffic
    svc = scene.services[0]
    backend_service = f"k8s1-4a2b9c3d-{svc.namespace}-{svc.name}-{svc.port}-8e7f6a5b"
    entries = []
    for i in range(t.ts.size):
        outcome = t.outcome[i]
        start = float(T0 + t.ts[i])
        lat = float(t.latency_ms[i]) / 1000
        status = int(t.status[i])
        detail = "response_sent_by_backend"
        if outcome == "eof":
            status, detail = 502, "backend_connection_closed_before_data_sent_to_client"
        elif outcome == "refused":
            status, detail = 502, "failed_to_connect_to_backend"
        elif outcome in ("timeout", "ctimeout"):
            status, detail = 502, "backend_timeout"
        elif outcome == "aborted":
            detail = "client_disconnected_before_any_response"
        http: dict[str, Any] = {
            "latency": f"{lat:.6f}s",
            "remoteIp": _client_ip(int(t.client[i]), False),
            "requestMethod": "POST" if t.post[i] else "GET",
            "requestSize": str(200 + i % 400),
            "requestUrl": f"https://api.example.com/{svc.name}/v1/items/{i % 997}",
            "responseSize": str(0 if outcome == "aborted" else 150 + i % 3000),
            "serverIp": svc.ips[int(t.pod[i])],
            "userAgent": _AGENTS[int(t.client[i]) % len(_AGENTS)],
        }
        if outcome != "aborted":  # status 0 is omitted from the JSON, as proto3 does
            http["status"] = status
        stamp = datetime.fromtimestamp(start, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        entries.append(
            {
                "httpRequest": http,
                "insertId": f"{i:x}gk{int(start) % 100000}",
                "jsonPayload": {
                    "@type": "type.googleapis.com/google.cloud.loadbalancing.type."
                    "LoadBalancerLogEntry",
                    "backendTargetProjectNumber": "projects/123456789012",
                    "remoteIp": http["remoteIp"],
                    "statusDetails": detail,
                },
                "logName": "projects/shop-prod/logs/requests",
                "receiveTimestamp": datetime.fromtimestamp(start + lat + 2.1, UTC).strftime(
                    "%Y-%m-%dT%H:%M:%S.%fZ"
                ),
                "resource": {
                    "labels": {
                        "backend_service_name": backend_service,
                        "forwarding_rule_name": "k8s2-fr-4a2b9c3d-shop-api-ingress",
                        "project_id": "shop-prod",
                        "target_proxy_name": "k8s2-tp-4a2b9c3d-shop-api-ingress",
                        "url_map_name": "k8s2-um-4a2b9c3d-shop-api-ingress",
                        "zone": "global",
                    },
                    "type": "http_load_balancer",
                },
                "severity": "WARNING" if status >= 500 else "INFO",
                "spanId": f"{i:016x}",
                "timestamp": stamp,
                "trace": f"projects/shop-prod/traces/{i:032x}",
            }
        )
    entries.sort(key=lambda e: e["timestamp"], reverse=True)
    return json.dumps(entries, indent=2) + "\n"


def connections(t: Traffic) -> np.ndarray:
    """A connection serial per request: one keep-alive connection per client→pod pair,
    replaced after an idle gap over 60 s (the proxy's idle timeout) or after a failed
    connection; a refused or timed-out connect is a new connection attempt itself."""
    key = t.client * 100_000 + t.svc * 1000 + t.pod
    order = np.lexsort((t.ts, key))
    k, ts = key[order], t.ts[order]
    new = np.ones(k.size, dtype=bool)
    new[1:] = (k[1:] != k[:-1]) | (np.diff(ts) > 60.0)
    broken = np.isin(t.outcome[order], ["eof", "refused", "ctimeout"])
    new[1:] |= broken[:-1]
    new |= np.isin(t.outcome[order], ["refused", "ctimeout"])
    serial = np.empty(k.size, dtype=np.int64)
    serial[order] = np.cumsum(new)
    return serial


def canonical_csv(scene: Scene, rfc3339: bool) -> str:
    """svcdoctor's canonical request log: ts,outcome,status,latency_ms,client,backend,conn,
    node (ts epoch seconds or RFC 3339). ``conn``: a new connection id per client→backend
    pair after an idle gap longer than the proxy's idle timeout or after a failure."""
    t = scene.traffic
    serial = connections(t)
    outcome = np.where(t.outcome == "ctimeout", "timeout", t.outcome)
    lines = ["ts,outcome,status,latency_ms,client,backend,conn,node"]
    for i in range(t.ts.size):
        svc = scene.services[int(t.svc[i])]
        c = int(t.client[i])
        ts_text = (
            datetime.fromtimestamp(float(T0 + t.ts[i]), UTC).isoformat(timespec="microseconds")
            if rfc3339
            else f"{T0 + t.ts[i]:.6f}"
        )
        status = int(t.status[i])
        lines.append(
            f"{ts_text},{outcome[i]},{status if status else ''},{t.latency_ms[i]:.2f},"
            f"{_client_ip(c, True)},{svc.ips[int(t.pod[i])]}:{svc.target_port},"
            f"c{serial[i]},node-{int(scene.client_nodes[c])}"
        )
    return "\n".join(lines) + "\n"


def kernel_log(scene: Scene, style: str) -> str:
    """Kernel lines of the bad node: conntrack drops in bursts aligned with the failures
    (or, for the trap, days before the requests). ``dmesg -T``: ``[Tue Nov 20 22:30:22 2018]
    nf_conntrack: table full, dropping packet`` (kubernetes/kubernetes#71261); ``journalctl
    -k``: ``Feb 23 16:44:36 jobs kernel: …`` (wballard/starphleet#352); message ``nf_conntrack:
    nf_conntrack: table full, dropping packet`` (kubernetes-retired/kube-aws#476) and the
    rate limiter's ``net_ratelimit: N callbacks suppressed`` (suppressed messages)."""
    rng = np.random.default_rng(scene.spec.seed + 7)
    if scene.kernel_old:
        days = float(rng.uniform(2, 10))
        s = T0 - days * 86400
        bursts = [
            (s + float(x), float(rng.uniform(0.5, 3))) for x in np.sort(rng.uniform(0, 3600, 5))
        ]
    else:
        bursts = [(T0 + s, d) for s, d in scene.bursts]
    node = f"ip-10-0-{1 + (scene.bad_node or 0)}-17"
    lines: list[tuple[float, str]] = []
    for s, d in bursts:
        for ts in np.sort(rng.uniform(s, s + d, int(rng.integers(1, 12)))):
            when = datetime.fromtimestamp(float(ts), UTC)
            msgs = ["nf_conntrack: nf_conntrack: table full, dropping packet"]
            if rng.random() < 0.3:
                msgs.insert(0, f"net_ratelimit: {int(rng.integers(5, 4000))} callbacks suppressed")
            for msg in msgs:
                if style == "dmesg-T":
                    lines.append((ts, f"[{when:%a %b} {when.day:2d} {when:%H:%M:%S %Y}] {msg}"))
                else:
                    lines.append((ts, f"{when:%b %d %H:%M:%S} {node} kernel: {msg}"))
    # some unrelated kernel chatter around the requests
    for ts in np.sort(rng.uniform(T0 - 600, T0 + scene.duration, 4)):
        when = datetime.fromtimestamp(float(ts), UTC)
        port, veth = int(rng.integers(1, 30)), int(rng.integers(0, 2**32))
        msg = f"cni0: port {port}(veth{veth:08x}) entered forwarding state"
        lines.append(
            (
                ts,
                f"[{when:%a %b} {when.day:2d} {when:%H:%M:%S %Y}] {msg}"
                if style == "dmesg-T"
                else f"{when:%b %d %H:%M:%S} {node} kernel: {msg}",
            )
        )
    return "".join(f"{line}\n" for _, line in sorted(lines, key=lambda x: x[0]))


def conntrack_stats(scene: Scene, snapshots: bool) -> str:
    """``conntrack -S`` (vyos/vyos-1x#1489, influxdata/telegraf#8955): one line per CPU,
    ``cpu=0   \\tfound=0 invalid=516 ignore=82082383 insert=0 insert_failed=0 drop=0
    early_drop=0 error=0 search_restart=20749``. Snapshots as a loop of ``date; conntrack
    -S`` writes them (``date``: ``Fri Dec  4 10:00:00 UTC 2026``). insert_failed and drop grow
    during the failure bursts; the trap has ``insert_failed=1`` and nothing growing."""
    rng = np.random.default_rng(scene.spec.seed + 3)
    cpus = int(rng.choice([2, 4, 8]))
    base = rng.integers(0, 3000, (cpus, 4))
    every = float(rng.choice([10.0, 30.0, 60.0]))
    times = (
        np.arange(-every, scene.duration + every, every)
        if snapshots
        else np.array([scene.duration + 5])
    )
    out = []
    for when in times:
        # drops so far: ~300 a second of burst
        dropped = sum(int(300 * min(max(when - s, 0.0), span)) for s, span in scene.bursts)
        if snapshots:
            d = datetime.fromtimestamp(T0 + float(when), UTC)
            out.append(f"{d:%a %b} {d.day:2d} {d:%H:%M:%S} UTC {d:%Y}")
        for c in range(cpus):
            share = dropped // cpus + (1 if c < dropped % cpus else 0)
            insert_failed = share // 3
            if scene.insert_one and c == cpus - 1:
                insert_failed = 1
            search = int(base[c, 2] + 40 * max(when, 0))
            out.append(
                f"cpu={c:<4}\tfound={base[c, 0]} invalid={base[c, 1]} ignore=0 insert=0 "
                f"insert_failed={insert_failed} drop={share} early_drop=0 error={base[c, 3] % 7} "
                f"search_restart={search}"
            )
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------- kubectl JSON


def _kubectl(scene: Scene, folder: Path, rng: np.random.Generator) -> None:
    pods: list[PodInfo] = []
    events: list[LifecycleEvent] = []
    for svc in scene.services:
        labels = {"app": svc.name, "pod-template-hash": svc.pods[0].split("-")[-2]}
        for name, ip, node, created, deleted in zip(
            svc.pods, svc.ips, svc.nodes, svc.created, svc.deleted, strict=True
        ):
            pods.append(
                PodInfo(
                    name,
                    svc.namespace,
                    ip,
                    node,
                    deleted is None,
                    created,
                    deleted,
                    30,
                    dict(labels, **{"pod-template-hash": name.split("-")[-2]}),
                )
            )
            if deleted is not None:
                events.append(
                    LifecycleEvent(
                        deleted,
                        EventKind.DELETE,
                        name,
                        "",
                        svc.namespace,
                        "Killing",
                        "Stopping container app",
                    )
                )
            if created > T0 - 600:
                events.append(
                    LifecycleEvent(
                        created - 6,
                        EventKind.CREATE,
                        name,
                        "",
                        svc.namespace,
                        "Scheduled",
                        f"Successfully assigned {svc.namespace}/{name} to {node}",
                    )
                )
                events.append(
                    LifecycleEvent(
                        created - 3,
                        EventKind.START,
                        name,
                        "",
                        svc.namespace,
                        "Started",
                        "Started container app",
                    )
                )
    if scene.spec.fmt in ("csv", "csv-rfc3339", "istio", "istio-ts", "envoy-json"):
        # the client pods (their IPs are the request log's clients), for node placement
        for c in range(scene.clients):
            node = int(scene.client_nodes[c])
            pods.append(
                PodInfo(
                    f"load-5f6d7c8b9a-{c:05d}",
                    "shop",
                    _client_ip(c, True),
                    f"ip-10-0-{1 + node}-17.ec2.internal",
                    True,
                    T0 - 7200,
                    None,
                    30,
                    {"app": "load"},
                )
            )
    api = "v1" if rng.random() < 0.5 else "events.k8s.io/v1"
    events.sort(key=lambda e: e.ts)
    for ns in sorted({s.namespace for s in scene.services}):
        mine = [e for e in events if e.namespace == ns]
        (folder / f"events-{ns}.json").write_text(
            json.dumps(events_json(mine, namespace=ns, api=api), indent=4)
        )
    (folder / "pods.json").write_text(json.dumps(pods_json(pods), indent=4))


# ---------------------------------------------------------------------------- bundles


def make_bundle(spec: Spec, folder: Path) -> Truth:
    """Write one bundle into ``folder``; returns its ground truth."""
    scene, truth = simulate(spec)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(spec.seed + 99)
    fmt = spec.fmt
    if fmt in ("csv", "csv-rfc3339"):
        (folder / "requests.csv").write_text(canonical_csv(scene, fmt == "csv-rfc3339"))
    elif fmt in ("nginx", "nginx-old"):
        lines = nginx_lines(scene, old=fmt == "nginx-old")
        (folder / "access.log").write_text("".join(f"{x}\n" for _, x, err in lines if not err))
        errors = [x for _, x, err in lines if err]
        if errors and rng.random() < 0.5:
            (folder / "error.log").write_text("".join(f"{x}\n" for x in errors))
            truth.params["error_log"] = True
    elif fmt in ("nginx-kubectl", "nginx-kubectl-ts"):
        name = "ingress-nginx-controller-7d9f8b6c5-x2x9q.log"
        (folder / name).write_text(controller_log(scene, fmt.endswith("-ts")))
    elif fmt in ("istio", "istio-ts"):
        (folder / "istio-proxy.log").write_text(istio_log(scene, fmt.endswith("-ts")))
    elif fmt == "envoy-json":
        (folder / "istio-proxy.jsonl").write_text(envoy_json_log(scene))
    elif fmt == "alb":
        name = (
            "123456789012_elasticloadbalancing_us-east-1_app.k8s-shop-api-9f1e2d3c4b."
            "50dc6c495c0c9188_20261204T1000Z_10.0.1.17_2b3c4d5e.log"
        )
        text = alb_log(scene)
        if rng.random() < 0.5:
            (folder / f"{name}.gz").write_bytes(gzip.compress(text.encode()))
            truth.params["gz"] = True
        else:
            (folder / name).write_text(text)
    elif fmt == "gcp":
        (folder / "lb-requests.json").write_text(gcp_log(scene))
    else:
        raise ValueError(f"unknown format {fmt}")
    _kubectl(scene, folder, rng)
    if scene.bursts or scene.kernel_old:
        style = "dmesg-T" if rng.random() < 0.5 else "journal"
        (folder / f"node-{style}.txt").write_text(kernel_log(scene, style))
        truth.params["kernel"] = style
    if scene.bursts or scene.insert_one:
        snaps = bool(scene.bursts) and rng.random() < 0.6
        (folder / "conntrack-S.txt").write_text(conntrack_stats(scene, snaps))
        truth.params["conntrack_snapshots"] = snaps
    return truth


def plan(seeds: int, max_requests: int = 300_000, first_seed: int = 1) -> list[Spec]:
    """Every class in every one of its formats, ``seeds`` times."""
    return [
        Spec(cls, fmt, seed, max_requests)
        for seed in range(first_seed, first_seed + seeds)
        for cls in CLASSES
        for fmt in FORMATS[cls]
    ]


# ---------------------------------------------------------------------------- scoring


@dataclass
class Result:
    truth: Truth
    primary: str | None
    found: frozenset[str]
    service: str | None
    others: tuple[str, ...]
    error: str | None = None

    @property
    def right(self) -> bool:
        t = self.truth
        if self.error is not None or not t.accepts(self.primary):
            return False
        if not t.causes.issubset(self.found) and len(t.causes) > 1:
            return False
        if t.service is not None:
            got = (self.service or "").lower()
            if not all(part in got for part in t.service):
                return False
        return True

    def describe(self) -> str:
        s = self.truth.spec
        return (
            f"{s.cls}/{s.fmt}/seed{s.seed}: said {self.primary or 'none'}"
            f" (found {','.join(sorted(self.found)) or '-'}"
            + (f", service {self.service}" if self.truth.service else "")
            + (f", others {','.join(self.others)}" if self.others else "")
            + (f", ERROR {self.error}" if self.error else "")
            + f") params {self.truth.params}"
        )


def run_one(spec: Spec, folder: Path) -> Result:
    from svcdoctor.diagnose import diagnose
    from svcdoctor.evidence import read_evidence

    truth = make_bundle(spec, folder)
    try:
        d = diagnose(read_evidence([str(folder)]))
    except Exception as exc:  # a crash is a result here
        return Result(truth, None, frozenset(), None, (), f"{type(exc).__name__}: {exc}")
    primary = d.primary.cause.value if d.primary is not None else None
    found = frozenset(a.cause.value for a in d.causes if a.score >= 0.3)
    others = tuple(str(getattr(o, "service", None)) for o in getattr(d, "others", ()))
    return Result(truth, primary, found, getattr(d, "service", None), others)


LABELS = ("race", "backend", "reuse", "infra", "race+backend", "none")
COLUMNS = ("race", "backend", "reuse", "infra", "none", "error")


def confusion(results: list[Result]) -> str:
    """Rows: truth; columns: the primary cause diagnose named."""
    counts = {(r, c): 0 for r in LABELS for c in COLUMNS}
    for res in results:
        col = "error" if res.error else (res.primary or "none")
        counts[(res.truth.label, col)] += 1
    width = 14
    lines = ["truth \\ said".ljust(width) + "".join(c.rjust(9) for c in COLUMNS) + "   right"]
    for r in LABELS:
        rows = [x for x in results if x.truth.label == r]
        if not rows:
            continue
        right = sum(x.right for x in rows)
        lines.append(
            r.ljust(width)
            + "".join(str(counts[(r, c)]).rjust(9) for c in COLUMNS)
            + f"   {right}/{len(rows)} ({100 * right / len(rows):.0f} %)"
        )
    total = sum(x.right for x in results)
    lines.append(
        f"total right: {total}/{len(results)} ({100 * total / max(len(results), 1):.1f} %)"
    )
    return "\n".join(lines)


def per_class(results: list[Result]) -> str:
    lines = []
    for cls in CLASSES:
        rows = [x for x in results if x.truth.spec.cls == cls]
        if rows:
            right = sum(x.right for x in rows)
            lines.append(f"{cls:<16}{right:>4}/{len(rows):<4} {100 * right / len(rows):5.0f} %")
    return "\n".join(lines)
