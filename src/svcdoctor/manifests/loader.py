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

from svcdoctor.checks.inputs import INVALID_YAML, UNREADABLE_INPUT
from svcdoctor.checks.registry import Rule
from svcdoctor.manifests.comments import pinned_replicas
from svcdoctor.manifests.configs import (
    ConfigFacts,
    Dialed,
    dialed,
    read_config,
)
from svcdoctor.manifests.dockerfiles import Builds, find_builds
from svcdoctor.manifests.kinds import consulted, name_only, read_kind, unread_template
from svcdoctor.manifests.kustomize import KustomizeLabels, is_kustomization, read_kustomization
from svcdoctor.manifests.paths import (
    CHART_FILES,
    Excludes,
    assertion,
    below_repositories,
    chainsaw_assertions,
    chart_holding,
    chart_templates,
    git_root,
    helm_chart_of,
    hidden_manifests,
    kyverno_test_inputs,
    vendored,
)
from svcdoctor.manifests.templates import (
    BRACE_NAME,
    commented_template,
    forget_go_sources,
    go_rendered,
    go_test_input,
    helm_template,
    parsed_template_finding,
    template_finding,
)
from svcdoctor.manifests.textlines import TextLines
from svcdoctor.manifests.yamlnodes import (
    InputTooComplex,
    TemplateSyntax,
    YList,
    YMap,
    check_document,
    compose_documents,
    kind_of,
    mapping_keys,
    to_python,
)
from svcdoctor.model import Finding, Location

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
DEFAULT_MAX_FILE_MB = 32.0
STDIN = "-"


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
    # Files read that hold no Kubernetes object and no problem (values files, dashboards,
    # data, an empty stdin)
    empty_files: int = 0
    # Paths (files, or directories not entered) left out by ``exclude`` patterns
    excluded: int = 0
    # Helm chart directory → manifest files of its ``templates/`` that were not read
    helm_templates: dict[str, int] = field(default_factory=dict)
    # Go package folder → templates its code embeds or reads and fills in (``go_rendered``)
    go_templates: dict[str, set[str]] = field(default_factory=dict)
    # Directories of other projects' files not entered (``paths.vendored``)
    vendored: list[str] = field(default_factory=list)
    # Hidden folders not entered that hold manifests (``paths.hidden_manifests``)
    hidden: list[str] = field(default_factory=list)
    # Kustomize bases outside the inputs, read because a kustomization among them builds them
    followed: list[str] = field(default_factory=list)
    # Symbolic links met in a folder walk whose target is missing: (link, target)
    dangling: list[tuple[str, str]] = field(default_factory=list)
    assertions: int = 0  # test steps' assertion files not read (``paths.assertion``)
    test_read: set[str] = field(default_factory=set)  # read by Go unit tests (go_test_input)
    # file → its path below the git repository it is in (``paths.below_repositories``)
    in_repository: dict[str, str] = field(default_factory=dict)
    # The labels the kustomizations among the files add to the objects they build
    kustomizations: list[KustomizeLabels] = field(default_factory=list)
    configs: ConfigFacts = field(default_factory=ConfigFacts)  # ``manifests.configs``
    # file → line of a ``replicas:`` its comment pins to one (``manifests.comments``) → comment
    replica_pins: dict[str, dict[int, str]] = field(default_factory=dict)
    # Dockerfiles and skaffold artifacts beside the manifests (``manifests.dockerfiles``)
    builds: Builds = field(default_factory=Builds)
    dialed: dict[str, Dialed] = field(default_factory=dict)  # file → ``configs.dialed``


def iter_files(
    paths: Sequence[str],
    result: LoadResult,
    excludes: Excludes | None = None,
    *,
    helm_templates: bool = False,
) -> Iterator[str]:
    """Expand directories (recursively, sorted, hidden dirs skipped) into manifest files,
    leaving out ``excludes`` and, unless ``helm_templates``, Helm charts' ``templates/``."""
    excludes = excludes or Excludes()
    for raw in paths:
        if raw == STDIN:
            yield raw
            continue
        path = Path(raw)
        if excludes.match(os.path.normpath(raw)):
            result.excluded += 1
            continue
        if path.is_dir():
            chart = None if helm_templates else helm_chart_of(path)
            if chart is not None:
                _skip_templates(raw, _shown(chart), result)
                continue
            skipped = (result.excluded, len(result.helm_templates), len(result.problems))
            found = sorted(_walk(path, excludes, result, helm_templates=helm_templates))
            now = (result.excluded, len(result.helm_templates), len(result.problems))
            if not found and skipped == now:
                hidden = result.hidden[0] if result.hidden else None
                why = f" outside hidden folders (such as {hidden}/, skipped): name it to lint it"
                message = "directory has no *.yaml, *.yml or *.json files" + (why if hidden else "")
                result.problems.append(_problem(UNREADABLE_INPUT, raw, 1, message))
            yield from found
        elif path.exists():
            chart = None if helm_templates else helm_chart_of(path.parent)
            if chart is not None:
                key = _shown(chart)
                result.helm_templates[key] = result.helm_templates.get(key, 0) + 1
                continue
            yield raw
        else:
            result.problems.append(_problem(UNREADABLE_INPUT, raw, 1, "no such file or directory"))


