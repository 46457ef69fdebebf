"""A ``Snapshot`` of live objects → lint's ``Inventory`` with ``LiveFacts`` (pure).

Workloads and Services go through lint's own reader (same model, same rules, same
suppression annotations); each is located at ``cluster:CONTEXT`` (line 0). On top:

* replicas from ``status.replicas`` (an HPA's ``minReplicas`` still wins, as in lint);
* a Service's backends are the workloads owning the pods in its EndpointSlices
  (targetRef → Pod → ReplicaSet → Deployment…); the selector is only the fallback for
  Services without endpoints;
* the hops in front of the pods (Ingresses, Gateway API kinds, TargetGroupBindings, the
  Namespaces' labels) as lint reads them, and the datapath (kube-proxy or Cilium's
  replacement);
* what only a cluster knows (terminations, events, endpoint conditions, kube-proxy's
  configuration) as ``LiveFacts``.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import yaml

from svcdoctor.cluster.hops import datapath_of
from svcdoctor.cluster.snapshot import SERVICE_NAME_LABEL, Obj, Snapshot, object_key
from svcdoctor.evidence.kubectl import container_exits
from svcdoctor.evidence.times import rfc3339
from svcdoctor.manifests import build_inventory, json_objects
from svcdoctor.model import (
    Endpoint,
    EventCount,
    Inventory,
    LiveFacts,
    ObjectRef,
    PodFacts,
    ProxyConfig,
    ServiceEndpoints,
    live_location,
)
from svcdoctor.model.duration import go_duration
from svcdoctor.model.live import DEFAULT_MIN_SYNC_SECONDS, DEFAULT_SYNC_SECONDS

_TOP_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet")
_BATCH_OWNERS = frozenset({"Job", "CronJob"})
_CONTAINER_PATH = re.compile(r"spec\.(?:initContainers|containers|ephemeralContainers)\{(.+)\}")


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _seq(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _meta(obj: Obj) -> dict[str, Any]:
    return _map(obj.get("metadata"))


def _controller(obj: Obj) -> tuple[str, str] | None:
    for ref in map(_map, _seq(_meta(obj).get("ownerReferences"))):
        if ref.get("controller") is True:
            return str(ref.get("kind") or ""), str(ref.get("name") or "")
    return None


def server_version(version: dict[str, str]) -> tuple[int, int] | None:
    """``(major, minor)`` from ``/version`` (``minor`` may read ``28+`` on managed clusters)."""
    match = re.match(r"v?(\d+)\.(\d+)", str(version.get("gitVersion") or ""))
    if match:
        return int(match.group(1)), int(match.group(2))
    major = re.match(r"\d+", str(version.get("major") or ""))
    minor = re.match(r"\d+", str(version.get("minor") or ""))
    return (int(major.group()), int(minor.group())) if major and minor else None


class _Owners:
    """Which workload of the inventory a pod (present or gone) belongs to."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self._tops: dict[tuple[str, str, str], tuple[str, str, str] | None] = {}
        for kind, items in (
            ("Deployment", snapshot.deployments),
            ("StatefulSet", snapshot.statefulsets),
            ("DaemonSet", snapshot.daemonsets),
            ("ReplicaSet", snapshot.replicasets),
            ("Pod", snapshot.pods),
        ):
            for obj in items:
                self.objects[(kind, *object_key(obj))] = obj

    def top(self, kind: str, namespace: str, name: str) -> tuple[str, str, str] | None:
        """The highest present controller of an object (itself when it has none); ``None``
        for batch pods, which never back a Service."""
        key = (kind, namespace, name)
        if key not in self._tops:
            self._tops[key] = self._climb(key)
        return self._tops[key]

    def _climb(self, key: tuple[str, str, str]) -> tuple[str, str, str] | None:
        namespace = key[1]
        for _ in range(8):  # ownership chains are short; a cycle is a broken cluster
            obj = self.objects.get(key)
            if obj is None:
                return None
            owner = _controller(obj)
            if owner is None:
                return key
            if owner[0] in _BATCH_OWNERS:
                return None
            parent = (owner[0], namespace, owner[1])
            if parent not in self.objects:
                guessed = self._guess(owner[0], namespace, owner[1])
                return guessed or key
            key = parent
        return key

    def _guess(self, kind: str, namespace: str, name: str) -> tuple[str, str, str] | None:
        """An absent ReplicaSet ``deploy-<hash>`` belongs to a present ``deploy``."""
        if kind == "ReplicaSet":
            deployment = ("Deployment", namespace, name.rsplit("-", 1)[0])
            if deployment in self.objects:
                return self.top(*deployment)
        return None

    def of_gone_pod(self, namespace: str, name: str) -> tuple[str, str, str] | None:
        """The workload of a pod that no longer exists, from its generated name."""
        base = name.rsplit("-", 1)[0]
        for kind in ("ReplicaSet", "StatefulSet", "DaemonSet"):
            if (kind, namespace, base) in self.objects:
                return self.top(kind, namespace, base)
        return self._guess("ReplicaSet", namespace, base)

    def of_pod(self, namespace: str, name: str) -> tuple[str, str, str] | None:
        if ("Pod", namespace, name) in self.objects:
            return self.top("Pod", namespace, name)
        return self.of_gone_pod(namespace, name)


