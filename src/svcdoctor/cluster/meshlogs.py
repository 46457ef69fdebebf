"""Which proxy and client logs collect reads, and which of their lines it keeps (pure):
ingress-nginx's access and error lines about the Service, the request rows of client and
sidecar logs, the Service's pods' Linkerd proxies, and the Envoy-based gateways in front.

* Linkerd's proxy writes its access log (``config.linkerd.io/access-log``) on the answering
  pod's side, to the ``linkerd-proxy`` container's stderr
  (https://linkerd.io/2-edge/features/access-logging/): every request line of a pod of the
  Service is about the Service. Each kept line gets ``kubectl logs --prefix``'s
  ``[pod/NAME/linkerd-proxy]``, which the reader takes as the backend that answered.
* Envoy Gateway's proxies (container ``envoy``; labels from envoyproxy/gateway
  ``internal/infrastructure/kubernetes/proxy/resource.go``, ``envoyLabels``) and Istio's
  gateways (container ``istio-proxy``; ``istio=ingressgateway`` of the default install
  profile, ``gateway.istio.io/managed`` on gateways Istio deploys for a Gateway API
  Gateway, https://istio.io/latest/docs/tasks/traffic-management/ingress/gateway-api/)
  route to pod IPs: a line is about the Service when it names one of its pods' addresses
  or its ``outbound|PORT||SERVICE.NAMESPACE.svc…`` cluster.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from svcdoctor.evidence.proxylogs import NGINX_ACCESS
from svcdoctor.evidence.reader import detect

LINKERD_PROXY = "linkerd-proxy"


@dataclass(frozen=True, slots=True)
class Gateway:
    """One kind of Envoy-based gateway: its pods' labels, its container, and the namespace
    it is installed in by default (searched when pods cannot be listed cluster-wide)."""

    name: str
    labels: str
    container: str
    namespace: str


GATEWAYS = (
    Gateway(
        "envoy-gateway",
        "app.kubernetes.io/managed-by=envoy-gateway,app.kubernetes.io/component=proxy",
        "envoy",
        "envoy-gateway-system",
    ),
    Gateway("istio-ingressgateway", "istio=ingressgateway", "istio-proxy", "istio-system"),
    Gateway("istio-gateway", "gateway.istio.io/managed", "istio-proxy", "istio-system"),
)

_ACCESS = re.compile(NGINX_ACCESS)
_NGINX_ERROR = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[\w+\]")
_ERROR_UPSTREAM = re.compile(r"upstream: \"\w+://(?:\[([0-9a-fA-F:.]+)\]|([^:/\"]+))")
_ENVOY_CLUSTER = re.compile(r"\b(inbound|outbound)\|\d*\|[^|\s\"]*\|([^\s\"]*)")
# request formats diagnose reads, and the extension a file of each gets
REQUEST_FORMATS = {
    "jsonl": "jsonl",
    "csv": "csv",
    "envoy-json": "jsonl",
    "nginx-access": "log",
    "envoy": "log",
    "linkerd": "log",
    "linkerd-json": "log",  # kept with kubectl's --prefix: no longer one JSON object a line
}

_ADDRESS = re.compile(r"(?<![\w.:])(\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-fA-F:.]+\]):\d+")


def prefixed(lines: Sequence[str], pod: str, container: str) -> list[str]:
    """The lines as ``kubectl logs --prefix`` shows them."""
    return [f"[pod/{pod}/{container}] {line}" for line in lines]


def gateway_lines(
    lines: Sequence[str], service: str, namespace: str, ips: frozenset[str]
) -> list[str]:
    """A gateway's access-log lines about the Service: those naming one of its pods'
    addresses (``UPSTREAM_HOST``) or its outbound cluster."""
    host = f"|{service}.{namespace}.svc"
    kept = []
    for line in lines:
        if host in line or any(m.strip("[]") in ips for m in _ADDRESS.findall(line)):
            kept.append(line)
    return kept


def ingress_nginx_lines(
    text: str, upstreams: frozenset[str], ips: frozenset[str]
) -> tuple[list[str], list[str]]:
    """The access-log lines of ``upstreams`` and the error-log lines about them: those whose
    ``upstream:`` is one of ``ips``, an address the kept access lines name, or an upstream
    (``no live upstreams``). Every other line (other Services, the controller's own) goes."""
    access: list[str] = []
    known = set(ips)
    marks = [f" [{u}] " for u in upstreams]
    for line in text.splitlines():
        if not any(mark in line for mark in marks):
            continue
        if (m := _ACCESS.match(line)) and m["upstream_name"] in upstreams:
            access.append(line)
            addrs = m["addrs"].replace(" : ", ", ").split(", ")
            known.update(a.rsplit(":", 1)[0].strip("[]") for a in addrs if a != "-")
    errors = []
    for line in text.splitlines():
        if "upstream: " in line and _NGINX_ERROR.match(line):
            m = _ERROR_UPSTREAM.search(line)
            host = (m[1] or m[2]) if m else None
            if host is not None and (host in known or host in upstreams):
                errors.append(line)
    return access, errors


def request_lines(text: str) -> tuple[str, list[str]] | None:
    """The request rows in a container log and their format (see ``REQUEST_FORMATS``), or
    None when it has none. The first line in a request format decides it; lines in other
    formats (startup messages, the app's other logs) are left out, so diagnose reads the
    file whole. A CSV keeps its header and the rows with as many fields."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        fmt = detect(line.encode()) if line.strip() else "unknown"
        if fmt not in REQUEST_FORMATS:
            continue
        if fmt == "csv":
            width = line.count(",")
            rows = [r for r in lines[i + 1 :] if r.count(",") == width and r.strip()]
            return (fmt, [line, *rows]) if rows else None
        return fmt, [r for r in lines[i:] if detect(r.encode()) == fmt]
    return None


def envoy_lines_for(lines: Sequence[str], service: str, namespace: str) -> list[str]:
    """A sidecar's access-log lines about the Service: inbound (to the pod it runs in) and
    outbound to ``SERVICE.NAMESPACE.svc…``; lines naming no cluster are kept."""
    host = f"{service}.{namespace}.svc"
    kept = []
    for line in lines:
        m = _ENVOY_CLUSTER.search(line)
        if m is None or m[1] == "inbound" or m[2].startswith(host):
            kept.append(line)
    return kept
