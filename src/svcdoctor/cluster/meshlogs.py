"""Which proxy logs collect reads besides ingress-nginx's, and which of their lines it keeps
(pure): the Service's pods' Linkerd proxies, and the Envoy-based gateways in front of them.

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
