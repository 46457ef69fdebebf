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
    )
}
"""By plural; the events.k8s.io Events are ``events.events.k8s.io`` (core ones ``events``)."""

KUBE_PROXY_CONFIGMAP = ("kube-system", "kube-proxy")
"""The one ConfigMap svcdoctor reads (kube-proxy's mode and sync periods), when allowed."""
