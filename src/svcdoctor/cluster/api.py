"""``ClusterReader`` over the Kubernetes API: raw JSON for the objects; and the few writes
of the active commands (probe, rollout-test, cleanup): create, delete, delete by label,
patch, and a followed log.

``connection`` turns a kubeconfig context into an authenticated HTTP client as kubectl
does (CA, tls-server-name, proxies, tokens, client certificates, exec credential plugins:
``credentials``); the reads are plain REST calls decoded with msgspec, so objects stay the
dicts the API sent (what collect writes and scan's loader reads) and 50,000 pods cost one
decode, not 50,000 models.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import httpx2 as httpx
import msgspec

from svcdoctor import http_policy
from svcdoctor.cluster.config import Target, resolve
from svcdoctor.cluster.connection import open_connection
from svcdoctor.cluster.reader import (
    ClusterError,
    ClusterReader,
    Forbidden,
    NotServed,
    Unreachable,
    WatchEvent,
    WatchGap,
)
from svcdoctor.cluster.resources import RESOURCES, Resource

# the roles of the active commands: probe and cleanup; rollout-test (the restart besides);
# rollout-test's drain (cordon, evictions: nodes are cluster-scoped)
ACTIVE_RBAC_FILE = "deploy/rbac/svcdoctor-probe.yaml"
ROLLOUT_RBAC_FILE = "deploy/rbac/svcdoctor-rollout-test.yaml"
DRAIN_RBAC_FILE = "deploy/rbac/svcdoctor-drain.yaml"
WRITE_VERBS = frozenset({"create", "delete", "deletecollection", "patch"})
# resources only the active commands touch, beside the read table
EXTRA_RESOURCES = {
    "jobs": Resource("jobs", "Job", "batch", "v1"),
    "networkpolicies": Resource("networkpolicies", "NetworkPolicy", "networking.k8s.io", "v1"),
}
PATCH_TYPES = {
    "strategic": "application/strategic-merge-patch+json",
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
}
PAGE_SIZE = 500
WATCH_CHUNK_SECONDS = 300  # a watch request's server-side timeout; resumed after it
GAP_SECONDS = 1.0  # a longer break in a watch stamps the changes in it late: a gap
_decode = msgspec.json.Decoder()
Objects = list[dict[str, Any]]


class ApiStatus(ClusterError):
    """An error status from the API server, with its HTTP code."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class WriteForbidden(Forbidden):
    """The credentials may not make a write the active commands need."""

    def __init__(self, verb: str, resource: str, namespace: str | None) -> None:
        super().__init__(verb, resource, namespace)
        where = f" in namespace {namespace}" if namespace else " cluster-wide"
        role = (
            f"the ClusterRole in {DRAIN_RBAC_FILE}"  # a drain's cordon and evictions
            if resource in ("nodes", "pods/eviction")
            else f"the role in {ACTIVE_RBAC_FILE} (rollout-test: {ROLLOUT_RBAC_FILE})"
        )
        self.args = (f"forbidden: cannot {verb} {resource}{where}; run with {role}",)


def _resource(name: str) -> Resource:
    """The resource of a key of ``RESOURCES`` or of the active commands' ``jobs``."""
    found = RESOURCES.get(name) or EXTRA_RESOURCES.get(name)
    if found is None:
        raise KeyError(name)
    return found