def build_live_inventory(snapshot: Snapshot) -> tuple[Inventory, tuple[str, ...]]:
    """The inventory of the scan and its notes (the snapshot's, plus conversion notes)."""
    collecting = gc.isenabled()
    gc.disable()  # as lint's loader: millions of acyclic dicts make collection passes pure cost
    try:
        return _build(snapshot)
    finally:
        if collecting:
            gc.enable()


def _build(snapshot: Snapshot) -> tuple[Inventory, tuple[str, ...]]:
    notes = list(snapshot.notes)
    location = live_location(snapshot.context)
    owners = _Owners(snapshot)
    keys = sorted({top for key in owners.objects if (top := owners.top(*key)) is not None})
    workload_raw = [_typed(owners.objects[key], key[0]) for key in keys]
    # two reads, so that lint's selector matching (replaced below by the endpoints) never runs
    base = build_inventory(json_objects([*workload_raw, *snapshot.autoscalers], location.file, 0))
    services = build_inventory(json_objects(snapshot.services, location.file, 0))
    hop_objects = [*snapshot.hops.namespaces, *snapshot.hops.objects]
    hops = build_inventory(json_objects(hop_objects, location.file, 0))
    status_replicas = {
        (kind, *object_key(obj)): obj["status"]["replicas"]
        for kind, items in (
            ("Deployment", snapshot.deployments),
            ("StatefulSet", snapshot.statefulsets),
            ("ReplicaSet", snapshot.replicasets),
        )
        for obj in items
        if isinstance(_map(obj.get("status")).get("replicas"), int)
    }
    workloads = tuple(
        replace(w, replicas=status_replicas[key])
        if (key := (w.ref.kind, w.ref.namespace, w.ref.name)) in status_replicas
        else w
        for w in base.workloads
    )
    present = {w.ref for w in workloads}

    def ref_of(key: tuple[str, str, str] | None) -> ObjectRef | None:
        ref = ObjectRef(*key) if key else None
        return ref if ref in present else None

    stops = _stops(snapshot.events)
    pods = tuple(
        _pod(obj, ref_of(owners.top("Pod", *object_key(obj))), stops) for obj in snapshot.pods
    )
    events = tuple(
        e
        for obj in snapshot.events
        if (e := _event(obj, lambda ns, name: ref_of(owners.of_pod(ns, name)))) is not None
    )
    endpoints = _service_endpoints(snapshot)
    backends = {
        s.service: refs
        for s in endpoints
        if (
            refs := tuple(
                dict.fromkeys(
                    r
                    for e in s.endpoints
                    if e.pod and (r := ref_of(owners.of_pod(s.service.namespace, e.pod)))
                )
            )
        )
    }
    proxy = None
    if snapshot.kube_proxy_config is not None:
        try:
            proxy = proxy_config(snapshot.kube_proxy_config, snapshot.context)
        except ValueError as exc:
            notes.append(f"kube-proxy configuration not understood ({exc}): checks skipped")
    live = LiveFacts(
        now=snapshot.read_at,
        context=snapshot.context,
        pods=pods,
        events=events,
        endpoints=endpoints,
        proxy=proxy,
        datapath=datapath_of(snapshot.hops.cilium_config),
    )
    inventory = Inventory(
        workloads=workloads,
        services=services.services,
        autoscalers=base.autoscalers,
        resources=hops.resources,
        routes=hops.routes,
        fronts=hops.fronts,
        grants=hops.grants,
        problems=base.problems + services.problems + hops.problems,
        files=0,
        objects=snapshot.objects,
        backends=backends,
        live=live,
    )
    if snapshot.only_services:
        inventory = _restricted(inventory)
    return inventory, tuple(notes)


