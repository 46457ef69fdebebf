"""Documents that are templates, not manifests (SVD002): Helm's, a controller's run-time
placeholders, other tooling's Go or Mustache templates, ytt's, and the templates Go code
beside them embeds (``//go:embed``) or reads and fills in itself, which are no input of
anyone's pipeline."""

from __future__ import annotations

import bisect
import fnmatch
import functools
import os
import re
import shlex
from pathlib import Path

import yaml

from svcdoctor.checks.inputs import HELM_TEMPLATE
from svcdoctor.manifests.paths import is_chart
from svcdoctor.manifests.textlines import TextLines
from svcdoctor.manifests.yamlnodes import mapping_keys
from svcdoctor.model import Finding, Location, Severity

# Argo Workflows' and Rollouts' run-time placeholders: `{{args.x}}`, `{{workflow.name}}`,
# `{{inputs.parameters.x}}`, `{{item}}`, expression tags `{{=…}}`
# (https://argo-workflows.readthedocs.io/en/latest/variables/,
# https://argo-rollouts.readthedocs.io/en/stable/features/analysis/#analysis-template-arguments).
# A Go template action starts with `.`, `$`, `-`, a keyword or a function and its arguments:
# `args.x` is no valid action, so these are never Helm.
PLACEHOLDER = re.compile(
    r"\{\{(?:=|\s*(?:item|(?:args|inputs|outputs|workflow|steps|tasks|pod|node|retries)"
    r"(?:\.[\w-]+)+)\s*\}\})"
)
# What only Helm's templates use: its built-in objects and the functions it adds to Go's
# (https://helm.sh/docs/chart_template_guide/builtin_objects/, function_list/); a Go template
# without any is rendered by other tooling (envtpl, gomplate, scripts, Go's text/template
# with Sprig's `nindent`: scylla-operator's assets, judge214).
_HELM_OBJECT = re.compile(
    r"\{\{-?\s*[^}]{0,200}?\.(?:Values|Release|Chart|Capabilities|Files|Template|Subcharts)\b"
)
# (a function's name, not a field's: `.$job.required.jobName` in v6d's gomplate templates,
# judge496)
_HELM_FUNCTION = re.compile(
    r"\{\{-?\s*[^}]{0,200}?(?<![.$\w])(?:include|tpl|toYaml|required|lookup)\b"
)
# A field of the data a template is given (`{{ .HandlerNamespace }}`, `toYaml .Affinity`):
# Helm gives only its built-in objects, so a template that reads others and none of those is
# filled by its own program, whatever functions it borrows (kubernetes-nmstate's operator
# renders deploy/handler/ with its own `toYaml`; judge292)
_DATA_FIELD = re.compile(r"\{\{-?\s*(?:[^}]{0,200}?[\s(|])?\.([A-Z]\w*)")


# Jinja2's syntax, which no Go template parses: a string in single quotes (Go's are runes of
# one character) or an inline `x if c else y` in an expression (kiali-operator's Ansible
# templates, `{{ 'v1' if (lookup(k8s_plugin, kind='Ingress', …)) else 'v1beta1' }}`, read as
# Helm's `lookup`; judge442)
_JINJA = re.compile(r"\{\{[^}\"]{0,200}?(?:'[^'\\\n]{2,}'|\bif\b[^}]{1,200}\belse\b)")


def helm_template(text: str) -> bool:
    """Whether a templated file is Helm's: it reads Helm's built-in objects, or uses Helm's
    functions, reads no other data and writes no Jinja2 (``_JINJA``)."""
    if _HELM_OBJECT.search(text):
        return True
    return (
        bool(_HELM_FUNCTION.search(text))
        and not _DATA_FIELD.search(text)
        and not _JINJA.search(text)
    )


