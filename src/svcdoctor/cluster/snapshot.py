"""Read what ``scan`` needs from a cluster, once: the I/O half of a live scan.

``read_snapshot`` lists the objects through a ``ClusterReader`` and returns them raw, with
the server version, kube-proxy's configuration text and notes about what could not be
read the usual way. Turning them into the lint model is pure (``cluster.inventory``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from svcdoctor.cluster.hops import Hops, read_hops
from svcdoctor.cluster.reader import ClusterError, ClusterReader, Forbidden, NotServed
from svcdoctor.cluster.resources import KUBE_PROXY_CONFIGMAP

Obj = dict[str, Any]
SERVICE_NAME_LABEL = "kubernetes.io/service-name"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Raw API objects of one scan. ``namespace`` is ``None`` for all namespaces;
    ``only_services`` are the ``SERVICE…`` arguments (``NAME`` or ``NAMESPACE/NAME``);
    ``endpoints`` holds core Endpoints only when EndpointSlices are not served."""

    context: str
    namespace: str | None
    version: dict[str, str]
    read_at: float
    services: tuple[Obj, ...] = ()
    endpointslices: tuple[Obj, ...] = ()
    endpoints: tuple[Obj, ...] = ()
    pods: tuple[Obj, ...] = ()
    deployments: tuple[Obj, ...] = ()
    replicasets: tuple[Obj, ...] = ()
    statefulsets: tuple[Obj, ...] = ()
    daemonsets: tuple[Obj, ...] = ()
    autoscalers: tuple[Obj, ...] = ()
    events: tuple[Obj, ...] = ()
    kube_proxy_config: str | None = None
    hops: Hops = field(default_factory=Hops)
    only_services: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def objects(self) -> int:
        """How many objects were read (the kube-proxy ConfigMap included)."""
        lists = (
            self.services,
            self.endpointslices,
            self.endpoints,
            self.pods,
            self.deployments,
            self.replicasets,
            self.statefulsets,
            self.daemonsets,
            self.autoscalers,
            self.events,
        )
        hops = len(self.hops.objects) + len(self.hops.namespaces)
        return sum(map(len, lists)) + hops + (self.kube_proxy_config is not None)


Progress = Callable[[str], None]


def read_snapshot(
    reader: ClusterReader,
    namespace: str | None,
    selector: str | None = None,
    services: Sequence[str] = (),
    progress: Progress | None = None,
    clock: Callable[[], float] = time.time,
) -> Snapshot:
    """List everything a scan reads in ``namespace`` (``None``: all namespaces).

    ``selector`` (``-l``) filters Services, workloads and pods by their own labels, as
    ``kubectl get svc,deploy,sts,ds,rs,pods -l`` does. Raises ``ClusterError`` for what the
    scan cannot do without (``Forbidden`` names the verb and resource); what it can do
    without (kube-proxy's ConfigMap, HPAs, EndpointSlices, the hop kinds of
    ``cluster.hops``) becomes a note.
    """
    report = progress or (lambda _: None)

    def step(what: str) -> None:
        report(f"reading {what}…")

    notes: list[str] = []
    step("version")
    version = reader.version()

    step("services")
    found = reader.list("services", namespace, labels=selector)
    wanted = _wanted(found, services, namespace)
    chosen = [s for s in found if object_key(s) in wanted] if services else found

    step("endpointslices")
    slices: list[Obj] = []
    endpoints: list[Obj] = []
    if _served(reader, "endpointslices"):
        if services:
            for ns, name in sorted(wanted):
                slices += reader.list("endpointslices", ns, labels=f"{SERVICE_NAME_LABEL}={name}")
        else:
            slices = reader.list("endpointslices", namespace)
    else:
        notes.append("discovery.k8s.io/v1 not served: read core Endpoints instead")
        endpoints = [
            e
            for e in reader.list("endpoints", namespace)
            if not services or object_key(e) in wanted
        ]

    lists: dict[str, list[Obj]] = {}
    for resource in ("pods", "deployments", "replicasets", "statefulsets", "daemonsets"):
        step(resource)
        lists[resource] = reader.list(resource, namespace, labels=selector)
    step("horizontalpodautoscalers")
    autoscalers: list[Obj] = []
    if _served(reader, "horizontalpodautoscalers"):
        autoscalers = reader.list("horizontalpodautoscalers", namespace)
    else:
        notes.append("autoscaling/v2 not served: HPA minReplicas not taken into account")
    step("events")
    events = reader.list("events", namespace)

    step("kube-proxy configuration")
    proxy_text = _kube_proxy_config(reader, notes)
    step("ingresses, Gateway API routes, namespaces, datapath")
    hops = read_hops(reader, namespace)
    return Snapshot(
        context=reader.context,
        namespace=namespace,
        version=version,
        read_at=clock(),
        services=tuple(chosen),
        endpointslices=tuple(slices),
        endpoints=tuple(endpoints),
        pods=tuple(lists["pods"]),
        deployments=tuple(lists["deployments"]),
        replicasets=tuple(lists["replicasets"]),
        statefulsets=tuple(lists["statefulsets"]),
        daemonsets=tuple(lists["daemonsets"]),
        autoscalers=tuple(autoscalers),
        events=tuple(events),
        kube_proxy_config=proxy_text,
        hops=hops,
        only_services=tuple(services),
        notes=(*notes, *hops.notes),
    )


