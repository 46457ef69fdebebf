"""A small cluster's control loop: pods as processes with a kubelet-like lifecycle, an
endpoint controller, per-node endpoint propagation, and a Deployment rolling update."""

from __future__ import annotations

import asyncio
import bisect
import collections
import contextlib
import math
import os
import random
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from svcdoctor.lab.datapath import Backend, Datapath, LabError, PodNet, get_status
from svcdoctor.model import (
    ContainerExit,
    EndpointChange,
    EventKind,
    LifecycleEvent,
    PodInfo,
    owners,
    shutdown_timeline,
)
from svcdoctor.model.scenario import FaultMode, PodSpec, Propagation, ShutdownMode

PROBE_PERIOD = 0.25
NAMESPACE = "lab"


@dataclass
class Pod:
    name: str
    spec: PodSpec
    fault: FaultMode = FaultMode.NONE
    net: PodNet | None = None
    process: asyncio.subprocess.Process | None = None
    ready: bool = False
    ready_at: float | None = None  # when its readiness probe first passed
    terminating: bool = False
    created_at: float = 0.0
    deleted_at: float | None = None
    sigterm_at: float | None = None
    exit: ContainerExit | None = None
    monitor: asyncio.Task[None] | None = None
    node: int | None = None  # the node it is scheduled on (None: not placed)
    stderr_reader: asyncio.Task[None] | None = None  # keeps the stderr pipe from filling

    @property
    def backend(self) -> Backend:
        assert self.net is not None
        return Backend(self.name, self.net.ip, self.net.port)


