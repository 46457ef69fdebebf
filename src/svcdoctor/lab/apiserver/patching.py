"""The patch formats the server applies: JSON merge patch (RFC 7386), strategic merge patch
and JSON patch (RFC 6902); pure functions over decoded JSON."""

from __future__ import annotations

import copy
import enum
from collections.abc import Callable
from typing import Any

from svcdoctor.model.patch import strategic_merge_patch


class PatchType(enum.StrEnum):
    """The patch formats the server applies (by Content-Type)."""

    STRATEGIC = "strategic"  # application/strategic-merge-patch+json
    MERGE = "merge"  # application/merge-patch+json (RFC 7386)
    JSON = "json"  # application/json-patch+json (RFC 6902)


class PatchError(ValueError):
    """A patch that cannot be applied to the object."""


def merge_patch(target: Any, patch: Any) -> Any:
    """``patch`` applied to ``target`` as a JSON merge patch (RFC 7386)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: Any, operations: Any) -> Any:
    """``operations`` (RFC 6902: add, remove, replace, move, copy, test) applied to a copy
    of ``target``; ``PatchError`` when one does not apply."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or not isinstance(op.get("path"), str):
            raise PatchError(f"invalid JSON patch operation {op!r}")
        kind, path = op.get("op"), op["path"]
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f'"value" missing in the {kind} operation at {path}')
        if kind == "test":
            if _pointer_get(doc, path) != op["value"]:
                raise PatchError(f"testing value {path} failed")
        elif kind == "remove":
            doc = _pointer_remove(doc, path)
        elif kind == "add":
            doc = _pointer_add(doc, path, copy.deepcopy(op["value"]))
        elif kind == "replace":
            doc = _pointer_add(_pointer_remove(doc, path), path, copy.deepcopy(op["value"]))
        elif kind in ("move", "copy") and isinstance(op.get("from"), str):
            value = copy.deepcopy(_pointer_get(doc, op["from"]))
            if kind == "move":
                doc = _pointer_remove(doc, op["from"])
            doc = _pointer_add(doc, path, value)
        else:
            raise PatchError(f"unknown JSON patch operation {kind!r}")
    return doc


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer {path!r} does not start with /")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _step(doc: Any, part: str, path: str, *, insert: bool = False) -> Any:
    """The child ``part`` of ``doc`` (a list index, ``-`` only when inserting)."""
    if isinstance(doc, dict):
        if part not in doc:
            raise PatchError(f"doc is missing key: {path}")
        return doc[part]
    if isinstance(doc, list):
        index = _index(doc, part, path, insert=insert)
        if index >= len(doc):
            raise PatchError(f"index out of bounds: {path}")
        return doc[index]
    raise PatchError(f"doc is missing path: {path}")


def _index(doc: list[Any], part: str, path: str, *, insert: bool) -> int:
    if insert and part == "-":
        return len(doc)
    if not part.isdigit() or (len(part) > 1 and part.startswith("0")):
        raise PatchError(f"invalid array index {part!r} in {path}")
    index = int(part)
    if index > len(doc) or (index == len(doc) and not insert):
        raise PatchError(f"index out of bounds: {path}")
    return index


def _pointer_get(doc: Any, path: str) -> Any:
    for part in _pointer(path):
        doc = _step(doc, part, path)
    return doc


def _parent(doc: Any, path: str) -> tuple[Any, str] | None:
    """What holds the pointer's last part, and that part (None: the pointer is the root)."""
    parts = _pointer(path)
    if not parts:
        return None
    parent = doc
    for part in parts[:-1]:
        parent = _step(parent, part, path)
    return parent, parts[-1]


def _pointer_add(doc: Any, path: str, value: Any) -> Any:
    found = _parent(doc, path)
    if found is None:
        return value
    parent, last = found
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, insert=True), value)
    else:
        raise PatchError(f"doc is missing path: {path}")
    return doc


def _pointer_remove(doc: Any, path: str) -> Any:
    found = _parent(doc, path)
    if found is None:
        return None
    parent, last = found
    if isinstance(parent, dict) and last not in parent:
        raise PatchError(f"doc is missing key: {path}")
    if isinstance(parent, dict):
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, path, insert=False)]
    else:
        raise PatchError(f"doc is missing path: {path}")
    return doc


PATCH_TYPES = {
    "application/strategic-merge-patch+json": PatchType.STRATEGIC,
    "application/merge-patch+json": PatchType.MERGE,
    "application/json-patch+json": PatchType.JSON,
}


PATCHERS: dict[PatchType, Callable[[Any, Any], Any]] = {
    PatchType.STRATEGIC: strategic_merge_patch,
    PatchType.MERGE: merge_patch,
    PatchType.JSON: json_patch,
}
