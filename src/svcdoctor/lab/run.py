"""One lab run: build the cluster, run the scenario under load, write the evidence bundle."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import shutil
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from svcdoctor.evidence.write import write_bundle
from svcdoctor.lab.cleanup import claim, lock_dir
from svcdoctor.lab.cluster import Cluster, Drain, drain_node, rolling_update, wait_ready
from svcdoctor.lab.datapath import Datapath, LabError, PodNet, UserspaceDatapath, get_status
from svcdoctor.lab.haproxy import BalancerDatapath, BalancerFacts, GatedCluster, balancer_facts
from svcdoctor.lab.kernel import KernelDatapath
from svcdoctor.lab.load import REQUEST_TIMEOUT, Load, _Conn, outcome_of
from svcdoctor.lab.nginx import IngressDatapath, IngressFacts, ingress_facts
from svcdoctor.lab.objects import manifests
from svcdoctor.lab.scenarios import MAX_RUN_SECONDS, NEW, OLD, Scenario, break_nodes
from svcdoctor.model import Cause, Outcome
from svcdoctor.model.scenario import Event, FaultMode
from svcdoctor.model.truth import DirectProbe, LabTruth, PodTimeline
from svcdoctor.report.lab import outcomes_to_dict, probe_to_dict, truth_to_dict

Progress = Callable[[str, int, int], None]
"""Told ``(what is happening, steps done, steps in all)`` as a run goes on."""


@dataclass(frozen=True, slots=True)
class RunResult:
    scenario: Scenario
    datapath: str
    bundle: Path
    requests: int
    failed: int
    by_outcome: Mapping[Outcome, int]
    truth: LabTruth
    probe: tuple[DirectProbe, ...]  # the running pods, each sent requests directly


INGRESS_DIR = "ingress-nginx"  # in the bundle: the ingress controller's logs
LB_DIR = "load-balancer"  # in the bundle: haproxy's log
HIDDEN_DIR = ".lab"  # in the bundle, unread by diagnose: the clients' own log, nginx's combined


def make_datapath(kind: str, prefix: str, seed: int, scenario: Scenario | None = None) -> Datapath:
    """The datapath; with the scenario's ingress, behind a real nginx that works in the
    run's jobs directory (``cleanup.JOBS_DIR``: ``lab clean`` finds it there)."""
    dp: Datapath = KernelDatapath(prefix, seed) if kind == "kernel" else UserspaceDatapath(seed)
    if scenario is not None and scenario.ingress is not None:
        folder = lock_dir() / f"{prefix}-jobs" / "ingress-nginx"
        return IngressDatapath(dp, scenario.ingress, folder)
    if scenario is not None and scenario.lb is not None:  # a load balancer (lab/haproxy.py)
        folder = lock_dir() / f"{prefix}-jobs" / "haproxy"
        return BalancerDatapath(dp, scenario.lb, scenario.propagation.lb, folder, seed)
    return dp


def steps(scenario: Scenario) -> int:
    """How many progress steps a run reports: each pod started, the baseline, each
    deletion (or the steady load), the exits and the tail, the direct probe."""
    deletions = len(scenario.drained) if scenario.drains else scenario.replicas
    return scenario.replicas + 1 + (deletions + 2 if scenario.rollout else 1) + 1


@dataclass
class EvictableLoad(Load):
    """The load, whose clients on a drained node are evicted with its pods: from the
    drain's start they call from the other nodes, in turn (as simulate's
    ``engine.client_nodes`` moves them; a real client's replacement would first start)."""

    moved: dict[int, int] = field(default_factory=dict)  # client → the node it calls from

    def evict_clients(self, node: int, others: list[int]) -> None:
        for client in range(node, self.spec.clients, self.nodes):
            self.moved[client] = others[client % len(others)]

    async def _attempts(self, index: int, node: int, conn: _Conn | None) -> _Conn | None:
        return await super()._attempts(index, self.moved.get(index, node), conn)


