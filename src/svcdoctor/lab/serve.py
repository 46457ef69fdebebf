"""``svcdoctor lab serve``: a lab cluster (the pods, datapath, load and rollout of ``lab
run``) served as a Kubernetes API, its objects kept equal to the lab's real state.

The lab tells a ``Mirror`` after every event and endpoint change (``Cluster.on_change``)
and on a short tick; the mirror rebuilds the objects (``objects.py``, pure) and puts in the
API server's store only those that changed, so watchers see each real change once.

Clients may also write (issue 18): the ConfigMaps, Jobs and pods they create run for real
(``jobs.py``: the agent as a process on its node, in the datapath), and a restart patch of
the Deployment (``kubectl rollout restart``: the ``restartedAt`` annotation) starts the lab's
rollout; without ``rollout_at`` that patch is the only way the lab rolls. One rollout at a
time: a restart patch while one rolls is refused with 409 Conflict (a later one rolls again,
to a new ReplicaSet). ``load_on=False`` leaves the lab's own clients off, so a client's
agent is the only traffic.

A scenario's real hop (nginx as the ingress, haproxy as a load balancer in IP mode) runs
as in ``lab run`` and shows as on a cluster (``serve_hops.py``, ``hop_objects.py``).

The lab's exporters answer on plain-HTTP ``/metrics`` endpoints (``metrics.py``), announced
in ``ServeInfo.metrics``: kube-state-metrics from the objects the API serves, and per node
the ingress request counters (the node's proxy on the userspace datapath; the load
generator standing in for an ingress on the kernel one), kube-proxy's programming latency
and, on the kernel datapath, the node's conntrack table.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import math
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from svcdoctor.lab import hop_objects, objects
from svcdoctor.lab import metrics as lab_metrics
from svcdoctor.lab.apiserver import (
    EVICTION,
    Admission,
    ApiServer,
    Fault,
    ObjectStore,
    StatusError,
    Verb,
    invalid,
)
from svcdoctor.lab.cleanup import claim, lock_dir
from svcdoctor.lab.cluster import Cluster, rolling_update
from svcdoctor.lab.datapath import Datapath, LabError, UserspaceDatapath
from svcdoctor.lab.evictions import NodeDrains
from svcdoctor.lab.front import FrontedDatapath
from svcdoctor.lab.jobs import JobRunner, Placement, handler_for, jobs_directory
from svcdoctor.lab.kernel import SUBNET, read_conntrack
from svcdoctor.lab.load import Load
from svcdoctor.lab.logs import nginx_log, request_log
from svcdoctor.lab.names import NAMESPACE
from svcdoctor.lab.run import (
    EvictableLoad,
    ground_truth,
    hop_cluster,
    make_datapath,
    request_row,
    start_pods,
    uninterruptible,
)
from svcdoctor.lab.scenarios import Scenario, break_nodes
from svcdoctor.lab.serve_hops import ServedHop, also
from svcdoctor.report.lab import served_truth_to_dict

MAX_SERVE_SECONDS = 3600.0  # a serve ends after an hour, whatever it was told
LINGER = 1.0  # seconds an exited pod stays in the store (terminated) before it is removed
TICK = 0.5  # seconds between syncs without a change (exited pods leaving, conntrack)
KEEP_RECORDS = 50_000  # request records kept for the logs (older ones rotate away)
STOP_GRACE = 1.0  # seconds the requests in flight get to end when the serve stops
CONTEXT = "svcdoctor-lab"
# API groups of controllers the lab does not run: no CRDs, so a real API server answers
# 404 for them and leaves them out of discovery (Gateway API, AWS Load Balancer Controller)
UNSERVED = ("gateway.networking.k8s.io", "elbv2.k8s.aws")

Key = tuple[str, str, str | None, str]


@dataclass(frozen=True, slots=True)
class ServeInfo:
    """What a client needs to reach the lab's API (the token is in the kubeconfig), and
    the lab's ``/metrics`` endpoints (``metrics.scrape_config`` makes a Prometheus config)."""

    url: str
    kubeconfig: Path
    context: str
    namespace: str
    datapath: str
    metrics: tuple[lab_metrics.MetricsTarget, ...] = ()