def template_finding(name: str, lines: TextLines, line: int) -> Finding:
    """SVD002 for the templated document whose first ``{{`` is on ``line``: a Helm/Go
    template (an error: render it first), or a controller's run-time placeholder or other
    tooling's template (a note)."""
    shown = lines.template_at(line)
    where = Location(name, line)
    if PLACEHOLDER.match(shown):
        return HELM_TEMPLATE.finding(
            where,
            f"'{shown}' is a placeholder a controller fills at run time (Argo Workflows "
            "or Rollouts), not a Helm template; unquoted, it breaks the YAML, so this "
            f'document is not checked: quote it ("{shown}") as their docs do',
            severity=Severity.INFO,
        )
    if not helm_template(lines.text) and not _in_chart(name):
        jinja = _JINJA.search(lines.text)
        return HELM_TEMPLATE.finding(
            where,
            (
                f"Jinja2 template placeholder '{shown}' (filled by other tooling, such as "
                "Ansible's template module)"
                if jinja
                else f"template placeholder '{shown}' (no Helm object or function in the "
                "file: filled by other tooling, such as a Mustache or Go template renderer "
                "or a script)"
            )
            + ", not a manifest: this document is not checked; lint what your tooling "
            "renders: … | svcdoctor lint -",
            severity=Severity.INFO,
        )
    return HELM_TEMPLATE.finding(
        where,
        f"Helm/Go template '{shown}', not a manifest: this document is "
        "not checked; lint the rendered output: "
        "helm template RELEASE CHART | svcdoctor lint -",
    )


def _in_chart(name: str) -> bool:
    """Whether the file is a chart's template (``templates/`` beside a ``Chart.yaml``)."""
    path = Path(name)
    return path.parent.name == "templates" and is_chart(path.parent.parent)


# A Go source's embed directive: `//go:embed a.yaml templates/*.yaml "b c.yaml"`
# (https://pkg.go.dev/embed#hdr-Directives), and a string naming a file it reads
# (`filepath.Join(dir, "cases", "pod-template.yaml")`); the files are in the package's folder
# or below, so they are looked for from the templates' folder and the two above it
_GO_EMBED = re.compile(r"^[ \t]*//go:embed[ \t]+(.+)$", re.MULTILINE)
_GO_FILE_NAME = re.compile(r"[\"`]([^\"`\s]*?([\w.-]+\.(?:ya?ml|json)))[\"`]")
_GO_LEVELS = 3
_GO_SOURCE_BYTES = 1 << 20


def go_rendered(name: str, text: str) -> str | None:
    """The Go package folder whose code embeds (``//go:embed``) or reads the file by name,
    or else the Go module the file is in when its placeholders are Go template actions and
    no Helm's: a template the module's programs fill in at run time, no input of anyone's
    pipeline (rook's Multus validation pods, ``pkg/daemon/multus/templates.go``, judge222;
    Volcano's benchmark pods, read by ``gang_test.go``, judge225; ECK's config/e2e jobs,
    read by test/e2e/cmd/run, judge226)."""
    path = Path(os.path.abspath(name))
    parents = list(path.parents)
    for folder in parents[:_GO_LEVELS]:
        relative = path.relative_to(folder).as_posix()
        patterns, names, _ = _go_references(str(folder))
        if path.name in names or any(_embeds(p, relative) for p in patterns):
            return str(folder)
    if not _GO_ACTION.search(text) or helm_template(text) or PLACEHOLDER.search(text):
        return None
    return next((str(f) for f in parents[:_MODULE_LEVELS] if _go_module(str(f))), None)


# A file named for a test (`knative_test_yaml.yaml`, `test_release.yaml`)
_TEST_NAMED = re.compile(r"(^|[-_.])tests?([-_.]|$)", re.IGNORECASE)


def go_test_input(name: str) -> bool:
    """Whether a file is a Go unit test's input, outside an end-to-end test's folder: named
    for a test and read by a unit test of its folder or one of the two above (a ``_test.go``
    source names it: the expected output a test compares, never applied; gloo's
    `knative_test_yaml.yaml`, read by knative_test.go; judge421), or named by no Go source
    in a package folder whose tests read its other files (oci-native-ingress-controller's
    pkg/controllers/nodeBackend/nodeportService.yaml beside the ingressPath.yaml its
    nodeBackend_test.go reads; judge446)."""
    path = Path(os.path.abspath(name))
    if any("e2e" in p.lower() for p in path.parts):
        return False
    read = (_go_references(str(f))[2] for f in list(path.parents)[:_GO_LEVELS])
    if _TEST_NAMED.search(path.stem) and any(path.name in names for names in read):
        return True
    patterns, names, tested = _go_references(str(path.parent))
    if path.name in names or any(_embeds(p, path.name) for p in patterns):
        return False
    return any(t != path.name and (path.parent / t).is_file() for t in tested)


