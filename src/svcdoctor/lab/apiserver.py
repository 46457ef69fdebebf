"""A small, honest Kubernetes API server for the lab: read-only, in memory, over HTTPS.

``ObjectStore`` holds Kubernetes-shaped objects (the resources of
``svcdoctor.cluster.resources.RESOURCES``) and a bounded log of their changes; ``ApiServer``
serves it the way kube-apiserver does for the calls kubectl and svcdoctor make: version,
discovery, get, list (selectors, pagination over a consistent snapshot, Table output), watch
(resourceVersions, bookmarks, ``410 Gone``) and ``pods/log`` (also followed), behind a bearer
token. It serves only what was put in the store.

Each object is encoded once, when it is put; lists and watches join the stored bytes.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import contextlib
import datetime as dt
import hmac
import json
import platform
import re
import sys
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from svcdoctor.cluster.resources import RESOURCES, Resource
from svcdoctor.lab import kubeconfig as _kubeconfig
from svcdoctor.lab import tls

LogSource = Callable[[str | None], str]
"""``source(container)`` → the container's whole log text now."""

_Key = tuple[str, str]  # (namespace, or "" for cluster-scoped objects; name)
_BY_KIND = {(r.api_version, r.kind): key for key, r in RESOURCES.items()}
_SNAPSHOTS_KEPT = 64  # list snapshots kept for continue tokens
_LOG_POLL = 0.5  # seconds between reads of a followed log's source
_WATCH_TIMEOUT = 1800  # seconds; kube-apiserver's --min-request-timeout
_ALL_CATEGORY = {"pods", "services", "deployments", "replicasets", "statefulsets", "daemonsets"}
_GOARCH = {"x86_64": "amd64", "aarch64": "arm64"}  # /version's platform names machines as Go
_REF = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")

# The field selectors the real server accepts besides metadata.name and metadata.namespace,
# as label -> path in the object.
_FIELDS: dict[str, dict[str, str]] = {
    "pods": {
        f: f
        for f in (
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        )
    },
    "events": {
        **{f"involvedObject.{f}": f"involvedObject.{f}" for f in _REF},
        "reason": "reason",
        "reportingComponent": "reportingComponent",
        "source": "source.component",
        "type": "type",
    },
    "events.events.k8s.io": {
        **{f"regarding.{f}": f"regarding.{f}" for f in _REF},
        "reason": "reason",
        "reportingController": "reportingController",
        "type": "type",
    },
    "services": {"spec.clusterIP": "spec.clusterIP", "spec.type": "spec.type"},
    "nodes": {"spec.unschedulable": "spec.unschedulable"},
    "namespaces": {"status.phase": "status.phase"},
}
_FIELD_PATHS = {
    resource: {label: tuple(path.split(".")) for label, path in fields.items()}
    for resource, fields in _FIELDS.items()
}
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


# ---------------------------------------------------------------------------------------
# The store


@dataclass(frozen=True, slots=True)
class _Entry:
    """One version of one object, encoded."""

    key: _Key
    rv: int
    raw: bytes  # the object as served
    meta_raw: bytes  # its metadata, for Table rows
    labels: Mapping[str, str]
    fields: Mapping[str, str]  # field-selector label -> value
    uid: str
    created: str  # creationTimestamp


@dataclass(frozen=True, slots=True)
class _Change:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    resource: str
    entry: _Entry  # the new version (the last one for DELETED)
    old: _Entry | None  # the version it replaced (MODIFIED)


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """A resource's objects sorted by (namespace, name), as of one change."""

    id: int
    resource: str
    keys: list[_Key]
    entries: list[_Entry]


@dataclass(frozen=True, slots=True)
class _Logs:
    source: LogSource
    timestamped: bool


