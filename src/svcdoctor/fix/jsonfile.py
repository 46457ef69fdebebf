"""Fixes of JSON manifests in place. JSON has no comments or styles to keep, only a
layout: a file laid out as ``json.dumps(indent=N)`` and ``kubectl get -o json`` lay it out
(one member a line) is written back the same way, so only the changed members move; any
other layout (minified, hand-aligned) is refused, to be fixed with ``--patch-dir``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from svcdoctor.fix.patch import apply
from svcdoctor.fix.rewrite import CannotRewrite, Target, decode

_INDENTS: tuple[int | str, ...] = (2, 4, "\t", 1, 3, 8)


@dataclass(frozen=True, slots=True)
class _Layout:
    indent: int | str
    ensure_ascii: bool


def is_json(data: bytes) -> bool:
    """Whether the file is a JSON document (else it is read as YAML)."""
    start = data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if start not in (b"{", b"["):
        return False
    try:
        json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError):
        return False
    return True


def rewrite_json(
    data: bytes, patches: Sequence[tuple[Target, Mapping[str, Any]]]
) -> tuple[bytes, list[tuple[Target, str]]]:
    """The file with each target object patched (``None`` values delete keys), and the
    targets that cannot be with the reason; :class:`CannotRewrite` when the file's layout
    cannot be written back."""
    text, restore = decode(data)
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise CannotRewrite(f"not JSON ({exc})") from None
    layout = _layout(text, document)
    failed: list[tuple[Target, str]] = []
    objects = list(_objects(document))
    for target, patch in patches:
        found = [o for o in objects if _is(o, target)]
        if len(found) != 1:
            failed.append(
                (target, f"{target.kind} {target.name}: {len(found)} objects of that name")
            )
            continue
        fixed = apply(found[0], patch)
        found[0].clear()
        found[0].update(fixed)
    out = _dump(document, layout)
    return (restore(out) if out != text else data), failed


def _layout(text: str, document: Any) -> _Layout:
    for indent in _INDENTS:
        for ascii_only in (False, True):
            layout = _Layout(indent, ascii_only)
            if _dump(document, layout) == text:
                return layout
    raise CannotRewrite(
        "its JSON layout is not one member a line (as `kubectl get -o json` writes it): "
        "use --patch-dir"
    )


def _dump(document: Any, layout: _Layout) -> str:
    return json.dumps(document, indent=layout.indent, ensure_ascii=layout.ensure_ascii) + "\n"


def _objects(document: Any) -> list[dict[str, Any]]:
    """The top-level objects: the document, the items of a ``*List``, or a JSON array's."""
    items: Any = [document]
    if isinstance(document, list):
        items = document
    elif isinstance(document, dict) and str(document.get("kind", "")).endswith("List"):
        items = document.get("items")
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def _is(obj: Mapping[str, Any], target: Target) -> bool:
    meta = obj.get("metadata")
    if obj.get("kind") != target.kind or not isinstance(meta, Mapping):
        return False
    ns = meta.get("namespace")
    return meta.get("name") == target.name and (
        target.namespace is None or ns is None or ns == target.namespace
    )


__all__ = ["is_json", "rewrite_json"]