@dataclass
class Cluster:
    datapath: Datapath
    nodes: int
    propagation: Propagation
    seed: int = 0
    prefix: str = ""  # the run's prefix, on every pod process's command line
    pods: dict[str, Pod] = field(default_factory=dict)
    events: list[LifecycleEvent] = field(default_factory=list)
    endpoints: list[EndpointChange] = field(default_factory=list)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    synced: list[tuple[float, int, tuple[str, ...]]] = field(default_factory=list)
    on_change: Callable[[], None] | None = None  # told after every event and endpoint change
    healthy: list[tuple[float, int]] = field(default_factory=list)  # (when, Ready and alive)
    proxy_stopped: dict[int, float] = field(default_factory=dict)  # node → its kube-proxy's stop
    cordoned: set[int] = field(default_factory=set)  # nodes marked spec.unschedulable
    drains: list[Drain] = field(default_factory=list)  # the node drains, as they happened
    # told the node a drain empties when its evictions start: a load balancer in front
    # deregisters its targets on that node there (a hook: no lab scenario has one yet)
    on_drain: Callable[[int], None] | None = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self._node_pending: list[list[Backend] | None] = [None] * self.nodes
        self._node_last_sync = [0.0] * self.nodes
        self._node_timer: list[asyncio.TimerHandle | None] = [None] * self.nodes
        self._node_due = [0.0] * self.nodes
        self._inbox: list[collections.deque[list[Backend]]] = [
            collections.deque() for _ in range(self.nodes)
        ]
        self._published: list[Backend] = []
        self._timers: set[asyncio.TimerHandle] = set()  # changes on their way to the nodes

    # ---- events -------------------------------------------------------------------
    def event(
        self,
        kind: EventKind,
        pod: str,
        reason: str,
        message: str = "",
        exit_code: int | None = None,
    ) -> None:
        self.events.append(
            LifecycleEvent(
                time.time(), kind, pod, "lab", NAMESPACE, reason, message, exit_code, resolution=1.0
            )
        )
        if self.on_change:
            self.on_change()

    # ---- endpoints ----------------------------------------------------------------
    def routable(self) -> list[Backend]:
        """The endpoints a proxy routes to: ready and not terminating."""
        return [
            p.backend
            for p in self.pods.values()
            if p.ready and not p.terminating and p.net is not None
        ]

    def _publish(self, pod: Pod, removed: bool = False) -> None:
        """The EndpointSlice controller: record the pod's conditions and, when the routable
        set changed, propagate it to every node's proxy."""
        assert pod.net is not None
        self.endpoints.append(
            EndpointChange(
                time.time(),
                pod.net.ip if pod.net.ip != "127.0.0.1" else f"{pod.name}",
                pod.name,
                pod.ready and not pod.terminating,
                pod.ready,
                pod.terminating,
                removed,
            )
        )
        if self.on_change:
            self.on_change()
        ready = self.routable()
        self.healthy.append((time.time(), len(ready)))
        if ready == self._published:
            return
        self._published = ready
        loop = asyncio.get_running_loop()
        now = time.time()
        for node in range(self.nodes):
            # a watch delivers changes in order: a change never overtakes an earlier one
            due = max(now + self.propagation.draw(self.rng), self._node_due[node])
            self._node_due[node] = due
            self._inbox[node].append(list(ready))
            self._timers.add(loop.call_later(due - now, self._arrive, node))

    def _arrive(self, node: int) -> None:
        """The oldest change in flight reaches a node's kube-proxy (in order: timers with
        the same due time fire in any order); it syncs now or at the next sync slot."""
        self._node_pending[node] = self._inbox[node].popleft()
        due = self._node_last_sync[node] + self.propagation.min_sync
        if time.time() >= due:
            self._sync(node)
        elif self._node_timer[node] is None:
            timer = asyncio.get_running_loop().call_later(due - time.time(), self._sync, node)
            self._node_timer[node] = timer
            self._timers.add(timer)

    def _sync(self, node: int) -> None:
        self._node_timer[node] = None
        pending = self._node_pending[node]
        if pending is None:
            return
        self._node_pending[node] = None
        if node in self.proxy_stopped:
            return  # a stopped kube-proxy applies nothing: the node's rules stay frozen
        self._node_last_sync[node] = time.time()
        self.synced.append((time.time(), node, tuple(b.pod for b in pending)))
        self.datapath.program(node, pending)

    def restart_proxy(self, node: int) -> None:
        """The node is back (uncordoned after its drain stopped its kube-proxy): its
        kube-proxy starts and programs the routable pods at once, as a starting kube-proxy
        syncs its full view."""
        if self.proxy_stopped.pop(node, None) is None:
            return
        view = self.routable()
        self._node_last_sync[node] = time.time()
        self.synced.append((time.time(), node, tuple(b.pod for b in view)))
        self.datapath.program(node, view)

    # ---- scheduler and kubelet -----------------------------------------------------
    def schedule(self) -> int | None:
        """The scheduler: the schedulable node (not cordoned) running the fewest pods not
        being deleted, the lowest first on a tie; None when every node is cordoned (the pod
        stays unplaced, as a Pending pod would)."""
        load = collections.Counter(
            p.node for p in self.pods.values() if p.node is not None and not p.terminating
        )
        free = [n for n in range(self.nodes) if n not in self.cordoned]
        return min(free, key=lambda n: (load[n], n)) if free else None

    async def create(
        self, name: str, spec: PodSpec, fault: FaultMode = FaultMode.NONE, node: int | None = None
    ) -> Pod:
        """Start pod ``name`` on ``node`` (None: where ``schedule`` puts it)."""
        node = self.schedule() if node is None else node
        pod = Pod(name, spec, fault, created_at=time.time(), node=node)
        self.pods[name] = pod
        self.event(EventKind.CREATE, name, "SuccessfulCreate", f"Created pod: {name}")
        self.event(EventKind.CREATE, name, "Scheduled", f"Successfully assigned {NAMESPACE}/{name}")
        pod.net = await self.datapath.add_pod(name)
        args = [
            sys.executable,
            "-m",
            "svcdoctor.lab.pod",
            "--run",
            self.prefix,
            "--parent",
            str(os.getpid()),
            "--name",
            name,
            "--listen",
            f"{pod.net.ip}:{pod.net.port}",
            "--shutdown",
            spec.shutdown.value,
            "--shutdown-delay",
            str(spec.shutdown_delay),
            "--fault",
            fault.value,
            "--latency",
            str(spec.latency),
            "--slow",
            f"{spec.slow_share},{spec.slow_seconds}",
            "--seed",
            str(self.rng.randrange(1 << 30)),
        ]
        if spec.keepalive_timeout is not None:
            args += ["--keepalive-timeout", str(spec.keepalive_timeout)]
        if pod.net.netns:
            args = ["ip", "netns", "exec", pod.net.netns, *args]
        pod.process = await asyncio.create_subprocess_exec(
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        assert pod.process.stdout is not None
        assert pod.process.stderr is not None
        try:
            line = (await asyncio.wait_for(pod.process.stdout.readline(), 20)).decode()
        except TimeoutError:
            raise LabError(f"pod {name} did not start listening within 20 s") from None
        if not line.startswith("LISTENING"):
            _, err = await pod.process.communicate()
            why = err.decode(errors="replace").strip()
            raise LabError(
                f"pod {name} did not start (exit {pod.process.returncode}): "
                f"{why.splitlines()[-1] if why else line!r}"
            )
        port = int(line.split(":")[-1])
        pod.net = PodNet(pod.net.ip, port, pod.net.netns)
        self.event(EventKind.START, name, "Started", "Started container app")
        pod.monitor = asyncio.create_task(self._probe(pod))
        pod.stderr_reader = asyncio.create_task(_discard(pod.process.stderr))
        return pod

    async def _probe(self, pod: Pod) -> None:
        """Readiness probing: GET /readyz every PROBE_PERIOD until the container exits
        (the kubelet keeps probing a terminating pod: its ``serving`` condition)."""
        while pod.exit is None:
            ok = False
            assert pod.net is not None
            try:
                status = await get_status(
                    self.datapath.probe_socket(pod.net), (pod.net.ip, pod.net.port), "/readyz", 1.0
                )
                ok = status == 200
            except (OSError, TimeoutError, EOFError):
                ok = False
            if ok != pod.ready and pod.exit is None:
                pod.ready = ok
                if ok and pod.ready_at is None:
                    pod.ready_at = time.time()
                if not ok:
                    self.event(EventKind.UNHEALTHY, pod.name, "Unhealthy", "Readiness probe failed")
                self._publish(pod)
            await asyncio.sleep(PROBE_PERIOD)

    async def delete(self, name: str, evicted: bool = False) -> None:
        """Deletion: not ready in the endpoints at once, and the kubelet runs preStop,
        SIGTERM, then SIGKILL at the grace period, in parallel (the race). An evicted pod
        is deleted by the Eviction API, not by its ReplicaSet (no SuccessfulDelete)."""
        pod = self.pods[name]
        pod.deleted_at = time.time()
        pod.terminating = True
        if not evicted:
            self.event(EventKind.DELETE, name, "SuccessfulDelete", f"Deleted pod: {name}")
        self.event(EventKind.DELETE, name, "Killing", "Stopping container app")
        self._publish(pod)
        task = asyncio.create_task(self._kill(pod))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _kill(self, pod: Pod) -> None:
        """The kubelet: preStop (a failing hook returns at once; one that outlives the
        grace period is cut there), SIGTERM, and SIGKILL when what is left of the grace
        period runs out (see ``shutdown_timeline``)."""
        assert pod.process is not None
        assert pod.deleted_at is not None
        spec = pod.spec
        hook_fails = spec.prestop_fails and spec.prestop > 0
        prestop = 0.0 if hook_fails else spec.prestop
        to_sigterm, to_sigkill = shutdown_timeline(prestop, spec.grace)
        if hook_fails:
            self.event(
                EventKind.PRESTOP_FAILED,
                pod.name,
                "FailedPreStopHook",
                'PreStopHook failed: exec: "sleep": executable file not found in $PATH',
            )
        await asyncio.sleep(max(0.0, pod.deleted_at + to_sigterm - time.time()))
        if prestop >= spec.grace > 0:
            self.event(
                EventKind.PRESTOP_FAILED,
                pod.name,
                "FailedPreStopHook",
                f"PreStopHook failed: not completed within the grace period ({spec.grace:g} s)",
            )
        deadline = time.time() + to_sigkill - to_sigterm
        pod.sigterm_at = time.time()
        with contextlib.suppress(ProcessLookupError):
            pod.process.send_signal(signal.SIGTERM)
        try:
            code = await asyncio.wait_for(pod.process.wait(), max(0.0, deadline - time.time()))
            reason = "Completed" if code == 0 else "Error"
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pod.process.pid, signal.SIGKILL)
            await pod.process.wait()
            code, reason = 137, "Error"
        pod.exit = ContainerExit("app", code if code >= 0 else 128 - code, reason, time.time())
        pod.ready = False
        self._publish(pod, removed=True)
        await self.datapath.remove_pod(pod.name)

    async def drain(self) -> None:
        """Wait for every deletion in progress to finish."""
        while self.tasks:
            await asyncio.gather(*list(self.tasks), return_exceptions=True)

    async def stop_all(self) -> None:
        """Kill every pod process (end of run, error or Ctrl-C)."""
        for pod in self.pods.values():
            for task in (pod.monitor, pod.stderr_reader):
                if task:
                    task.cancel()
            if pod.process and pod.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pod.process.pid, signal.SIGKILL)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(pod.process.wait(), 5)
        for task in list(self.tasks):
            task.cancel()
        for timer in self._timers:  # no endpoint change may reach a datapath being removed
            timer.cancel()

    def snapshot(self) -> list[PodInfo]:
        """Every pod as ``kubectl get pods -o json`` would show it at the end of the run."""
        return [
            PodInfo(
                p.name,
                NAMESPACE,
                p.net.ip if p.net else None,
                None,  # pods are not placed on the client nodes in this model
                p.ready and not p.terminating,
                p.created_at,
                p.deleted_at,
                math.ceil(p.spec.grace),
                {"app": "api"},
                (p.exit,) if p.exit else (),
            )
            for p in self.pods.values()
        ]

    def stopped_listening(self, pod: Pod) -> float | None:
        """When the pod stopped accepting connections: SIGTERM (after the preStop), plus
        a graceful app's shutdown delay."""
        if pod.sigterm_at is None:
            return None
        delay = pod.spec.shutdown_delay if pod.spec.shutdown is ShutdownMode.GRACEFUL else 0.0
        end = pod.exit.finished_at if pod.exit and pod.exit.finished_at else float("inf")
        return min(pod.sigterm_at + delay, end)

    def routing_stopped(self, pod: Pod) -> list[float]:
        """When each node applied a view without the deleted pod (empty if none did)."""
        return list(self.dropped_by(pod).values())

    def dropped_by(self, pod: Pod) -> dict[int, float]:
        """Each node that applied a view without the deleted pod, and when it first did."""
        if pod.deleted_at is None:
            return {}
        out: dict[int, float] = {}
        for t, n, view in self.synced:
            if n not in out and t >= pod.deleted_at and pod.name not in view:
                out[n] = t
        return dict(sorted(out.items()))

    def applied(self, node: int) -> tuple[str, ...]:
        """The pods in the last view the node applied (its rules now)."""
        return next((v for _, n, v in reversed(self.synced) if n == node), ())

    async def settled(self, timeout: float = 120.0) -> None:
        """Wait until every node has applied every endpoint change made so far."""
        end = time.time() + timeout
        while any(self._inbox) or any(p is not None for p in self._node_pending):
            if time.time() > end:
                raise LabError(f"the nodes did not apply the endpoints within {timeout:g} s")
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.1)  # the datapath's own apply (an iptables-restore)

    def expected_race_failures(self, sent: dict[int, list[float]]) -> float:
        """What the model predicts for the race: for every node and every pod that stopped
        listening, the requests the node's clients sent (``sent``: their start times, sorted,
        per node) while its applied view still held the pod, times the pod's share of that
        view (one rule of n)."""
        total = 0.0
        for node in range(self.nodes):
            starts = sent.get(node, [])
            views = [(t, v) for t, n, v in self.synced if n == node]
            for pod in self.pods.values():
                dead = self.stopped_listening(pod)
                if dead is None:
                    continue
                for i, (t, view) in enumerate(views):
                    end = views[i + 1][0] if i + 1 < len(views) else math.inf
                    lo, hi = max(t, dead), end
                    if pod.name in view and hi > lo:
                        inside = bisect.bisect_left(starts, hi) - bisect.bisect_left(starts, lo)
                        total += inside / len(view)
        return total

    def ready_count(self, names: list[str]) -> int:
        return sum(1 for n in names if self.pods[n].ready and not self.pods[n].terminating)


