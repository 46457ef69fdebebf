"""Evidence bundles with known ground truth, written in every supported real format.

``generate(Scenario(...))`` simulates traffic through a Service of N pods (vectorised,
seeded) for one cause; ``write_bundle`` writes it as the files users have: canonical request
logs, ingress-nginx access logs (with retried attempts), Envoy/Istio access logs, kubectl
events (core/v1 and events.k8s.io/v1), pods and EndpointSlice watch streams, kernel logs.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl

from svcdoctor.evidence.write import endpointslice_stream, events_json, pods_json, write_requests
from svcdoctor.model import ContainerExit, EndpointChange, EventKind, LifecycleEvent, PodInfo

T0 = 1_796_205_600.0  # 2026-12-02T10:00:00Z


@dataclass(frozen=True)
class Scenario:
    cause: str  # race | backend | reuse | infra | sigkill | healthy | race+backend
    replicas: int = 8
    rate: float = 200.0
    duration: float = 240.0
    clients: int = 24
    window: float = 3.0  # race: seconds a deleted pod keeps receiving new connections
    bad_pod: int = 3
    retries: bool = False  # nginx retried failed attempts (masked failures)
    seed: int = 1


@dataclass
class Bundle:
    requests: pl.DataFrame
    pods: list[PodInfo]
    events: list[LifecycleEvent]
    endpoints: list[EndpointChange]
    kernel_times: list[float] = field(default_factory=list)
    truth: dict[str, object] = field(default_factory=dict)


def _ip(i: int) -> str:
    return f"10.244.{1 + i // 200}.{10 + i % 200}"


def generate(s: Scenario) -> Bundle:
    rng = np.random.default_rng(s.seed)
    n = int(s.rate * s.duration)
    ts = np.sort(rng.uniform(0, s.duration, n))
    client = rng.integers(0, s.clients, n)
    pods = [f"api-7d9f8b6c5-{chr(97 + i)}{i:02d}x" for i in range(s.replicas)]
    new_pods = [f"api-5c4b3a291-{chr(97 + i)}{i:02d}y" for i in range(s.replicas)]
    rolls = s.cause in ("race", "reuse", "sigkill", "race+backend")
    deletions = {i: 60.0 + 10.0 * i for i in range(s.replicas)} if rolls else {}
    # Pod index per request: old pods until deleted (+ window for the race), then new pods.
    backend = rng.integers(0, s.replicas, n)
    deleted_at = np.array([deletions.get(i, np.inf) for i in range(s.replicas)])
    created = deleted_at - 2.0  # maxSurge 1: the new pod is Ready before the old one goes
    outcome = np.full(n, "ok", dtype=object)
    status = np.full(n, 200)
    latency = rng.gamma(2.0, 15.0, n)  # ms
    conn = np.array([f"c{c}-{i}" for c, i in zip(client, range(n), strict=True)], dtype=object)
    on_new = np.zeros(n, dtype=bool)
    lag = ts - deleted_at[backend]
    if s.cause in ("race", "race+backend"):
        racing = (lag >= 0) & (lag < s.window)
        outcome[racing] = np.where(rng.random(racing.sum()) < 0.7, "refused", "reset")
        status[racing] = 0
        on_new = lag >= s.window
    elif s.cause == "sigkill":
        on_new = lag >= 0
        # preStop 5 s, grace 10 s: requests longer than the time left are cut at SIGKILL
        latency = np.where(rng.random(n) < 0.3, rng.uniform(2000, 15000, n), latency)
        kill = deleted_at[backend] + 10.0
        cut = (ts < kill) & (ts + latency / 1000 > kill)
        outcome[cut] = "eof"
        status[cut] = 0
        latency = np.where(cut, (kill - ts) * 1000, latency)  # the request ends at SIGKILL
    elif s.cause == "reuse":
        # each client keeps one connection to one pod; when that pod exits, the client's
        # in-flight and next requests on it fail, then it reconnects to a new pod.
        home = rng.integers(0, s.replicas, s.clients)
        backend = home[client]
        lag = ts - deleted_at[backend]
        conn = np.array([f"client{c}-conn0" for c in client], dtype=object)
        after_exit = lag >= 0
        first_after = np.zeros(n, dtype=bool)
        for c in range(s.clients):
            idx = np.flatnonzero((client == c) & after_exit)
            first_after[idx[:3]] = True
        outcome[first_after] = np.where(rng.random(first_after.sum()) < 0.5, "eof", "reset")
        status[first_after] = 0
        on_new = after_exit & ~first_after
        conn = np.where(on_new, np.char.add(conn.astype(str), "-new"), conn).astype(object)
    if s.cause in ("backend", "race+backend"):
        bad = (backend == s.bad_pod) & ~on_new
        outcome[bad] = "http_error"
        status[bad] = 502
    if s.cause == "infra":
        bursts = np.sort(rng.uniform(20, s.duration - 20, 6))
        near = np.abs(ts[:, None] - bursts[None, :]).min(axis=1) < 0.8
        drop = near & (rng.random(n) < 0.5)
        outcome[drop] = "timeout"
        status[drop] = 0
        kernel_times = [float(t) for t in bursts]
    else:
        kernel_times = []
    noise = rng.random(n) < (2e-5 if s.cause == "healthy" else 1e-5)
    outcome[noise & (outcome == "ok")] = "reset"
    names = np.array(pods + new_pods, dtype=object)
    pod_index = np.where(on_new, backend + s.replicas, backend)
    addresses = np.array([f"{_ip(i)}:8080" for i in range(2 * s.replicas)], dtype=object)
    frame = pl.DataFrame(
        {
            "ts": T0 + ts,
            "outcome": outcome.astype(str),
            "status": np.where(status == 0, None, status).tolist(),
            "latency_ms": np.round(latency, 2),
            "client": [f"client-{c}" for c in client],
            "backend": addresses[pod_index].tolist(),
            "conn": conn.astype(str).tolist(),
            "node": [f"node-{c % 4}" for c in client],
            "pod": names[pod_index].tolist(),
        }
    )
    pod_infos, events, endpoints = _lifecycle(s, pods, new_pods, deletions, created)
    truth = {
        "cause": s.cause,
        "bad_pod": pods[s.bad_pod] if "backend" in s.cause else None,
        "bad_ip": _ip(s.bad_pod) if "backend" in s.cause else None,
        "window": s.window if "race" in s.cause else None,
    }
    return Bundle(frame, pod_infos, events, endpoints, [T0 + t for t in kernel_times], truth)


def _lifecycle(
    s: Scenario,
    pods: list[str],
    new_pods: list[str],
    deletions: dict[int, float],
    created: np.ndarray,
) -> tuple[list[PodInfo], list[LifecycleEvent], list[EndpointChange]]:
    infos, events, endpoints = [], [], []
    labels = {"app": "api", "pod-template-hash": "7d9f8b6c5"}
    for i, name in enumerate(pods):
        ip = _ip(i)
        endpoints.append(EndpointChange(T0 - 50, ip, name, True, True, False))
        d = deletions.get(i)
        if d is None:
            infos.append(
                PodInfo(
                    name,
                    "default",
                    ip,
                    f"node-{i % 4}",
                    True,
                    T0 - 100,
                    labels=labels,
                    grace_seconds=30,
                )
            )
            continue
        exit_at = T0 + d + (10.0 if s.cause == "sigkill" else 0.3)
        exits = (
            ContainerExit(
                "app",
                137 if s.cause == "sigkill" else 0,
                "Error" if s.cause == "sigkill" else "Completed",
                exit_at,
            ),
        )
        infos.append(
            PodInfo(
                name,
                "default",
                ip,
                f"node-{i % 4}",
                False,
                T0 - 100,
                T0 + d,
                10 if s.cause == "sigkill" else 30,
                labels,
                exits,
            )
        )
        events.append(
            LifecycleEvent(
                T0 + d, EventKind.DELETE, name, "", "default", "Killing", "Stopping container app"
            )
        )
        events.append(LifecycleEvent(exit_at, EventKind.EXIT, name, "", "default"))
        endpoints.append(EndpointChange(T0 + d + s.window, ip, name, False, False, True))
        endpoints.append(
            EndpointChange(exit_at + s.window, ip, name, False, False, True, removed=True)
        )
        new = new_pods[i]
        new_ip = _ip(i + s.replicas)
        infos.append(
            PodInfo(
                new,
                "default",
                new_ip,
                f"node-{(i + 1) % 4}",
                True,
                T0 + float(created[i]),
                labels={"app": "api"},
                grace_seconds=30,
            )
        )
        events.append(
            LifecycleEvent(
                T0 + float(created[i]),
                EventKind.CREATE,
                new,
                "",
                "default",
                "Scheduled",
                f"Assigned default/{new}",
            )
        )
        endpoints.append(EndpointChange(T0 + float(created[i]) + 1, new_ip, new, True, True, False))
    return infos, sorted(events, key=lambda e: e.ts), endpoints


def _nginx_time(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%d/%b/%Y:%H:%M:%S +0000")


def nginx_access_lines(b: Bundle, retries: bool) -> list[str]:
    """ingress-nginx upstreaminfo lines; with ``retries`` a failed attempt is retried on
    another upstream and succeeds (the failure is masked from the client)."""
    lines = []
    others = sorted(set(b.requests.get_column("backend").to_list()))
    for i, r in enumerate(b.requests.iter_rows(named=True)):
        ok = r["outcome"] == "ok"
        code = r["status"] or (504 if r["outcome"] == "timeout" else 502)
        up_time = f"{r['latency_ms'] / 1000:.3f}"
        addrs, statuses, times, lengths = [r["backend"]], [str(code)], [up_time], ["0"]
        final = code
        if not ok and retries:
            alt = others[(others.index(r["backend"]) + 1) % len(others)]
            addrs.append(alt)
            statuses.append("200")
            times.append("0.004")
            lengths.append("612")
            final = 200
        elif ok:
            lengths = ["612"]
        lines.append(
            f"{r['client'].replace('client-', '10.0.0.')} - - [{_nginx_time(r['ts'])}] "
            f'"GET /api/items HTTP/1.1" {final} 612 "-" "load/1.0" 87 {up_time} '
            f"[default-api-80] [] {', '.join(addrs)} {', '.join(lengths)} {', '.join(times)} "
            f"{', '.join(statuses)} {i:032x}"
        )
    return lines


def _peer(r: dict[str, object]) -> str:
    """The client's address and a source port per connection (Envoy's downstream peer)."""
    client, conn = str(r["client"]), str(r["conn"])
    return f"{client.replace('client-', '10.1.0.')}:{40000 + zlib.crc32(conn.encode()) % 20000}"


def _upstream_local(r: dict[str, object]) -> str:
    """The sidecar's side of the pooled upstream connection (``UPSTREAM_LOCAL_ADDRESS``):
    one per connection of the bundle, in the client's pod."""
    client, conn = str(r["client"]), str(r["conn"])
    return f"{client.replace('client-', '10.1.0.')}:{30000 + zlib.crc32(conn.encode()) % 20000}"


