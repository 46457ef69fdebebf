"""A simulated run as evidence: the request log, pod events, pod snapshot and EndpointSlice
changes that a real cluster would have given, plus the ground truth, as model objects (the
CLI writes them in the lab's formats, so ``diagnose`` reads them like any bundle)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import polars as pl

from svcdoctor.model import ContainerExit, EndpointChange, EventKind, LifecycleEvent, PodInfo
from svcdoctor.simulate.engine import (
    BAD,
    CONNECT_RTT,
    MECHANISMS,
    NO_ENDPOINTS,
    STALE_ENDPOINT,
    Run,
)

# 2026-01-01T00:00:00Z: simulated seconds are offsets from this instant in the bundle
EPOCH = 1767225600.0
NAMESPACE = "sim"
SERVICE = "api"
# what a client sees, per mechanism (a bad backend's depends on its fault)
OUTCOME = {
    "ok": "ok",
    "stale_endpoint": "refused",  # "timeout" once the pod's address is gone
    "no_endpoints": "refused",  # kube-proxy REJECTs a Service without endpoints
    "in_flight": "reset",
    "sigkill": "reset",
    "stale_connection": "eof",
    "conntrack": "timeout",
}
FAULT_OUTCOME = {"5xx": "http_error", "reset": "reset", "hang": "timeout"}


@dataclass(frozen=True, slots=True)
class SimEvidence:
    requests: pl.DataFrame  # canonical columns
    events: tuple[LifecycleEvent, ...]
    pods: tuple[PodInfo, ...]
    endpoints: tuple[EndpointChange, ...]
    truth: dict[str, Any]
    kernel_log: str  # journalctl -k lines of the nodes that dropped packets ("" if none)


def pod_ip(index: int) -> str:
    return f"10.244.{index // 250}.{index % 250 + 2}"


def requests_frame(run: Run) -> pl.DataFrame:
    """One row per request, in the canonical request-log columns."""
    p, t = run.params, run.traffic
    outcomes = [OUTCOME.get(m, "error") for m in MECHANISMS]
    outcomes[BAD] = FAULT_OUTCOME[p.fault]
    code = t.mechanism.astype(np.int64)
    late = (code == STALE_ENDPOINT) & (t.latency > CONNECT_RTT * 1.5)
    status = np.where(code == 0, 200, np.where((code == BAD) & (p.fault == "5xx"), 503, 0))
    backend = np.where(t.backend >= 0, t.backend, run.pods.count)
    made = code != NO_ENDPOINTS  # no connection was made
    return pl.DataFrame(
        [
            pl.Series("ts", EPOCH + t.ts),
            _lookup("outcome", [*outcomes, "timeout"], np.where(late, len(outcomes), code)),
            pl.Series("status", status).replace(0, None),
            pl.Series("latency_ms", np.round(t.latency * 1000, 3)),
            _lookup("client", [f"client-{c:04d}" for c in range(p.client_count)], t.client),
            _lookup("backend", [*run.pods.names, None], backend),
            pl.Series("conn", np.where(made, t.conn, -1)),
            _lookup("node", [f"node-{n:04d}" for n in range(p.nodes)], t.node),
        ]
    ).with_columns(
        pl.when(pl.col("conn") >= 0).then(pl.format("c{}", pl.col("conn"))).alias("conn")
    )


def _lookup(name: str, labels: list[str | None], index: np.ndarray) -> pl.Series:
    return pl.Series(name, labels, dtype=pl.Utf8).gather(index)


def sim_evidence(run: Run) -> SimEvidence:
    """Everything a bundle holds, from one run."""
    p, pods = run.params, run.pods
    events: list[LifecycleEvent] = []
    snapshot: list[PodInfo] = []
    changes: list[EndpointChange] = []
    grace = max(1, round(p.grace))
    for j, name in enumerate(pods.names):
        created, ready = EPOCH + float(pods.created[j]), EPOCH + float(pods.ready[j])
        deleted = EPOCH + float(pods.deleted[j])
        node = f"node-{j % p.nodes:04d}"
        events += [
            _event(created, EventKind.CREATE, name, "Scheduled", f"Assigned sim/{name} to {node}"),
            _event(ready - 1.0, EventKind.START, name, "Started", "Started container app"),
        ]
        changes.append(EndpointChange(ready, pod_ip(j), name, True, True, False))
        gone = bool(np.isfinite(pods.deleted[j]))
        exits: tuple[ContainerExit, ...] = ()
        if gone:
            events.append(
                _event(deleted, EventKind.DELETE, name, "Killing", "Stopping container app")
            )
            changes.append(EndpointChange(deleted, pod_ip(j), name, False, True, True))
            exit_at = float(run.exits[j])
            if exit_at <= p.duration:
                killed = bool(run.killed[j])
                exits = (
                    ContainerExit(
                        "app",
                        137 if killed else 0,
                        "Error" if killed else "Completed",
                        EPOCH + exit_at,
                    ),
                )
                changes.append(
                    EndpointChange(
                        EPOCH + exit_at, pod_ip(j), name, False, False, True, removed=True
                    )
                )
        snapshot.append(
            PodInfo(
                name,
                NAMESPACE,
                pod_ip(j),
                node,
                not gone and float(pods.ready[j]) <= p.duration,
                created,
                deleted if gone else None,
                grace,
                {"app": SERVICE},
                exits,
            )
        )
    return SimEvidence(
        requests_frame(run),
        tuple(sorted(events, key=lambda e: e.ts)),
        tuple(snapshot),
        tuple(changes),
        _truth(run),
        kernel_log(run),
    )


def kernel_log(run: Run) -> str:
    """``journalctl -k -o short-iso`` of every node whose full conntrack table dropped SYNs:
    per node and second, one ``table full`` line and the kernel's count of the messages it
    suppressed (it rate-limits them)."""
    t = run.traffic
    dropped = t.mechanism == MECHANISMS.index("conntrack")
    if not dropped.any():
        return ""
    second = np.floor(t.ts[dropped]).astype(np.int64)
    keys, counts = np.unique(np.stack([t.node[dropped], second]), axis=1, return_counts=True)
    lines = []
    for (node, sec), count in zip(keys.T.tolist(), counts.tolist(), strict=True):
        stamp = datetime.fromtimestamp(EPOCH + sec, UTC).strftime("%Y-%m-%dT%H:%M:%S+0000")
        host = f"node-{node:04d}"
        lines.append(
            f"{stamp} {host} kernel: nf_conntrack: nf_conntrack: table full, dropping packet"
        )
        if count > 1:
            lines.append(f"{stamp} {host} kernel: net_ratelimit: {count - 1} callbacks suppressed")
    return "\n".join(lines) + "\n"


def _event(ts: float, kind: EventKind, pod: str, reason: str, message: str) -> LifecycleEvent:
    return LifecycleEvent(ts, kind, pod, "simulate", NAMESPACE, reason, message)


def _truth(run: Run) -> dict[str, Any]:
    p, pods, t = run.params, run.pods, run.traffic
    counts = np.bincount(t.mechanism, minlength=len(MECHANISMS))
    return {
        "seed": run.seed,
        "epoch": EPOCH,
        "bad_pods": [n for n, b in zip(pods.names, pods.bad, strict=True) if b],
        "deleted_pods": [
            n for n, d in zip(pods.names, pods.deleted, strict=True) if np.isfinite(d)
        ],
        "sigkilled_pods": [n for n, k in zip(pods.names, run.killed, strict=True) if k],
        "by_mechanism": {m: int(c) for m, c in zip(MECHANISMS, counts, strict=True)},
        "outcome_of_mechanism": {**OUTCOME, "bad_backend": FAULT_OUTCOME[p.fault]},
    }
