"""Live clusters: which cluster (kubeconfig), the read-only seam (``ClusterReader``) and the
commands' work over it."""

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


def connect(
    kubeconfig: str | None = None,
    context: str | None = None,
    namespace: str | None = None,
    all_namespaces: bool = False,
    timeout: float | None = 10.0,
) -> ClusterReader:
    """A reader of the cluster that kubectl would talk to with the same flags.

    ``all_namespaces`` is the command's business (it passes ``namespace=None`` to the
    reader's calls); it is accepted here so that the CLI's option dict can be passed whole.
    """
    from svcdoctor.cluster.api import ApiReader

    if all_namespaces and namespace:
        raise ClusterError("-n/--namespace and -A/--all-namespaces exclude each other")
    return ApiReader(resolve(kubeconfig, context, namespace), timeout or 10.0)


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
    "connect",
    "resolve",
]
