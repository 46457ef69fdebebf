"""A rollout whose pods keep serving through a long preStop (no endpoint race), while clients
hold kept-alive connections to them: when each pod exits, the connections held to it are
closed, and each client's next request on its pooled connection fails (``problem.md``:
"clients holding connections to terminating pods experience the reset at the moment of
shutdown"). One failure per client per exit: about 0.05 % of the traffic. As a client logs
it: a failed request got no response, so the pod that served it (the ``x-pod`` header the
lab's load reads, ``svcdoctor.lab.load``) is unknown."""

from __future__ import annotations

import numpy as np
import polars as pl

from svcdoctor.model import ContainerExit, EndpointChange, EventKind, LifecycleEvent, PodInfo
from tests.factory import T0, Bundle


def _ip(i: int) -> str:
    return f"10.244.{1 + i // 200}.{10 + i % 200}"


def exits_bundle(
    seed: int = 1,
    *,
    rate: float = 80.0,
    duration: float = 600.0,
    replicas: int = 8,
    clients: int = 24,
    prestop: float = 20.0,
    fail_at_exit: bool = True,
    noise: float = 2e-5,
) -> Bundle:
    """The bundle; ``fail_at_exit=False`` is the same rollout handled well (clients close
    their connections on ``Connection: close``/GOAWAY): only random background failures
    (``noise``: their share of the requests)."""
    rng = np.random.default_rng(seed)
    n = int(rate * duration)
    ts = np.sort(rng.uniform(0, duration, n))
    client = rng.integers(0, clients, n)
    home = rng.integers(0, replicas, clients)[client]
    deleted = 60.0 + 60.0 * np.arange(replicas)  # one pod a minute
    exited = deleted + prestop + 0.4  # preStop sleep, then SIGTERM, the app exits
    after = ts >= exited[home]
    outcome = np.full(n, "ok", dtype=object)
    stale = np.zeros(n, dtype=bool)
    if fail_at_exit:
        for c in range(clients):
            idx = np.flatnonzero((client == c) & after)
            stale[idx[:1]] = True  # the first request on the closed pooled connection
        outcome[stale] = np.where(rng.random(int(stale.sum())) < 0.5, "reset", "eof")
    background = rng.random(n) < noise  # a healthy Service's background
    outcome[background & (outcome == "ok")] = "reset"
    moved = after & ~stale  # reconnected to the replacement pod
    pod_index = np.where(moved, home + replicas, home)
    addresses = np.array([f"{_ip(i)}:8080" for i in range(2 * replicas)], dtype=object)
    conn = np.char.add(
        np.char.add("client", client.astype(str)), np.where(moved, "-new", "-old")
    ).astype(object)
    frame = pl.DataFrame(
        {
            "ts": T0 + ts,
            "outcome": outcome.astype(str),
            "status": np.where(outcome == "ok", 200, None).tolist(),
            "latency_ms": np.round(rng.gamma(2.0, 15.0, n), 2),
            "client": [f"client-{c}" for c in client],
            "backend": np.where(outcome == "ok", addresses[pod_index], None).tolist(),
            "conn": conn.astype(str).tolist(),
        }
    )
    old = [f"api-7d9f8b6c5-{chr(97 + i)}{i:02d}x" for i in range(replicas)]
    new = [f"api-5c4b3a291-{chr(97 + i)}{i:02d}y" for i in range(replicas)]
    labels = {"app": "api"}
    pods, events, endpoints = [], [], []
    for i in range(replicas):
        d, e = T0 + float(deleted[i]), T0 + float(exited[i])
        pods.append(
            PodInfo(
                old[i],
                "default",
                _ip(i),
                f"node-{i % 4}",
                False,
                T0 - 100,
                d,
                30,
                labels,
                (ContainerExit("app", 0, "Completed", e),),
            )
        )
        pods.append(
            PodInfo(new[i], "default", _ip(i + replicas), f"node-{(i + 1) % 4}", True, d - 2,
                    labels=labels, grace_seconds=30)
        )  # fmt: skip
        events += [
            LifecycleEvent(d - 2, EventKind.CREATE, new[i], "", "default", "Scheduled"),
            LifecycleEvent(d, EventKind.DELETE, old[i], "", "default", "Killing"),
            LifecycleEvent(e, EventKind.EXIT, old[i], "", "default"),
        ]
        endpoints += [
            EndpointChange(T0 - 50, _ip(i), old[i], True, True, False),
            EndpointChange(d + 1.0, _ip(i), old[i], False, False, True),
            EndpointChange(d - 1.0, _ip(i + replicas), new[i], True, True, False),
        ]
    truth = {"cause": "reuse" if fail_at_exit else "healthy", "failures": int(stale.sum())}
    return Bundle(frame, pods, sorted(events, key=lambda x: x.ts), endpoints, [], truth)