async def run(
    scenario: Scenario,
    datapath: str,
    out: Path,
    seed: int = 1,
    progress: Progress | None = None,
) -> RunResult:
    """Run the scenario; everything it started is stopped and removed, even on errors."""
    if scenario.rollout and scenario.event is Event.SCALE_DOWN:
        raise LabError("the lab runs a rollout or a node drain: simulate models a scale-down")
    prefix = f"svcd{secrets.token_hex(3)}"
    dp = make_datapath(datapath, prefix, seed, scenario)
    break_nodes(scenario, dp)
    cluster = hop_cluster(dp, scenario, seed, prefix)
    load = EvictableLoad(scenario.load, dp, scenario.nodes, seed)
    started = time.time()
    with claim(prefix):
        try:
            async with asyncio.timeout(MAX_RUN_SECONDS) as bound:
                probe = await _drive(scenario, cluster, load, dp, started, progress or _quiet)
        except TimeoutError:
            if not bound.expired():
                raise
            raise LabError(
                f"the run took longer than {MAX_RUN_SECONDS:g} s and was stopped"
            ) from None
        finally:
            with uninterruptible():  # a second Ctrl-C must not leave namespaces behind
                try:
                    await cluster.stop_all()
                finally:  # the proxies and namespaces go even if a pod would not stop
                    await dp.close()
                    if isinstance(dp, IngressDatapath):
                        _keep_ingress_logs(dp, out)
                    if isinstance(dp, BalancerDatapath):
                        _keep_lb_logs(dp, out)
    if dp.errors:
        raise LabError(f"the {dp.name} datapath failed: {dp.errors[0]}")
    frame = _requests(load, dp)
    problems = invalid(scenario, cluster, frame.height)
    facts = None
    if isinstance(dp, IngressDatapath) and dp.nginx is not None:
        failed = int((frame.get_column("outcome") != "ok").sum())
        facts = ingress_facts(dp.spec, out / INGRESS_DIR, dp.nginx.reloads, failed)
        problems += facts.problems
    lb = None
    if isinstance(dp, BalancerDatapath) and dp.haproxy is not None:
        lb = _lb_facts(scenario, cluster, load, dp, frame)
        problems += lb.problems
    if problems:
        raise RunInvalid(
            f"run invalid: {'; '.join(problems)} (the run did not happen as planned: no verdict)"
        )
    result = RunResult(
        scenario,
        dp.name,
        out,
        frame.height,
        int((frame.get_column("outcome") != "ok").sum()),
        {
            Outcome(r["outcome"]): r["len"]
            for r in frame.group_by("outcome").len().iter_rows(named=True)
        },
        lb_truth(ground_truth(scenario, cluster, load, dp.name), lb),
        probe,
    )
    write_lab_bundle(result, cluster, frame, out, time.time() - started, facts, lb)
    return result


class RunInvalid(LabError):
    """The run did not happen as planned (its ground truth contradicts the scenario): its
    evidence proves nothing, so it gets no verdict (exit 1)."""


def invalid(scenario: Scenario, cluster: Cluster, requests: int) -> list[str]:
    """What in the run's own ground truth says it did not happen as planned: no requests
    (or far fewer than planned), and for a rollout, pods not deleted, deleted pods that got
    no SIGTERM or never exited, nodes that never stopped routing to them, no endpoint
    change. Empty when the run is valid."""
    problems = []
    seconds = scenario.baseline + (scenario.tail if scenario.rollout else scenario.steady)
    planned = min(scenario.load.rate * seconds, scenario.load.max_requests)
    if requests == 0:
        problems.append("no request was sent")
    elif requests < 0.05 * planned:
        problems.append(f"{requests} requests were sent of about {planned:.0f} planned")
    if not scenario.rollout:
        return problems
    deleted = [p for p in cluster.pods.values() if p.deleted_at is not None]
    planned = len(scenario.drained) if scenario.drains else scenario.replicas
    if len(deleted) < planned:
        problems.append(f"the {scenario.event} deleted {len(deleted)} of {planned} pods")
    unsignalled = sorted(p.name for p in deleted if p.sigterm_at is None)
    if unsignalled:
        problems.append(f"no SIGTERM reached {_some(unsignalled)}")
    running = sorted(p.name for p in deleted if p.exit is None)
    if running:
        problems.append(f"{_some(running)} never exited")
    # a node whose kube-proxy stopped (a drained node) keeps its frozen rules
    proxies = set(range(scenario.nodes)) - set(cluster.proxy_stopped)
    routed = sorted(p.name for p in deleted if proxies - set(cluster.dropped_by(p)))
    if routed:
        problems.append(f"some nodes never stopped routing to {_some(routed)}")
    if deleted and not any(e.terminating for e in cluster.endpoints):
        problems.append("no endpoint became terminating")
    for drain in cluster.drains:
        problems += drain_problems(scenario, cluster, drain)
    return problems


