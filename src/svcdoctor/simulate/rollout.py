"""The pods of one window: which exist, when they become Ready, when they are deleted, and
what the kubelet then does to them (preStop, SIGTERM, SIGKILL)."""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from svcdoctor.model import shutdown_timeline
from svcdoctor.simulate.arrays import Floats
from svcdoctor.simulate.params import SimParams

NEVER = np.inf
BEFORE = -3600.0  # old pods were created and Ready long before the window


@dataclass(frozen=True, slots=True)
class Pods:
    """Per pod (old ReplicaSet first, then the new one). Times are seconds into the window;
    ``deleted`` is ``inf`` for a pod that is never deleted."""

    names: tuple[str, ...]
    old: np.ndarray  # bool
    bad: np.ndarray  # bool
    created: Floats
    ready: Floats
    deleted: Floats
    term: Floats  # SIGTERM: after the preStop (or at the grace period, if it is shorter)
    kill: Floats  # SIGKILL, if the process is still running

    @property
    def count(self) -> int:
        return len(self.names)


def rolling_update(
    replicas: int, surge: int, unavailable: int, start: float, startup: Floats
) -> tuple[Floats, Floats, Floats]:
    """The Deployment controller's rolling update: creation and Ready times of the new pods
    and deletion times of the old ones. New pods are created while the total stays within
    ``replicas + surge``; old pods are deleted while the available (Ready) pods stay at
    least ``replicas - unavailable``. Terminating pods do not count, as in Kubernetes."""
    created: list[float] = []
    ready: list[float] = []
    deleted: list[float] = []
    pending: list[float] = []
    old_alive, new_ready, t = replicas, 0, start

    def scale_up() -> None:
        while len(created) < replicas and old_alive + len(created) < replicas + surge:
            created.append(t)
            ready.append(t + float(startup[len(created) - 1]))
            heapq.heappush(pending, ready[-1])

    while True:
        scale_up()
        while old_alive > 0 and old_alive + new_ready - 1 >= replicas - unavailable:
            deleted.append(t)
            old_alive -= 1
            scale_up()
        if not pending:
            break
        t = heapq.heappop(pending)
        new_ready += 1
    return np.array(created), np.array(ready), np.array(deleted)


def build_pods(p: SimParams, rng: np.random.Generator) -> Pods:
    """Old pods (the last ``bad_backends`` of them faulty), the rollout's new pods, and
    each deleted pod's kubelet timeline."""
    n = p.replicas
    old_names = [f"api-7f6d5c4b3-{i:03d}" for i in range(n)]
    created = np.full(n, BEFORE)
    ready = np.full(n, BEFORE)
    deleted = np.full(n, NEVER)
    names = list(old_names)
    if p.rollout:
        new_created, new_ready, old_deleted = rolling_update(
            n, p.max_surge, p.max_unavailable, p.rollout_at, p.startup.sample(rng, n)
        )
        # the window ends at ``duration``: what the controller would do later does not happen
        inside = new_created < p.duration
        deleted[: len(old_deleted)] = np.where(old_deleted < p.duration, old_deleted, NEVER)
        created = np.concatenate([created, new_created[inside]])
        ready = np.concatenate([ready, new_ready[inside]])
        deleted = np.concatenate([deleted, np.full(int(inside.sum()), NEVER)])
        names += [f"api-5b4c3d2e1-{i:03d}" for i in range(int(inside.sum()))]
    old = np.arange(len(names)) < n
    bad = old & (np.arange(len(names)) >= n - p.bad_backends)
    # the kubelet: preStop, then SIGTERM, then SIGKILL when what is left of the grace
    # period runs out (never less than 2 s)
    to_sigterm, to_sigkill = shutdown_timeline(p.prestop, p.grace)
    term = deleted + to_sigterm
    kill = deleted + to_sigkill
    return Pods(tuple(names), old, bad, created, ready, deleted, term, kill)