async def _discard(stream: asyncio.StreamReader) -> None:
    while await stream.read(65536):
        pass


async def wait_ready(cluster: Cluster, names: list[str], timeout: float = 20.0) -> None:
    end = time.time() + timeout
    while cluster.ready_count(names) < len(names):
        if time.time() > end:
            raise LabError(f"pods did not become ready within {timeout:g} s")
        await asyncio.sleep(0.05)


async def rolling_update(
    cluster: Cluster,
    old: list[str],
    make_name: Callable[[int], str],
    spec: PodSpec,
    max_surge: int,
    max_unavailable: int,
    pause: float = 0.0,
    deleted: Callable[[str], None] | None = None,
) -> list[str]:
    """A Deployment rolling update: create new pods while old + new stay within
    replicas + maxSurge, delete old ones while the Ready pods stay at least
    replicas - maxUnavailable (terminating pods count for neither, as in Kubernetes).
    ``pause`` spaces the deletions, so that each one's failures can be told apart;
    ``deleted`` is told each deleted pod."""
    replicas = len(old)
    old = list(old)
    new: list[str] = []
    while old:
        alive = len(old) + len(new)
        ready = cluster.ready_count(old) + cluster.ready_count(new)
        progressed = False
        if alive < replicas + max_surge and len(new) < replicas:
            name = make_name(len(new))
            cluster.event(
                EventKind.SCALE,
                name,
                "ScalingReplicaSet",
                f"Scaled up replica set {owners(name)[0]} to {len(new) + 1}",
            )
            await cluster.create(name, spec)
            new.append(name)
            progressed = True
        if old and ready - 1 >= replicas - max_unavailable:
            name = old.pop(0)
            cluster.event(
                EventKind.SCALE,
                name,
                "ScalingReplicaSet",
                f"Scaled down replica set {owners(name)[0]} to {len(old)}",
            )
            await cluster.delete(name)
            if deleted:
                deleted(name)
            progressed = True
            if pause:
                await asyncio.sleep(pause)
        if not progressed:
            await asyncio.sleep(0.05)
    await wait_ready(cluster, new)
    return new


