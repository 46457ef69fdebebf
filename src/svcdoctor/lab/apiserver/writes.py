"""The server's writes: create, patch, delete and deletecollection, through the lab's
admission handlers, with DeleteOptions, preconditions and dry runs."""

from __future__ import annotations

import copy
import inspect
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from multidict import MultiMapping

from svcdoctor.lab.apiserver.admission import Admission, Handler, Propagation, Verb
from svcdoctor.lab.apiserver.patching import PATCH_TYPES, PATCHERS, PatchError, PatchType
from svcdoctor.lab.apiserver.query import int_param, json_response, selection
from svcdoctor.lab.apiserver.resources import (
    EVICTION,
    SERVED,
    WRITABLE,
    Target,
    dumps,
    now_rfc3339,
)
from svcdoctor.lab.apiserver.status import (
    StatusError,
    already_exists,
    bad_request,
    conflict,
    invalid_causes,
    method_not_allowed,
    not_found,
    success,
)
from svcdoctor.lab.apiserver.store import ObjectStore, Selection
from svcdoctor.lab.apiserver.validation import defaults, generated_name, is_int, validate


@dataclass(frozen=True, slots=True)
class DeleteOptions:
    grace_seconds: int | None = None
    propagation: Propagation | None = None
    uid: str | None = None  # preconditions
    resource_version: str | None = None


def delete_options(query: Mapping[str, str], body: bytes) -> DeleteOptions:
    """A delete's options: the DeleteOptions body, overridden by the query's."""
    doc: Any = _decode(body, "application/json", ("application/json",)) if body.strip() else {}
    if not isinstance(doc, dict):
        raise bad_request("the body of a delete must be a DeleteOptions object")
    grace = doc.get("gracePeriodSeconds")
    if "gracePeriodSeconds" in query:
        grace = int_param(query, "gracePeriodSeconds", 0)
    if grace is not None and not is_int(grace):
        raise bad_request(f"gracePeriodSeconds: {grace!r} is not an integer")
    if grace is not None:
        grace = max(grace, 0)  # a negative period means "now"
    asked = query.get("propagationPolicy") or doc.get("propagationPolicy")
    orphan = query.get("orphanDependents", doc.get("orphanDependents"))
    if asked is None and orphan is not None:
        asked = "Orphan" if orphan in (True, "true") else "Background"
    try:
        propagation = None if asked is None else Propagation(asked)
    except ValueError:
        raise bad_request(
            f'propagationPolicy: Unsupported value: "{asked}": supported values: '
            '"Foreground", "Background", "Orphan"'
        ) from None
    pre = doc.get("preconditions") or {}
    return DeleteOptions(grace, propagation, pre.get("uid"), pre.get("resourceVersion"))


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
        raise bad_request(f"the body of the request is not JSON: {exc}") from None


def _dry_run(query: MultiMapping[str]) -> bool:
    """Whether a write is a dry run (``dryRun=All``; no other value exists)."""
    values = [v for v in query.getall("dryRun", []) if v]
    if any(v != "All" for v in values):
        raise bad_request(f'dryRun: Unsupported value: "{values[0]}": supported values: "All"')
    return bool(values)


