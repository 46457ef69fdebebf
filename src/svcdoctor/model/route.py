"""Objects that send traffic to Services: Ingresses, Gateway API routes, AWS
TargetGroupBindings, and the classes and Gateways that say which controller serves them.

The readers build these from manifests or a live cluster; ``model.path`` turns them into
the hops in front of each workload. Fields are as written (names resolved later), so a
route to a missing Service or port can be reported with the line that names it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from svcdoctor.model.finding import Location, ObjectRef


class RouteKind(StrEnum):
    """The kinds of object that name Services as backends."""

    INGRESS = "Ingress"
    HTTP_ROUTE = "HTTPRoute"
    GRPC_ROUTE = "GRPCRoute"
    TLS_ROUTE = "TLSRoute"
    TCP_ROUTE = "TCPRoute"
    UDP_ROUTE = "UDPRoute"
    TARGET_GROUP_BINDING = "TargetGroupBinding"  # elbv2.k8s.aws: an ALB/NLB target group


GATEWAY_ROUTES = frozenset(
    {
        RouteKind.HTTP_ROUTE,
        RouteKind.GRPC_ROUTE,
        RouteKind.TLS_ROUTE,
        RouteKind.TCP_ROUTE,
        RouteKind.UDP_ROUTE,
    }
)


class FrontKind(StrEnum):
    """Objects that tell which controller serves a route."""

    INGRESS_CLASS = "IngressClass"
    GATEWAY_CLASS = "GatewayClass"
    GATEWAY = "Gateway"


@dataclass(frozen=True, slots=True)
class BackendRef:
    """A Service a route sends traffic to: ``namespace`` empty means the route's own;
    ``port`` a number or (Ingress) a port name, ``None`` when not written; ``kind`` other
    than ``Service`` is a backend svcdoctor does not follow."""

    name: str
    line: int
    namespace: str = ""
    port: int | str | None = None
    kind: str = "Service"
    group: str = ""


@dataclass(frozen=True, slots=True)
class Route:
    """One Ingress, Gateway API route or TargetGroupBinding.

    ``class_name``: an Ingress' ``spec.ingressClassName`` or its
    ``kubernetes.io/ingress.class`` annotation (``None``: the cluster's default class).
    ``parents``: a route's ``parentRefs`` (Gateways). ``target_type``: a
    TargetGroupBinding's ``spec.targetType`` (``ip`` or ``instance``); ``made_for``: the
    Service or Ingress the AWS Load Balancer Controller made it for (its stack labels), whose
    own load balancer it is the target group of."""

    ref: ObjectRef
    location: Location
    kind: RouteKind
    backends: tuple[BackendRef, ...] = ()
    class_name: str | None = None
    parents: tuple[ObjectRef, ...] = ()
    annotations: dict[str, str] = field(default_factory=dict)
    target_type: str | None = None
    made_for: ObjectRef | None = None

    @property
    def gateway_route(self) -> bool:
        return self.kind in GATEWAY_ROUTES


@dataclass(frozen=True, slots=True)
class Front:
    """An IngressClass (``controller``: its ``spec.controller``), a GatewayClass
    (``controller``: its ``spec.controllerName``) or a Gateway (``class_name``: its
    ``spec.gatewayClassName``). ``default``: an IngressClass marked the default one."""

    ref: ObjectRef
    location: Location
    kind: FrontKind
    controller: str = ""
    class_name: str = ""
    default: bool = False
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReferenceGrant:
    """A ReferenceGrant in the namespace it lives in: routes of the ``sources``
    ``(kind, namespace)`` may reference the ``targets`` ``(kind, name)`` of its namespace
    (``name`` empty: every object of that kind)."""

    ref: ObjectRef
    location: Location
    sources: tuple[tuple[str, str], ...] = ()
    targets: tuple[tuple[str, str], ...] = ()

    def allows(self, route: ObjectRef, namespace: str, kind: str, name: str) -> bool:
        """Whether a route in another namespace (``namespace``: the one it is in, as
        ``route.namespace`` may be unset) may name the object ``kind``/``name``."""
        return any(k == route.kind and ns == namespace for k, ns in self.sources) and any(
            k == kind and n in ("", name) for k, n in self.targets
        )