# kubectl drain retries an eviction the API server refused (429: it would violate a
# PodDisruptionBudget) after 5 s (kubernetes/kubectl pkg/drain/drain.go, evictPods: "error
# when evicting pods/... (will retry after 5s)"); simulate/rollout.py uses the same pause
EVICTION_RETRY = 5.0
# how long a drain waits for the budget to allow an eviction (kubectl drain --timeout; its
# default, 0, waits forever: a lab run must end, and say why)
DRAIN_TIMEOUT = 120.0


@dataclass
class Drain:
    """``kubectl drain`` of one node, as it happened: the cordon, each pod's refused
    evictions (429) and its accepted one, the replacements and the node's kube-proxy."""

    node: int
    budget: int | None  # the PodDisruptionBudget's maxUnavailable (None: no budget)
    replicas: int  # the Deployment's: the budget's expected count
    cordoned_at: float
    evicted: dict[str, float] = field(default_factory=dict)  # pod → eviction accepted
    refused: dict[str, list[float]] = field(default_factory=dict)  # pod → its 429s
    replacements: dict[str, str] = field(default_factory=dict)  # new pod → the evicted one
    finished_at: float | None = None  # every evicted pod gone (kubectl drain returns)

    def allowed(self, healthy: int) -> bool:
        """The Eviction API's check: one more disruption keeps the healthy pods (Ready, not
        being deleted) at least ``replicas - maxUnavailable``
        (https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/,
        https://kubernetes.io/docs/tasks/run-application/configure-pdb/)."""
        return budget_allows(self.budget, self.replicas, healthy)


