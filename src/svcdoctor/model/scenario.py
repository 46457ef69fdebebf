"""What a lab run and a simulation both describe: the pods, their clients, how fast the
proxies learn of a change, and the Deployment that rolls.

``lab`` runs a :class:`ScenarioSpec` for real on this machine; ``simulate`` takes the same
record (``SimParams.of``) and models it at cluster scale. Modes are enums whose values are
the words the command line and the JSON outputs use.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

from svcdoctor.model.dist import Dist, DistKind

# kube-proxy iptables mode: ``iptables-restore`` time per line of the ruleset. kubernetes
# issue #96018 timed a 695,992-line restore at 12.8 s (≈ 18 µs a line); a Service costs
# about 4 lines and each endpoint 3 (KUBE-SVC jump, KUBE-SEP chain, DNAT). Since 1.26
# (MinimizeIPTablesRestore) partial syncs write only changed chains, so this is the
# worst case: a full sync.
APPLY_BASE_SECONDS = 0.01
APPLY_SECONDS_PER_LINE = 18e-6


class ShutdownMode(StrEnum):
    """What the app does at SIGTERM."""

    NAIVE = "naive"  # exits at once
    GRACEFUL = "graceful"  # drains in-flight requests (Connection: close), then exits


class ConnectionMode(StrEnum):
    """How a client reaches the Service."""

    NEW = "new"  # a new connection per request
    KEEPALIVE = "keepalive"  # one HTTP/1.1 keep-alive connection, a request at a time
    HTTP2 = "http2"  # one long-lived connection, requests multiplexed (simulate only)


class FaultMode(StrEnum):
    """What a bad backend (ready, but broken) does to a real request."""

    NONE = "none"  # a healthy pod
    HTTP_5XX = "5xx"  # answers 503
    RESET = "reset"  # resets the connection
    HANG = "hang"  # never answers (the client times out)


class Event(StrEnum):
    """What takes the pods away (``simulate --event``): a Deployment's rolling update, a
    node drain (its pods evicted, the PodDisruptionBudget honoured, replaced elsewhere) or a
    scale-down (pods removed without replacement)."""

    ROLLOUT = "rollout"
    DRAIN = "drain"
    SCALE_DOWN = "scale-down"


BAD_FAULTS = (FaultMode.HTTP_5XX, FaultMode.RESET, FaultMode.HANG)  # what a bad backend may do

E = TypeVar("E", bound=StrEnum)


def as_mode(kind: type[E], value: object) -> object:
    """``value`` as a member of ``kind`` when it names one; else unchanged (for the
    validation that reports it). Records take the words too: ``PodSpec(shutdown="naive")``."""
    if isinstance(value, str) and not isinstance(value, kind):
        return kind._value2member_map_.get(value, value)
    return value


def modes(kind: type[StrEnum], *members: StrEnum) -> tuple[str, ...]:
    """The words of ``members`` (all of ``kind`` when none are given): command-line choices."""
    return tuple(m.value for m in (members or tuple(kind)))


@dataclass(frozen=True, slots=True)
class PodSpec:
    """One pod of the Deployment: its shutdown and how it serves. ``slow_*``,
    ``shutdown_delay`` and ``prestop_fails`` are the lab's; the simulation has no
    counterpart for them."""

    shutdown: ShutdownMode = ShutdownMode.NAIVE
    prestop: float = 0.0  # preStop sleep, seconds
    grace: float = 30.0  # terminationGracePeriodSeconds
    latency: Dist = field(default_factory=lambda: Dist(DistKind.EXP, 0.005))  # request latency, s
    slow_share: float = 0.0  # share of requests that take slow_seconds instead
    slow_seconds: float = 0.0
    shutdown_delay: float = 0.0  # graceful: seconds the app keeps accepting after SIGTERM
    prestop_fails: bool = False  # the hook fails at once (no sleep binary in the image)
    keepalive_timeout: float | None = None  # the lab's app closes connections idle longer

    def __post_init__(self) -> None:
        object.__setattr__(self, "shutdown", as_mode(ShutdownMode, self.shutdown))


@dataclass(frozen=True, slots=True)
class LoadSpec:
    """The clients: how many, how fast all together, how they connect and retry."""

    rate: float = 200.0  # requests per second, all clients together
    clients: int = 8
    connection: ConnectionMode = ConnectionMode.NEW
    max_connection_age: float | None = None  # keepalive: reconnect after this many seconds
    retries: int = 0  # client retries of a failed request (idempotent GETs)
    max_requests: int = 200_000  # a bound on the traffic, whatever the rate and the run's length

    def __post_init__(self) -> None:
        object.__setattr__(self, "connection", as_mode(ConnectionMode, self.connection))


@dataclass(frozen=True, slots=True)
class Propagation:
    """How long each proxy takes to stop (or start) routing to an endpoint.

    For a kube-proxy on a node: ``controller`` (the EndpointSlice controller sees the pod's
    deletion and updates the slice) + ``watch`` (the API server delivers the change to that
    node's watch) + the wait for its next sync (every ``min_sync`` seconds, kube-proxy's
    ``--iptables-min-sync-period``) + the time to apply the rules (``apply``).
    ``override`` replaces controller + watch + apply with one distribution (what
    ``--propagation`` sets, e.g. to a delay measured by ``svcdoctor diagnose``; the lab
    draws it per node and change, in order: a change never overtakes an earlier one).
    """

    controller: Dist = field(default_factory=lambda: Dist(DistKind.LOGNORMAL, 0.05, 0.5))
    """The EndpointSlice controller reacts to the pod update at once
    (``--endpointslice-updates-batch-period`` defaults to 0); its write is an API call whose
    SLO is p99 ≤ 1 s (sig-scalability ``api_call_latency``). Default: median 50 ms, p99 0.5 s."""
    watch: Dist = field(default_factory=lambda: Dist(DistKind.LOGNORMAL, 0.1, 1.0))
    """Watch delivery to each kube-proxy: within the network-programming-latency SLO
    (sig-scalability, measured by clusterloader2: p99 ≤ 30 s up to 5,000 nodes), typically
    sub-second. Default median 0.1 s, p99 1 s: an assumption inside that bound."""
    min_sync: float = 1.0
    """kube-proxy's ``--iptables-min-sync-period``: 1 s by default (kube-proxy reference);
    GKE has used 10 s."""
    services: int = 100
    """Services in the cluster (with ``endpoints``, the size of each node's ruleset)."""
    endpoints: int = 1000
    """Endpoints of all Services together."""
    override: Dist | None = None
    """Replaces controller + watch + apply (``--propagation``)."""
    ingress_sync: float = 1 / 0.3
    """ingress-nginx reads EndpointSlices itself and reconfigures no more often than
    ``--sync-rate-limit`` (0.3 syncs/s by default: every 3.3 s)."""
    lb: Dist = field(default_factory=lambda: Dist(DistKind.UNIFORM, 5.0, 20.0))
    """A cloud load balancer sending straight to pod IPs (AWS IP targets, GKE NEGs) stops
    using a deregistered target after seconds to tens of seconds, and the providers' docs
    advise a preStop sleep for it; uniform 5-20 s is an assumption: measure yours."""

    @property
    def apply(self) -> float:
        """Seconds to apply a full iptables ruleset of this cluster's size."""
        lines = 4 * self.services + 3 * self.endpoints
        return APPLY_BASE_SECONDS + APPLY_SECONDS_PER_LINE * lines

    @property
    def sync_period(self) -> float:
        """A busy kube-proxy syncs every min_sync, or back to back when a sync takes longer."""
        return max(self.min_sync, self.apply)

    def draw(self, rng: random.Random) -> float:
        """One proxy's delay from the change to its rules, the min-sync wait aside."""
        if self.override is not None:
            return self.override.draw(rng)
        return self.controller.draw(rng) + self.watch.draw(rng) + self.apply


@dataclass(frozen=True, slots=True)
class LoadBalancerSpec:
    """A load balancer in IP mode (it targets pod IPs) in front of the pods: the share of
    the requests it carries, its target group's deregistration delay (the requests in
    flight to a deregistered target are cut when it ends; 300 s is ELB's default
    ``deregistration_delay.timeout_seconds``), and whether the pods carry its readiness
    gate (a new pod is Ready once the LB registered it). Its leg, from a pod's deletion
    until it sends the pod no new request, is ``Propagation.lb``."""

    share: float = 1.0
    deregistration: float = 300.0
    readiness_gate: bool = False


LAB_PROPAGATION = Propagation(override=Dist(DistKind.UNIFORM, 0.5, 1.5), min_sync=0.0)
"""The lab's nodes: each change applied 0.5-1.5 s after it, unbatched."""


@dataclass(frozen=True, slots=True)
class ScenarioSpec:
    """A Deployment behind one Service under load: the nodes, the pods and their rolling
    update (or the drain or scale-down: ``event``), the clients, the propagation, a load
    balancer in front, and the bad backends (``bad`` of them, failing as ``fault`` says)."""

    nodes: int = 2
    replicas: int = 4
    rollout: bool = True
    max_surge: int = 1
    max_unavailable: int = 0
    bad: int = 0
    fault: FaultMode = FaultMode.HTTP_5XX
    pod: PodSpec = field(default_factory=PodSpec)
    load: LoadSpec = field(default_factory=LoadSpec)
    propagation: Propagation = LAB_PROPAGATION
    event: Event = Event.ROLLOUT  # what takes the pods away (drain: node 0's)
    pdb_max_unavailable: int | None = None  # drain: the PodDisruptionBudget's (None: none)
    lb: LoadBalancerSpec | None = None  # a load balancer in front (None: none)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fault", as_mode(FaultMode, self.fault))
        object.__setattr__(self, "event", as_mode(Event, self.event))
