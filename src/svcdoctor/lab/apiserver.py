"""A small, honest Kubernetes API server for the lab, in memory, over HTTPS.

``ObjectStore`` holds Kubernetes-shaped objects (the resources of ``SERVED``:
``svcdoctor.cluster.resources.RESOURCES`` plus batch/v1 Jobs) and a bounded log of their
changes; ``ApiServer`` serves it the way kube-apiserver does for the calls kubectl and
svcdoctor make: version, discovery, get, list (selectors, pagination over a consistent
snapshot, Table output), watch (resourceVersions, bookmarks, ``410 Gone``) and ``pods/log``
(also followed), behind bearer tokens authorized per verb (``forbidden`` pairs, or RBAC
``Rule``s read from a Role file with ``rbac_rules``).

Writes (``WRITABLE``): create, delete, deletecollection and patch of ConfigMaps, Pods and
Jobs, patch of Deployments and StatefulSets. Creates fill the metadata (name from
``generateName``, uid, resourceVersion, creationTimestamp, namespace) and the defaults
kubectl shows, answer ``409 AlreadyExists`` and ``422 Invalid`` with real Status objects, and
honour ``dryRun=All``. Deletes take ``gracePeriodSeconds`` and ``propagationPolicy`` from
the query or a DeleteOptions body, and preconditions. Patches are JSON merge patches, JSON
patches (RFC 6902) and strategic merge patches (maps merged; the lists Kubernetes merges by a
key — containers, volumes, env, ports, volumeMounts … — merged by it, other lists replaced;
``$patch: replace|delete`` honoured, other directives ignored). Bodies are JSON: kubectl's
typed generators (``kubectl create configmap|job NAME``) send protobuf and get ``415``;
``kubectl create -f``, ``kubectl run``, deletes and patches send JSON. ``/openapi/v3`` lists
only the writable kinds' PATCH operations: enough for kubectl to leave field validation and
dry runs to the server.

The lab acts on writes through one hook per resource, ``ApiServer.admit(resource,
handler)``. ``handler(Admission)`` runs on the server's event loop before the store changes
(sync or async) and

* refuses by raising ``StatusError`` (``invalid(...)`` builds a 422): nothing is stored;
* returns None: the server does the default — store the created or patched object, or
  remove the deleted one now;
* returns an object: it is stored instead (create, patch), or, for a delete, stored as the
  object being deleted gracefully (the lab removes it later with ``ObjectStore.delete``);
* is called with ``dry_run`` set for ``dryRun=All`` requests: it may refuse, must not act,
  and nothing is stored whatever it returns.

The server stores the admitted object before it yields to the event loop again, so a handler
that schedules work (``loop.call_soon``, a task) finds it stored. The lab updates status with
``ObjectStore.put``/``delete``. Each object is encoded once, when it is put; lists and
watches join the stored bytes. A store without Namespace objects serves every namespace;
once it holds some, creates in other namespaces are ``404 NotFound``.
"""

from __future__ import annotations

import asyncio
import base64
import bisect
import contextlib
import copy
import datetime as dt
import enum
import hmac
import inspect
import json
import platform
import random
import re
import secrets
import sys
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web
from multidict import MultiMapping

from svcdoctor.cluster.resources import RESOURCES, Resource
from svcdoctor.lab import kubeconfig as _kubeconfig
from svcdoctor.lab import tls

LogSource = Callable[[str | None], str]
"""``source(container)`` → the container's whole log text now."""

SERVED: dict[str, Resource] = {**RESOURCES, "jobs": Resource("jobs", "Job", "batch", "v1")}
"""What the lab API serves: what svcdoctor reads, and the Jobs it runs its agent in."""

WRITABLE: dict[str, frozenset[str]] = {
    **dict.fromkeys(
        ("configmaps", "pods", "jobs"),
        frozenset({"create", "delete", "deletecollection", "patch"}),
    ),
    **dict.fromkeys(("deployments", "statefulsets"), frozenset({"patch"})),
}
"""The write verbs each resource takes; the others are read-only."""

_Key = tuple[str, str]  # (namespace, or "" for cluster-scoped objects; name)
_BY_KIND = {(r.api_version, r.kind): key for key, r in SERVED.items()}
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
        self._objects: dict[str, dict[_Key, _Entry]] = {key: {} for key in SERVED}
        self._current: dict[str, _Snapshot] = {}  # per resource, until it changes
        self._snapshots: OrderedDict[int, _Snapshot] = OrderedDict()
        self._snapshot_ids = 0
        self._log: deque[_Change] = deque(maxlen=log_size)
        self._logs: dict[_Key, _Logs] = {}
        self._listeners: list[Callable[[], None]] = []

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Add or replace ``obj``; fill uid, resourceVersion, creationTimestamp; return it."""
        return self._write(obj, new=False)

    def select(
        self, api_version: str, kind: str, namespace: str | None = None, labels: str = ""
    ) -> list[dict[str, Any]]:
        """Copies of the stored objects of a kind, in ``namespace`` (None: all) matching the
        label selector ``labels`` (``"job-name=x"``), sorted by namespace and name."""
        resource = _resource_of(api_version, kind)
        selection = _Selection(resource, namespace, _parse_labels(labels), [])
        return [json.loads(e.raw) for e in self._entries(selection)]

    def _write(self, obj: dict[str, Any], *, new: bool) -> dict[str, Any]:
        """Add or replace ``obj``; with ``new``, a stored object of that name is a conflict
        (``409 AlreadyExists``), checked under the same lock as the write."""
        resource, key = _identify(obj)
        meta = dict(obj.get("metadata") or {})
        if SERVED[resource].namespaced:
            meta["namespace"] = key[0]
        else:
            meta.pop("namespace", None)
        with self._lock:
            old = self._objects[resource].get(key)
            if new and old is not None:
                raise _already_exists(resource, key[1])
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

    def _entries(self, selection: _Selection) -> list[_Entry]:
        """The entries ``selection`` matches now, sorted (no snapshot is kept)."""
        with self._lock:
            found = [
                entry
                for (namespace, _), entry in self._objects[selection.resource].items()
                if selection.namespace in (None, namespace) and selection.matches(entry)
            ]
        return sorted(found, key=lambda e: e.key)

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

    def _version(self) -> int:
        """The resourceVersion of now."""
        with self._lock:
            return self._rv

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
    return ((namespace or "") if SERVED[resource].namespaced else "", name)


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


class StatusError(Exception):
    """An error the server answers with a Status object (``code``, ``reason``, ``message``,
    optional ``details``); admission handlers raise it to refuse a write."""

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


def _bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def invalid(obj: Mapping[str, Any], field_path: str, value: Any, detail: str) -> StatusError:
    """``422 Invalid`` for ``obj`` as kube-apiserver words it: ``Job.batch "x" is invalid:
    FIELD: Invalid value: VALUE: DETAIL``."""
    return _invalid(obj, [_Cause(_Why.INVALID, field_path, value, detail)])


class _Why(enum.StrEnum):
    """The reasons of a 422's causes (apimachinery's ``field.ErrorType``)."""

    REQUIRED = "FieldValueRequired"
    INVALID = "FieldValueInvalid"
    NOT_SUPPORTED = "FieldValueNotSupported"
    DUPLICATE = "FieldValueDuplicate"
    NOT_FOUND = "FieldValueNotFound"

    @property
    def words(self) -> str:
        """How a cause's message starts."""
        return {
            _Why.REQUIRED: "Required value",
            _Why.INVALID: "Invalid value",
            _Why.NOT_SUPPORTED: "Unsupported value",
            _Why.DUPLICATE: "Duplicate value",
            _Why.NOT_FOUND: "Not found",
        }[self]