class ObjectStore:
    """Kubernetes objects by (apiVersion, kind, namespace, name), with a log of changes.

    Thread-safe. Objects are encoded when put: mutating one afterwards changes nothing.
    """

    def __init__(self, log_size: int = 10_000) -> None:
        self._lock = threading.Lock()
        self._rv = 0
        self._objects: dict[str, dict[_Key, _Entry]] = {key: {} for key in RESOURCES}
        self._current: dict[str, _Snapshot] = {}  # per resource, until it changes
        self._snapshots: OrderedDict[int, _Snapshot] = OrderedDict()
        self._snapshot_ids = 0
        self._log: deque[_Change] = deque(maxlen=log_size)
        self._logs: dict[_Key, _Logs] = {}
        self._listeners: list[Callable[[], None]] = []

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Add or replace ``obj``; fill uid, resourceVersion, creationTimestamp; return it."""
        resource, key = _identify(obj)
        meta = dict(obj.get("metadata") or {})
        if RESOURCES[resource].namespaced:
            meta["namespace"] = key[0]
        else:
            meta.pop("namespace", None)
        with self._lock:
            old = self._objects[resource].get(key)
            self._rv += 1
            meta.setdefault("uid", old.uid if old else str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", old.created if old else _now_rfc3339())
            meta["resourceVersion"] = str(self._rv)
            stored = {**obj, "metadata": meta}
            entry = _encode(resource, key, self._rv, stored)
            self._objects[resource][key] = entry
            self._record(_Change(self._rv, "MODIFIED" if old else "ADDED", resource, entry, old))
        self._notify()
        return stored

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        """Remove the object (a DELETED event); absent objects are no error."""
        resource = _resource_of(api_version, kind)
        key = _key(resource, namespace, name)
        with self._lock:
            old = self._objects[resource].pop(key, None)
            if old is None:
                return
            self._rv += 1
            last = json.loads(old.raw)
            last["metadata"]["resourceVersion"] = str(self._rv)
            entry = _encode(resource, key, self._rv, last)
            self._record(_Change(self._rv, "DELETED", resource, entry, None))
        self._notify()

    def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        """A copy of the stored object, or None."""
        entry = self._entry(_resource_of(api_version, kind), namespace, name)
        if entry is None:
            return None
        obj: dict[str, Any] = json.loads(entry.raw)
        return obj

    def compact(self) -> None:
        """Forget the change history, as etcd compaction does: watches from an older
        resourceVersion get ``410 Gone`` and unfinished paginated lists expire."""
        with self._lock:
            self._log.clear()
            self._snapshots.clear()
            self._current.clear()

    def set_logs(
        self, namespace: str, pod: str, source: LogSource, *, timestamped: bool = False
    ) -> None:
        """Serve ``source(container)`` as the pod's log.

        With ``timestamped``, each line starts with an RFC 3339 time and a space, as
        ``kubectl logs --timestamps`` prints: the server then honours ``sinceSeconds`` and
        ``sinceTime`` and strips the times unless the client asks for ``timestamps``.
        """
        with self._lock:
            self._logs[(namespace, pod)] = _Logs(source, timestamped)

    # -- for the server

    def _entry(self, resource: str, namespace: str | None, name: str) -> _Entry | None:
        with self._lock:
            return self._objects[resource].get(_key(resource, namespace, name))

    def _log_source(self, namespace: str, pod: str) -> _Logs | None:
        with self._lock:
            return self._logs.get((namespace, pod))

    def _snapshot(self, resource: str) -> tuple[_Snapshot, int]:
        """The resource's objects now, and the resourceVersion of "now"."""
        with self._lock:
            snap = self._current.get(resource)
            if snap is None:
                items = sorted(self._objects[resource].items())
                self._snapshot_ids += 1
                keys, entries = [k for k, _ in items], [e for _, e in items]
                snap = self._current[resource] = _Snapshot(
                    self._snapshot_ids, resource, keys, entries
                )
            self._snapshots[snap.id] = snap
            self._snapshots.move_to_end(snap.id)
            if len(self._snapshots) > _SNAPSHOTS_KEPT:
                self._snapshots.popitem(last=False)
            return snap, self._rv

    def _snapshot_by_id(self, snapshot_id: int) -> _Snapshot | None:
        with self._lock:
            snap = self._snapshots.get(snapshot_id)
            if snap is not None:
                self._snapshots.move_to_end(snapshot_id)
            return snap

    def _changes_since(self, rv: int) -> list[_Change] | None:
        """The changes after ``rv``, or None when the log no longer reaches back to it."""
        with self._lock:
            if rv >= self._rv:
                return []
            if rv < self._oldest():
                return None
            n = self._rv - rv
            return [self._log[i] for i in range(len(self._log) - n, len(self._log))]

    def _oldest(self) -> int:
        """The oldest resourceVersion the change log can replay from."""
        return self._log[0].rv - 1 if self._log else self._rv

    def _subscribe(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` (from the changing thread) after each change."""
        with self._lock:
            self._listeners.append(listener)

    def _unsubscribe(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.remove(listener)

    def _record(self, change: _Change) -> None:
        self._log.append(change)
        self._current.pop(change.resource, None)

    def _notify(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener()


def _identify(obj: Mapping[str, Any]) -> tuple[str, _Key]:
    resource = _resource_of(str(obj.get("apiVersion")), str(obj.get("kind")))
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise ValueError(f"{obj.get('kind')} without metadata.name")
    return resource, _key(resource, meta.get("namespace") or "default", name)


def _key(resource: str, namespace: str | None, name: str) -> _Key:
    return ((namespace or "") if RESOURCES[resource].namespaced else "", name)


def _resource_of(api_version: str, kind: str) -> str:
    try:
        return _BY_KIND[(api_version, kind)]
    except KeyError:
        raise ValueError(f"the lab API does not serve {api_version} {kind}") from None


def _encode(resource: str, key: _Key, rv: int, obj: Mapping[str, Any]) -> _Entry:
    meta = obj["metadata"]
    fields = {"metadata.name": key[1], "metadata.namespace": key[0]}
    for label, path in _FIELD_PATHS.get(resource, {}).items():
        fields[label] = _field_value(obj, path)
    return _Entry(
        key=key,
        rv=rv,
        raw=_dumps(obj),
        meta_raw=_dumps(meta),
        labels=dict(meta.get("labels") or {}),
        fields=fields,
        uid=str(meta["uid"]),
        created=str(meta["creationTimestamp"]),
    )


def _field_value(obj: Mapping[str, Any], path: tuple[str, ...]) -> str:
    value: Any = obj
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def _now_rfc3339() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ---------------------------------------------------------------------------------------
# Errors and selectors


class _Failure(Exception):
    """An error the server answers with a Status object."""

    def __init__(
        self, code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
        if details:
            self.status["details"] = dict(details)

    @property
    def code(self) -> int:
        return int(self.status["code"])


def _bad_request(message: str) -> _Failure:
    return _Failure(400, "BadRequest", message)


_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}")
_LABEL_VALUE = re.compile(rf"({_NAME})?")
_SET_REQ = re.compile(r"(\S+)\s+(in|notin)\s*\(([^()]*)\)")
_CMP_REQ = re.compile(r"([^\s=!<>]+)\s*(==|=|!=|<|>)\s*(\S*)")


@dataclass(frozen=True, slots=True)
class _Requirement:
    key: str
    op: str  # = != in notin exists !exists < >
    values: frozenset[str] = frozenset()

    def matches(self, values: Mapping[str, str]) -> bool:
        value = values.get(self.key)
        if self.op in ("=", "in"):
            return value in self.values
        if self.op in ("!=", "notin"):
            return value not in self.values
        if self.op == "exists":
            return value is not None
        if self.op == "!exists":
            return value is None
        if value is None or not value.lstrip("-").isdigit():
            return False
        bound = int(next(iter(self.values)))
        return int(value) < bound if self.op == "<" else int(value) > bound


def _parse_labels(selector: str) -> list[_Requirement]:
    """Parse a label selector (``a=b,c!=d,e in (f,g),h notin (i),j,!k,l>1``)."""
    return [_parse_label_requirement(part.strip()) for part in _split(selector) if part.strip()]


def _split(selector: str) -> list[str]:
    """Split at commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(selector[start:i])
            start = i + 1
    parts.append(selector[start:])
    return parts


def _parse_label_requirement(text: str) -> _Requirement:
    if m := _SET_REQ.fullmatch(text):
        values = [v.strip() for v in m[3].split(",")]
        return _requirement(m[1], m[2], values, text)
    if m := _CMP_REQ.fullmatch(text):
        op = "=" if m[2] == "==" else m[2]
        return _requirement(m[1], op, [m[3]], text)
    if text.startswith("!"):
        return _requirement(text[1:].strip(), "!exists", [], text)
    return _requirement(text, "exists", [], text)


def _requirement(key: str, op: str, values: list[str], text: str) -> _Requirement:
    if not _LABEL_KEY.fullmatch(key) or len(key.rpartition("/")[2]) > 63:
        raise _bad_request(f"unable to parse requirement: invalid label key {key!r} in {text!r}")
    for value in values:
        if not _LABEL_VALUE.fullmatch(value):
            raise _bad_request(f"unable to parse requirement: invalid label value {value!r}")
        if op in ("<", ">") and not value.lstrip("-").isdigit():
            raise _bad_request(f"unable to parse requirement: {value!r} is not an integer")
    return _Requirement(key, op, frozenset(values))


def _parse_fields(resource: str, selector: str) -> list[_Requirement]:
    """Parse a field selector (``a=b,c!=d``) over the fields ``resource`` supports."""
    known = {"metadata.name", "metadata.namespace", *_FIELDS.get(resource, {})}
    requirements = []
    for part in re.split(r"(?<!\\),", selector):
        if not part:
            continue
        m = re.fullmatch(r"((?:\\.|[^=!\\])+)(==|=|!=)(.*)", part)
        if m is None:
            raise _bad_request(f"invalid selector: '{selector}'; can't understand '{part}'")
        label, op, value = m[1].strip(), "!=" if m[2] == "!=" else "=", m[3]
        if label not in known:
            raise _bad_request(
                f"field label not supported: {label}"
                if resource in _FIELDS
                else f'"{label}" is not a known field selector: only "metadata.name", '
                '"metadata.namespace"'
            )
        requirements.append(_Requirement(label, op, frozenset({re.sub(r"\\(.)", r"\1", value)})))
    return requirements


@dataclass(frozen=True, slots=True)
class _Selection:
    """What a list or watch asks for: a resource, a namespace (None: all), selectors."""

    resource: str
    namespace: str | None
    labels: list[_Requirement]
    fields: list[_Requirement]

    def matches(self, entry: _Entry) -> bool:
        return all(r.matches(entry.labels) for r in self.labels) and all(
            r.matches(entry.fields) for r in self.fields
        )

    def bounds(self, snap: _Snapshot) -> tuple[int, int]:
        """The slice of ``snap`` in the namespace."""
        if self.namespace is None:
            return 0, len(snap.keys)
        return (
            bisect.bisect_left(snap.keys, (self.namespace, "")),
            bisect.bisect_left(snap.keys, (self.namespace + "\0", "")),
        )


def _not_found(resource: str, name: str) -> _Failure:
    r = RESOURCES[resource]
    details = {"name": name, **({"group": r.group} if r.group else {}), "kind": r.plural}
    return _Failure(404, "NotFound", f'{_qualified(r)} "{name}" not found', details)


def _qualified(r: Resource) -> str:
    return f"{r.plural}.{r.group}" if r.group else r.plural


_PATH_NOT_FOUND = "the server could not find the requested resource"


# ---------------------------------------------------------------------------------------
# The server


@dataclass(frozen=True, slots=True)
class _Target:
    """What a resource URL names."""

    resource: str  # a RESOURCES key
    namespace: str | None
    name: str | None
    subresource: str | None  # "log" for pods/log


@dataclass(frozen=True, slots=True)
class _Format:
    """How objects are written: as stored, or as a Table (``table``: its apiVersion)."""

    table: str | None
    include: str  # Table rows' object: Metadata | Object | None

    def objects(self, entries: Iterable[_Entry], meta: Mapping[str, Any], r: Resource) -> bytes:
        if self.table is None:
            head: dict[str, Any] = {
                "kind": f"{r.kind}List",
                "apiVersion": r.api_version,
                "metadata": meta,
            }
            return _dumps(head)[:-1] + b',"items":[' + b",".join(e.raw for e in entries) + b"]}"
        now, table = time.time(), self.table
        head = {
            "kind": "Table",
            "apiVersion": table,
            "metadata": meta,
            "columnDefinitions": _COLUMNS,
        }
        rows = b",".join(self._row(e, now, table) for e in entries)
        return _dumps(head)[:-1] + b',"rows":[' + rows + b"]}"

    def object(self, entry: _Entry, r: Resource) -> bytes:
        if self.table is None:
            return entry.raw
        return self.objects([entry], {"resourceVersion": str(entry.rv)}, r)

    def _row(self, e: _Entry, now: float, table: str) -> bytes:
        created = _parse_time(e.created)
        age = "<unknown>" if created is None else _human_duration(now - created)
        row = b'{"cells":' + _dumps([e.key[1], age])
        if self.include == "None":
            return row + b"}"
        if self.include == "Object":
            return row + b',"object":' + e.raw + b"}"
        partial = b'{"kind":"PartialObjectMetadata","apiVersion":"' + table.encode()
        return row + b',"object":' + partial + b'","metadata":' + e.meta_raw + b"}}"


class ApiServer:
    """Serves an ``ObjectStore`` as a read-only Kubernetes API over HTTPS.

    ``forbidden`` holds (verb, resource) pairs the token may not use, as RBAC would refuse
    them ("list", "endpointslices"; "get", "pods/log"); ``unserved`` API groups are left
    out of discovery and answer 404, like an older or trimmed server.
    """

    def __init__(
        self,
        store: ObjectStore,
        token: str,
        version: str = "v1.31.4-lab",
        *,
        user: str = "system:serviceaccount:lab:svcdoctor",
        forbidden: Collection[tuple[str, str]] = (),
        unserved: Collection[str] = (),
        bookmark_interval: float = 60.0,
    ) -> None:
        self._store = store
        self._token = token
        self._version = version
        self._user = user
        self._forbidden = frozenset(forbidden)
        self._served = {k: r for k, r in RESOURCES.items() if r.group not in unserved}
        self._by_path = {(r.group, r.version, r.plural): k for k, r in self._served.items()}
        self._bookmark_interval = bookmark_interval
        self.url = ""
        self.ca_pem = b""
        self._address = ""
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed = asyncio.Event()
        self._wake_pending = False
        self._closing = False

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        """Listen on ``host:port`` (0: any free port) with a fresh CA and certificate."""
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        certs = tls.issue(tuple(dict.fromkeys(("127.0.0.1", "localhost", host))))
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._handle)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, ssl_context=certs.ssl_context())
        await site.start()
        bound_port = self._runner.addresses[0][1]
        self._address = f"[{host}]:{bound_port}" if ":" in host else f"{host}:{bound_port}"
        self.url = f"https://{self._address}"
        self.ca_pem = certs.ca_pem
        self._store._subscribe(self._on_change)

    def kubeconfig(self, context: str = "svcdoctor-lab", namespace: str = "lab") -> dict[str, Any]:
        """A kubeconfig for this server: its CA, the token, ``context`` as current context."""
        if not self.url:
            raise RuntimeError("the API server is not started")
        return _kubeconfig.kubeconfig(self.url, self.ca_pem, self._token, context, namespace)

    def write_kubeconfig(
        self, path: Path, context: str = "svcdoctor-lab", namespace: str = "lab"
    ) -> None:
        """Write ``kubeconfig()`` to ``path`` (mode 0600)."""
        _kubeconfig.write(path, self.kubeconfig(context, namespace))

    async def close(self) -> None:
        """End open watches and stop listening."""
        if self._runner is None:
            return
        self._store._unsubscribe(self._on_change)
        self._closing = True
        self._wake()
        await self._runner.cleanup()
        self._runner = None

    # -- change notification (put() may run on any thread)

    def _on_change(self) -> None:
        if self._wake_pending or self._loop is None:
            return
        self._wake_pending = True
        self._loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        self._wake_pending = False
        self._changed.set()
        self._changed = asyncio.Event()

    # -- requests

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._serve(request)
        except _Failure as failure:
            return _json(_dumps(failure.status), failure.code)

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok")
        self._authenticate(request)
        if request.method != "GET":
            raise _Failure(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            )
        document = self._discovery(path)
        if document is not None:
            return _json(_dumps(document))
        target = self._target(path)
        watch = _bool(request.query.get("watch"))
        verb = "watch" if watch else "get" if target.name else "list"
        self._authorize(verb, target)
        if target.subresource:
            return await self._pod_log(request, target)
        if watch:
            return await self._watch(request, target)
        if target.name:
            return self._get(request, target)
        return self._list(request, target)

    def _authenticate(self, request: web.Request) -> None:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            token.strip().encode(), self._token.encode()
        ):
            raise _Failure(401, "Unauthorized", "Unauthorized")

    def _authorize(self, verb: str, t: _Target) -> None:
        rbac = f"{t.resource}/{t.subresource}" if t.subresource else t.resource
        if (verb, rbac) not in self._forbidden:
            return
        r = RESOURCES[t.resource]
        who = f'{_qualified(r)} "{t.name}"' if t.name else _qualified(r)
        what = f"{r.plural}/{t.subresource}" if t.subresource else r.plural
        scope = f'in the namespace "{t.namespace}"' if t.namespace else "at the cluster scope"
        details = {"group": r.group, "kind": r.plural, **({"name": t.name} if t.name else {})}
        raise _Failure(
            403,
            "Forbidden",
            f'{who} is forbidden: User "{self._user}" cannot {verb} resource "{what}" '
            f'in API group "{r.group}" {scope}',
            details,
        )

    def _target(self, path: str) -> _Target:
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise _Failure(404, "NotFound", _PATH_NOT_FOUND)
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        key = self._by_path.get((group, version, rest[0]))
        if (
            key is None
            or len(rest) > 3
            or (namespace is not None and not RESOURCES[key].namespaced)
            or (len(rest) == 3 and (key, rest[2]) != ("pods", "log"))
        ):
            raise _Failure(404, "NotFound", _PATH_NOT_FOUND)
        name = rest[1] if len(rest) > 1 else None
        return _Target(key, namespace, name, rest[2] if len(rest) > 2 else None)

    # -- discovery

    def _discovery(self, path: str) -> dict[str, Any] | None:
        groups = self._groups()
        parts = path.strip("/").split("/")
        if path == "/version":
            return self._version_document()
        if path == "/api":
            cidrs = [{"clientCIDR": "0.0.0.0/0", "serverAddress": self._address}]
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": cidrs}
        if path == "/apis":
            items = [_group_document(g, vs) for g, vs in groups.items()]
            for item in items:
                del item["kind"], item["apiVersion"]
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": items}
        if parts[0] == "apis" and len(parts) == 2 and parts[1] in groups:
            return _group_document(parts[1], groups[parts[1]])
        if parts[0] == "api" and len(parts) == 2:
            return self._resource_list("", parts[1])
        if parts[0] == "apis" and len(parts) == 3:
            return self._resource_list(parts[1], parts[2])
        return None

    def _version_document(self) -> dict[str, str]:
        machine = platform.machine()
        m = re.match(r"v(\d+)\.(\d+)", self._version)
        return {
            "major": m[1] if m else "",
            "minor": m[2] if m else "",
            "gitVersion": self._version,
            "gitCommit": "",
            "gitTreeState": "clean",
            "buildDate": "",
            "goVersion": "",
            "compiler": platform.python_implementation().lower(),
            "platform": f"{sys.platform}/{_GOARCH.get(machine, machine)}",
        }

    def _groups(self) -> dict[str, list[str]]:
        """Served API groups (not core) with their versions, in the table's order."""
        groups: dict[str, list[str]] = {}
        for r in self._served.values():
            if r.group and r.version not in groups.setdefault(r.group, []):
                groups[r.group].append(r.version)
        return groups

    def _resource_list(self, group: str, version: str) -> dict[str, Any] | None:
        served = [
            (k, r) for k, r in self._served.items() if (r.group, r.version) == (group, version)
        ]
        if not served:
            return None
        resources: list[dict[str, Any]] = []
        for key, r in served:
            doc: dict[str, Any] = {
                "name": r.plural,
                "singularName": r.kind.lower(),
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "list", "watch"],
            }
            if r.short_names:
                doc["shortNames"] = list(r.short_names)
            if key in _ALL_CATEGORY:
                doc["categories"] = ["all"]
            resources.append(doc)
            if key == "pods":
                log = {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod"}
                resources.append({**log, "verbs": ["get"]})
        group_version = f"{group}/{version}" if group else version
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": resources,
        }

    # -- get and list

    def _get(self, request: web.Request, t: _Target) -> web.Response:
        assert t.name is not None
        entry = self._store._entry(t.resource, t.namespace, t.name)
        if entry is None:
            raise _not_found(t.resource, t.name)
        return _json(_format(request).object(entry, RESOURCES[t.resource]))

    def _list(self, request: web.Request, t: _Target) -> web.Response:
        sel = _selection(t, request.query)
        limit = _int(request.query, "limit", 0)
        snap, rv, start = self._resume(t, request.query.get("continue", ""))
        low, high = sel.bounds(snap)
        items, end = [], max(start, low)
        for i in range(max(start, low), high):
            end = i + 1
            if sel.matches(snap.entries[i]):
                items.append(snap.entries[i])
                if len(items) == limit:
                    break
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if end < high:
            meta["continue"] = _continue_token(snap.id, end, rv, t)
            if not sel.labels and not sel.fields:
                meta["remainingItemCount"] = high - end
        return _json(_format(request).objects(items, meta, RESOURCES[t.resource]))

    def _resume(self, t: _Target, token: str) -> tuple[_Snapshot, int, int]:
        """The snapshot, resourceVersion and offset a list (continued by ``token``) reads."""
        if not token:
            snap, rv = self._store._snapshot(t.resource)
            return snap, rv, 0
        try:
            data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            snapshot_id, offset, rv = int(data["s"]), int(data["o"]), int(data["rv"])
            valid = data["w"] == [t.resource, t.namespace or ""]
        except (ValueError, KeyError, TypeError):
            valid = False
        if not valid:
            raise _bad_request("continue key is not valid")
        found = self._store._snapshot_by_id(snapshot_id)
        if found is None:
            raise _Failure(
                410,
                "Expired",
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter.",
            )
        return found, rv, offset

    # -- watch

    async def _watch(self, request: web.Request, t: _Target) -> web.StreamResponse:
        query = request.query
        sel, fmt = _selection(t, query), _format(request)
        timeout = _int(query, "timeoutSeconds", 0) or _WATCH_TIMEOUT
        bookmarks = _bool(query.get("allowWatchBookmarks"))
        rv = _int(query, "resourceVersion", 0)
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        if rv == 0 or _bool(query.get("sendInitialEvents")):
            snap, rv = self._store._snapshot(t.resource)
            low, high = sel.bounds(snap)
            added = [e for e in snap.entries[low:high] if sel.matches(e)]
            for i in range(0, len(added), 500):
                lines = (
                    _event("ADDED", fmt.object(e, RESOURCES[t.resource]))
                    for e in added[i : i + 500]
                )
                await response.write(b"".join(lines))
            if bookmarks and _bool(query.get("sendInitialEvents")):
                await response.write(_bookmark(t.resource, rv, initial_events_end=True))
        await self._follow(response, sel, fmt, rv, timeout, bookmarks)
        return response

    async def _follow(
        self,
        response: web.StreamResponse,
        sel: _Selection,
        fmt: _Format,
        rv: int,
        timeout: float,
        bookmarks: bool,
    ) -> None:
        """Send the changes after ``rv`` as they happen, until timeout or close()."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        next_bookmark = loop.time() + self._bookmark_interval
        while not self._closing:
            changed = self._changed
            changes = self._store._changes_since(rv)
            if changes is None:
                expired = _Failure(410, "Expired", f"too old resource version: {rv}")
                await response.write(_event("ERROR", _dumps(expired.status)))
                return
            lines = [line for c in changes if (line := _change_event(c, sel, fmt))]
            rv = changes[-1].rv if changes else rv
            if lines:
                await response.write(b"".join(lines))
            now = loop.time()
            if bookmarks and now >= next_bookmark:
                await response.write(_bookmark(sel.resource, rv))
                next_bookmark = now + self._bookmark_interval
            if now >= deadline:
                return
            wake = min(deadline, next_bookmark) if bookmarks else deadline
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), wake - now)

    # -- pods/log

    async def _pod_log(self, request: web.Request, t: _Target) -> web.StreamResponse:
        assert t.name is not None
        entry = self._store._entry("pods", t.namespace, t.name)
        if entry is None:
            raise _not_found("pods", t.name)
        query = request.query
        container = _container(json.loads(entry.raw), query.get("container"))
        if _bool(query.get("previous")):
            raise _bad_request(
                f'previous terminated container "{container}" in pod "{t.name}" not found'
            )
        logs = self._store._log_source(t.namespace or "", t.name)
        if logs is None:
            return web.Response(body=b"", content_type="text/plain")
        text = await asyncio.to_thread(logs.source, container)
        if not _bool(query.get("follow")):
            body = _select_log(text, logs.timestamped, query)
            return web.Response(body=body, content_type="text/plain")
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        seen = text.rfind("\n") + 1  # whole lines only, here and while following
        await response.write(_select_log(text[:seen], logs.timestamped, query))
        await self._follow_log(response, logs, container, seen, _bool(query.get("timestamps")))
        return response

    async def _follow_log(
        self,
        response: web.StreamResponse,
        logs: _Logs,
        container: str | None,
        seen: int,
        timestamps: bool,
    ) -> None:
        """Send the lines the log gains after offset ``seen``, polling its source."""
        while not self._closing:
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), _LOG_POLL)
            text = await asyncio.to_thread(logs.source, container)
            end = text.rfind("\n") + 1
            if end > seen:
                lines = text[seen:end].splitlines(keepends=True)
                if logs.timestamped and not timestamps:
                    lines = [_strip_time(line) for line in lines]
                await response.write("".join(lines).encode())
                seen = end


def _group_document(group: str, versions: list[str]) -> dict[str, Any]:
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": gvs,
        "preferredVersion": gvs[0],
    }


def _selection(t: _Target, query: Mapping[str, str]) -> _Selection:
    fields = _parse_fields(t.resource, query.get("fieldSelector", ""))
    if t.name:  # a watch on one object's URL
        fields.append(_Requirement("metadata.name", "=", frozenset({t.name})))
    return _Selection(
        t.resource, t.namespace, _parse_labels(query.get("labelSelector", "")), fields
    )


def _format(request: web.Request) -> _Format:
    """Table when the client asks for one first (kubectl's human output), else the objects."""
    for media in request.headers.get("Accept", "").split(","):
        params = {}
        for param in media.split(";")[1:]:
            name, _, value = param.strip().partition("=")
            params[name] = value
        table = params.get("as") == "Table" and params.get("g") == "meta.k8s.io"
        if table and params.get("v") in ("v1", "v1beta1"):
            include = request.query.get("includeObject", "Metadata")
            return _Format(f"meta.k8s.io/{params['v']}", include)
    return _Format(None, "Object")


def _continue_token(snapshot_id: int, offset: int, rv: int, t: _Target) -> str:
    data = {"s": snapshot_id, "o": offset, "rv": rv, "w": [t.resource, t.namespace or ""]}
    return base64.urlsafe_b64encode(_dumps(data)).decode().rstrip("=")


def _event(kind: str, obj: bytes) -> bytes:
    return b'{"type":"' + kind.encode() + b'","object":' + obj + b"}\n"


def _change_event(c: _Change, sel: _Selection, fmt: _Format) -> bytes | None:
    """The watch event ``c`` is for the selection: a change in or out of it is ADDED or
    DELETED, like the real server's filtered watches."""
    if c.resource != sel.resource or sel.namespace not in (None, c.entry.key[0]):
        return None
    now = sel.matches(c.entry)
    was = c.old is not None and sel.matches(c.old)
    kind = c.type
    if kind == "MODIFIED":
        kind = "MODIFIED" if now and was else "ADDED" if now else "DELETED" if was else ""
    elif not now:
        kind = ""
    return _event(kind, fmt.object(c.entry, RESOURCES[c.resource])) if kind else None


def _bookmark(resource: str, rv: int, *, initial_events_end: bool = False) -> bytes:
    r = RESOURCES[resource]
    meta: dict[str, Any] = {"resourceVersion": str(rv), "creationTimestamp": None}
    if initial_events_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return _event(
        "BOOKMARK", _dumps({"kind": r.kind, "apiVersion": r.api_version, "metadata": meta})
    )


def _container(pod: Mapping[str, Any], asked: str | None) -> str | None:
    """The container a log request reads, checked against the pod's spec."""
    spec = pod.get("spec") or {}
    name = pod["metadata"]["name"]
    main = [c["name"] for c in spec.get("containers") or []]
    other = [
        c["name"] for k in ("initContainers", "ephemeralContainers") for c in spec.get(k) or []
    ]
    if asked:
        if main and asked not in main + other:
            raise _bad_request(f"container {asked} is not valid for pod {name}")
        return asked
    if len(main) > 1:
        raise _bad_request(
            f"a container name must be specified for pod {name}, choose one of: [{' '.join(main)}]"
        )
    return main[0] if main else None


def _select_log(text: str, timestamped: bool, query: Mapping[str, str]) -> bytes:
    """Apply sinceSeconds/sinceTime (timestamped logs), timestamps, tailLines, limitBytes."""
    lines = text.splitlines(keepends=True)
    if timestamped:
        since = _since(query)
        stamped = [(_parse_time(line.partition(" ")[0]), line) for line in lines]
        if since is not None:
            stamped = [(at, line) for at, line in stamped if at is None or at >= since]
        keep = _bool(query.get("timestamps"))
        lines = [line if keep else _strip_time(line) for _, line in stamped]
    tail = _int(query, "tailLines", -1)
    if tail >= 0:
        lines = lines[max(len(lines) - tail, 0) :]
    data = "".join(lines).encode()
    limit = _int(query, "limitBytes", 0)
    return data[:limit] if limit > 0 else data


def _strip_time(line: str) -> str:
    """The line without its leading RFC 3339 time (lines without one are kept whole)."""
    stamp, _, rest = line.partition(" ")
    return rest if _parse_time(stamp) is not None else line


def _since(query: Mapping[str, str]) -> float | None:
    if "sinceSeconds" in query:
        return time.time() - _int(query, "sinceSeconds", 0)
    if "sinceTime" in query:
        since = _parse_time(query["sinceTime"])
        if since is None:
            raise _bad_request(f"invalid sinceTime {query['sinceTime']!r}")
        return since
    return None


_TIME = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)")


def _parse_time(text: str) -> float | None:
    """Seconds since the epoch of an RFC 3339 time (nanoseconds allowed), or None."""
    m = _TIME.fullmatch(text)
    if m is None:
        return None
    zone = "+00:00" if m[3] == "Z" else m[3]
    return dt.datetime.fromisoformat(m[1] + zone).timestamp() + float(m[2] or 0)


def _human_duration(seconds: float) -> str:
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


def _bool(value: str | None) -> bool:
    return value in ("1", "t", "T", "true", "TRUE", "True")


def _int(query: Mapping[str, str], name: str, default: int) -> int:
    value = query.get(name, "")
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        raise _bad_request(f"invalid {name}: {value!r} is not an integer") from None


def _json(body: bytes, status: int = 200) -> web.Response:
    return web.Response(body=body, status=status, content_type="application/json")
