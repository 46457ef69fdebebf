"""``svcdoctor probe``: every endpoint of a Service probed directly from inside the cluster,
and the Service itself (optionally from one pod on each node), by the agent.

``plan`` reads the cluster and builds the agent's objects (what ``probe`` without ``--yes``
prints), refusing what the agent would refuse; ``run`` creates them, reads the rows back
and deletes everything; the verdicts and what limits them are ``probing``'s (pure).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from svcdoctor.cluster.agent import DIRECT_PARALLEL
from svcdoctor.cluster.agentjob import (
    START_SECONDS,
    AgentSpec,
    Cleanup,
    Egress,
    Follower,
    check_args,
    deployed,
    egress_to,
    node_job_name,
)
from svcdoctor.cluster.api import ApiReader
from svcdoctor.cluster.collect import SERVICE_NAME_LABEL, label_selector
from svcdoctor.cluster.probing import ProbeResult, assess, limits
from svcdoctor.cluster.reader import ClusterError, Forbidden
from svcdoctor.cluster.rollout import Refused, service_address


@dataclass(frozen=True, slots=True)
class Options:
    """What ``svcdoctor probe`` was asked: the Service (in ``namespace``), ``count``
    requests to each ready endpoint directly and as many per endpoint through the Service
    at ``rate``/s, each bounded by ``timeout`` s; with ``per_node``, the Service also from
    one pod on each of up to ``max_nodes`` nodes; ``image`` of the agent (None: default);
    with ``network_policy``, a NetworkPolicy lets the agent reach only the Service's pods
    (their ports) and DNS."""

    namespace: str
    service: str
    count: int = 50
    path: str = "/"
    protocol: str = "http"
    port: str | None = None
    rate: float = 50.0
    timeout: float = 2.0
    per_node: bool = False
    max_nodes: int = 20
    image: str | None = None
    network_policy: bool = False


@dataclass(frozen=True, slots=True)
class ProbePlan:
    """What a probe will create, and what it needs to read the rows back."""

    spec: AgentSpec
    endpoints: tuple[str, ...]  # IP:PORT
    names: Mapping[str, str]  # IP:PORT → pod
    address: str  # the Service's ClusterIP:port
    nodes: tuple[str, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ProbeOutcome:
    plan: ProbePlan
    result: ProbeResult
    cleanup: Cleanup | None
    notes: tuple[str, ...]


def endpoints_of(
    slices: Sequence[Mapping[str, Any]], port_name: str
) -> tuple[tuple[str, ...], dict[str, str]]:
    """The ready addresses of the Service's EndpointSlices as ``IP:PORT`` of the port named
    ``port_name`` (``""``: the unnamed one), and each one's pod."""
    found: dict[str, str] = {}
    for sl in slices:
        ports = [p for p in sl.get("ports") or [] if (p.get("name") or "") == port_name]
        if not ports or ports[0].get("port") is None:
            continue
        number = ports[0]["port"]
        for ep in sl.get("endpoints") or []:
            if (ep.get("conditions") or {}).get("ready") is False:
                continue
            pod = str((ep.get("targetRef") or {}).get("name") or "")
            for ip in ep.get("addresses") or []:
                host = f"[{ip}]" if ":" in str(ip) else str(ip)
                found[f"{host}:{number}"] = pod
    return tuple(sorted(found)), found


def _port_name(service: Mapping[str, Any], port: str | None) -> str:
    for p in (service.get("spec") or {}).get("ports") or []:
        if port is None or port in (str(p.get("port")), p.get("name")):
            return str(p.get("name") or "")
    return ""


def node_names(
    api: ApiReader, namespace: str, pods: Sequence[Mapping[str, Any]]
) -> tuple[list[str], list[str]]:
    """The schedulable, Ready nodes; the nodes of the namespace's pods when nodes cannot be
    listed (the namespaced role), with a note."""
    try:
        nodes = api.list("nodes")
    except Forbidden:
        names = sorted({str((p.get("spec") or {}).get("nodeName")) for p in pods
                        if (p.get("spec") or {}).get("nodeName")})  # fmt: skip
        return names, [
            "nodes cannot be listed (a namespaced role): probing from the nodes of the "
            f"pods in {namespace}"
        ]
    ready = []
    for node in nodes:
        conditions = (node.get("status") or {}).get("conditions") or []
        is_ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
        if is_ready and not (node.get("spec") or {}).get("unschedulable"):
            ready.append(str(node["metadata"]["name"]))
    return sorted(ready), []


def egress_of(service: Mapping[str, Any], endpoints: Sequence[str]) -> Egress:
    """What ``--network-policy`` lets the agent reach: the Service's selected pods, on the
    ports of its endpoints (``IP:PORT``, the pods' own ports); ``Refused`` for a Service
    without a selector (its endpoints are not pods a policy can select)."""
    return egress_to(service, {int(e.rsplit(":", 1)[1]) for e in endpoints})


