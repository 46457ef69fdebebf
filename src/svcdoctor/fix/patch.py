"""Findings' fixes as strategic-merge patches: which ones are applied, how several
combine on one object, and what they change in it (pure: typed patches in, plain data out)."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from svcdoctor.model import Finding
from svcdoctor.model.hops import (
    AGIC_DRAINING,
    AGIC_DRAINING_TIMEOUT,
    ALB_TG_ATTRIBUTES,
    ISTIO_PROXY_CONFIG,
    LINKERD_WAIT,
    NLB_TG_ATTRIBUTES,
)
from svcdoctor.model.patch import (
    HANDLER_PARENTS,
    HANDLERS,
    MERGE_KEYS,
    Patch,
    PodPatch,
    merge_match,
    pod_path,
    strategic_merge_patch,
)

# Fields a safe fix may set, below the pod spec (``[]``: an item of a merged list).
_POD_FIELDS = (
    ("terminationGracePeriodSeconds",),
    ("containers", "[]", "lifecycle", "preStop"),
    ("containers", "[]", "livenessProbe"),
    ("containers", "[]", "command"),
    ("containers", "[]", "args"),
)
_WORKLOAD_FIELDS = (("spec", "strategy"), ("spec", "updateStrategy"))
# Pod annotations a safe fix may set (beside the pod spec): the pod's own mesh proxy's drain
# (SVD113).
_POD_ANNOTATIONS = (ISTIO_PROXY_CONFIG, LINKERD_WAIT)
_CONTAINER_KEYS = frozenset({"command", "args"})
# Annotations a safe fix may set on the object that carries them: a load balancer's target
# group attributes (the deregistration delay, SVD112) on its Ingress or Service.
_ANNOTATIONS = {
    "Ingress": frozenset({ALB_TG_ATTRIBUTES, AGIC_DRAINING, AGIC_DRAINING_TIMEOUT}),
    "Service": frozenset({ALB_TG_ATTRIBUTES, NLB_TG_ATTRIBUTES}),
}


class Unsafe(Exception):
    """Why a fix is not applied automatically (one line)."""


@dataclass(frozen=True, slots=True)
class Step:
    """One finding's fix: ``patch`` when it is applied, else ``reason`` says why not and
    the fix is a manual step."""

    finding: Finding
    patch: Patch | None
    reason: str = ""


def decide(finding: Finding, body: Mapping[str, Any] | None) -> Step:
    """Whether the finding's fix is applied to ``body`` (the object as read)."""
    fix = finding.fix
    patch = fix.patch if fix is not None and fix.applicable else None
    if isinstance(patch, PodPatch) and patch.argv_only and not _only_exec(patch, body):
        patch = None
    if fix is None or patch is None:
        return Step(finding, None, "not a patch")
    if not fix.safe:
        return Step(finding, None, "changes behaviour beyond the shutdown path: review it")
    if body is None or finding.object is None:
        return Step(finding, None, "object not found in its file")
    try:
        _check(patch.data(), finding.object.kind, body)
    except Unsafe as exc:
        return Step(finding, None, str(exc))
    return Step(finding, patch)


def _only_exec(patch: PodPatch, body: Mapping[str, Any] | None) -> bool:
    """Whether a ``command``/``args`` patch only puts ``exec`` before the script's last
    command; anything more (an init such as tini that the image may lack) is a manual
    step."""
    spec = _get(body, pod_path(patch.kind)) if body else None
    container = next(
        (
            c
            for c in (spec.get("containers") or [] if isinstance(spec, Mapping) else [])
            if isinstance(c, Mapping) and c.get("name") == patch.container
        ),
        None,
    )
    if container is None:
        return False
    old = [*(container.get("command") or []), *(container.get("args") or [])]
    new = [*(patch.command if patch.command is not None else container.get("command") or []),
           *(patch.args if patch.args is not None else container.get("args") or [])]  # fmt: skip
    changed = [(a, b) for a, b in zip(old, new, strict=False) if a != b]
    if len(old) != len(new) or len(changed) != 1 or not isinstance(changed[0][1], str):
        return False
    before, after = changed[0]
    at = after.find("exec ")
    return isinstance(before, str) and at >= 0 and after[:at] + after[at + 5 :] == before