def _typed(obj: Obj, kind: str) -> Obj:
    """The object with ``kind`` and ``apiVersion`` (list items may lack them)."""
    if obj.get("kind") and obj.get("apiVersion"):
        return obj
    return {"apiVersion": "v1" if kind == "Pod" else "apps/v1", "kind": kind, **obj}


def _restricted(inventory: Inventory) -> Inventory:
    """Only the named Services (already filtered) and the workloads behind them."""
    behind = {w.ref for s in inventory.services for w in inventory.targeted(s)}
    return replace(
        inventory,
        workloads=tuple(w for w in inventory.workloads if w.ref in behind),
        _targets={},
        _backing={},
    )


def _stops(events: Iterable[Obj]) -> dict[tuple[str, str], list[float]]:
    """Times the kubelet was told to stop a pod's containers (``Killing`` events)."""
    out: dict[tuple[str, str], list[float]] = {}
    for obj in events:
        if obj.get("reason") != "Killing":
            continue
        regarding = _map(obj.get("involvedObject") or obj.get("regarding"))
        key = (str(regarding.get("namespace") or ""), str(regarding.get("name") or ""))
        out.setdefault(key, []).extend(t for t in set(_event_times(obj)) if t is not None)
    return out


def _pod(
    obj: Obj, workload: ObjectRef | None, stops: dict[tuple[str, str], list[float]]
) -> PodFacts:
    meta, spec, status = _meta(obj), _map(obj.get("spec")), _map(obj.get("status"))
    namespace, name = object_key(obj)
    ready = since = None
    for cond in map(_map, _seq(status.get("conditions"))):
        if cond.get("type") == "Ready":
            ready = cond.get("status") == "True"
            since = rfc3339(cond.get("lastTransitionTime"))
    grace = meta.get("deletionGracePeriodSeconds", spec.get("terminationGracePeriodSeconds"))
    grace = grace if isinstance(grace, int) else None
    grace_ends = rfc3339(meta.get("deletionTimestamp"))
    return PodFacts(
        ref=ObjectRef("Pod", namespace, name),
        workload=workload,
        ready=ready,
        ready_since=since,
        ip=str(status["podIP"]) if status.get("podIP") else None,
        labels={str(k): str(v) for k, v in _map(meta.get("labels")).items()},
        grace_seconds=grace,
        deleted_at=None if grace_ends is None else grace_ends - (grace or 0),
        grace_ends=grace_ends,
        terminations=container_exits(status),
        stopped_at=tuple(sorted(stops.get((namespace, name), ()))),
    )


def _event_times(obj: Obj) -> tuple[float | None, float | None]:
    series = _map(obj.get("series"))
    first = (
        rfc3339(obj.get("firstTimestamp"))
        or rfc3339(obj.get("deprecatedFirstTimestamp"))
        or rfc3339(obj.get("eventTime"))
    )
    last = (
        rfc3339(series.get("lastObservedTime"))
        or rfc3339(obj.get("lastTimestamp"))
        or rfc3339(obj.get("deprecatedLastTimestamp"))
        or rfc3339(obj.get("eventTime"))
        or first
    )
    return first or last, last


def _event(obj: Obj, workload_of: Any) -> EventCount | None:
    regarding = _map(obj.get("involvedObject") or obj.get("regarding"))
    reason = str(obj.get("reason") or "")
    if not reason or not regarding.get("name"):
        return None
    ref = ObjectRef(
        str(regarding.get("kind") or ""),
        str(regarding.get("namespace") or _meta(obj).get("namespace") or ""),
        str(regarding["name"]),
    )
    count = obj.get("count") or _map(obj.get("series")).get("count") or obj.get("deprecatedCount")
    first, last = _event_times(obj)
    path = _CONTAINER_PATH.fullmatch(str(regarding.get("fieldPath") or ""))
    return EventCount(
        reason=reason,
        object=ref,
        count=count if isinstance(count, int) and count > 0 else 1,
        first=first,
        last=last,
        message=str(obj.get("message") or obj.get("note") or ""),
        workload=workload_of(ref.namespace, ref.name) if ref.kind == "Pod" else None,
        container=path.group(1) if path else None,
    )


