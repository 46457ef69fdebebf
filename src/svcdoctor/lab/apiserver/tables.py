"""Lists and objects as served: as stored, or as the Table kubectl asks for (with the columns
it shows for Pods, Services, Nodes, ConfigMaps, Jobs and Ingresses, and ages as it prints
them)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from svcdoctor.cluster.resources import Resource
from svcdoctor.lab.apiserver.resources import BY_KIND, dumps, parse_time
from svcdoctor.lab.apiserver.store import Entry

_COLUMNS: list[dict[str, Any]] = [
    {
        "name": "Name",
        "type": "string",
        "format": "name",
        "description": "Name must be unique within a namespace.",
        "priority": 0,
    },
    {
        "name": "Age",
        "type": "string",
        "format": "",
        "description": "CreationTimestamp is when this object was created.",
        "priority": 0,
    },
]


@dataclass(frozen=True, slots=True)
class Format:
    """How objects are written: as stored, or as a Table (``table``: its apiVersion)."""

    table: str | None
    include: str  # Table rows' object: Metadata | Object | None

    def objects(self, entries: Iterable[Entry], meta: Mapping[str, Any], r: Resource) -> bytes:
        if self.table is None:
            head: dict[str, Any] = {
                "kind": f"{r.kind}List",
                "apiVersion": r.api_version,
                "metadata": meta,
            }
            return dumps(head)[:-1] + b',"items":[' + b",".join(e.raw for e in entries) + b"]}"
        now, table = time.time(), self.table
        extra = _TABLE_COLUMNS.get(BY_KIND[(r.api_version, r.kind)])
        columns = _COLUMNS if extra is None else [_COLUMNS[0], *extra[0], _COLUMNS[1], *extra[2]]
        head = {
            "kind": "Table",
            "apiVersion": table,
            "metadata": meta,
            "columnDefinitions": columns,
        }
        cells = None if extra is None else extra[1]
        before = 0 if extra is None else len(extra[0])
        rows = b",".join(self._row(e, now, table, cells, before) for e in entries)
        return dumps(head)[:-1] + b',"rows":[' + rows + b"]}"

    def object(self, entry: Entry, r: Resource) -> bytes:
        if self.table is None:
            return entry.raw
        return self.objects([entry], {"resourceVersion": str(entry.rv)}, r)

    def _row(self, e: Entry, now: float, table: str, cells: _Cells | None, before: int) -> bytes:
        """The row: the name, ``before`` cells, the age, the other cells."""
        created = parse_time(e.created)
        age = "<unknown>" if created is None else human_duration(now - created)
        extra = [] if cells is None else cells(json.loads(e.raw), now)
        row = b'{"cells":' + dumps([e.key[1], *extra[:before], age, *extra[before:]])
        if self.include == "None":
            return row + b"}"
        if self.include == "Object":
            return row + b',"object":' + e.raw + b"}"
        partial = b'{"kind":"PartialObjectMetadata","apiVersion":"' + table.encode()
        return row + b',"object":' + partial + b'","metadata":' + e.meta_raw + b"}}"


_Cells = Callable[[Mapping[str, Any], float], list[Any]]


def _column(name: str, description: str, kind: str = "string", priority: int = 0) -> dict[str, Any]:
    """A column; priority 1: shown by ``-o wide`` only."""
    return {
        "name": name,
        "type": kind,
        "format": "",
        "description": description,
        "priority": priority,
    }


def _pod_cells(obj: Mapping[str, Any], now: float) -> list[Any]:
    """Ready, status, restarts (age), then the wide cells IP, node, nominated node,
    readiness gates, as kubectl's pod printer shows them (kubernetes
    pkg/printers/internalversion/printers.go, ``printPod``; no init containers here)."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    reason = status.get("reason") or status.get("phase") or ""
    restarts, ready, running, last = 0, 0, False, None
    for c in reversed(status.get("containerStatuses") or []):
        restarts += int(c.get("restartCount") or 0)
        ended = ((c.get("lastState") or {}).get("terminated") or {}).get("finishedAt")
        if ended and (last is None or ended > last):
            last = ended
        state = c.get("state") or {}
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if waiting and waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated and terminated.get("reason"):
            reason = terminated["reason"]
        elif terminated is not None:
            signal = terminated.get("signal")
            reason = f"Signal:{signal}" if signal else f"ExitCode:{terminated.get('exitCode', 0)}"
        elif c.get("ready") and "running" in state:
            running = True
            ready += 1
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    if reason == "Completed" and running:
        reason = "Running" if conditions.get("Ready") == "True" else "NotReady"
    deleting = (obj.get("metadata") or {}).get("deletionTimestamp")
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and status.get("phase") not in ("Succeeded", "Failed"):
        reason = "Terminating"
    restarted = str(restarts)
    if restarts and (at := parse_time(last or "")) is not None:
        restarted = f"{restarts} ({human_duration(now - at)} ago)"
    ips = [p.get("ip") for p in status.get("podIPs") or [] if p.get("ip")]
    gates = spec.get("readinessGates") or []
    passed = sum(1 for g in gates if conditions.get(g.get("conditionType")) == "True")
    return [
        f"{ready}/{len(spec.get('containers') or [])}",
        reason,
        restarted,
        ips[0] if ips else status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        f"{passed}/{len(gates)}" if gates else "<none>",
    ]