def _walk(
    root: Path, excludes: Excludes, result: LoadResult, *, helm_templates: bool
) -> Iterator[str]:
    def unreadable(exc: OSError) -> None:  # a directory os.walk could not list
        where = _shown(Path(exc.filename)) if exc.filename else _shown(root)
        result.problems.append(
            _problem(UNREADABLE_INPUT, where, 1, f"cannot list directory: {exc.strerror or exc}")
        )

    for top, dirs, files in os.walk(root, onerror=unreadable):
        relative = os.path.relpath(top, root)
        kept = []
        for d in dirs:
            if d.startswith("."):
                if hidden_manifests(top, d):
                    result.hidden.append(_shown(Path(top, d)))
                continue
            if excludes and excludes.match(os.path.join(relative, d)):
                result.excluded += 1
            elif chart_templates(d) and set(CHART_FILES) & set(files) and not helm_templates:
                _skip_templates(os.path.join(top, d), os.path.normpath(top), result)
            elif vendored(top, d, files):
                result.vendored.append(_shown(Path(top, d)))
            else:
                kept.append(d)
        dirs[:] = kept
        asserted = chainsaw_assertions(top, files) | kyverno_test_inputs(files)
        for name in files:
            if name.endswith(MANIFEST_SUFFIXES):
                if excludes and excludes.match(os.path.join(relative, name)):
                    result.excluded += 1
                elif assertion(name, asserted):
                    result.assertions += 1
                elif not os.path.exists(path := os.path.join(top, name)):
                    # a link to a file that is not there (KubeArmor's test scenarios link to a
                    # moved examples/; judge344): nothing to read, said in a note, not an error
                    result.dangling.append((_shown(Path(path)), os.readlink(path)))
                else:
                    yield path


def _shown(path: Path) -> str:
    """A path as short as it can be said: relative to the working directory if below it."""
    try:
        absolute = path.absolute()
        return os.path.relpath(absolute) if absolute.is_relative_to(Path.cwd()) else str(path)
    except ValueError:
        return str(path)


def _skip_templates(templates: str, chart: str, result: LoadResult) -> None:
    count = sum(
        name.endswith(MANIFEST_SUFFIXES) for _, _, files in os.walk(templates) for name in files
    )
    result.helm_templates[chart] = result.helm_templates.get(chart, 0) + count


def load(
    paths: Sequence[str],
    *,
    stdin: BinaryIO | None = None,
    max_file_mb: float = DEFAULT_MAX_FILE_MB,
    exclude: Iterable[str] = (),
    helm_templates: bool = False,
) -> LoadResult:
    """Read every input; bad inputs become SVD00x problems, never exceptions.

    Paths matching an ``exclude`` pattern are not read; nor are the ``templates/`` of Helm
    charts (Go templates: lint ``helm template`` output) unless ``helm_templates``.
    """
    result = LoadResult()
    forget_go_sources()  # the files may have changed since the last load in this process
    limit = int(max_file_mb * 1024 * 1024)
    collecting = gc.isenabled()
    gc.disable()  # the node graphs are large and acyclic: collection passes are pure cost
    read: list[str] = []
    seen: set[str] = set()  # a file named twice (`lint k8s/ k8s/app.yaml`) is read once
    excludes = Excludes(exclude)
    pending = list(paths)
    scanned = 0  # the kustomizations whose bases were looked for
    try:
        while pending:
            for name in iter_files(pending, result, excludes, helm_templates=helm_templates):
                key = name if name == STDIN else os.path.realpath(name)
                if key in seen:
                    continue
                seen.add(key)
                result.files += 1
                read.append(name)
                before = (result.documents, len(result.problems))
                text = _read_text(name, stdin, limit, result)
                if text is not None:
                    _load_text(name, text, result)
                    if name != STDIN and go_test_input(name):
                        result.test_read.add(name)
                    if is_kustomization(name) and (labels := read_kustomization(name, text)):
                        result.kustomizations.append(labels)
                if before == (result.documents, len(result.problems)):
                    result.empty_files += 1
            room = _MOST_FOLLOWED - len(result.followed)
            fresh = result.kustomizations[scanned:]
            pending = _bases_outside(fresh, seen, [*paths, *result.followed])[: max(room, 0)]
            scanned = len(result.kustomizations)
            result.followed += pending
    finally:
        if collecting:
            gc.enable()
    result.builds = find_builds(paths)
    roots = {r for p in paths if p != STDIN and (r := git_root(Path(p))) is not None}
    if roots:
        result.in_repository = below_repositories((n for n in read if n != STDIN), roots)
    return result