def forget_go_sources() -> None:
    """Clear what was read of Go sources and modules (cached within one load)."""
    _go_references.cache_clear()
    _go_module.cache_clear()


# A Go template action (https://pkg.go.dev/text/template#hdr-Actions): a field or variable, or
# a keyword; a Mustache or Jinja `{{ name }}` (Ansible's) is none
_GO_ACTION = re.compile(r"\{\{-?\s*(?:\.|\$|(?:range|if|with|template|block)\b)")
_MODULE_LEVELS = 8


@functools.lru_cache(maxsize=256)
def _go_module(folder: str) -> bool:
    """Whether ``folder`` is a Go project's root: a module's (``go.mod``), or one of before
    modules, whose dependency manager left its file there (dep's ``Gopkg.toml``, glide's
    ``glide.yaml``, godep's ``Godeps/Godeps.json``: GoogleCloudPlatform/airflow-operator;
    judge510)."""
    return any(os.path.isfile(os.path.join(folder, name)) for name in _GO_PROJECT_FILES)


_GO_PROJECT_FILES = ("go.mod", "Gopkg.toml", "glide.yaml", os.path.join("Godeps", "Godeps.json"))


def _embeds(pattern: str, relative: str) -> bool:
    """Whether an embed pattern names the file: itself, a glob over it, or a folder above."""
    return fnmatch.fnmatchcase(relative, pattern) or relative.startswith(pattern.rstrip("/") + "/")


@functools.lru_cache(maxsize=256)
def _go_references(folder: str) -> tuple[tuple[str, ...], frozenset[str], frozenset[str]]:
    """The ``//go:embed`` patterns of the Go sources in ``folder``, the names of the YAML and
    JSON files their strings name, and of those its tests' sources (``_test.go``) name."""
    try:
        sources = [e for e in os.scandir(folder) if e.name.endswith(".go") and e.is_file()]
    except OSError:
        return (), frozenset(), frozenset()
    patterns: list[str] = []
    names: set[str] = set()
    tested: set[str] = set()
    for entry in sources:
        try:
            with open(entry.path, encoding="utf-8", errors="replace") as f:
                text = f.read(_GO_SOURCE_BYTES)
        except OSError:
            continue
        for m in _GO_EMBED.finditer(text):
            try:
                words = shlex.split(m.group(1).replace("`", '"'))
            except ValueError:
                words = m.group(1).split()
            patterns += [w.removeprefix("all:") for w in words]
        named = {m.group(2) for m in _GO_FILE_NAME.finditer(text)}
        names |= named
        tested |= named if entry.name.endswith("_test.go") else set()
    return tuple(patterns), frozenset(names), frozenset(tested)


# ytt (Carvel) code is YAML comments starting with `#@` (https://carvel.dev/ytt/docs/latest/lang/):
# a document a function (`#@ def`, https://carvel.dev/ytt/docs/latest/lang-ref-def/) or a
# condition or loop makes, or whose name or namespace is a ytt expression (`name: #@ x`, null
# once the comment is dropped), is no manifest as written. Documents of the same file whose
# names are literal are read as they are (a value set by `#@` reads as null).
YTT_CODE = re.compile(
    r"^[ \t]*#@[ \t]*(?:def|if|for)\b|^[ \t]*(?:-[ \t]+)?(?:name|namespace)[ \t]*:[ \t]*#@",
    re.MULTILINE,
)


# A placeholder filled in by string replacement before the file is applied, `#{NAME}` (Octopus
# Deploy's and Azure Pipelines' token replacement; litmus' server replaces
# "#{INFRA_NAMESPACE}" in its manifests, chaos_infrastructure/infra_utils.go; judge232): YAML
# reads it as a comment, so the value it stands for is null
HASH_PLACEHOLDER = re.compile(r"(?:^|[:-])[ \t]+(#\{[\w.-]+\}#?)", re.MULTILINE)


def commented_template(text: str) -> bool:
    """Whether the text holds template code YAML reads as comments (ytt, ``#{NAME}``)."""
    return bool(
        ("#@" in text and YTT_CODE.search(text)) or ("#{" in text and HASH_PLACEHOLDER.search(text))
    )