def bound_seconds(endpoints: int, count: int, timeout: float, duration: float) -> float:
    """How long the agent may run by its own arguments: the through-Service load's
    ``duration``, plus the direct probes, ``DIRECT_PARALLEL`` endpoints at a time, each of
    ``count`` requests taking at most ``timeout``."""
    return duration + math.ceil(endpoints / DIRECT_PARALLEL) * count * timeout


def plan(api: ApiReader, options: Options) -> ProbePlan:
    """Read the Service and its endpoints (and nodes) and build the agent's objects;
    ``Refused`` when there is nothing to probe or no node to probe from, ``AgentArgsError``
    when the agent would refuse its arguments."""
    ns = options.namespace
    service = api.get("services", ns, options.service)
    if service is None:
        raise Refused(f"service {ns}/{options.service} not found")
    address = service_address(service, options.port)
    slices = api.list("endpointslices", ns, labels=f"{SERVICE_NAME_LABEL}={options.service}")
    endpoints, names = endpoints_of(slices, _port_name(service, options.port))
    if not endpoints:
        raise Refused(f"service {ns}/{options.service} has no ready endpoint to probe")
    duration = max(1.0, options.count * len(endpoints) / options.rate)
    upstream = f"{ns}/{options.service}"
    common = ["--protocol", options.protocol, "--path", options.path,
              "--timeout", f"{options.timeout:g}", "--upstream", upstream]  # fmt: skip
    service_args = ["--service", address, "--rate", f"{options.rate:g}",
                    "--duration", f"{duration:g}"]  # fmt: skip
    args = ("--mode", "both", "--endpoints", ",".join(endpoints),
            "--count", str(options.count), *service_args, *common)  # fmt: skip
    notes: list[str] = []
    nodes: list[str] = []
    if options.per_node:
        labels = label_selector(service)
        pods = api.list("pods", ns, labels=labels) if labels else []
        nodes, notes = node_names(api, ns, pods)
        if not nodes:
            why = f" ({'; '.join(notes)})" if notes else ""
            raise Refused(f"--per-node: no Ready, schedulable node to probe from{why}")
        if len(nodes) > options.max_nodes:
            notes.append(f"{len(nodes)} nodes: probing from the first {options.max_nodes}")
            nodes = nodes[: options.max_nodes]
    per_node = tuple(
        (node, ("--mode", "service", *service_args, *common, "--node", node)) for node in nodes
    )
    bound = bound_seconds(len(endpoints), options.count, options.timeout, duration)
    spec = AgentSpec(ns, "probe", args, bound, node_args=per_node)
    if options.image:
        spec = replace(spec, image=options.image)
    if options.network_policy:
        spec = replace(spec, egress=egress_of(service, endpoints))
    check_args(spec)
    return ProbePlan(spec, endpoints, names, address, tuple(nodes), tuple(notes))


def run(
    api: ApiReader, probe: ProbePlan, progress: Callable[[str], None] = lambda _: None
) -> ProbeOutcome:
    """Create the agent's objects, wait for its rows, delete everything, assess (with a
    note on what limits the verdicts). ``Interrupted`` after Ctrl-C once the objects were
    deleted."""
    spec = probe.spec
    ns = spec.namespace
    until = time.time() + START_SECONDS + spec.bound_seconds
    notes = list(probe.notes)
    cleaned: list[Cleanup] = []
    followers = [Follower(api, ns, until, selector=f"job-name={spec.name}")]
    followers += [
        Follower(api, ns, until, selector=f"job-name={node_job_name(spec, i)}")
        for i in range(len(probe.nodes))
    ]
    progress(
        f"probing {len(probe.endpoints)} endpoints and {probe.address}"
        + (f" from {len(probe.nodes)} nodes" if probe.nodes else "")
        + f" (job {spec.name})"
    )
    with deployed(api, spec, on_cleanup=cleaned.append):
        for f in followers:
            f.start()
        for f in followers:
            f.join(max(0.0, until - time.time()) + 5)
    outputs = [f.output() for f in followers]
    for f, out in zip(followers, outputs, strict=True):
        if f.error:
            notes.append(f"reading the agent {f.pod or ''}: {f.error}")
        if out.done is None:
            last = out.other[-1] if out.other else f"phase {f.phase}"
            notes.append(f"agent {f.pod or spec.name} ended without its done line: {last}")
    if not any(out.rows for out in outputs):
        raise ClusterError(
            f"the probe agent sent no request ({'; '.join(notes) or 'no output'}); "
            f"kubectl -n {ns} describe job {spec.name} while it runs"
        )
    main = outputs[0].rows
    direct = [r for r in main if r.get("mode") == "direct"]
    through = [r for r in main if r.get("mode") == "service"]
    per_node = [r for out in outputs[1:] for r in out.rows]
    result = assess(direct, through, per_node, probe.names)
    notes += limits(result)
    return ProbeOutcome(probe, result, cleaned[0] if cleaned else None, tuple(notes))
