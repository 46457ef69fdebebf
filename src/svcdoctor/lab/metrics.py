"""The lab's ``/metrics``: what a cluster's exporters would show of it, in their names and
labels, for a real Prometheus to scrape (``diagnose --prometheus`` reads the same names).

* requests, per node: ingress-nginx's ``nginx_ingress_controller_requests{namespace,
  service, status, …}`` and, on request, Istio's ``istio_requests_total{reporter="source",
  destination_pod, response_code, response_flags, …}`` (the pod label the diagnosis reads).
  On the userspace datapath the node's proxy counts what went through it
  (:class:`ProxyTally`: each response's status from the bytes it passed, a refused or
  failed upstream connect 502, no endpoint 503, a connection the upstream closed under a
  request 502, one the client left 499). The kernel datapath has no userspace proxy: there
  the load generator stands in for the ingress, and each request it made is counted as
  the ingress would have logged it (:func:`record_status`, the rule of ``nginx_line``);
* kube-state-metrics, from the objects the lab's API serves (:func:`kube_state`):
  ``kube_pod_created``, ``kube_pod_deletion_timestamp`` (``metadata.deletionTimestamp``:
  the deletion plus the grace period, as Kubernetes sets it), ``kube_pod_status_ready``,
  ``kube_pod_owner``, ``kube_replicaset_owner``, ``kube_pod_container_status_terminated_reason``
  and ``…_last_terminated_reason`` (from ``state``/``lastState.terminated``);
* kube-proxy, per node: ``kubeproxy_network_programming_duration_seconds`` (its buckets),
  one observation per endpoint change a node applied, from the change to the sync
  (:func:`programming_durations`);
* node-exporter, per node, kernel datapath only: ``node_nf_conntrack_entries``,
  ``…_entries_limit`` and ``…_stat_*`` read from the node's network namespace
  (``/proc/sys/net/netfilter``, ``/proc/thread-self/net/stat/nf_conntrack``). The userspace
  nodes have no namespace of their own: no conntrack series (the host's are no node's).

The text format is written here (:func:`exposition`, format 0.0.4) rather than with
``prometheus_client``: that library names every counter ``…_total``, and ingress-nginx's
counter is ``nginx_ingress_controller_requests``, without the suffix.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from svcdoctor.model import EndpointChange

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
NAMESPACE = "lab"
SERVICE = "api"
WORKLOAD = "api"
INGRESS = "api"  # the Ingress in front of the Service (ingress-nginx's ``ingress`` label)
CONTROLLER_NAMESPACE = "ingress-nginx"
CONTROLLER_CLASS = "k8s.io/ingress-nginx"
HOST = "svc"  # the Host the load sends
UNKNOWN = "unknown"  # Istio's value of a label it cannot fill
NO_FLAGS = "-"
# kube-proxy's NetworkProgrammingLatency buckets (pkg/proxy/metrics): 0.25 s … 300 s
PROGRAMMING_BUCKETS: tuple[float, ...] = (
    0.25,
    0.5,
    *(float(x) for x in range(1, 60)),
    *(float(x) for x in range(60, 120, 5)),
    *(float(x) for x in range(120, 301, 30)),
)
PROGRAMMING = "kubeproxy_network_programming_duration_seconds"
CONNTRACK_STATS: tuple[str, ...] = (
    "found",
    "invalid",
    "ignore",
    "insert",
    "insert_failed",
    "drop",
    "early_drop",
    "search_restart",
)


class Kind(StrEnum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Sample:
    """One line of a family: ``name`` is the family's, or its ``_bucket``/``_sum``/``_count``."""

    name: str
    labels: Labels
    value: float


@dataclass(frozen=True, slots=True)
class Family:
    name: str
    kind: Kind
    help: str
    samples: tuple[Sample, ...]


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(x: float) -> str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return str(int(x)) if x == int(x) and abs(x) < 1e15 else repr(float(x))


def exposition(families: Iterable[Family]) -> str:
    """The families in Prometheus' text format 0.0.4 (one ``# HELP``/``# TYPE`` each)."""
    out: list[str] = []
    for f in families:
        help_text = f.help.replace("\\", "\\\\").replace("\n", "\\n")
        out.append(f"# HELP {f.name} {help_text}\n# TYPE {f.name} {f.kind.value}\n")
        for s in f.samples:
            labels = ",".join(f'{k}="{_escape(v)}"' for k, v in s.labels)
            head = f"{s.name}{{{labels}}}" if labels else s.name
            out.append(f"{head} {_number(s.value)}\n")
    return "".join(out)


