"""``pods/log``: a pod's log from its source (containers, since, tail, limit, timestamps),
followed until the pod's containers have ended."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from svcdoctor.lab.apiserver.query import int_param, is_true
from svcdoctor.lab.apiserver.resources import Target, parse_time
from svcdoctor.lab.apiserver.status import bad_request, not_found
from svcdoctor.lab.apiserver.store import Logs, ObjectStore
from svcdoctor.lab.apiserver.watch import Changes

_LOG_POLL = 0.5  # seconds between reads of a followed log's source


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
            raise bad_request(f"container {asked} is not valid for pod {name}")
        return asked
    if len(main) > 1:
        raise bad_request(
            f"a container name must be specified for pod {name}, choose one of: [{' '.join(main)}]"
        )
    return main[0] if main else None


def _select_log(text: str, timestamped: bool, query: Mapping[str, str]) -> bytes:
    """Apply sinceSeconds/sinceTime (timestamped logs), timestamps, tailLines, limitBytes."""
    lines = text.splitlines(keepends=True)
    if timestamped:
        since = _since(query)
        stamped = [(parse_time(line.partition(" ")[0]), line) for line in lines]
        if since is not None:
            stamped = [(at, line) for at, line in stamped if at is None or at >= since]
        keep = is_true(query.get("timestamps"))
        lines = [line if keep else _strip_time(line) for _, line in stamped]
    tail = int_param(query, "tailLines", -1)
    if tail >= 0:
        lines = lines[max(len(lines) - tail, 0) :]
    data = "".join(lines).encode()
    limit = int_param(query, "limitBytes", 0)
    return data[:limit] if limit > 0 else data


def _strip_time(line: str) -> str:
    """The line without its leading RFC 3339 time (lines without one are kept whole)."""
    stamp, _, rest = line.partition(" ")
    return rest if parse_time(stamp) is not None else line


def _since(query: Mapping[str, str]) -> float | None:
    if "sinceSeconds" in query:
        return time.time() - int_param(query, "sinceSeconds", 0)
    if "sinceTime" in query:
        since = parse_time(query["sinceTime"])
        if since is None:
            raise bad_request(f"invalid sinceTime {query['sinceTime']!r}")
        return since
    return None


class LogStreams:
    """The server's ``pods/log``: a pod's log as its source gives it, or followed until
    the pod's containers have ended."""

    def __init__(self, store: ObjectStore, changes: Changes) -> None:
        self._store = store
        self._changes = changes

    async def pod_log(self, request: web.Request, t: Target) -> web.StreamResponse:
        assert t.name is not None
        entry = self._store._entry("pods", t.namespace, t.name)
        if entry is None:
            raise not_found("pods", t.name)
        query = request.query
        container = _container(json.loads(entry.raw), query.get("container"))
        if is_true(query.get("previous")):
            raise bad_request(
                f'previous terminated container "{container}" in pod "{t.name}" not found'
            )
        logs = self._store._log_source(t.namespace or "", t.name)
        if logs is None:
            return web.Response(body=b"", content_type="text/plain")
        text = await asyncio.to_thread(logs.source, container)
        if not is_true(query.get("follow")):
            body = _select_log(text, logs.timestamped, query)
            return web.Response(body=body, content_type="text/plain")
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        seen = text.rfind("\n") + 1  # whole lines only, here and while following
        with contextlib.suppress(ConnectionError):  # the client left: normal for a follow
            await response.write(_select_log(text[:seen], logs.timestamped, query))
            stamps = is_true(query.get("timestamps"))
            await self._follow_log(response, logs, container, seen, stamps, t.namespace, t.name)
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
        logs: Logs,
        container: str | None,
        seen: int,
        timestamps: bool,
        namespace: str | None,
        pod: str,
    ) -> None:
        """Send the lines the log gains after offset ``seen``, polling its source, until the
        pod's containers have ended (as the kubelet ends a followed log) and its last lines
        were sent; the lab writes a pod's last lines before its final phase."""
        while not self._changes.closing:
            changed = self._changes.changed
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