def envoy_lines(b: Bundle, istio: bool) -> list[str]:
    flags = {
        "ok": "-",
        "refused": "UF",
        "reset": "UC",
        "eof": "UC",
        "timeout": "UT",
        "http_error": "-",
    }
    lines = []
    for i, r in enumerate(b.requests.iter_rows(named=True)):
        code = r["status"] or (504 if r["outcome"] == "timeout" else 503)
        start = datetime.fromtimestamp(r["ts"], UTC).isoformat(timespec="milliseconds")
        start = start.replace("+00:00", "Z")
        dur = int(r["latency_ms"])
        peer = _peer(r)
        if istio:
            lines.append(
                f'[{start}] "GET /api HTTP/1.1" {code} {flags[r["outcome"]]} via_upstream - "-" '
                f'0 612 {dur} {dur} "-" "load/1.0" "{i:08x}" "api:8080" "{r["backend"]}" '
                f"outbound|8080||api.default.svc.cluster.local {_upstream_local(r)} "
                f"10.96.0.10:8080 {peer} - default"
            )
        else:
            lines.append(
                f'[{start}] "GET /api HTTP/1.1" {code} {flags[r["outcome"]]} 0 612 {dur} {dur} '
                f'"{peer.split(":", maxsplit=1)[0]}" "load/1.0" "{i:08x}" "api:8080" '
                f'"{r["backend"]}"'
            )
    return lines