# the descriptions of kubectl's pod columns: printers.go ``podColumnDefinitions``
_POD_COLUMNS = (
    [
        _column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
        _column("Status", "The aggregate status of the containers in this pod."),
        _column(
            "Restarts",
            "The number of times the containers in this pod have been restarted and when the "
            "last container in this pod has restarted.",
        ),
    ],
    _pod_cells,
    [
        _column("IP", "podIP address allocated to the pod.", priority=1),
        _column("Node", "NodeName indicates in which node this pod is scheduled.", priority=1),
        _column(
            "Nominated Node",
            "nominatedNodeName is set when this pod preempts other pods on the node.",
            priority=1,
        ),
        _column(
            "Readiness Gates",
            "If specified, all readiness gates will be evaluated for pod readiness.",
            priority=1,
        ),
    ],
)


def _configmap_cells(obj: Mapping[str, Any], now: float) -> list[Any]:
    return [len(obj.get("data") or {}) + len(obj.get("binaryData") or {})]


def _job_cells(obj: Mapping[str, Any], now: float) -> list[Any]:
    """Status, completions and duration, as kubectl's job printer shows them."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    done = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
    state = next((s for s in ("Complete", "Failed", "FailureTarget") if s in done), "Running")
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        state = "Terminating"
    elif spec.get("suspend") and state == "Running":
        state = "Suspended"
    completions = f"{status.get('succeeded', 0)}/{spec.get('completions', 1)}"
    start = parse_time(status.get("startTime") or "")
    end = parse_time(status.get("completionTime") or "") or now
    duration = "" if start is None else human_duration(end - start)
    return [state, completions, duration]


def _ingress_cells(obj: Mapping[str, Any], now: float) -> list[Any]:
    """Class, hosts, address and ports, as kubectl's ingress printer shows them
    (kubernetes pkg/printers/internalversion/printers.go, ``printIngress``)."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    hosts = [str(r["host"]) for r in spec.get("rules") or [] if r.get("host")]
    balancers = (status.get("loadBalancer") or {}).get("ingress") or []
    address = ",".join(str(b.get("ip") or b.get("hostname") or "") for b in balancers)
    ports = "80, 443" if spec.get("tls") else "80"
    return [spec.get("ingressClassName") or "<none>", ",".join(hosts) or "*", address, ports]


def _ingress_class_cells(obj: Mapping[str, Any], now: float) -> list[Any]:
    spec = obj.get("spec") or {}
    parameters = spec.get("parameters") or {}
    kind = parameters.get("kind")
    named = f"{kind}/{parameters.get('name')}" if kind else "<none>"
    return [spec.get("controller") or "", named]


