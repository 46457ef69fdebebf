"""Watches: the changes of the store as events (filtered by selectors, with bookmarks and
``410 Gone``), woken by the store's change notifications."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiohttp import web

from svcdoctor.lab.apiserver.faults import Faults
from svcdoctor.lab.apiserver.query import int_param, is_true, selection
from svcdoctor.lab.apiserver.resources import SERVED, Target, dumps
from svcdoctor.lab.apiserver.status import StatusError
from svcdoctor.lab.apiserver.store import Change, ObjectStore, Selection
from svcdoctor.lab.apiserver.tables import Format, negotiate

_WATCH_TIMEOUT = 1800  # seconds; kube-apiserver's --min-request-timeout


def _event(kind: str, obj: bytes) -> bytes:
    return b'{"type":"' + kind.encode() + b'","object":' + obj + b"}\n"


def _change_event(c: Change, sel: Selection, fmt: Format) -> bytes | None:
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
        "BOOKMARK", dumps({"kind": r.kind, "apiVersion": r.api_version, "metadata": meta})
    )


def _expired(rv: int, oldest: int) -> StatusError:
    """``410 Gone`` for a watch from before ``oldest`` (the oldest resourceVersion it could
    resume from), worded as the watch cache words it (k8s.io/apiserver
    pkg/storage/cacher/watch_cache.go: ``too old resource version: %d (%d)``)."""
    return StatusError(410, "Expired", f"too old resource version: {rv} ({oldest})")


class Changes:
    """Wakes the server's watches and followed logs after each change of the store
    (``ObjectStore.put`` may run on any thread), and ends them when the server closes."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self.changed = asyncio.Event()  # set (and replaced) at each change
        self.closing = False
        self._wake_pending = False

    def start(self) -> None:
        """Wake on the running event loop."""
        self._loop = asyncio.get_running_loop()
        self.changed = asyncio.Event()

    def on_change(self) -> None:
        """The store's listener."""
        if self._wake_pending or self._loop is None:
            return
        self._wake_pending = True
        self._loop.call_soon_threadsafe(self._wake)

    def close(self) -> None:
        """End the watches and followed logs."""
        self.closing = True
        self._wake()

    def _wake(self) -> None:
        self._wake_pending = False
        self.changed.set()
        self.changed = asyncio.Event()


class Watches:
    """The server's watches of a store: the changes after a resourceVersion, as they
    happen, with bookmarks every ``bookmark_interval`` seconds when asked."""

    def __init__(
        self, store: ObjectStore, changes: Changes, bookmark_interval: float, faults: Faults
    ) -> None:
        self._store = store
        self._changes = changes
        self._bookmark_interval = bookmark_interval
        self._faults = faults

    async def watch(self, request: web.Request, t: Target) -> web.StreamResponse:
        """The watch's events until its timeout or the server's close; a client that
        leaves ends it quietly (normal for a watch)."""
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        with contextlib.suppress(ConnectionError):
            await self._stream(request, response, t)
        return response

    async def _stream(self, request: web.Request, response: web.StreamResponse, t: Target) -> None:
        query = request.query
        sel, fmt = selection(t, query), negotiate(request)
        timeout = int_param(query, "timeoutSeconds", 0) or _WATCH_TIMEOUT
        bookmarks = is_true(query.get("allowWatchBookmarks"))
        rv = int_param(query, "resourceVersion", 0)
        initial = rv == 0 or is_true(query.get("sendInitialEvents"))
        await response.prepare(request)
        oldest = self._faults.oldest(self._store._version())  # the gone-watch fault
        if not initial and oldest is not None and rv < oldest:
            await response.write(_event("ERROR", dumps(_expired(rv, oldest).status)))
            return
        if initial:
            snap, rv = self._store._snapshot(t.resource)
            low, high = sel.bounds(snap)
            added = [e for e in snap.entries[low:high] if sel.matches(e)]
            for i in range(0, len(added), 500):
                lines = (
                    _event("ADDED", fmt.object(e, SERVED[t.resource])) for e in added[i : i + 500]
                )
                await response.write(b"".join(lines))
            if bookmarks and is_true(query.get("sendInitialEvents")):
                await response.write(_bookmark(t.resource, rv, initial_events_end=True))
        await self._follow(response, sel, fmt, rv, timeout, bookmarks)

    async def _follow(
        self,
        response: web.StreamResponse,
        sel: Selection,
        fmt: Format,
        rv: int,
        timeout: float,
        bookmarks: bool,
    ) -> None:
        """Send the changes after ``rv`` as they happen, until timeout or close()."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        next_bookmark = loop.time() + self._bookmark_interval
        while not self._changes.closing:
            changed = self._changes.changed
            changes = self._store._changes_since(rv)
            if changes is None:
                expired = _expired(rv, self._store._oldest())
                await response.write(_event("ERROR", dumps(expired.status)))
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
