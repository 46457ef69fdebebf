"""YAML → Python objects that remember their line, with bounded expansion.

PyYAML's C composer builds the node graph fast; we convert nodes ourselves so that every
mapping keeps its 1-based line (and the line of each key), aliases are shared instead of
copied, and alias bombs or recursive anchors are refused instead of exhausting memory.
"""

from __future__ import annotations

import operator
from typing import Any

import yaml

# A document whose aliases would expand to more nodes than this is refused.
MAX_EXPANDED_NODES = 2_000_000
# libyaml's composer recurses in C and crashes on absurd nesting; refuse it first.
MAX_NESTING = 5_000
# Inputs up to this size get a second parse by the pure-Python parser after a libyaml error.
RETRY_MAX_CHARS = 1 << 20
_LIBYAML_STRICTER = "found unexpected ':'"  # libyaml's error for `[001:db8::]`
_REDEFINED = "found duplicate anchor; first occurrence"  # PyYAML's (and libyaml's) context

_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_MERGE = "tag:yaml.org,2002:merge"
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
_PLAIN_TAGS: dict[str, str] = {}  # plain scalar → resolved tag (depends on the text only)
_PLAIN_CACHE_MAX = 200_000


class _FastCLoader(yaml.CSafeLoader):
    """libyaml's loader with tag resolution done in as few Python calls as it can be.

    libyaml's composer calls back into Python for every node: ``resolve`` for its tag, and
    ``descend_resolver``/``ascend_resolver`` around it for path resolvers, which no one
    registers (``yaml.add_path_resolver``, experimental, unused here). Resolving a plain
    scalar's implicit tag runs Python regexes per scalar; manifests repeat the same few
    thousand values, so a cache removes most of that cost. Any other node gets the default
    tag of its kind, as PyYAML's ``BaseResolver.resolve`` gives it when no path resolver is
    registered (yaml/resolver.py).
    """

    # Builtins do not bind to the instance: the composer's ``self.descend_resolver(parent,
    # index)`` and ``self.ascend_resolver()`` become C calls that do nothing, as PyYAML's
    # own methods do without path resolvers.
    descend_resolver = operator.is_  # type: ignore[assignment]
    ascend_resolver = tuple  # type: ignore[assignment]

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode:
            if not implicit[0]:
                return _STR  # quoted, or the non-specific tag ``!``
            tag = _PLAIN_TAGS.get(value)
            if tag is None:
                tag = super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
                if len(_PLAIN_TAGS) < _PLAIN_CACHE_MAX:
                    _PLAIN_TAGS[value] = tag
            return tag
        return _SEQ if kind is yaml.SequenceNode else _MAP


class InputTooComplex(ValueError):
    """The document is well-formed but would need unbounded time or memory to use."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


class TemplateSyntax(ValueError):
    """A mapping key that is itself a collection: the shape of an unquoted ``{{ x }}``."""

    def __init__(self, line: int) -> None:
        super().__init__(f"line {line}: a mapping key is a collection")
        self.line = line


class YMap(dict[Any, Any]):
    """A mapping with the line it starts on and the line of each key."""

    __slots__ = ("key_lines", "line")

    line: int
    key_lines: dict[Any, int]

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)


class YList(list[Any]):
    """A sequence with the line it starts on."""

    __slots__ = ("line",)

    line: int


def check_nesting(text: str) -> None:
    """Refuse nesting that would overflow the C parser's stack (cheap pre-scan)."""
    if text.count("[") + text.count("{") > MAX_NESTING:
        depth = deepest = 0
        for ch in text:
            if ch in "[{":
                depth += 1
                deepest = max(deepest, depth)
            elif ch in "]}" and depth:
                depth -= 1
        if deepest > MAX_NESTING:
            raise InputTooComplex(1, f"collections nested more than {MAX_NESTING} deep")
    if "\n" + " " * MAX_NESTING in text:
        raise InputTooComplex(1, f"indentation deeper than {MAX_NESTING} columns")


