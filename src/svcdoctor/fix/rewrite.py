"""Apply patches to a manifest file's text with ``ruamel.yaml`` round-trip, changing only
the lines of the changed nodes: the rest of the file stays byte-identical.

ruamel.yaml keeps comments, key order, quoting and flow style, but re-emitting a whole file
may still move things (indentation of sequences, blank lines, long lines). So the file is
emitted twice, as read and as patched; the lines that differ between those two emissions
are spliced into the original text where the surrounding lines are the same in all three.
The result is parsed again and must equal the patched objects, or the file is refused.
"""

from __future__ import annotations

import codecs
import difflib
import functools
import io
import itertools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from svcdoctor.errors import SvcdoctorError
from svcdoctor.model.patch import (
    MERGE_KEYS,
    merge_match,
    replaced_handler,
    strategic_merge_patch,
)


class CannotRewrite(SvcdoctorError):
    """Why a file cannot be rewritten in place (one line)."""


@dataclass(frozen=True, slots=True)
class Target:
    """An object of the file to patch: kind, name, namespace (``None``: any) and the line
    it starts on (1-based; picks among objects of the same name)."""

    kind: str
    name: str
    namespace: str | None
    line: int


def rewrite(data: bytes, patches: Sequence[tuple[Target, Mapping[str, Any]]]) -> bytes:
    """The file's bytes with each target object patched (``None`` values delete keys);
    :class:`CannotRewrite` when that cannot be done without moving other lines."""
    out, failed = rewrite_each(data, patches)
    if failed:
        raise CannotRewrite(failed[0][1])
    return out


def rewrite_each(
    data: bytes, patches: Sequence[tuple[Target, Mapping[str, Any]]]
) -> tuple[bytes, list[tuple[Target, str]]]:
    """The file's bytes with each target object patched that can be, and the targets that
    cannot with the reason (their document is left as it is); :class:`CannotRewrite` when
    the file as a whole cannot be rewritten (encoding, line endings).

    Only the documents holding a target are read and emitted again (``---`` lines split
    the file: inside a document such a line can only be part of an indented scalar)."""
    text, restore = decode(data)
    lines = text.splitlines(keepends=True)
    chunks = _chunks(lines)
    todo: dict[tuple[int, int], list[tuple[Target, Mapping[str, Any]]]] = {}
    for target, patch in patches:
        at = next(((a, b) for a, b in chunks if a < target.line <= b), chunks[-1])
        todo.setdefault(at, []).append((target, patch))
    out = list(lines)
    failed: list[tuple[Target, str]] = []
    for (first, last), items in sorted(todo.items(), reverse=True):
        try:
            out[first:last] = _rewrite_document(lines[first:last], first, items)
        except CannotRewrite as exc:
            failed.extend((target, str(exc)) for target, _ in items)
    return (restore("".join(out)) if out != lines else data), failed


def _rewrite_document(
    lines: list[str], first: int, items: list[tuple[Target, Mapping[str, Any]]]
) -> list[str]:
    """One document's lines (starting at line index ``first``) with its targets patched."""
    part = "".join(lines)
    docs = _load(part)
    indent = _guess_indent(part)
    # null as the emitter writes it (``key:``), and as ``null`` where the file says so
    emitters = [_yaml(*indent)] + ([_yaml(*indent, null="null")] if "null" in part else [])
    bases = [_dump(emit, docs) for emit in emitters]
    for target, patch in items:
        local = Target(target.kind, target.name, target.namespace, target.line - first)
        node = _find(docs, local)
        want = strategic_merge_patch(plain(node), patch)  # the merge; _apply splices it
        _apply(node, patch, local)
        if plain(node) != want:
            raise CannotRewrite("the patch cannot be spliced into the file as it merges")
    problem: CannotRewrite | None = None
    for emit, base in zip(emitters, bases, strict=True):
        new = _dump(emit, docs)
        if new == base:
            return lines
        try:
            merged = _merge(lines, base.splitlines(True), new.splitlines(True), first)
        except CannotRewrite as exc:
            problem = problem or exc
            continue
        _verify("".join(merged), docs)
        return merged
    assert problem is not None
    raise problem