@dataclass(frozen=True, slots=True)
class _Cause:
    """One field error of a 422, as apimachinery's ``field.Error``."""

    reason: _Why
    field: str
    value: Any = None
    detail: str = ""

    def message(self) -> str:
        head = self.reason.words
        if self.reason != _Why.REQUIRED:
            head += ": " + json.dumps(self.value, ensure_ascii=False)
        return f"{head}: {self.detail}" if self.detail else head


def _invalid(obj: Mapping[str, Any], causes: Sequence[_Cause]) -> StatusError:
    resource = _BY_KIND.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
    r = SERVED[resource] if resource else None
    kind = str(obj.get("kind") or "Object")
    qualified = f"{kind}.{r.group}" if r and r.group else kind
    found = obj.get("metadata")
    meta: Mapping[str, Any] = found if isinstance(found, dict) else {}
    name = str(meta.get("name") or meta.get("generateName") or "")
    texts = [f"{c.field}: {c.message()}" for c in causes]
    listed = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    details: dict[str, Any] = {"name": name, **({"group": r.group} if r and r.group else {})}
    details["kind"] = kind
    details["causes"] = [
        {"reason": c.reason, "message": c.message(), "field": c.field} for c in causes
    ]
    return StatusError(422, "Invalid", f'{qualified} "{name}" is invalid: {listed}', details)


def _already_exists(resource: str, name: str) -> StatusError:
    r = SERVED[resource]
    details = {"name": name, **({"group": r.group} if r.group else {}), "kind": r.plural}
    return StatusError(409, "AlreadyExists", f'{_qualified(r)} "{name}" already exists', details)


def _conflict(resource: str, name: str, why: str) -> StatusError:
    r = SERVED[resource]
    details = {"name": name, **({"group": r.group} if r.group else {}), "kind": r.plural}
    message = f'Operation cannot be fulfilled on {_qualified(r)} "{name}": {why}'
    return StatusError(409, "Conflict", message, details)


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


def _not_found(resource: str, name: str) -> StatusError:
    r = SERVED[resource]
    details = {"name": name, **({"group": r.group} if r.group else {}), "kind": r.plural}
    return StatusError(404, "NotFound", f'{_qualified(r)} "{name}" not found', details)


def _qualified(r: Resource) -> str:
    return f"{r.plural}.{r.group}" if r.group else r.plural


_PATH_NOT_FOUND = "the server could not find the requested resource"


# ---------------------------------------------------------------------------------------
# Writes: admission, authorization rules, validation, defaults, patches (pure)


class Verb(enum.StrEnum):
    """The writes an admission handler sees."""

    CREATE = "create"
    DELETE = "delete"
    PATCH = "patch"


class Propagation(enum.StrEnum):
    """A delete's propagationPolicy: what happens to the objects the deleted one owns."""

    ORPHAN = "Orphan"
    BACKGROUND = "Background"
    FOREGROUND = "Foreground"


class PatchType(enum.StrEnum):
    """The patch formats the server applies (by Content-Type)."""

    STRATEGIC = "strategic"  # application/strategic-merge-patch+json
    MERGE = "merge"  # application/merge-patch+json (RFC 7386)
    JSON = "json"  # application/json-patch+json (RFC 6902)


@dataclass(frozen=True, slots=True)
class Admission:
    """One write, as an admission handler sees it (see the module docstring).

    ``obj`` is what the server would store: the created object (metadata and defaults
    filled), the patched object, or for a delete the stored object marked for deletion
    (``deletionTimestamp``, ``deletionGracePeriodSeconds``); ``old`` the stored object
    before a patch or delete. ``grace_seconds`` and ``propagation`` are a delete's options
    as asked (None: not asked: pods then use ``terminationGracePeriodSeconds``, and the
    default propagation is Orphan for Jobs, Background otherwise); ``patch_type``
    (strategic | merge | json) and ``patch`` a patch's, decoded.
    """

    verb: Verb
    resource: str
    namespace: str
    name: str
    obj: dict[str, Any]
    old: dict[str, Any] | None = None
    dry_run: bool = False
    grace_seconds: int | None = None
    propagation: Propagation | None = None
    patch_type: PatchType | None = None
    patch: Any = None


Handler = Callable[[Admission], dict[str, Any] | Awaitable[dict[str, Any] | None] | None]
"""An admission handler: refuse (raise ``StatusError``), accept (None) or replace (a dict)."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One RBAC PolicyRule, granted in ``namespace`` (a Role's) or everywhere (None: a
    ClusterRole's); ``"*"`` matches any verb, group or resource."""

    verbs: frozenset[str]
    groups: frozenset[str]
    resources: frozenset[str]  # "pods", "pods/log"
    names: frozenset[str] = frozenset()  # resourceNames: only requests naming one of them
    namespace: str | None = None

    def allows(
        self, verb: str, group: str, resource: str, namespace: str | None, name: str | None
    ) -> bool:
        plural, _, sub = resource.partition("/")
        return (
            bool(self.verbs & {verb, "*"})
            and bool(self.groups & {group, "*"})
            and bool(self.resources & {resource, "*", f"*/{sub}" if sub else plural})
            and (not self.names or name in self.names)
            and (self.namespace is None or self.namespace == namespace)
        )


def rbac_rules(text: str, namespace: str) -> tuple[Rule, ...]:
    """The rules of the Roles and ClusterRoles in a YAML text (other kinds are ignored):
    Role rules hold in ``namespace`` (the file's ``NAMESPACE`` placeholder or any namespace
    it names is replaced by it), ClusterRole rules everywhere."""
    rules = []
    for doc in yaml.safe_load_all(text):
        if not isinstance(doc, dict) or doc.get("kind") not in ("Role", "ClusterRole"):
            continue
        scope = namespace if doc["kind"] == "Role" else None
        for rule in doc.get("rules") or []:
            rules.append(
                Rule(
                    frozenset(rule.get("verbs") or ()),
                    frozenset(rule.get("apiGroups") or ()),
                    frozenset(rule.get("resources") or ()),
                    frozenset(rule.get("resourceNames") or ()),
                    scope,
                )
            )
    return tuple(rules)


