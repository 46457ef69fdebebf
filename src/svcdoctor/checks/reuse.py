"""Connection-reuse checks (``SVD3xx``): balancing per connection, not per request."""

from __future__ import annotations

from collections.abc import Iterator

from svcdoctor.checks._serving import dump
from svcdoctor.checks.registry import Hit, rule
from svcdoctor.checks.settings import Settings
from svcdoctor.model import Cause, Inventory, Service, ServicePort, Severity

_H2_PROTOCOLS = frozenset({"grpc", "h2c", "http2", "kubernetes.io/h2c", "grpcs", "h2"})
_H2_PREFIXES = ("grpc", "h2c", "http2")
_MESH_INJECT = {"sidecar.istio.io/inject": "true", "linkerd.io/inject": "enabled"}


def _is_h2(port: ServicePort) -> bool:
    if port.app_protocol:
        return port.app_protocol.lower() in _H2_PROTOCOLS
    name = (port.name or "").lower()
    return name.startswith(_H2_PREFIXES) and not name.startswith("grpc-web")


def _meshed(inventory: Inventory, svc: Service) -> bool:
    return any(
        meta.get(key) == value
        for w in inventory.targeted(svc)
        for meta in (w.template.annotations, w.template.labels)
        for key, value in _MESH_INJECT.items()
    )


@rule("SVD301", "grpc-behind-clusterip", Cause.REUSE, Severity.WARNING)
def grpc_behind_clusterip(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """A gRPC/HTTP2 port sits behind a ClusterIP: one connection, one backend, for ever.

    ## What it does
    Flags ports of non-headless Services that carry HTTP/2: `appProtocol` `grpc`, `h2c`,
    `http2` or `kubernetes.io/h2c`, or (without `appProtocol`) a port name starting with
    `grpc`, `h2c` or `http2`. Pods annotated for Istio or Linkerd injection lower it to info.

    ## Why it matters
    kube-proxy balances connections, not requests. An HTTP/2 client multiplexes every request
    over one long-lived connection, so each client sticks to one backend: new replicas get no
    traffic from existing clients, one bad backend fails a fixed set of clients completely,
    and during a rollout every client on a terminating pod sees its requests fail at once.

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
    Pick one: a headless Service (`clusterIP: None`; the field is immutable, so recreate the
    Service) with the client's `round_robin` policy; a server-side maximum connection age
    (gRPC `MaxConnectionAge`, e.g. 30 s) so clients reconnect and rebalance; or a mesh/proxy
    that balances per request.

    ## References
    - https://kubernetes.io/blog/2018/11/07/grpc-load-balancing-on-kubernetes-without-tears/
    - https://github.com/grpc/proposal/blob/master/A9-server-side-conn-mgt.md
    - https://kubernetes.io/docs/concepts/services-networking/service/#application-protocol
    """
    del settings
    for svc in inventory.services:
        if svc.headless or svc.type == "ExternalName":
            continue
        meshed = _meshed(inventory, svc)
        for p in svc.ports:
            if not _is_h2(p):
                continue
            label = p.app_protocol or p.name
            yield Hit(
                svc,
                f"port {p.port} ({label}) is HTTP/2 behind a ClusterIP: each client's single "
                "connection sticks to one backend"
                + ("; a mesh sidecar is injected and may balance per request" if meshed else ""),
                fix=dump({"spec": {"clusterIP": "None"}})
                + "\n# recreate the Service (clusterIP is immutable); clients: dns:/// target +"
                " round_robin,\n# or set the server's MaxConnectionAge (e.g. 30s) to keep the"
                " ClusterIP",
                line=p.line,
                severity=Severity.INFO if meshed else None,
            )


@rule("SVD302", "session-affinity-clientip", Cause.REUSE, Severity.INFO)
def session_affinity_clientip(inventory: Inventory, settings: Settings) -> Iterator[Hit]:
    """`sessionAffinity: ClientIP` pins each client to one backend.

    ## What it does
    Flags Services with `sessionAffinity: ClientIP`.

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
        if svc.session_affinity == "ClientIP":
            yield Hit(
                svc,
                f"Service {svc.ref.name} pins each client IP to one backend "
                "(sessionAffinity: ClientIP): a bad pod fails its clients completely",
                fix=dump({"spec": {"sessionAffinity": "None"}}),
            )