_MOST_FOLLOWED = 64  # kustomize bases outside the inputs read for them, at most


def _bases_outside(
    kustomizations: Sequence[KustomizeLabels], seen: set[str], given: list[str]
) -> list[str]:
    """The files and folders the kustomizations build (``resources``, ``components``,
    patches) that are outside the inputs: an overlay linted alone builds its base
    (`lint deploy/overlays/prod` with `resources: [../../base]`; imageswap-webhook's
    development overlay; judge553). Remote resources and missing paths are not followed."""
    inside = [os.path.realpath(p) for p in given if p != STDIN]
    out: list[str] = []
    for k in kustomizations:
        for entry in dict.fromkeys((*k.scope, *k.components, *k.patches)):
            real = os.path.realpath(entry)
            if "://" in entry or not os.path.exists(entry) or real in seen:
                continue
            if any(real == top or real.startswith(top + os.sep) for top in inside):
                continue
            out.append(entry)
            inside.append(real)
    return out


def _read_text(name: str, stdin: BinaryIO | None, limit: int, result: LoadResult) -> str | None:
    display = "stdin" if name == STDIN else name
    try:
        if name == STDIN:
            if stdin is None:
                raise OSError("standard input is not available")
            data = _read_upto(stdin, limit + 1)
        else:
            size = os.path.getsize(name)
            if size > limit:
                raise _TooLarge(size)
            with open(name, "rb") as fh:
                data = _read_upto(fh, limit + 1)
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


_CHUNK = 1 << 20


def _read_upto(stream: BinaryIO, most: int) -> bytes:
    """At most ``most`` bytes, read a chunk at a time: memory follows what the input holds,
    never the limit (a ``read(limit)`` allocates the limit up front)."""
    chunks: list[bytes] = []
    left = most
    while left > 0:
        chunk = stream.read(min(_CHUNK, left))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


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


# A `%NAME%` placeholder a sed or make step fills in before apply (netobserv/flowlogs-pipeline's
# `image: %IMAGE_TAG_BASE%:%VERSION%`): where one starts a plain scalar, which YAML forbids,
# the file's tokens are read as `_NAME_`, the same length, so lines and columns stay
_PERCENT_TOKEN = re.compile(r"%([A-Z][A-Z0-9_]*)%")


def _starts_with_percent(text: str) -> bool:
    """Whether a `%NAME%` token starts a plain scalar (after `key: ` or `- `)."""
    for m in _PERCENT_TOKEN.finditer(text):
        before = text[text.rfind("\n", 0, m.start()) + 1 : m.start()]
        if before[-1:] in (" ", "\t") and (before.rstrip().endswith(":") or before.strip() == "-"):
            return True
    return False


# Jinja's raw markers alone on their lines, which keep a docs site's macros plugin off the
# YAML between them (external-secrets' docs/snippets, `{% raw %}` ... `{% endraw %}`;
# judge362): the lines between are the manifest
_RAW_TAG = re.compile(r"^[ \t]*\{%-?[ \t]*(?:end)?raw[ \t]*-?%\}[ \t]*$", re.MULTILINE)
# clusterctl's (drone/envsubst) variable with a quoted default that opens a quoted scalar
# (`value: "${HOST:=""}"`: rancher-sandbox/cluster-api-provider-elemental's templates) is
# filled before the YAML is parsed; its quotes are read as spaces, the same length (the quote
# before is looked for after the `${`, which the regex engine then finds fast)
_QUOTED_DEFAULT = re.compile(r"\$\{(?<=[\"']\$\{)[A-Za-z_][A-Za-z0-9_]*:?[=-][^}\n]*[\"'][^}\n]*\}")


