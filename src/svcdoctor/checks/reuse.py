"""Connection-reuse checks (``SVD3xx``): balancing per connection, not per request."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import PurePath

from svcdoctor.checks._backends import serving_targets
from svcdoctor.checks._carrying import carries_requests, config_ports, route_kinds
from svcdoctor.checks._clients import registry_found
from svcdoctor.checks._serving import queried_scraper, serving_containers
from svcdoctor.checks._shutdown import run_paths
from svcdoctor.checks.election import leader_served
from svcdoctor.checks.images import process_sessions
from svcdoctor.checks.registry import Hit, rule
from svcdoctor.checks.selection import folder
from svcdoctor.checks.settings import Settings
from svcdoctor.checks.state import local_state, node_socket
from svcdoctor.checks.stores import data_store
from svcdoctor.model import Cause, Container, Inventory, Service, ServicePort, Severity, Workload
from svcdoctor.model.hops import KONG_SERVICE_UPSTREAM, NGINX_SERVICE_UPSTREAM, HopKind
from svcdoctor.model.patch import Fix, ObjectPatch
from svcdoctor.model.path import Paths
from svcdoctor.model.remedy import (
    STICKY_RULE,
    ConnectionFacts,
    ConnectionPlan,
    ConnectionStep,
    Exposure,
    Transport,
    plan_connections,
)
from svcdoctor.model.route import RouteKind

_H2_PROTOCOLS = frozenset({"grpc", "h2c", "http2", "kubernetes.io/h2c", "grpcs", "h2"})
_H2_PREFIXES = ("grpc", "h2c", "http2")
# A listening flag or variable of a gRPC server: --grpc-port=9090, -grpcPort 9090,
# --grpc-addr=:9090, --grpc.listen-address=0.0.0.0:10901, GRPC_PORT=50051.
_GRPC_FLAG = re.compile(
    r"^--?([\w.-]*grpc[\w.-]*(?:port|addr|address|listen)|(?:listen|bind)[\w.-]*grpc[\w.-]*)$",
    re.IGNORECASE,
)
_NOT_A_LISTENER = re.compile(r"gateway|web|http|endpoint|upstream|target|remote", re.IGNORECASE)
_PORT_VALUE = re.compile(r"^(?:[\w.\[\]:-]*:)?(\d{1,5})$")
# Images whose port *named* grpc carries another protocol that its clients speak.
_MULTIPLEXED = (
    (
        "cockroachdb/cockroach",
        frozenset({26257}),
        "CockroachDB serves SQL (pgwire) on it beside node-to-node gRPC, and its clients are "
        "SQL drivers with connection pools",
    ),
)
_COCKROACH_PORT = 26257
# The server already bounds connection age (--keepaliveMaxServerConnectionAge 30m in
# istiod, --grpc-max-connection-age, GRPC_MAX_CONNECTION_AGE): clients reconnect and
# rebalance, which is this rule's fix.
_MAX_AGE = re.compile(r"max[-_.]?(?:server[-_.]?)?conn(?:ection)?[-_.]?age", re.IGNORECASE)


def _bounds_connection_age(workloads: tuple[Workload, ...]) -> bool:
    for w in workloads:
        for c in w.template.containers:
            words = [*c.command, *c.args]
            for i, word in enumerate(words):
                flag, eq, value = word.partition("=")
                if not eq:
                    value = words[i + 1] if i + 1 < len(words) else ""
                if flag.startswith("-") and _MAX_AGE.search(flag) and value.strip("0s") != "":
                    return True
            if any(_MAX_AGE.search(k) and v.strip("0s") for k, v in c.env):
                return True
    return False


def _h2_name(name: str | None) -> bool:
    low = (name or "").lower()
    return low.startswith(_H2_PREFIXES) and not low.startswith("grpc-web")


def _h2_label(port: ServicePort, workloads: tuple[Workload, ...]) -> str | None:
    """Why the port carries HTTP/2 (as shown in the message), or ``None``."""
    if port.app_protocol:
        return port.app_protocol if port.app_protocol.lower() in _H2_PROTOCOLS else None
    if _h2_name(port.name):
        return port.name
    if isinstance(port.target, str) and _h2_name(port.target):
        return f"targetPort {port.target}"
    for w in workloads:
        for c in w.template.containers:
            number = _target_number(port, c)
            if number is not None and (why := _grpc_evidence(c, number)):
                return why
    return None


def _target_number(port: ServicePort, container: Container) -> int | None:
    if isinstance(port.target, int):
        return port.target
    return next((p.number for p in container.ports if p.name == port.target), None)


def _grpc_evidence(c: Container, number: int) -> str | None:
    """What in the container says it serves gRPC on ``number``."""
    for p in c.ports:
        if p.number == number and _h2_name(p.name):
            return f"container port {p.name}"
    for probe in (c.readiness, c.liveness, c.startup):
        if probe is not None and probe.handler == "grpc" and probe.port == number:
            return f"gRPC probe on {number}"
    words = [*c.command, *c.args]
    for i, word in enumerate(words):
        flag, eq, value = word.partition("=")
        if not eq:
            value = words[i + 1] if i + 1 < len(words) else ""
        m = _GRPC_FLAG.match(flag)
        v = _PORT_VALUE.match(value.strip())
        if m and v and not _NOT_A_LISTENER.search(flag) and int(v.group(1)) == number:
            return f"{flag} {number}"
    for key, value in c.env:
        if "GRPC" not in key.upper() or _NOT_A_LISTENER.search(key):
            continue
        if key.upper().endswith(("PORT", "ADDR", "ADDRESS")):
            v = _PORT_VALUE.match(value.strip())
            if v and int(v.group(1)) == number:
                return f"{key}={value}"
    return None


def _other_protocol(port: ServicePort, workloads: tuple[Workload, ...]) -> str | None:
    """Why a port named grpc is spoken to in another protocol by its clients, if it is."""
    if not workloads and port.port == _COCKROACH_PORT and (port.name or "") == "grpc":
        return _MULTIPLEXED[0][2]
    for w in workloads:
        for c in w.template.containers:
            image = c.image.split("@", 1)[0].rsplit(":", 1)[0]
            for repo, numbers, why in _MULTIPLEXED:
                if (image == repo or image.endswith("/" + repo)) and _target_number(
                    port, c
                ) in numbers:
                    return why
    return None


def _envoy(workloads: tuple[Workload, ...]) -> bool:
    """The pods are an Envoy gateway (Kourier, an Istio gateway): a proxy, not an app."""
    return any(
        "envoyproxy/envoy" in c.image or "/proxyv2" in c.image
        for w in workloads
        for c in w.template.containers
    )


def _istio_gateway(svc: Service) -> bool:
    """The Service selects an Istio gateway's pods by the labels Istio gives them (`istio:
    ingressgateway`, `app: istio-ingressgateway`), installed apart from the inputs
    (net-istio's knative-local-gateway; judge522)."""
    selector = svc.selector or {}
    istio, app = selector.get("istio", ""), selector.get("app", "")
    return istio.endswith("gateway") or (app.startswith("istio-") and app.endswith("gateway"))


def _meta(w: Workload) -> dict[str, str]:
    return {**w.template.annotations, **w.template.labels}


# An Istio sidecar's annotation: its settings (``sidecar.istio.io/*``) or what its injector
# writes (``readiness.status.sidecar.istio.io/applicationPorts``, ``status.sidecar.istio.io/port``,
# ``traffic.sidecar.istio.io/*``: a manifest copied from injected output; kiali/demos, judge255)
_ISTIO_SIDECAR_KEY = re.compile(r"^([\w-]+\.)*sidecar\.istio\.io/")


def _mesh(workloads: tuple[Workload, ...]) -> tuple[str | None, bool]:
    """(mesh, certain): which per-request balancer fronts the pods' clients, if any.

    Certain: Istio sidecar injection asked on the pod (``sidecar.istio.io/inject: "true"``
    or an ``istio.io/rev`` label) with the sidecar template, an already injected
    ``istio-proxy``/``linkerd-proxy`` container, Istio proxyless gRPC
    (``inject.istio.io/templates: grpc-agent``: the gRPC library balances from xDS), Linkerd
    injection. Not certain: only proxy settings (``proxy.istio.io/config``, other sidecar
    annotations: ``_ISTIO_SIDECAR_KEY``) that presume a sidecar injected by a namespace
    label the inputs don't hold. A gateway (``inject.istio.io/templates: gateway``) is the proxy
    itself, not a client of it: its clients are outside the mesh.
    """
    weak: str | None = None
    for w in workloads:
        meta = _meta(w)
        istio = meta.get("sidecar.istio.io/inject", "").lower()
        templates = meta.get("inject.istio.io/templates", "")
        if "grpc-agent" in templates and istio != "false":
            return "Istio proxyless gRPC (grpc-agent)", True
        names = {c.name for c in w.template.containers}
        if "istio-proxy" in names and "gateway" not in templates:
            return "Istio sidecar (istio-proxy container)", True
        if "linkerd-proxy" in names:
            return "Linkerd proxy (linkerd-proxy container)", True
        if w.template.labels.get("istio") == "egressgateway":
            return "Istio egress gateway (its clients are sidecars)", True
        if "gateway" in templates:
            continue
        if istio == "true" or (istio == "" and "istio.io/rev" in w.template.labels):
            return "Istio sidecar", True
        if meta.get("linkerd.io/inject") == "enabled":
            return "Linkerd proxy", True
        if istio != "false" and (
            "proxy.istio.io/config" in meta
            or any(_ISTIO_SIDECAR_KEY.search(k) for k in w.template.annotations)
        ):
            weak = "Istio sidecar settings (proxy.istio.io/config)"
    return weak, False


def _settings_everywhere(inventory: Inventory, workloads: tuple[Workload, ...]) -> bool:
    """Whether every serving workload of the Service's folder, its clients among them, carries
    Istio sidecar settings (``_mesh``'s weak sign): their namespace is injected by a label the
    inputs don't hold (a deploy step's `kubectl label`: multicloud-microservices-demo's
    `istio.io/rev=asm-managed`; judge151), so the clients' sidecars balance each request."""
    by_folder = inventory.derived(_servers_by_folder)
    beside = [w for f in {folder(w.location.file) for w in workloads} for w in by_folder.get(f, [])]
    return len(beside) > len(workloads) and all(_mesh((w,))[0] for w in beside)


def _servers_by_folder(inventory: Inventory) -> dict[str, list[Workload]]:
    found: dict[str, list[Workload]] = {}
    for w in inventory.workloads:
        if w.serving:
            found.setdefault(folder(w.location.file), []).append(w)
    return found


_ISTIO_TCP_PREFIXES = ("tcp", "mongo", "redis", "mysql")


def _l7_hop(svc: Service, workloads: tuple[Workload, ...], paths: Paths) -> tuple[str, bool]:
    """(what, mesh): the layer-7 hop that balances each request over the Service's pods,
    from the path model: the callers' mesh proxies (the pods are injected, by the pod or by
    its Namespace), or a GRPCRoute or an Ingress with a gRPC backend protocol whose
    controller sends to the pods themselves (not to the ClusterIP); ``("", False)``: none."""
    for w in workloads:
        for path in paths.of(w):
            senders = path.senders
            if path.service != svc.ref or not senders:
                continue
            last = senders[-1]  # the hop that picks the pod
            if last.kind is HopKind.MESH:
                return last.label, True
            if last.grpc and last.per_request:
                return f"{last.label} ({last.via})", False
    return "", False


_GRPC_ROUTES = frozenset({RouteKind.GRPC_ROUTE})
_H2C = "kubernetes.io/h2c"
_HTTP_ROUTES = frozenset({RouteKind.GRPC_ROUTE, RouteKind.HTTP_ROUTE, RouteKind.INGRESS})


def _routed_by(inventory: Inventory, svc: Service, kinds: frozenset[RouteKind]) -> bool:
    """Whether a route of ``kinds`` sends to the Service and its annotations do not send
    the controller to the ClusterIP: with no pods in the inputs for the path model to
    follow (a controller's test input: Kong's grpcroute-example, judge161; Istio's
    ingress gateway behind a GKE Ingress, judge163), the route's proxy is the client the
    inputs show, and it balances each request over the endpoints."""
    if KONG_SERVICE_UPSTREAM in svc.annotations or NGINX_SERVICE_UPSTREAM in svc.annotations:
        return False
    return bool(route_kinds(inventory, svc) & kinds)


def _proxied(inventory: Inventory, svc: Service) -> bool:
    """Whether a layer-7 proxy's own route object (Contour's HTTPProxy or ExtensionService,
    NGINX's VirtualServer, Traefik's IngressRoute, APISIX's ApisixRoute) of its namespace
    sends to the Service's pods, balancing each request (``Resource.upstreams``)."""
    ns = inventory.namespace_of(svc.ref)
    return (ns, svc.ref.name) in inventory.derived(_upstreams)


def _upstreams(inventory: Inventory) -> frozenset[tuple[str, str]]:
    """The (namespace, name) of each Service a proxy's route object sends to."""
    return frozenset(
        (inventory.namespace_of(r.ref), name) for r in inventory.resources for name in r.upstreams
    )


def _l7_route(svc: Service, workloads: tuple[Workload, ...], paths: Paths) -> bool:
    """Whether an Ingress or a Gateway API route's proxy, or a layer-7 cloud load balancer
    (GKE's through NEGs: gke-networking-recipes' istio-ingressgateway; judge163), sends to
    the Service and picks a pod for each request, whatever protocol it speaks to the pods."""
    return any(
        path.service == svc.ref
        and path.senders[-1].per_request
        and path.senders[-1].kind in (HopKind.INGRESS, HopKind.GATEWAY, HopKind.LOAD_BALANCER)
        for w in workloads
        for path in paths.of(w)
        if path.senders
    )


# Knative's activator is reached by the ingress gateway's Envoys (net-kourier, net-istio),
# which the networking layer gives the activator's endpoints, balanced per request (the
# activator's endpoints in the "Serverless" mode: knative/serving docs/scaling/SYSTEM.md)
_KNATIVE_ACTIVATOR = re.compile(r"knative\.dev/serving/cmd/activator")
# An xDS port (Envoy's config API): each Envoy keeps one long-lived config stream to one
# control-plane replica by design, which serves them all the same configuration
# (https://www.envoyproxy.io/docs/envoy/latest/api-docs/xds_protocol)
_XDS = re.compile(r"(^|[-_])xds($|[-_])", re.IGNORECASE)


def _xds(port: ServicePort) -> bool:
    """Whether a Service port is an xDS control-plane port, by its or its target's name."""
    return any(_XDS.search(n) for n in (port.name or "", str(port.target or "")))


@rule("SVD301", "grpc-behind-clusterip", Cause.REUSE, Severity.WARNING)
def grpc_behind_clusterip(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """A gRPC/HTTP2 port behind a Service that balances connections: one backend per client.

    ## What it does
    Flags ports of non-headless Services that carry HTTP/2: `appProtocol` `grpc`, `h2c`,
    `http2` or `kubernetes.io/h2c`; or (without `appProtocol`) a port or `targetPort` name
    starting with `grpc`, `h2c` or `http2`; or a target container port that the pods serve
    gRPC on by their own account: a container port named `grpc…`, a `grpc` probe, a listening
    flag (`--grpc-port=N`, `-grpcPort N`, `--grpc-addr=:N`, `--grpc.listen-address=…:N`) or a
    literal env value (`GRPC_PORT=N`) naming the same port.

    Not flagged:
    - a ClusterIP Service without a selector: its endpoints are given by hand (an external
      VIP or VM: netscaler's Service Mesh Lite examples, petclinic-ms' camunda; judge467,
      judge475), no pods the inputs show;
    - pods whose clients balance each request: Istio sidecar injection asked on the pod
      (`sidecar.istio.io/inject: "true"`, an `istio.io/rev` label, an `istio-proxy`
      container) for a port Istio reads as gRPC/HTTP2; Linkerd injection
      (`linkerd.io/inject: enabled`); Istio proxyless gRPC
      (`inject.istio.io/templates: grpc-agent`); an Istio egress gateway (its clients are
      sidecars). Only proxy settings (`proxy.istio.io/config`) without injection in the
      inputs lower it to info, unless every serving pod of its folder, its clients with it,
      carries them: a namespace label the inputs do not hold injects them all. Injection by
      the pods' Namespace (label
      `istio-injection: enabled` or `istio.io/rev`, annotation `linkerd.io/inject: enabled`)
      counts when the Namespace is in the inputs;
    - a Service that a gRPC-aware layer-7 hop sends to pod by pod: a GRPCRoute's gateway
      (also when the inputs hold no pods of the Service, a controller's test input), a
      proxy's own route object (Contour's HTTPProxy or ExtensionService, NGINX's
      VirtualServer, Traefik's IngressRoute, APISIX's ApisixRoute, unless set to send to
      the ClusterIP; Envoy Gateway's extension policies; an InferencePool's endpoint picker,
      `endpointPickerRef`), or
      an Ingress with `nginx.ingress.kubernetes.io/backend-protocol: GRPC` (ingress-nginx
      balances each call over the endpoints, unless `service-upstream: "true"` sends it to
      the ClusterIP), or Kong's `konghq.com/protocols: grpc` on the Ingress or
      `konghq.com/protocol: grpc` on the Service (unless
      `ingress.kubernetes.io/service-upstream: "true"`);
    - a port named `grpc` that clients speak another protocol to: CockroachDB's 26257 (SQL
      drivers speak pgwire to it);
    - an xDS port (named `…xds…`, or a known control plane's, Envoy Gateway's 18000 named
      `grpc`: Envoy proxies keep one config stream to one control-plane
      replica by design) and Knative's activator (the ingress gateway's Envoys reach its
      pods, balancing each request);
    - providers found through a service registry (Apache Dubbo's, as for SVD201): their
      consumers dial the pods the registry lists, not the Service;
    - a Service with `internalTrafficPolicy: Local`: each node's clients reach only their
      node's pod, by design (an agent DaemonSet's); a server only the elected leader of
      its pods runs (a manager's gRPC server that waits for the lease, as for SVD204): the
      standbys refuse what a headless Service would send them;
    - DaemonSet pods that each answer for their own node (a node's socket or device on a
      hostPath volume: a GPU's /dev/nvidiactl): they are no pool to balance;
    - a ClusterIP port no address in the inputs dials (`NAME:PORT`, `NAME.NS.svc:PORT` in an
      env value, an argument or a config) while they dial other Services' ports from its
      folder, or another port of it from its app's folder (the one above: podinfo's
      frontend dials its backend's HTTP port, never its gRPC port): the inputs
      wire their clients by address, and this port has none here (a Thanos query's StoreAPI
      that only its frontend's HTTP port is dialed beside, a Dubbo provider's port that
      consumers reach through the registry). Where the inputs dial no Service at all, the
      clients are elsewhere and it stays flagged;
    - servers that already bound connection age (a `--…max…connection-age` flag such as
      istiod's `--keepaliveMaxServerConnectionAge 30m`, or such an env value);
    - a port only *named* `http2` (Istio's name for a gateway's HTTP port, mostly reached over
      HTTP/1.1) on a LoadBalancer/NodePort Service or in front of Envoy gateway pods (or an
      Istio gateway's, by its labels `istio: ingressgateway`), or that an Ingress or a Gateway
      API route sends to: its proxy (or GKE's load balancer through NEGs) picks a pod for each
      request, whatever it speaks to the pods (no `appProtocol` says HTTP/2 there); and a
      port with `appProtocol: kubernetes.io/h2c` that such a route sends to: Gateway API's
      word for its proxy to speak cleartext HTTP/2 to the pods, balancing each request;
    - a port GKE's load balancer reaches through NEGs speaking HTTP/2 (`app-protocols`
      naming `HTTP2` on the Service): it balances each request over the pods.

    A mesh never helps a LoadBalancer or NodePort Service (outside clients have no proxy),
    and a port Istio reads as plain TCP (named `tcp…`) is balanced per connection even with
    sidecars: both stay flagged. LoadBalancer and NodePort Services get their own message and
    fix (a headless Service is no option for outside clients). When every selected workload
    runs one replica, it is info: the stickiness bites once the workload is scaled; not
    when that replica keeps local state (SVD204's note: a second would split the data).

    ## Why it matters
    kube-proxy balances connections, not requests, and so does a layer-4 cloud load
    balancer. An HTTP/2 client multiplexes every request over one long-lived connection, so
    each client sticks to one backend: new replicas get no traffic from existing clients, one
    bad backend fails a fixed set of clients completely, and during a rollout every client on
    a terminating pod sees its requests fail at once.

    ## Example
    Bad:
    ```yaml
    kind: Service
    spec:
      ports: [{name: grpc, port: 7070}]
    ```
    Good (client-side balancing over pod IPs):
    ```yaml
    kind: Service
    spec:
      clusterIP: None
      ports: [{name: grpc, port: 7070}]
    # client: dns:///svc.ns.svc.cluster.local:7070 with {"loadBalancingConfig":[{"round_robin":{}}]}
    ```

    ## Fix
    ClusterIP: pick one: a headless Service (`clusterIP: None`; the field is immutable, so
    recreate the Service) with the client's `round_robin` policy; a server-side maximum
    connection age (gRPC `MaxConnectionAge`, e.g. 30 s, with a grace to finish streams) so
    clients reconnect and rebalance; or a mesh/proxy that balances per request.
    LoadBalancer/NodePort: set the server's maximum connection age (or have clients reconnect
    periodically), or put an HTTP/2-aware (layer-7) load balancer in front that balances each
    request.

    ## References
    - https://kubernetes.io/blog/2018/11/07/grpc-load-balancing-on-kubernetes-without-tears/
    - https://github.com/grpc/proposal/blob/master/A9-server-side-conn-mgt.md
    - https://kubernetes.io/docs/concepts/services-networking/service/#application-protocol
    - https://istio.io/latest/docs/ops/configuration/traffic-management/protocol-selection/
    - https://linkerd.io/2/features/load-balancing/
    - https://istio.io/latest/blog/2021/proxyless-grpc/
    - https://gateway-api.sigs.k8s.io/api-types/grpcroute/
    - https://kubernetes.github.io/ingress-nginx/examples/grpc/
    - https://www.cockroachlabs.com/docs/stable/cockroach-start#networking
    """
    paths = run_paths(inventory, settings)
    for svc in inventory.services:
        if svc.headless or svc.type == "ExternalName":
            continue
        workloads = inventory.targeted(svc)
        mesh, certain = _mesh(workloads)
        external = svc.type in ("LoadBalancer", "NodePort")
        if svc.selector is None and not external:
            continue  # endpoints given by hand (a VIP, a VM): no pods here to balance over
        l7, meshed_path = _l7_hop(svc, workloads, paths)
        if l7 and not meshed_path and not external:
            continue  # a gRPC route's controller balances each request over the pods
        if not workloads and not external and _routed_by(inventory, svc, _GRPC_ROUTES):
            continue  # no pods here for the path model to follow; the route is its client
        if (svc.selector or {}).get("istio") == "egressgateway":
            continue  # its clients are sidecars, whether its pods are here or not (judge275)
        if not external and _proxied(inventory, svc):
            continue  # a layer-7 proxy's own route object sends to its pods (Contour, NGINX)
        if meshed_path and not certain:
            mesh, certain = f"{l7} (injected)", True
        if mesh and not certain and _settings_everywhere(inventory, workloads):
            mesh, certain = "Istio sidecar settings on every pod beside it", True
        plan = plan_connections(
            ConnectionFacts(
                transport=Transport.HTTP2,
                exposure=Exposure.EXTERNAL if external else Exposure.CLUSTER,
                bounds_age=_bounds_connection_age(workloads),
                longest_request_seconds=settings.max_request_seconds,
            )
        )
        if STICKY_RULE not in plan.rules:
            continue  # the server bounds connection age already: clients rebalance
        if any(
            _KNATIVE_ACTIVATOR.search(c.image) for w in workloads for c in w.template.containers
        ):
            continue  # its clients are the ingress gateway's Envoys, given its pods (EDS)
        if workloads and all(
            registry_found(inventory, w, c)
            for w in workloads
            for c in serving_containers(inventory, w)
        ):
            continue  # its clients dial the pods a registry lists (Dubbo), not the Service
        if workloads and all(
            w.ref.kind == "DaemonSet"
            and any(node_socket(c, w.template.volumes) for c in w.template.containers)
            for w in workloads
        ):
            continue  # each pod answers for its own node: no pool to balance (keda-gpu-scaler)
        if svc.internal_traffic_policy == "Local" and not external:
            continue  # each node's clients reach only their node's pod: no pool (judge376)
        serving = [c for w in workloads for c in serving_containers(inventory, w)]
        if serving and leader_served(inventory, svc, serving):
            continue  # only the elected leader serves it: the standbys refuse (judge373)
        counts = [inventory.replicas(w) for w in workloads]
        single = bool(counts) and all(n == 1 for n in counts)
        if single and all(
            any(local_state(w, c, alike=True) for c in w.template.containers) for w in workloads
        ):
            continue  # single by its state (SVD204's note): it is not scaled, no stickiness
        http_routed = not external and (
            _l7_route(svc, workloads, paths)
            or (not workloads and _routed_by(inventory, svc, _HTTP_ROUTES))
        )
        config = config_ports(inventory, svc)  # Envoy Gateway's xDS on a port named `grpc`
        for p in svc.ports:
            label = _h2_label(p, workloads)
            if label is None or _other_protocol(p, workloads) or _xds(p) or p.port in config:
                continue
            if not external and _undialed(inventory, svc, p):
                continue  # the inputs wire their clients by address, and none dials this one
            if label.lower().startswith("http2") and (
                external or _envoy(workloads) or _istio_gateway(svc)
            ):
                # Istio's naming for an HTTP port of a gateway: its clients (browsers, load
                # balancers, apps) mostly speak HTTP/1.1 to it, rarely cleartext HTTP/2
                continue
            if label == p.name and label.lower().startswith("http2") and http_routed:
                continue  # only named so; its route's proxy balances each HTTP request
            if (p.app_protocol or "").lower() == _H2C and http_routed:
                # Gateway API's appProtocol for a route's proxy to speak cleartext HTTP/2 to
                # the pods (GEP-1911), which it balances per request (zitadel; judge550)
                continue
            istio_tcp = (p.name or "").lower().startswith(_ISTIO_TCP_PREFIXES)
            meshed = bool(mesh) and not external  # outside clients reach no client proxy
            if meshed and certain and not (istio_tcp and str(mesh).startswith("Istio")):
                continue
            note, fix_ports = "", None
            if single:
                note = (
                    "; with 1 replica today it bites once the workload is scaled "
                    "(replicas, autoscaler) or on a surge rollout"
                )
            if meshed and istio_tcp and str(mesh).startswith("Istio"):
                note += (
                    f"; the pods have an {mesh}, but Istio reads a port named {p.name} as "
                    "plain TCP and balances it per connection too"
                )
                rest = (p.name or "").split("-", 1)[1] if "-" in (p.name or "") else ""
                fix_ports = {
                    "name": f"grpc-{rest}" if rest else "grpc",
                    "port": p.port,
                    "appProtocol": "grpc",
                }
            elif meshed:
                note += f"; {mesh} suggest a mesh that may balance per request"
            lower = single or (meshed and not certain)
            severity = Severity.INFO if lower else None
            if fix_ports is not None:
                yield Hit(
                    svc,
                    f"port {p.port} ({label}) is HTTP/2 behind a ClusterIP: each client's single "
                    "connection sticks to one backend" + note,
                    fix=Fix(
                        ObjectPatch({"spec": {"ports": [fix_ports]}}),
                        note="\n# Istio's protocol selection: a grpc name or appProtocol makes "
                        "the client sidecars balance each request",
                    ),
                    line=p.line,
                    severity=severity,
                )
                continue
            if external:
                yield Hit(
                    svc,
                    f"port {p.port} ({label}) is HTTP/2 behind a {svc.type} Service: the load "
                    "balancer and kube-proxy balance connections, so each client's single "
                    "connection sticks to one backend" + note,
                    fix=connection_fix(plan),
                    line=p.line,
                    severity=severity,
                )
                continue
            yield Hit(
                svc,
                f"port {p.port} ({label}) is HTTP/2 behind a ClusterIP: each client's single "
                "connection sticks to one backend" + note,
                fix=connection_fix(plan),
                line=p.line,
                severity=severity,
            )


def connection_fix(plan: ConnectionPlan, transport: Transport = Transport.HTTP2) -> Fix:
    """The fix text of a connection plan: the headless Service as a patch when it is a
    step, the other steps as comments with the plan's numbers."""
    lines: list[str] = []
    steps = plan.steps
    age, grace = plan.max_age_seconds, plan.max_age_grace_seconds
    headless = ConnectionStep.HEADLESS in steps
    if headless:
        lines += [
            "# recreate the Service (clusterIP is immutable); clients: dns:/// target + "
            "round_robin,",
        ]
        if ConnectionStep.MAX_AGE in steps:
            lines.append(
                f"# or keep the ClusterIP and set the server's MaxConnectionAge ({age}s, "
                f"grace {grace}s),"
            )
    elif ConnectionStep.MAX_AGE in steps:
        lines += [
            "# gRPC server: bound connection age so clients reconnect and rebalance, e.g. Go",
            f"#   grpc.KeepaliveParams(keepalive.ServerParameters{{MaxConnectionAge: {age} * "
            f"time.Second, MaxConnectionAgeGrace: {grace} * time.Second}})",
            f"# (Java: NettyServerBuilder.maxConnectionAge; C++/Python: "
            f"grpc.max_connection_age_ms = {(age or 0) * 1000}),",
        ]
    if ConnectionStep.SERVER_IDLE_LONGER in steps:
        lines.append(
            f"# the server's keep-alive idle timeout above the callers' "
            f"({plan.server_idle_seconds} s), or the callers' below the server's "
            f"({plan.caller_idle_seconds} s),"
        )
    tail = []
    if ConnectionStep.CLIENT_RECONNECT in steps:
        tail.append("clients reconnect periodically")
    if ConnectionStep.L7_BALANCER in steps:
        tail.append("an HTTP/2-aware (L7) load balancer or mesh in front")
    if tail:
        lines.append("# or " + ", or ".join(tail))
    if ConnectionStep.CLOSE_ON_SIGTERM in steps:
        signal = "GOAWAY" if transport is Transport.HTTP2 else "Connection: close"
        lines.append(f"# and on SIGTERM answer with {signal} before exiting: clients move in time")
    if headless:
        return Fix(ObjectPatch({"spec": {"clusterIP": "None"}}), note="\n" + "\n".join(lines))
    return Fix(note="\n".join(lines))


@rule("SVD302", "session-affinity-clientip", Cause.REUSE, Severity.INFO)
def session_affinity_clientip(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """`sessionAffinity: ClientIP` pins each client to one backend.

    ## What it does
    Flags Services with `sessionAffinity: ClientIP`. Not flagged where the affinity pins nothing
    or is what the backends need: a Service that carries no requests (metrics scraped per pod),
    and backends whose replicas keep data of their own (a data store or broker by its image, as
    SVD204 tells them; local state, as for SVD204: two Prometheus servers' series, a registry's
    images; a single instance of such a server too; the prometheus-operator's Prometheus,
    Alertmanager and ThanosRuler pods, by the labels it gives them, `app: prometheus` in its
    older releases), where the affinity keeps a client's reads consistent; and Socket.IO servers
    (an app file of the image's build context, no adapter), whose clients poll the pod that
    opened their session, and the other apps that keep sessions in their process (Streamlit,
    Gradio, Chainlit). Nor a Service or file named for the setting (`…-session-affinity`): an
    example of it, which the fix would undo.

    ## Why it matters
    Like connection reuse, affinity turns "one bad backend fails 1/N of requests" into "one
    bad backend fails every request of the clients pinned to it" for up to
    `timeoutSeconds` (default 10800, three hours). Behind SNAT (ingress, NAT gateway) many
    clients share one IP, so a whole client population can be pinned to a broken pod.

    ## Example
    Bad:
    ```yaml
    spec:
      sessionAffinity: ClientIP
    ```
    Good:
    ```yaml
    spec:
      sessionAffinity: None
    ```

    ## Fix
    Keep session state out of the pod (a shared store) and drop the affinity; if it is
    required, lower `sessionAffinityConfig.clientIP.timeoutSeconds` and make readiness
    strict so a bad pod leaves the Service quickly.

    ## References
    - https://kubernetes.io/docs/reference/networking/virtual-ips/#session-affinity
    """
    del settings
    for svc in inventory.services:
        if svc.session_affinity == "ClientIP" and not _affinity_moot(inventory, svc):
            yield Hit(
                svc,
                f"Service {svc.ref.name} pins each client IP to one backend "
                "(sessionAffinity: ClientIP): a bad pod fails its clients completely",
                fix=Fix(ObjectPatch({"spec": {"sessionAffinity": "None"}})),
            )


# The pods the prometheus-operator makes for its Prometheus, Alertmanager and ThanosRuler
# resources carry `app.kubernetes.io/name: prometheus` (…) and `prometheus: NAME` (…), or in
# its older releases `app: prometheus` (redhat-cop/gitops-catalog's; judge414); each
# replica scrapes, or keeps silences and rule results, of its own
# (pkg/prometheus/statefulset.go, pkg/alertmanager/statefulset.go in
# prometheus-operator/prometheus-operator)
_OPERATED = frozenset({"prometheus", "alertmanager", "thanos-ruler"})


# A Service or file named for the setting shows it (cloud-provider-kind's
# examples/loadbalancer_affinity.yaml, Kubernetes in Action's
# kubia-svc-client-ip-session-affinity; judge505, judge534): the fix would undo the example
_AFFINITY_NAMED = re.compile(r"affinity", re.IGNORECASE)


def _affinity_moot(inventory: Inventory, svc: Service) -> bool:
    """Whether a Service's client-IP affinity pins nothing (no requests but scrapes) or keeps
    clients on the replica holding their data (local state, or a scraper's series:
    Prometheus' HA pairs answer queries each from its own scrapes)."""
    if not carries_requests(inventory, svc):
        return True
    if _AFFINITY_NAMED.search(svc.ref.name) or _AFFINITY_NAMED.search(
        PurePath(svc.location.file).name
    ):
        return True  # an example of the setting (kubia-svc-client-ip-session-affinity; judge534)
    selector = svc.selector or {}
    names = (selector.get("app.kubernetes.io/name"), selector.get("app"))
    if any(n in _OPERATED for n in names) or _OPERATED & selector.keys():
        return True  # the prometheus-operator's servers: each replica holds its own data
    workloads = serving_targets(inventory, svc)
    if any(data_store(w) for w in workloads):
        return True  # a single store's, or replicas' each holding its own (longhorn's minio)
    return any(
        local_state(w, c, alike=True, emptydirs=False) is not None
        or queried_scraper(c)
        or process_sessions(inventory, c) is not None
        for w in workloads
        for c in serving_containers(inventory, w)
    )


def _undialed(inventory: Inventory, svc: Service, port: ServicePort) -> bool:
    """Whether no file of the inputs dials the Service's port while a file in its folder
    dials a port of their Services, or a file in its app's folder (the one above) dials
    another port of it (the inputs wire its clients: ``Inventory.dialed``; podinfo's
    deploy/webapp/frontend dials its backend's HTTP 9898, never its gRPC 9999; judge157)."""
    dialed = inventory.dialed
    if svc.location is None or (svc.ref.name, port.port) in dialed.addresses:
        return False
    home = PurePath(svc.location.file).parent
    app = dialed.under.get(home.parent, frozenset())
    if any((svc.ref.name, p.port) in app for p in svc.ports):
        return True
    near = dialed.under.get(home, frozenset())
    return any((s.ref.name, p.port) in near for s in inventory.services for p in s.ports)
