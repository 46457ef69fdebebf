"""A rollout race seen through coarse clocks (issue 29): pods deleted ``spacing`` s apart,
new connections to a deleted pod refused ``lag`` s after its deletion (the built race
window), and the evidence written with whole-second clocks (nginx ``$time_local``, core/v1
events)."""

from __future__ import annotations

import numpy as np
import polars as pl

from svcdoctor.model import EndpointChange, EventKind, LifecycleEvent, PodInfo
from tests.factory import T0, Bundle


def _ip(i: int) -> str:
    return f"10.244.{1 + i // 200}.{10 + i % 200}"


def coarse_race(
    seed: int = 1,
    *,
    spacing: float = 12.0,
    lag: tuple[float, float] = (0.9, 2.3),
    replicas: int = 8,
    rate: float = 150.0,
    offset: float = 0.55,
    node_pods: int = 0,
    event_delay: float = 0.0,
) -> Bundle:
    """``offset``: where in its second the first deletion falls; ``node_pods``: pods of
    other workloads deleted from the same nodes at the same time (a node drain), which no
    request of this Service ever reached; ``event_delay``: how much later than the deletion
    its event is stamped (a kubelet that reports the kill late)."""
    rng = np.random.default_rng(seed)
    first = 60.0 + offset
    duration = first + spacing * replicas + 60.0
    n = int(rate * duration)
    ts = np.sort(rng.uniform(0, duration, n))
    client = rng.integers(0, 24, n)
    deleted = first + spacing * np.arange(replicas)
    # each deleted pod's own window: refused from lag[0] to a lag drawn in the range
    ends = rng.uniform(lag[0], lag[1], replicas)
    backend = rng.integers(0, replicas, n)
    since = ts - deleted[backend]
    racing = (since >= lag[0]) & (since < ends[backend])
    moved = since >= ends[backend]  # the proxy stopped sending to it: the new pod
    outcome = np.where(racing, "refused", "ok").astype(object)
    pod_index = np.where(moved, backend + replicas, backend)
    addresses = np.array([f"{_ip(i)}:8080" for i in range(2 * replicas)], dtype=object)
    frame = pl.DataFrame(
        {
            "ts": T0 + ts,
            "outcome": outcome.astype(str),
            "status": np.where(racing, 502, 200).tolist(),
            "latency_ms": np.where(racing, 1.0, np.round(rng.gamma(2.0, 15.0, n), 2)),
            "client": [f"client-{c}" for c in client],
            "backend": addresses[pod_index].tolist(),
            "conn": [f"c{i}" for i in range(n)],
        }
    )
    labels = {"app": "api", "pod-template-hash": "7d9f8b6c5"}
    pods, events, endpoints = [], [], []
    for i in range(replicas):
        old, new = f"api-7d9f8b6c5-{chr(97 + i)}{i:02d}x", f"api-5c4b3a291-{chr(97 + i)}{i:02d}y"
        d = T0 + float(deleted[i])
        pods.append(
            PodInfo(old, "default", _ip(i), f"node-{i % 4}", False, T0 - 100, d, 30, labels)
        )
        pods.append(
            PodInfo(new, "default", _ip(i + replicas), f"node-{i % 4}", True, d - 2,
                    labels={"app": "api"}, grace_seconds=30)
        )  # fmt: skip
        events += [
            LifecycleEvent(d - 2, EventKind.CREATE, new, "", "default", "Scheduled"),
            LifecycleEvent(d + event_delay, EventKind.DELETE, old, "", "default", "Killing"),
        ]
        endpoints += [
            EndpointChange(T0 - 50, _ip(i), old, True, True, False),
            EndpointChange(d + float(ends[i]), _ip(i), old, False, False, True),
            EndpointChange(d - 1, _ip(i + replicas), new, True, True, False),
        ]
        for j in range(node_pods):  # a drain: other workloads' pods on the same node
            other = f"cache-{i}{j}-6f7b9c8d4-q{j}"
            ip = f"10.244.9.{10 + i * node_pods + j}"
            moment = d + 0.2 * (j + 1)
            pods.append(
                PodInfo(other, "default", ip, f"node-{i % 4}", False, T0 - 100, moment, 30,
                        {"app": "cache"})
            )  # fmt: skip
            events.append(LifecycleEvent(moment, EventKind.DELETE, other, "", "default", "Killing"))
            endpoints.append(EndpointChange(T0 - 50, ip, other, True, True, False))
    truth = {"cause": "race", "window": float(ends.max()), "lag": lag}
    return Bundle(frame, pods, sorted(events, key=lambda e: e.ts), endpoints, [], truth)
