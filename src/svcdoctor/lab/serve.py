"""``svcdoctor lab serve``: a lab cluster (the pods, datapath, load and rollout of ``lab
run``) served as a Kubernetes API, its objects kept equal to the lab's real state.

The lab tells a ``Mirror`` after every event and endpoint change (``Cluster.on_change``)
and on a short tick; the mirror rebuilds the objects (``objects.py``, pure) and puts in the
API server's store only those that changed, so watchers see each real change once.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from svcdoctor.lab import objects
from svcdoctor.lab.cleanup import claim
from svcdoctor.lab.cluster import Cluster
from svcdoctor.lab.datapath import Datapath, LabError
from svcdoctor.lab.load import Load
from svcdoctor.lab.run import (
    ground_truth,
    make_datapath,
    request_row,
    roll,
    start_pods,
    uninterruptible,
)
from svcdoctor.lab.scenarios import Scenario

if TYPE_CHECKING:
    from svcdoctor.lab.apiserver import ObjectStore

MAX_SERVE_SECONDS = 3600.0  # a serve ends after an hour, whatever it was told
LINGER = 1.0  # seconds an exited pod stays in the store (terminated) before it is removed
TICK = 0.5  # seconds between syncs without a change (exited pods leaving, conntrack)
KEEP_RECORDS = 50_000  # request records kept for the logs (older ones rotate away)
STOP_GRACE = 1.0  # seconds the requests in flight get to end when the serve stops
CONTEXT = "svcdoctor-lab"

Key = tuple[str, str, str | None, str]


@dataclass(frozen=True, slots=True)
class ServeInfo:
    """What a client needs to reach the lab's API (the token is in the kubeconfig)."""

    url: str
    kubeconfig: Path
    context: str
    namespace: str
    datapath: str


@dataclass(frozen=True, slots=True)
class ServeResult:
    datapath: str
    requests: int  # those still kept (see KEEP_RECORDS)
    failed: int
    rolled_out: bool
    seconds: float


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
        wanted = {key(o): o for o in objects.all_objects(self.view())}
        for k, obj in wanted.items():
            if self.current.get(k) != obj:
                self.store.put(copy.deepcopy(obj))
        for k in self.current.keys() - wanted.keys():
            self.store.delete(*k)
        self.current = wanted