def drain_problems(scenario: Scenario, cluster: Cluster, drain: Drain) -> list[str]:
    """What says a drain did not happen as kubectl drain does it: a pod of the node not
    evicted, the PodDisruptionBudget broken, a replacement on the cordoned node or not
    Ready, the node's kube-proxy still running."""
    problems = []
    left = sorted(p.name for p in cluster.pods.values() if p.node == drain.node and p.exit is None)
    if left:
        problems.append(f"the drain left {_some(left)} on node-{drain.node}")
    low = min_healthy(cluster, drain)
    floor = None if drain.budget is None else scenario.replicas - drain.budget
    if floor is not None and low < floor:
        problems.append(
            f"{low} pods were healthy during the drain: the PodDisruptionBudget "
            f"(maxUnavailable {drain.budget}) allows no fewer than {floor}"
        )
    placed = sorted(n for n in drain.replacements if cluster.pods[n].node == drain.node)
    if placed:
        problems.append(f"{_some(placed)} were scheduled on the cordoned node-{drain.node}")
    unready = sorted(n for n in drain.replacements if cluster.pods[n].ready_at is None)
    if unready:
        problems.append(f"the replacements {_some(unready)} never became Ready")
    if drain.node not in cluster.proxy_stopped:
        problems.append(f"node-{drain.node}'s kube-proxy never stopped")
    return problems


def min_healthy(cluster: Cluster, drain: Drain) -> int:
    """The fewest healthy pods (Ready, not terminating) from the drain's start to its end."""
    end = drain.finished_at or time.time()
    counts = [n for t, n in cluster.healthy if drain.cordoned_at <= t <= end]
    before = [n for t, n in cluster.healthy if t < drain.cordoned_at][-1:]
    return min(before + counts, default=0)


def _some(names: list[str]) -> str:
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _quiet(what: str, done: int, total: int) -> None:
    return None


@contextlib.contextmanager
def uninterruptible() -> Iterator[None]:
    """Ignore SIGINT and SIGTERM while the block runs (in the main thread): the cleanup of
    a run finishes even when Ctrl-C is pressed again."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in saved:
        signal.signal(sig, signal.SIG_IGN)
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


async def _drive(
    scenario: Scenario,
    cluster: Cluster,
    load: EvictableLoad,
    dp: Datapath,
    started: float,
    progress: Progress,
) -> tuple[DirectProbe, ...]:
    """Pods up, load on, the rollout (or steady load), load off, then the direct probe."""
    total, done = steps(scenario), 0

    def step(what: str) -> None:
        nonlocal done
        done += 1
        progress(what, done, total)

    progress(f"starting {scenario.replicas} pods ({dp.name} datapath)", 0, total)
    old = await start_pods(scenario, cluster, dp, step)
    stop = asyncio.Event()
    traffic = asyncio.create_task(load.run(stop, started + MAX_RUN_SECONDS))
    try:
        progress(f"baseline load, {scenario.load.rate:g} requests/s", done, total)
        await asyncio.sleep(scenario.baseline)
        step("baseline done")
        if scenario.drains:
            await drain(
                scenario,
                cluster,
                load,
                evicted=lambda name: step(f"drain of node-0: evicted {name}"),
            )
            step("every evicted pod exited, node-0's kube-proxy stopped")
            await asyncio.sleep(scenario.tail)
            step("tail done")
        elif scenario.rollout:
            await roll(
                scenario,
                cluster,
                old,
                deleted=lambda name: step(f"rolling update: deleted {name}"),
                draining=lambda: progress(
                    "waiting for the deleted pods to exit and every node to drop them", done, total
                ),
            )
            if isinstance(dp, BalancerDatapath):
                await dp.settled()  # and the load balancer stopped sending to them
            step("every deleted pod exited and left every node's rules")
            await asyncio.sleep(scenario.tail)
            step("tail done")
        else:
            progress(f"steady load for {scenario.steady:g} s", done, total)
            await asyncio.sleep(scenario.steady)
            step("steady load done")
    except BaseException:
        traffic.cancel()  # an error or Ctrl-C: no more requests while things are removed
        await asyncio.gather(traffic, return_exceptions=True)
        raise
    stop.set()
    await traffic
    progress("probing each pod directly", done, total)
    probe = await probe_pods(cluster, dp)
    step("done")
    return probe


async def start_pods(
    scenario: Scenario, cluster: Cluster, dp: Datapath, started: Callable[[str], None]
) -> list[str]:
    """The datapath and the first ReplicaSet's pods (the bad ones among them), Ready and
    in every node's rules; ``started`` is told each pod started. Returns their names."""
    await dp.start(scenario.nodes)
    old = [f"{OLD}-{i:02d}" for i in range(scenario.replicas)]
    bad = set(old[1 : 1 + scenario.bad])
    for name in old:
        fault = scenario.fault if name in bad else FaultMode.NONE
        # pod j on node j mod nodes, as simulate places them (and lab serve names them)
        await cluster.create(name, scenario.pod, fault, node=old.index(name) % scenario.nodes)
        started(f"started {name}")
    await wait_ready(cluster, old)
    await cluster.settled()
    if isinstance(dp, IngressDatapath):
        await dp.settled()
    if isinstance(dp, BalancerDatapath):
        await dp.settled()
        dp.begin()  # the first pods were the LB's targets before the run
    return old


