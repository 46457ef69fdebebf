"""``lab serve``'s nodes and evictions, driven by its API clients: ``kubectl cordon`` and
``uncordon`` (a patch of a Node's ``spec.unschedulable``), and the Eviction API
(``POST pods/NAME/eviction``) that ``kubectl drain`` and ``rollout-test --mode drain`` use.

The semantics are ``lab run``'s drain (``cluster.drain_node``), one API call at a time:

* a cordoned node gets no new pod (``Cluster.schedule``); with a drain scenario (``drain``,
  ``drain-fixed``) a cordon starts a ``Drain`` record, the lab's own clients on the node
  call from the other nodes from then on (``EvictableLoad``), and once the cordoned node
  runs none of the Deployment's pods its kube-proxy stops (the node goes away, as in
  ``lab run``); an uncordon brings it back: its kube-proxy starts and syncs, its clients
  return. Other scenarios only cordon (kubectl drain leaves the DaemonSets running);
* an eviction of a Deployment pod is refused with 429 while the PodDisruptionBudget
  (the scenario's ``pdb_max_unavailable``; none: every eviction is allowed) would be
  broken, worded as kube-apiserver words it, and while the lab's Deployment rolls out or
  its pods are still starting; an allowed one deletes the pod gracefully (preStop,
  SIGTERM, grace: ``Cluster.delete(evicted=True)``) and its ReplicaSet creates a
  replacement at once on a schedulable node. Other pods (the clients' Jobs) are deleted
  as a delete would.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from svcdoctor.lab.apiserver import Admission, StatusError, Verb, invalid
from svcdoctor.lab.cluster import Cluster, Drain, budget_allows
from svcdoctor.lab.datapath import LabError
from svcdoctor.lab.run import EvictableLoad
from svcdoctor.lab.scenarios import Scenario

# the lab's PodDisruptionBudget: named after the Deployment it covers (lab/objects.py
# DEPLOYMENT); the lab does not serve PodDisruptionBudget objects
BUDGET_NAME = "api"
# kube-apiserver's refusal (kubernetes/kubernetes pkg/registry/core/pod/storage/eviction.go:
# errors.NewTooManyRequests and the DisruptionBudget cause)
REFUSED = "Cannot evict pod as it would violate the pod's disruption budget."
WATCH_PERIOD = 0.1  # seconds between looks at a cordoned node, for its kube-proxy's stop


def node_index(name: str, nodes: int) -> int | None:
    """``node-I`` → I (None: not one of the lab's nodes)."""
    prefix, _, number = name.rpartition("-")
    index = int(number) if prefix == "node" and number.isdigit() else -1
    return index if 0 <= index < nodes else None


class NodeDrains:
    """The admission handlers of Nodes (``admit_node``) and of ``pods/eviction``
    (``admit_eviction``) for one lab serve. ``pods()``: the current ReplicaSet's pods (None
    while they start); ``rolling()``: a rollout is under way; ``replaced(old, new)`` is told
    each replacement; ``load``'s clients on a drained node move to the others and back."""

    def __init__(
        self,
        scenario: Scenario,
        cluster: Cluster,
        pods: Callable[[], list[str] | None],
        rolling: Callable[[], bool],
        replaced: Callable[[str, str], None],
        load: EvictableLoad,
    ) -> None:
        self.scenario = scenario
        self.cluster = cluster
        self.pods = pods
        self.rolling = rolling
        self.replaced = replaced
        self.load = load
        self.tasks: list[asyncio.Task[Any]] = []  # replacements and kube-proxy watchers

    # ---- nodes -----------------------------------------------------------------------
    def admit_node(self, adm: Admission) -> dict[str, Any] | None:
        """A patch of a Node: only ``spec.unschedulable`` may change (kubectl cordon and
        uncordon); it cordons or uncordons the lab's node."""
        if adm.verb != Verb.PATCH or adm.old is None:
            return None
        node = node_index(adm.name, self.cluster.nodes)
        if node is None:
            return None  # not one of the lab's nodes: the server answers as it does
        old_spec = dict(adm.old.get("spec") or {})
        new_spec = dict(adm.obj.get("spec") or {})
        wanted = bool(new_spec.pop("unschedulable", False))
        old_spec.pop("unschedulable", None)
        if new_spec != old_spec or adm.obj.get("status") != adm.old.get("status"):
            raise invalid(
                adm.obj,
                "spec",
                "…",
                "the lab's nodes change only by a cordon or an uncordon (spec.unschedulable)",
            )
        if not adm.dry_run:
            if wanted:
                self.cordon(node)
            else:
                self.uncordon(node)
        return None

    def cordon(self, node: int) -> None:
        cluster = self.cluster
        if node in cluster.cordoned:
            return
        cluster.cordoned.add(node)
        if not self.scenario.drains:
            return
        scenario = self.scenario
        record = Drain(node, scenario.pdb_max_unavailable, scenario.replicas, time.time())
        cluster.drains.append(record)
        if cluster.on_drain:
            cluster.on_drain(node)
        others = [n for n in range(cluster.nodes) if n not in cluster.cordoned]
        if others:
            self.load.evict_clients(node, others)
        self._start(self._stop_proxy_when_empty(record))

    def uncordon(self, node: int) -> None:
        cluster = self.cluster
        if node not in cluster.cordoned:
            return
        cluster.cordoned.discard(node)
        for record in cluster.drains:
            if record.node == node and record.finished_at is None:
                record.finished_at = time.time()
        cluster.restart_proxy(node)
        for client in [c for c in self.load.moved if c % cluster.nodes == node]:
            del self.load.moved[client]  # client c's own node is c mod nodes (evict_clients)

    async def _stop_proxy_when_empty(self, record: Drain) -> None:
        """The node goes away once it runs none of the Deployment's pods (every evicted
        one exited): its kube-proxy stops, its rules freeze (``lab run``'s drain)."""
        cluster = self.cluster
        while record.node in cluster.cordoned and record.finished_at is None:
            if not any(p.node == record.node and p.exit is None for p in cluster.pods.values()):
                record.finished_at = time.time()
                cluster.proxy_stopped[record.node] = time.time()
                return
            await asyncio.sleep(WATCH_PERIOD)

    # ---- evictions -------------------------------------------------------------------
    async def admit_eviction(self, adm: Admission) -> dict[str, Any] | None:
        """An eviction of one of the Deployment's pods (see the module docstring); None for
        another pod (deleted as a delete would)."""
        pod = self.cluster.pods.get(adm.name)
        if pod is None:
            return None
        if pod.terminating:
            return adm.obj  # being deleted already: nothing more to do
        current = self.pods()
        if current is None or self.rolling():
            why = "its pods are still starting" if current is None else "it is rolling out"
            raise StatusError(
                429,
                "TooManyRequests",
                f"Cannot evict pod: the lab's Deployment {why}; retry once it is done",
            )
        healthy = len(self.cluster.routable())
        budget, replicas = self.scenario.pdb_max_unavailable, self.scenario.replicas
        record = self._record(pod.node)
        if not budget_allows(budget, replicas, healthy):
            if record is not None:
                record.refused.setdefault(adm.name, []).append(time.time())
            assert budget is not None
            cause = (
                f"The disruption budget {BUDGET_NAME} needs {replicas - budget} healthy pods "
                f"and has {healthy} currently"
            )
            raise StatusError(
                429,
                "TooManyRequests",
                REFUSED,
                {"causes": [{"reason": "DisruptionBudget", "message": cause}]},
            )
        if adm.dry_run:
            return adm.obj
        if record is not None:
            record.evicted[adm.name] = time.time()
        await self.cluster.delete(adm.name, evicted=True)
        new = self._replacement_name(adm.name)
        if record is not None:
            record.replacements[new] = adm.name
        self.replaced(adm.name, new)
        self._start(self.cluster.create(new, self.scenario.pod))
        return adm.obj

    def _record(self, node: int | None) -> Drain | None:
        """The drain under way on ``node`` (None: none, or not a drain scenario)."""
        found = [d for d in self.cluster.drains if d.node == node and d.finished_at is None]
        return found[-1] if found else None

    def _replacement_name(self, evicted: str) -> str:
        """The ReplicaSet's next pod name: its prefix, the next free index."""
        prefix = evicted.rsplit("-", 1)[0]
        taken = [
            int(n.rsplit("-", 1)[1])
            for n in self.cluster.pods
            if n.rsplit("-", 1)[0] == prefix and n.rsplit("-", 1)[1].isdigit()
        ]
        return f"{prefix}-{max(taken, default=-1) + 1:02d}"

    def _start(self, work: Any) -> None:
        self.tasks.append(asyncio.create_task(work))

    def check(self) -> None:
        """Raise what made a replacement fail (the serve ends with it, as a rollout's)."""
        for task in self.tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                raise LabError(f"a replacement after an eviction failed: {task.exception()}")