class LabState:
    """The running lab, read into ``LabView`` snapshots; serves the pods' logs."""

    def __init__(
        self, run: str, scenario: Scenario, cluster: Cluster, load: Load, dp: Datapath
    ) -> None:
        self.run = run
        self.scenario = scenario
        self.cluster = cluster
        self.load = load
        self.dp = dp
        self.started = time.time()
        self.rollout_at: float | None = None
        self.running = False  # the datapath is up (its proxies have ports)

    def node_ips(self) -> tuple[str, ...]:
        if self.dp.name == "kernel":
            from svcdoctor.lab.kernel import SUBNET

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
            node = f"node-{i % self.scenario.nodes}"  # nominal: the lab does not place pods
            pods.append(objects.ApiPod(info, port, pod.ready, node))
        changes = self.cluster.endpoints
        userspace = self.running and self.dp.name == "userspace"
        return objects.LabView(
            run=self.run,
            scenario=self.scenario,
            datapath=self.dp.name,
            started=self.started,
            node_ips=self.node_ips(),
            pods=tuple(pods),
            events=tuple(self.cluster.events),
            rollout_at=self.rollout_at,
            last_change=changes[-1].ts if changes else None,
            clients=self.scenario.load.clients if self.running else 0,
            proxy_ports=tuple(self.dp.service_address(n)[1] for n in range(self.scenario.nodes))
            if userspace
            else (),
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
        name = objects.load_pod_name(client)
        rows = self.rows(lambda r: r["client"] == f"client-{client}")
        return objects.request_log([r | {"client": name} for r in rows], timestamps=True)

    def proxy_log(self, node: int) -> str:
        """A node proxy's log, as its ingress-nginx controller pod would write it."""
        addresses = {
            name: f"{pod.net.ip}:{pod.net.port}"
            for name, pod in dict(self.cluster.pods).items()
            if pod.net is not None
        }
        rows = self.rows(lambda r: r["node"] == node)
        return objects.nginx_log(rows, addresses, timestamps=True)


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


async def serve(
    scenario: Scenario,
    datapath: str,
    kubeconfig: Path,
    duration: float | None = None,
    rollout_at: float | None = None,
    seed: int = 1,
    announce: Callable[[ServeInfo], None] | None = None,
    truth: Path | None = None,
) -> ServeResult:
    """Run the lab cluster and its API until ``duration`` seconds passed (at most
    ``MAX_SERVE_SECONDS``) or the task is cancelled; roll the Deployment ``rollout_at``
    seconds after the pods are ready. Everything started is removed, even on errors; the
    ground truth (each deleted pod's timeline and race window, the bad pods) is written to
    ``truth`` at the end, Ctrl-C included, to check what scan, collect and diagnose say."""
    from svcdoctor.lab.apiserver import ApiServer, ObjectStore

    limit = min(duration or MAX_SERVE_SECONDS, MAX_SERVE_SECONDS)
    prefix = f"svcd{secrets.token_hex(3)}"
    dp = make_datapath(datapath, prefix, seed)
    cluster = Cluster(dp, scenario.nodes, scenario.propagation, seed, prefix)
    # the traffic lasts the serve; only the last KEEP_RECORDS records are kept
    spec = replace(scenario.load, max_requests=math.ceil(scenario.load.rate * (limit + 60)))
    load = Load(spec, dp, scenario.nodes, seed, keep=KEEP_RECORDS)
    state = LabState(prefix, scenario, cluster, load, dp)
    end = state.started + limit
    store = ObjectStore()
    server = ApiServer(store, secrets.token_urlsafe(32))
    mirror = Mirror(store, state.view)
    cluster.on_change = mirror.changed
    stop = asyncio.Event()
    background: list[asyncio.Task[None]] = []
    with claim(prefix):
        try:
            await server.start()
            server.write_kubeconfig(kubeconfig, context=CONTEXT, namespace=objects.NAMESPACE)
            mirror.sync()
            old = await start_pods(scenario, cluster, dp, lambda what: None)
            state.running = True
            ready = time.time()
            for client in range(scenario.load.clients):
                store.set_logs(
                    objects.NAMESPACE,
                    objects.load_pod_name(client),
                    state.log_source(state.client_log, client),
                    timestamped=True,
                )
            if dp.name == "userspace":
                for node in range(scenario.nodes):
                    store.set_logs(
                        objects.INGRESS_NAMESPACE,
                        objects.ingress_pod_name(prefix, node),
                        state.log_source(state.proxy_log, node),
                        timestamped=True,
                    )
            mirror.sync()
            background.append(asyncio.create_task(load.run(stop, end)))
            background.append(asyncio.create_task(_ticker(mirror, dp)))
            if announce:
                announce(ServeInfo(server.url, kubeconfig, CONTEXT, objects.NAMESPACE, dp.name))
            deadline = asyncio.get_running_loop().time() + end - time.time()
            try:
                async with asyncio.timeout_at(deadline) as bound:
                    if rollout_at is not None:
                        await asyncio.sleep(max(0.0, ready + rollout_at - time.time()))
                        state.rollout_at = time.time()
                        mirror.changed()
                        await roll(scenario, cluster, old)
                    await asyncio.sleep(max(0.0, end - time.time()))
            except TimeoutError:
                if not bound.expired():
                    raise  # not the end of the serve: a real error
        finally:
            with uninterruptible():  # a second Ctrl-C must not leave namespaces behind
                stop.set()  # the clients stop; requests in flight get a moment to end
                if background:
                    await asyncio.wait(background[:1], timeout=STOP_GRACE)
                for task in background:
                    task.cancel()
                await asyncio.gather(*background, return_exceptions=True)
                await cluster.stop_all()
                await dp.close()
                await server.close()
                if truth is not None and state.running:
                    from svcdoctor.report.lab import served_truth_to_dict

                    found = served_truth_to_dict(ground_truth(scenario, cluster, load, dp.name))
                    truth.write_text(json.dumps(found, indent=2))
    if dp.errors:
        raise LabError(f"the {dp.name} datapath failed: {dp.errors[0]}")
    failed = sum(1 for r in load.records if r["outcome"] != "ok")
    return ServeResult(
        dp.name,
        len(load.records),
        failed,
        state.rollout_at is not None,
        time.time() - state.started,
    )