async def roll(
    scenario: Scenario,
    cluster: Cluster,
    old: list[str],
    deleted: Callable[[str], None] | None = None,
    draining: Callable[[], None] | None = None,
) -> list[str]:
    """The scenario's rolling update from ``old`` to the second ReplicaSet, until every
    deleted pod exited and every node applied the last change; returns the new pods."""
    new = await rolling_update(
        cluster,
        old,
        lambda i: f"{NEW}-{i:02d}",
        scenario.pod,
        scenario.max_surge,
        scenario.max_unavailable,
        pause=scenario.pause,
        deleted=deleted,
    )
    if draining:
        draining()
    await cluster.drain()
    await cluster.settled()
    return new


DRAINED = 0  # the node a drain empties (simulate/rollout.py DRAINED)


async def drain(
    scenario: Scenario,
    cluster: Cluster,
    load: EvictableLoad,
    evicted: Callable[[str], None] | None = None,
) -> Drain:
    """The scenario's node drain: node 0's clients evicted with its pods (they call from
    the other nodes from now on), its pods evicted as the PodDisruptionBudget allows and
    replaced on the other nodes; returns when they exited and the other nodes caught up."""
    load.evict_clients(DRAINED, [n for n in range(scenario.nodes) if n != DRAINED])
    record = await drain_node(
        cluster,
        DRAINED,
        scenario.replicas,
        scenario.pdb_max_unavailable,
        lambda i: f"{NEW}-{i:02d}",
        scenario.pod,
        evicted=evicted,
    )
    await cluster.settled()
    return record


async def probe_pods(cluster: Cluster, dp: Datapath, count: int = 20) -> tuple[DirectProbe, ...]:
    """Bypass the Service: send ``count`` requests to each running pod directly (step 3 of
    the investigation, "curl each pod IP in a loop"), all at once, each with the clients'
    timeout (a slow request is not a failed one)."""

    async def one(net: PodNet) -> Outcome:
        try:
            status = await get_status(
                dp.probe_socket(net), (net.ip, net.port), "/", REQUEST_TIMEOUT
            )
        except EOFError:
            return Outcome.EOF
        except (OSError, TimeoutError) as exc:
            return Outcome(outcome_of(exc))
        return Outcome.HTTP_ERROR if status >= 500 else Outcome.OK

    running = [(p.name, p.net) for p in cluster.pods.values() if p.net and not p.terminating]
    outcomes = await asyncio.gather(*(one(net) for _, net in running for _ in range(count)))
    return tuple(
        DirectProbe(name, Counter(outcomes[k * count : (k + 1) * count]))
        for k, (name, _) in enumerate(running)
    )


