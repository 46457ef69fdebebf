"""``ObjectStore``: the objects by resource and key, each encoded once when put, with a
bounded log of changes, list snapshots for continue tokens, and the pods' log sources."""

from __future__ import annotations

import bisect
import json
import threading
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from svcdoctor.lab.apiserver.resources import (
    SERVED,
    Key,
    dumps,
    now_rfc3339,
    object_key,
    resource_of,
)
from svcdoctor.lab.apiserver.selectors import FIELD_PATHS, Requirement, field_value, parse_labels
from svcdoctor.lab.apiserver.status import already_exists

LogSource = Callable[[str | None], str]
"""``source(container)`` → the container's whole log text now."""


_SNAPSHOTS_KEPT = 64  # list snapshots kept for continue tokens


@dataclass(frozen=True, slots=True)
class Entry:
    """One version of one object, encoded."""

    key: Key
    rv: int
    raw: bytes  # the object as served
    meta_raw: bytes  # its metadata, for Table rows
    labels: Mapping[str, str]
    fields: Mapping[str, str]  # field-selector label -> value
    uid: str
    created: str  # creationTimestamp


@dataclass(frozen=True, slots=True)
class Change:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    resource: str
    entry: Entry  # the new version (the last one for DELETED)
    old: Entry | None  # the version it replaced (MODIFIED)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A resource's objects sorted by (namespace, name), as of one change."""

    id: int
    resource: str
    keys: list[Key]
    entries: list[Entry]


@dataclass(frozen=True, slots=True)
class Logs:
    """A pod's log: its source, and whether its lines start with an RFC 3339 time."""

    source: LogSource
    timestamped: bool


class ObjectStore:
    """Kubernetes objects by (apiVersion, kind, namespace, name), with a log of changes.

    Thread-safe. Objects are encoded when put: mutating one afterwards changes nothing.
    """

    def __init__(self, log_size: int = 10_000) -> None:
        self._lock = threading.Lock()
        self._rv = 0
        self._objects: dict[str, dict[Key, Entry]] = {key: {} for key in SERVED}
        self._current: dict[str, Snapshot] = {}  # per resource, until it changes
        self._snapshots: OrderedDict[int, Snapshot] = OrderedDict()
        self._snapshot_ids = 0
        self._log: deque[Change] = deque(maxlen=log_size)
        self._logs: dict[Key, Logs] = {}
        self._listeners: list[Callable[[], None]] = []

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Add or replace ``obj``; fill uid, resourceVersion, creationTimestamp; return it."""
        return self._write(obj, new=False)

    def select(
        self, api_version: str, kind: str, namespace: str | None = None, labels: str = ""
    ) -> list[dict[str, Any]]:
        """Copies of the stored objects of a kind, in ``namespace`` (None: all) matching the
        label selector ``labels`` (``"job-name=x"``), sorted by namespace and name."""
        resource = resource_of(api_version, kind)
        selection = Selection(resource, namespace, parse_labels(labels), [])
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
                raise already_exists(resource, key[1])
            self._rv += 1
            meta.setdefault("uid", old.uid if old else str(uuid.uuid4()))
            meta.setdefault("creationTimestamp", old.created if old else now_rfc3339())
            meta["resourceVersion"] = str(self._rv)
            stored = {**obj, "metadata": meta}
            entry = _encode(resource, key, self._rv, stored)
            self._objects[resource][key] = entry
            self._record(Change(self._rv, "MODIFIED" if old else "ADDED", resource, entry, old))
        self._notify()
        return stored

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        """Remove the object (a DELETED event); absent objects are no error."""
        resource = resource_of(api_version, kind)
        key = object_key(resource, namespace, name)
        with self._lock:
            old = self._objects[resource].pop(key, None)
            if old is None:
                return
            self._rv += 1
            last = json.loads(old.raw)
            last["metadata"]["resourceVersion"] = str(self._rv)
            entry = _encode(resource, key, self._rv, last)
            self._record(Change(self._rv, "DELETED", resource, entry, None))
        self._notify()

    def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        """A copy of the stored object, or None."""
        entry = self._entry(resource_of(api_version, kind), namespace, name)
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
            self._logs[(namespace, pod)] = Logs(source, timestamped)

    # -- for the server

    def _entry(self, resource: str, namespace: str | None, name: str) -> Entry | None:
        with self._lock:
            return self._objects[resource].get(object_key(resource, namespace, name))

    def _entries(self, selection: Selection) -> list[Entry]:
        """The entries ``selection`` matches now, sorted (no snapshot is kept)."""
        with self._lock:
            found = [
                entry
                for (namespace, _), entry in self._objects[selection.resource].items()
                if selection.namespace in (None, namespace) and selection.matches(entry)
            ]
        return sorted(found, key=lambda e: e.key)

    def _log_source(self, namespace: str, pod: str) -> Logs | None:
        with self._lock:
            return self._logs.get((namespace, pod))

    def _snapshot(self, resource: str) -> tuple[Snapshot, int]:
        """The resource's objects now, and the resourceVersion of "now"."""
        with self._lock:
            snap = self._current.get(resource)
            if snap is None:
                items = sorted(self._objects[resource].items())
                self._snapshot_ids += 1
                keys, entries = [k for k, _ in items], [e for _, e in items]
                snap = self._current[resource] = Snapshot(
                    self._snapshot_ids, resource, keys, entries
                )
            self._snapshots[snap.id] = snap
            self._snapshots.move_to_end(snap.id)
            if len(self._snapshots) > _SNAPSHOTS_KEPT:
                self._snapshots.popitem(last=False)
            return snap, self._rv

    def _snapshot_by_id(self, snapshot_id: int) -> Snapshot | None:
        with self._lock:
            snap = self._snapshots.get(snapshot_id)
            if snap is not None:
                self._snapshots.move_to_end(snapshot_id)
            return snap

    def _changes_since(self, rv: int) -> list[Change] | None:
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

    def _record(self, change: Change) -> None:
        self._log.append(change)
        self._current.pop(change.resource, None)

    def _notify(self) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            listener()


