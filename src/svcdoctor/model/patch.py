"""Typed changes to Kubernetes objects and the one strategic-merge apply.

A check's fix is a :class:`Fix`: a patch record (a :class:`PodPatch` for the shutdown path,
an :class:`ObjectPatch` for any other field) with the comments printed around it. The
records turn into plain JSON-like data here (``patch_data``); only ``report/`` turns that
data into YAML text. :func:`strategic_merge_patch` applies such data to an object as the
API server does (``fix`` and the lab's API server share it).
"""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

# Lists merged item by item on a key, as the API's strategic merge does; other lists are
# replaced whole.
MERGE_KEYS: dict[str, str] = {
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
    "topologySpreadConstraints": "topologyKey",
}
# A hook or probe has one handler: setting one removes the others.
HANDLER_PARENTS = frozenset(
    {"preStop", "postStart", "readinessProbe", "livenessProbe", "startupProbe"}
)
HANDLERS = frozenset({"exec", "httpGet", "tcpSocket", "grpc", "sleep"})

POD_PATH = {"Pod": ("spec",)}
TEMPLATE_PATH = ("spec", "template", "spec")


def pod_path(kind: str) -> tuple[str, ...]:
    """Where an object of ``kind`` keeps its pod spec."""
    return POD_PATH.get(kind, TEMPLATE_PATH)


class FixAvailability(StrEnum):
    """What a rule declares about its fixes (as ruff declares fix availability)."""

    SAFE = "safe"  # changes only the shutdown path: ``fix`` applies it
    MANUAL = "manual"  # changes behaviour beyond it: printed as a step to review


class Handler(StrEnum):
    """How a preStop delay is written."""

    SLEEP = "sleep"  # lifecycle.preStop.sleep.seconds
    SHELL = "shell"  # exec [sh, -c, "sleep N"], then the hook's old command if it had one
    EDIT = "edit"  # the hook's own exec command, its ``sleep N`` set to the seconds
    BINARY = "binary"  # exec [/sleep, N]: a static sleep binary copied into the image
    NONE = "none"  # no preStop (``null``)


_SLEEP_WORDS = re.compile(r"\bsleep\s+\d+(\.\d+)?[smh]?")


def with_sleep(command: tuple[str, ...] | list[str], sleep: int) -> list[str]:
    """An exec hook's command with its ``sleep N`` set to ``sleep``."""
    return [_SLEEP_WORDS.sub(f"sleep {sleep}", w) for w in command]


@dataclass(frozen=True, slots=True)
class PreStopHook:
    """The preStop delay to set: ``seconds`` written as ``handler`` says. ``command``: the
    hook's current exec command (``EDIT``, or ``SHELL`` running it after the sleep);
    ``replaces``: the handler it has now, deleted (a hook has one handler)."""

    handler: Handler
    seconds: int
    command: tuple[str, ...] = ()
    replaces: str | None = None

    def data(self) -> dict[str, Any] | None:
        n = self.seconds
        body: dict[str, Any] | None
        if self.handler is Handler.SLEEP:
            body = {"sleep": {"seconds": n}}
        elif self.handler is Handler.SHELL:
            script = f"sleep {n}; {shlex.join(self.command)}" if self.command else f"sleep {n}"
            body = {"exec": {"command": ["sh", "-c", script]}}
        elif self.handler is Handler.EDIT:
            body = {"exec": {"command": with_sleep(self.command, n)}}
        elif self.handler is Handler.BINARY:
            body = {"exec": {"command": ["/sleep", str(n)]}}
        else:
            return None
        if self.replaces is not None:
            body[self.replaces] = None  # strategic merge: null deletes the old handler
        return body


