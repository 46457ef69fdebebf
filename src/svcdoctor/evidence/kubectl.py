"""``kubectl get events|pods|endpointslices -o json`` (lists and ``-w`` streams)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from svcdoctor.evidence.times import rfc3339
from svcdoctor.model import (
    ContainerExit,
    EndpointChange,
    EventKind,
    LifecycleEvent,
    PodInfo,
)

_REASONS = {
    "Killing": EventKind.DELETE,
    "SuccessfulDelete": EventKind.DELETE,
    "SuccessfulCreate": EventKind.CREATE,
    "Scheduled": EventKind.CREATE,
    "Started": EventKind.START,
    "Unhealthy": EventKind.UNHEALTHY,
    "FailedPreStopHook": EventKind.PRESTOP_FAILED,
    "ScalingReplicaSet": EventKind.SCALE,
}
POD_IN_MESSAGE = re.compile(r"(?:Deleted|Created) pod: (\S+)")
TRIGGER_TIME = "endpoints.kubernetes.io/last-change-trigger-time"
CHANGE_SEEN = "collect.svcdoctor.io/change-seen"
"""When ``svcdoctor collect --watch`` saw an EndpointSlice change (it dates the change
better than the controller's trigger time, which is the pod change that caused it)."""


def _map(value: Any) -> dict[str, Any]:
    """The value if it is a mapping, else an empty one (hand-edited JSON happens)."""
    return value if isinstance(value, dict) else {}


def _seq(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def json_documents(text: str) -> Iterator[Any]:
    """Every JSON value in ``text``: one document, or a stream of concatenated ones."""
    decoder = json.JSONDecoder()
    index, end = 0, len(text)
    while True:
        while index < end and text[index].isspace():
            index += 1
        if index >= end:
            return
        try:
            value, index = decoder.raw_decode(text, index)
        except RecursionError:
            raise ValueError("JSON nested too deeply to be Kubernetes objects") from None
        yield value


def objects(value: Any) -> Iterator[dict[str, Any]]:
    """Kubernetes objects in a document: ``*List`` items, watch events, or the object."""
    if isinstance(value, list):
        for item in value:
            yield from objects(item)
    elif isinstance(value, dict):
        if isinstance(value.get("items"), list) and str(value.get("kind", "")).endswith("List"):
            yield from objects(value["items"])
        elif "type" in value and isinstance(value.get("object"), dict) and "kind" not in value:
            obj = dict(value["object"])
            obj["__watch_type"] = value["type"]
            yield obj
        elif "kind" in value:
            yield value


@dataclass(slots=True)
class KubectlEvidence:
    events: list[LifecycleEvent] = field(default_factory=list)
    pods: dict[str, PodInfo] = field(default_factory=dict)
    endpoints: list[EndpointChange] = field(default_factory=list)
    replicas: int | None = None
    manifests: list[dict[str, Any]] = field(default_factory=list)  # other objects, for lint
    rows: int = 0


def read_kubectl(docs: list[Any], source: str, into: KubectlEvidence) -> None:
    """Sort every object of the documents into events, pods, endpoints and the rest."""
    previous: dict[str, dict[str, EndpointChange]] = {}
    for obj in (o for doc in docs for o in objects(doc)):
        kind = obj.get("kind")
        into.rows += 1
        if kind == "Event":
            if (event := _event(obj, source)) is not None:
                into.events.append(event)
        elif kind == "Pod":
            pod = _pod(obj)
            into.pods[pod.name] = _merge(into.pods.get(pod.name), pod)
            into.events.extend(_pod_events(pod, source))
        elif kind == "EndpointSlice":
            into.endpoints.extend(_slice_changes(obj, previous))
        else:
            if kind in ("Deployment", "ReplicaSet", "StatefulSet", "Rollout"):
                replicas = _map(obj.get("spec")).get("replicas")
                if isinstance(replicas, int) and replicas > 0:
                    into.replicas = max(into.replicas or 0, replicas)
            into.manifests.append(obj)


def _event(obj: dict[str, Any], source: str) -> LifecycleEvent | None:
    reason = str(obj.get("reason") or "")
    kind = _REASONS.get(reason)
    if kind is None:
        return None
    regarding = _map(obj.get("involvedObject") or obj.get("regarding"))
    message = str(obj.get("message") or obj.get("note") or "")
    series = _map(obj.get("series"))
    precise = rfc3339(series.get("lastObservedTime")) or rfc3339(obj.get("eventTime"))
    coarse = (
        rfc3339(obj.get("lastTimestamp"))
        or rfc3339(obj.get("deprecatedLastTimestamp"))
        or rfc3339(obj.get("firstTimestamp"))
        or rfc3339(obj.get("deprecatedFirstTimestamp"))
    )
    ts = precise if precise is not None else coarse
    if ts is None:
        ts = rfc3339(_map(obj.get("metadata")).get("creationTimestamp"))
    if ts is None:
        return None
    pod = _text(regarding.get("name")) if regarding.get("kind") == "Pod" else None
    if pod is None and (m := POD_IN_MESSAGE.search(message)):
        pod = m.group(1)
    return LifecycleEvent(
        ts=ts,
        kind=kind,
        pod=pod,
        source=source,
        namespace=str(regarding.get("namespace") or ""),
        reason=reason,
        message=message,
        resolution=0.0 if precise is not None else 1.0,
    )


def _pod(obj: dict[str, Any]) -> PodInfo:
    meta = _map(obj.get("metadata"))
    spec = _map(obj.get("spec"))
    status = _map(obj.get("status"))
    ready = None
    for cond in _seq(status.get("conditions")):
        if _map(cond).get("type") == "Ready":
            ready = cond.get("status") == "True"
    exits = container_exits(status)
    grace = meta.get("deletionGracePeriodSeconds", spec.get("terminationGracePeriodSeconds"))
    return PodInfo(
        name=str(meta.get("name") or ""),
        namespace=str(meta.get("namespace") or ""),
        ip=_text(status.get("podIP")),
        node=_text(spec.get("nodeName")),
        ready=ready,
        created_at=rfc3339(meta.get("creationTimestamp")),
        deleted_at=rfc3339(meta.get("deletionTimestamp")),
        grace_seconds=grace if isinstance(grace, int) else None,
        labels={str(k): str(v) for k, v in _map(meta.get("labels")).items()},
        exits=exits,
        ports=tuple(
            port["containerPort"]
            for c in spec.get("containers") or []
            if isinstance(c, dict)
            for port in c.get("ports") or []
            if isinstance(port, dict) and isinstance(port.get("containerPort"), int)
        ),
    )


def container_exits(status: dict[str, Any]) -> tuple[ContainerExit, ...]:
    """Every container termination a pod's ``status`` shows (``state`` and ``lastState``)."""
    exits = []
    for cs in map(_map, _seq(status.get("containerStatuses"))):
        for state in (_map(cs.get("state")), _map(cs.get("lastState"))):
            term = state.get("terminated")
            if isinstance(term, dict) and isinstance(term.get("exitCode"), int):
                exits.append(
                    ContainerExit(
                        str(cs.get("name") or ""),
                        term["exitCode"],
                        str(term.get("reason") or ""),
                        rfc3339(term.get("finishedAt")),
                    )
                )
    return tuple(exits)


def _merge(old: PodInfo | None, new: PodInfo) -> PodInfo:
    """Snapshots of one pod: the newest state, keeping what older snapshots knew."""
    if old is None:
        return new
    exits = tuple(dict.fromkeys((*old.exits, *new.exits)))
    return replace(
        new,
        ip=new.ip or old.ip,
        node=new.node or old.node,
        created_at=new.created_at or old.created_at,
        deleted_at=new.deleted_at or old.deleted_at,
        exits=exits,
    )


def _pod_events(pod: PodInfo, source: str) -> Iterator[LifecycleEvent]:
    """The pod's moments in its object (whole seconds): deletion, creation, container exits
    as ``(ts, kind, reason, message, exit code)``."""
    moments: list[tuple[float, EventKind, str, str, int | None]] = []
    if pod.deleted_at is not None and pod.grace_seconds is not None:
        # deletionTimestamp is the moment the grace period ends: deletion + grace.
        moments.append(
            (pod.deleted_at - pod.grace_seconds, EventKind.DELETE, "deletionTimestamp", "", None)
        )
    if pod.created_at is not None:
        moments.append((pod.created_at, EventKind.CREATE, "creationTimestamp", "", None))
    moments += [
        (ex.finished_at, EventKind.EXIT, ex.reason, f"container {ex.container}", ex.exit_code)
        for ex in pod.exits
        if ex.finished_at is not None
    ]
    for ts, kind, reason, message, code in moments:
        yield LifecycleEvent(
            ts, kind, pod.name, source, pod.namespace, reason, message, code, resolution=1.0
        )


def _slice_changes(
    obj: dict[str, Any], previous: dict[str, dict[str, EndpointChange]]
) -> Iterator[EndpointChange]:
    meta = _map(obj.get("metadata"))
    name = str(meta.get("name") or "")
    notes = _map(meta.get("annotations"))
    ts = rfc3339(notes.get(CHANGE_SEEN)) or rfc3339(notes.get(TRIGGER_TIME))
    if ts is None:
        ts = rfc3339(meta.get("creationTimestamp")) if not previous.get(name) else None
    current: dict[str, EndpointChange] = {}
    deleted = obj.get("__watch_type") == "DELETED"
    for ep in map(_map, _seq(obj.get("endpoints"))):
        cond = _map(ep.get("conditions"))
        ref = _map(ep.get("targetRef"))
        for address in map(str, _seq(ep.get("addresses"))):
            current[address] = EndpointChange(
                ts,
                address,
                _text(ref.get("name")),
                _flag(cond.get("ready")),
                _flag(cond.get("serving")),
                _flag(cond.get("terminating")),
                removed=deleted,
            )
    before = previous.get(name, {})
    for address, change in current.items():
        old = before.get(address)
        if old is None or (old.ready, old.serving, old.terminating, old.removed) != (
            change.ready,
            change.serving,
            change.terminating,
            change.removed,
        ):
            yield change
    for address, old in before.items():
        if address not in current and not old.removed:
            yield replace(old, ts=ts, removed=True)
    previous[name] = {} if deleted else current