def ground_truth(scenario: Scenario, cluster: Cluster, load: Load, datapath: str) -> LabTruth:
    """What really happened, for checking a diagnosis: the bad pods, each deleted pod's
    timeline and how long the nodes kept routing to it after it stopped accepting."""
    return LabTruth(
        datapath,
        tuple(sorted(n for n, p in cluster.pods.items() if p.fault is not FaultMode.NONE)),
        Cause(scenario.expect) if scenario.expect else None,
        round(cluster.expected_race_failures(load.sent_by_node()), 1),
        scenario.delay,
        scenario.propagation.min_sync,
        scenario.pod.prestop,
        scenario.pod.grace,
        tuple(
            PodTimeline(
                pod.name,
                pod.deleted_at,
                pod.sigterm_at,
                cluster.stopped_listening(pod),
                tuple(cluster.routing_stopped(pod)),
                pod.exit.finished_at if pod.exit else None,
                pod.exit.exit_code if pod.exit else None,
            )
            for pod in cluster.pods.values()
            if pod.deleted_at is not None
        ),
        scenario.broken_nodes,
    )


def request_row(record: dict[str, Any], dp: Datapath) -> dict[str, Any]:
    """A load record as a canonical request-log row (DESIGN.md's columns); a failed
    request's backend is the one the datapath picked for its connection, when known."""
    backend = record["backend"]
    if backend is None and record.get("port"):
        backend = dp.backend_of(record["node"], record["port"], record["ts"])
    return {
        "ts": record["ts"],
        "outcome": record["outcome"],
        "status": record["status"],
        "latency_ms": record["latency_ms"],
        "client": record["client"],
        "backend": backend,
        "conn": record["conn"],
        "node": f"node-{record['node']}",
    }


def _requests(load: Load, dp: Datapath) -> pl.DataFrame:
    rows = [request_row(r, dp) for r in load.records]
    schema = {
        "ts": pl.Float64,
        "outcome": pl.Utf8,
        "status": pl.Int64,
        "latency_ms": pl.Float64,
        "client": pl.Utf8,
        "backend": pl.Utf8,
        "conn": pl.Utf8,
        "node": pl.Utf8,
    }
    return pl.DataFrame(rows, schema=schema).sort("ts")


def _keep_ingress_logs(dp: IngressDatapath, out: Path) -> None:
    """nginx's logs into the bundle (upstreaminfo and error log where diagnose reads them,
    the combined log beside the clients' own), then its working directory goes."""
    logs = dp.logs()
    for name, path in logs.items():
        folder = out / (HIDDEN_DIR if name == "access-combined.log" else INGRESS_DIR)
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, folder / name)
    shutil.rmtree(dp.folder, ignore_errors=True)
    with contextlib.suppress(OSError):
        dp.folder.parent.rmdir()  # the run's jobs directory, when nothing else is in it


def hop_cluster(dp: Datapath, scenario: Scenario, seed: int, prefix: str) -> Cluster:
    """The cluster; behind a real hop it tells the hop each endpoint change (nginx's sync,
    the load balancer's target group)."""
    if isinstance(dp, BalancerDatapath):
        return balanced_cluster(dp, scenario, seed, prefix)
    cluster = Cluster(dp, scenario.nodes, scenario.propagation, seed, prefix)
    if isinstance(dp, IngressDatapath):
        ingress = dp
        cluster.on_change = lambda: ingress.watch(cluster.routable())
    return cluster


def balanced_cluster(dp: BalancerDatapath, scenario: Scenario, seed: int, prefix: str) -> Cluster:
    """The cluster behind the load balancer: it follows the routable pods, and with its
    readiness gate the Deployment waits for the LB to register each new pod."""
    gate = dp.registered if dp.spec.readiness_gate else (lambda pod: True)
    cluster = GatedCluster(dp, scenario.nodes, scenario.propagation, seed, prefix, gate=gate)
    cluster.on_change = lambda: dp.watch(cluster.routable())
    return cluster


def _lb_facts(
    scenario: Scenario, cluster: Cluster, load: Load, dp: BalancerDatapath, frame: pl.DataFrame
) -> BalancerFacts:
    """The load balancer's ground truth, checked against the run's."""
    stopped = {n: t for n, p in cluster.pods.items() if (t := cluster.stopped_listening(p))}
    deleted = [n for n, p in cluster.pods.items() if p.deleted_at is not None]
    sent = sorted(t for times in load.sent_by_node().values() for t in times)
    failed = int((frame.get_column("outcome") != "ok").sum())
    return balancer_facts(dp, stopped, deleted, failed, sent, bad_planned=scenario.bad > 0)


