"""What a simulation is told: the cluster, the rollout, the pods, the clients, the faults.

Every delay is a :class:`Dist`. The defaults are anchored on public figures, cited beside
each; where no public measurement exists the default says it is an assumption, to be
replaced by your own (``svcdoctor diagnose`` measures the race window from your evidence).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from svcdoctor.errors import SvcdoctorError
from svcdoctor.model.dist import Dist

CONNECTIONS = ("new", "keepalive", "http2")
SHUTDOWNS = ("naive", "graceful")
FAULTS = ("5xx", "reset", "hang")
MAX_REQUESTS = 20_000_000  # a bound on one run's traffic (memory ~ 60 bytes per request)
MAX_CLIENTS = 1_000_000
MAX_ROUTES = 20_000_000  # a bound on pods x routers (each router's list: 16 bytes a cell)

# kube-proxy iptables mode: ``iptables-restore`` time per line of the ruleset. kubernetes
# issue #96018 timed a 695,992-line restore at 12.8 s (≈ 18 µs a line); a Service costs
# about 4 lines and each endpoint 3 (KUBE-SVC jump, KUBE-SEP chain, DNAT). Since 1.26
# (MinimizeIPTablesRestore) partial syncs write only changed chains, so this is the
# worst case: a full sync.
APPLY_BASE_SECONDS = 0.01
APPLY_SECONDS_PER_LINE = 18e-6


class ParamError(SvcdoctorError, ValueError):
    """Parameters that do not describe a possible cluster (one line, names the field)."""


@dataclass(frozen=True, slots=True)
class Propagation:
    """How long each proxy takes to stop (or start) routing to an endpoint.

    For a kube-proxy on a node: ``controller`` (the EndpointSlice controller sees the pod's
    deletion and updates the slice) + ``watch`` (the API server delivers the change to that
    node's watch) + the wait for its next sync (every ``min_sync`` seconds, kube-proxy's
    ``--iptables-min-sync-period``) + the time to apply the rules (``apply``).
    ``override`` replaces controller + watch + apply with one distribution (what
    ``--propagation`` sets, e.g. to a delay measured by ``svcdoctor diagnose``).
    """

    controller: Dist = field(default_factory=lambda: Dist("lognormal", 0.05, 0.5))
    """The EndpointSlice controller reacts to the pod update at once
    (``--endpointslice-updates-batch-period`` defaults to 0); its write is an API call whose
    SLO is p99 ≤ 1 s (sig-scalability ``api_call_latency``). Default: median 50 ms, p99 0.5 s."""
    watch: Dist = field(default_factory=lambda: Dist("lognormal", 0.1, 1.0))
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
    lb: Dist = field(default_factory=lambda: Dist("uniform", 5.0, 20.0))
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


@dataclass(frozen=True, slots=True)
class SimParams:
    """One simulated window: steady traffic, one rolling update of the Deployment (unless
    ``rollout`` is off), every request routed, served or failed."""

    nodes: int = 200
    replicas: int = 10
    max_surge: int = 3  # Kubernetes' default 25 %, rounded up (of 10)
    max_unavailable: int = 2  # Kubernetes' default 25 %, rounded down
    rate: float = 500.0  # requests per second, all clients together
    duration: float = 300.0  # seconds of traffic
    rollout: bool = True
    rollout_at: float = 30.0  # seconds into the window the rollout starts
    startup: Dist = field(default_factory=lambda: Dist("uniform", 3.0, 8.0))
    """A new pod from creation to Ready (scheduling, image, start, first probe): uniform
    3-8 s, an assumption."""
    prestop: float = 0.0  # preStop sleep, seconds
    grace: float = 30.0  # terminationGracePeriodSeconds (Kubernetes' default 30 s)
    shutdown: str = "naive"  # naive: exits at SIGTERM; graceful: drains in-flight, then exits
    latency: Dist = field(default_factory=lambda: Dist("lognormal", 0.02, 0.25))
    """Request latency: median 20 ms, p99 250 ms, an assumption; use your own histogram's."""
    clients: int = 0  # calling pods, spread over the nodes (0: one per node)
    connection: str = "new"  # new | keepalive | http2
    max_connection_age: float | None = None  # keepalive/http2: reconnect after this long
    retries: int = 0  # client retries of a failed idempotent request
    idempotent: float = 1.0  # the share of requests that may be retried
    timeout: float = 5.0  # the client's timeout (a dropped SYN or a hung backend)
    bad_backends: int = 0
    fault: str = "5xx"  # what a bad backend does: answer 5xx, reset, or hang
    conntrack_max: int = 131072
    """nf_conntrack_max: kube-proxy sets max(32768 per core, 131072) (``--conntrack-min``,
    kube-proxy reference)."""
    conntrack_timewait: float = 120.0
    """Closed connections stay TIME_WAIT 120 s: the kernel default of
    ``nf_conntrack_tcp_timeout_time_wait`` (nf_conntrack sysctl reference)."""
    node_conn_rate: float = 0.0  # other new connections per second on each node
    ingress_share: float = 0.0  # share of requests entering through ingress-nginx
    ingress_replicas: int = 2
    lb_share: float = 0.0  # share of requests from a cloud LB straight to pod IPs
    propagation: Propagation = field(default_factory=Propagation)

    @property
    def client_count(self) -> int:
        return self.clients or self.nodes

    @property
    def routers(self) -> int:
        """The proxies that hold an endpoint list: every node's kube-proxy, the ingress
        controller replicas and the load balancer (when they carry traffic)."""
        return self.nodes + self.ingress_routers + (1 if self.lb_share > 0 else 0)

    @property
    def ingress_routers(self) -> int:
        return self.ingress_replicas if self.ingress_share > 0 else 0

    def validate(self) -> SimParams:
        """Raise ParamError naming the first impossible field; return self."""
        positive_ints = ("nodes", "replicas", "ingress_replicas", "conntrack_max")
        for name in positive_ints:
            if getattr(self, name) < 1:
                raise ParamError(f"{name.replace('_', '-')} must be at least 1")
        for name in ("max_surge", "max_unavailable", "clients", "retries", "bad_backends"):
            if getattr(self, name) < 0:
                raise ParamError(f"{name.replace('_', '-')} must not be negative")
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, float) and (not math.isfinite(value) or value < 0):
                raise ParamError(f"{f.name.replace('_', '-')} must be a finite number ≥ 0")
        if self.rate <= 0 or self.duration <= 0:
            raise ParamError("rate and duration must be greater than 0")
        if self.rate * self.duration > MAX_REQUESTS:
            raise ParamError(
                f"rate x duration is {self.rate * self.duration:,.0f} requests; "
                f"one run simulates at most {MAX_REQUESTS:,}"
            )
        cells = self.replicas * (2 if self.rollout else 1) * self.routers
        if cells > MAX_ROUTES:
            raise ParamError(
                f"pods x routers is {cells:,} (every router's list of every pod); one run "
                f"holds at most {MAX_ROUTES:,}: lower nodes or replicas"
            )
        if self.rollout and self.rollout_at >= self.duration:
            raise ParamError(
                f"rollout-at ({self.rollout_at:g} s) must fall inside the window "
                f"(duration {self.duration:g} s)"
            )
        if self.rollout and self.max_surge == 0 and self.max_unavailable == 0:
            raise ParamError("max-surge and max-unavailable cannot both be 0 (as in Kubernetes)")
        if self.bad_backends > self.replicas:
            raise ParamError(f"bad-backends ({self.bad_backends}) exceeds replicas")
        if self.ingress_share + self.lb_share > 1:
            raise ParamError("ingress-share + lb-share must not exceed 1")
        if self.idempotent > 1:
            raise ParamError("idempotent is a share: between 0 and 1")
        if self.max_connection_age is not None and self.max_connection_age <= 0:
            raise ParamError("max-connection-age must be greater than 0")
        if self.connection not in CONNECTIONS:
            raise ParamError(f"connection must be one of {', '.join(CONNECTIONS)}")
        if self.shutdown not in SHUTDOWNS:
            raise ParamError(f"shutdown must be one of {', '.join(SHUTDOWNS)}")
        if self.fault not in FAULTS:
            raise ParamError(f"fault must be one of {', '.join(FAULTS)}")
        if self.latency.high >= self.timeout:
            raise ParamError(
                f"latency {self.latency} reaches {self.latency.high:.3g} s, past the client "
                f"timeout ({self.timeout:g} s): requests that slow fail whatever the rollout; "
                "give your client's --timeout"
            )
        if self.clients > MAX_CLIENTS:
            raise ParamError(f"clients: at most {MAX_CLIENTS:,}")
        if self.connection == "keepalive":
            per_client = self.rate / self.client_count
            median = self.latency.quantile(0.5)
            if per_client * median >= 1:
                raise ParamError(
                    f"a keep-alive client is one connection: {per_client:.0f} requests/s each "
                    f"at a {median * 1000:.0f} ms median latency cannot be carried; add clients"
                )
        if self.propagation.min_sync < 0 or not math.isfinite(self.propagation.min_sync):
            raise ParamError("min-sync-period must be a finite number ≥ 0")
        return self


def resolve_count(value: str, replicas: int, round_up: bool, name: str) -> int:
    """A Deployment's ``maxSurge``/``maxUnavailable``: an integer or a percentage of replicas
    (surge rounds up, unavailable rounds down, as the Deployment controller does)."""
    text = value.strip()
    try:
        if text.endswith("%"):
            share = float(text[:-1]) / 100 * replicas
            count = math.ceil(share - 1e-9) if round_up else math.floor(share + 1e-9)
        else:
            count = int(text)
    except ValueError:
        raise ParamError(f"{name}: {value!r} is neither an integer nor a percentage") from None
    if count < 0:
        raise ParamError(f"{name} must not be negative")
    return count
