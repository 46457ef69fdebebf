"""The path a request takes to a pod: the hops from the edge in, each with its leg of the
endpoint-removal race and its drain semantics.

``problem.md``: when a pod is deleted, every component that sends it traffic must learn of
the removal, each in its own time (kube-proxy on every node, an ingress controller, a cloud
load balancer). The preStop delay must cover the *slowest* of them, not kube-proxy's alone.
``trace_paths`` infers the hops of every Service-backed workload from what an ``Inventory``
holds (manifests or a live cluster): which routes and load balancers send to its Services,
which mesh proxy runs beside it, which datapath the cluster has. Each hop's leg is a
documented default (``PROFILES``, with its source) unless the user's configuration says
otherwise; the settings a hop reads from its objects (a deregistration delay, a sidecar's
drain) are kept with the line that sets them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import PurePath

import yaml

from svcdoctor.model.duration import GO, parse_duration
from svcdoctor.model.finding import ObjectRef
from svcdoctor.model.inventory import DEFAULT_NAMESPACE, Inventory, file_distance, related
from svcdoctor.model.live import is_live
from svcdoctor.model.resource import Resource
from svcdoctor.model.route import BackendRef, Front, FrontKind, Route, RouteKind
from svcdoctor.model.service import Service
from svcdoctor.model.workload import Workload


class HopKind(StrEnum):
    """Where on the path a hop stands, edge first."""

    LOAD_BALANCER = "load-balancer"  # a cloud load balancer
    INGRESS = "ingress"  # an Ingress controller
    GATEWAY = "gateway"  # a Gateway API implementation
    MESH = "mesh"  # the callers' mesh proxies, balancing over the pods
    DATAPATH = "datapath"  # kube-proxy or its eBPF replacement on every node
    SIDECAR = "sidecar"  # the pod's own mesh proxy: it drains, it forwards nothing new


class Implementation(StrEnum):
    """The software behind a hop."""

    AWS_ALB = "aws-alb"
    AWS_NLB = "aws-nlb"
    AWS_TARGET_GROUP = "aws-target-group"  # a TargetGroupBinding: an ALB's or an NLB's
    GKE_NEG = "gke-neg"  # GKE container-native load balancing (NEG backends)
    GKE_LB = "gke-lb"  # GKE load balancer with instance-group backends
    AZURE_APPGW = "azure-appgw"  # Application Gateway Ingress Controller (pod IPs)
    CLOUD_LB = "cloud-lb"  # another load balancer of a LoadBalancer Service (node targets)
    INGRESS_NGINX = "ingress-nginx"
    TRAEFIK = "traefik"
    HAPROXY = "haproxy-ingress"
    INGRESS = "ingress"  # an Ingress controller svcdoctor does not know
    ENVOY_GATEWAY = "envoy-gateway"
    ISTIO_GATEWAY = "istio-gateway"
    GATEWAY = "gateway"  # a Gateway API implementation svcdoctor does not know
    ISTIO = "istio"  # callers' Istio sidecars, balancing over the pods
    LINKERD = "linkerd"  # callers' Linkerd proxies
    ISTIO_SIDECAR = "istio-sidecar"  # the pod's own Envoy
    LINKERD_PROXY = "linkerd-proxy"  # the pod's own linkerd-proxy
    KUBE_PROXY = "kube-proxy"
    CILIUM = "cilium"  # Cilium's kube-proxy replacement


@dataclass(frozen=True, slots=True)
class Profile:
    """What is known of an implementation: its name for people, where it stands, its leg
    (``None``: the cluster's endpoint propagation, ``--propagation-seconds``), where that
    number comes from, and whether it balances each request (layer 7: HTTP/2 streams and
    gRPC calls are spread, not pinned to a connection)."""

    label: str
    kind: HopKind
    leg_seconds: float | None
    source: str
    per_request: bool = False


_KUBE = "https://kubernetes.io/docs/concepts/services-networking/endpoint-slices/"
# AWS: no documented figure; the controller's maintainers say a preStop sleep is needed
# because deregistration takes time to reach the ELB data plane (aws-load-balancer-controller
# #2366); users report 25 s (#1064) to 60-70 s (#2106) for ALBs and up to 2 minutes for
# NLB IP targets (#2366).
_ALB = "aws-load-balancer-controller #1064, #2106, #2366"
_NLB = "aws-load-balancer-controller #2366 (NLB IP targets)"
# GKE removes a terminating pod from its NEG at once (ingress-gce #1574), yet the load
# balancer keeps sending for a while; Google's KB example sleeps 40 s.
_NEG = "https://cloud.google.com/knowledge/kb/502-503-errors-on-external-http-s-load-balancer-000006416"
# AGIC: "between a second and a few minutes"; its guide asks for a preStop of at least 90 s.
_AGIC = (
    "https://azure.github.io/application-gateway-kubernetes-ingress/how-tos/"
    "minimize-downtime-during-deployments/"
)
_CILIUM = "https://docs.cilium.io/en/stable/network/kubernetes/kubeproxy-free/"

# The legs: seconds from a pod's deletion until the hop stops sending it new requests.
# Controllers that watch EndpointSlices and program themselves (ingress controllers,
# gateways, mesh control planes, kube-proxy, Cilium) share the cluster's propagation
# assumption (``--propagation-seconds``); cloud load balancers deregister through a cloud
# API, which takes far longer. ``[tool.svcdoctor.hops]`` overrides any of them.
PROFILES: dict[Implementation, Profile] = {
    Implementation.AWS_ALB: Profile("AWS ALB", HopKind.LOAD_BALANCER, 30.0, _ALB, True),
    Implementation.AWS_NLB: Profile("AWS NLB", HopKind.LOAD_BALANCER, 60.0, _NLB),
    Implementation.AWS_TARGET_GROUP: Profile("AWS target group", HopKind.LOAD_BALANCER, 60.0, _NLB),
    Implementation.GKE_NEG: Profile(
        "GKE NEG load balancer", HopKind.LOAD_BALANCER, 40.0, _NEG, True
    ),
    Implementation.GKE_LB: Profile("GKE load balancer", HopKind.LOAD_BALANCER, None, _NEG, True),
    Implementation.AZURE_APPGW: Profile(
        "Azure Application Gateway", HopKind.LOAD_BALANCER, 90.0, _AGIC, True
    ),
    Implementation.CLOUD_LB: Profile("cloud load balancer", HopKind.LOAD_BALANCER, None, _KUBE),
    Implementation.INGRESS_NGINX: Profile("ingress-nginx", HopKind.INGRESS, None, _KUBE, True),
    Implementation.TRAEFIK: Profile("Traefik", HopKind.INGRESS, None, _KUBE, True),
    Implementation.HAPROXY: Profile("HAProxy ingress", HopKind.INGRESS, None, _KUBE, True),
    Implementation.INGRESS: Profile("ingress controller", HopKind.INGRESS, None, _KUBE, True),
    Implementation.ENVOY_GATEWAY: Profile("Envoy Gateway", HopKind.GATEWAY, None, _KUBE, True),
    Implementation.ISTIO_GATEWAY: Profile("Istio gateway", HopKind.GATEWAY, None, _KUBE, True),
    Implementation.GATEWAY: Profile("Gateway API gateway", HopKind.GATEWAY, None, _KUBE, True),
    Implementation.ISTIO: Profile("Istio sidecars", HopKind.MESH, None, _KUBE, True),
    Implementation.LINKERD: Profile("Linkerd proxies", HopKind.MESH, None, _KUBE, True),
    Implementation.ISTIO_SIDECAR: Profile("Istio sidecar", HopKind.SIDECAR, 0.0, _KUBE),
    Implementation.LINKERD_PROXY: Profile("linkerd-proxy", HopKind.SIDECAR, 0.0, _KUBE),
    Implementation.KUBE_PROXY: Profile("kube-proxy", HopKind.DATAPATH, None, _KUBE),
    Implementation.CILIUM: Profile(
        "Cilium (kube-proxy replacement)", HopKind.DATAPATH, None, _CILIUM
    ),
}

# Which controller serves an IngressClass / GatewayClass (``spec.controller`` /
# ``spec.controllerName``), and the well-known class names used without a class object.
CONTROLLERS: dict[str, Implementation] = {
    "k8s.io/ingress-nginx": Implementation.INGRESS_NGINX,
    "ingress.k8s.aws/alb": Implementation.AWS_ALB,
    "traefik.io/ingress-controller": Implementation.TRAEFIK,
    "haproxy.org/ingress-controller/haproxy": Implementation.HAPROXY,
    "azure/application-gateway": Implementation.AZURE_APPGW,
    "gateway.envoyproxy.io/gatewayclass-controller": Implementation.ENVOY_GATEWAY,
    "istio.io/gateway-controller": Implementation.ISTIO_GATEWAY,
    "istio.io/ingress-controller": Implementation.ISTIO_GATEWAY,
    # GKE's Gateway controller: container-native load balancing (NEGs) always
    # (https://cloud.google.com/kubernetes-engine/docs/concepts/gateway-api)
    "networking.gke.io/gateway": Implementation.GKE_NEG,
}
# Implementations a GatewayClass may name that are cloud load balancers, not proxies.
GATEWAY_LBS = frozenset({Implementation.GKE_NEG})
# GKE Ingress classes that always use NEGs: internal and multi-cluster Ingress
# (https://cloud.google.com/kubernetes-engine/docs/concepts/container-native-load-balancing)
NEG_CLASSES = frozenset({"gce-internal", "gce-multi-cluster"})
CLASS_NAMES: dict[str, Implementation] = {
    "nginx": Implementation.INGRESS_NGINX,
    "alb": Implementation.AWS_ALB,
    "traefik": Implementation.TRAEFIK,
    "haproxy": Implementation.HAPROXY,
    "gce": Implementation.GKE_LB,
    "gce-internal": Implementation.GKE_LB,
    "gce-multi-cluster": Implementation.GKE_LB,
    "azure/application-gateway": Implementation.AZURE_APPGW,
    "azure-application-gateway": Implementation.AZURE_APPGW,
    "istio": Implementation.ISTIO_GATEWAY,
    "envoy-gateway": Implementation.ENVOY_GATEWAY,
    "eg": Implementation.ENVOY_GATEWAY,
}

# Annotations and labels the hops read. AWS: aws-load-balancer-controller
# docs/guide/{ingress,service}/annotations.md, docs/deploy/pod_readiness_gate.md; GKE:
# ingress-gce pkg/negannotation, pkg/neg/types/shared/types.go; AGIC: learn.microsoft.com
# application-gateway/ingress-controller-annotations; Istio: istio/api
# annotation/annotations.yaml, label/labels.yaml; Linkerd: linkerd2 pkg/k8s/labels.go.
INGRESS_CLASS = "kubernetes.io/ingress.class"
ALB_TARGET_TYPE = "alb.ingress.kubernetes.io/target-type"  # ip | instance (default)
ALB_TG_ATTRIBUTES = "alb.ingress.kubernetes.io/target-group-attributes"
NLB_TYPE = "service.beta.kubernetes.io/aws-load-balancer-type"  # external | nlb-ip | nlb
NLB_TARGET_TYPE = "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type"
NLB_TG_ATTRIBUTES = "service.beta.kubernetes.io/aws-load-balancer-target-group-attributes"
ALB_GATE_LABEL = "elbv2.k8s.aws/pod-readiness-gate-inject"  # on the Namespace: enabled
GKE_NEG = "cloud.google.com/neg"
NEG_READY_GATE = "cloud.google.com/load-balancer-neg-ready"
NGINX_BACKEND_PROTOCOL = "nginx.ingress.kubernetes.io/backend-protocol"
NGINX_SERVICE_UPSTREAM = "nginx.ingress.kubernetes.io/service-upstream"
ISTIO_INJECT = "sidecar.istio.io/inject"
ISTIO_NS_LABEL = "istio-injection"
ISTIO_REV = "istio.io/rev"
ISTIO_PROXY_CONFIG = "proxy.istio.io/config"
ISTIO_NATIVE = "sidecar.istio.io/nativeSidecar"
ISTIO_TEMPLATES = "inject.istio.io/templates"
LINKERD_INJECT = "linkerd.io/inject"
LINKERD_WAIT = "config.alpha.linkerd.io/proxy-wait-before-exit-seconds"
LINKERD_NATIVE = "config.linkerd.io/proxy-enable-native-sidecar"  # alpha/beta forms deprecated
LINKERD_NATIVE_OLD = (
    "config.alpha.linkerd.io/proxy-enable-native-sidecar",
    "config.beta.linkerd.io/proxy-enable-native-sidecar",
)

GKE_NEG_NOTE = (
    "GKE uses NEGs by default for Services of VPC-native clusters (1.17.6-gke.7 and later), "
    "annotation or not; if this one does, its leg is the NEG's: annotate the Service "
    "cloud.google.com/neg: '{\"ingress\": true}' to say so"
)
UNKNOWN_NOTE = (
    "controller not recognised from its class: assumed to watch EndpointSlices like "
    "kube-proxy (set its leg in [tool.svcdoctor.hops])"
)
# externalTrafficPolicy: Local: the load balancer health-checks each node's
# healthCheckNodePort, which fails once the node's last local pod terminates; kube-proxy
# keeps sending to that terminating pod meanwhile (KEP-1669), so the pod must keep serving
# for the health check's interval x unhealthy threshold (AWS NLB: 10 s x 3).
LOCAL_HEALTH_CHECK_SECONDS = 30.0
LOCAL_SOURCE = (
    "KEP-1669; AWS NLB health check 10 s x 3 "
    "(https://docs.aws.amazon.com/elasticloadbalancing/latest/network/target-group-health-checks.html)"
)
LOCAL_NOTE = (
    "externalTrafficPolicy: Local: the load balancer stops sending to a node only when its "
    "health check of healthCheckNodePort fails (interval x unhealthy threshold), which "
    "matters when a node's last pod goes; set its leg in [tool.svcdoctor.hops] cloud-lb"
)
DEFAULT_DEREGISTRATION_SECONDS = 300.0  # ELB target groups' deregistration_delay default
# Istio's agent on SIGTERM: drains Envoy's inbound listeners (new connections still taken),
# sleeps terminationDrainDuration (default 5 s), then kills Envoy, whatever the app does; with
# EXIT_ON_ZERO_ACTIVE_CONNECTIONS it waits MINIMUM_DRAIN_DURATION (default 5 s), then exits
# as soon as no connection is open (istio/api mesh/v1alpha1/proxy.proto; istio/istio
# pkg/envoy/agent.go, pilot/cmd/pilot-agent/options/options.go; istio #36631, #44690).
ISTIO_TERMINATION_DRAIN_SECONDS = 5.0
ISTIO_MINIMUM_DRAIN_SECONDS = 5.0
_DEREGISTRATION = re.compile(r"deregistration_delay\.timeout_seconds\s*=\s*(\d+)")


@dataclass(frozen=True, slots=True)
class Leg:
    """A number of seconds and where it comes from: a default's source, the config key
    that overrides it, or the object field that sets it."""

    seconds: float
    source: str


@dataclass(frozen=True, slots=True)
class Hop:
    """One hop in front of a pod.

    ``leg``: seconds from the pod's deletion until this hop stops sending it new requests
    (0 for a load balancer whose targets are nodes: kube-proxy's leg is the pod's).
    ``via``: the object that puts the hop on the path. ``ip_targets``: a load balancer
    sending to pod IPs (skipping the datapath). ``readiness_gate``: the pods carry the
    load balancer's readiness gate (``None``: unknown from the input).
    ``deregistration``: a target group's deregistration delay. ``drain``: how long the
    pod's own proxy keeps working after SIGTERM. ``exit_on_idle``: Istio's
    ``EXIT_ON_ZERO_ACTIVE_CONNECTIONS``. ``native``: the sidecar is a native sidecar
    (an init container with ``restartPolicy: Always``, stopped after the app).
    ``problems``: settings that could not be read, each naming the object and field.
    """

    implementation: Implementation
    leg: Leg
    via: ObjectRef | None = None
    ip_targets: bool = True
    readiness_gate: bool | None = None
    deregistration: Leg | None = None
    drain: Leg | None = None
    exit_on_idle: bool = False
    native: bool | None = None
    grpc: bool = False
    notes: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    @property
    def profile(self) -> Profile:
        return PROFILES[self.implementation]

    @property
    def kind(self) -> HopKind:
        return self.profile.kind

    @property
    def label(self) -> str:
        return self.profile.label

    @property
    def per_request(self) -> bool:
        return self.profile.per_request

    @property
    def name(self) -> str:
        """``AWS ALB (Ingress shop/web)``: the hop with the object that puts it on the path."""
        return f"{self.label} ({self.via})" if self.via else self.label

    def text(self) -> str:
        """``AWS ALB (ip, 30 s)``: the hop with its leg, for a path line."""
        bits = []
        if self.kind is HopKind.LOAD_BALANCER:
            bits.append("ip" if self.ip_targets else "instance")
        if self.kind is HopKind.SIDECAR:
            bits.append(f"drains {_secs(self.drain.seconds)}" if self.drain else "drain ?")
        else:
            bits.append(_secs(self.leg.seconds))
        return f"{self.label} ({', '.join(bits)})"


def _secs(value: float) -> str:
    return f"{value:g} s"


@dataclass(frozen=True, slots=True)
class Path:
    """The hops from one entry to the workload's pods, edge first, the pod's own sidecar
    last when it has one. ``service``: the Service the traffic is addressed to."""

    service: ObjectRef
    hops: tuple[Hop, ...]

    @property
    def senders(self) -> tuple[Hop, ...]:
        """The hops that pick a pod for new requests (the pod's sidecar picks none)."""
        return tuple(h for h in self.hops if h.kind is not HopKind.SIDECAR)

    @property
    def slowest(self) -> Hop | None:
        """The sender with the longest leg (the first of equals, the edge's)."""
        senders = self.senders
        return max(senders, key=lambda h: h.leg.seconds) if senders else None

    def text(self) -> str:
        """``AWS ALB (ip, 30 s) → Istio sidecar (drains 5 s) → pod``."""
        return " → ".join([*(h.text() for h in self.hops), "pod"])


@dataclass(frozen=True, slots=True)
class PathSettings:
    """What the user said of the path: the cluster's endpoint propagation (the legs of
    every controller that watches EndpointSlices) and legs per implementation
    (``[tool.svcdoctor.hops]`` in the config: ``aws-alb = 45``)."""

    propagation_seconds: float = 5.0
    legs: Mapping[str, float] = field(default_factory=dict)

    def leg(self, implementation: Implementation) -> Leg:
        key = implementation.value
        if key in self.legs:
            return Leg(self.legs[key], f"config hops.{key}")
        profile = PROFILES[implementation]
        if profile.leg_seconds is None:
            return Leg(self.propagation_seconds, "propagation-seconds")
        return Leg(profile.leg_seconds, profile.source)


@dataclass(frozen=True, slots=True)
class Dangling:
    """A route's backend that cannot receive its traffic: no such Service or port, or a
    cross-namespace reference no ReferenceGrant allows. ``certain``: the inputs hold every
    object that could make it work (a live cluster); from files, the object may be
    elsewhere."""

    route: Route
    backend: BackendRef
    reason: str
    certain: bool = True
    service: Service | None = None  # the Service found, when it lacks the port


@dataclass(frozen=True, slots=True)
class Paths:
    """Every workload's paths (by identity of the workload object), and the route backends
    that lead nowhere."""

    by_workload: Mapping[int, tuple[Path, ...]]
    dangling: tuple[Dangling, ...] = ()

    def of(self, workload: Workload) -> tuple[Path, ...]:
        return self.by_workload.get(id(workload), ())

    def slowest(self, workload: Workload) -> tuple[Hop, Path] | None:
        """The sending hop with the longest leg over all the workload's paths."""
        best: tuple[Hop, Path] | None = None
        for path in self.of(workload):
            hop = path.slowest
            if hop is not None and (best is None or hop.leg.seconds > best[0].leg.seconds):
                best = (hop, path)
        return best

    def sidecar(self, workload: Workload) -> Hop | None:
        """The workload's own mesh proxy, if it has one."""
        for path in self.of(workload):
            if path.hops and path.hops[-1].kind is HopKind.SIDECAR:
                return path.hops[-1]
        return None


def trace_paths(inventory: Inventory, settings: PathSettings) -> Paths:
    """The paths in front of every Service-backed workload of ``inventory`` (pure)."""
    return _Tracer(inventory, settings).paths()


@dataclass(slots=True)
class _Tracer:
    inventory: Inventory
    settings: PathSettings
    namespaces: dict[str, list[Resource]] = field(default_factory=dict)
    fronts: dict[tuple[FrontKind, str], Front] = field(default_factory=dict)
    datapath: Hop = field(init=False)

    def __post_init__(self) -> None:
        inv = self.inventory
        for r in inv.resources:
            if r.ref.kind == "Namespace":
                self.namespaces.setdefault(r.ref.name, []).append(r)
        self.fronts = {(f.kind, f.ref.name): f for f in inv.fronts}
        cilium = inv.live is not None and inv.live.datapath == Implementation.CILIUM.value
        implementation = Implementation.CILIUM if cilium else Implementation.KUBE_PROXY
        self.datapath = Hop(implementation, self.settings.leg(implementation))

    def paths(self) -> Paths:
        inv = self.inventory
        services: dict[tuple[str, str], list[Service]] = {}
        for s in inv.services:  # a repository may define one Service in several files
            services.setdefault((inv.namespace_of(s.ref), s.ref.name), []).append(s)
        routes_to: dict[int, list[tuple[Route, BackendRef]]] = {}  # by Service identity
        dangling: list[Dangling] = []
        for route in inv.routes:
            for backend in route.backends:
                key = (backend.namespace or inv.namespace_of(route.ref), backend.name)
                nearest = _nearest(route, services.get(key, []))
                lost = self._dangling(route, backend, nearest)
                if lost is not None:
                    dangling.append(lost)
                elif backend.kind == "Service":
                    for svc in nearest:
                        routes_to.setdefault(id(svc), []).append((route, backend))
        by_workload: dict[int, tuple[Path, ...]] = {}
        for workload in inv.workloads:
            ns = self._namespace(workload)
            # a Namespace's injection applies to the objects placed in it: by their own
            # metadata.namespace or by --namespace, not by the "default" assumed for objects
            # that name none (the Namespace may be another application's)
            placed = bool(workload.ref.namespace) or inv.namespace != DEFAULT_NAMESPACE
            sidecar = _sidecar(workload, ns if placed else None)
            tail = (sidecar,) if sidecar else ()
            paths = [
                Path(svc.ref, (*entry, *tail))
                for svc in inv.services_of(workload)
                for entry in self._entries(svc, routes_to.get(id(svc), ()), ns, sidecar)
            ]
            if paths:
                by_workload[id(workload)] = tuple(paths)
        return Paths(by_workload, tuple(dangling))

    def _namespace(self, workload: Workload) -> Resource | None:
        """The workload's Namespace object: on a live cluster the one; from files the
        nearest definition in the same tree (a Namespace of the same name in an unrelated
        folder belongs to another app)."""
        found = self.namespaces.get(self.inventory.namespace_of(workload.ref), [])
        if not found or is_live(workload.location):
            return found[0] if found else None
        home = PurePath(workload.location.file)
        near = [r for r in found if related(workload.location.file, r.location.file)]
        if not near:
            return None
        return min(near, key=lambda r: file_distance(home, PurePath(r.location.file)))

    def _dangling(self, route: Route, backend: BackendRef, found: list[Service]) -> Dangling | None:
        """Why a route's Service backend cannot receive traffic (``None`` when it can, or
        when it is another kind of backend, which svcdoctor does not follow)."""
        if backend.kind != "Service" or backend.group not in ("", "core"):
            return None
        inv = self.inventory
        certain = inv.live is not None
        target_ns = backend.namespace or inv.namespace_of(route.ref)
        if route.gateway_route and target_ns != inv.namespace_of(route.ref):
            grants = [g for g in inv.grants if inv.namespace_of(g.ref) == target_ns]
            if not any(g.allows(route.ref, "Service", backend.name) for g in grants):
                reason = f"no ReferenceGrant in namespace {target_ns} allows it"
                return Dangling(route, backend, reason, certain or bool(grants))
        if not found:
            reason = f"no Service {target_ns}/{backend.name}"
            return Dangling(route, backend, reason, certain) if certain else None
        port = backend.port
        if port is None or any(s.type == "ExternalName" for s in found):
            return None
        known = {p.port for s in found for p in s.ports} | {
            p.name for s in found for p in s.ports if p.name
        }
        if port in known:
            return None
        reason = f"Service {target_ns}/{backend.name} has no port {port}"
        return Dangling(route, backend, reason, service=found[0])

    def _entries(
        self,
        svc: Service,
        routes: Iterable[tuple[Route, BackendRef]],
        ns: Resource | None,
        sidecar: Hop | None,
    ) -> list[tuple[Hop, ...]]:
        """The ways into one Service: its in-cluster clients (through the datapath, and
        through their own mesh proxies when the pods are in a mesh), its load balancer, and
        every route that names it."""
        entries: list[tuple[Hop, ...]] = []
        if not svc.headless:
            entries.append((self.datapath,))
        if sidecar is not None:
            mesh = _MESH[sidecar.implementation]
            entries.append((Hop(mesh, self.settings.leg(mesh)),))
        lb = _service_lb(svc, ns, self.settings)
        if lb is not None:
            entries.append((lb,) if lb.ip_targets else (lb, self.datapath))
        for route, _ in routes:
            if route.parents and all(p.kind == "Service" for p in route.parents):
                continue  # a mesh route (GAMMA): the callers' proxies, already an entry
            entries.append(self._route_hops(route, svc, ns))
        return entries

    def _route_hops(self, route: Route, svc: Service, ns: Resource | None) -> tuple[Hop, ...]:
        settings, datapath = self.settings, self.datapath
        if route.kind is RouteKind.TARGET_GROUP_BINDING:
            ip = route.target_type == "ip"
            gate = _alb_gate(ns) if ip else None
            hop = _lb(Implementation.AWS_TARGET_GROUP, route.ref, settings, ip=ip, gate=gate)
            return (hop,) if ip else (hop, datapath)
        implementation = self._implementation(route)
        grpc = route.kind is RouteKind.GRPC_ROUTE
        if route.kind is RouteKind.INGRESS:
            protocol = route.annotations.get(NGINX_BACKEND_PROTOCOL, "")
            grpc = protocol.upper() in ("GRPC", "GRPCS")
        if implementation is Implementation.AWS_ALB:
            a, r = svc.annotations, route.annotations
            ip = (a.get(ALB_TARGET_TYPE) or r.get(ALB_TARGET_TYPE)) == "ip"
            hop = _lb(
                implementation, route.ref, settings, ip=ip, gate=_alb_gate(ns) if ip else None
            )
            # the Service's annotation overrides the Ingress' (it names where it was read)
            carrier = svc.ref if a.get(ALB_TG_ATTRIBUTES) else route.ref
            attrs = a.get(ALB_TG_ATTRIBUTES) or r.get(ALB_TG_ATTRIBUTES)
            hop = _with_deregistration(hop, attrs, ALB_TG_ATTRIBUTES, carrier)
            return (hop,) if ip else (hop, datapath)
        neg = _neg_exposed(svc.annotations.get(GKE_NEG, ""))
        if implementation is Implementation.INGRESS and route.class_name is None and neg:
            implementation = Implementation.GKE_LB  # only GKE's Ingress reads the annotation
        if implementation is Implementation.GKE_NEG:  # a GKE Gateway: NEG backends always
            return (_lb(implementation, route.ref, settings),)
        if implementation is Implementation.GKE_LB:
            if neg or route.class_name in NEG_CLASSES:
                return (_lb(Implementation.GKE_NEG, route.ref, settings, gate=True),)
            hop = replace(_lb(implementation, route.ref, settings, ip=False), notes=(GKE_NEG_NOTE,))
            return (hop, datapath)
        if implementation is Implementation.AZURE_APPGW:
            return (_lb(implementation, route.ref, settings),)
        notes = (
            (UNKNOWN_NOTE,)
            if implementation in (Implementation.INGRESS, Implementation.GATEWAY)
            else ()
        )
        hop = Hop(implementation, settings.leg(implementation), route.ref, grpc=grpc, notes=notes)
        if route.annotations.get(NGINX_SERVICE_UPSTREAM) == "true":
            return (hop, datapath)  # ingress-nginx sends to the ClusterIP: kube-proxy picks
        return (hop,)

    def _implementation(self, route: Route) -> Implementation:
        """Which controller serves a route: its class object's controller, else a
        well-known class name; unknown ones get the generic profile."""
        fronts = self.fronts
        if route.gateway_route:
            for parent in route.parents:
                gw = fronts.get((FrontKind.GATEWAY, parent.name))
                cls = fronts.get((FrontKind.GATEWAY_CLASS, gw.class_name)) if gw else None
                if cls is not None and cls.controller in CONTROLLERS:
                    return _as_gateway(CONTROLLERS[cls.controller])
                if gw is not None and gw.class_name in CLASS_NAMES:
                    return _as_gateway(CLASS_NAMES[gw.class_name])
                if gw is not None and gw.class_name.startswith("gke-l7-"):
                    return Implementation.GKE_NEG  # GKE's GatewayClasses (gke-l7-global-…)
            return Implementation.GATEWAY
        name = route.class_name
        if name is None:
            default = next(
                (
                    f
                    for f in self.inventory.fronts
                    if f.kind is FrontKind.INGRESS_CLASS and f.default
                ),
                None,
            )
            name = default.ref.name if default else None
        if name is None:
            return Implementation.INGRESS
        cls = fronts.get((FrontKind.INGRESS_CLASS, name))
        if cls is not None and cls.controller in CONTROLLERS:
            return CONTROLLERS[cls.controller]
        return CLASS_NAMES.get(name, Implementation.INGRESS)


def _nearest(route: Route, found: list[Service]) -> list[Service]:
    """The definitions of a Service nearest the route that names it (the same file, folder,
    or a parent or child folder): a repository may hold look-alikes elsewhere (another
    app's Service of the same name), which say nothing of this route's."""
    if not found or is_live(route.location):
        return found
    home = PurePath(route.location.file)
    ranked = [
        (file_distance(home, PurePath(s.location.file)), s)
        for s in found
        if related(route.location.file, s.location.file)
    ]
    best = min((rank for rank, _ in ranked), default=None)
    return [s for rank, s in ranked if rank == best]


_MESH = {
    Implementation.ISTIO_SIDECAR: Implementation.ISTIO,
    Implementation.LINKERD_PROXY: Implementation.LINKERD,
}


def _service_lb(svc: Service, ns: Resource | None, settings: PathSettings) -> Hop | None:
    """The cloud load balancer of a Service: an AWS NLB by the AWS Load Balancer
    Controller's annotations (IP targets with ``nlb-target-type: ip``), GKE NEG backends by
    ``cloud.google.com/neg``, another cloud's load balancer (node targets) otherwise."""
    a = svc.annotations
    if "exposed_ports" in a.get(GKE_NEG, ""):
        # standalone NEGs: no readiness gate is injected, unless the same annotation also
        # puts the pods in an Ingress' NEGs
        return _lb(Implementation.GKE_NEG, svc.ref, settings, gate=_neg_exposed(a[GKE_NEG]))
    if svc.type != "LoadBalancer":
        return None
    lb_type = a.get(NLB_TYPE, "")
    if lb_type in ("external", "nlb-ip") or NLB_TARGET_TYPE in a:
        ip = a.get(NLB_TARGET_TYPE, "") == "ip" or lb_type == "nlb-ip"
        gate = _alb_gate(ns) if ip else None
        hop = _lb(Implementation.AWS_NLB, svc.ref, settings, ip=ip, gate=gate)
        return _with_deregistration(hop, a.get(NLB_TG_ATTRIBUTES), NLB_TG_ATTRIBUTES, svc.ref)
    hop = _lb(Implementation.CLOUD_LB, svc.ref, settings, ip=False)
    if svc.external_traffic_policy == "Local":
        leg = Leg(LOCAL_HEALTH_CHECK_SECONDS, LOCAL_SOURCE)
        if Implementation.CLOUD_LB.value in settings.legs:
            leg = settings.leg(Implementation.CLOUD_LB)
        hop = replace(hop, leg=leg, notes=(LOCAL_NOTE,))
    return hop


def _as_gateway(implementation: Implementation) -> Implementation:
    if PROFILES[implementation].kind is HopKind.GATEWAY or implementation in GATEWAY_LBS:
        return implementation
    return Implementation.GATEWAY


def _lb(
    implementation: Implementation,
    via: ObjectRef,
    settings: PathSettings,
    *,
    ip: bool = True,
    gate: bool | None = None,
) -> Hop:
    """A load balancer hop; with node targets its leg is 0 (the nodes stay registered)."""
    leg = settings.leg(implementation) if ip else Leg(0.0, "targets are nodes")
    return Hop(implementation, leg, via, ip_targets=ip, readiness_gate=gate)


def _with_deregistration(hop: Hop, attributes: str | None, key: str, carrier: ObjectRef) -> Hop:
    """The hop with its target group's deregistration delay, read from ``carrier``'s
    annotation (AWS's default 300 s when the attributes do not set it)."""
    found = _DEREGISTRATION.search(attributes or "")
    if found:
        leg = Leg(float(found.group(1)), f"{key} on {carrier}")
    else:
        leg = Leg(DEFAULT_DEREGISTRATION_SECONDS, "AWS target group default")
    return replace(hop, deregistration=leg)


def _alb_gate(ns: Resource | None) -> bool | None:
    """Whether the AWS Load Balancer Controller injects its readiness gate into the
    namespace's pods (the Namespace's label; ``None`` when the Namespace is not known)."""
    if ns is None:
        return None
    return ns.labels.get(ALB_GATE_LABEL) == "enabled"


def _neg_exposed(value: str) -> bool:
    """Whether a ``cloud.google.com/neg`` annotation puts the pods in an Ingress' NEGs
    (GKE then injects the readiness gate ``cloud.google.com/load-balancer-neg-ready``)."""
    return bool(re.search(r'"ingress"\s*:\s*true', value))


def _sidecar(workload: Workload, ns: Resource | None) -> Hop | None:
    """The pod's mesh proxy, when the pod or its namespace asks for injection."""
    template = workload.template
    pod = {**template.labels, **template.annotations}
    ns_labels = ns.labels if ns else {}
    ns_annotations = ns.annotations if ns else {}
    istio = pod.get(ISTIO_INJECT)
    # a gateway injected with Istio's gateway template is the proxy itself, not an app
    # with a sidecar (https://istio.io/latest/docs/setup/additional-setup/gateway/)
    gateway = "gateway" in template.annotations.get(ISTIO_TEMPLATES, "")
    if (
        istio != "false"
        and not gateway
        and (
            istio == "true"
            or ns_labels.get(ISTIO_NS_LABEL) == "enabled"
            or (ISTIO_REV in ns_labels and ns_labels.get(ISTIO_NS_LABEL) != "disabled")
            or ISTIO_REV in template.labels
        )
    ):
        return _istio(workload)
    linkerd = template.annotations.get(LINKERD_INJECT) or ns_annotations.get(LINKERD_INJECT)
    if linkerd in ("enabled", "ingress"):
        return _linkerd(workload)
    return None


def _istio(workload: Workload) -> Hop:
    """Istio's sidecar: it drains for ``terminationDrainDuration`` after SIGTERM (5 s by
    default), or until its last connection closes with ``EXIT_ON_ZERO_ACTIVE_CONNECTIONS``."""
    a = workload.template.annotations
    drain = Leg(ISTIO_TERMINATION_DRAIN_SECONDS, "Istio default terminationDrainDuration")
    problems: list[str] = []
    exit_on_idle = False
    raw = a.get(ISTIO_PROXY_CONFIG)
    if raw is not None:
        config, problem = _proxy_config(raw)
        if problem:
            problems.append(f"{workload.ref}: annotation {ISTIO_PROXY_CONFIG}: {problem}")
        drain = _duration(config, "terminationDrainDuration", workload, drain, problems)
        meta = config.get("proxyMetadata")
        if isinstance(meta, dict):
            exit_on_idle = str(meta.get("EXIT_ON_ZERO_ACTIVE_CONNECTIONS", "")).lower() == "true"
            if exit_on_idle:  # terminationDrainDuration is not used then (istio #44690)
                default = Leg(ISTIO_MINIMUM_DRAIN_SECONDS, "Istio default MINIMUM_DRAIN_DURATION")
                drain = _duration(meta, "MINIMUM_DRAIN_DURATION", workload, default, problems)
    native = a.get(ISTIO_NATIVE)
    return Hop(
        Implementation.ISTIO_SIDECAR,
        Leg(0.0, "the pod's own proxy"),
        workload.ref,
        drain=drain,
        exit_on_idle=exit_on_idle,
        native=None if native is None else native == "true",
        problems=tuple(problems),
    )


def _duration(
    config: Mapping[str, object], key: str, workload: Workload, default: Leg, problems: list[str]
) -> Leg:
    """A Go duration of the ``proxy.istio.io/config`` annotation as a leg (``default`` when
    unset; a value that is no duration is a problem naming the workload and the field)."""
    value = config.get(key)
    if value is None:
        return default
    try:
        seconds = parse_duration(str(value), GO, any_order=True, bare=False)
    except ValueError:
        problems.append(
            f"{workload.ref}: annotation {ISTIO_PROXY_CONFIG}: {key} {value!r} is not a duration"
        )
        return default
    return Leg(seconds, f"{ISTIO_PROXY_CONFIG} {key} on {workload.ref}")


def _proxy_config(raw: str) -> tuple[dict[str, object], str]:
    """The ``proxy.istio.io/config`` annotation's ProxyConfig, or why it cannot be read."""
    try:
        data = yaml.safe_load(raw)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem", None) or "invalid YAML"
        return {}, f"not valid YAML ({mark})"
    if data is None:
        return {}, ""
    if not isinstance(data, dict):
        return {}, f"must be a mapping of ProxyConfig fields, got {type(data).__name__}"
    return {str(k): v for k, v in data.items()}, ""


def _linkerd(workload: Workload) -> Hop:
    """Linkerd's proxy: it stops at SIGTERM unless ``proxy-wait-before-exit-seconds`` holds
    it (a preStop sleep on the proxy container)."""
    a = workload.template.annotations
    raw = a.get(LINKERD_WAIT)
    problems: list[str] = []
    drain = Leg(0.0, "Linkerd default proxy-wait-before-exit-seconds")
    if raw is not None:
        if re.fullmatch(r"[0-9]+", raw.strip()):  # str.isdigit takes '²' too
            drain = Leg(float(raw), f"{LINKERD_WAIT} on {workload.ref}")
        else:
            problems.append(f"{workload.ref}: annotation {LINKERD_WAIT}: {raw!r} is not seconds")
    native = next((a[k] for k in (LINKERD_NATIVE, *LINKERD_NATIVE_OLD) if k in a), None)
    return Hop(
        Implementation.LINKERD_PROXY,
        Leg(0.0, "the pod's own proxy"),
        workload.ref,
        drain=drain,
        native=None if native is None else native == "true",
        problems=tuple(problems),
    )
