"""Raw objects that send traffic to Services → ``Route``, ``Front``, ``ReferenceGrant``.

Ingress (``networking.k8s.io/v1`` and the old ``extensions``/``v1beta1`` backend form),
Gateway API routes (``gateway.networking.k8s.io``: HTTPRoute, GRPCRoute, TLSRoute, TCPRoute,
UDPRoute), Gateways, GatewayClasses and ReferenceGrants, IngressClasses, and the AWS Load
Balancer Controller's TargetGroupBinding (``elbv2.k8s.aws``). Istio's own ``Gateway``
(``networking.istio.io``) is another kind of object and stays a plain resource.
"""

from __future__ import annotations

from collections.abc import Callable

from svcdoctor.manifests.fields import Fields
from svcdoctor.manifests.yamlnodes import YMap, text_of
from svcdoctor.model.finding import ObjectRef
from svcdoctor.model.route import (
    BackendRef,
    Front,
    FrontKind,
    ReferenceGrant,
    Route,
    RouteKind,
)

GATEWAY_GROUP = "gateway.networking.k8s.io"
DEFAULT_CLASS = "ingressclass.kubernetes.io/is-default-class"
INGRESS_CLASS = "kubernetes.io/ingress.class"

RouteObject = Route | Front | ReferenceGrant


def _meta_map(f: Fields, key: str) -> dict[str, str]:
    return f.labels(f.mapping(f.raw.body, "metadata", "metadata"), key, f"metadata.{key}")


def _ingress(f: Fields) -> Route:
    spec = f.mapping(f.raw.body, "spec", "spec")
    backends: list[BackendRef] = []

    def backend(node: YMap | None, path: str) -> None:
        if node is None:
            return
        svc = f.mapping(node, "service", f"{path}.service")
        if svc is not None:  # networking.k8s.io/v1
            port = f.mapping(svc, "port", f"{path}.service.port")
            number = f.integer(port, "number", f"{path}.service.port.number")
            name = f.text(port, "name", f"{path}.service.port.name")
            wanted = f.text(svc, "name", f"{path}.service.name")
            if wanted:
                backends.append(BackendRef(wanted, svc.line, port=number or name))
        elif (old := f.text(node, "serviceName", f"{path}.serviceName")) is not None:
            backends.append(
                BackendRef(old, node.line, port=f.int_or_str(node, "servicePort", path))
            )

    for key in ("defaultBackend", "backend"):
        backend(f.mapping(spec, key, f"spec.{key}"), f"spec.{key}")
    for rpath, rule in f.maps(spec, "rules", "spec.rules"):
        http = f.mapping(rule, "http", f"{rpath}.http")
        for ppath, item in f.maps(http, "paths", f"{rpath}.http.paths"):
            backend(f.mapping(item, "backend", f"{ppath}.backend"), f"{ppath}.backend")
    annotations = _meta_map(f, "annotations")
    class_name = f.text(spec, "ingressClassName", "spec.ingressClassName")
    return Route(
        ref=f.ref,
        location=f.raw.location,
        kind=RouteKind.INGRESS,
        backends=tuple(backends),
        class_name=class_name or annotations.get(INGRESS_CLASS),
        annotations=annotations,
    )


def _gateway_route(f: Fields) -> Route:
    spec = f.mapping(f.raw.body, "spec", "spec")
    parents = [
        ObjectRef(
            f.text(p, "kind", f"{path}.kind") or "Gateway",
            f.text(p, "namespace", f"{path}.namespace") or f.ref.namespace,
            f.text(p, "name", f"{path}.name") or "",
        )
        for path, p in f.maps(spec, "parentRefs", "spec.parentRefs")
    ]
    backends: list[BackendRef] = []
    for rpath, rule in f.maps(spec, "rules", "spec.rules"):
        for bpath, b in f.maps(rule, "backendRefs", f"{rpath}.backendRefs"):
            name = f.text(b, "name", f"{bpath}.name")
            if name:
                backends.append(
                    BackendRef(
                        name,
                        b.line,
                        namespace=f.text(b, "namespace", f"{bpath}.namespace") or "",
                        port=f.integer(b, "port", f"{bpath}.port"),
                        kind=f.text(b, "kind", f"{bpath}.kind") or "Service",
                        group=f.text(b, "group", f"{bpath}.group") or "",
                    )
                )
    return Route(
        ref=f.ref,
        location=f.raw.location,
        kind=RouteKind(f.raw.kind),
        backends=tuple(backends),
        parents=tuple(parents),
        annotations=_meta_map(f, "annotations"),
    )


