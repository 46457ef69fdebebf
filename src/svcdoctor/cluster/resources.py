"""The Kubernetes resources svcdoctor reads, with where the API serves them.

One table for the reader, the lab's API server and the RBAC test: a resource svcdoctor
reads is listed here once, with its group, version, kind and scope.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Resource:
    plural: str  # the name in URLs and RBAC rules: "pods", "endpointslices"
    kind: str
    group: str  # "" for the core group
    version: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None) -> str:
        """The URL path of the collection (in ``namespace`` when given) or of one object."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace and self.namespaced:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        return f"{base}/{name}" if name else base


GATEWAY_GROUP = "gateway.networking.k8s.io"

RESOURCES: dict[str, Resource] = {
    r.plural if r.group != "events.k8s.io" else "events.events.k8s.io": r
    for r in (
        Resource("namespaces", "Namespace", "", "v1", namespaced=False, short_names=("ns",)),
        Resource("nodes", "Node", "", "v1", namespaced=False, short_names=("no",)),
        Resource("pods", "Pod", "", "v1", short_names=("po",)),
        Resource("services", "Service", "", "v1", short_names=("svc",)),
        Resource("endpoints", "Endpoints", "", "v1", short_names=("ep",)),
        Resource("events", "Event", "", "v1", short_names=("ev",)),
        Resource("configmaps", "ConfigMap", "", "v1", short_names=("cm",)),
        Resource("endpointslices", "EndpointSlice", "discovery.k8s.io", "v1"),
        Resource("events", "Event", "events.k8s.io", "v1", short_names=("ev",)),
        Resource("deployments", "Deployment", "apps", "v1", short_names=("deploy",)),
        Resource("replicasets", "ReplicaSet", "apps", "v1", short_names=("rs",)),
        Resource("statefulsets", "StatefulSet", "apps", "v1", short_names=("sts",)),
        Resource("daemonsets", "DaemonSet", "apps", "v1", short_names=("ds",)),
        Resource(
            "horizontalpodautoscalers",
            "HorizontalPodAutoscaler",
            "autoscaling",
            "v2",
            short_names=("hpa",),
        ),
        # the hops in front of the pods (model.path): optional, a 404 means "hop absent"
        Resource("ingresses", "Ingress", "networking.k8s.io", "v1", short_names=("ing",)),
        Resource("ingressclasses", "IngressClass", "networking.k8s.io", "v1", namespaced=False),
        # Gateway API CRDs, standard channel (https://gateway-api.sigs.k8s.io/reference/spec/)
        Resource("gatewayclasses", "GatewayClass", GATEWAY_GROUP, "v1", False, ("gc",)),
        Resource("gateways", "Gateway", GATEWAY_GROUP, "v1", short_names=("gtw",)),
        Resource("httproutes", "HTTPRoute", GATEWAY_GROUP, "v1"),
        Resource("grpcroutes", "GRPCRoute", GATEWAY_GROUP, "v1"),
        Resource("referencegrants", "ReferenceGrant", GATEWAY_GROUP, "v1beta1"),
        # the AWS Load Balancer Controller's CRD (kubernetes-sigs/aws-load-balancer-controller,
        # config/crd/bases/elbv2.k8s.aws_targetgroupbindings.yaml)
        Resource("targetgroupbindings", "TargetGroupBinding", "elbv2.k8s.aws", "v1beta1"),
    )
}
"""By plural; the events.k8s.io Events are ``events.events.k8s.io`` (core ones ``events``)."""

KUBE_PROXY_CONFIGMAP = ("kube-system", "kube-proxy")
"""kube-proxy's ConfigMap (its mode and sync periods), read when allowed."""

CILIUM_CONFIGMAP = ("kube-system", "cilium-config")
"""Cilium's agent configuration: whether it replaces kube-proxy, read when allowed
(https://docs.cilium.io/en/stable/network/kubernetes/kubeproxy-free/)."""

HOP_RESOURCES = (
    "ingressclasses",
    "ingresses",
    "gatewayclasses",
    "gateways",
    "httproutes",
    "grpcroutes",
    "referencegrants",
    "targetgroupbindings",
)
"""The optional kinds of the hops in front of the pods, in the order scan reads them:
absent (404, not in discovery) or forbidden, scan notes it and goes on."""