def parsed_template_finding(
    name: str, root: yaml.Node, lines: TextLines | None, braced: bool
) -> Finding | None:
    """SVD002 for a document that parses as YAML but is a template: ytt code or a ``#{NAME}``
    placeholder (``lines``: the file's text, given when it holds either), or a brace
    placeholder as its name (``braced``: the file holds one, ``BRACE_NAME``)."""
    if lines is not None and (found := comment_template_finding(name, lines, root)):
        return found
    return brace_name_finding(name, root) if braced else None


def _block_scalar_lines(root: yaml.Node) -> set[int]:
    """The 1-based lines of the document's block scalars' text (``|``, ``>``)."""
    out: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            stack.extend(n for pair in node.value for n in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.ScalarNode) and node.style in ("|", ">"):
            out.update(range(node.start_mark.line + 2, node.end_mark.line + 1))
    return out


def comment_template_finding(name: str, lines: TextLines, root: yaml.Node) -> Finding | None:
    """SVD002 for a document a ytt template makes (``YTT_CODE``), or one with a ``#{NAME}``
    placeholder (``HASH_PLACEHOLDER``: a note); ``None`` for the file's other documents, which
    are read (ytt code alone, no object, is skipped as they are)."""
    if not isinstance(root, yaml.MappingNode) or "kind" not in mapping_keys(root):
        return None
    first, last = lines.document_around(root.start_mark.line + 1)
    document = lines.between(first, last)
    found = YTT_CODE.search(document)
    hashed = None
    if found is None and "#{" in document:
        # not inside a block scalar, where `#{…}` is text (tmux's `#{pane_title}` in a
        # heredoc of gardener's remote-local-setup.yaml; judge457)
        text = _block_scalar_lines(root)
        hashed = next(
            (
                m
                for m in HASH_PLACEHOLDER.finditer(document)
                if first + document.count("\n", 0, m.start(1)) not in text
            ),
            None,
        )
    if found is None and hashed is None:
        return None
    at = lines.offset(first) + (found.start() if found else hashed.start(1) if hashed else 0)
    line = bisect.bisect_right(lines.starts, at)
    if hashed is not None:
        return HELM_TEMPLATE.finding(
            Location(name, line),
            f"placeholder '{hashed.group(1)}', filled in by string replacement before the "
            "file is applied: YAML reads it as a comment (a null value), so this document is "
            "not checked; lint what the replacement makes: … | svcdoctor lint -",
            severity=Severity.INFO,
        )
    shown = lines.between(line, line).strip()
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    return HELM_TEMPLATE.finding(
        Location(name, line),
        f"ytt template '{shown}', not a manifest: this document is not checked; lint "
        "the rendered output: ytt -f DIR | svcdoctor lint -",
    )


# what a file must hold for ``brace_name_finding`` to look at its documents
BRACE_NAME = re.compile(r"^[ \t]+(?:name|namespace):[ \t]*\{[^{}:,\s]+\}[ \t]*$", re.MULTILINE)


def brace_name_finding(name: str, root: yaml.Node) -> Finding | None:
    """SVD002 for a document whose ``metadata.name`` or ``namespace`` is a brace placeholder
    YAML reads as a one-key mapping (`name: {self.path.k8s}`: Python's str.format, filled in
    by emissary's tests, judge245); ``None`` for any other document."""
    meta = mapping_keys(root).get("metadata")
    for field in ("name", "namespace"):
        node = mapping_keys(meta).get(field) if meta is not None else None
        if (
            isinstance(node, yaml.MappingNode)
            and node.flow_style
            and len(node.value) == 1
            and isinstance(key := node.value[0][0], yaml.ScalarNode)
            and node.value[0][1].tag == "tag:yaml.org,2002:null"
        ):
            return HELM_TEMPLATE.finding(
                Location(name, node.start_mark.line + 1),
                f"template placeholder '{{{key.value}}}' as the object's {field} (a brace "
                "template, such as Python's str.format, fills it in): this document is not "
                "checked; lint what your tooling renders: … | svcdoctor lint -",
                severity=Severity.INFO,
            )
    return None