def envoy_json_lines(b: Bundle) -> list[str]:
    flags = {
        "ok": "-",
        "refused": "UF",
        "reset": "UC",
        "eof": "UC",
        "timeout": "UT",
        "http_error": "-",
    }
    out = []
    for r in b.requests.iter_rows(named=True):
        start = datetime.fromtimestamp(r["ts"], UTC).isoformat(timespec="milliseconds")
        out.append(
            json.dumps(
                {
                    "start_time": start.replace("+00:00", "Z"),
                    "response_code": r["status"] or (504 if r["outcome"] == "timeout" else 503),
                    "response_flags": flags[r["outcome"]],
                    "upstream_host": r["backend"],
                    "downstream_remote_address": _peer(r),
                    "duration": int(r["latency_ms"]),
                    "method": "GET",
                    "path": "/api",
                }
            )
        )
    return out


def kernel_lines(b: Bundle, style: str) -> list[str]:
    out = []
    for t in b.kernel_times:
        when = datetime.fromtimestamp(t, UTC)
        msg = "nf_conntrack: nf_conntrack: table full, dropping packet"
        if style == "dmesg-T":
            out.append(f"[{when.strftime('%a %b %e %H:%M:%S %Y')}] {msg}")
        elif style == "journal":
            out.append(f"{when.strftime('%b %d %H:%M:%S')} node-1 kernel: {msg}")
        else:  # dmesg: seconds since boot (boot at T0 - 1000)
            out.append(f"[{t - (T0 - 1000):12.6f}] nf_conntrack: table full, dropping packet")
        out.append(
            f"{when.strftime('%b %d %H:%M:%S')} node-1 kernel: nf_conntrack: 41 "
            "callbacks suppressed"
            if style == "journal"
            else out[-1]
        )
    return out


