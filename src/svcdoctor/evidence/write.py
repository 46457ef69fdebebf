"""Writers of evidence in the real formats (for the lab, simulate and tests): the canonical
request log and ``kubectl get … -o json`` documents."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from svcdoctor.evidence.kubectl import TRIGGER_TIME
from svcdoctor.evidence.requests import SCHEMA
from svcdoctor.model import EndpointChange, EventKind, LifecycleEvent, PodInfo, iso_utc, owners

_REASON = {
    EventKind.DELETE: "Killing",
    EventKind.CREATE: "Scheduled",
    EventKind.START: "Started",
    EventKind.UNHEALTHY: "Unhealthy",
    EventKind.PRESTOP_FAILED: "FailedPreStopHook",
    EventKind.SCALE: "ScalingReplicaSet",
}
_CANONICAL = ("ts", "outcome", "status", "latency_ms", "client", "backend", "conn", "node")
_WARNINGS = ("FailedPreStopHook", "Unhealthy")


def _regarding(reason: str, pod: str | None, namespace: str) -> tuple[dict[str, Any], str]:
    """The object an event is about and the component that reports it, as in a cluster:
    the ReplicaSet creates and deletes pods, the Deployment scales ReplicaSets, the kubelet
    reports the rest (owners are named as a Deployment names them: ``deploy-hash-suffix``)."""
    name = pod or ""
    if reason in ("SuccessfulCreate", "SuccessfulDelete"):
        kind, name, component = "ReplicaSet", owners(name)[0], "replicaset-controller"
    elif reason == "ScalingReplicaSet":
        kind, name, component = "Deployment", owners(name)[1], "deployment-controller"
    else:
        kind, component = "Pod", "kubelet"
    return {"kind": kind, "name": name, "namespace": namespace}, component


def write_requests(frame: pl.DataFrame, path: Path, fmt: str | None = None) -> None:
    """The canonical request log: CSV, JSON Lines or Parquet (by ``fmt`` or extension)."""
    fmt = fmt or {".jsonl": "jsonl", ".parquet": "parquet"}.get(path.suffix, "csv")
    columns = [c for c in _CANONICAL if c in frame.columns]
    data = frame.select(columns).cast({c: SCHEMA[c] for c in columns})
    if fmt == "csv":
        data.write_csv(path)
    elif fmt == "jsonl":
        data.write_ndjson(path)
    else:
        data.write_parquet(path)


def _stamp(ts: float | None, precise: bool = False) -> str | None:
    if ts is None:
        return None
    text = iso_utc(ts if precise else float(int(ts)))
    return text if precise or text is None else text.replace(".000Z", "Z")


def _micro(ts: float) -> str:
    """MicroTime, as events.k8s.io/v1 writes eventTime."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def events_json(
    events: Iterable[LifecycleEvent], namespace: str = "default", api: str = "v1"
) -> dict[str, Any]:
    """``kubectl get events -o json``: core/v1 (1 s timestamps) or events.k8s.io/v1."""
    items = []
    for i, e in enumerate(events):
        reason = e.reason or _REASON.get(e.kind)
        if reason is None:
            continue
        regarding, component = _regarding(reason, e.pod, e.namespace or namespace)
        name = f"{regarding['name']}.{i:08x}"
        kind = "Warning" if reason in _WARNINGS else "Normal"
        if api == "v1":
            items.append(
                {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"name": name, "namespace": e.namespace or namespace},
                    "involvedObject": regarding,
                    "reason": reason,
                    "message": e.message,
                    "firstTimestamp": _stamp(e.ts),
                    "lastTimestamp": _stamp(e.ts),
                    "count": 1,
                    "type": kind,
                    "source": {"component": component},
                }
            )
        else:
            items.append(
                {
                    "apiVersion": "events.k8s.io/v1",
                    "kind": "Event",
                    "metadata": {"name": name, "namespace": e.namespace or namespace},
                    "regarding": regarding,
                    "reason": reason,
                    "note": e.message,
                    "eventTime": _micro(e.ts),
                    "reportingController": component,
                    "action": reason,
                    "type": kind,
                }
            )
    return {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {}}


