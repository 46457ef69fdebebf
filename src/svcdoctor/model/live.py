"""Facts only a running cluster has: terminations, events, endpoint states, kube-proxy.

``scan`` attaches a ``LiveFacts`` to the ``Inventory``; the live rules read it and return
nothing when it is absent, so ``lint`` on files is unchanged. All times are Unix seconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from svcdoctor.model.finding import Location, ObjectRef

LIVE_SCHEME = "cluster:"
"""A live object's ``Location.file`` is ``cluster:CONTEXT`` and its line is 0."""


def live_location(context: str) -> Location:
    """Where a live object is: its cluster context (line 0: there is no file)."""
    return Location(f"{LIVE_SCHEME}{context}", 0)


def is_live(location: Location) -> bool:
    """Whether a finding's location is a live object rather than a line of a file."""
    return location.line == 0 and location.file.startswith(LIVE_SCHEME)


@dataclass(frozen=True, slots=True)
class ContainerExit:
    """A container that terminated: its exit code, the kubelet's reason, when it ended."""

    container: str
    exit_code: int
    reason: str
    finished_at: float | None = None


@dataclass(frozen=True, slots=True)
class PodFacts:
    """One pod as the cluster shows it, with the workload it belongs to.

    ``workload`` is the top-level owner present in the inventory (Deployment, StatefulSet,
    DaemonSet, bare ReplicaSet or the Pod itself). ``deleted_at`` is when deletion started
    (``deletionTimestamp`` minus the grace period); ``grace_ends`` is ``deletionTimestamp``.
    ``stopped_at`` are the times the kubelet was told to stop the pod's containers (Killing
    events), which tells a SIGKILL at the end of the grace period from an OOM kill.
    """

    ref: ObjectRef
    workload: ObjectRef | None
    ready: bool | None = None
    ready_since: float | None = None  # lastTransitionTime of the Ready condition
    ip: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    grace_seconds: int | None = None
    deleted_at: float | None = None
    grace_ends: float | None = None
    terminations: tuple[ContainerExit, ...] = ()  # from ``state`` and ``lastState``
    stopped_at: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class EventCount:
    """Events of one reason about one object, aggregated (``count``, first and last time).

    ``workload`` is the workload of the pod the events are about (resolved through the pod
    or, for pods already gone, the ReplicaSet/StatefulSet/DaemonSet its name comes from).
    """

    reason: str
    object: ObjectRef
    count: int
    first: float | None
    last: float | None
    message: str = ""
    workload: ObjectRef | None = None
    container: str | None = None  # from involvedObject.fieldPath spec.containers{NAME}


@dataclass(frozen=True, slots=True)
class Endpoint:
    """One endpoint address of a Service's EndpointSlices (or core Endpoints)."""

    address: str
    pod: str | None
    ready: bool
    serving: bool
    terminating: bool
    ported: bool = True  # its slice has ports: a named targetPort no pod declares leaves none


@dataclass(frozen=True, slots=True)
class ServiceEndpoints:
    """What the EndpointSlices of one Service hold (``source``: endpointslices|endpoints)."""

    service: ObjectRef
    endpoints: tuple[Endpoint, ...]
    source: str = "endpointslices"

    @property
    def ready(self) -> tuple[Endpoint, ...]:
        return tuple(e for e in self.endpoints if e.ready)


DEFAULT_MIN_SYNC_SECONDS = 1.0  # iptables/nftables minSyncPeriod default
DEFAULT_SYNC_SECONDS = 30.0
DEFAULT_CONNTRACK_MAX_PER_CORE = 32768
DEFAULT_CONNTRACK_MIN = 131072


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    """kube-proxy's KubeProxyConfiguration from the ``kube-system/kube-proxy`` ConfigMap.

    Sync periods are seconds (defaults filled in); conntrack values are as configured,
    ``None`` when unset (kube-proxy's defaults apply). It is reported on like a workload:
    it has a ``ref``, a ``location`` and (no) ``annotations``.
    """

    ref: ObjectRef
    location: Location
    mode: str = "iptables"
    min_sync_seconds: float = DEFAULT_MIN_SYNC_SECONDS
    sync_seconds: float = DEFAULT_SYNC_SECONDS
    conntrack_max_per_core: int | None = None
    conntrack_min: int | None = None
    tcp_established_timeout: float | None = None
    tcp_close_wait_timeout: float | None = None
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def removal_floor(self) -> float:
        """Seconds an endpoint removal can wait on a node: ``minSyncPeriod`` plus one
        second for the controller, the watch and applying the rules."""
        return self.min_sync_seconds + 1.0


@dataclass(frozen=True, slots=True)
class LiveFacts:
    """Everything the live rules read, observed at ``now``."""

    now: float
    context: str = ""
    pods: tuple[PodFacts, ...] = ()
    events: tuple[EventCount, ...] = ()
    endpoints: tuple[ServiceEndpoints, ...] = ()
    proxy: ProxyConfig | None = None
    # The Service datapath: ``kube-proxy``, or ``cilium`` when the ``cilium-config``
    # ConfigMap turns on its kube-proxy replacement (``model.path.Implementation`` values)
    datapath: str = "kube-proxy"
    _by_workload: dict[ObjectRef, list[PodFacts]] = field(default_factory=dict, compare=False)
    _by_ref: dict[ObjectRef, PodFacts] = field(default_factory=dict, compare=False)
    _slices: dict[ObjectRef, ServiceEndpoints] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for p in self.pods:
            self._by_ref[p.ref] = p
            if p.workload is not None:
                self._by_workload.setdefault(p.workload, []).append(p)
        for e in self.endpoints:
            self._slices[e.service] = e

    def pods_of(self, workload: ObjectRef) -> tuple[PodFacts, ...]:
        return tuple(self._by_workload.get(workload, ()))

    def pod(self, ref: ObjectRef) -> PodFacts | None:
        return self._by_ref.get(ref)

    def endpoints_of(self, service: ObjectRef) -> ServiceEndpoints | None:
        return self._slices.get(service)