# A CustomResourceDefinition is read by no check, and its OpenAPI schema is most of the YAML
# an operator's repository holds (73 % of the corpus' bytes): a plain one is counted from its
# text and blanked before parsing, its lines kept, so that libyaml does not build nodes no
# one reads. Plain: one top-level `kind:`, of apiextensions.k8s.io, with no template, anchor
# or directive; its YAML syntax is then not checked (kubectl and kubeconform do).
_DEFINITION = re.compile(r"^kind:[ \t]*([\"']?)CustomResourceDefinition\1[ \t]*(?:#.*)?\r?$", re.M)
_EXTENSIONS_API = re.compile(r"^apiVersion:[ \t]*[\"']?apiextensions\.k8s\.io/", re.M)
# The next two start at a newline, not at `^`, which the regex engine tries at every
# character: searched in a newline before the text, ten times faster on large definitions.
_TOP_KIND = re.compile(r"\n[\"']?kind[\"']?[ \t]*:")
_DOCUMENT_MARK = re.compile(r"\n(?:---|\.\.\.)(?:[ \t]+#.*)?[ \t]*\r?$", re.M)


def _blank_definitions(text: str) -> tuple[str, int]:
    """The text with its plain CustomResourceDefinitions' lines emptied, and how many."""
    if "CustomResourceDefinition" not in text or not _DEFINITION.search(text):
        return text, 0
    if text.startswith("%") or "\n%" in text:  # a directive belongs to the next document
        return text, 0
    starts = [0, *(m.end() - 1 for m in _DOCUMENT_MARK.finditer("\n" + text))]
    pieces, blanked = [], 0
    for start, end in zip(starts, [*starts[1:], len(text)], strict=True):
        mark = max(text.rfind("\n", start, end), start) if end < len(text) else end  # next ---
        body = text[start:mark]
        if _plain_definition(body):
            pieces.append("\n" * body.count("\n"))
            blanked += 1
        else:
            pieces.append(body)
        pieces.append(text[mark:end])
    return "".join(pieces), blanked


def _plain_definition(body: str) -> bool:
    return (
        _DEFINITION.search(body) is not None
        and len(_TOP_KIND.findall("\n" + body)) == 1
        and _EXTENSIONS_API.search(body) is not None
        and "{{" not in body
        and "#@" not in body
        and "#{" not in body
        and not _may_alias(body)
    )


def _load_text(name: str, text: str, result: LoadResult) -> None:
    display = "stdin" if name == STDIN else name
    if "{{" in text and helm_template(text) and (chart := chart_holding(name)) is not None:
        result.helm_templates[_shown(chart)] = result.helm_templates.get(_shown(chart), 0) + 1
        return  # a Helm template outside the chart's templates/, as Meridio's (judge412)
    if "{{" in text and (stubs := name_only(text)):
        result.documents += stubs
        return
    if "%" in text and _starts_with_percent(text):
        text = _PERCENT_TOKEN.sub(lambda m: f"_{m.group(1)}_", text)
    if "${" in text:
        text = _QUOTED_DEFAULT.sub(lambda m: re.sub("[\"']", " ", m.group()), text)
    if "{%" in text:
        text = _RAW_TAG.sub("", text)
    if text.startswith("```"):  # a docs snippet in its Markdown fence (gloo's docs; judge421)
        text = _FENCE.sub("", text)
    objects: list[RawObject] = []
    counts = (result.documents, result.skipped)
    text, definitions = _blank_definitions(text)
    result.documents += definitions
    templated = "{{" in text
    # Documents that are not converted are checked only if they may hold an alias or {{ }}.
    scan = _Scan(aliases=_may_alias(text), templates=templated)
    lines = TextLines(text) if templated else None
    commented = TextLines(text) if commented_template(text) else None
    braced = "{" in text and BRACE_NAME.search(text) is not None
    if pins := pinned_replicas(text):
        result.replica_pins[display] = pins
    if addresses := dialed(text):
        result.dialed[display] = addresses
    part, offset = text, 0  # after a templated document that breaks the YAML: the rest
    while True:
        try:
            roots, error = compose_documents(part)
        except InputTooComplex as exc:
            result.problems.append(_problem(UNREADABLE_INPUT, display, exc.line, exc.reason))
            return
        for root in roots:
            mark = (len(objects), result.documents, result.skipped)
            if root is not None and (
                f := parsed_template_finding(display, root, commented, braced)
            ):
                result.documents += 1  # a snippet no check would read (AsciiDoc's; judge391)
                document = part[root.start_mark.index : root.end_mark.index]
                if kind_of(root) is not None and not _unread(root, document):
                    result.problems.append(f)
                continue
            try:
                _split_document(display, root, objects, result, scan)
            except TemplateSyntax as exc:
                # one templated document (a Helm value, a {{PLACEHOLDER}}) is SVD002; the
                # file's other documents are still read
                del objects[mark[0] :]
                result.documents, result.skipped = mark[1:]
                span = (root.start_mark.line + 1, root.end_mark.line + 1) if root else (0, 0)
                if _unread(root, lines.between(*span) if lines is not None else ""):
                    result.documents += 1  # no check reads it (a Secret; a Namespace: labels)
                    continue
                if lines is None:
                    result.problems.append(
                        _problem(
                            INVALID_YAML, display, exc.line, "a mapping key is a list or mapping"
                        )
                    )
                    continue
                line = lines.first_template(*span) or exc.line
                _template_problem(display, lines, line, result)
            except InputTooComplex as exc:
                result.problems.append(_problem(UNREADABLE_INPUT, display, exc.line, exc.reason))
            except yaml.YAMLError as exc:  # a value its tag cannot construct, a bad merge key
                result.problems.append(_yaml_problem(display, exc))
        if error is None:
            break
        if offset == 0 and text.lstrip().startswith(("{", "[")):
            read = (result.documents, result.skipped)
            result.documents, result.skipped = counts
            if _json_fallback(display, text, objects, result):
                break
            result.documents, result.skipped = read
        lines = lines or TextLines(text)  # where the broken document ends
        resume = _after_broken_document(display, text, lines, error, result)
        if resume is None or resume <= offset:
            break
        # parse the documents after the broken one, at their own line numbers
        part, offset = "\n" * resume + lines.after(resume), resume
        if not part.strip():
            break
    # Objects of documents before a parse error are still checked.
    result.objects.extend(objects)


