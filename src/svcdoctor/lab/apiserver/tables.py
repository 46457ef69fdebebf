"""Lists and objects as served: as stored, or as the Table kubectl asks for (with the columns
it shows for ConfigMaps and Jobs, and ages as it prints them)."""

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
        columns = _COLUMNS if extra is None else [_COLUMNS[0], *extra[0], _COLUMNS[1]]
        head = {
            "kind": "Table",
            "apiVersion": table,
            "metadata": meta,
            "columnDefinitions": columns,
        }
        cells = None if extra is None else extra[1]
        rows = b",".join(self._row(e, now, table, cells) for e in entries)
        return dumps(head)[:-1] + b',"rows":[' + rows + b"]}"

    def object(self, entry: Entry, r: Resource) -> bytes:
        if self.table is None:
            return entry.raw
        return self.objects([entry], {"resourceVersion": str(entry.rv)}, r)

    def _row(self, e: Entry, now: float, table: str, cells: _Cells | None) -> bytes:
        created = parse_time(e.created)
        age = "<unknown>" if created is None else human_duration(now - created)
        extra = [] if cells is None else cells(json.loads(e.raw), now)
        row = b'{"cells":' + dumps([e.key[1], *extra, age])
        if self.include == "None":
            return row + b"}"
        if self.include == "Object":
            return row + b',"object":' + e.raw + b"}"
        partial = b'{"kind":"PartialObjectMetadata","apiVersion":"' + table.encode()
        return row + b',"object":' + partial + b'","metadata":' + e.meta_raw + b"}}"


_Cells = Callable[[Mapping[str, Any], float], list[Any]]


def _column(name: str, description: str, kind: str = "string") -> dict[str, Any]:
    return {"name": name, "type": kind, "format": "", "description": description, "priority": 0}


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


_TABLE_COLUMNS: dict[str, tuple[list[dict[str, Any]], _Cells]] = {
    "ingresses": (
        [
            _column("Class", "The name of the IngressClass resource that should be used."),
            _column("Hosts", "Hosts that incoming requests are matched against."),
            _column("Address", "Address is a list containing ingress points for the load-balancer"),
            _column("Ports", "Ports of TLS configurations that open."),
        ],
        _ingress_cells,
    ),
    "ingressclasses": (
        [
            _column("Controller", "Controller that is responsible for handling this class"),
            _column("Parameters", "A reference to a resource with additional parameters"),
        ],
        _ingress_class_cells,
    ),
    "configmaps": ([_column("Data", "Data of the ConfigMap", "integer")], _configmap_cells),
    "jobs": (
        [
            _column("Status", "Status of the job."),
            _column("Completions", "The completion status of the job."),
            _column("Duration", "Time required to complete the job."),
        ],
        _job_cells,
    ),
}
"""The columns kubectl shows for some kinds between Name and Age, and their cells."""


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