# --- requests -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one request through the ingress ended: the status it logged, the pod that
    answered (``None``: none did) and Envoy's response flags for the same failure."""

    status: int
    pod: str | None = None
    flags: str = NO_FLAGS


NO_ENDPOINT = Outcome(503, None, "UH")
CONNECT_FAILED = Outcome(502, None, "UF")
CLIENT_LEFT = Outcome(499, None, "DC")


class RequestFlavour(StrEnum):
    """Which exporter's request counter to write."""

    NGINX = "nginx"
    ISTIO = "istio"


@dataclass
class RequestCounts:
    """The requests one node's ingress passed, by outcome (a counter: it only grows)."""

    counts: collections.Counter[Outcome] = field(default_factory=collections.Counter)

    def add(self, outcome: Outcome) -> None:
        self.counts[outcome] += 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def record_status(record: Mapping[str, Any]) -> Outcome:
    """A load record as the ingress in front of the Service would have counted it (the
    rule of ``objects.nginx_line``): a response's status, 499 for a request the client gave
    up on, 502 for a refused, reset or closed connection."""
    outcome = record["outcome"]
    pod = record.get("backend")
    if outcome in ("ok", "http_error") and record.get("status"):
        return Outcome(int(record["status"]), pod)
    if outcome == "timeout":
        return Outcome(499, pod, "DC")
    return Outcome(502, pod, "UF" if outcome == "refused" else "UC")


def _istio_code(o: Outcome) -> str:
    return "0" if o.status == 499 else str(o.status)  # Envoy: 0 when the client left


def request_families(
    nodes: Mapping[str, RequestCounts], flavours: Iterable[RequestFlavour]
) -> list[Family]:
    """The request counters of ``nodes`` (controller pod name → its counts) in each flavour
    (one series per label set)."""
    out = []
    for flavour in flavours:
        merged: collections.Counter[Labels] = collections.Counter()
        for controller, node in nodes.items():
            for o, n in list(node.counts.items()):
                merged[_request_labels(flavour, controller, o)] += n
        samples = tuple(Sample(_request_name(flavour), k, float(v)) for k, v in merged.items())
        if flavour is RequestFlavour.NGINX:
            out.append(
                Family(
                    "nginx_ingress_controller_requests",
                    Kind.COUNTER,
                    "The total number of client requests",
                    samples,
                )
            )
        else:
            out.append(Family("istio_requests_total", Kind.COUNTER, "Requests", samples))
    return out


def _request_name(flavour: RequestFlavour) -> str:
    if flavour is RequestFlavour.NGINX:
        return "nginx_ingress_controller_requests"
    return "istio_requests_total"


def _request_labels(flavour: RequestFlavour, controller: str, o: Outcome) -> Labels:
    if flavour is RequestFlavour.NGINX:
        return (
            ("canary", ""),
            ("controller_class", CONTROLLER_CLASS),
            ("controller_namespace", CONTROLLER_NAMESPACE),
            ("controller_pod", controller),
            ("host", HOST),
            ("ingress", INGRESS),
            ("method", "GET"),
            ("namespace", NAMESPACE),
            ("path", "/"),
            ("service", SERVICE),
            ("status", str(o.status)),
        )
    return (
        ("reporter", "source"),
        ("source_workload", controller),
        ("source_workload_namespace", CONTROLLER_NAMESPACE),
        ("destination_service", f"{SERVICE}.{NAMESPACE}.svc.cluster.local"),
        ("destination_service_name", SERVICE),
        ("destination_service_namespace", NAMESPACE),
        ("destination_workload", WORKLOAD),
        ("destination_workload_namespace", NAMESPACE),
        ("destination_pod", o.pod or UNKNOWN),
        ("request_protocol", "http"),
        ("response_code", _istio_code(o)),
        ("response_flags", o.flags),
    )