_DOCUMENT_MARK = re.compile(r"(?:---|\.\.\.)(?:[ \t]|$)")


def _chunks(lines: list[str]) -> list[tuple[int, int]]:
    """``(first, end)`` line indexes of each document: from its ``---`` (or the start)
    to the next one."""
    starts = [0] + [i for i, line in enumerate(lines) if i and _DOCUMENT_MARK.match(line)]
    ends = [*starts[1:], len(lines)]
    return list(zip(starts, ends, strict=True))


def decode(data: bytes) -> tuple[str, Callable[[str], bytes]]:
    """The file as text with LF line endings and a final newline, and the function that
    turns such text back into bytes as the file has them (BOM, CRLF, no final newline);
    :class:`CannotRewrite` for an encoding or line endings that cannot round-trip."""
    bom = data.startswith(codecs.BOM_UTF8)
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        raise CannotRewrite("UTF-16 file: rewrite it as UTF-8 first, or use --patch-dir")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CannotRewrite(f"not UTF-8 (byte at offset {exc.start})") from None
    crlf = text.count("\r\n")
    if crlf and crlf != text.count("\n"):
        raise CannotRewrite("mixed CRLF and LF line endings")
    if "\r" in text.replace("\r\n", ""):
        raise CannotRewrite("carriage returns inside lines")
    text = text.replace("\r\n", "\n")
    final_newline = text.endswith("\n") or not text
    if not final_newline:
        text += "\n"

    def restore(out: str) -> bytes:
        if not final_newline and out.endswith("\n"):
            out = out[:-1]
        if crlf:
            out = out.replace("\n", "\r\n")
        return (codecs.BOM_UTF8 if bom else b"") + out.encode("utf-8")

    return text, restore


def _yaml(mapping: int, sequence: int, offset: int, *, null: str = "") -> Any:
    from ruamel.yaml import YAML

    yml = YAML(typ="rt")
    if null:
        yml.Representer = _null_representer(null)
    yml.preserve_quotes = True
    yml.width = 1 << 20  # never wrap: long lines stay as they are
    yml.indent(mapping=mapping, sequence=sequence, offset=offset)
    return yml


@functools.cache
def _null_representer(null: str) -> Any:
    """A round-trip representer writing None as ``null`` (a subclass: ``add_representer``
    changes the class it is called on, for every emitter)."""
    from ruamel.yaml.representer import RoundTripRepresenter

    class NullRepresenter(RoundTripRepresenter):
        pass

    NullRepresenter.add_representer(
        type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", null)
    )
    return NullRepresenter


def _load(text: str) -> list[Any]:
    from ruamel.yaml.error import YAMLError

    yml = _yaml(2, 2, 0)
    try:
        docs = list(yml.load_all(text))
    except YAMLError as exc:
        first = str(exc).strip().splitlines()
        raise CannotRewrite(f"ruamel.yaml cannot read it ({first[0] if first else exc})") from None
    except RecursionError:
        raise CannotRewrite("nested too deeply") from None
    return docs


def _objects(docs: list[Any]) -> Iterator[Any]:
    from ruamel.yaml.comments import CommentedMap

    for doc in docs:
        if not isinstance(doc, CommentedMap):
            continue
        kind = doc.get("kind")
        items = doc.get("items")
        if isinstance(kind, str) and kind.endswith("List") and isinstance(items, list):
            yield from (i for i in items if isinstance(i, CommentedMap))
        else:
            yield doc


def _find(docs: list[Any], target: Target) -> Any:
    found = []
    for obj in _objects(docs):
        meta = obj.get("metadata")
        if obj.get("kind") != target.kind or not isinstance(meta, Mapping):
            continue
        if meta.get("name") != target.name:
            continue
        ns = meta.get("namespace")
        if target.namespace is not None and ns is not None and ns != target.namespace:
            continue
        found.append(obj)
    if not found:
        raise CannotRewrite(f"{target.kind} {target.name} not found by ruamel.yaml")
    before = [o for o in found if o.lc.line + 1 <= target.line]
    return max(before, key=lambda o: o.lc.line) if before else found[0]