@dataclass(frozen=True, slots=True)
class Selection:
    """What a list or watch asks for: a resource, a namespace (None: all), selectors."""

    resource: str
    namespace: str | None
    labels: list[Requirement]
    fields: list[Requirement]

    def matches(self, entry: Entry) -> bool:
        return all(r.matches(entry.labels) for r in self.labels) and all(
            r.matches(entry.fields) for r in self.fields
        )

    def bounds(self, snap: Snapshot) -> tuple[int, int]:
        """The slice of ``snap`` in the namespace."""
        if self.namespace is None:
            return 0, len(snap.keys)
        return (
            bisect.bisect_left(snap.keys, (self.namespace, "")),
            bisect.bisect_left(snap.keys, (self.namespace + "\0", "")),
        )


def _identify(obj: Mapping[str, Any]) -> tuple[str, Key]:
    resource = resource_of(str(obj.get("apiVersion")), str(obj.get("kind")))
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not name:
        raise ValueError(f"{obj.get('kind')} without metadata.name")
    return resource, object_key(resource, meta.get("namespace") or "default", name)


def _encode(resource: str, key: Key, rv: int, obj: Mapping[str, Any]) -> Entry:
    meta = obj["metadata"]
    fields = {"metadata.name": key[1], "metadata.namespace": key[0]}
    for label, path in FIELD_PATHS.get(resource, {}).items():
        fields[label] = field_value(obj, path)
    return Entry(
        key=key,
        rv=rv,
        raw=dumps(obj),
        meta_raw=dumps(meta),
        labels=dict(meta.get("labels") or {}),
        fields=fields,
        uid=str(meta["uid"]),
        created=str(meta["creationTimestamp"]),
    )
