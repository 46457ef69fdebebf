"""Findings' fixes as strategic-merge patches: which ones are safe to apply, how several
combine on one object, and what they change in it (pure: plain dicts in, plain dicts out)."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from svcdoctor.model import Finding

# Rules whose patch-shaped fixes change only the shutdown path (preStop, grace period, the
# shell's exec, the rollout strategy) or split liveness from readiness (SVD202: liveness
# becomes a TCP check of the port readiness already probes): applied. Every other fix is
# printed as a manual step (probe endpoints the app may not serve, Service semantics,
# replica counts).
SAFE_RULES = frozenset({"SVD101", "SVD102", "SVD103", "SVD104", "SVD105", "SVD106", "SVD202"})

# Lists merged item by item on a key, as the API's strategic merge does; other lists are
# replaced whole.
MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "topologySpreadConstraints": "topologyKey",
}
# A hook or probe has one handler: setting one removes the others.
HANDLER_PARENTS = frozenset(
    {"preStop", "postStart", "readinessProbe", "livenessProbe", "startupProbe"}
)
HANDLERS = frozenset({"exec", "httpGet", "tcpSocket", "grpc", "sleep"})

_POD_PATH = {"Pod": ("spec",)}
_TEMPLATE_PATH = ("spec", "template", "spec")
# Fields a safe fix may set, below the pod spec (``[]``: an item of a merged list).
_POD_FIELDS = (
    ("terminationGracePeriodSeconds",),
    ("containers", "[]", "lifecycle", "preStop"),
    ("containers", "[]", "livenessProbe"),
    ("containers", "[]", "command"),
    ("containers", "[]", "args"),
)
_WORKLOAD_FIELDS = (("spec", "strategy"), ("spec", "updateStrategy"))
_CONTAINER_KEYS = frozenset({"command", "args"})


class Unsafe(Exception):
    """Why a fix is not applied automatically (one line)."""


@dataclass(frozen=True, slots=True)
class Step:
    """One finding's fix: ``patch`` when it is applied, else ``reason`` says why not and
    the fix is a manual step."""

    finding: Finding
    patch: dict[str, Any] | None
    reason: str = ""


def parse_fix(text: str | None) -> dict[str, Any] | None:
    """The fix as a mapping (``# …`` lines ignored), or ``None`` when it is prose, empty,
    several documents or not a mapping. A comment *before* the mapping is a condition the
    reader must meet first (ship a binary, recreate an object): also ``None``."""
    if not text or not text.strip():
        return None
    lines = text.splitlines()
    first = next(
        (i for i, line in enumerate(lines) if line.strip() and not line.lstrip().startswith("#")),
        None,
    )
    if first is None or any(line.strip() for line in lines[:first]):
        return None
    try:
        docs = list(yaml.load_all(text, Loader=yaml.CSafeLoader))
    except yaml.YAMLError:
        return None
    docs = [d for d in docs if d is not None]
    if len(docs) != 1 or not isinstance(docs[0], dict) or not docs[0]:
        return None
    body: dict[str, Any] = docs[0]
    return body


def pod_path(kind: str) -> tuple[str, ...]:
    return _POD_PATH.get(kind, _TEMPLATE_PATH)


def decide(finding: Finding, body: Mapping[str, Any] | None) -> Step:
    """Whether the finding's fix is applied to ``body`` (the object as read), and as
    which patch."""
    patch = parse_fix(finding.fix)
    rule = finding.rule
    if patch is None and rule == "SVD105":
        patch = _exec_fix(finding, body)
    if patch is None:
        return Step(finding, None, "not a patch")
    if rule not in SAFE_RULES:
        return Step(finding, None, "changes behaviour beyond the shutdown path: review it")
    if body is None or finding.object is None:
        return Step(finding, None, "object not found in its file")
    kind = finding.object.kind
    if set(patch) <= _CONTAINER_KEYS and finding.container:
        # a container-level fix (``command: [...]``): for the finding's container
        patch = _nest(pod_path(kind), {"containers": [{"name": finding.container, **patch}]})
    try:
        _check(patch, kind, body)
    except Unsafe as exc:
        return Step(finding, None, str(exc))
    return Step(finding, patch)


def _exec_fix(finding: Finding, body: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """SVD105's ``command:``/``args:`` lines (after their explanation) when they only put
    ``exec`` before the script's last command; anything more (an init such as tini that
    the image may lack) is a manual step."""
    lines = [ln for ln in (finding.fix or "").splitlines() if not ln.lstrip().startswith("#")]
    try:
        fields = yaml.load("\n".join(lines), Loader=yaml.CSafeLoader)
    except yaml.YAMLError:
        return None
    if not isinstance(fields, dict) or not fields or not set(fields) <= _CONTAINER_KEYS:
        return None
    spec = _get(body, pod_path(finding.object.kind)) if finding.object and body else None
    container = next(
        (
            c
            for c in (spec.get("containers") or [] if isinstance(spec, Mapping) else [])
            if isinstance(c, Mapping) and c.get("name") == finding.container
        ),
        None,
    )
    if container is None:
        return None
    old = [*(container.get("command") or []), *(container.get("args") or [])]
    new = [*(fields.get("command", container.get("command")) or []),
           *(fields.get("args", container.get("args")) or [])]  # fmt: skip
    changed = [(a, b) for a, b in zip(old, new, strict=False) if a != b]
    if len(old) != len(new) or len(changed) != 1 or not isinstance(changed[0][1], str):
        return None
    before, after = changed[0]
    at = after.find("exec ")
    if not isinstance(before, str) or at < 0 or after[:at] + after[at + 5 :] != before:
        return None
    return dict(fields)


def _nest(path: tuple[str, ...], leaf: dict[str, Any]) -> dict[str, Any]:
    out = leaf
    for key in reversed(path):
        out = {key: out}
    return out


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
    pod = pod_path(kind)
    allowed = [(*pod, *f) for f in _POD_FIELDS] + ([] if kind == "Pod" else [*_WORKLOAD_FIELDS])
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


def combine(patches: list[dict[str, Any]]) -> dict[str, Any]:
    """Several fixes of one object as one patch: merged in order; a grace period is the
    largest asked for."""
    out: dict[str, Any] = {}
    for patch in patches:
        _combine_into(out, patch)
    return out


def _combine_into(out: dict[str, Any], patch: Mapping[str, Any]) -> None:
    for key, value in patch.items():
        have = out.get(key)
        if isinstance(value, Mapping) and isinstance(have, dict):
            if key in HANDLER_PARENTS and set(value) & HANDLERS:
                longest = max(_sleep_seconds(have), _sleep_seconds(value))
                for other in (set(have) & HANDLERS) - set(value):
                    del have[other]
                _combine_into(have, value)
                # two fixes of one hook (a longer sleep, a handler that works in the image):
                # the later handler, sleeping the longer of the two
                _set_sleep(have, longest)
                continue
            _combine_into(have, value)
        elif isinstance(value, list) and isinstance(have, list) and key in MERGE_KEYS:
            merge_key = MERGE_KEYS[key]
            for item in value:
                match = next(
                    (
                        h
                        for h in have
                        if isinstance(h, dict) and h.get(merge_key) == item.get(merge_key)
                    ),
                    None,
                )
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


_SLEEP_WORD = re.compile(r"\bsleep\s+(\d+)\b")


def _sleep_seconds(hook: Mapping[str, Any]) -> int:
    """The delay a preStop hook of a fix sleeps (native or ``sleep N`` in an exec)."""
    native = hook.get("sleep")
    if isinstance(native, Mapping) and isinstance(native.get("seconds"), int):
        return int(native["seconds"])
    command = hook.get("exec", {}).get("command") if isinstance(hook.get("exec"), Mapping) else None
    for word in command if isinstance(command, list) else []:
        found = _SLEEP_WORD.search(str(word))
        if found:
            return int(found.group(1))
    return 0


def _set_sleep(hook: dict[str, Any], seconds: int) -> None:
    if not seconds or _sleep_seconds(hook) >= seconds:
        return
    native = hook.get("sleep")
    if isinstance(native, dict) and "seconds" in native:
        native["seconds"] = seconds
        return
    command = hook.get("exec", {}).get("command") if isinstance(hook.get("exec"), dict) else None
    if isinstance(command, list):
        hook["exec"]["command"] = [
            _SLEEP_WORD.sub(f"sleep {seconds}", w) if isinstance(w, str) else w for w in command
        ]


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
                match = next(
                    (
                        h
                        for h in have
                        if isinstance(h, Mapping) and h.get(merge_key) == item.get(merge_key)
                    ),
                    None,
                )
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
    out = copy.deepcopy(body)
    _apply_plain(out, patch)
    return out


def replaced_handler(node: Mapping[str, Any], patch: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(old, new)`` when ``patch`` swaps the hook's or probe's handler ``old`` of ``node``
    for ``new``: the new one takes the old one's place, so the rest of the probe stays put."""
    gone = [k for k, v in patch.items() if k in HANDLERS and v is None and k in node]
    added = [k for k, v in patch.items() if k in HANDLERS and v is not None and k not in node]
    return (gone[0], added[0]) if len(gone) == 1 and len(added) == 1 else None


def _apply_plain(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    swap = replaced_handler(target, patch)
    if swap is not None:
        old, new = swap
        items = [
            (new, copy.deepcopy(patch[new])) if k == old else (k, v) for k, v in target.items()
        ]
        target.clear()
        target.update(items)
        patch = {k: v for k, v in patch.items() if k not in swap}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _apply_plain(target[key], value)
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(target.get(key), list):
            merge_key = MERGE_KEYS[key]
            for item in value:
                match = next(
                    (
                        h
                        for h in target[key]
                        if isinstance(h, dict) and h.get(merge_key) == item.get(merge_key)
                    ),
                    None,
                )
                if match is None:
                    target[key].append(copy.deepcopy(item))
                else:
                    _apply_plain(match, item)
        else:
            target[key] = copy.deepcopy(value)


__all__ = [
    "HANDLERS",
    "HANDLER_PARENTS",
    "MERGE_KEYS",
    "SAFE_RULES",
    "Step",
    "Unsafe",
    "apply",
    "combine",
    "decide",
    "effective",
    "leaves",
    "parse_fix",
    "pod_path",
    "replaced_handler",
]