def budget_allows(budget: int | None, replicas: int, healthy: int) -> bool:
    """Whether a PodDisruptionBudget of maxUnavailable ``budget`` (None: no budget) over
    ``replicas`` pods allows one more disruption with ``healthy`` pods (Ready, not being
    deleted): it keeps at least ``replicas - budget`` healthy
    (https://kubernetes.io/docs/concepts/scheduling-eviction/api-eviction/)."""
    return budget is None or healthy - 1 >= replicas - budget


async def drain_node(
    cluster: Cluster,
    node: int,
    replicas: int,
    budget: int | None,
    make_name: Callable[[int], str],
    spec: PodSpec,
    evicted: Callable[[str], None] | None = None,
) -> Drain:
    """``kubectl drain``: cordon the node (nothing new is scheduled on it), evict each of
    its pods through the Eviction API (all at once; a refused one retried every
    ``EVICTION_RETRY`` s), and wait until they are gone. The ReplicaSet replaces each
    evicted pod at once (a pod being deleted no longer counts as one of its replicas) on a
    schedulable node, in turn. Then the node goes away: its kube-proxy stops, its rules
    freeze (kubectl drain leaves DaemonSet pods such as kube-proxy running,
    --ignore-daemonsets; the node's shutdown stops them:
    https://kubernetes.io/docs/tasks/administer-cluster/safely-drain-node/)."""
    cluster.cordoned.add(node)
    record = Drain(node, budget, replicas, time.time())
    cluster.drains.append(record)
    if cluster.on_drain:
        cluster.on_drain(node)
    others = [n for n in range(cluster.nodes) if n not in cluster.cordoned]
    if not others:
        raise LabError("a drain needs a schedulable node for the evicted pods' replacements")
    victims = [p.name for p in cluster.pods.values() if p.node == node and not p.terminating]
    created: list[asyncio.Task[Pod]] = []

    async def evict(name: str) -> None:
        while not record.allowed(healthy := len(cluster.routable())):
            refused = record.refused.setdefault(name, [])
            refused.append(time.time())
            if refused[-1] - record.cordoned_at > DRAIN_TIMEOUT:
                raise LabError(
                    f"the drain of node-{node} waited {DRAIN_TIMEOUT:g} s to evict {name}: the "
                    f"PodDisruptionBudget (maxUnavailable {budget}) refuses it with {healthy} of "
                    f"{replicas} pods healthy"
                )
            await asyncio.sleep(EVICTION_RETRY)
        record.evicted[name] = time.time()
        await cluster.delete(name, evicted=True)
        if evicted:
            evicted(name)
        new = make_name(len(record.replacements))
        record.replacements[new] = name
        place = others[(len(record.replacements) - 1) % len(others)]
        created.append(asyncio.create_task(cluster.create(new, spec, node=place)))

    await asyncio.gather(*(evict(name) for name in victims))
    await asyncio.gather(*created)
    await cluster.drain()
    record.finished_at = time.time()
    cluster.proxy_stopped[node] = time.time()
    await wait_ready(cluster, list(record.replacements))
    return record