@dataclass(frozen=True, slots=True)
class _Identity:
    """Who a token is, and what it may do: ``rules`` when given, else all but ``forbidden``."""

    user: str
    rules: tuple[Rule, ...] | None
    forbidden: frozenset[tuple[str, str]] = frozenset()

    def allows(self, verb: str, t: _Target) -> bool:
        r = SERVED[t.resource]
        if self.rules is None:
            key = f"{t.resource}/{t.subresource}" if t.subresource else t.resource
            return (verb, key) not in self.forbidden
        rbac = f"{r.plural}/{t.subresource}" if t.subresource else r.plural
        return any(rule.allows(verb, r.group, rbac, t.namespace, t.name) for rule in self.rules)


_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_SUBDOMAIN_TEXT = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_LABEL_TEXT = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_CONFIG_KEY_TEXT = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. "
    "'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
)
_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # apimachinery's utilrand alphabet
_JOB_LABELS = ("batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _validate(resource: str, obj: Mapping[str, Any]) -> list[_Cause]:
    """The field errors of an object about to be stored (empty: valid)."""
    causes = _validate_meta(obj.get("metadata"), resource)
    spec = obj.get("spec")
    if resource == "configmaps":
        causes += _validate_configmap(obj)
    elif resource == "pods":
        causes += _validate_pod_spec(spec, "spec", _RESTART_POLICIES)
    elif resource == "jobs":
        causes += _validate_job(spec)
    elif spec is not None and not isinstance(spec, dict):
        causes.append(_Cause(_Why.INVALID, "spec", spec, "must be an object"))
    return causes


def _validate_meta(meta: Any, resource: str) -> list[_Cause]:
    if not isinstance(meta, dict):
        return [_Cause(_Why.REQUIRED, "metadata.name", None, "name is required")]
    causes: list[_Cause] = []
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        causes.append(_Cause(_Why.REQUIRED, "metadata.name", None, "name is required"))
    elif len(name) > 253 or not _SUBDOMAIN.fullmatch(name):
        causes.append(_Cause(_Why.INVALID, "metadata.name", name, _SUBDOMAIN_TEXT))
    elif resource == "jobs" and len(name) > 63:
        causes.append(
            _Cause(_Why.INVALID, "metadata.name", name, "must be no more than 63 characters")
        )
    for what in ("labels", "annotations"):
        causes += _validate_strings(meta.get(what), f"metadata.{what}", labels=what == "labels")
    return causes


def _validate_strings(value: Any, path: str, *, labels: bool = False) -> list[_Cause]:
    if value is None:
        return []
    if not isinstance(value, dict):
        return [_Cause(_Why.INVALID, path, value, "must be a map of strings")]
    causes = []
    for key, item in value.items():
        if not isinstance(item, str):
            causes.append(_Cause(_Why.INVALID, f"{path}[{key}]", item, "must be a string"))
        elif labels and (
            not _LABEL_KEY.fullmatch(key)
            or len(key.rpartition("/")[2]) > 63
            or not _LABEL_VALUE.fullmatch(item)
            or len(item) > 63
        ):
            causes.append(
                _Cause(_Why.INVALID, path, {key: item}, "not a valid label key and value")
            )
    return causes


def _validate_configmap(obj: Mapping[str, Any]) -> list[_Cause]:
    causes: list[_Cause] = []
    for what in ("data", "binaryData"):
        causes += _validate_strings(obj.get(what), what)
        values = obj.get(what)
        for key in values if isinstance(values, dict) else {}:
            if len(key) > 253 or not _CONFIG_KEY.fullmatch(key):
                causes.append(_Cause(_Why.INVALID, what, key, _CONFIG_KEY_TEXT))
    binary = obj.get("binaryData")
    for key, value in (binary if isinstance(binary, dict) else {}).items():
        try:
            base64.b64decode(str(value), validate=True)
        except ValueError:
            causes.append(_Cause(_Why.INVALID, f"binaryData[{key}]", value, "not base64"))
    return causes


def _validate_pod_spec(spec: Any, path: str, restart: Sequence[str]) -> list[_Cause]:
    if not isinstance(spec, dict):
        return [_Cause(_Why.REQUIRED, f"{path}.containers", None, "")]
    causes: list[_Cause] = []
    volumes: set[str] = set()
    for i, volume in enumerate(_list(spec, "volumes", path, causes)):
        name = volume.get("name") if isinstance(volume, dict) else None
        where = f"{path}.volumes[{i}].name"
        if not isinstance(name, str) or not _DNS_LABEL.fullmatch(name) or len(name) > 63:
            causes.append(_Cause(_Why.INVALID, where, name, _LABEL_TEXT))
        elif name in volumes:
            causes.append(_Cause(_Why.DUPLICATE, where, name))
        else:
            volumes.add(name)
    containers = _list(spec, "containers", path, causes)
    if not containers:
        causes.append(_Cause(_Why.REQUIRED, f"{path}.containers", None, ""))
    names: set[str] = set()
    for i, container in enumerate(containers):
        causes += _validate_container(container, f"{path}.containers[{i}]", names, volumes)
    policy = spec.get("restartPolicy", restart[0])
    if policy not in restart:
        supported = ", ".join(f'"{p}"' for p in restart)
        causes.append(
            _Cause(
                _Why.NOT_SUPPORTED,
                f"{path}.restartPolicy",
                policy,
                f"supported values: {supported}",
            )
        )
    for key, low in (("activeDeadlineSeconds", 1), ("terminationGracePeriodSeconds", 0)):
        causes += _validate_count(spec, key, path, low)
    if not isinstance(spec.get("nodeName", ""), str):
        causes.append(_Cause(_Why.INVALID, f"{path}.nodeName", spec["nodeName"], ""))
    return causes


def _validate_container(
    container: Any, path: str, names: set[str], volumes: set[str]
) -> list[_Cause]:
    if not isinstance(container, dict):
        return [_Cause(_Why.INVALID, path, container, "must be an object")]
    causes: list[_Cause] = []
    name = container.get("name")
    if not name:
        causes.append(_Cause(_Why.REQUIRED, f"{path}.name", None))
    elif not isinstance(name, str) or not _DNS_LABEL.fullmatch(name) or len(name) > 63:
        causes.append(_Cause(_Why.INVALID, f"{path}.name", name, _LABEL_TEXT))
    elif name in names:
        causes.append(_Cause(_Why.DUPLICATE, f"{path}.name", name))
    else:
        names.add(name)
    image = container.get("image")
    if not isinstance(image, str) or not image.strip():
        causes.append(_Cause(_Why.REQUIRED, f"{path}.image", None))
    for key in ("command", "args"):
        value = container.get(key)
        if value is not None and (
            not isinstance(value, list) or not all(isinstance(v, str) for v in value)
        ):
            causes.append(_Cause(_Why.INVALID, f"{path}.{key}", value, "must be strings"))
    for i, env in enumerate(_list(container, "env", path, causes)):
        if not isinstance(env, dict) or not isinstance(env.get("name"), str) or not env["name"]:
            causes.append(_Cause(_Why.REQUIRED, f"{path}.env[{i}].name", None))
        elif "value" in env and not isinstance(env["value"], str):
            causes.append(_Cause(_Why.INVALID, f"{path}.env[{i}].value", env["value"], ""))
    for i, mount in enumerate(_list(container, "volumeMounts", path, causes)):
        where = f"{path}.volumeMounts[{i}]"
        if not isinstance(mount, dict) or not mount.get("mountPath"):
            causes.append(_Cause(_Why.REQUIRED, f"{where}.mountPath", None))
        elif mount.get("name") not in volumes:
            causes.append(_Cause(_Why.NOT_FOUND, f"{where}.name", mount.get("name")))
    return causes


def _list(obj: Mapping[str, Any], key: str, path: str, causes: list[_Cause]) -> list[Any]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        causes.append(_Cause(_Why.INVALID, f"{path}.{key}", value, "must be a list"))
        return []
    return value


def _validate_count(spec: Mapping[str, Any], key: str, path: str, low: int) -> list[_Cause]:
    value = spec.get(key)
    if value is None or (_is_int(value) and value >= low):
        return []
    word = "must be greater than zero" if low else "must be greater than or equal to 0"
    return [_Cause(_Why.INVALID, f"{path}.{key}", value, word)]


def _validate_job(spec: Any) -> list[_Cause]:
    if not isinstance(spec, dict):
        return [_Cause(_Why.REQUIRED, "spec.template", None)]
    causes: list[_Cause] = []
    for key, low in (
        ("activeDeadlineSeconds", 1),
        ("ttlSecondsAfterFinished", 0),
        ("backoffLimit", 0),
        ("completions", 0),
        ("parallelism", 0),
    ):
        causes += _validate_count(spec, key, "spec", low)
    template = spec.get("template")
    if not isinstance(template, dict):
        return [*causes, _Cause(_Why.REQUIRED, "spec.template", None)]
    meta = template.get("metadata")
    causes += _validate_strings(
        meta.get("labels") if isinstance(meta, dict) else None,
        "spec.template.metadata.labels",
        labels=True,
    )
    pod_spec = template.get("spec")
    if isinstance(pod_spec, dict) and "restartPolicy" not in pod_spec:
        pod_spec = {**pod_spec, "restartPolicy": "Always"}  # the pod template's default
    return causes + _validate_pod_spec(pod_spec, "spec.template.spec", ("OnFailure", "Never"))


def _defaults(resource: str, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` (metadata filled) with the defaults kube-apiserver adds, for what kubectl and
    the lab read: a copy."""
    obj = copy.deepcopy(obj)
    meta = obj["metadata"]
    if resource == "pods":
        _pod_defaults(obj.setdefault("spec", {}))
        obj["status"] = {"phase": "Pending", "qosClass": _qos(obj["spec"])}
    elif resource == "jobs":
        spec = obj["spec"]
        uid, name = meta["uid"], meta["name"]
        template = spec["template"]
        labels = template.setdefault("metadata", {}).setdefault("labels", {})
        labels.update(dict.fromkeys(("controller-uid", _JOB_LABELS[0]), uid))
        labels.update(dict.fromkeys(("job-name", _JOB_LABELS[1]), name))
        spec.setdefault("selector", {"matchLabels": {_JOB_LABELS[0]: uid}})
        for key, value in (
            ("parallelism", 1),
            ("completions", 1),
            ("backoffLimit", 6),
            ("completionMode", "NonIndexed"),
            ("suspend", False),
            ("podReplacementPolicy", "TerminatingOrFailed"),
            ("manualSelector", None),
        ):
            if value is not None:
                spec.setdefault(key, value)
        _pod_defaults(template.setdefault("spec", {}))
        if not meta.get("labels"):
            meta["labels"] = dict(labels)
        meta["generation"] = 1
        obj["status"] = {}
    return obj


def _pod_defaults(spec: dict[str, Any]) -> None:
    for key, value in (
        ("restartPolicy", "Always"),
        ("terminationGracePeriodSeconds", 30),
        ("dnsPolicy", "ClusterFirst"),
        ("schedulerName", "default-scheduler"),
        ("serviceAccountName", "default"),
        ("securityContext", {}),
        ("enableServiceLinks", True),
    ):
        spec.setdefault(key, value)
    for kind in ("initContainers", "containers"):
        for container in spec.get(kind) or []:
            image = container.get("image", "")
            latest = ":" not in image.rpartition("/")[2] or image.endswith(":latest")
            container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            container.setdefault("resources", {})


def _qos(spec: Mapping[str, Any]) -> str:
    """The pod's QoS class, from its containers' requests and limits."""
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    resources = [c.get("resources") or {} for c in containers]
    if not any(r.get("requests") or r.get("limits") for r in resources):
        return "BestEffort"
    guaranteed = all(_guaranteed(r) for r in resources)
    return "Guaranteed" if guaranteed else "Burstable"


def _guaranteed(resources: Mapping[str, Any]) -> bool:
    """Limits for cpu and memory, and requests (defaulted to the limits) equal to them."""
    limits = resources.get("limits") or {}
    requests = {**limits, **(resources.get("requests") or {})}
    return all(k in limits and requests[k] == limits[k] for k in ("cpu", "memory"))


def _generated_name(prefix: str) -> str:
    """``generateName`` + 5 random characters, as the apiserver names objects."""
    return prefix[:58] + "".join(random.choice(_NAME_CHARS) for _ in range(5))


class _PatchError(ValueError):
    """A patch that cannot be applied to the object."""


def merge_patch(target: Any, patch: Any) -> Any:
    """``patch`` applied to ``target`` as a JSON merge patch (RFC 7386)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "ownerReferences": "uid",
    "conditions": "type",
}


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """``patch`` applied to ``target`` as a strategic merge patch: maps merged, the lists
    Kubernetes merges by a key merged by it (``_MERGE_KEYS``), other lists replaced;
    ``$patch: replace``/``delete`` honoured, other ``$`` directives ignored."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if not k.startswith("$")}
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue
        if value is None or (isinstance(value, dict) and value.get("$patch") == "delete"):
            result.pop(key, None)
        elif isinstance(value, list) and key in _MERGE_KEYS and isinstance(result.get(key), list):
            result[key] = _merge_list(result[key], value, _MERGE_KEYS[key])
        elif isinstance(value, list):
            result[key] = [v for v in copy.deepcopy(value) if not _is_directive(v)]
        else:
            result[key] = strategic_merge_patch(result.get(key), value)
    return result


def _is_directive(item: Any) -> bool:
    return isinstance(item, dict) and "$patch" in item


def _merge_list(target: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [p for p in copy.deepcopy(patch) if not _is_directive(p)]
    result = list(target)
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            result.append(copy.deepcopy(item))
            continue
        at = next(
            (
                i
                for i, old in enumerate(result)
                if isinstance(old, dict) and old.get(merge_key) == item[merge_key]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if at is not None:
                del result[at]
        elif at is None:
            result.append(strategic_merge_patch({}, item))
        else:
            result[at] = strategic_merge_patch(result[at], item)
    return result


def json_patch(target: Any, operations: Any) -> Any:
    """``operations`` (RFC 6902: add, remove, replace, move, copy, test) applied to a copy
    of ``target``; ``_PatchError`` when one does not apply."""
    if not isinstance(operations, list):
        raise _PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or not isinstance(op.get("path"), str):
            raise _PatchError(f"invalid JSON patch operation {op!r}")
        kind, path = op.get("op"), op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise _PatchError(f'"value" missing in the {kind} operation at {path}')
        if kind == "test":
            if _pointer_get(doc, path) != op["value"]:
                raise _PatchError(f"testing value {path} failed")
        elif kind == "remove":
            doc = _pointer_remove(doc, path)
        elif kind == "add":
            doc = _pointer_add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "replace":
            doc = _pointer_add(_pointer_remove(doc, path), path, copy.deepcopy(op["value"]))
        elif kind in ("move", "copy") and isinstance(op.get("from"), str):
            value = copy.deepcopy(_pointer_get(doc, op["from"]))
            if kind == "move":
                doc = _pointer_remove(doc, op["from"])
            doc = _pointer_add(doc, path, value)
        else:
            raise _PatchError(f"unknown JSON patch operation {kind!r}")
    return doc


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _PatchError(f"JSON pointer {path!r} does not start with /")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _step(doc: Any, part: str, path: str, *, insert: bool = False) -> Any:
    """The child ``part`` of ``doc`` (a list index, ``-`` only when inserting)."""
    if isinstance(doc, dict):
        if part not in doc:
            raise _PatchError(f"doc is missing key: {path}")
        return doc[part]
    if isinstance(doc, list):
        index = _index(doc, part, path, insert=insert)
        if index >= len(doc):
            raise _PatchError(f"index out of bounds: {path}")
        return doc[index]
    raise _PatchError(f"doc is missing path: {path}")


def _index(doc: list[Any], part: str, path: str, *, insert: bool) -> int:
    if insert and part == "-":
        return len(doc)
    if not part.isdigit() or (len(part) > 1 and part.startswith("0")):
        raise _PatchError(f"invalid array index {part!r} in {path}")
    index = int(part)
    if index > len(doc) or (index == len(doc) and not insert):
        raise _PatchError(f"index out of bounds: {path}")
    return index


def _pointer_get(doc: Any, path: str) -> Any:
    for part in _pointer(path):
        doc = _step(doc, part, path)
    return doc


def _pointer_add(doc: Any, path: str, value: Any) -> Any:
    parts = _pointer(path)
    if not parts:
        return value
    parent = doc
    for part in parts[:-1]:
        parent = _step(parent, part, path)
    last = parts[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, insert=True), value)
    else:
        raise _PatchError(f"doc is missing path: {path}")
    return doc


def _pointer_remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return None
    parent = doc
    for part in parts[:-1]:
        parent = _step(parent, part, path)
    last = parts[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _PatchError(f"doc is missing key: {path}")
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, path, insert=False)]
    else:
        raise _PatchError(f"doc is missing path: {path}")
    return doc


_PATCH_TYPES = {
    "application/strategic-merge-patch+json": PatchType.STRATEGIC,
    "application/merge-patch+json": PatchType.MERGE,
    "application/json-patch+json": PatchType.JSON,
}
_PATCHERS: dict[PatchType, Callable[[Any, Any], Any]] = {
    PatchType.STRATEGIC: strategic_merge_patch,
    PatchType.MERGE: merge_patch,
    PatchType.JSON: json_patch,
}


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
        extra = _TABLE_COLUMNS.get(_BY_KIND[(r.api_version, r.kind)])
        columns = _COLUMNS if extra is None else [_COLUMNS[0], *extra[0], _COLUMNS[1]]
        head = {
            "kind": "Table",
            "apiVersion": table,
            "metadata": meta,
            "columnDefinitions": columns,
        }
        cells = None if extra is None else extra[1]
        rows = b",".join(self._row(e, now, table, cells) for e in entries)
        return _dumps(head)[:-1] + b',"rows":[' + rows + b"]}"

    def object(self, entry: _Entry, r: Resource) -> bytes:
        if self.table is None:
            return entry.raw
        return self.objects([entry], {"resourceVersion": str(entry.rv)}, r)

    def _row(self, e: _Entry, now: float, table: str, cells: _Cells | None) -> bytes:
        created = _parse_time(e.created)
        age = "<unknown>" if created is None else _human_duration(now - created)
        extra = [] if cells is None else cells(json.loads(e.raw), now)
        row = b'{"cells":' + _dumps([e.key[1], *extra, age])
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
    start = _parse_time(status.get("startTime") or "")
    end = _parse_time(status.get("completionTime") or "") or now
    duration = "" if start is None else _human_duration(end - start)
    return [state, completions, duration]


_TABLE_COLUMNS: dict[str, tuple[list[dict[str, Any]], _Cells]] = {
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


class ApiServer:
    """Serves an ``ObjectStore`` as a Kubernetes API over HTTPS.

    ``token`` is ``user``'s. It may do what ``rules`` grant when given; otherwise anything
    but the (verb, resource) pairs in ``forbidden``, as RBAC would refuse them ("list",
    "endpointslices"; "get", "pods/log"; "create", "jobs"). ``add_user`` makes more tokens.
    ``unserved`` API groups are left out of discovery and answer 404, like an older or
    trimmed server. ``admit`` installs the lab's hooks on writes.
    """

    def __init__(
        self,
        store: ObjectStore,
        token: str,
        version: str = "v1.31.4-lab",
        *,
        user: str = "system:serviceaccount:lab:svcdoctor",
        forbidden: Collection[tuple[str, str]] = (),
        rules: Iterable[Rule] | None = None,
        unserved: Collection[str] = (),
        bookmark_interval: float = 60.0,
    ) -> None:
        self._store = store
        self._token = token
        self._version = version
        granted = None if rules is None else tuple(rules)
        self._identities = {token: _Identity(user, granted, frozenset(forbidden))}
        self._handlers: dict[str, Handler] = {}
        self._served = {k: r for k, r in SERVED.items() if r.group not in unserved}
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

    def add_user(self, user: str, rules: Iterable[Rule]) -> str:
        """A new token for ``user``, allowed what ``rules`` grant (discovery always)."""
        token = secrets.token_urlsafe(32)
        self._identities[token] = _Identity(user, tuple(rules))
        return token

    def admit(self, resource: str, handler: Handler) -> None:
        """Call ``handler`` on every create, delete and patch of ``resource`` (a key of
        ``WRITABLE``), as the module docstring describes; one handler per resource."""
        if resource not in WRITABLE:
            raise ValueError(f"the lab API does not write {resource}")
        if resource in self._handlers:
            raise ValueError(f"{resource} already has an admission handler")
        self._handlers[resource] = handler

    def kubeconfig(
        self, context: str = "svcdoctor-lab", namespace: str = "lab", token: str | None = None
    ) -> dict[str, Any]:
        """A kubeconfig for this server: its CA, the token (``token``, else the first),
        ``context`` as current context."""
        if not self.url:
            raise RuntimeError("the API server is not started")
        return _kubeconfig.kubeconfig(
            self.url, self.ca_pem, token or self._token, context, namespace
        )

    def write_kubeconfig(
        self,
        path: Path,
        context: str = "svcdoctor-lab",
        namespace: str = "lab",
        token: str | None = None,
    ) -> None:
        """Write ``kubeconfig()`` to ``path`` (mode 0600)."""
        _kubeconfig.write(path, self.kubeconfig(context, namespace, token))

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
        except StatusError as failure:
            return _json(_dumps(failure.status), failure.code)
        except Exception as exc:
            if request.method == "GET":  # a stream may be under way: aiohttp ends it
                raise
            # a write's admission handler failed: answered as kube-apiserver answers a panic
            internal = StatusError(
                500, "InternalError", f"Internal error occurred: {type(exc).__name__}: {exc}"
            )
            return _json(_dumps(internal.status), 500)

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok")
        who = self._authenticate(request)
        document = self._discovery(path)
        if document is not None:
            if request.method != "GET":
                raise _method_not_allowed()
            return _json(_dumps(document))
        target = self._target(path)
        watch = _bool(request.query.get("watch"))
        verb = _VERBS.get(request.method, request.method.lower())
        if request.method == "GET":
            verb = "watch" if watch else "get" if target.name else "list"
        elif request.method == "DELETE" and not target.name:
            verb = "deletecollection"
        self._authorize(who, verb, target)
        if request.method != "GET":
            return await self._write(request, verb, target)
        if target.subresource:
            return await self._pod_log(request, target)
        if watch:
            return await self._watch(request, target)
        if target.name:
            return self._get(request, target)
        return self._list(request, target)

    def _authenticate(self, request: web.Request) -> _Identity:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        given = token.strip().encode()
        if scheme.lower() == "bearer":
            for known, identity in list(self._identities.items()):
                if hmac.compare_digest(given, known.encode()):
                    return identity
        raise StatusError(401, "Unauthorized", "Unauthorized")

    def _authorize(self, who: _Identity, verb: str, t: _Target) -> None:
        if who.allows(verb, t):
            return
        r = SERVED[t.resource]
        subject = f'{_qualified(r)} "{t.name}"' if t.name else _qualified(r)
        what = f"{r.plural}/{t.subresource}" if t.subresource else r.plural
        scope = f'in the namespace "{t.namespace}"' if t.namespace else "at the cluster scope"
        details = {"group": r.group, "kind": r.plural, **({"name": t.name} if t.name else {})}
        raise StatusError(
            403,
            "Forbidden",
            f'{subject} is forbidden: User "{who.user}" cannot {verb} resource "{what}" '
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
            raise StatusError(404, "NotFound", _PATH_NOT_FOUND)
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        key = self._by_path.get((group, version, rest[0]))
        if (
            key is None
            or len(rest) > 3
            or (namespace is not None and not SERVED[key].namespaced)
            or (len(rest) == 3 and (key, rest[2]) != ("pods", "log"))
        ):
            raise StatusError(404, "NotFound", _PATH_NOT_FOUND)
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
        if parts[:2] == ["openapi", "v3"]:
            return self._openapi("/".join(parts[2:]))
        return None

    def _openapi(self, gv_path: str) -> dict[str, Any] | None:
        """OpenAPI v3: the index of group-versions, or one group-version's document with
        the PATCH operations of its writable resources (parameters only, no schemas). That
        much tells kubectl that the server validates fields and dry-runs itself."""
        gvs = {
            f"apis/{r.group}/{r.version}" if r.group else f"api/{r.version}": r
            for r in self._served.values()
        }
        if not gv_path:
            return {"paths": {gv: {"serverRelativeURL": f"/openapi/v3/{gv}"} for gv in gvs}}
        if gv_path not in gvs:
            return None
        group, version = gvs[gv_path].group, gvs[gv_path].version
        params = [
            {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
            for name in ("dryRun", "fieldManager", "fieldValidation", "force")
        ]
        paths: dict[str, Any] = {}
        for key, r in self._served.items():
            if (r.group, r.version) != (group, version) or key not in WRITABLE:
                continue
            operation = {
                "operationId": f"patch{r.kind}",
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {
                    "group": r.group,
                    "version": r.version,
                    "kind": r.kind,
                },
            }
            paths[r.path("{namespace}" if r.namespaced else None, "{name}")] = {"patch": operation}
        info = {"title": "Kubernetes (svcdoctor lab)", "version": self._version}
        return {"openapi": "3.0.0", "info": info, "paths": paths}

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
                "verbs": sorted({"get", "list", "watch", *WRITABLE.get(key, ())}),
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
        return _json(_format(request).object(entry, SERVED[t.resource]))

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
        return _json(_format(request).objects(items, meta, SERVED[t.resource]))

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
            raise StatusError(
                410,
                "Expired",
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter.",
            )
        return found, rv, offset

    # -- writes

    async def _write(self, request: web.Request, verb: str, t: _Target) -> web.Response:
        r = SERVED[t.resource]
        if (
            verb not in WRITABLE.get(t.resource, ())
            or t.subresource
            or (r.namespaced and not t.namespace)
        ):
            raise _method_not_allowed()
        dry_run = _dry_run(request.query)
        if verb == "create":
            body = _decode(await request.read(), request.content_type, ("application/json",))
            return await self._create(t, body, dry_run)
        if verb == "patch":
            patch_type = _PATCH_TYPES.get(request.content_type)
            if patch_type is None:
                raise StatusError(
                    415,
                    "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: {', '.join(_PATCH_TYPES)}",
                )
            patch = _decode(await request.read(), request.content_type, tuple(_PATCH_TYPES))
            return await self._patch(t, patch_type, patch, dry_run)
        options = _delete_options(request.query, await request.read())
        if verb == "delete":
            return await self._delete(t, options, dry_run)
        return await self._delete_collection(request, t, options, dry_run)

    async def _admit(self, admission: Admission) -> dict[str, Any] | None:
        """The handler's answer for ``admission`` (None without a handler)."""
        handler = self._handlers.get(admission.resource)
        if handler is None:
            return None
        answer = handler(admission)
        if inspect.isawaitable(answer):
            answer = await answer
        if answer is not None and not isinstance(answer, dict):
            raise TypeError(f"the {admission.resource} admission handler returned {answer!r}")
        return answer

    async def _create(self, t: _Target, body: Any, dry_run: bool) -> web.Response:
        assert t.namespace is not None or not SERVED[t.resource].namespaced
        namespace = t.namespace or ""
        obj = self._new_object(t, body)
        name = obj["metadata"]["name"]
        if self._store._entry(t.resource, t.namespace, name):  # before the handler acts
            raise _already_exists(t.resource, name)
        admission = Admission(Verb.CREATE, t.resource, namespace, name, obj, dry_run=dry_run)
        answer = await self._admit(admission)
        stored = obj if answer is None else answer
        if dry_run:
            return _json(_dumps(stored), 201)
        return _json(_dumps(self._store._write(stored, new=True)), 201)

    def _new_object(self, t: _Target, body: Any) -> dict[str, Any]:
        """The object a create stores: checked against the URL, named, validated, with its
        metadata and defaults filled."""
        r = SERVED[t.resource]
        if not isinstance(body, dict):
            raise _bad_request(f"the body of a create must be a {r.kind} object")
        if body.get("apiVersion") != r.api_version or body.get("kind") != r.kind:
            raise _bad_request(
                f"the API version in the data ({body.get('apiVersion')}) does not match the "
                f"expected API version ({r.api_version})"
                if body.get("kind") == r.kind
                else f"the kind in the data ({body.get('kind')}) does not match the expected "
                f"kind ({r.kind})"
            )
        meta = body.get("metadata")
        meta = dict(meta) if isinstance(meta, dict) else {}
        if meta.get("namespace") not in (None, "", t.namespace):
            raise _bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        self._check_namespace(t)
        prefix = meta.get("generateName")
        if not meta.get("name") and isinstance(prefix, str) and prefix:
            meta["name"] = _generated_name(prefix)
            for _ in range(8):  # as the apiserver, retry a taken name a few times
                if self._store._entry(t.resource, t.namespace, meta["name"]) is None:
                    break
                meta["name"] = _generated_name(prefix)
        for key in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(key, None)
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now_rfc3339())
        if r.namespaced:
            meta["namespace"] = t.namespace
        obj = {**body, "metadata": meta}
        causes = _validate(t.resource, obj)
        if causes:
            raise _invalid(obj, causes)
        return _defaults(t.resource, obj)

    def _check_namespace(self, t: _Target) -> None:
        """A create in a namespace the store does not hold is 404 (a store holding no
        Namespace objects serves every namespace)."""
        if not t.namespace or self._store._entry("namespaces", None, t.namespace):
            return
        if self._store._entries(_Selection("namespaces", None, [], [])):
            raise _not_found("namespaces", t.namespace)

    async def _patch(
        self, t: _Target, patch_type: PatchType, patch: Any, dry_run: bool
    ) -> web.Response:
        if t.name is None:
            raise _method_not_allowed()
        entry = self._store._entry(t.resource, t.namespace, t.name)
        if entry is None:
            raise _not_found(t.resource, t.name)
        old = json.loads(entry.raw)
        try:
            patched = _PATCHERS[patch_type](old, patch)
        except _PatchError as exc:
            raise StatusError(422, "Invalid", str(exc)) from None
        if not isinstance(patched, dict):
            raise StatusError(422, "Invalid", "the patch does not leave an object")
        patched = self._check_patched(t, old, patched)
        admission = Admission(
            Verb.PATCH,
            t.resource,
            t.namespace or "",
            t.name,
            patched,
            old=old,
            dry_run=dry_run,
            patch_type=patch_type,
            patch=patch,
        )
        answer = await self._admit(admission)
        stored = patched if answer is None else answer
        if dry_run or stored == old:
            return _json(_dumps(stored))
        return _json(_dumps(self._store.put(stored)))

    def _check_patched(
        self, t: _Target, old: dict[str, Any], patched: dict[str, Any]
    ) -> dict[str, Any]:
        """The patched object with what a patch cannot change restored, its resourceVersion
        precondition checked, validated, its generation bumped when its spec changed."""
        assert t.name is not None
        meta = patched.get("metadata")
        meta = dict(meta) if isinstance(meta, dict) else {}
        old_meta = old["metadata"]
        asked_rv = meta.get("resourceVersion")
        if asked_rv not in (None, old_meta.get("resourceVersion")):
            raise _conflict(
                t.resource,
                t.name,
                "the object has been modified; please apply your changes to the latest "
                "version and try again",
            )
        for key in ("name", "namespace", "uid", "creationTimestamp", "resourceVersion"):
            if key in old_meta:
                meta[key] = old_meta[key]
        if "generation" in old_meta:
            changed = patched.get("spec") != old.get("spec")
            meta["generation"] = int(old_meta["generation"]) + (1 if changed else 0)
        patched = {
            **patched,
            "apiVersion": old["apiVersion"],
            "kind": old["kind"],
            "metadata": meta,
        }
        causes = _validate(t.resource, patched)
        if causes:
            raise _invalid(patched, causes)
        return patched

    async def _delete(self, t: _Target, options: _DeleteOptions, dry_run: bool) -> web.Response:
        assert t.name is not None
        entry = self._store._entry(t.resource, t.namespace, t.name)
        if entry is None:
            raise _not_found(t.resource, t.name)
        obj = json.loads(entry.raw)
        return _json(_dumps(await self._delete_one(t.resource, obj, options, dry_run)))

    async def _delete_one(
        self, resource: str, obj: dict[str, Any], options: _DeleteOptions, dry_run: bool
    ) -> dict[str, Any]:
        """Delete one object through its handler; the answer: the object still being
        deleted gracefully, or a Success Status."""
        meta = obj["metadata"]
        name = meta["name"]
        for key, label, want in (
            ("uid", "UID", options.uid),
            ("resourceVersion", "ResourceVersion", options.resource_version),
        ):
            if want is not None and meta.get(key) != want:
                raise _conflict(
                    resource,
                    name,
                    f"Precondition failed: {label} in precondition: {want}, "
                    f"{label} in object meta: {meta.get(key)}",
                )
        grace = options.grace_seconds
        if grace is None and resource == "pods":
            grace = int((obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
        marked = copy.deepcopy(obj)
        marked["metadata"].setdefault("deletionTimestamp", _now_rfc3339())
        marked["metadata"]["deletionGracePeriodSeconds"] = grace or 0
        admission = Admission(
            Verb.DELETE,
            resource,
            meta.get("namespace") or "",
            name,
            marked,
            old=obj,
            dry_run=dry_run,
            grace_seconds=options.grace_seconds,
            propagation=options.propagation,
        )
        answer = await self._admit(admission)
        if answer is not None:
            return answer if dry_run else self._store.put(answer)
        if not dry_run:
            r = SERVED[resource]
            self._store.delete(r.api_version, r.kind, meta.get("namespace"), name)
        return _success(resource, name, str(meta.get("uid", "")))

    async def _delete_collection(
        self, request: web.Request, t: _Target, options: _DeleteOptions, dry_run: bool
    ) -> web.Response:
        sel = _selection(t, request.query)
        items = []
        for listed in self._store._entries(sel):
            entry = self._store._entry(t.resource, *listed.key)
            if entry is None or not sel.matches(entry):
                continue  # gone meanwhile (a handler's doing), or changed out of the selection
            obj = json.loads(entry.raw)
            answer = await self._delete_one(t.resource, obj, options, dry_run)
            items.append(answer if answer.get("kind") != "Status" else obj)
        r = SERVED[t.resource]
        rv = self._store._version()
        head = {"kind": f"{r.kind}List", "apiVersion": r.api_version}
        return _json(_dumps({**head, "metadata": {"resourceVersion": str(rv)}, "items": items}))

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
                    _event("ADDED", fmt.object(e, SERVED[t.resource])) for e in added[i : i + 500]
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
                expired = StatusError(410, "Expired", f"too old resource version: {rv}")
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
        await self._follow_log(
            response, logs, container, seen, _bool(query.get("timestamps")), t.namespace, t.name
        )
        return response

    def _pod_ended(self, namespace: str | None, name: str) -> bool:
        """The pod is gone or its containers have ended (Succeeded or Failed)."""
        entry = self._store._entry("pods", namespace, name)
        if entry is None:
            return True
        phase = json.loads(entry.raw).get("status", {}).get("phase")
        return phase in ("Succeeded", "Failed")

    async def _follow_log(
        self,
        response: web.StreamResponse,
        logs: _Logs,
        container: str | None,
        seen: int,
        timestamps: bool,
        namespace: str | None,
        pod: str,
    ) -> None:
        """Send the lines the log gains after offset ``seen``, polling its source, until the
        pod's containers have ended (as the kubelet ends a followed log) and its last lines
        were sent; the lab writes a pod's last lines before its final phase."""
        while not self._closing:
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), _LOG_POLL)
            ended = self._pod_ended(namespace, pod)
            text = await asyncio.to_thread(logs.source, container)
            end = text.rfind("\n") + 1
            if end > seen:
                lines = text[seen:end].splitlines(keepends=True)
                if logs.timestamped and not timestamps:
                    lines = [_strip_time(line) for line in lines]
                await response.write("".join(lines).encode())
                seen = end
            if ended:
                return


_VERBS = {"POST": "create", "DELETE": "delete", "PATCH": "patch", "PUT": "update"}


@dataclass(frozen=True, slots=True)
class _DeleteOptions:
    grace_seconds: int | None = None
    propagation: Propagation | None = None
    uid: str | None = None  # preconditions
    resource_version: str | None = None


def _delete_options(query: Mapping[str, str], body: bytes) -> _DeleteOptions:
    """A delete's options: the DeleteOptions body, overridden by the query's."""
    doc: Any = _decode(body, "application/json", ("application/json",)) if body.strip() else {}
    if not isinstance(doc, dict):
        raise _bad_request("the body of a delete must be a DeleteOptions object")
    grace = doc.get("gracePeriodSeconds")
    if "gracePeriodSeconds" in query:
        grace = _int(query, "gracePeriodSeconds", 0)
    if grace is not None and not _is_int(grace):
        raise _bad_request(f"gracePeriodSeconds: {grace!r} is not an integer")
    if grace is not None:
        grace = max(grace, 0)  # a negative period means "now"
    asked = query.get("propagationPolicy") or doc.get("propagationPolicy")
    orphan = query.get("orphanDependents", doc.get("orphanDependents"))
    if asked is None and orphan is not None:
        asked = "Orphan" if orphan in (True, "true") else "Background"
    try:
        propagation = None if asked is None else Propagation(asked)
    except ValueError:
        raise _bad_request(
            f'propagationPolicy: Unsupported value: "{asked}": supported values: '
            '"Foreground", "Background", "Orphan"'
        ) from None
    pre = doc.get("preconditions") or {}
    return _DeleteOptions(grace, propagation, pre.get("uid"), pre.get("resourceVersion"))


def _decode(body: bytes, content_type: str, accepted: Sequence[str]) -> Any:
    """A request's JSON body; 415 for another media type, 400 for bad JSON."""
    if content_type not in accepted:
        raise StatusError(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format - accepted media types include: "
            f"{', '.join(accepted)}",
        )
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _bad_request(f"the body of the request is not JSON: {exc}") from None


def _dry_run(query: MultiMapping[str]) -> bool:
    """Whether a write is a dry run (``dryRun=All``; no other value exists)."""
    values = [v for v in query.getall("dryRun", []) if v]
    if any(v != "All" for v in values):
        raise _bad_request(f'dryRun: Unsupported value: "{values[0]}": supported values: "All"')
    return bool(values)


def _method_not_allowed() -> StatusError:
    return StatusError(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
    )


def _success(resource: str, name: str, uid: str) -> dict[str, Any]:
    """The Status a finished delete answers."""
    r = SERVED[resource]
    details = {"name": name, **({"group": r.group} if r.group else {}), "kind": r.plural}
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {**details, "uid": uid},
    }


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
    return _event(kind, fmt.object(c.entry, SERVED[c.resource])) if kind else None


def _bookmark(resource: str, rv: int, *, initial_events_end: bool = False) -> bytes:
    r = SERVED[resource]
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
