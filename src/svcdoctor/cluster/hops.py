"""Read the objects of the hops in front of the pods from a cluster (the I/O half).

What ``model.path`` needs beyond workloads and Services: the Namespaces (their injection
and readiness-gate labels), Ingresses and IngressClasses, the Gateway API kinds,
TargetGroupBindings, and whether Cilium replaces kube-proxy. Every one is optional: a kind
the server does not serve (absent from discovery, or 404) is a hop that is not there, and a
kind the credentials may not read is a hop svcdoctor cannot see; both become a note, never
an error. Lists are paged like every other list (``ClusterReader.list``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from svcdoctor.cluster.reader import RBAC_FILE, ClusterError, ClusterReader, Forbidden, NotServed
from svcdoctor.cluster.resources import (
    CILIUM_CONFIGMAP,
    GATEWAY_GROUP,
    HOP_RESOURCES,
    RESOURCES,
    Resource,
)

Obj = dict[str, Any]

# Cilium's kube-proxy replacement: ``kube-proxy-replacement`` in the ``cilium-config``
# ConfigMap, "true" (Cilium >= 1.14) or "strict" (before 1.14; "partial"/"probe" left
# kube-proxy in charge of the Services it did not handle)
# https://docs.cilium.io/en/stable/network/kubernetes/kubeproxy-free/
# https://github.com/cilium/cilium/pull/26577 (1.14 made it a boolean; "strict" deprecated)
CILIUM_REPLACEMENT_KEY = "kube-proxy-replacement"
CILIUM_REPLACES = frozenset({"true", "strict"})


@dataclass(frozen=True, slots=True)
class Hops:
    """The raw hop objects read, the Namespaces, the ``cilium-config`` data (``None``: not
    there or not readable) and the notes about what could not be read."""

    objects: tuple[Obj, ...] = ()
    namespaces: tuple[Obj, ...] = ()
    cilium_config: Mapping[str, str] | None = None
    notes: tuple[str, ...] = ()


def _qualified(res: Resource) -> str:
    return f"{res.plural}.{res.group}" if res.group else res.plural


def _forbidden(verb: str, res: Resource, namespace: str | None, what: str) -> str:
    where = f"in namespace {namespace}" if namespace and res.namespaced else "cluster-wide"
    return (
        f"cannot {verb} {_qualified(res)} {where} (forbidden): {what} not read; "
        f"grant {verb} on {_qualified(res)} ({RBAC_FILE})"
    )


def read_hops(reader: ClusterReader, namespace: str | None) -> Hops:
    """Every hop object in ``namespace`` (``None``: all namespaces; cluster-scoped kinds,
    IngressClasses and GatewayClasses, are always listed cluster-wide), the Namespaces and
    Cilium's configuration."""
    notes: list[str] = []
    objects: list[Obj] = []
    absent: dict[str, list[str]] = {}  # apiVersion → kinds not served
    for key in HOP_RESOURCES:
        res = RESOURCES[key]
        try:
            served = reader.serves(key)
            if served:
                objects += reader.list(key, namespace if res.namespaced else None)
        except NotServed:
            served = False
        except Forbidden:
            notes.append(_forbidden("list", res, namespace, f"{res.kind} hops"))
            continue
        except ClusterError as exc:
            notes.append(f"cannot list {_qualified(res)} ({exc}): {res.kind} hops not read")
            continue
        if not served:
            absent.setdefault(res.api_version, []).append(res.kind)
    notes += [
        f"{version} not served: no {', '.join(kinds)} hops" for version, kinds in absent.items()
    ]
    if namespace is not None and "Gateway" not in absent.get(RESOURCES["gateways"].api_version, []):
        objects += _parent_gateways(reader, namespace, objects, notes)
    namespaces = _namespaces(reader, namespace, notes)
    return Hops(tuple(objects), tuple(namespaces), _cilium(reader, notes), tuple(notes))


def _parent_gateways(
    reader: ClusterReader, namespace: str, objects: list[Obj], notes: list[str]
) -> list[Obj]:
    """The Gateways in other namespaces that the namespace's routes attach to (a shared
    Gateway in an infrastructure namespace is the usual setup), listed per namespace."""
    wanted: set[str] = set()
    for obj in objects:
        if obj.get("apiVersion", "").startswith(f"{GATEWAY_GROUP}/"):
            for ref in (obj.get("spec") or {}).get("parentRefs") or []:
                if isinstance(ref, dict) and ref.get("kind", "Gateway") == "Gateway":
                    wanted.add(str(ref.get("namespace") or namespace))
    found: list[Obj] = []
    for other in sorted(wanted - {namespace}):
        try:
            found += reader.list("gateways", other)
        except Forbidden:
            notes.append(_forbidden("list", RESOURCES["gateways"], other, "parent Gateways"))
        except ClusterError as exc:
            notes.append(f"cannot list gateways in namespace {other} ({exc})")
    return found


def _namespaces(reader: ClusterReader, namespace: str | None, notes: list[str]) -> list[Obj]:
    """The scanned Namespace (``get``) or all of them (``list``), for their labels."""
    res = RESOURCES["namespaces"]
    what = "namespace labels (sidecar injection, pod readiness gates)"
    try:
        if namespace is None:
            return reader.list("namespaces")
        found = reader.get("namespaces", None, namespace)
    except Forbidden:
        notes.append(_forbidden("get" if namespace else "list", res, None, what))
        return []
    except ClusterError as exc:
        notes.append(f"cannot read namespaces ({exc}): {what} not read")
        return []
    if found is None:
        return []
    found.setdefault("apiVersion", "v1")
    found.setdefault("kind", "Namespace")
    return [found]


def _cilium(reader: ClusterReader, notes: list[str]) -> Mapping[str, str] | None:
    namespace, name = CILIUM_CONFIGMAP
    where = f"ConfigMap {namespace}/{name}"
    try:
        cm = reader.get("configmaps", namespace, name)
    except Forbidden:
        notes.append(
            f"cannot get {where} (forbidden): the Service datapath is taken to be kube-proxy; "
            f"grant get on it ({RBAC_FILE})"
        )
        return None
    except ClusterError as exc:
        notes.append(f"cannot read {where} ({exc}): the Service datapath is taken to be kube-proxy")
        return None
    if cm is None:
        return None
    data = cm.get("data")
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def datapath_of(cilium_config: Mapping[str, str] | None) -> str:
    """``cilium`` when Cilium replaces kube-proxy, else ``kube-proxy`` (pure)."""
    if cilium_config is None:
        return "kube-proxy"
    value = cilium_config.get(CILIUM_REPLACEMENT_KEY, "").strip().lower()
    return "cilium" if value in CILIUM_REPLACES else "kube-proxy"
