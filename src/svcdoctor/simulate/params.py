"""What a simulation is told: the cluster, the rollout, the pods, the clients, the faults.

Every delay is a :class:`Dist`. The defaults are anchored on public figures, cited beside
each; where no public measurement exists the default says it is an assumption, to be
replaced by your own (``svcdoctor diagnose`` measures the race window from your evidence).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from svcdoctor.errors import SvcdoctorError
from svcdoctor.model.dist import Dist, DistKind
from svcdoctor.model.hops import DEFAULT_DEREGISTRATION_SECONDS
from svcdoctor.model.scenario import (
    BAD_FAULTS,
    ConnectionMode,
    Event,
    FaultMode,
    LoadBalancerSpec,
    Propagation,
    ScenarioSpec,
    ShutdownMode,
    as_mode,
    modes,
)

MAX_REQUESTS = 20_000_000  # a bound on one run's traffic (memory ~ 60 bytes per request)
MAX_CLIENTS = 1_000_000
MAX_ROUTES = 20_000_000  # a bound on pods x routers (each router's list: 16 bytes a cell)


class ParamError(SvcdoctorError, ValueError):
    """Parameters that do not describe a possible cluster (one line, names the field)."""


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
    startup: Dist = field(default_factory=lambda: Dist(DistKind.UNIFORM, 3.0, 8.0))
    """A new pod from creation to Ready (scheduling, image, start, first probe): uniform
    3-8 s, an assumption."""
    prestop: float = 0.0  # preStop sleep, seconds
    grace: float = 30.0  # terminationGracePeriodSeconds (Kubernetes' default 30 s)
    shutdown: ShutdownMode = ShutdownMode.NAIVE
    latency: Dist = field(default_factory=lambda: Dist(DistKind.LOGNORMAL, 0.02, 0.25))
    """Request latency: median 20 ms, p99 250 ms, an assumption; use your own histogram's."""
    clients: int = 0  # calling pods, spread over the nodes (0: one per node)
    connection: ConnectionMode = ConnectionMode.NEW
    max_connection_age: float | None = None  # keepalive/http2: reconnect after this long
    retries: int = 0  # client retries of a failed idempotent request
    idempotent: float = 1.0  # the share of requests that may be retried
    timeout: float = 5.0  # the client's timeout (a dropped SYN or a hung backend)
    bad_backends: int = 0
    fault: FaultMode = FaultMode.HTTP_5XX  # what a bad backend does
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
    lb_deregistration: float = DEFAULT_DEREGISTRATION_SECONDS
    """The LB target group's deregistration delay: from the deregistration (the pod's
    deletion) the LB lets requests in flight on the target finish for this long, then cuts
    them (ELB ``deregistration_delay.timeout_seconds``, 300 s by default:
    https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-target-groups.html#deregistration-delay)."""
    lb_readiness_gate: bool = False
    """The pods carry the load balancer's readiness gate: a new pod is Ready (for the
    Deployment and every router) only once the LB has registered it, its leg after the
    container is ready (an assumption: registration as slow as deregistration). AWS: the
    Namespace label ``elbv2.k8s.aws/pod-readiness-gate-inject: enabled``
    (https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/deploy/pod_readiness_gate/);
    GKE NEGs: ``cloud.google.com/load-balancer-neg-ready``. Without it the rollout goes on
    as soon as the container is Ready and the LB registers the pod later."""
    sidecar_drain: float | None = None
    """The pod's own mesh proxy (not a native sidecar): it gets SIGTERM at the deletion (the
    app's preStop does not hold it) and takes connections for this many seconds more, then
    stops, cutting what is in flight (Istio's terminationDrainDuration, 5 s by default:
    istio/api mesh/v1alpha1/proxy.proto; ``model.hops``). None: no sidecar, or a native one
    (stopped after the app)."""
    event: Event = Event.ROLLOUT
    """What takes pods away at ``rollout_at`` (``rollout`` on): see ``simulate.rollout``."""
    pdb_max_unavailable: int | None = None
    """drain: the PodDisruptionBudget's maxUnavailable (None: no budget, every pod of the
    node evicted at once)."""
    scale_to: int | None = None  # scale-down: the replicas left (None: half, rounded down)

    def __post_init__(self) -> None:
        for name, kind, _ in _MODES:
            object.__setattr__(self, name, as_mode(kind, getattr(self, name)))

    @classmethod
    def of(cls, scenario: ScenarioSpec, **simulation: Any) -> SimParams:
        """The simulation of a scenario (the lab's): the same pods, rollout, clients, rate,
        latency and propagation; ``simulation`` sets the rest (``duration``...). The lab's
        slow requests, shutdown delay and failing hooks have no counterpart here."""
        pod, load = scenario.pod, scenario.load
        return cls(
            nodes=scenario.nodes,
            replicas=scenario.replicas,
            max_surge=scenario.max_surge,
            max_unavailable=scenario.max_unavailable,
            rollout=scenario.rollout,
            bad_backends=scenario.bad,
            fault=scenario.fault,
            propagation=scenario.propagation,
            prestop=pod.prestop,
            grace=pod.grace,
            shutdown=pod.shutdown,
            latency=pod.latency,
            rate=load.rate,
            clients=load.clients,
            connection=load.connection,
            max_connection_age=load.max_connection_age,
            retries=load.retries,
            event=scenario.event,
            pdb_max_unavailable=scenario.pdb_max_unavailable,
            **_lb_of(scenario.lb),
            **simulation,
        )

    @property
    def event_text(self) -> str:
        """The event in a few words: ``rollout maxSurge 3 / maxUnavailable 2``."""
        if self.event is Event.DRAIN:
            budget = self.pdb_max_unavailable
            return "drain of node 0" + (f" (PDB maxUnavailable {budget})" if budget else "")
        if self.event is Event.SCALE_DOWN:
            return f"scale-down to {self.remaining}"
        return f"rollout maxSurge {self.max_surge} / maxUnavailable {self.max_unavailable}"

    @property
    def remaining(self) -> int:
        """scale-down: the replicas left."""
        return self.replicas // 2 if self.scale_to is None else self.scale_to

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
        rolling = self.rollout and self.event is Event.ROLLOUT
        if rolling and self.max_surge == 0 and self.max_unavailable == 0:
            raise ParamError("max-surge and max-unavailable cannot both be 0 (as in Kubernetes)")
        if self.bad_backends > self.replicas:
            raise ParamError(f"bad-backends ({self.bad_backends}) exceeds replicas")
        if self.ingress_share + self.lb_share > 1:
            raise ParamError("ingress-share + lb-share must not exceed 1")
        if self.idempotent > 1:
            raise ParamError("idempotent is a share: between 0 and 1")
        if self.max_connection_age is not None and self.max_connection_age <= 0:
            raise ParamError("max-connection-age must be greater than 0")
        for name, kind, allowed in _MODES:
            if getattr(self, name) not in allowed:
                raise ParamError(f"{name} must be one of {', '.join(modes(kind, *allowed))}")
        if self.latency.high >= self.timeout:
            raise ParamError(
                f"latency {self.latency} reaches {self.latency.high:.3g} s, past the client "
                f"timeout ({self.timeout:g} s): requests that slow fail whatever the rollout; "
                "give your client's --timeout"
            )
        if self.clients > MAX_CLIENTS:
            raise ParamError(f"clients: at most {MAX_CLIENTS:,}")
        if self.connection is ConnectionMode.KEEPALIVE:
            per_client = self.rate / self.client_count
            median = self.latency.quantile(0.5)
            if per_client * median >= 1:
                raise ParamError(
                    f"a keep-alive client is one connection: {per_client:.0f} requests/s each "
                    f"at a {median * 1000:.0f} ms median latency cannot be carried; add clients"
                )
        if self.sidecar_drain is not None and not 0 <= self.sidecar_drain < math.inf:
            raise ParamError("sidecar-drain must be a finite number ≥ 0")
        if self.rollout and self.event is Event.DRAIN and self.nodes < 2:
            raise ParamError(
                "a drain needs at least 2 nodes: the evicted pods' replacements (and the "
                "node's clients) need another node"
            )
        if self.pdb_max_unavailable is not None and self.pdb_max_unavailable < 1:
            raise ParamError(
                "pdb-max-unavailable must be at least 1 (0 blocks every eviction: the drain "
                "never ends)"
            )
        if self.scale_to is not None and not 0 <= self.scale_to < self.replicas:
            raise ParamError(f"scale-to must be between 0 and replicas - 1 ({self.replicas - 1})")
        if self.propagation.min_sync < 0 or not math.isfinite(self.propagation.min_sync):
            raise ParamError("min-sync-period must be a finite number ≥ 0")
        return self


def _lb_of(lb: LoadBalancerSpec | None) -> dict[str, Any]:
    """The simulation's fields of a scenario's load balancer (none: no share)."""
    if lb is None:
        return {}
    return {
        "lb_share": lb.share,
        "lb_deregistration": lb.deregistration,
        "lb_readiness_gate": lb.readiness_gate,
    }


_MODES: tuple[tuple[str, type[Any], tuple[Any, ...]], ...] = (
    ("connection", ConnectionMode, tuple(ConnectionMode)),
    ("event", Event, tuple(Event)),
    ("shutdown", ShutdownMode, tuple(ShutdownMode)),
    ("fault", FaultMode, BAD_FAULTS),  # a healthy pod is no bad backend's fault
)


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