class _Messages:
    """Counts HTTP/1.1 messages in one direction of a byte stream: heads ending in a blank
    line, then ``Content-Length`` bytes of body (the lab's requests and responses carry no
    chunked bodies). ``statuses`` holds each response's status (for a response stream)."""

    def __init__(self) -> None:
        self.buffer = b""
        self.body = 0  # body bytes still to skip
        self.count = 0
        self.statuses: list[int] = []

    def feed(self, data: bytes) -> None:
        while data:
            if self.body:
                skip = min(self.body, len(data))
                self.body -= skip
                data = data[skip:]
                continue
            self.buffer += data
            data = b""
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                self.buffer = self.buffer[-65536:]
                return
            head, data = self.buffer[:end], self.buffer[end + 4 :]
            self.buffer = b""
            self._head(head)

    def _head(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        self.count += 1
        first = lines[0].split(" ")
        if first[0].startswith("HTTP/") and len(first) > 1 and first[1].isdigit():
            self.statuses.append(int(first[1]))
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length" and value.strip().isdigit():
                self.body = int(value.strip())


class ProxyTally:
    """One proxied connection's requests, as an ingress counts them: each response with its
    status; at the end, every request still unanswered: 502 when the upstream went first
    (closed or reset under it), 499 when the client did."""

    def __init__(self, counts: RequestCounts, pod: str) -> None:
        self.counts = counts
        self.pod = pod
        self.requests = _Messages()
        self.responses = _Messages()
        self._counted = 0

    def from_client(self, data: bytes) -> None:
        self.requests.feed(data)

    def from_upstream(self, data: bytes) -> None:
        self.responses.feed(data)
        for status in self.responses.statuses[self._counted :]:
            self.counts.add(Outcome(status, self.pod))
        self._counted = len(self.responses.statuses)

    def close(self, upstream_first: bool) -> None:
        """The connection ended; ``upstream_first``: the upstream's side ended first."""
        unanswered = self.requests.count - self._counted
        outcome = Outcome(502, self.pod, "UC") if upstream_first else CLIENT_LEFT
        for _ in range(max(unanswered, 0)):
            self.counts.add(outcome)
        self._counted = self.requests.count


# --- kube-state-metrics ---------------------------------------------------------------------


def _unix(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _owners(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list(obj["metadata"].get("ownerReferences") or [])


# the kube-state-metrics families the lab exposes, in this order, with their HELP texts
# (kubernetes/kube-state-metrics internal/store/pod.go and replicaset.go)
_KUBE_STATE_HELP = {
    "kube_pod_created": "Unix creation timestamp",
    "kube_pod_deletion_timestamp": "Unix deletion timestamp",
    "kube_pod_status_ready": "Describes whether the pod is ready to serve requests.",
    "kube_pod_owner": "Information about the Pod's owner.",
    "kube_replicaset_owner": "Information about the ReplicaSet's owner.",
    "kube_pod_container_status_terminated_reason": "Describes the reason the container is "
    "currently in terminated state.",
    "kube_pod_container_status_last_terminated_reason": "Describes the last reason the "
    "container was in terminated state.",
}


def _owner_labels(ref: Mapping[str, Any]) -> Labels:
    """The ``owner_*`` labels of one owner reference (``<none>`` for an object with none)."""
    return (
        ("owner_kind", ref.get("kind", "<none>")),
        ("owner_name", ref.get("name", "<none>")),
        ("owner_is_controller", str(bool(ref.get("controller"))).lower() if ref else "<none>"),
    )


def _pod_samples(pod: Mapping[str, Any]) -> Iterator[Sample]:
    """kube-state-metrics' samples of one Pod."""
    meta = pod["metadata"]
    base: Labels = (
        ("namespace", meta.get("namespace", "")),
        ("pod", meta["name"]),
        ("uid", meta.get("uid", "")),
    )
    yield Sample("kube_pod_created", base, _unix(meta["creationTimestamp"]))
    if meta.get("deletionTimestamp"):
        yield Sample("kube_pod_deletion_timestamp", base, _unix(meta["deletionTimestamp"]))
    status = pod.get("status") or {}
    cond = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    if cond is not None:
        for value in ("true", "false", "unknown"):
            hit = str(cond.get("status", "")).lower() == value
            yield Sample("kube_pod_status_ready", (*base, ("condition", value)), float(hit))
    for ref in _owners(pod) or [{}]:
        yield Sample("kube_pod_owner", (*base[:2], *_owner_labels(ref), base[2]), 1.0)
    for c in status.get("containerStatuses") or []:
        for name, state in (
            ("kube_pod_container_status_terminated_reason", c.get("state")),
            ("kube_pod_container_status_last_terminated_reason", c.get("lastState")),
        ):
            ended = (state or {}).get("terminated")
            if ended and ended.get("reason"):
                labels = (*base, ("container", c["name"]), ("reason", ended["reason"]))
                yield Sample(name, labels, 1.0)


def kube_state(objects: Iterable[Mapping[str, Any]]) -> list[Family]:
    """kube-state-metrics' pod and ReplicaSet series for the Pods and ReplicaSets among
    ``objects`` (as the API serves them), with its names, labels and values."""
    pods = [o for o in objects if o.get("kind") == "Pod"]
    sets = [o for o in objects if o.get("kind") == "ReplicaSet"]
    samples: dict[str, list[Sample]] = {name: [] for name in _KUBE_STATE_HELP}
    for pod in sorted(
        pods, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"])
    ):
        for sample in _pod_samples(pod):
            samples[sample.name].append(sample)
    for rs in sorted(sets, key=lambda o: o["metadata"]["name"]):
        meta = rs["metadata"]
        where = (("namespace", meta.get("namespace", "")), ("replicaset", meta["name"]))
        for ref in _owners(rs) or [{}]:
            labels = (*where, *_owner_labels(ref))
            samples["kube_replicaset_owner"].append(Sample("kube_replicaset_owner", labels, 1.0))
    return [
        Family(name, Kind.GAUGE, help_text, tuple(samples[name]))
        for name, help_text in _KUBE_STATE_HELP.items()
    ]


# --- kube-proxy -----------------------------------------------------------------------------

Synced = tuple[float, int, tuple[str, ...]]  # (when, node, the pods of the view it applied)


def _published(changes: Sequence[EndpointChange]) -> list[tuple[float, frozenset[str]]]:
    """When the routable endpoint set changed (the EndpointSlice updates a proxy acts on),
    replayed from the pods' endpoint conditions: (time, the routable pods)."""
    state: dict[str, bool] = {}
    out: list[tuple[float, frozenset[str]]] = []
    last: frozenset[str] = frozenset()
    for c in sorted((c for c in changes if c.ts is not None and c.pod), key=lambda c: c.ts or 0.0):
        assert c.pod is not None
        assert c.ts is not None
        state[c.pod] = bool(c.ready) and not c.removed
        now = frozenset(p for p, up in state.items() if up)
        if now != last:
            out.append((c.ts, now))
            last = now
    return out


def programming_durations(
    changes: Sequence[EndpointChange], synced: Sequence[Synced], nodes: int
) -> list[list[float]]:
    """Per node, kube-proxy's network-programming latencies: for every endpoint change a
    sync applied, the seconds from the change to the sync (a sync applying several pending
    changes observes each, as kube-proxy does with their trigger times)."""
    published = _published(changes)
    out: list[list[float]] = [[] for _ in range(nodes)]
    applied = [-1] * nodes  # the index of the last change each node applied
    for t, node, view in sorted(synced):
        pods = frozenset(view)
        upto = next(
            (
                i
                for i in range(len(published) - 1, applied[node], -1)
                if published[i][0] <= t and published[i][1] == pods
            ),
            None,
        )
        if upto is None:
            continue  # the node's start-up sync (the first pods), or a view not published
        out[node].extend(t - published[i][0] for i in range(applied[node] + 1, upto + 1))
        applied[node] = upto
    return out


def histogram(
    name: str, help_text: str, per_label: Mapping[Labels, Sequence[float]], buckets: Sequence[float]
) -> Family:
    """A histogram family from its observations (cumulative buckets, ``+Inf``, sum, count)."""
    samples: list[Sample] = []
    for labels, values in per_label.items():
        for bound in (*buckets, math.inf):
            le = "+Inf" if math.isinf(bound) else f"{bound:g}"
            count = sum(1 for v in values if v <= bound)
            samples.append(Sample(f"{name}_bucket", (*labels, ("le", le)), float(count)))
        samples.append(Sample(f"{name}_sum", labels, float(sum(values))))
        samples.append(Sample(f"{name}_count", labels, float(len(values))))
    return Family(name, Kind.HISTOGRAM, help_text, tuple(samples))


def programming_family(node: str, durations: Sequence[float]) -> Family:
    return histogram(
        PROGRAMMING,
        "In Cluster Network Programming Latency in seconds",
        {(): durations} if not node else {(("node", node),): durations},
        PROGRAMMING_BUCKETS,
    )


# --- node-exporter (conntrack) --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Conntrack:
    """A network namespace's conntrack table: entries, its limit, the stat counters summed
    over the CPUs (``/proc/net/stat/nf_conntrack``)."""

    entries: int
    limit: int
    stats: Mapping[str, int]


def parse_conntrack_stat(text: str) -> dict[str, int]:
    """``/proc/net/stat/nf_conntrack``: a header, then one row of hex counters per CPU."""
    lines = [line.split() for line in text.splitlines() if line.strip()]
    if not lines:
        return {}
    header, rows = lines[0], lines[1:]
    return {name: sum(int(r[i], 16) for r in rows if i < len(r)) for i, name in enumerate(header)}


def conntrack_families(ct: Conntrack) -> list[Family]:
    """node-exporter's conntrack collector's series for one node."""
    g = Kind.GAUGE
    out = [
        Family(
            "node_nf_conntrack_entries",
            g,
            "Number of currently allocated flow entries for connection tracking.",
            (Sample("node_nf_conntrack_entries", (), ct.entries),),
        ),
        Family(
            "node_nf_conntrack_entries_limit",
            g,
            "Maximum size of connection tracking table.",
            (Sample("node_nf_conntrack_entries_limit", (), ct.limit),),
        ),
    ]
    for stat in CONNTRACK_STATS:
        if stat in ct.stats:
            name = f"node_nf_conntrack_stat_{stat}"
            out.append(
                Family(
                    name,
                    g,
                    f"Number of {stat.replace('_', ' ')} conntrack events.",
                    (Sample(name, (), float(ct.stats[stat])),),
                )
            )
    return out


# --- serving --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MetricsTarget:
    """One ``/metrics`` endpoint: the exporter it plays (``job``) and, per node, the node."""

    job: str
    url: str
    node: str | None = None


Render = Callable[[], Awaitable[Sequence[Family]]]


class MetricsServer:
    """Plain-HTTP ``/metrics`` endpoints on loopback, one port per exporter instance (as a
    cluster's Prometheus scrapes one target per exporter pod and node)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.targets: list[MetricsTarget] = []
        self.errors: list[str] = []
        self._runners: list[Any] = []

    async def serve(self, job: str, render: Render, node: str | None = None) -> MetricsTarget:
        from aiohttp import web

        async def handle(request: web.Request) -> web.Response:
            try:
                body = exposition(await render())
            except Exception as exc:  # a scrape that fails is a failed scrape, said once
                if not self.errors:
                    self.errors.append(f"{job}: {type(exc).__name__}: {exc}")
                return web.Response(status=500, text=f"{type(exc).__name__}: {exc}\n")
            return web.Response(body=body.encode(), headers={"Content-Type": CONTENT_TYPE})

        app = web.Application()
        app.router.add_get("/metrics", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        self._runners.append(runner)
        site = web.TCPSite(runner, self.host, 0)
        await site.start()
        port = runner.addresses[0][1]
        target = MetricsTarget(job, f"http://{self.host}:{port}/metrics", node)
        self.targets.append(target)
        return target

    async def close(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()


def scrape_config(targets: Sequence[MetricsTarget], interval: float = 15.0) -> str:
    """A ``prometheus.yml`` scraping ``targets`` every ``interval`` seconds, one job per
    exporter, each node target labelled with its ``node`` (as Kubernetes service discovery
    relabelling does)."""
    jobs: dict[str, list[MetricsTarget]] = {}
    for t in targets:
        jobs.setdefault(t.job, []).append(t)
    lines = [
        "global:",
        f"  scrape_interval: {interval:g}s",
        f"  scrape_timeout: {interval:g}s",
        "scrape_configs:",
    ]
    for job, group in jobs.items():
        lines += [f"  - job_name: {job}", "    static_configs:"]
        for t in group:
            address = t.url.split("//", 1)[1].split("/", 1)[0]
            lines.append(f"      - targets: ['{address}']")
            if t.node:
                lines.append(f"        labels: {{node: '{t.node}'}}")
    return "\n".join(lines) + "\n"