def _service_cells(obj: Mapping[str, Any], now: float) -> list[Any]:
    """Type, cluster IP, external IP, ports, then the wide cell selector, as kubectl's
    service printer shows them (kubernetes pkg/printers/internalversion/printers.go,
    ``printService``)."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    kind = spec.get("type") or "ClusterIP"
    external = [str(ip) for ip in spec.get("externalIPs") or []]
    if kind == "LoadBalancer":
        balancers = (status.get("loadBalancer") or {}).get("ingress") or []
        external += [str(b.get("ip") or b.get("hostname") or "") for b in balancers]
        shown = ",".join(external) or "<pending>"
    elif kind == "ExternalName":
        shown = str(spec.get("externalName") or "")
    else:
        shown = ",".join(external) or "<none>"
    ports = [
        f"{p.get('port')}{':' + str(p['nodePort']) if p.get('nodePort') else ''}"
        f"/{p.get('protocol') or 'TCP'}"
        for p in spec.get("ports") or []
    ]
    selector = spec.get("selector") or {}
    return [
        kind,
        spec.get("clusterIP") or "<none>",
        shown,
        ",".join(ports) or "<none>",
        ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>",
    ]


def _node_cells(obj: Mapping[str, Any], now: float) -> list[Any]:
    """Status, roles, then version and the wide cells, as kubectl's node printer shows them
    (``printNode``: Ready or NotReady, ``,SchedulingDisabled`` when cordoned)."""
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    ready = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    # a Ready condition not True is NotReady (Unknown too); none at all is Unknown
    state = "Unknown" if "Ready" not in ready else "NotReady"
    if ready.get("Ready") == "True":
        state = "Ready"
    if spec.get("unschedulable"):
        state += ",SchedulingDisabled"
    labels = (obj.get("metadata") or {}).get("labels") or {}
    roles = sorted(
        k.removeprefix("node-role.kubernetes.io/")
        for k in labels
        if k.startswith("node-role.kubernetes.io/")
    )
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    info = status.get("nodeInfo") or {}
    return [
        state,
        ",".join(roles) or "<none>",
        info.get("kubeletVersion") or "",
        addresses.get("InternalIP") or "<none>",
        addresses.get("ExternalIP") or "<none>",
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


_Columns = tuple[list[dict[str, Any]], _Cells, list[dict[str, Any]]]
_TABLE_COLUMNS: dict[str, _Columns] = {
    "ingresses": (
        [
            _column("Class", "The name of the IngressClass resource that should be used."),
            _column("Hosts", "Hosts that incoming requests are matched against."),
            _column("Address", "Address is a list containing ingress points for the load-balancer"),
            _column("Ports", "Ports of TLS configurations that open."),
        ],
        _ingress_cells,
        [],
    ),
    "ingressclasses": (
        [
            _column("Controller", "Controller that is responsible for handling this class"),
            _column("Parameters", "A reference to a resource with additional parameters"),
        ],
        _ingress_class_cells,
        [],
    ),
    "configmaps": ([_column("Data", "Data of the ConfigMap", "integer")], _configmap_cells, []),
    "jobs": (
        [
            _column("Status", "Status of the job."),
            _column("Completions", "The completion status of the job."),
            _column("Duration", "Time required to complete the job."),
        ],
        _job_cells,
        [],
    ),
    "pods": _POD_COLUMNS,
    "services": (
        [
            _column("Type", "type determines how the Service is exposed."),
            _column("Cluster-IP", "clusterIP is the IP address of the service."),
            _column(
                "External-IP",
                "externalIPs is a list of IP addresses for which nodes in "
                "the cluster will also accept traffic for this service.",
            ),
            _column("Port(s)", "The list of ports that are exposed by this service."),
        ],
        _service_cells,
        [
            _column(
                "Selector",
                "Route service traffic to pods with label keys and values matching this selector.",
                priority=1,
            )
        ],
    ),
    "nodes": (
        [
            _column("Status", "The status of the node"),
            _column("Roles", "The roles of the node"),
        ],
        _node_cells,
        [
            _column("Version", "Kubelet Version reported by the node."),
            _column("Internal-IP", "List of addresses reachable to the node.", priority=1),
            _column("External-IP", "List of addresses reachable to the node.", priority=1),
            _column("OS-Image", "OS Image reported by the node.", priority=1),
            _column("Kernel-Version", "Kernel Version reported by the node.", priority=1),
            _column(
                "Container-Runtime", "Container Runtime Version reported by the node.", priority=1
            ),
        ],
    ),
}
"""The columns kubectl shows for some kinds between Name and Age and after Age, and their
cells (in that order)."""


def human_duration(seconds: float) -> str:
    """An age as kubectl prints it (apimachinery's ``duration.HumanDuration``)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 120:
        return f"{max(s, 0)}s"
    minutes, hours = s // 60, s // 3600
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 192:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    years, days = hours // 24 // 365, hours // 24 % 365
    if hours < 24 * 365 * 8:
        return f"{years}y{days}d" if days else f"{years}y"
    return f"{years}y"


def negotiate(request: web.Request) -> Format:
    """Table when the client asks for one first (kubectl's human output), else the objects."""
    for media in request.headers.get("Accept", "").split(","):
        params = {}
        for param in media.split(";")[1:]:
            name, _, value = param.strip().partition("=")
            params[name] = value
        table = params.get("as") == "Table" and params.get("g") == "meta.k8s.io"
        if table and params.get("v") in ("v1", "v1beta1"):
            include = request.query.get("includeObject", "Metadata")
            return Format(f"meta.k8s.io/{params['v']}", include)
    return Format(None, "Object")
