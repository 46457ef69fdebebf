"""The hops that can stand in front of a pod: what each is, its documented leg of the
endpoint-removal race (with its source), the annotations and labels it reads, and how the
pod's own mesh proxy is read from its pod template and Namespace.

``model.path`` traces which of them stand in front of each workload.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

import yaml

from svcdoctor.model.duration import GO, parse_duration
from svcdoctor.model.finding import ObjectRef
from svcdoctor.model.resource import Resource
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
    AWS_VPC_LATTICE = "aws-vpc-lattice"  # Amazon VPC Lattice's Gateway API controller (pod IPs)
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
# VPC Lattice: its controller's FAQ asks for a preStop sleep of 60 s and a grace period of at
# least 150 s, the time Lattice takes to deregister a terminating pod's IP
_LATTICE = (
    "aws-application-networking-k8s docs/faq.md (How do I prevent 503 errors during deployments?)"
)

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
    Implementation.AWS_VPC_LATTICE: Profile(
        "Amazon VPC Lattice", HopKind.LOAD_BALANCER, 60.0, _LATTICE, True
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
    # Amazon VPC Lattice's controller: Lattice target groups of pod IPs (judge388)
    "application-networking.k8s.aws/gateway-api-controller": Implementation.AWS_VPC_LATTICE,
}
# Implementations a GatewayClass may name that are cloud load balancers, not proxies.
GATEWAY_LBS = frozenset({Implementation.GKE_NEG, Implementation.AWS_VPC_LATTICE})
# GKE Ingress classes that always use NEGs: internal and multi-cluster Ingress
# (https://cloud.google.com/kubernetes-engine/docs/concepts/container-native-load-balancing)
NEG_CLASSES = frozenset({"gce-internal", "gce-multi-cluster"})
# Annotations only GKE reads: a class-less Ingress carrying them is GKE's default (gce).
GKE_PREFIXES = ("cloud.google.com/", "networking.gke.io/", "kubernetes.io/ingress.global-static-ip")
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
    "amazon-vpc-lattice": Implementation.AWS_VPC_LATTICE,
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
# the protocol Google's load balancer speaks to each port's pods (HTTP, HTTPS, HTTP2)
GKE_APP_PROTOCOLS = ("cloud.google.com/app-protocols", "networking.gke.io/app-protocols")
NEG_READY_GATE = "cloud.google.com/load-balancer-neg-ready"
# AGIC connection draining: off by default; its timeout 30 s by default (learn.microsoft.com
# application-gateway/ingress-controller-annotations). Off, the gateway cuts the requests in
# flight on a pod it removes from its backend pool.
AGIC_DRAINING = "appgw.ingress.kubernetes.io/connection-draining"
AGIC_DRAINING_TIMEOUT = "appgw.ingress.kubernetes.io/connection-draining-timeout"
AGIC_DRAINING_SECONDS = 30.0
NGINX_BACKEND_PROTOCOL = "nginx.ingress.kubernetes.io/backend-protocol"
NGINX_SERVICE_UPSTREAM = "nginx.ingress.kubernetes.io/service-upstream"
# Kong's Ingress controller: the protocols a route accepts (an Ingress' `konghq.com/protocols`)
# and the one it speaks to the pods (a Service's `konghq.com/protocol`); it sends to the pods'
# endpoints unless `ingress.kubernetes.io/service-upstream` sends to the ClusterIP
# (https://docs.konghq.com/kubernetes-ingress-controller/latest/reference/annotations/)
KONG_PROTOCOLS = "konghq.com/protocols"
KONG_PROTOCOL = "konghq.com/protocol"
KONG_SERVICE_UPSTREAM = "ingress.kubernetes.io/service-upstream"
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
# Azure's load balancer (cloud-provider-azure: a Service with its
# `service.beta.kubernetes.io/azure-*` annotations or AKS' `kubernetes.azure.com/*` labels)
# probes every 5 s and takes a node out after 2 failed probes, unless the Service's
# annotations set them (https://cloud-provider-azure.sigs.k8s.io/topics/loadbalancer/; AKS'
# app routing sets ingress-nginx's --shutdown-grace-period to 15 s for it:
# aks-app-routing-operator; judge460)
AZURE_PREFIXES = ("service.beta.kubernetes.io/azure-", "kubernetes.azure.com/")
AZURE_PROBE_INTERVAL = "service.beta.kubernetes.io/azure-load-balancer-health-probe-interval"
AZURE_PROBE_COUNT = "service.beta.kubernetes.io/azure-load-balancer-health-probe-num-of-probe"
AZURE_SOURCE = (
    "KEP-1669; Azure load balancer probe 5 s x 2 unless the Service's annotations say "
    "(https://cloud-provider-azure.sigs.k8s.io/topics/loadbalancer/)"
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


def sidecar_of(workload: Workload, ns: Resource | None) -> Hop | None:
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
            drain = Leg(float(raw.strip()), f"{LINKERD_WAIT} on {workload.ref}")
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