def _flag(value: Any, default: bool) -> bool:
    return value if isinstance(value, bool) else default


def _service_endpoints(snapshot: Snapshot) -> tuple[ServiceEndpoints, ...]:
    by_service: dict[tuple[str, str], dict[tuple[str, str | None], Endpoint]] = {}
    source = "endpointslices"
    for obj in snapshot.endpointslices:
        namespace, _ = object_key(obj)
        service = _map(_meta(obj).get("labels")).get(SERVICE_NAME_LABEL)
        if not service:
            continue
        found = by_service.setdefault((namespace, str(service)), {})
        ported = bool(_seq(obj.get("ports")))
        for ep in map(_map, _seq(obj.get("endpoints"))):
            cond = _map(ep.get("conditions"))
            ref = _map(ep.get("targetRef"))
            ready = _flag(cond.get("ready"), True)
            pod = str(ref["name"]) if ref.get("kind") == "Pod" and ref.get("name") else None
            for address in map(str, _seq(ep.get("addresses"))[:1]):
                # one endpoint per pod: a dual-stack pod is in an IPv4 and an IPv6 slice
                found[(pod or address, None)] = Endpoint(
                    address,
                    pod,
                    ready=ready,
                    serving=_flag(cond.get("serving"), ready),
                    terminating=_flag(cond.get("terminating"), False),
                    ported=ported,
                )
    for obj in snapshot.endpoints:
        source = "endpoints"
        found = by_service.setdefault(object_key(obj), {})
        for subset in map(_map, _seq(obj.get("subsets"))):
            for key, ready in (("addresses", True), ("notReadyAddresses", False)):
                for item in map(_map, _seq(subset.get(key))):
                    ref = _map(item.get("targetRef"))
                    ip = str(item.get("ip") or "")
                    pod = str(ref["name"]) if ref.get("kind") == "Pod" and ref.get("name") else None
                    found[(pod or ip, None)] = Endpoint(ip, pod, ready, ready, False)
    return tuple(
        ServiceEndpoints(ObjectRef("Service", ns, name), tuple(eps.values()), source)
        for (ns, name), eps in sorted(by_service.items())
    )


def proxy_config(text: str, context: str) -> ProxyConfig:
    """kube-proxy's ``KubeProxyConfiguration`` (YAML or JSON); ``ValueError`` if unreadable."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(str(exc).splitlines()[0]) from None
    if not isinstance(config, dict):
        raise ValueError("not a mapping")
    mode = str(config.get("mode") or "iptables")
    section = _map(config.get(mode))
    conntrack = _map(config.get("conntrack"))

    def duration(key: str, default: float) -> float:
        """A period; unset or 0 means kube-proxy's default (kubeadm writes ``0s``)."""
        value = config.get(key, section.get(key))  # top-level fields exist from 1.29
        seconds = 0.0 if value in (None, "") else go_duration(value)
        return seconds or default

    def optional(key: str) -> float | None:
        value = conntrack.get(key)
        return None if value in (None, "") else go_duration(value)

    def integer(key: str) -> int | None:
        value = conntrack.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    return ProxyConfig(
        ref=ObjectRef("ConfigMap", "kube-system", "kube-proxy"),
        location=live_location(context),
        mode=mode,
        min_sync_seconds=duration("minSyncPeriod", DEFAULT_MIN_SYNC_SECONDS),
        sync_seconds=duration("syncPeriod", DEFAULT_SYNC_SECONDS),
        conntrack_max_per_core=integer("maxPerCore"),
        conntrack_min=integer("min"),
        tcp_established_timeout=optional("tcpEstablishedTimeout"),
        tcp_close_wait_timeout=optional("tcpCloseWaitTimeout"),
    )