def _after_broken_document(
    name: str, text: str, lines: TextLines, error: yaml.YAMLError, result: LoadResult
) -> int | None:
    """Account for the document the parser stopped in; the line it ends on if reading may
    go on after it, else ``None``.

    A templated document is SVD002 and the documents after it are read. A file that names
    no ``apiVersion`` or ``kind`` anywhere is no manifest (a JSON-with-comments config, a
    JSON Lines data file), nor is a recorded HTTP exchange (``_HTTP_EXCHANGE``): it is
    skipped, not an input error. Otherwise: SVD001."""
    mark = error.problem_mark if isinstance(error, yaml.MarkedYAMLError) else None
    line = (mark.line + 1) if mark else 1
    if (
        not _KUBERNETES_WORDS.search(text)
        or not _KIND_WORD.search(text)
        or _HTTP_EXCHANGE.match(text)
    ):
        result.skipped += 1
        return None
    first, last = lines.document_around(line)
    template = lines.first_template(first, last)
    if template is not None and lines.quoted_only(first, last):
        template = None  # a quoted `{{` is a string the parser read; it broke elsewhere
    template = template or lines.first_placeholder(first, last)
    if template is not None:
        document = lines.between(first, last)
        version, kind = _API_VERSION.search(document), _KIND_LINE.search(document)
        if not _KIND_KEY.search(document):  # no Kubernetes object (no kind/apiVersion)
            result.skipped += 1
        elif unread_template(kind and kind.group(1), version and version.group(1), document):
            result.documents += 1  # no check reads it (a ClusterRole, a krew Plugin)
        else:
            _template_problem(name, lines, template, result)
        return last
    result.problems.append(_yaml_problem(name, error))
    return None


_FENCE = re.compile(r"^```[\w-]*[ \t]*$", re.MULTILINE)
_KUBERNETES_WORDS = re.compile(r"\bapiVersion\b")
# A recorded HTTP exchange that starts with its request or status line (kubebuilder-declarative-
# pattern's mockkubeapiserver golden files, `GET http://kube-apiserver/api`; judge337): no YAML
# document starts so, whatever JSON bodies it holds
_HTTP_EXCHANGE = re.compile(
    r"\A\s*(?:(?:GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS) (?:https?://|/)\S*(?: HTTP/[\d.]+)?"
    r"|HTTP/[\d.]+ \d{3})[ \t]*\r?$",
    re.MULTILINE,
)
_KIND_WORD = re.compile(r"\bkind\b")
_API_VERSION = re.compile(r"^apiVersion:[ \t]*[\"']?([\w./-]+)[\"']?[ \t]*$", re.MULTILINE)
_KIND_LINE = re.compile(r"^kind:[ \t]*[\"']?(\w+)[\"']?[ \t]*$", re.MULTILINE)


