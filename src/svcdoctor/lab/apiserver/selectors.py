"""Label and field selectors: parsed into requirements, matched against an object's labels
and selectable fields."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from svcdoctor.lab.apiserver.status import bad_request

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


FIELD_PATHS = {
    resource: {label: tuple(path.split(".")) for label, path in fields.items()}
    for resource, fields in _FIELDS.items()
}


_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"


LABEL_KEY = re.compile(rf"([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}")


LABEL_VALUE = re.compile(rf"({_NAME})?")


_SET_REQ = re.compile(r"(\S+)\s+(in|notin)\s*\(([^()]*)\)")


_CMP_REQ = re.compile(r"([^\s=!<>]+)\s*(==|=|!=|<|>)\s*(\S*)")


@dataclass(frozen=True, slots=True)
class Requirement:
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


def parse_labels(selector: str) -> list[Requirement]:
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


def _parse_label_requirement(text: str) -> Requirement:
    if m := _SET_REQ.fullmatch(text):
        values = [v.strip() for v in m[3].split(",")]
        return _requirement(m[1], m[2], values, text)
    if m := _CMP_REQ.fullmatch(text):
        op = "=" if m[2] == "==" else m[2]
        return _requirement(m[1], op, [m[3]], text)
    if text.startswith("!"):
        return _requirement(text[1:].strip(), "!exists", [], text)
    return _requirement(text, "exists", [], text)


def _requirement(key: str, op: str, values: list[str], text: str) -> Requirement:
    if not LABEL_KEY.fullmatch(key) or len(key.rpartition("/")[2]) > 63:
        raise bad_request(f"unable to parse requirement: invalid label key {key!r} in {text!r}")
    for value in values:
        if not LABEL_VALUE.fullmatch(value):
            raise bad_request(f"unable to parse requirement: invalid label value {value!r}")
        if op in ("<", ">") and not value.lstrip("-").isdigit():
            raise bad_request(f"unable to parse requirement: {value!r} is not an integer")
    return Requirement(key, op, frozenset(values))


def parse_fields(resource: str, selector: str) -> list[Requirement]:
    """Parse a field selector (``a=b,c!=d``) over the fields ``resource`` supports."""
    known = {"metadata.name", "metadata.namespace", *_FIELDS.get(resource, {})}
    requirements = []
    for part in re.split(r"(?<!\\),", selector):
        if not part:
            continue
        m = re.fullmatch(r"((?:\\.|[^=!\\])+)(==|=|!=)(.*)", part)
        if m is None:
            raise bad_request(f"invalid selector: '{selector}'; can't understand '{part}'")
        label, op, value = m[1].strip(), "!=" if m[2] == "!=" else "=", m[3]
        if label not in known:
            raise bad_request(
                f"field label not supported: {label}"
                if resource in _FIELDS
                else f'"{label}" is not a known field selector: only "metadata.name", '
                '"metadata.namespace"'
            )
        requirements.append(Requirement(label, op, frozenset({re.sub(r"\\(.)", r"\1", value)})))
    return requirements


def field_value(obj: Mapping[str, Any], path: tuple[str, ...]) -> str:
    value: Any = obj
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)