def pods_json(pods: Sequence[PodInfo], container: str = "app") -> dict[str, Any]:
    """``kubectl get pods -o json``, with deletionTimestamp and terminated exit codes."""
    items = []
    for p in pods:
        meta: dict[str, Any] = {
            "name": p.name,
            "namespace": p.namespace or "default",
            "labels": p.labels,
            "creationTimestamp": _stamp(p.created_at),
        }
        if p.deleted_at is not None:
            grace = p.grace_seconds or 30
            meta["deletionTimestamp"] = _stamp(p.deleted_at + grace)
            meta["deletionGracePeriodSeconds"] = grace
        statuses = [
            {
                "name": ex.container or container,
                "ready": False,
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": ex.exit_code,
                        "reason": ex.reason,
                        "finishedAt": _stamp(ex.finished_at),
                    }
                },
            }
            for ex in p.exits
        ] or [
            {"name": container, "ready": bool(p.ready), "restartCount": 0, "state": {"running": {}}}
        ]
        items.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": meta,
                "spec": {
                    "nodeName": p.node,
                    "terminationGracePeriodSeconds": p.grace_seconds or 30,
                    "containers": [{"name": container, "image": "example/app:1"}],
                },
                "status": {
                    "podIP": p.ip,
                    "phase": "Running",
                    "conditions": [{"type": "Ready", "status": "True" if p.ready else "False"}],
                    "containerStatuses": statuses,
                },
            }
        )
    return {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {}}


def endpointslice_stream(
    changes: Sequence[EndpointChange], service: str, namespace: str = "default", port: int = 8080
) -> str:
    """``kubectl get endpointslices -w -o json``: one slice object per change, concatenated."""
    state: dict[str, EndpointChange] = {}
    out = []
    for change in sorted(changes, key=lambda c: c.ts or 0.0):
        if change.removed:
            state.pop(change.address, None)
        else:
            state[change.address] = change
        out.append(
            json.dumps(
                {
                    "apiVersion": "discovery.k8s.io/v1",
                    "kind": "EndpointSlice",
                    "metadata": {
                        "name": f"{service}-abc12",
                        "namespace": namespace,
                        "labels": {"kubernetes.io/service-name": service},
                        "annotations": {TRIGGER_TIME: iso_utc(change.ts)},
                    },
                    "addressType": "IPv4",
                    "endpoints": [
                        {
                            "addresses": [c.address],
                            "conditions": {
                                "ready": c.ready,
                                "serving": c.serving,
                                "terminating": c.terminating,
                            },
                            "targetRef": {"kind": "Pod", "name": c.pod, "namespace": namespace},
                        }
                        for c in state.values()
                    ],
                    "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
                },
                indent=2,
            )
        )
    return "\n".join(out) + "\n"


def write_bundle(
    out: Path,
    requests: pl.DataFrame,
    events: Iterable[LifecycleEvent],
    pods: Sequence[PodInfo],
    endpoints: Sequence[EndpointChange],
    namespace: str,
    service: str = "api",
) -> None:
    """An evidence bundle: ``requests.csv``, ``events.json`` (events.k8s.io/v1, as
    ``kubectl get events.v1.events.k8s.io -o json`` shows them: eventTime has microseconds,
    core/v1 events would round to the second), ``pods.json``, ``endpointslices.jsonl``."""
    out.mkdir(parents=True, exist_ok=True)
    write_requests(requests, out / "requests.csv")
    chosen = [e for e in events if e.reason]
    document = events_json(chosen, namespace=namespace, api="events.k8s.io/v1")
    (out / "events.json").write_text(json.dumps(document, indent=1))
    (out / "pods.json").write_text(json.dumps(pods_json(pods), indent=1))
    (out / "endpointslices.jsonl").write_text(
        endpointslice_stream(endpoints, service, namespace=namespace)
    )
