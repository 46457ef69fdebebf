"""``ApiServer``: HTTPS, authentication and authorization, routing to discovery, get, list,
watch, pods/log and writes."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from svcdoctor.lab import kubeconfig as _kubeconfig
from svcdoctor.lab import tls
from svcdoctor.lab.apiserver.admission import Handler
from svcdoctor.lab.apiserver.discovery import Discovery
from svcdoctor.lab.apiserver.faults import HEALTH_PATHS, Fault, Faults
from svcdoctor.lab.apiserver.logs import LogStreams
from svcdoctor.lab.apiserver.query import int_param, is_true, json_response, selection
from svcdoctor.lab.apiserver.rbac import Identity, Rule, authenticate, authorize
from svcdoctor.lab.apiserver.resources import SERVED, WRITABLE, Target, dumps
from svcdoctor.lab.apiserver.status import (
    PATH_NOT_FOUND,
    StatusError,
    bad_request,
    method_not_allowed,
    not_found,
)
from svcdoctor.lab.apiserver.store import ObjectStore, Snapshot
from svcdoctor.lab.apiserver.tables import negotiate
from svcdoctor.lab.apiserver.watch import Changes, Watches
from svcdoctor.lab.apiserver.writes import Writes

_VERBS = {"POST": "create", "DELETE": "delete", "PATCH": "patch", "PUT": "update"}


def _continue_token(snapshot_id: int, offset: int, rv: int, t: Target) -> str:
    data = {"s": snapshot_id, "o": offset, "rv": rv, "w": [t.resource, t.namespace or ""]}
    return base64.urlsafe_b64encode(dumps(data)).decode().rstrip("=")


class ApiServer:
    """Serves an ``ObjectStore`` as a Kubernetes API over HTTPS.

    ``token`` is ``user``'s. It may do what ``rules`` grant when given; otherwise anything
    but the (verb, resource) pairs in ``forbidden``, as RBAC would refuse them ("list",
    "endpointslices"; "get", "pods/log"; "create", "jobs"). ``add_user`` makes more tokens.
    ``unserved`` API groups are left out of discovery and answer 404, like an older or
    trimmed server. ``admit`` installs the lab's hooks on writes. ``faults`` (``faults.py``)
    makes it misbehave as a real server under load or trouble does.
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
        faults: Sequence[Fault] = (),
    ) -> None:
        self._store = store
        self._token = token
        granted = None if rules is None else tuple(rules)
        self._identities = {token: Identity(user, granted, frozenset(forbidden))}
        self._handlers: dict[str, Handler] = {}
        served = {k: r for k, r in SERVED.items() if r.group not in unserved}
        self._by_path = {(r.group, r.version, r.plural): k for k, r in served.items()}
        self._discovery = Discovery(served, version)
        self._changes = Changes()
        self._writes = Writes(store, self._handlers)
        self._faults = Faults(faults)
        self._watches = Watches(store, self._changes, bookmark_interval, self._faults)
        self._logs = LogStreams(store, self._changes)
        self.url = ""
        self.ca_pem = b""
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._loss: asyncio.TimerHandle | None = None
        self.lost = False  # the loss-after fault took the server away

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        """Listen on ``host:port`` (0: any free port) with a fresh CA and certificate."""
        self._changes.start()
        certs = tls.issue(tuple(dict.fromkeys(("127.0.0.1", "localhost", host))))
        app = web.Application()
        app.router.add_route("*", "/{path:.*}", self._handle)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port, ssl_context=certs.ssl_context())
        await site.start()
        self._site = site
        self.arm_faults()
        bound_port = self._runner.addresses[0][1]
        address = f"[{host}]:{bound_port}" if ":" in host else f"{host}:{bound_port}"
        self._discovery.address = address
        self.url = f"https://{address}"
        self.ca_pem = certs.ca_pem
        self._store._subscribe(self._changes.on_change)

    def add_user(self, user: str, rules: Iterable[Rule]) -> str:
        """A new token for ``user``, allowed what ``rules`` grant (discovery always)."""
        token = secrets.token_urlsafe(32)
        self._identities[token] = Identity(user, tuple(rules))
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

    def arm_faults(self) -> None:
        """Count the ``loss-after`` fault's seconds from now (``start`` arms it; the lab arms
        it again when it announces the server ready)."""
        if self._loss is not None:
            self._loss.cancel()
        if self._faults.loss_after is not None and not self.lost:
            loop = asyncio.get_running_loop()
            self._loss = loop.call_later(self._faults.loss_after, self._lose)

    def _lose(self) -> None:
        """The loss-after fault: stop listening, drop every connection at once."""
        self.lost = True
        if self._site is not None and self._site._server is not None:
            self._site._server.close()  # the listening socket: new connections are refused
        server = self._runner.server if self._runner is not None else None
        for handler in server.connections if server is not None else ():
            if handler.transport is not None:
                handler.transport.abort()

    async def close(self) -> None:
        """End open watches and stop listening."""
        if self._loss is not None:
            self._loss.cancel()
        if self._runner is None:
            return
        self._store._unsubscribe(self._changes.on_change)
        self._changes.close()
        await self._runner.cleanup()
        self._runner = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._faults.send(request, await self._serve(request))
        except StatusError as failure:
            return await self._faults.send(
                request, json_response(dumps(failure.status), failure.code)
            )
        except Exception as exc:
            if request.method == "GET":  # a stream may be under way: aiohttp ends it
                raise
            # a write's admission handler failed: answered as kube-apiserver answers a panic
            internal = StatusError(
                500, "InternalError", f"Internal error occurred: {type(exc).__name__}: {exc}"
            )
            return json_response(dumps(internal.status), 500)

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if path in HEALTH_PATHS:
            return web.Response(text="ok")
        who = authenticate(self._identities, request.headers.get("Authorization", ""))
        refused = self._faults.refusal(path)  # after authentication, as priority and fairness
        if refused is not None:
            return refused
        document = self._discovery.document(path)
        if document is not None:
            if request.method != "GET":
                raise method_not_allowed()
            return json_response(dumps(document))
        target = self._target(path)
        watch = is_true(request.query.get("watch"))
        verb = _VERBS.get(request.method, request.method.lower())
        if request.method == "GET":
            verb = "watch" if watch else "get" if target.name else "list"
        elif request.method == "DELETE" and not target.name:
            verb = "deletecollection"
        authorize(who, verb, target)
        if request.method != "GET":
            return await self._writes.write(request, verb, target)
        if target.subresource == "eviction":
            raise method_not_allowed()
        if target.subresource:
            return await self._logs.pod_log(request, target)
        if watch:
            with self._faults.cutting(request):
                return await self._watches.watch(request, target)
        if target.name:
            return self._get(request, target)
        return self._list(request, target)

    def _target(self, path: str) -> Target:
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise StatusError(404, "NotFound", PATH_NOT_FOUND)
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            namespace, rest = rest[1], rest[2:]
        key = self._by_path.get((group, version, rest[0]))
        if (
            key is None
            or len(rest) > 3
            or (namespace is not None and not SERVED[key].namespaced)
            or (len(rest) == 3 and (key, rest[2]) not in (("pods", "log"), ("pods", "eviction")))
        ):
            raise StatusError(404, "NotFound", PATH_NOT_FOUND)
        name = rest[1] if len(rest) > 1 else None
        return Target(key, namespace, name, rest[2] if len(rest) > 2 else None)

    def _get(self, request: web.Request, t: Target) -> web.Response:
        assert t.name is not None
        entry = self._store._entry(t.resource, t.namespace, t.name)
        if entry is None:
            raise not_found(t.resource, t.name)
        return json_response(negotiate(request).object(entry, SERVED[t.resource]))

    def _list(self, request: web.Request, t: Target) -> web.Response:
        sel = selection(t, request.query)
        limit = int_param(request.query, "limit", 0)
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
        return json_response(negotiate(request).objects(items, meta, SERVED[t.resource]))

    def _resume(self, t: Target, token: str) -> tuple[Snapshot, int, int]:
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
            raise bad_request("continue key is not valid")
        found = self._store._snapshot_by_id(snapshot_id)
        if found is None:
            raise StatusError(
                410,
                "Expired",
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter.",
            )
        return found, rv, offset
