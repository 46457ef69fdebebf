"""The pods of one window: which exist, when they become Ready, when they are deleted, and
what the kubelet then does to them (preStop, SIGTERM, SIGKILL).

Three events take pods away (``SimParams.event``):

* ``rollout``: the Deployment controller's rolling update (``rolling_update``);
* ``drain``: ``kubectl drain`` of node 0: its pods are evicted through the Eviction API,
  which refuses (429) an eviction the PodDisruptionBudget does not allow; kubectl retries a
  refused eviction every 5 s (kubernetes/kubectl ``pkg/drain/drain.go``, evictPods:
  "will retry after 5s"). An evicted pod is deleted like any other (its preStop and grace
  period honoured) and its ReplicaSet creates a replacement on another node at once
  (https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/,
  https://kubernetes.io/docs/tasks/administer-cluster/safely-drain-node/,
  https://kubernetes.io/docs/tasks/run-application/configure-pdb/);
* ``scale-down``: the ReplicaSet scaled down: pods deleted at once, not replaced.

Pods are spread over the nodes in turn (pod ``j`` on node ``j mod nodes``).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from svcdoctor.model import shutdown_timeline
from svcdoctor.model.scenario import Event
from svcdoctor.simulate.arrays import Floats, Ints
from svcdoctor.simulate.params import SimParams

NEVER = np.inf
BEFORE = -3600.0  # old pods were created and Ready long before the window
EVICTION_RETRY = 5.0  # kubectl drain retries a refused eviction after 5 s (drain.go)
DRAINED = 0  # the node a drain empties


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
    term: Floats  # the pod stops accepting: SIGTERM after the preStop (or the sidecar's end)
    kill: Floats  # SIGKILL, if the process is still running
    node: Ints  # the node each pod runs on
    gone: Floats  # the pod's mesh sidecar stops (cutting what is in flight); inf: none

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


def drain(
    replicas: int, nodes: int, budget: int | None, start: float, startup: Floats
) -> tuple[Ints, Floats, Floats, Floats]:
    """``kubectl drain`` of node ``DRAINED`` at ``start``: which old pods are evicted and
    when, and the replacements' creation and Ready times. Each eviction the
    PodDisruptionBudget allows (``budget``: its maxUnavailable; None: no budget) happens at
    once: the budget allows one while the healthy pods (Ready, not deleted) stay at least
    ``replicas - budget``; a refused one is retried 5 s later."""
    victims = [j for j in range(replicas) if j % nodes == DRAINED]
    evicted: list[float] = []
    ready: list[float] = []
    t = start
    while len(evicted) < len(victims):
        healthy = replicas - len(evicted) + sum(1 for r in ready if r <= t)
        allowed = len(victims) if budget is None else healthy - (replicas - budget)
        for _ in range(min(max(allowed, 0), len(victims) - len(evicted))):
            evicted.append(t)
            ready.append(t + float(startup[len(ready)]))
        t += EVICTION_RETRY
    return np.array(victims, dtype=np.int64), np.array(evicted), np.array(evicted), np.array(ready)


def gated(p: SimParams) -> bool:
    """The pods carry the load balancer's readiness gate (and it carries traffic)."""
    return p.lb_readiness_gate and p.lb_share > 0


def _startup(p: SimParams, rng: np.random.Generator) -> Floats:
    """Each new pod's creation → Ready: its start-up, and with the load balancer's
    readiness gate, the LB's registration of it after that (controller + the LB's leg)."""
    startup = p.startup.sample(rng, p.replicas)
    if gated(p):
        prop, n = p.propagation, p.replicas
        startup = startup + prop.controller.sample(rng, n) + prop.lb.sample(rng, n)
    return np.asarray(startup)


def _events(p: SimParams, rng: np.random.Generator) -> tuple[Floats, Floats, Floats, Ints]:
    """The old pods' deletion times and the new pods' creation and Ready times and nodes."""
    n = p.replicas
    deleted = np.full(n, NEVER)
    none = np.zeros(0)
    if not p.rollout:
        return deleted, none, none, np.zeros(0, dtype=np.int64)
    if p.event is Event.SCALE_DOWN:
        # the ReplicaSet ranks equal pods alike: the last ones go (the bad ones among them)
        deleted[p.remaining :] = p.rollout_at
        return deleted, none, none, np.zeros(0, dtype=np.int64)
    if p.event is Event.DRAIN:
        victims, at, created, ready = drain(
            n, p.nodes, p.pdb_max_unavailable, p.rollout_at, _startup(p, rng)
        )
        deleted[victims] = at
        node = (1 + np.arange(len(created)) % (p.nodes - 1)).astype(np.int64)
        return deleted, created, ready, node
    created, ready, old_deleted = rolling_update(
        n, p.max_surge, p.max_unavailable, p.rollout_at, _startup(p, rng)
    )
    deleted[: len(old_deleted)] = old_deleted
    return deleted, created, ready, np.arange(n, n + len(created)) % p.nodes


def build_pods(p: SimParams, rng: np.random.Generator) -> Pods:
    """Old pods (the last ``bad_backends`` of them faulty), the event's new pods, and each
    deleted pod's kubelet timeline."""
    n = p.replicas
    names = [f"api-7f6d5c4b3-{i:03d}" for i in range(n)]
    old_deleted, new_created, new_ready, new_node = _events(p, rng)
    # the window ends at ``duration``: what the controllers would do later does not happen
    inside = new_created < p.duration
    created = np.concatenate([np.full(n, BEFORE), new_created[inside]])
    ready = np.concatenate([np.full(n, BEFORE), new_ready[inside]])
    deleted = np.where(old_deleted < p.duration, old_deleted, NEVER)
    deleted = np.concatenate([deleted, np.full(int(inside.sum()), NEVER)])
    node = np.concatenate([np.arange(n) % p.nodes, new_node[inside]]).astype(np.int64)
    names += [f"api-5b4c3d2e1-{i:03d}" for i in range(int(inside.sum()))]
    old = np.arange(len(names)) < n
    bad = old & (np.arange(len(names)) >= n - p.bad_backends)
    # the kubelet: preStop, then SIGTERM, then SIGKILL when what is left of the grace
    # period runs out (never less than 2 s)
    to_sigterm, to_sigkill = shutdown_timeline(p.prestop, p.grace)
    kill = deleted + to_sigkill
    # a sidecar gets SIGTERM at the deletion (the app's preStop does not hold it), drains,
    # then stops: the pod takes nothing more from then
    gone = deleted + (NEVER if p.sidecar_drain is None else p.sidecar_drain)
    term = np.minimum(deleted + to_sigterm, gone)
    return Pods(tuple(names), old, bad, created, ready, deleted, term, kill, node, gone)