class Writes:
    """The server's writes (create, patch, delete, deletecollection) of a store, through
    the admission handlers of ``handlers`` (by resource)."""

    def __init__(self, store: ObjectStore, handlers: Mapping[str, Handler]) -> None:
        self._store = store
        self._handlers = handlers

    async def write(self, request: web.Request, verb: str, t: Target) -> web.Response:
        """Answer a write request ``verb`` (already authorized) on ``t``."""
        r = SERVED[t.resource]
        if t.subresource == "eviction" and verb == "create" and t.name and t.namespace:
            return await self._evict(request, t, _dry_run(request.query))
        if (
            verb not in WRITABLE.get(t.resource, ())
            or t.subresource
            or (r.namespaced and not t.namespace)
        ):
            raise method_not_allowed()
        dry_run = _dry_run(request.query)
        if verb == "create":
            body = _decode(await request.read(), request.content_type, ("application/json",))
            return await self._create(t, body, dry_run)
        if verb == "patch":
            patch_type = PATCH_TYPES.get(request.content_type)
            if patch_type is None:
                raise StatusError(
                    415,
                    "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - accepted media types "
                    f"include: {', '.join(PATCH_TYPES)}",
                )
            patch = _decode(await request.read(), request.content_type, tuple(PATCH_TYPES))
            return await self._patch(t, patch_type, patch, dry_run)
        options = delete_options(request.query, await request.read())
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

    async def _create(self, t: Target, body: Any, dry_run: bool) -> web.Response:
        assert t.namespace is not None or not SERVED[t.resource].namespaced
        namespace = t.namespace or ""
        obj = self._new_object(t, body)
        name = obj["metadata"]["name"]
        if self._store._entry(t.resource, t.namespace, name):  # before the handler acts
            raise already_exists(t.resource, name)
        admission = Admission(Verb.CREATE, t.resource, namespace, name, obj, dry_run=dry_run)
        answer = await self._admit(admission)
        stored = obj if answer is None else answer
        if dry_run:
            return json_response(dumps(stored), 201)
        return json_response(dumps(self._store._write(stored, new=True)), 201)

    def _new_object(self, t: Target, body: Any) -> dict[str, Any]:
        """The object a create stores: checked against the URL, named, validated, with its
        metadata and defaults filled."""
        r = SERVED[t.resource]
        if not isinstance(body, dict):
            raise bad_request(f"the body of a create must be a {r.kind} object")
        if body.get("apiVersion") != r.api_version or body.get("kind") != r.kind:
            raise bad_request(
                f"the API version in the data ({body.get('apiVersion')}) does not match the "
                f"expected API version ({r.api_version})"
                if body.get("kind") == r.kind
                else f"the kind in the data ({body.get('kind')}) does not match the expected "
                f"kind ({r.kind})"
            )
        meta = body.get("metadata")
        meta = dict(meta) if isinstance(meta, dict) else {}
        if meta.get("namespace") not in (None, "", t.namespace):
            raise bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        self._check_namespace(t)
        prefix = meta.get("generateName")
        if not meta.get("name") and isinstance(prefix, str) and prefix:
            meta["name"] = generated_name(prefix)
            for _ in range(8):  # as the apiserver, retry a taken name a few times
                if self._store._entry(t.resource, t.namespace, meta["name"]) is None:
                    break
                meta["name"] = generated_name(prefix)
        for key in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(key, None)
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=now_rfc3339())
        if r.namespaced:
            meta["namespace"] = t.namespace
        obj = {**body, "metadata": meta}
        causes = validate(t.resource, obj)
        if causes:
            raise invalid_causes(obj, causes)
        return defaults(t.resource, obj)

    def _check_namespace(self, t: Target) -> None:
        """A create in a namespace the store does not hold is 404 (a store holding no
        Namespace objects serves every namespace)."""
        if not t.namespace or self._store._entry("namespaces", None, t.namespace):
            return
        if self._store._entries(Selection("namespaces", None, [], [])):
            raise not_found("namespaces", t.namespace)

    async def _patch(
        self, t: Target, patch_type: PatchType, patch: Any, dry_run: bool
    ) -> web.Response:
        if t.name is None:
            raise method_not_allowed()
        entry = self._store._entry(t.resource, t.namespace, t.name)
        if entry is None:
            raise not_found(t.resource, t.name)
        old = json.loads(entry.raw)
        try:
            patched = PATCHERS[patch_type](old, patch)
        except PatchError as exc:
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
            return json_response(dumps(stored))
        return json_response(dumps(self._store.put(stored)))

    def _check_patched(
        self, t: Target, old: dict[str, Any], patched: dict[str, Any]
    ) -> dict[str, Any]:
        """The patched object with what a patch cannot change restored, its resourceVersion
        precondition checked, validated, its generation bumped when its spec changed."""
        assert t.name is not None
        meta = patched.get("metadata")
        meta = dict(meta) if isinstance(meta, dict) else {}
        old_meta = old["metadata"]
        asked_rv = meta.get("resourceVersion")
        if asked_rv not in (None, old_meta.get("resourceVersion")):
            raise conflict(
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
        causes = validate(t.resource, patched)
        if causes:
            raise invalid_causes(patched, causes)
        return patched

    async def _delete(self, t: Target, options: DeleteOptions, dry_run: bool) -> web.Response:
        assert t.name is not None
        entry = self._store._entry(t.resource, t.namespace, t.name)
        if entry is None:
            raise not_found(t.resource, t.name)
        obj = json.loads(entry.raw)
        return json_response(dumps(await self._delete_one(t.resource, obj, options, dry_run)))

    async def _delete_one(
        self, resource: str, obj: dict[str, Any], options: DeleteOptions, dry_run: bool
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
                raise conflict(
                    resource,
                    name,
                    f"Precondition failed: {label} in precondition: {want}, "
                    f"{label} in object meta: {meta.get(key)}",
                )
        grace = options.grace_seconds
        if grace is None and resource == "pods":
            grace = int((obj.get("spec") or {}).get("terminationGracePeriodSeconds", 30))
        marked = copy.deepcopy(obj)
        marked["metadata"].setdefault("deletionTimestamp", now_rfc3339())
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
        return success(resource, name, str(meta.get("uid", "")))

    async def _evict(self, request: web.Request, t: Target, dry_run: bool) -> web.Response:
        """``POST pods/NAME/eviction`` (policy/v1 Eviction), as kube-apiserver answers it:
        404 for a missing pod, the ``pods/eviction`` handler's refusal (429 when a
        PodDisruptionBudget forbids it now), else the pod is deleted gracefully (by the
        handler, or through the pods' delete) and the answer is 201 with a Success Status.
        A JSON body's name must be the URL's; kubectl's protobuf body is taken as it is (an
        Eviction of the URL's pod; its DeleteOptions are not read: the pod's own grace); a
        JSON body's ``deleteOptions.preconditions.uid`` that is not the pod's is 409."""
        assert t.name is not None
        body = await request.read()
        grace: int | None = None
        uid: str | None = None
        if request.content_type == "application/json" and body.strip():
            doc = _decode(body, request.content_type, ("application/json",))
            meta = (doc.get("metadata") or {}) if isinstance(doc, dict) else {}
            if not isinstance(doc, dict) or doc.get("kind") != "Eviction":
                raise bad_request("the body of an eviction must be a policy/v1 Eviction")
            if meta.get("name") not in (None, t.name):
                raise bad_request("name in URL does not match name in Eviction object")
            options = delete_options({}, json.dumps(doc.get("deleteOptions") or {}).encode())
            grace, uid = options.grace_seconds, options.uid
        entry = self._store._entry("pods", t.namespace, t.name)
        if entry is None:
            raise not_found("pods", t.name)
        pod = json.loads(entry.raw)
        if uid is not None and pod["metadata"].get("uid") != uid:  # another pod of that name
            raise conflict(
                "pods",
                t.name,
                f"Precondition failed: UID in precondition: {uid}, "
                f"UID in object meta: {pod['metadata'].get('uid')}",
            )
        admission = Admission(
            Verb.CREATE, EVICTION, t.namespace or "", t.name, pod, dry_run=dry_run,
            grace_seconds=grace,
        )  # fmt: skip
        if await self._admit(admission) is None:
            await self._delete_one("pods", pod, DeleteOptions(grace), dry_run)
        done = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
        return json_response(dumps({**done, "code": 201}), 201)

    async def _delete_collection(
        self, request: web.Request, t: Target, options: DeleteOptions, dry_run: bool
    ) -> web.Response:
        sel = selection(t, request.query)
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
        return json_response(
            dumps({**head, "metadata": {"resourceVersion": str(rv)}, "items": items})
        )
