"""Find input files, read them safely and split them into Kubernetes objects."""

from __future__ import annotations

import codecs
import gc
import json
import os
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import yaml

from svcdoctor.checks.inputs import HELM_TEMPLATE, INVALID_YAML, UNREADABLE_INPUT
from svcdoctor.checks.registry import Rule
from svcdoctor.manifests.yamlnodes import (
    InputTooComplex,
    TemplateSyntax,
    YList,
    YMap,
    check_document,
    compose_documents,
    mapping_keys,
    to_python,
)
from svcdoctor.model import WORKLOAD_KINDS, Finding, Location

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
DEFAULT_MAX_FILE_MB = 32.0
STDIN = "-"
# Kinds the checks read; other objects are counted but never converted.
RELEVANT_KINDS = WORKLOAD_KINDS | {"Service", "HorizontalPodAutoscaler"}


@dataclass(frozen=True, slots=True)
class RawObject:
    """One Kubernetes object as read (``YMap``), with where it came from."""

    body: YMap
    location: Location

    @property
    def kind(self) -> str:
        kind = self.body.get("kind")
        return kind if isinstance(kind, str) else ""


@dataclass(slots=True)
class LoadResult:
    """Relevant objects, problems, and counts of everything read."""

    objects: list[RawObject] = field(default_factory=list)
    problems: list[Finding] = field(default_factory=list)
    files: int = 0
    documents: int = 0  # Kubernetes objects of any kind
    skipped: int = 0  # YAML documents that are not Kubernetes objects


def iter_files(paths: Sequence[str], result: LoadResult) -> Iterator[str]:
    """Expand directories (recursively, sorted, hidden dirs skipped) into manifest files."""
    for raw in paths:
        if raw == STDIN:
            yield raw
            continue
        path = Path(raw)
        if path.is_dir():
            found = sorted(_walk(path))
            if not found:
                result.problems.append(
                    _problem(
                        UNREADABLE_INPUT, raw, 1, "directory has no *.yaml, *.yml or *.json files"
                    )
                )
            yield from found
        elif path.exists():
            yield raw
        else:
            result.problems.append(_problem(UNREADABLE_INPUT, raw, 1, "no such file or directory"))


def _walk(root: Path) -> Iterator[str]:
    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if name.endswith(MANIFEST_SUFFIXES):
                yield os.path.join(top, name)


def load(
    paths: Sequence[str],
    *,
    stdin: BinaryIO | None = None,
    max_file_mb: float = DEFAULT_MAX_FILE_MB,
) -> LoadResult:
    """Read every input; bad inputs become SVD00x problems, never exceptions."""
    result = LoadResult()
    limit = int(max_file_mb * 1024 * 1024)
    collecting = gc.isenabled()
    gc.disable()  # the node graphs are large and acyclic: collection passes are pure cost
    try:
        for name in iter_files(paths, result):
            result.files += 1
            text = _read_text(name, stdin, limit, result)
            if text is not None:
                _load_text(name, text, result)
    finally:
        if collecting:
            gc.enable()
    return result


def _read_text(name: str, stdin: BinaryIO | None, limit: int, result: LoadResult) -> str | None:
    display = "stdin" if name == STDIN else name
    try:
        if name == STDIN:
            if stdin is None:
                raise OSError("standard input is not available")
            data = stdin.read(limit + 1)
        else:
            size = os.path.getsize(name)
            if size > limit:
                raise _TooLarge(size)
            with open(name, "rb") as fh:
                data = fh.read(limit + 1)
        if len(data) > limit:
            raise _TooLarge(len(data))
    except _TooLarge as exc:
        mb = exc.size / 1024 / 1024
        result.problems.append(
            _problem(
                UNREADABLE_INPUT,
                display,
                1,
                f"file is {mb:.1f} MB, over the {round(limit / 1024 / 1024, 3):g} MB limit "
                "(raise it with --max-file-mb)",
            )
        )
        return None
    except OSError as exc:
        result.problems.append(_problem(UNREADABLE_INPUT, display, 1, exc.strerror or str(exc)))
        return None
    return _decode(display, data, result)


class _TooLarge(Exception):
    def __init__(self, size: int) -> None:
        self.size = size


def _decode(name: str, data: bytes, result: LoadResult) -> str | None:
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    else:
        encoding = "utf-8-sig"
        nul = data.find(b"\0", 0, 1 << 20)
        if nul >= 0:
            result.problems.append(
                _problem(
                    UNREADABLE_INPUT,
                    name,
                    1,
                    f"binary file (NUL byte at offset {nul}), not a manifest",
                )
            )
            return None
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        result.problems.append(
            _problem(
                INVALID_YAML,
                name,
                line,
                f"not valid {encoding.removesuffix('-sig').upper()} text "
                f"(byte 0x{data[exc.start]:02x} at offset {exc.start})",
            )
        )
        return None


def _load_text(name: str, text: str, result: LoadResult) -> None:
    display = "stdin" if name == STDIN else name
    objects: list[RawObject] = []
    counts = (result.documents, result.skipped)
    templated = "{{" in text
    # Documents that are not converted are checked only if they may hold an alias or {{ }}.
    scan = _Scan(aliases=_may_alias(text), templates=templated)
    try:
        roots, error = compose_documents(text)
    except InputTooComplex as exc:
        result.problems.append(_problem(UNREADABLE_INPUT, display, exc.line, exc.reason))
        return
    for root in roots:
        try:
            _split_document(display, root, objects, result, scan)
        except TemplateSyntax as exc:
            if templated:
                result.documents, result.skipped = counts
                _template_problem(display, text, result)
                return
            result.problems.append(
                _problem(INVALID_YAML, display, exc.line, "a mapping key is a list or mapping")
            )
        except InputTooComplex as exc:
            result.problems.append(_problem(UNREADABLE_INPUT, display, exc.line, exc.reason))
        except yaml.YAMLError as exc:  # a value its tag cannot construct, a bad merge key
            result.problems.append(_yaml_problem(display, exc))
    if error is not None:
        if text.lstrip().startswith(("{", "[")):
            result.documents, result.skipped = counts
        if _json_fallback(display, text, objects, result):
            result.objects.extend(objects)
            return
        if templated:
            _template_problem(display, text, result)
            return
        result.problems.append(_yaml_problem(display, error))
    # Objects of documents before a parse error are still checked.
    result.objects.extend(objects)