def _apply(node: Any, patch: Mapping[str, Any], target: Target) -> None:
    from ruamel.yaml.comments import CommentedMap

    _no_alias(node, target)
    swap = replaced_handler(node, patch)
    if swap is not None:
        old, new = swap
        node.insert(list(node).index(old), new, _node(patch[new]))
        del node[old]
        patch = {k: v for k, v in patch.items() if k not in swap}
    for key, value in patch.items():
        have = node.get(key)
        if value is None:
            if key in node:
                del node[key]
        elif isinstance(value, Mapping) and isinstance(have, CommentedMap):
            _apply(have, value, target)
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(have, list):
            _no_alias(have, target)
            merge_key = MERGE_KEYS[key]
            for item in value:
                match = merge_match(have, merge_key, item)
                if match is None:
                    have.append(_node(item))
                else:
                    _apply(match, {k: v for k, v in item.items() if k != merge_key}, target)
        elif key in node and not isinstance(value, Mapping | list) and have == value:
            continue
        elif (
            isinstance(value, list)
            and isinstance(have, list)
            and len(have) == len(value)
            and not any(isinstance(v, Mapping | list) for v in value)
        ):
            _no_alias(have, target)
            for i, item in enumerate(value):
                if have[i] != item or type(have[i]) is not type(item):
                    have[i] = _styled(have[i], item)
        else:
            node[key] = _styled(have, value) if key in node else _node(value)


def _no_alias(node: Any, target: Target) -> None:
    anchor = getattr(node, "anchor", None)
    if anchor is not None and anchor.value:
        raise CannotRewrite(
            f"{target.kind} {target.name}: the node to change is the YAML anchor &{anchor.value}, "
            "shared with its aliases"
        )


def _styled(old: Any, new: Any) -> Any:
    """``new`` in the scalar style of ``old`` (quoted, literal block…) where both are
    strings; else as a fresh node."""
    if isinstance(old, str) and isinstance(new, str) and type(old) is not str:
        try:
            return type(old)(new)
        except TypeError:  # pragma: no cover - a style type that takes more arguments
            return new
    if isinstance(old, str) and isinstance(new, str) and old == new:
        return old
    return _node(new)


def _node(value: Any) -> Any:
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(value, Mapping):
        out = CommentedMap()
        for k, v in value.items():
            out[k] = _node(v)
        return out
    if isinstance(value, list):
        seq = CommentedSeq()
        seq.extend(_node(v) for v in value)
        return seq
    return value


def _dump(yml: Any, docs: list[Any]) -> str:
    stream = io.StringIO()
    yml.dump_all(docs, stream)
    return stream.getvalue()


_KEY_LINE = re.compile(r"^( *)[^\s#-][^:]*:\s*(?:#.*)?$")
_ITEM_LINE = re.compile(r"^( *)- ")
_ANY_LINE = re.compile(r"^( *)[^\s#]")


def _guess_indent(text: str) -> tuple[int, int, int]:
    """(mapping, sequence, offset) indentation of the file's block collections, from the
    first ``key:`` lines followed by a nested key and by a ``- `` item."""
    mapping = offset = None
    lines = text.splitlines()
    for line, following in itertools.pairwise(lines):
        key = _KEY_LINE.match(line)
        if key is None:
            continue
        item = _ITEM_LINE.match(following)
        nested = _ANY_LINE.match(following)
        if item and offset is None:
            offset = len(item.group(1)) - len(key.group(1))
        elif nested and not item and mapping is None:
            step = len(nested.group(1)) - len(key.group(1))
            mapping = step if step > 0 else None
        if mapping is not None and offset is not None:
            break
    mapping = mapping or 2
    offset = max(offset or 0, 0)
    return mapping, mapping + offset if offset else mapping, offset


