"""Live clusters: which cluster (kubeconfig), the read-only seam (``ClusterReader``) and the
commands' work over it. ``svcdoctor.cluster.api.connect`` opens a real cluster (imported
only by the commands that talk to one: it loads the HTTP client)."""

from __future__ import annotations

from svcdoctor.cluster.config import Target, resolve
from svcdoctor.cluster.reader import (
    RBAC_FILE,
    ClusterError,
    ClusterReader,
    Forbidden,
    NotServed,
    WatchEvent,
)
from svcdoctor.cluster.resources import KUBE_PROXY_CONFIGMAP, RESOURCES, Resource

__all__ = [
    "KUBE_PROXY_CONFIGMAP",
    "RBAC_FILE",
    "RESOURCES",
    "ClusterError",
    "ClusterReader",
    "Forbidden",
    "NotServed",
    "Resource",
    "Target",
    "WatchEvent",
    "resolve",
]