@dataclass(frozen=True, slots=True)
class PodPatch:
    """A change to the pod spec of an object of ``kind``: the grace period, pod-level
    ``spread`` constraints, and for ``container``: its preStop, a readiness probe to set,
    a new liveness probe (``None`` handler values delete the old handler), its
    ``command``/``args`` (``exec`` put before the app's command)."""

    kind: str
    container: str | None = None
    grace_seconds: int | None = None
    spread: tuple[Mapping[str, Any], ...] | None = field(default=None, hash=False)
    prestop: PreStopHook | None = None
    readiness: Mapping[str, Any] | None = field(default=None, hash=False)
    liveness: Mapping[str, Any] | None = field(default=None, hash=False)
    command: tuple[str, ...] | None = None
    args: tuple[str, ...] | None = None

    @property
    def argv_only(self) -> bool:
        """Whether the patch sets only the container's ``command``/``args``."""
        return (
            self.container is not None
            and (self.command is not None or self.args is not None)
            and self == PodPatch(self.kind, self.container, command=self.command, args=self.args)
        )

    def container_data(self) -> dict[str, Any]:
        """The container's fields (its name first)."""
        out: dict[str, Any] = {"name": self.container}
        if self.prestop is not None:
            out["lifecycle"] = {"preStop": self.prestop.data()}
        if self.readiness is not None:
            out["readinessProbe"] = copy.deepcopy(dict(self.readiness))
        if self.liveness is not None:
            out["livenessProbe"] = copy.deepcopy(dict(self.liveness))
        if self.command is not None:
            out["command"] = list(self.command)
        if self.args is not None:
            out["args"] = list(self.args)
        return out

    def data(self) -> dict[str, Any]:
        """The patch as strategic-merge data for the object."""
        pod: dict[str, Any] = {}
        if self.grace_seconds is not None:
            pod["terminationGracePeriodSeconds"] = self.grace_seconds
        if self.spread is not None:
            pod["topologySpreadConstraints"] = [copy.deepcopy(dict(s)) for s in self.spread]
        if self.container is not None:
            pod["containers"] = [self.container_data()]
        out: dict[str, Any] = pod
        for key in reversed(pod_path(self.kind)):
            out = {key: out}
        return out


@dataclass(frozen=True, slots=True)
class ObjectPatch:
    """Any other change, as strategic-merge data for the object (a Service's ports, a
    workload's replicas or strategy, a kube-proxy setting)."""

    body: Mapping[str, Any] = field(hash=False)

    def data(self) -> dict[str, Any]:
        return copy.deepcopy(dict(self.body))


Patch = PodPatch | ObjectPatch


@dataclass(frozen=True, slots=True)
class Fix:
    """A finding's fix: ``patch`` printed as YAML between ``lead`` (comment lines: what it
    does, or a step to take first) and ``note`` (comments or text after it); ``prior`` a
    patch of another object printed first (a YAML document of its own). ``safe``: the rule
    declares its fixes safe to apply (:class:`FixAvailability`). A fix with no patch is
    prose (``note``)."""

    patch: Patch | None = None
    lead: str = ""
    note: str = ""
    prior: Patch | None = None
    safe: bool = False

    @property
    def applicable(self) -> bool:
        """Whether the fix is the patch alone (comments after it aside): a lead is a step
        to take first, unless the patch only puts ``exec`` before a command."""
        if self.patch is None or self.prior is not None:
            return False
        return not self.lead or (isinstance(self.patch, PodPatch) and self.patch.argv_only)


def note(text: str) -> Fix:
    """A fix that is prose only."""
    return Fix(note=text)


def replaced_handler(node: Mapping[str, Any], patch: Mapping[str, Any]) -> tuple[str, str] | None:
    """``(old, new)`` when ``patch`` swaps the hook's or probe's handler ``old`` of ``node``
    for ``new``: the new one takes the old one's place, so the rest of the probe stays put."""
    gone = [k for k, v in patch.items() if k in HANDLERS and v is None and k in node]
    added = [k for k, v in patch.items() if k in HANDLERS and v is not None and k not in node]
    return (gone[0], added[0]) if len(gone) == 1 and len(added) == 1 else None


def merge_match(items: Sequence[Any], merge_key: str, item: Mapping[str, Any]) -> Any:
    """The mapping among ``items`` whose ``merge_key`` is ``item``'s (``None``: none)."""
    return next(
        (h for h in items if isinstance(h, Mapping) and h.get(merge_key) == item.get(merge_key)),
        None,
    )


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """``patch`` applied to ``target`` as a strategic merge patch: maps merged, the lists
    Kubernetes merges by a key merged by it (``MERGE_KEYS``), other lists replaced;
    ``$patch: replace``/``delete`` honoured, other ``$`` directives ignored. A handler the
    patch swaps for another keeps its place. ``target`` is not changed."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if not k.startswith("$")}
    result = dict(target) if isinstance(target, dict) else {}
    swap = replaced_handler(result, patch)
    if swap is not None:  # the new handler in the old one's place
        old, new = swap
        result = {(new if k == old else k): (None if k == old else v) for k, v in result.items()}
    for key, value in patch.items():
        if key.startswith("$") or (swap is not None and key == swap[0]):
            continue
        if value is None or (isinstance(value, dict) and value.get("$patch") == "delete"):
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(result.get(key), list):
            result[key] = _merge_list(result[key], value, MERGE_KEYS[key])
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


__all__ = [
    "HANDLERS",
    "HANDLER_PARENTS",
    "MERGE_KEYS",
    "Fix",
    "FixAvailability",
    "Handler",
    "ObjectPatch",
    "Patch",
    "PodPatch",
    "PreStopHook",
    "merge_match",
    "note",
    "pod_path",
    "replaced_handler",
    "strategic_merge_patch",
    "with_sleep",
]
