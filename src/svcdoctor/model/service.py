"""Facts about Services and autoscalers."""

from __future__ import annotations

from dataclasses import dataclass, field

from svcdoctor.model.finding import Location, ObjectRef


@dataclass(frozen=True, slots=True)
class ServicePort:
    port: int
    target: int | str  # targetPort, defaulted to ``port``
    line: int
    name: str | None = None
    protocol: str = "TCP"
    app_protocol: str | None = None


@dataclass(frozen=True, slots=True)
class Service:
    """A core/v1 Service. ``selector`` is ``None`` for selector-less Services."""

    ref: ObjectRef
    location: Location
    type: str = "ClusterIP"
    selector: dict[str, str] | None = None
    ports: tuple[ServicePort, ...] = ()
    headless: bool = False
    session_affinity: str = "None"
    external_traffic_policy: str | None = None
    annotations: dict[str, str] = field(default_factory=dict)
    traffic_distribution: str | None = None  # spec.trafficDistribution (PreferClose, ...)
    labels: dict[str, str] = field(default_factory=dict)  # its own (what monitors select)
    # publishNotReadyAddresses: its endpoints are every pod, ready or not, terminating or not
    publish_not_ready: bool = False


@dataclass(frozen=True, slots=True)
class Autoscaler:
    """A HorizontalPodAutoscaler: it owns the replica count of its target."""

    ref: ObjectRef
    target: ObjectRef
    min_replicas: int = 1
    location: Location | None = None  # where it was read (None: made in code)