def leaves(patch: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Paths of the patch's set fields (items of merged lists as ``[]``, their merge key
    left out)."""
    for key, value in patch.items():
        path = (*prefix, key)
        if isinstance(value, Mapping) and value:
            yield from leaves(value, path)
        elif isinstance(value, list) and key in MERGE_KEYS:
            for item in value:
                if isinstance(item, Mapping):
                    fields = {k: v for k, v in item.items() if k != MERGE_KEYS[key]}
                    yield from leaves(fields, (*path, "[]"))
                else:
                    yield path
        else:
            yield path


def _check(patch: Mapping[str, Any], kind: str, body: Mapping[str, Any]) -> None:
    """Raise :class:`Unsafe` unless the patch sets only shutdown-path fields that exist in
    this object's shape, for containers it has."""
    paths = list(leaves(patch))
    if paths and all(p[:2] == ("metadata", "annotations") for p in paths):
        for path in paths:
            if len(path) != 3 or path[2] not in _ANNOTATIONS.get(kind, ()):
                raise Unsafe(f"sets {'.'.join(path)} of a {kind}: review it")
        return
    pod = pod_path(kind)
    allowed = [(*pod, *f) for f in _POD_FIELDS] + ([] if kind == "Pod" else [*_WORKLOAD_FIELDS])
    allowed += [(*pod[:-1], "metadata", "annotations", key) for key in _POD_ANNOTATIONS]
    for path in leaves(patch):
        if not any(path[: len(a)] == a for a in allowed):
            raise Unsafe(f"sets {'.'.join(p for p in path if p != '[]')}: review it")
    spec = _get(body, pod)
    if not isinstance(spec, Mapping):
        raise Unsafe(f"{kind} has no {'.'.join(pod)} to patch")
    wanted = _get(patch, (*pod, "containers"))
    have = {c.get("name") for c in spec.get("containers") or [] if isinstance(c, Mapping)}
    for item in wanted if isinstance(wanted, list) else []:
        name = item.get("name") if isinstance(item, Mapping) else None
        if name not in have:
            raise Unsafe(f"container {name!r} not found in the object")


def _get(body: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(body, Mapping):
            return None
        body = body.get(key)
    return body


def combine(patches: list[Patch]) -> dict[str, Any]:
    """Several fixes of one object as one patch: merged in order; a grace period is the
    largest asked for; two fixes of one hook (a longer sleep, a handler that works in the
    image) give the later handler, sleeping the longer of the two."""
    longest: dict[str | None, int] = {}
    for p in patches:
        if isinstance(p, PodPatch) and p.prestop is not None:
            longest[p.container] = max(longest.get(p.container, 0), p.prestop.seconds)
    out: dict[str, Any] = {}
    for p in patches:
        q = p
        if isinstance(p, PodPatch) and p.prestop is not None:
            q = replace(p, prestop=replace(p.prestop, seconds=longest[p.container]))
        _combine_into(out, q.data())
    return out


def _combine_into(out: dict[str, Any], patch: Mapping[str, Any]) -> None:
    for key, value in patch.items():
        have = out.get(key)
        if isinstance(value, Mapping) and isinstance(have, dict):
            if key in HANDLER_PARENTS and set(value) & HANDLERS:
                for other in (set(have) & HANDLERS) - set(value):
                    del have[other]  # the later handler replaces the earlier one
            _combine_into(have, value)
        elif isinstance(value, list) and isinstance(have, list) and key in MERGE_KEYS:
            merge_key = MERGE_KEYS[key]
            for item in value:
                match = merge_match(have, merge_key, item)
                if match is None:
                    have.append(copy.deepcopy(item))
                else:
                    _combine_into(match, item)
        elif (
            key == "terminationGracePeriodSeconds"
            and isinstance(have, int | float)
            and isinstance(value, int | float)
        ):
            out[key] = max(have, value)
        else:
            out[key] = copy.deepcopy(value)


def effective(patch: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
    """The patch with what it changes in ``body`` made explicit: ``None`` (delete) for the
    handlers a new handler replaces, and only the fields whose value changes (``{}`` when
    nothing changes)."""
    out: dict[str, Any] = {}
    for key, value in patch.items():
        have = body.get(key) if isinstance(body, Mapping) else None
        if value is None:
            if isinstance(body, Mapping) and key in body:
                out[key] = None
        elif isinstance(value, Mapping):
            if not isinstance(have, Mapping):
                out[key] = copy.deepcopy(dict(value))
                continue
            sub = effective(value, have)
            if key in HANDLER_PARENTS and set(value) & HANDLERS:
                for other in sorted((set(have) & HANDLERS) - set(value)):
                    sub[other] = None
            if sub:
                out[key] = sub
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(have, list):
            merge_key = MERGE_KEYS[key]
            items = []
            for item in value:
                match = merge_match(have, merge_key, item)
                if match is None:
                    items.append(copy.deepcopy(item))
                    continue
                sub = effective({k: v for k, v in item.items() if k != merge_key}, match)
                if sub:
                    items.append({merge_key: item[merge_key], **sub})
            if items:
                out[key] = items
        elif not _same(have, value):
            out[key] = copy.deepcopy(value)
    return out


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b if isinstance(b, bool) or isinstance(a, bool) else a == b


def apply(body: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``body`` with an :func:`effective` patch applied (a copy; plain data)."""
    out: dict[str, Any] = strategic_merge_patch(copy.deepcopy(body), dict(patch))
    return out


__all__ = [
    "Step",
    "Unsafe",
    "apply",
    "combine",
    "decide",
    "effective",
    "leaves",
]