class _RedefiningLoader(yaml.SafeLoader):
    """PyYAML's safe loader, but an anchor may be defined again, an alias naming the latest
    node of that anchor, as the YAML spec says ("the most recent preceding node having the
    same anchor": https://yaml.org/spec/1.2.2/#71-alias-nodes) and kubectl's and Flux's
    parsers do; PyYAML stops at "found duplicate anchor" (a homelab's reused `&labels`;
    judge474)."""

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if not isinstance(event, yaml.AliasEvent) and event.anchor is not None:
            self.anchors.pop(event.anchor, None)
        return super().compose_node(parent, index)


def compose_documents(text: str) -> tuple[list[yaml.Node | None], yaml.YAMLError | None]:
    """The root node of each document, and the error that stopped parsing (if any).

    libyaml rejects a few inputs the pure-Python parser accepts (``[001:db8::]`` in a flow
    sequence) and both reject an anchor defined twice, which YAML allows; on an error the
    pure-Python parser gets a second try (``_RedefiningLoader``), so we read what
    ``yaml.safe_load_all`` reads, and such anchors too. Above ``RETRY_MAX_CHARS`` only those known
    errors are retried: the second parse of a large file would otherwise take a minute to
    report the same error.
    """
    check_nesting(text)
    nodes: list[yaml.Node | None] = []
    try:
        nodes.extend(yaml.compose_all(text, Loader=_FastCLoader))
        return nodes, None
    except yaml.YAMLError as exc:
        # The pure-Python parser is several times slower: a second try of a big input is
        # only worth it for the errors it is known to accept.
        known = getattr(exc, "problem", None) == _LIBYAML_STRICTER
        known = known or getattr(exc, "context", None) == _REDEFINED
        if len(text) > RETRY_MAX_CHARS and not known:
            return nodes, exc
    nodes = []
    try:
        nodes.extend(yaml.compose_all(text, Loader=_RedefiningLoader))
    except yaml.YAMLError as exc:
        return nodes, exc
    except RecursionError:
        raise InputTooComplex(1, "nested too deep to analyse") from None
    return nodes, None


def mapping_keys(node: yaml.Node) -> dict[str, yaml.Node]:
    """The plain-string keys of a mapping node (no conversion of the values)."""
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {k.value: v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.tag == _STR}


def kind_of(node: yaml.Node | None) -> tuple[str, str] | None:
    """A document's ``kind`` and ``apiVersion`` when both are plain scalars, else ``None``."""
    keys = mapping_keys(node) if node is not None else {}
    kind, api = keys.get("kind"), keys.get("apiVersion")
    if isinstance(kind, yaml.ScalarNode) and isinstance(api, yaml.ScalarNode) and kind.value:
        return kind.value, api.value
    return None