@dataclass(frozen=True, slots=True)
class ServeResult:
    datapath: str
    requests: int  # those still kept (see KEEP_RECORDS)
    failed: int
    rolled_out: bool
    seconds: float
    broken_nodes: tuple[str, ...] = ()  # ground truth of the broken-node scenario


def key(obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return (obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])


class Mirror:
    """Keeps ``store`` equal to ``view()``'s objects: puts what changed, deletes what went."""

    def __init__(self, store: ObjectStore, view: Callable[[], objects.LabView]) -> None:
        self.store = store
        self.view = view
        self.current: dict[Key, dict[str, Any]] = {}
        self._scheduled = False

    def changed(self) -> None:
        """The lab changed: sync once the current step of the event loop is done (the
        changes of one step land together)."""
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.sync)

    def sync(self) -> None:
        self._scheduled = False
        wanted = {key(o): o for o in hop_objects.all_objects(self.view())}
        for k, obj in wanted.items():
            if self.current.get(k) != obj:
                self.store.put(copy.deepcopy(obj))
        for k in self.current.keys() - wanted.keys():
            self.store.delete(*k)
        self.current = wanted


@dataclass(eq=False)
class LabState:
    """The running lab, read into ``LabView`` snapshots; serves the pods' logs."""

    run: str
    scenario: Scenario
    cluster: Cluster
    load: Load
    dp: Datapath
    started: float = field(default_factory=time.time)
    rollout_at: float | None = None
    restarted_at: str | None = None  # a client's restart patch's annotation
    earlier: tuple[tuple[float, str], ...] = ()  # the rollouts before the last
    running: bool = False  # the datapath is up (its proxies have ports)
    load_on: bool = True  # the lab's own clients send requests
    hop: ServedHop | None = None  # a real nginx or haproxy in front (lab/serve_hops.py)

    def node_ips(self) -> tuple[str, ...]:
        if self.dp.name == "kernel":
            return tuple(f"{SUBNET}.255.{10 + n}" for n in range(self.scenario.nodes))
        return ("127.0.0.1",) * self.scenario.nodes

    def view(self) -> objects.LabView:
        now = time.time()
        pods = []
        for i, (pod, info) in enumerate(
            zip(self.cluster.pods.values(), self.cluster.snapshot(), strict=True)
        ):
            finished = pod.exit.finished_at if pod.exit else None
            if finished is not None and now > finished + LINGER:
                continue  # the kubelet reported the exit and the API server removed the pod
            started = pod.monitor is not None and pod.net is not None
            port = pod.net.port if started and pod.net else 0
            node = f"node-{i % self.scenario.nodes if pod.node is None else pod.node}"
            pods.append(objects.ApiPod(info, port, pod.ready, node))
        changes = self.cluster.endpoints
        # the userspace datapath's node proxies stand in for an ingress (none with a real hop)
        userspace = self.running and isinstance(self.dp, UserspaceDatapath)
        return objects.LabView(
            run=self.run,
            scenario=self.scenario,
            datapath=self.dp.name,
            started=self.started,
            node_ips=self.node_ips(),
            cordoned=tuple(sorted(self.cluster.cordoned)),
            pods=tuple(pods),
            events=tuple(self.cluster.events),
            rollout_at=self.rollout_at,
            restarted_at=self.restarted_at,
            earlier=self.earlier,
            last_change=changes[-1].ts if changes else None,
            clients=self.scenario.load.clients if self.running and self.load_on else 0,
            proxy_ports=tuple(self.dp.service_address(n)[1] for n in range(self.scenario.nodes))
            if userspace
            else (),
            hop=self.hop.view() if self.hop is not None and self.running else None,
        )

    @staticmethod
    def log_source(log: Callable[[int], str], index: int) -> Callable[[str | None], str]:
        """A ``set_logs`` source: the log of client or node ``index`` (one container)."""
        return lambda container: log(index)

    # the logs are read in the API server's threads: they work on copies (list() and
    # dict() of a list or dict are atomic) of what the event loop changes

    def rows(self, keep: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        return [request_row(r, self.dp) for r in list(self.load.records) if keep(r)]

    def client_log(self, client: int) -> str:
        """A load pod's log: its requests as canonical JSON Lines rows."""
        name = hop_objects.load_pod_name(client)
        rows = self.rows(lambda r: r["client"] == f"client-{client}")
        return request_log([r | {"client": name} for r in rows], timestamps=True)

    def proxy_log(self, node: int) -> str:
        """A node proxy's log, as its ingress-nginx controller pod would write it."""
        addresses = {
            name: f"{pod.net.ip}:{pod.net.port}"
            for name, pod in dict(self.cluster.pods).items()
            if pod.net is not None
        }
        rows = self.rows(lambda r: r["node"] == node)
        return nginx_log(rows, addresses, timestamps=True)


class Rollout:
    """The Deployment's rollouts, one at a time: at ``rollout_at`` or on a client's restart
    patch (a restart while one is rolling: 409 Conflict)."""

    def __init__(self, state: LabState, mirror: Mirror) -> None:
        self.state = state
        self.mirror = mirror
        self.pods: list[str] | None = None  # the current ReplicaSet's pods, once Ready
        self.running: list[asyncio.Task[list[str]]] = []  # rollouts, and those still draining
        self.updated = asyncio.Event()  # the last rolling update returned
        self.updated.set()
        self.count = 0

    def rolling(self) -> bool:
        """A rollout is under way, as the Deployment's status shows it: not every active pod
        is a Ready pod of the newest ReplicaSet (its update may still pause after that)."""
        if self.updated.is_set():
            return False
        newest = objects.replica_set_name(self.count - 1)
        active = [p for p in self.state.cluster.pods.values() if p.deleted_at is None]
        return not (
            len(active) == self.state.scenario.replicas
            and all(p.name.startswith(f"{newest}-") and p.ready for p in active)
        )

    def start(self, restarted_at: str | None = None) -> None:
        """Roll now to the next ReplicaSet (``restarted_at``: the annotation a client set)."""
        assert self.pods is not None
        assert not self.rolling()
        state = self.state
        if state.rollout_at is not None:
            last = state.restarted_at or objects.stamp(state.rollout_at)
            state.earlier = (*state.earlier, (state.rollout_at, last))
        state.rollout_at = time.time()
        state.restarted_at = restarted_at
        replica_set = objects.replica_set_name(self.count)
        self.count += 1
        self.mirror.changed()
        previous, self.updated = self.updated, asyncio.Event()
        self.running.append(asyncio.create_task(self._roll(previous, self.updated, replica_set)))

    async def _roll(
        self, previous: asyncio.Event, updated: asyncio.Event, replica_set: str
    ) -> list[str]:
        """The scenario's rolling update (``cluster.rolling_update``, as ``run.roll`` does
        it) to ``replica_set`` once the previous one returned, until every deleted pod
        exited and every node applied it."""
        scenario, cluster = self.state.scenario, self.state.cluster
        await previous.wait()
        assert self.pods is not None
        try:
            new = await rolling_update(
                cluster,
                self.pods,
                lambda i: f"{replica_set}-{i:02d}",
                scenario.pod,
                scenario.max_surge,
                scenario.max_unavailable,
                pause=scenario.pause,
            )
            self.pods = new
        finally:
            updated.set()
        await cluster.drain()
        await cluster.settled()
        return new

    def replace(self, old: str, new: str) -> None:
        """An evicted pod's replacement takes its place in the current ReplicaSet."""
        self.pods = [new if p == old else p for p in self.pods or []]

    def check(self) -> None:
        """Raise what made a rollout fail (the serve ends with it)."""
        for task in self.running:
            if task.done() and not task.cancelled():
                task.result()

    def tasks(self) -> list[asyncio.Task[list[str]]]:
        return list(self.running)

    def admit(self, adm: Admission) -> dict[str, Any] | None:
        """A PATCH of the Deployment: a restart rolls; nothing else may change."""
        if adm.verb != Verb.PATCH:
            return None
        if adm.name != objects.DEPLOYMENT or adm.old is None:
            raise StatusError(
                404, "NotFound", f'deployments.apps "{adm.name}" not found', {"name": adm.name}
            )
        restarted = _annotations(adm.obj).get(objects.RESTARTED_AT)
        if restarted is None or restarted == _annotations(adm.old).get(objects.RESTARTED_AT):
            if _without_restart(adm.obj) != _without_restart(adm.old):
                raise invalid(
                    adm.obj,
                    "spec",
                    "…",
                    "the lab's Deployment changes only by a restart (kubectl rollout restart)",
                )
            return None
        if self.pods is None or self.rolling():
            why = "its pods are still starting" if self.pods is None else "it is rolling out now"
            raise StatusError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on deployments.apps "{adm.name}": {why}',
            )
        if not adm.dry_run:
            self.start(str(restarted))
        return None