def lb_truth(truth: LabTruth, lb: BalancerFacts | None) -> LabTruth:
    """With a load balancer in front, the race is in its leg: the expected failures are
    its model's, and each deleted pod's routing stopped when the nodes' and the LB's did."""
    if lb is None:
        return truth
    pods = tuple(
        replace(p, routing_stopped=(*p.routing_stopped, lb.removed[p.pod]))
        if p.pod in lb.removed
        else p
        for p in truth.deleted_pods
    )
    return replace(truth, expected_race_failures=round(lb.expected, 1), deleted_pods=pods)


def _keep_lb_logs(dp: BalancerDatapath, out: Path) -> None:
    """haproxy's log into the bundle, then its working directory goes. diagnose reads its
    state changes (when the load balancer drained each target: that hop's leg); its request
    lines are not read as requests (the clients' log is the evidence)."""
    for name, path in dp.logs().items():
        (out / LB_DIR).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, out / LB_DIR / name)
    shutil.rmtree(dp.folder, ignore_errors=True)
    with contextlib.suppress(OSError):
        dp.folder.parent.rmdir()  # the run's jobs directory, when nothing else is in it


def write_lab_bundle(
    result: RunResult,
    cluster: Cluster,
    frame: pl.DataFrame,
    out: Path,
    seconds: float,
    ingress: IngressFacts | None = None,
    lb: BalancerFacts | None = None,
) -> None:
    write_bundle(out, frame, cluster.events, cluster.snapshot(), cluster.endpoints, "lab")
    scenario = result.scenario
    if ingress is not None:
        # the proxy's logs are the evidence: the clients' log must not count every request
        # twice, it stays in the bundle unread by diagnose
        (out / HIDDEN_DIR).mkdir(exist_ok=True)
        (out / "requests.csv").replace(out / HIDDEN_DIR / "requests.csv")
    (out / "manifests.yaml").write_text(yaml.safe_dump_all(manifests(scenario)))
    (out / "lab.json").write_text(
        json.dumps(
            {
                "scenario": scenario.name,
                "description": scenario.description,
                "datapath": result.datapath,
                "parameters": {
                    "replicas": scenario.replicas,
                    "nodes": scenario.nodes,
                    "rollout": scenario.rollout,
                    "max_surge": scenario.max_surge,
                    "max_unavailable": scenario.max_unavailable,
                    "bad": scenario.bad,
                    "fault": scenario.fault,
                    "pod": asdict(scenario.pod) | {"latency": str(scenario.pod.latency)},
                    "load": asdict(scenario.load),
                    "propagation": {
                        "delay": str(scenario.delay),
                        "min_sync": scenario.propagation.min_sync,
                    },
                },
                "requests": result.requests,
                "failed": result.failed,
                "by_outcome": outcomes_to_dict(result.by_outcome),
                "ground_truth": truth_to_dict(result.truth),
                "direct_probe": probe_to_dict(result.probe),
                "ingress": None if ingress is None else ingress.to_dict(),
                "load_balancer": None if lb is None else lb.to_dict(),
                "seconds": round(seconds, 2),
            }
            | ({"drain": drain_to_dict(cluster, cluster.drains[0])} if cluster.drains else {}),
            indent=2,
        )
    )


def drain_to_dict(cluster: Cluster, drain: Drain) -> dict[str, Any]:
    """A drain's ground truth in lab.json: the cordon, each evicted pod's refused (429)
    and accepted eviction and its replacement, the fewest healthy pods the PDB saw, the
    node's kube-proxy stop and the rules it froze with."""
    replaced = {old: new for new, old in drain.replacements.items()}
    budget = drain.budget
    return {
        "node": f"node-{drain.node}",
        "cordoned": drain.cordoned_at,
        "pdb_max_unavailable": budget,
        "min_healthy_allowed": None if budget is None else drain.replicas - budget,
        "min_healthy": min_healthy(cluster, drain),
        "evictions": {
            pod: {
                "refused": drain.refused.get(pod, []),
                "evicted": at,
                "replacement": replaced.get(pod),
                "replacement_node": f"node-{cluster.pods[replaced[pod]].node}"
                if pod in replaced
                else None,
            }
            for pod, at in drain.evicted.items()
        },
        "finished": drain.finished_at,
        "kube_proxy_stopped": cluster.proxy_stopped.get(drain.node),
        "frozen_rules": list(cluster.applied(drain.node)),
    }