def write_bundle(
    b: Bundle, folder: Path, request_format: str = "csv", events_api: str = "v1"
) -> Path:
    """The bundle as a directory of real-format files; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    if request_format in ("csv", "jsonl", "parquet"):
        write_requests(b.requests, folder / f"requests.{request_format}", request_format)
    elif request_format in ("nginx", "nginx-retries"):
        lines = nginx_access_lines(b, retries=request_format == "nginx-retries")
        (folder / "ingress-nginx.log").write_text("\n".join(lines) + "\n")
    elif request_format in ("envoy", "istio"):
        (folder / "envoy.log").write_text(
            "\n".join(envoy_lines(b, request_format == "istio")) + "\n"
        )
    elif request_format == "envoy-json":
        (folder / "envoy.json.log").write_text("\n".join(envoy_json_lines(b)) + "\n")
    (folder / "events.json").write_text(
        json.dumps(
            events_json([e for e in b.events if e.kind is not EventKind.EXIT], api=events_api),
            indent=1,
        )
    )
    (folder / "pods.json").write_text(json.dumps(pods_json(b.pods), indent=1))
    (folder / "endpointslices.json").write_text(endpointslice_stream(b.endpoints, "api"))
    if b.kernel_times:
        (folder / "dmesg.txt").write_text("\n".join(kernel_lines(b, "dmesg-T")) + "\n")
    return folder