class ApiReader(ClusterReader):
    """Access to the cluster of one kubeconfig context: the reads of ``ClusterReader`` (a
    subclass, so that mypy checks them against the seam here) and the writes of the active
    commands."""

    def __init__(self, target: Target, timeout: float = 10.0) -> None:
        self.context = target.context
        self.namespace = target.namespace
        self.timeout = timeout
        connection = open_connection(target, timeout)
        self.server = connection.server
        self.proxy = connection.proxy  # the proxy kubectl would use too (None: direct)
        self._http = connection.client
        if connection.plugin is not None and connection.plugin.interactive():
            try:  # log in on the terminal before any progress display
                connection.plugin.refresh()
            except ClusterError:
                self._http.close()
                raise
        self._discovered: dict[str, set[str] | None] = {}
        self.used: set[tuple[str, str]] = set()  # (verb, resource) asked, for the RBAC test

    def close(self) -> None:
        self._http.close()

    # ---- requests -----------------------------------------------------------------
    def _send(
        self,
        path: str,
        params: dict[str, Any] | None = None,
        verb: str = "get",
        resource: str = "",
        namespace: str | None = None,
        stream: bool = False,
        read_timeout: float | None = None,
        method: str = "GET",
        body: Any = None,
        content_type: str = "application/json",
        policy: http_policy.Policy = http_policy.DEFAULT,
    ) -> httpx.Response:
        """``method`` ``path`` (GET unless told) under the request policy (retries, the
        deadline over the whole answer; ``policy`` for a watch bounded by its end); every
        failure becomes a one-line ``ClusterError``."""
        timeout = httpx.Timeout(self.timeout, read=read_timeout or self.timeout)
        if resource:
            self.used.add((verb, resource))
        headers = {"Content-Type": content_type} if body is not None else None
        content = json.dumps(body).encode() if body is not None else None
        try:
            request = self._http.build_request(
                method, path, params=params, timeout=timeout, content=content, headers=headers
            )
            response = http_policy.send(
                self._http,
                request,
                deadline=None if stream else self.timeout,
                stream=stream,
                policy=policy,
            )
        except http_policy.DeadlineExceeded as exc:
            raise Unreachable(
                f"the API server at {self.server} (context {self.context}) did not send its "
                f"answer to {path} within --request-timeout {self.timeout:g} s: {exc}"
            ) from None
        except httpx.TimeoutException:
            raise Unreachable(
                f"the API server at {self.server} (context {self.context}) did not answer "
                f"within {self.timeout:g} s"
            ) from None
        except (httpx.HTTPError, OSError) as exc:
            raise Unreachable(
                f"cannot reach the API server at {self.server} (context {self.context}): "
                f"{_reason(exc)}"
            ) from None
        if response.status_code < 400:
            return response
        raise self._error(response, verb, resource, namespace)

    def _error(
        self, response: httpx.Response, verb: str, resource: str, namespace: str | None
    ) -> ClusterError:
        code = response.status_code
        message = _status_message(response)
        if code == 401:
            return ClusterError(
                f"unauthorized: the API server at {self.server} rejected the credentials of "
                f"context {self.context} (expired or wrong token?)"
            )
        if code == 403:
            what = resource or response.request.url.path
            if verb in WRITE_VERBS:
                return WriteForbidden(verb, what, namespace)
            return Forbidden(verb, what, namespace)
        if code == 404 and verb in ("list", "watch"):
            return NotServed(f"the server does not serve {resource}: {message}")
        return ApiStatus(
            code,
            f"{code} from {response.request.url.path}: {message}"
            f"{http_policy.attempts_text(response)}",
        )

    def _json(self, path: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        response = self._send(path, params, **kw)
        try:
            return _decode.decode(response.content)
        except msgspec.DecodeError:
            raise ClusterError(f"{path}: the API server sent invalid JSON") from None

    # ---- ClusterReader --------------------------------------------------------------
    def version(self) -> dict[str, str]:
        found = self._json("/version")
        return {k: str(v) for k, v in found.items()} if isinstance(found, dict) else {}

    def serves(self, resource: str) -> bool:
        res = _resource(resource)
        if res.api_version not in self._discovered:
            path = f"/apis/{res.api_version}" if res.group else f"/api/{res.version}"
            try:
                found = self._json(path)
                names = {r.get("name") for r in found.get("resources", [])}
                self._discovered[res.api_version] = {str(n) for n in names if n}
            except ApiStatus as exc:
                if exc.code != 404:
                    raise
                self._discovered[res.api_version] = None
        served = self._discovered[res.api_version]
        return served is not None and res.plural in served

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        labels: str | None = None,
        fields: str | None = None,
    ) -> list[dict[str, Any]]:
        return self._list(_resource(resource), resource, namespace, _selectors(labels, fields))[0]

    def _list(
        self, res: Resource, name: str, namespace: str | None, selectors: dict[str, str]
    ) -> tuple[Objects, str]:
        """Every object, in pages; a page token that expired (410) restarts the list."""
        items: Objects = []
        params: dict[str, Any] = {"limit": PAGE_SIZE, **selectors}
        path = res.path(namespace)
        while True:
            try:
                page = self._json(path, params, verb="list", resource=name, namespace=namespace)
            except ApiStatus as exc:
                if "continue" in params and exc.code == 410:
                    params.pop("continue")
                    items = []
                    continue
                raise
            for item in page.get("items") or []:
                item.setdefault("apiVersion", res.api_version)
                item.setdefault("kind", res.kind)
                items.append(item)
            meta = page.get("metadata") or {}
            if not meta.get("continue"):
                return items, str(meta.get("resourceVersion") or "")
            params["continue"] = meta["continue"]

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        path, named = _named("get", resource, namespace, name)
        try:
            found = self._json(path, **named)
        except ApiStatus as exc:
            if exc.code == 404:
                return None
            raise
        return found if isinstance(found, dict) else None

    def watch(
        self,
        resource: str,
        namespace: str | None = None,
        labels: str | None = None,
        fields: str | None = None,
        until: float | None = None,
        on_gap: Callable[[WatchGap], None] | None = None,
    ) -> Iterator[WatchEvent]:
        res = _resource(resource)
        path, named = _named("watch", resource, namespace)
        selectors = _selectors(labels, fields)
        known: dict[str, dict[str, Any]] = {}
        version = ""

        def relist() -> Iterator[WatchEvent]:
            """List, and report what changed since the objects known (all new at first)."""
            nonlocal version
            items, version = self._list(res, resource, namespace, selectors)
            now = time.time()
            fresh = {_key(o): o for o in items}
            for key, obj in fresh.items():
                old = known.get(key)
                if old is None:
                    yield WatchEvent("ADDED", obj, now)
                elif _rv(old) != _rv(obj):
                    yield WatchEvent("MODIFIED", obj, now)
            for key in known.keys() - fresh.keys():
                yield WatchEvent("DELETED", known[key], now)
            known.clear()
            known.update(fresh)

        def gap(since: float, relisted: bool) -> None:
            """Tell ``on_gap`` of a break in the stream longer than GAP_SECONDS, or of any
            re-list (changes between the two lists are lost)."""
            now = time.time()
            if on_gap is not None and (relisted or now - since > GAP_SECONDS):
                on_gap(WatchGap(resource, since, now, relisted))

        yield from relist()
        broke: float | None = None  # when the stream last broke, until it is open again
        while until is None or time.time() < until:
            left = WATCH_CHUNK_SECONDS if until is None else max(1, int(until - time.time()))
            chunk = min(left, WATCH_CHUNK_SECONDS)
            params: dict[str, Any] = {
                "watch": "true",
                "allowWatchBookmarks": "true",
                "resourceVersion": version,
                "timeoutSeconds": chunk,
                **selectors,
            }
            try:
                response = self._send(
                    path,
                    params,
                    stream=True,
                    read_timeout=chunk + self.timeout,
                    policy=_within(until),
                    **named,
                )
            except ApiStatus as exc:  # 410 as an HTTP status rather than an ERROR event
                if exc.code != 410:
                    raise
                yield from relist()
                gap(broke or time.time(), relisted=True)
                broke = None
                continue
            except ClusterError as exc:
                if broke is None:
                    raise
                kind = Unreachable if isinstance(exc, Unreachable) else ClusterError
                raise kind(
                    f"the stream broke at {_clock(broke)} and could not be resumed: {exc}"
                ) from None
            if broke is not None:
                gap(broke, relisted=False)
                broke = None
            gone = False
            try:
                for line in response.iter_lines():
                    if not line.strip():
                        continue
                    event = _decode.decode(line)
                    kind, obj = event.get("type"), event.get("object") or {}
                    if kind == "ERROR":
                        if obj.get("code") == 410:
                            gone = True
                            break
                        raise ClusterError(f"watch of {resource}: {obj.get('message', obj)}")
                    version = _rv(obj) or version
                    if kind == "BOOKMARK":
                        continue
                    obj.setdefault("apiVersion", res.api_version)
                    obj.setdefault("kind", res.kind)
                    if kind == "DELETED":
                        known.pop(_key(obj), None)
                    else:
                        known[_key(obj)] = obj
                    yield WatchEvent(str(kind), obj, time.time())
                    if until is not None and time.time() >= until:
                        return
            except httpx.ReadTimeout:
                pass  # the server kept the stream open past its timeout: resume
            except (httpx.RemoteProtocolError, httpx.NetworkError):
                pass  # cut: resume from the last version seen
            except (httpx.HTTPError, msgspec.DecodeError) as exc:
                raise ClusterError(f"watch of {resource} broke: {_reason(exc)}") from None
            finally:
                response.close()
            broke = time.time()  # ended or cut: a slow resumption is a gap
            if gone:  # 410 Gone: our version is too old; list again and go on from there
                yield from relist()
                gap(broke, relisted=True)
                broke = None

    def logs(
        self,
        namespace: str,
        pod: str,
        container: str | None = None,
        since_seconds: int | None = None,
        limit_bytes: int | None = None,
    ) -> str:
        params: dict[str, Any] = {}
        if since_seconds:
            params["sinceSeconds"] = since_seconds
        if limit_bytes:
            params["limitBytes"] = limit_bytes
        return self._log(namespace, pod, container, params).text

    def _log(
        self,
        namespace: str,
        pod: str,
        container: str | None,
        params: dict[str, Any],
        **kw: Any,
    ) -> httpx.Response:
        """A request to ``pods/log`` of one container (the pod's only one when None)."""
        if container:
            params = {"container": container, **params}
        path = RESOURCES["pods"].path(namespace, pod) + "/log"
        return self._send(path, params, verb="get", resource="pods/log", namespace=namespace, **kw)

    # ---- writes (the active commands) ---------------------------------------------
    def create(
        self, resource_name: str, namespace: str, obj: dict[str, Any], dry_run: bool = False
    ) -> dict[str, Any]:
        """Create ``obj``; the object as the server stored it (or would, with ``dry_run``)."""
        res = _resource(resource_name)
        params = {"dryRun": "All"} if dry_run else None
        body = {"apiVersion": res.api_version, "kind": res.kind, **obj}
        path, named = _named("create", resource_name, namespace)
        created = self._json(path, params, method="POST", body=body, **named)
        return created if isinstance(created, dict) else {}

    def delete(
        self,
        resource_name: str,
        namespace: str,
        name: str,
        propagation: str = "Background",
        grace_seconds: int | None = None,
    ) -> bool:
        """Delete one object (its dependents by ``propagation``); False when it is gone."""
        path, named = _named("delete", resource_name, namespace, name)
        options: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "propagationPolicy": propagation,
        }
        if grace_seconds is not None:
            options["gracePeriodSeconds"] = grace_seconds
        try:
            self._send(path, method="DELETE", body=options, **named)
        except ApiStatus as exc:
            if exc.code == 404:
                return False
            raise
        return True

    def delete_collection(
        self, resource_name: str, namespace: str, labels: str, propagation: str = "Background"
    ) -> None:
        """Delete every object of ``resource_name`` in ``namespace`` matching ``labels``."""
        if not labels:
            raise ValueError("delete_collection needs a label selector")
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": propagation}
        path, named = _named("deletecollection", resource_name, namespace)
        self._send(path, {"labelSelector": labels}, method="DELETE", body=options, **named)

    def patch(
        self,
        resource_name: str,
        namespace: str,
        name: str,
        patch: Any,
        patch_type: str = "strategic",
    ) -> dict[str, Any]:
        """Patch one object (``patch_type``: strategic, merge or json); the result."""
        if patch_type not in PATCH_TYPES:
            raise ValueError(f"patch type {patch_type!r}: one of {', '.join(PATCH_TYPES)}")
        kind = PATCH_TYPES[patch_type]
        path, named = _named("patch", resource_name, namespace, name)
        patched = self._json(path, method="PATCH", body=patch, content_type=kind, **named)
        return patched if isinstance(patched, dict) else {}

    def evict(self, namespace: str, name: str, uid: str | None = None) -> bool:
        """Evict one pod (``POST pods/NAME/eviction``, a policy/v1 Eviction) as kubectl
        drain does; False when the pod is gone (404), or, with ``uid`` (a precondition),
        replaced by another pod of its name (409). A refusal raises ``ApiStatus`` at once,
        unretried (429: a PodDisruptionBudget forbids it now; the caller retries as kubectl
        drain does, its message names the budget)."""
        meta = {"name": name, "namespace": namespace}
        options = {"deleteOptions": {"preconditions": {"uid": uid}}} if uid else {}
        try:
            self._send(
                RESOURCES["pods"].path(namespace, name) + "/eviction",
                verb="create",
                resource="pods/eviction",
                namespace=namespace,
                method="POST",
                body={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": meta, **options},
                policy=http_policy.Policy(attempts=1),
            )
        except ApiStatus as exc:
            if exc.code == 404 or (uid and exc.code == 409):
                return False
            raise
        return True

    def follow_logs(
        self,
        namespace: str,
        pod: str,
        until: float,
        container: str | None = None,
        idle: float | None = None,
    ) -> Iterator[str]:
        """The lines of a container's log as it writes them (``follow=true``), from its
        start, until the container ends, the Unix time ``until`` or (``idle``) that many
        seconds without a line; a stream that breaks ends the iteration (the caller knows
        from the lines whether it saw everything)."""
        left = until - time.time()
        if left <= 0:
            return
        response = self._log(
            namespace,
            pod,
            container,
            {"follow": "true"},
            stream=True,
            read_timeout=max(min(left, idle or left), 0.1),
        )
        try:
            for line in response.iter_lines():
                yield line
                if time.time() >= until:
                    return
        except (httpx.HTTPError, OSError):
            return
        finally:
            response.close()


def connect(
    kubeconfig: str | None = None,
    context: str | None = None,
    namespace: str | None = None,
    all_namespaces: bool = False,
    timeout: float | None = 10.0,
) -> ApiReader:
    """A reader of the cluster that kubectl would talk to with the same flags.

    ``all_namespaces`` is the command's business (it passes ``namespace=None`` to the
    reader's calls); it is accepted here so that the CLI's option dict can be passed whole.
    """
    if all_namespaces and namespace:
        raise ClusterError("-n/--namespace and -A/--all-namespaces exclude each other")
    return ApiReader(resolve(kubeconfig, context, namespace), timeout or 10.0)


def connect_active(**options: Any) -> ApiReader:
    """:func:`connect` (same options) for the active commands, which work in one namespace."""
    if options.get("all_namespaces"):
        raise ClusterError("the active commands work in one namespace: drop -A")
    return connect(**options)


def _within(until: float | None) -> http_policy.Policy:
    """The request policy of a watch's set-up: its retries end with the watch."""
    left = http_policy.DEFAULT.total_seconds if until is None else until - time.time()
    total = min(http_policy.DEFAULT.total_seconds, max(left, 1.0))
    return replace(http_policy.DEFAULT, total_seconds=total, reconnect=True)


def _clock(ts: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(ts)) + "Z"


def _named(
    verb: str, resource: str, namespace: str | None, name: str | None = None
) -> tuple[str, dict[str, Any]]:
    """The path of one object of ``resource`` (``name``) or of its collection, and the
    words ``_send`` names the request by (for ``used`` and the one-line errors)."""
    path = _resource(resource).path(namespace, name)
    return path, {"verb": verb, "resource": resource, "namespace": namespace}


def _selectors(labels: str | None, fields: str | None) -> dict[str, str]:
    """The query parameters of a list or watch's label and field selectors."""
    given = {"labelSelector": labels, "fieldSelector": fields}
    return {k: v for k, v in given.items() if v}


def _key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _rv(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _status_message(response: httpx.Response) -> str:
    try:
        body = _decode.decode(response.content)
    except msgspec.DecodeError:
        return response.text.strip().splitlines()[0] if response.text.strip() else "no message"
    if isinstance(body, dict) and body.get("message"):
        # a refused eviction names its PodDisruptionBudget in its cause (kube-apiserver
        # pkg/registry/core/pod/storage/eviction.go: the DisruptionBudget cause)
        causes = (body.get("details") or {}).get("causes") or []
        budget = [str(c.get("message")) for c in causes if c.get("reason") == "DisruptionBudget"]
        return str(body["message"]) + "".join(f" ({b})" for b in budget[:1])
    return response.reason_phrase or "no message"


def _reason(exc: BaseException) -> str:
    """The innermost, most specific reason of a connection failure."""
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