# An anchor (``&a``) and an alias (``*a``) where YAML allows them (a shell ``a && b`` is no anchor).
_ANCHOR = re.compile(r"(?:^|[\s\[{,:])&[^\s\[\]{},&]")
_ALIAS = re.compile(r"(?:^|[\s\[{,:])\*[^\s\[\]{},]")


def _may_alias(text: str) -> bool:
    return "*" in text and "&" in text and bool(_ANCHOR.search(text) and _ALIAS.search(text))


@dataclass(frozen=True, slots=True)
class _Scan:
    """Which checks a document that is not converted needs (see ``check_document``)."""

    aliases: bool
    templates: bool

    def __call__(self, root: yaml.Node) -> None:
        if self.aliases or self.templates:
            check_document(root, template_keys=self.templates)


def _split_document(
    name: str, root: yaml.Node | None, objects: list[RawObject], result: LoadResult, scan: _Scan
) -> None:
    if root is None or _empty(root):
        return
    keys = mapping_keys(root)
    kind_node, api_node = keys.get("kind"), keys.get("apiVersion")
    if not (isinstance(kind_node, yaml.ScalarNode) and isinstance(api_node, yaml.ScalarNode)):
        scan(root)
        result.skipped += 1
        return
    kind = kind_node.value
    is_list = kind == "List" or (kind.endswith("List") and "items" in keys)
    if not is_list:
        result.documents += 1
        if kind in RELEVANT_KINDS:
            body = to_python(root)
            objects.append(RawObject(body, Location(name, body.line)))
        else:
            scan(root)
        return
    items = keys.get("items")
    if isinstance(items, yaml.SequenceNode):
        for item in items.value:
            _split_document(name, item, objects, result, scan)


def _empty(root: yaml.Node) -> bool:
    """A document with no content (``---`` followed by nothing, as helm template writes)."""
    return isinstance(root, yaml.ScalarNode) and not root.style and root.value == ""


def _json_fallback(name: str, text: str, objects: list[RawObject], result: LoadResult) -> bool:
    """JSON that YAML 1.1 rejects (tabs, some escapes): read it without line numbers."""
    if not text.lstrip().startswith(("{", "[")):
        return False
    try:
        value = json.loads(text, object_hook=_json_map)
    except ValueError:
        return False
    objects.clear()
    for doc in value if isinstance(value, list) else [value]:
        _add_json(name, doc, objects, result)
    return True


def _json_map(fields: dict[str, object]) -> YMap:
    mapping = YMap(fields)
    mapping.line = 1
    mapping.key_lines = {}
    return mapping


def _add_json(name: str, doc: object, objects: list[RawObject], result: LoadResult) -> None:
    if not (isinstance(doc, YMap) and isinstance(doc.get("kind"), str) and "apiVersion" in doc):
        result.skipped += 1
        return
    kind = doc["kind"]
    if kind == "List" or (kind.endswith("List") and isinstance(doc.get("items"), list)):
        for item in doc.get("items") or []:
            _add_json(name, item, objects, result)
        return
    result.documents += 1
    if kind in RELEVANT_KINDS:
        objects.append(RawObject(doc, Location(name, 1)))


def json_objects(docs: Iterable[object], name: str, line: int = 1) -> LoadResult:
    """Parsed JSON values (objects as the Kubernetes API returns them, ``*List``s included)
    as the raw objects lint reads, every one located at ``name``:``line``."""
    result = LoadResult()

    def convert(value: object) -> object:
        if isinstance(value, dict):
            mapping = YMap({k: convert(v) for k, v in value.items()})
            mapping.line, mapping.key_lines = line, {}
            return mapping
        if isinstance(value, list):
            return [convert(v) for v in value]
        return value

    for doc in docs:
        _add_json(name, convert(doc), result.objects, result)
    if line != 1:
        result.objects[:] = [RawObject(o.body, Location(name, line)) for o in result.objects]
    return result


def _yaml_problem(name: str, exc: yaml.YAMLError) -> Finding:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        message = " ".join(str(p) for p in (exc.context, exc.problem) if p) or str(exc)
        return _problem(INVALID_YAML, name, mark.line + 1 if mark else 1, message)
    return _problem(INVALID_YAML, name, 1, str(exc).splitlines()[0])


def _template_problem(name: str, text: str, result: LoadResult) -> None:
    line = text.count("\n", 0, text.find("{{")) + 1
    result.problems.append(
        _problem(
            HELM_TEMPLATE,
            name,
            line,
            "Helm/Go template '{{ … }}', not a manifest; lint the rendered output: "
            "helm template RELEASE CHART | svcdoctor lint -",
        )
    )


def _problem(rule: Rule, file: str, line: int, message: str) -> Finding:
    return rule.finding(Location(file, line), message)


__all__ = [
    "DEFAULT_MAX_FILE_MB",
    "STDIN",
    "LoadResult",
    "RawObject",
    "YList",
    "YMap",
    "json_objects",
    "load",
]