class _Converter:
    """Converts one document; shares aliased nodes and counts their expanded size."""

    def __init__(self) -> None:
        self.done: dict[int, tuple[Any, int]] = {}
        self.active: set[int] = set()

    def convert(self, node: yaml.Node) -> tuple[Any, int]:
        if isinstance(node, yaml.ScalarNode):
            if node.tag == _STR:
                return node.value, 1
            return _scalar(node), 1
        key = id(node)
        if key in self.done:
            return self.done[key]
        if key in self.active:
            raise InputTooComplex(node.start_mark.line + 1, "recursive YAML alias")
        self.active.add(key)
        value, size = self._collection(node)
        self.active.discard(key)
        if size > MAX_EXPANDED_NODES:
            raise InputTooComplex(
                node.start_mark.line + 1,
                f"aliases expand this document to more than {MAX_EXPANDED_NODES:,} nodes "
                "(a YAML alias bomb?)",
            )
        self.done[key] = (value, size)
        return value, size

    def _collection(self, node: yaml.Node) -> tuple[Any, int]:
        if isinstance(node, yaml.SequenceNode):
            seq = YList()
            seq.line = node.start_mark.line + 1
            size = 1
            for item in node.value:
                value, n = self.convert(item)
                seq.append(value)
                size += n
            return seq, size
        assert isinstance(node, yaml.MappingNode)
        mapping = YMap()
        mapping.line = node.start_mark.line + 1
        mapping.key_lines = {}
        size = 1
        merged: list[YMap] = []
        for key_node, value_node in node.value:
            value, n = self.convert(value_node)
            size += n
            if key_node.tag == _MERGE:
                merged.extend(v for v in (value if isinstance(value, list) else [value]))
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                raise TemplateSyntax(key_node.start_mark.line + 1)
            key = key_node.value if key_node.tag == _STR else _scalar(key_node)
            mapping[key] = value
            mapping.key_lines[key] = key_node.start_mark.line + 1
        for source in merged:
            if not isinstance(source, YMap):
                raise yaml.constructor.ConstructorError(
                    None, None, "merge key '<<' needs a mapping", node.start_mark
                )
            for k, v in source.items():
                if k not in mapping:
                    mapping[k] = v
                    mapping.key_lines[k] = source.line_of(k)
        return mapping, size


def _scalar(node: yaml.ScalarNode) -> Any:
    construct = _CONSTRUCTOR.yaml_constructors.get(node.tag)
    if construct is None:  # an application tag such as !Ref: keep the text
        return node.value
    try:
        return construct(_CONSTRUCTOR, node)
    except yaml.YAMLError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError):  # `!!int x`, `2020-13-45`
        tag = node.tag.replace("tag:yaml.org,2002:", "!!")
        raise yaml.constructor.ConstructorError(
            None, None, f"{_short(node.value)!r} is not a valid {tag}", node.start_mark
        ) from None


def _short(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def to_python(node: yaml.Node) -> Any:
    """Convert a node graph to ``YMap``/``YList``/scalars, bounded in size and depth."""
    try:
        return _Converter().convert(node)[0]
    except RecursionError:
        raise InputTooComplex(node.start_mark.line + 1, "nested too deep to analyse") from None


def check_document(node: yaml.Node, *, template_keys: bool) -> None:
    """Refuse, without converting it, a document that ``to_python`` would refuse.

    Used for documents that are read but not converted (non-Kubernetes YAML, kinds no check
    reads), so an alias bomb or a recursive alias is reported wherever it is. With
    ``template_keys``, a collection as a mapping key (an unquoted ``{{ x }}``) raises
    ``TemplateSyntax``.
    """
    sizes: dict[int, int] = {}
    active: set[int] = set()
    unique = 0

    def size(n: yaml.Node) -> int:
        nonlocal unique
        if isinstance(n, yaml.ScalarNode):
            unique += 1
            return 1
        key = id(n)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise InputTooComplex(n.start_mark.line + 1, "recursive YAML alias")
        active.add(key)
        unique += 1
        total = 1
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                if template_keys and not isinstance(k, yaml.ScalarNode):
                    raise TemplateSyntax(k.start_mark.line + 1)
                total += size(v)
        else:
            for item in n.value:
                total += size(item)
        active.discard(key)
        # More expanded nodes than distinct ones: aliases did it (a big plain file is fine).
        if total > MAX_EXPANDED_NODES and total > unique:
            raise InputTooComplex(
                n.start_mark.line + 1,
                f"aliases expand this document to more than {MAX_EXPANDED_NODES:,} nodes "
                "(a YAML alias bomb?)",
            )
        sizes[key] = total
        return total

    try:
        size(node)
    except RecursionError:
        raise InputTooComplex(node.start_mark.line + 1, "nested too deep to analyse") from None


def text_of(value: Any) -> str:
    """A scalar read as text, as YAML wrote it (a boolean as ``true``/``false``)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