_KIND_KEY = re.compile(r"""^[ \t]*["']?(?:kind|apiVersion)["']?[ \t]*:""", re.MULTILINE)
# An anchor (``&a``) and an alias (``*a``) where YAML allows them (a shell ``a && b`` is no
# anchor): at the start of the text or after a space or flow indicator. The ``&``/``*``
# comes first and the lookbehind after it, so the regex engine scans for that character
# (a leading alternation or class made it try every position: 2 s on the corpus).
_ANCHOR = re.compile(r"&(?<![^\s\[{,:]&)[^\s\[\]{},&]")
_ALIAS = re.compile(r"\*(?<![^\s\[{,:]\*)[^\s\[\]{},]")


def _may_alias(text: str) -> bool:
    return "*" in text and "&" in text and bool(_ANCHOR.search(text) and _ALIAS.search(text))


@dataclass(frozen=True, slots=True)
class _Scan:
    """Which checks a document that is not converted needs (see ``check_document``)."""

    aliases: bool
    templates: bool

    def __call__(self, root: yaml.Node, *, manifest: bool = True) -> None:
        """``manifest``: the document may be a Kubernetes object (a templated document
        that is none, such as a values file, is not an error)."""
        templates = self.templates and manifest
        if self.aliases or templates:
            check_document(root, template_keys=templates)


def _split_document(
    name: str, root: yaml.Node | None, objects: list[RawObject], result: LoadResult, scan: _Scan
) -> None:
    if root is None or _empty(root):
        return
    keys = mapping_keys(root)
    kind_node, api_node = keys.get("kind"), keys.get("apiVersion")
    if not (isinstance(kind_node, yaml.ScalarNode) and isinstance(api_node, yaml.ScalarNode)):
        scan(root, manifest=kind_node is not None or api_node is not None)
        result.skipped += 1
        return
    kind = kind_node.value
    is_list = kind == "List" or (kind.endswith("List") and "items" in keys)
    if not is_list:
        result.documents += 1
        if consulted(kind, api_node.value):
            body = to_python(root)
            objects.append(RawObject(body, Location(name, body.line)))
        else:
            scan(root)
            read_config(name, kind, root, result.configs)
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
    values = _json_values(text)
    if values is None:
        return False
    objects.clear()
    for value in values:
        for doc in value if isinstance(value, list) else [value]:
            _add_json(name, doc, objects, result)
    return True


_JSON_SPACE = re.compile(r"[ \t\r\n]*")


def _json_values(text: str) -> list[object] | None:
    """One JSON value, or several one after the other (``kubectl get -w -o json``, JSON
    Lines); ``None`` if the text is not that."""
    decoder = json.JSONDecoder(object_hook=_json_map)
    values: list[object] = []
    at = _JSON_SPACE.match(text, 0)
    index = at.end() if at else 0
    while index < len(text):
        try:
            value, index = decoder.raw_decode(text, index)
        except ValueError:
            return None
        values.append(value)
        at = _JSON_SPACE.match(text, index)
        index = at.end() if at else index
    return values


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
    if consulted(kind, str(doc.get("apiVersion"))):
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


# The keys by which a custom resource tells the checks of pods or traffic: a pod template, a
# selector, ports, route backends, a Service's name


def _unread(root: yaml.Node | None, document: str) -> bool:
    """Whether no check reads the templated document (``kinds.unread_template``)."""
    known = kind_of(root)
    if not document:  # its text is not at hand: the kind alone decides
        return known is not None and not read_kind(*known)
    if root is None:
        return False
    keys = mapping_keys(root)
    kind, api = (keys.get(k) for k in ("kind", "apiVersion"))
    return unread_template(_plain(kind), _plain(api), document)


def _plain(node: yaml.Node | None) -> str | None:
    """A plain scalar's text (not a templated value the parser read as a mapping)."""
    return node.value if isinstance(node, yaml.ScalarNode) and node.value else None


def _template_problem(name: str, lines: TextLines, line: int, result: LoadResult) -> None:
    """SVD002 for the templated document whose first ``{{`` is on ``line``, unless Go code
    beside it embeds or reads the file: then it is counted, not checked."""
    if (package := go_rendered(name, lines.text)) is not None:
        result.go_templates.setdefault(package, set()).add(name)
    else:
        result.problems.append(template_finding(name, lines, line))


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
