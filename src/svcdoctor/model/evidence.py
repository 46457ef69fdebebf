"""Evidence: what happened, as read from the files users already have.

Requests are columnar (a polars DataFrame with ``REQUEST_SCHEMA``; millions of rows);
everything else is a tuple of small frozen records. All times are Unix seconds, UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from svcdoctor.model.hops import HopKind
from svcdoctor.model.live import ContainerExit

if TYPE_CHECKING:
    import polars as pl

    from svcdoctor.model.inventory import Inventory


class Outcome(StrEnum):
    """How one request (or one upstream attempt) ended."""

    OK = "ok"
    RESET = "reset"
    REFUSED = "refused"
    TIMEOUT = "timeout"
    EOF = "eof"  # the connection closed before a response
    HTTP_ERROR = "http_error"  # 5xx
    ERROR = "error"
    # the client gave up before the answer (nginx 499, Envoy DC, ALB 460, GCP
    # client_disconnected_*): not a failure of the Service, counted in no failure rate
    ABORTED = "aborted"


FAILURES = tuple(o.value for o in Outcome if o not in (Outcome.OK, Outcome.ABORTED))

# The request frame's columns. ``role``: ``request`` (what a client saw), ``masked`` (a
# failed upstream attempt that a proxy retried, invisible to the client) or ``error_log``
# (a failure from a proxy's error log: a time and a backend, no denominator).
# ``upstream``: the Service a proxy routed the request to (ingress-nginx
# ``$proxy_upstream_name`` such as ``shop-api-80``, an Envoy cluster such as
# ``outbound|80||api.shop.svc.cluster.local``, an ALB target group, a GCP backend service);
# one proxy log holds many. ``detail``: the proxy's own words for a failure (Envoy
# response code details, nginx's error, GCP statusDetails). ``source``: the file the row
# came from.
REQUEST_COLUMNS = (
    "ts",
    "outcome",
    "status",
    "latency_ms",
    "client",
    "backend",
    "conn",
    "node",
    "upstream",
    "detail",
    "role",
    "source",
)
ROLES = ("request", "masked", "error_log")


class EventKind(StrEnum):
    """Pod lifecycle moments that the analyses line traffic up against."""

    DELETE = "delete"  # deletionTimestamp, SuccessfulDelete, Killing
    CREATE = "create"  # SuccessfulCreate, Scheduled, creationTimestamp
    START = "start"  # Started
    EXIT = "exit"  # a container terminated (finishedAt)
    UNHEALTHY = "unhealthy"  # probe failures
    PRESTOP_FAILED = "prestop_failed"  # FailedPreStopHook
    SCALE = "scale"  # ScalingReplicaSet


@dataclass(frozen=True, slots=True)
class PodInfo:
    """One pod as ``kubectl get pods -o json`` shows it (the latest snapshot wins)."""

    name: str
    namespace: str = ""
    ip: str | None = None
    node: str | None = None
    ready: bool | None = None
    created_at: float | None = None
    deleted_at: float | None = None
    grace_seconds: int | None = None
    labels: dict[str, str] = field(default_factory=dict)
    exits: tuple[ContainerExit, ...] = ()
    ports: tuple[int, ...] = ()  # container ports: pods sharing an IP (hostNetwork) differ by port


@dataclass(frozen=True, slots=True)
class LifecycleEvent:
    """A lifecycle moment. ``resolution`` is the clock's granularity (1 s for kubectl
    events), so analyses widen their windows by it."""

    ts: float
    kind: EventKind
    pod: str | None
    source: str
    namespace: str = ""
    reason: str = ""
    message: str = ""
    exit_code: int | None = None
    resolution: float = 0.0


@dataclass(frozen=True, slots=True)
class RoutingChange:
    """A hop in front of the pods changed what it routes to, at ``ts``, as its own log says
    (``evidence/routing.py``): an ingress's reload, a load balancer's deregistration.
    ``removed``: the targets the line names (pod IPs, or the hop's server names); empty when
    it names none (a reload applies every change made before it). ``by``: the software."""

    ts: float
    hop: HopKind
    what: str  # "reloaded", "pushed the endpoints", "deregistered", "drained", "took down"
    removed: tuple[str, ...]
    source: str
    resolution: float  # seconds: the line's clock, or how late the hop applies it
    by: str


@dataclass(frozen=True, slots=True)
class EndpointChange:
    """An endpoint's conditions as an EndpointSlice reported them at ``ts``."""

    ts: float | None
    address: str
    pod: str | None
    ready: bool | None
    serving: bool | None
    terminating: bool | None
    removed: bool = False


@dataclass(frozen=True, slots=True)
class KernelEvent:
    """A kernel message that drops traffic (``nf_conntrack: table full``, one per line), the
    count of such messages the kernel's rate limit left out (``suppressed``: messages, not
    drops), or a ``conntrack -S`` counter summed over CPUs (``ts``: when the snapshot was
    taken, ``None`` when the file does not say)."""

    ts: float | None
    kind: str  # "conntrack_full" | "suppressed" | "insert_failed" | "drop"
    count: int
    source: str
    netns: str | None = None
    node: str | None = None
    aligned: bool = True  # False: seconds since boot that could not be put on the wall clock
    zoneless: bool = False  # the line's time carried no UTC offset (dmesg -T, syslog)


@dataclass(frozen=True, slots=True)
class SourceSummary:
    """What one input contributed: its detected format, rows and time span."""

    path: str
    format: str
    rows: int
    start: float | None = None
    end: float | None = None
    note: str = ""
    resolution: float = 0.0  # clock granularity of its timestamps (nginx logs: 1 s)


@dataclass(frozen=True, slots=True)
class LoadError:
    """One error text of a load generator's report, with how many requests it ended and
    the outcome its words name (``refused``, ``reset``, ``eof``, ``timeout``, ``error``)."""

    text: str
    count: int
    outcome: Outcome


@dataclass(frozen=True, slots=True)
class LoadSummary:
    """A load generator's end-of-run report (hey, oha, wrk, k6, vegeta, fortio, a curl loop):
    counts without per-request times, so no request row is made of it. ``failures``: failed
    requests per outcome (5xx as ``http_error``); ``statuses``: responses per HTTP status;
    ``sockets``/``connections``: connections opened and the number perfect keep-alive would
    have needed (fortio's "Sockets used: N (for perfect keepalive, would be M)"), or the
    tool's concurrent connections when it keeps them alive (wrk, hey, oha); ``start``/``end``
    only when the report states them."""

    tool: str
    source: str
    requests: int
    failures: tuple[tuple[Outcome, int], ...] = ()
    statuses: tuple[tuple[int, int], ...] = ()
    errors: tuple[LoadError, ...] = ()
    sockets: int | None = None
    connections: int | None = None
    keepalive: bool | None = None
    start: float | None = None
    end: float | None = None
    duration_seconds: float | None = None
    note: str = ""

    @property
    def failed(self) -> int:
        return sum(n for _, n in self.failures)


@dataclass(frozen=True, slots=True)
class Evidence:
    """Everything read for one diagnosis."""

    requests: pl.DataFrame
    pods: tuple[PodInfo, ...] = ()
    events: tuple[LifecycleEvent, ...] = ()
    endpoints: tuple[EndpointChange, ...] = ()
    kernel: tuple[KernelEvent, ...] = ()
    inventory: Inventory | None = None
    sources: tuple[SourceSummary, ...] = ()
    problems: tuple[str, ...] = ()  # inputs named with the reason they were skipped
    incomplete: tuple[str, ...] = ()  # evidence a bundle says it lacks (collect's "missing")
    warnings: tuple[str, ...] = ()  # read, but with an assumption the user should know
    replicas_hint: int | None = None  # from Deployments/ReplicaSets when present
    loads: tuple[LoadSummary, ...] = ()  # load generators' reports: counts, no request times
    routing: tuple[RoutingChange, ...] = ()  # hops' own stopped-routing moments, by time
    extra: dict[str, Any] = field(default_factory=dict)


RETRY_BACKOFF = 0.025
"""Seconds a client waits before its first retry of a failed request, doubling after: the
lab's clients and the simulated ones."""


def owners(pod: str) -> tuple[str, str]:
    """The ReplicaSet and the Deployment of a Deployment's pod, by the names Kubernetes gives
    them (``deployment-podtemplatehash-suffix``)."""
    replica_set = pod.rsplit("-", 1)[0]
    return replica_set, replica_set.rsplit("-", 1)[0]


def iso_utc(ts: float | None) -> str | None:
    """Unix seconds → RFC 3339 UTC with milliseconds (for reports)."""
    if ts is None:
        return None
    text = datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")
