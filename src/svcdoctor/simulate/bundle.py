"""A simulated run as evidence: the request log, pod events, pod snapshot and EndpointSlice
changes that a real cluster would have given, plus the ground truth, as model objects (the
CLI writes them in the lab's formats, so ``diagnose`` reads them like any bundle)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import polars as pl

from svcdoctor.model import (
    ContainerExit,
    EndpointChange,
    EventKind,
    LifecycleEvent,
    Outcome,
    PodInfo,
)
from svcdoctor.model.scenario import FaultMode
from svcdoctor.simulate.engine import (
    BAD,
    CONNECT_RTT,
    MECHANISMS,
    NO_ENDPOINTS,
    STALE_ENDPOINT,
    Mechanism,
    Run,
)

# 2026-01-01T00:00:00Z: simulated seconds are offsets from this instant in the bundle
EPOCH = 1767225600.0
NAMESPACE = "sim"
SERVICE = "api"
# what a client sees, per mechanism (a bad backend's depends on its fault)
OUTCOME = {
    Mechanism.OK: Outcome.OK,
    Mechanism.STALE_ENDPOINT: Outcome.REFUSED,  # a timeout once the pod's address is gone
    Mechanism.NO_ENDPOINTS: Outcome.REFUSED,  # kube-proxy REJECTs a Service without endpoints
    Mechanism.IN_FLIGHT: Outcome.RESET,
    Mechanism.SIGKILL: Outcome.RESET,
    Mechanism.STALE_CONNECTION: Outcome.EOF,
    Mechanism.CONNTRACK: Outcome.TIMEOUT,
}
FAULT_OUTCOME = {
    FaultMode.HTTP_5XX: Outcome.HTTP_ERROR,
    FaultMode.RESET: Outcome.RESET,
    FaultMode.HANG: Outcome.TIMEOUT,
}


@dataclass(frozen=True, slots=True)
class SimTruth:
    """What really happened in a simulated run, to check a diagnosis of its evidence."""

    seed: int
    epoch: float  # the Unix time of the window's start in the evidence
    bad_pods: tuple[str, ...]
    deleted_pods: tuple[str, ...]
    sigkilled_pods: tuple[str, ...]
    by_mechanism: Mapping[Mechanism, int]  # every request, served ones included
    outcome_of_mechanism: Mapping[Mechanism, Outcome]  # what the client saw of each


@dataclass(frozen=True, slots=True)
class SimEvidence:
    requests: pl.DataFrame  # canonical columns
    events: tuple[LifecycleEvent, ...]
    pods: tuple[PodInfo, ...]
    endpoints: tuple[EndpointChange, ...]
    truth: SimTruth
    kernel_log: str  # journalctl -k lines of the nodes that dropped packets ("" if none)


def pod_ip(index: int) -> str:
    return f"10.244.{index // 250}.{index % 250 + 2}"


def requests_frame(run: Run) -> pl.DataFrame:
    """One row per request, in the canonical request-log columns."""
    p, t = run.params, run.traffic
    outcomes: list[str] = [OUTCOME.get(m, Outcome.ERROR).value for m in MECHANISMS]
    outcomes[BAD] = FAULT_OUTCOME[p.fault].value
    code = t.mechanism.astype(np.int64)
    late = (code == STALE_ENDPOINT) & (t.latency > CONNECT_RTT * 1.5)
    status = np.where(
        code == 0, 200, np.where((code == BAD) & (p.fault is FaultMode.HTTP_5XX), 503, 0)
    )
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
    dropped = t.mechanism == MECHANISMS.index(Mechanism.CONNTRACK)
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


def _truth(run: Run) -> SimTruth:
    p, pods, t = run.params, run.pods, run.traffic
    counts = np.bincount(t.mechanism, minlength=len(MECHANISMS))
    return SimTruth(
        run.seed,
        EPOCH,
        tuple(n for n, b in zip(pods.names, pods.bad, strict=True) if b),
        tuple(n for n, d in zip(pods.names, pods.deleted, strict=True) if np.isfinite(d)),
        tuple(n for n, k in zip(pods.names, run.killed, strict=True) if k),
        dict(zip(MECHANISMS, counts.tolist(), strict=True)),
        {**OUTCOME, Mechanism.BAD_BACKEND: FAULT_OUTCOME[p.fault]},
    )
