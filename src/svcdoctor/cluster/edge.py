"""Where ``rollout-test``'s load enters: the Service's ClusterIP, or an edge in front of it
(``--through``: a URL, an Ingress or a Gateway) resolved to the address the agent sends to,
the Host header and the path that route to the Service.

The resolution is pure over the objects' dicts (``ingress_edge``, ``gateway_edge``); only
``resolve`` reads them. An edge that leads nowhere near the Service, or has no address yet,
is refused (``Refused``: one line naming the object, exit 2).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from svcdoctor.cluster.api import ApiReader
from svcdoctor.errors import SvcdoctorError

# Ingress: HTTP on 80 and, for a host of spec.tls, HTTPS on 443 (kubernetes.io/docs/concepts/
# services-networking/ingress/#tls); a status address may list its ports (LoadBalancerIngress
# .ports, kubernetes.io/docs/reference/kubernetes-api/service-resources/ingress-v1/)
HTTP_PORT, HTTPS_PORT = 80, 443
# a wildcard host matches one DNS label (Ingress spec.rules[].host, HTTPRoute hostnames)
WILDCARD_LABEL = "svcdoctor-load"
GATEWAY_GROUP = "gateway.networking.k8s.io"


class Refused(SvcdoctorError):
    """rollout-test will not run as asked (one line, exit 2)."""


class EdgeKind(StrEnum):
    """Where the load enters."""

    SERVICE = "service"  # the ClusterIP
    URL = "url"
    INGRESS = "ingress"
    GATEWAY = "gateway"


@dataclass(frozen=True, slots=True)
class Edge:
    """The load's target: ``address`` (HOST:PORT) the agent connects to, ``host`` its Host
    header (None: the address), ``path`` the request path; ``name`` the edge as given
    (``ingress/NAME``, ``gateway/NAME``, the URL) or the Service; ``upstream`` what the
    request rows name as their upstream (the Service as the edge routes to it)."""

    kind: EdgeKind
    name: str
    address: str
    scheme: str = "http"
    host: str | None = None
    path: str = "/"
    upstream: str | None = None

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host or self.address}{self.path}"

    def route(self, service: str) -> str:
        """The path the load took, edge first (``service``: namespace/name)."""
        if self.kind is EdgeKind.SERVICE:
            return f"ClusterIP {self.address} → Service {service} → pods"
        if self.kind is EdgeKind.URL:
            return f"{self.name} → Service {service} → pods"
        via = f" ({self.scheme}://{self.address}{self.path})"
        host = f", Host {self.host}" if self.host else ""
        return f"{self.name}{via}{host} → Service {service} → pods"


def service_address(service: Mapping[str, Any], port: str | None = None) -> str:
    """``ClusterIP:port`` of the Service (``port``: a port's name or number; default: the
    first)."""
    spec = service.get("spec") or {}
    name = (service.get("metadata") or {}).get("name")
    ip = spec.get("clusterIP")
    if not ip or ip == "None":
        raise Refused(f"service {name} is headless (no ClusterIP): nothing to load through")
    ports = spec.get("ports") or []
    chosen = [p for p in ports if port is None or port in (str(p.get("port")), p.get("name"))]
    if not chosen:
        known = ", ".join(str(p.get("name") or p.get("port")) for p in ports) or "none"
        raise Refused(f"service {name} has no port {port} (ports: {known})")
    host = f"[{ip}]" if ":" in str(ip) else str(ip)
    return f"{host}:{chosen[0]['port']}"


def parse_through(text: str) -> tuple[EdgeKind, str]:
    """``--through``: ``http(s)://HOST[:PORT]/PATH``, ``ingress/NAME`` or ``gateway/NAME``
    (``gateway/NAMESPACE/NAME`` for a Gateway in another namespace)."""
    if "://" in text:
        return EdgeKind.URL, text
    kind, _, name = text.partition("/")
    # kubectl's spellings (cluster/resources.py: short names ing, gtw)
    kinds = dict.fromkeys(("ingress", "ingresses", "ing"), EdgeKind.INGRESS)
    kinds |= dict.fromkeys(("gateway", "gateways", "gtw"), EdgeKind.GATEWAY)
    found = kinds.get(kind.lower())
    if found is None or not name or (found is EdgeKind.INGRESS and "/" in name):
        raise Refused(
            f"--through {text}: expected http(s)://HOST[:PORT]/PATH, ingress/NAME or gateway/NAME"
        )
    return found, name


def url_edge(text: str) -> Edge:
    """``--through URL``: the agent sends to the URL's host and port with its Host header."""
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise Refused(f"--through {text}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Refused(f"--through {text}: expected http(s)://HOST[:PORT]/PATH")
    if parts.username is not None or parts.password is not None:
        # they would be sent as the Host header and land in the Job's arguments and reports
        raise Refused("--through: a URL with credentials (USER:PASSWORD@) is not sent: remove them")
    scheme = parts.scheme
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    header = f"{host}:{port}" if port else host
    port = port or (HTTPS_PORT if scheme == "https" else HTTP_PORT)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Edge(EdgeKind.URL, text, f"{host}:{port}", scheme, header, path)


def _address(entries: Sequence[Mapping[str, Any]], key: str = "ip") -> str | None:
    for entry in entries:
        value = entry.get(key) or entry.get("hostname") or entry.get("value")
        if value:
            return f"[{value}]" if ":" in str(value) else str(value)
    return None


def _host(host: str | None) -> str | None:
    return f"{WILDCARD_LABEL}{host[1:]}" if host and host.startswith("*.") else host or None


def _ingress_port(backend: Mapping[str, Any]) -> str:
    port = ((backend.get("service") or {}).get("port")) or {}
    return str(port.get("number") or port.get("name") or backend.get("servicePort") or "")


# an ingress-nginx regex path (nginx.ingress.kubernetes.io/use-regex, pathType
# ImplementationSpecific: https://kubernetes.github.io/ingress-nginx/user-guide/ingress-path-matching/)
_REGEX = re.compile(r"[()\[\]{}|^$*+?\\]")


def _literal(path: str, path_type: object) -> str:
    """The request path for an Ingress path: an ImplementationSpecific regex is sent as its
    literal prefix (``/api(/|$)(.*)`` → ``/api``), never as written."""
    if path_type not in (None, "ImplementationSpecific"):
        return path
    cut = _REGEX.search(path)
    return (path[: cut.start()] or "/") if cut else path


def _leads_to(backend: Mapping[str, Any] | None, service: str) -> bool:
    if not backend:
        return False
    return (backend.get("service") or {}).get("name") == service or backend.get(
        "serviceName"
    ) == service


def ingress_edge(ingress: Mapping[str, Any], service: str) -> Edge:
    """The Ingress's address and the first rule (host, path) that routes to ``service`` (its
    defaultBackend last); https when the host is one of ``spec.tls``."""
    meta, spec = ingress.get("metadata") or {}, ingress.get("spec") or {}
    name, ns = f"ingress/{meta.get('name')}", meta.get("namespace")
    found: tuple[str | None, str, Mapping[str, Any]] | None = None
    for rule in spec.get("rules") or []:
        for item in (rule.get("http") or {}).get("paths") or []:
            if found is None and _leads_to(item.get("backend"), service):
                path = _literal(str(item.get("path") or "/"), item.get("pathType"))
                found = (rule.get("host"), path, item["backend"])
    if found is None and _leads_to(spec.get("defaultBackend") or spec.get("backend"), service):
        found = (None, "/", spec.get("defaultBackend") or spec.get("backend") or {})
    if found is None:
        raise Refused(f"{name}: no rule of it routes to service {service}")
    lb = ((ingress.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    ip = _address(lb)
    if ip is None:
        raise Refused(f"{name} has no address (status.loadBalancer.ingress is empty)")
    host, path, backend = found
    tls = any(not t.get("hosts") or host in t.get("hosts", ()) for t in spec.get("tls") or [])
    scheme = "https" if tls else "http"
    ports = [p.get("port") for e in lb for p in e.get("ports") or [] if p.get("port")]
    usual = HTTPS_PORT if tls else HTTP_PORT
    port = usual if usual in ports or not ports else ports[0]
    # ingress-nginx names its upstream NAMESPACE-SERVICE-PORT ($proxy_upstream_name,
    # kubernetes/ingress-nginx internal/ingress/controller/controller.go upstreamName)
    upstream = f"{ns}-{service}-{_ingress_port(backend)}"
    return Edge(EdgeKind.INGRESS, name, f"{ip}:{port}", scheme, _host(host), path, upstream)


def _attached(route: Mapping[str, Any], gateway: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The route's parentRefs naming ``gateway``."""
    gmeta = gateway.get("metadata") or {}
    rns = (route.get("metadata") or {}).get("namespace")
    return [
        p for p in (route.get("spec") or {}).get("parentRefs") or []
        if p.get("name") == gmeta.get("name")
        and (p.get("namespace") or rns) == gmeta.get("namespace")
        and (p.get("kind") or "Gateway") == "Gateway"
        and (p.get("group") or GATEWAY_GROUP) == GATEWAY_GROUP
    ]  # fmt: skip


def gateway_edge(
    gateway: Mapping[str, Any], routes: Sequence[Mapping[str, Any]], service: str, namespace: str
) -> Edge:
    """The Gateway's address, the listener and the first HTTPRoute rule attached to it whose
    backendRefs hold ``service`` (of ``namespace``): its hostname and path prefix."""
    gmeta = gateway.get("metadata") or {}
    name = f"gateway/{gmeta.get('name')}"
    for route in routes:
        parents = _attached(route, gateway)
        rspec = route.get("spec") or {}
        rns = (route.get("metadata") or {}).get("namespace")
        for rule in rspec.get("rules") or [] if parents else []:
            refs = rule.get("backendRefs") or []
            if any(b.get("name") == service and (b.get("namespace") or rns) == namespace
                   and (b.get("kind") or "Service") == "Service" for b in refs):  # fmt: skip
                return _gateway_target(
                    gateway, name, parents[0], rspec, rule, f"{namespace}/{service}"
                )
    raise Refused(f"{name}: no HTTPRoute attached to it routes to service {namespace}/{service}")


def _gateway_target(
    gateway: Mapping[str, Any],
    name: str,
    parent: Mapping[str, Any],
    route: Mapping[str, Any],
    rule: Mapping[str, Any],
    upstream: str,
) -> Edge:
    ip = _address((gateway.get("status") or {}).get("addresses") or [], "value")
    if ip is None:
        raise Refused(f"{name} has no address (status.addresses is empty)")
    listeners = (gateway.get("spec") or {}).get("listeners") or []
    section, port = parent.get("sectionName"), parent.get("port")
    fitting = [
        li for li in listeners
        if section in (None, li.get("name")) and port in (None, li.get("port"))
        and li.get("protocol") in ("HTTP", "HTTPS")
    ]  # fmt: skip
    if not fitting:
        raise Refused(f"{name}: no HTTP or HTTPS listener of it takes the route")
    listener = sorted(fitting, key=lambda li: li.get("protocol") != "HTTP")[0]
    scheme = "https" if listener.get("protocol") == "HTTPS" else "http"
    hosts = route.get("hostnames") or [listener.get("hostname")]
    path = "/"
    for match in rule.get("matches") or []:
        value = (match.get("path") or {}).get("value")
        if value and (match.get("path") or {}).get("type", "PathPrefix") in ("PathPrefix", "Exact"):
            path = str(value)
            break
    address = f"{ip}:{listener.get('port') or (HTTPS_PORT if scheme == 'https' else HTTP_PORT)}"
    return Edge(EdgeKind.GATEWAY, name, address, scheme, _host(hosts[0]), path, upstream)


def resolve(api: ApiReader, through: str, namespace: str, service: str) -> Edge:
    """``--through`` read from the cluster: the URL as given, or the Ingress (of the
    Service's namespace) or the Gateway and the HTTPRoutes of the Service's namespace."""
    kind, name = parse_through(through)
    if kind is EdgeKind.URL:
        return url_edge(name)
    if kind is EdgeKind.INGRESS:
        ingress = api.get("ingresses", namespace, name)
        if ingress is None:
            raise Refused(f"--through {through}: ingress {namespace}/{name} not found")
        return ingress_edge(ingress, service)
    gns, _, gname = name.rpartition("/")
    gateway = api.get("gateways", gns or namespace, gname)
    if gateway is None:
        raise Refused(f"--through {through}: gateway {gns or namespace}/{gname} not found")
    return gateway_edge(gateway, api.list("httproutes", namespace), service, namespace)


def target(
    api: ApiReader,
    namespace: str,
    service: Mapping[str, Any],
    port: str | None,
    through: str | None,
    network_policy: bool,
) -> Edge:
    """Where the load enters: the Service's ClusterIP (``port``), or ``through``'s edge
    (HTTP only: the agent speaks no TLS; without ``--network-policy``, whose egress would
    have to name the pods behind the edge's address, which kube-proxy or the load balancer
    picks)."""
    name = str(service["metadata"]["name"])
    address = service_address(service, port)
    if through is None:
        return Edge(EdgeKind.SERVICE, name, address)
    if network_policy:
        raise Refused("--network-policy with --through: the edge's pods are not known to allow")
    edge = resolve(api, through, namespace, name)
    if edge.scheme != "http":
        raise Refused(f"--through {through}: {edge.url} is HTTPS; the load agent speaks HTTP")
    return edge