def _annotations(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("spec", {}).get("template", {}).get("metadata") or {}
    return dict(meta.get("annotations") or {})


def _without_restart(obj: dict[str, Any]) -> dict[str, Any]:
    """The Deployment's spec without the restart annotation (what else a patch changed)."""
    spec = copy.deepcopy(obj.get("spec") or {})
    meta = spec.get("template", {}).get("metadata") or {}
    (meta.get("annotations") or {}).pop(objects.RESTARTED_AT, None)
    if "annotations" in meta and not meta["annotations"]:
        del meta["annotations"]
    return spec


async def _idle(stop: asyncio.Event) -> None:
    """In place of the load (``load_on=False``): wait for the end."""
    await stop.wait()


async def _ticker(mirror: Mirror, dp: Datapath) -> None:
    """Sync on a tick; on the kernel datapath, also read which pod conntrack gave each
    connection (the backend of a failed request)."""
    read_conntrack = getattr(dp, "read_conntrack", None)
    ticks = 0
    while True:
        await asyncio.sleep(TICK)
        ticks += 1
        if read_conntrack is not None and ticks % 4 == 0:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(read_conntrack)
        mirror.changed()


class Exporters:
    """The lab's ``/metrics`` endpoints: what each one renders from the running lab."""

    def __init__(
        self,
        state: LabState,
        mirror: Mirror,
        flavours: tuple[lab_metrics.RequestFlavour, ...],
    ) -> None:
        self.state = state
        self.mirror = mirror
        self.flavours = flavours
        self.server = lab_metrics.MetricsServer()
        nodes = state.scenario.nodes
        dp = state.dp
        if isinstance(dp, UserspaceDatapath):
            self.requests = dp.requests  # the proxies count what they pass
        else:  # no userspace proxy: the load generator stands in for the ingress
            self.requests = [lab_metrics.RequestCounts() for _ in range(nodes)]
            counts = self.requests
            state.load.on_record = lambda r: counts[r["node"]].add(lab_metrics.record_status(r))

    async def start(self) -> tuple[lab_metrics.MetricsTarget, ...]:
        await self.server.serve("kube-state-metrics", self.kube_state)
        for node in range(self.state.scenario.nodes):
            await self.server.serve("node", self._node(node), f"node-{node}")
        return tuple(self.server.targets)

    async def kube_state(self) -> list[lab_metrics.Family]:
        return lab_metrics.kube_state(list(self.mirror.current.values()))

    def _node(self, node: int) -> lab_metrics.Render:
        async def render() -> list[lab_metrics.Family]:
            state = self.state
            controller = hop_objects.ingress_pod_name(state.run, node)
            out = lab_metrics.request_families({controller: self.requests[node]}, self.flavours)
            cluster = state.cluster
            durations = lab_metrics.programming_durations(
                list(cluster.endpoints), list(cluster.synced), state.scenario.nodes
            )
            out.append(lab_metrics.programming_family("", durations[node]))
            netns = state.dp.node_netns(node)
            if netns is not None:  # a node of its own: its conntrack table
                try:
                    ct = await asyncio.to_thread(read_conntrack, netns)
                except OSError:
                    ct = None  # unreadable here: node-exporter would have no series either
                if ct is not None:
                    out += lab_metrics.conntrack_families(ct)
            return out

        return render


async def serve(
    scenario: Scenario,
    datapath: str,
    kubeconfig: Path,
    duration: float | None = None,
    rollout_at: float | None = None,
    seed: int = 1,
    announce: Callable[[ServeInfo], None] | None = None,
    truth: Path | None = None,
    *,
    load_on: bool = True,
    request_metrics: tuple[lab_metrics.RequestFlavour, ...] = (lab_metrics.RequestFlavour.NGINX,),
    api_faults: Sequence[Fault] = (),
) -> ServeResult:
    """Run the lab cluster and its API until ``duration`` seconds passed (at most
    ``MAX_SERVE_SECONDS``) or the task is cancelled; roll the Deployment ``rollout_at``
    seconds after the pods are ready, or when a client restarts it. The Jobs and pods
    clients create run as processes (``jobs.py``); ``load_on=False``: no lab clients.
    Everything started is removed, even on errors; the ground truth (each deleted pod's
    timeline and race window, the bad pods) is written to ``truth`` at the end, Ctrl-C
    included, to check what scan, collect and diagnose say. ``request_metrics``: the
    request counters the nodes' ``/metrics`` show (ingress-nginx's; Istio's adds the pod).
    ``api_faults``: how the API server misbehaves (``apiserver.faults``; the rest of the
    lab is unaffected)."""
    limit = min(duration or MAX_SERVE_SECONDS, MAX_SERVE_SECONDS)
    prefix = f"svcd{secrets.token_hex(3)}"
    dp = make_datapath(datapath, prefix, seed, scenario)  # behind nginx or haproxy, if any
    break_nodes(scenario, dp)
    cluster = hop_cluster(dp, scenario, seed, prefix)
    hop = ServedHop.of(dp)
    # the traffic lasts the serve; only the last KEEP_RECORDS records are kept
    spec = replace(scenario.load, max_requests=math.ceil(scenario.load.rate * (limit + 60)))
    load = EvictableLoad(spec, dp, scenario.nodes, seed, keep=KEEP_RECORDS)
    state = LabState(prefix, scenario, cluster, load, dp)
    state.load_on = load_on
    state.hop = hop
    end = state.started + limit
    store = ObjectStore()
    # with the load balancer, its controller's TargetGroupBindings are served
    unserved = tuple(g for g in UNSERVED if scenario.lb is None or g != "elbv2.k8s.aws")
    server = ApiServer(store, secrets.token_urlsafe(32), unserved=unserved, faults=api_faults)
    mirror = Mirror(store, state.view)
    cluster.on_change = also(cluster.on_change, mirror.changed)
    # the Jobs' ClusterIP is kube-proxy's (the userspace node proxies), not the hop's
    nodes_dp = dp.inner if isinstance(dp, FrontedDatapath) else dp
    placement = Placement(
        scenario.nodes,
        dp.node_netns,
        lambda node: state.node_ips()[node],
        nodes_dp.service_address,
        lambda node: node in cluster.cordoned,
    )
    jobs = JobRunner(store, placement, jobs_directory(lock_dir(), prefix), NAMESPACE)
    rollout = Rollout(state, mirror)
    for resource in ("pods", "jobs"):
        server.admit(resource, handler_for(jobs, resource))
    server.admit("deployments", rollout.admit)
    drains = NodeDrains(
        scenario, cluster, lambda: rollout.pods, rollout.rolling, rollout.replace, load
    )
    server.admit("nodes", drains.admit_node)
    server.admit(EVICTION, drains.admit_eviction)
    stop = asyncio.Event()
    background: list[asyncio.Task[None]] = []
    exporters = Exporters(state, mirror, request_metrics)
    with claim(prefix):
        try:
            await server.start()
            server.write_kubeconfig(kubeconfig, context=CONTEXT, namespace=NAMESPACE)
            mirror.sync()
            old = await start_pods(scenario, cluster, dp, lambda what: None)
            state.running = True
            ready = time.time()
            for client in range(scenario.load.clients if load_on else 0):
                store.set_logs(
                    NAMESPACE,
                    hop_objects.load_pod_name(client),
                    state.log_source(state.client_log, client),
                    timestamped=True,
                )
            if isinstance(dp, UserspaceDatapath):
                for node in range(scenario.nodes):
                    store.set_logs(
                        objects.INGRESS_NAMESPACE,
                        hop_objects.ingress_pod_name(prefix, node),
                        state.log_source(state.proxy_log, node),
                        timestamped=True,
                    )
            if hop is not None:  # its state before the first objects are served
                if (log := hop.nginx_log()) is not None:
                    name = hop_objects.ingress_pod_name(prefix, 0)  # the controller's pod
                    store.set_logs(objects.INGRESS_NAMESPACE, name, log.text, timestamped=True)
                await hop.refresh()
            mirror.sync()
            rollout.pods = old
            background.append(asyncio.create_task(load.run(stop, end) if load_on else _idle(stop)))
            background.append(asyncio.create_task(_ticker(mirror, dp)))
            if hop is not None:
                background.append(asyncio.create_task(hop.follow(mirror.changed)))
            targets = await exporters.start()
            server.arm_faults()  # loss-after counts from the announcement
            if announce:
                announce(ServeInfo(server.url, kubeconfig, CONTEXT, NAMESPACE, dp.name, targets))
            deadline = asyncio.get_running_loop().time() + end - time.time()
            try:
                async with asyncio.timeout_at(deadline) as bound:
                    if rollout_at is not None:
                        await asyncio.sleep(max(0.0, ready + rollout_at - time.time()))
                        if not rollout.rolling():  # else a client restarted it just now
                            rollout.start()
                    while time.time() < end:  # a rollout that fails ends the serve
                        rollout.check()
                        if hop is not None:
                            hop.check()
                        drains.check()
                        await asyncio.sleep(min(TICK, max(0.0, end - time.time())))
            except TimeoutError:
                if not bound.expired():
                    raise  # not the end of the serve: a real error
        finally:
            with uninterruptible():  # a second Ctrl-C must not leave namespaces behind
                stop.set()  # the clients stop; requests in flight get a moment to end
                if background:
                    await asyncio.wait(background[:1], timeout=STOP_GRACE)
                tasks: list[asyncio.Task[Any]] = [*background, *rollout.tasks(), *drains.tasks]
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                await exporters.server.close()
                if hop is not None:  # its working directory is in the jobs' one
                    await hop.stop(scenario, cluster, load)
                await jobs.close()
                await cluster.stop_all()
                await dp.close()
                await server.close()
                if truth is not None and state.running:
                    lab_truth = ground_truth(scenario, cluster, load, dp.name)
                    hop_truth: dict[str, Any] = {}
                    if hop is not None:  # the hop's leg and its own facts
                        lab_truth, hop_truth = hop.truth(lab_truth)
                    found = served_truth_to_dict(lab_truth) | hop_truth
                    truth.write_text(json.dumps(found, indent=2))
    if dp.errors:
        raise LabError(f"the {dp.name} datapath failed: {dp.errors[0]}")
    if jobs.errors:
        raise LabError(f"the lab's Jobs failed: {jobs.errors[0]}")
    if exporters.server.errors:
        raise LabError(f"the lab's /metrics failed: {exporters.server.errors[0]}")
    failed = sum(1 for r in load.records if r["outcome"] != "ok")
    return ServeResult(
        dp.name,
        len(load.records),
        failed,
        state.rollout_at is not None,
        time.time() - state.started,
        scenario.broken_nodes,
    )