def _indent(line: str) -> int:
    """Column of a line's content: past its spaces and the ``- `` of sequence items."""
    stripped = line.lstrip(" ")
    column = len(line) - len(stripped)
    while stripped.startswith("- ") or stripped.rstrip("\n") == "-":
        rest = stripped[2:].lstrip(" ")
        column += len(stripped) - len(rest)
        stripped = rest
    return column


def _blank(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _merge(original: list[str], base: list[str], new: list[str], offset: int = 0) -> list[str]:
    """Three-way: the changes from ``base`` (the file as emitted) to ``new`` (as emitted
    patched) applied to ``original``. Lines are matched on their content (the emitter may
    indent sequences differently from the file); each changed line is indented as the file
    indents its nearest sibling or parent above it. A change whose neighbours the emitter
    does not reproduce is refused."""
    where: dict[int, int] = {}
    matcher = difflib.SequenceMatcher(
        None, [x.strip() for x in base], [x.strip() for x in original], autojunk=False
    )
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            where[block.a + k] = block.b + k
    out: list[str] = []
    at = 0
    changes = difflib.SequenceMatcher(None, base, new, autojunk=False).get_opcodes()
    for tag, i1, i2, j1, j2 in changes:
        if tag == "equal":
            continue
        # the change goes after the line it follows in the emission (or before the line
        # it precedes, at the start), which must be in the file
        anchor = where.get(i1 - 1) if i1 > 0 else (where.get(i2, len(original)) - (i2 - i1))
        if anchor is None or anchor < -1:
            near = next((where[i] + 1 for i in range(i1 - 1, -1, -1) if i in where), 0)
            raise CannotRewrite(
                "the line before a change is not emitted as written "
                f"(near line {offset + near + 1})"
            )
        inside = [where.get(i) for i in range(i1, i2)]
        start, end = (anchor + 1, anchor + 1 + len(inside)) if i1 > 0 else (0, len(inside))
        if any(j is None for j in inside) or inside != list(range(start, end)) or start < at:
            raise CannotRewrite(
                f"the file has lines the emitter drops or moves near line {offset + start + 1}"
            )
        out.extend(original[at:start])
        levels = [(_indent(base[i]), _indent(original[where[i]]) - _indent(base[i]))
                  for i in range(i2 - 1, -1, -1)
                  if i in where and not _blank(base[i])]  # fmt: skip
        placed: list[tuple[int, int]] = []
        for line in new[j1:j2]:
            if _blank(line):
                out.append(line)
                continue
            column = _indent(line)
            shift = next((d for c, d in [*reversed(placed), *levels] if c <= column), 0)
            placed.append((column, shift))
            out.append(" " * (shift) + line if shift >= 0 else _dedent(line, -shift))
        at = end
    out.extend(original[at:])
    return out


def _dedent(line: str, by: int) -> str:
    spaces = len(line) - len(line.lstrip(" "))
    if spaces < by:
        raise CannotRewrite("cannot indent a changed line as the file does")
    return line[by:]


def _verify(out: str, docs: list[Any]) -> None:
    """The rewritten text must parse (as lint reads it) and read back as the patched
    documents (as ruamel.yaml reads them: it reads some scalars differently from YAML 1.1,
    e.g. ``0400``, the same way on both sides)."""
    try:
        list(yaml.load_all(out, Loader=yaml.CSafeLoader))
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CannotRewrite(f"the rewritten file does not parse ({first})") from None
    got = [plain(d) for d in _load(out)]
    want = [plain(d) for d in docs]
    if got != want:
        raise CannotRewrite("the rewritten file does not read back as the patched objects")


def plain(node: Any) -> Any:
    """ruamel's round-trip data as plain dicts, lists and scalars."""
    if isinstance(node, Mapping):
        return {plain(k): plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [plain(v) for v in node]
    if isinstance(node, str):
        return str(node)
    if isinstance(node, bool):
        return bool(node)
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return node


__all__ = ["CannotRewrite", "Target", "decode", "plain", "rewrite", "rewrite_each"]