# the labels the AWS Load Balancer Controller puts on the TargetGroupBindings it makes for a
# Service's NLB or an Ingress' ALB (kubernetes-sigs/aws-load-balancer-controller
# pkg/deploy/tracking/provider.go, StackLabels: "<prefix>/stack-namespace", "-name")
_STACKS = (("service.k8s.aws", "Service"), ("ingress.k8s.aws", "Ingress"))


def _made_for(labels: dict[str, str]) -> ObjectRef | None:
    for prefix, kind in _STACKS:
        name = labels.get(f"{prefix}/stack-name")
        if name:
            return ObjectRef(kind, labels.get(f"{prefix}/stack-namespace", ""), name)
    return None


def _target_group_binding(f: Fields) -> Route:
    spec = f.mapping(f.raw.body, "spec", "spec")
    ref = f.mapping(spec, "serviceRef", "spec.serviceRef")
    name = f.text(ref, "name", "spec.serviceRef.name")
    backends = (
        (BackendRef(name, ref.line, port=f.int_or_str(ref, "port", "spec.serviceRef.port")),)
        if name and ref is not None
        else ()
    )
    return Route(
        ref=f.ref,
        location=f.raw.location,
        kind=RouteKind.TARGET_GROUP_BINDING,
        backends=backends,
        annotations=_meta_map(f, "annotations"),
        target_type=f.text(spec, "targetType", "spec.targetType") or "instance",
        made_for=_made_for(_meta_map(f, "labels")),
    )


def _front(f: Fields) -> Front:
    spec = f.mapping(f.raw.body, "spec", "spec")
    kind = FrontKind(f.raw.kind)
    annotations = _meta_map(f, "annotations")
    field = {
        FrontKind.INGRESS_CLASS: "controller",
        FrontKind.GATEWAY_CLASS: "controllerName",
    }.get(kind)
    return Front(
        ref=f.ref,
        location=f.raw.location,
        kind=kind,
        controller=(f.text(spec, field, f"spec.{field}") or "") if field else "",
        class_name=f.text(spec, "gatewayClassName", "spec.gatewayClassName") or ""
        if kind is FrontKind.GATEWAY
        else "",
        default=annotations.get(DEFAULT_CLASS) == "true",
        annotations=annotations,
    )


def _grant(f: Fields) -> ReferenceGrant:
    spec = f.mapping(f.raw.body, "spec", "spec")
    sources = tuple(
        (f.text(s, "kind", f"{path}.kind") or "", f.text(s, "namespace", f"{path}.namespace") or "")
        for path, s in f.maps(spec, "from", "spec.from")
    )
    targets = tuple(
        (f.text(t, "kind", f"{path}.kind") or "", f.text(t, "name", f"{path}.name") or "")
        for path, t in f.maps(spec, "to", "spec.to")
    )
    return ReferenceGrant(f.ref, f.raw.location, sources, targets)


_BUILDERS: dict[tuple[str, str], Callable[[Fields], RouteObject]] = {
    ("networking.k8s.io", "Ingress"): _ingress,
    ("extensions", "Ingress"): _ingress,
    ("networking.k8s.io", "IngressClass"): _front,
    (GATEWAY_GROUP, "Gateway"): _front,
    (GATEWAY_GROUP, "GatewayClass"): _front,
    (GATEWAY_GROUP, "ReferenceGrant"): _grant,
    ("elbv2.k8s.aws", "TargetGroupBinding"): _target_group_binding,
    **{(GATEWAY_GROUP, k.value): _gateway_route for k in RouteKind if k.value.endswith("Route")},
}


def route_object(f: Fields) -> RouteObject | None:
    """The route, front or grant of a raw object, or ``None`` for any other object."""
    group = text_of(f.raw.body.get("apiVersion")).rpartition("/")[0]
    build = _BUILDERS.get((group, f.raw.kind))
    return build(f) if build else None