def watch_deleted_pods(
    reader: ClusterReader,
    namespace: str | None,
    selector: str | None,
    seconds: float,
    progress: Progress | None = None,
) -> tuple[list[Obj], str]:
    """Watch pods for ``seconds`` (Ctrl-C ends it early) and return the last state of each
    pod deleted meanwhile, and a note on the watch: a rollout's terminations (exit 137 at
    the grace period, failed hooks) are gone from a later list, as in any cluster, so only
    a watch sees them."""
    step = progress or (lambda _: None)
    gone: dict[tuple[str, str], Obj] = {}
    started = time.time()
    step(f"watching pods for {seconds:g} s: start your rollout now (Ctrl-C ends it early)")
    ended = f"watched pods for {seconds:g} s"
    try:
        for event in reader.watch("pods", namespace, labels=selector, until=started + seconds):
            if event.type == "DELETED":
                gone[object_key(event.object)] = event.object
                step(
                    f"watching pods for {seconds:g} s: {len(gone)} deleted so far (Ctrl-C ends it)"
                )
    except KeyboardInterrupt:
        ended = f"the watch of pods ended early by Ctrl-C after {time.time() - started:.0f} s"
    return list(gone.values()), f"{ended}: {len(gone)} pod(s) deleted meanwhile, checked too"


def with_deleted_pods(snapshot: Snapshot, gone: Sequence[Obj], note: str) -> Snapshot:
    """The snapshot with the watched pods that are no longer listed (their last state)."""
    listed = {object_key(p) for p in snapshot.pods}
    kept = tuple(p for p in gone if object_key(p) not in listed)
    return replace(snapshot, pods=snapshot.pods + kept, notes=(*snapshot.notes, note))


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def object_key(obj: Obj) -> tuple[str, str]:
    """An API object's (namespace, name); empty strings where they are missing."""
    meta = _meta(obj)
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _wanted(found: list[Obj], names: Sequence[str], namespace: str | None) -> set[tuple[str, str]]:
    """The (namespace, name) of each ``SERVICE`` argument; an unknown one is an error."""
    keys = {object_key(s) for s in found}
    wanted: set[tuple[str, str]] = set()
    for arg in names:
        ns, sep, name = arg.rpartition("/")
        matches = {
            k
            for k in keys
            if k[1] == name and (k[0] == ns if sep else namespace is None or k[0] == namespace)
        }
        if not matches:
            where = f"namespace {ns or namespace}" if (ns or namespace) else "any namespace"
            raise ClusterError(f"service {name} not found in {where}")
        wanted |= matches
    return wanted


def _served(reader: ClusterReader, resource: str) -> bool:
    try:
        return reader.serves(resource)
    except NotServed:
        return False


def _kube_proxy_config(reader: ClusterReader, notes: list[str]) -> str | None:
    namespace, name = KUBE_PROXY_CONFIGMAP
    where = f"ConfigMap {namespace}/{name}"
    try:
        cm = reader.get("configmaps", namespace, name)
    except Forbidden:
        notes.append(f"cannot read {where} (forbidden): kube-proxy checks skipped")
        return None
    except ClusterError as exc:
        notes.append(f"cannot read {where} ({exc}): kube-proxy checks skipped")
        return None
    if cm is None:
        notes.append(
            f"no {where} (a managed cluster or a kube-proxy replacement): kube-proxy checks skipped"
        )
        return None
    data = cm.get("data")
    data = data if isinstance(data, dict) else {}
    text = data.get("config.conf")
    if not isinstance(text, str):
        text = next(
            (v for v in data.values() if isinstance(v, str) and "KubeProxyConfiguration" in v),
            None,
        )
    if text is None:
        notes.append(f"{where} holds no KubeProxyConfiguration: kube-proxy checks skipped")
    return text
