"""Typed access to the fields of one raw object: a field of the wrong type becomes one
SVD004 problem naming the object, the field and the line, never a crash."""

from __future__ import annotations

import re
from typing import Any, TypeVar

from svcdoctor.checks.inputs import INVALID_FIELD
from svcdoctor.manifests.loader import RawObject
from svcdoctor.manifests.yamlnodes import YMap, text_of
from svcdoctor.model import Finding, Location, ObjectRef

T = TypeVar("T")


class Fields:
    """Typed access to one raw object; a field of the wrong type is reported once."""

    def __init__(self, raw: RawObject, problems: list[Finding]) -> None:
        self.raw = raw
        self.problems = problems
        self._reported: set[tuple[int, str]] = set()  # a field read twice is one problem
        meta = raw.body.get("metadata")
        meta = meta if isinstance(meta, YMap) else None
        namespace = text_of(meta.get("namespace")) if meta else ""
        self.ref = ObjectRef(
            raw.kind,
            "" if bound(namespace) else namespace,
            (text_of(meta.get("name")) if meta else "") or "<unnamed>",
        )

    def _bad(self, parent: YMap, key: str, path: str, want: str, got: Any) -> None:
        if isinstance(got, str) and templated(got):
            return  # a value a template tool fills in (a Helm overlay's `{{ .Values.x }}`)
        if _TOKEN.fullmatch(str(got)) or (
            isinstance(got, dict) and got and all(_TOKEN.fullmatch(str(k)) for k in got)
        ):
            return  # a placeholder a build step replaces (gatekeeper's HELMSUBST_…)
        shown = (
            repr(got)
            if not isinstance(got, dict | list)
            else ("a mapping" if isinstance(got, dict) else "a list")
        )
        line, message = parent.line_of(key), f"{self.ref}: {path} must be {want}, got {shown}"
        if (line, message) in self._reported:
            return
        self._reported.add((line, message))
        self.problems.append(
            INVALID_FIELD.finding(Location(self.raw.location.file, line), message, subject=None)
        )

    def get(self, parent: YMap | None, key: str, path: str, kind: type[T], want: str) -> T | None:
        if parent is None or key not in parent or parent[key] is None:
            return None
        value = parent[key]
        if isinstance(value, str) and bound(value):
            return None  # a chainsaw binding: known only when the test applies the file
        if kind is int and isinstance(value, bool):
            self._bad(parent, key, path, want, value)
            return None
        default = variable_default(value) if kind is int and isinstance(value, str) else None
        if default is not None and default.isdigit():
            return int(default)  # type: ignore[return-value]  # kind is int
        if isinstance(value, kind):
            return value
        self._bad(parent, key, path, want, value)
        return None

    def mapping(self, parent: YMap | None, key: str, path: str) -> YMap | None:
        return self.get(parent, key, path, YMap, "a mapping")

    def seq(self, parent: YMap | None, key: str, path: str) -> list[Any]:
        return self.get(parent, key, path, list, "a list") or []

    def maps(self, parent: YMap | None, key: str, path: str) -> list[tuple[str, YMap]]:
        """The mapping items of a list field, each with its path."""
        out: list[tuple[str, YMap]] = []
        items = self.seq(parent, key, path)
        for i, item in enumerate(items):
            if isinstance(item, YMap):
                out.append((f"{path}[{i}]", item))
            else:
                assert parent is not None
                self._bad(parent, key, f"{path}[{i}]", "a mapping", item)
        return out

    def placeholder(self, parent: YMap | None, key: str) -> bool:
        """Whether the field holds a template or a placeholder a tool fills in before the
        object is applied (``replicas: <REPLICAS>``, ``"{{ .Values.n }}"``): set, but unknown
        here, not unset."""
        value = parent.get(key) if parent is not None else None
        return isinstance(value, str) and (templated(value) or bool(_TOKEN.fullmatch(value)))

    def integer(self, parent: YMap | None, key: str, path: str) -> int | None:
        return self.get(parent, key, path, int, "an integer")

    def text(self, parent: YMap | None, key: str, path: str) -> str | None:
        """A scalar as text (``80`` → ``"80"``); a mapping or a list is reported."""
        value = self.get(parent, key, path, object, "a string")
        if isinstance(value, dict | list):
            assert parent is not None
            self._bad(parent, key, path, "a string", value)
            return None
        return None if value is None else text_of(value)

    def int_or_str(self, parent: YMap | None, key: str, path: str) -> int | str | None:
        value = self.get(parent, key, path, object, "an integer or a string")
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            return value
        if isinstance(value, str):
            value = variable_default(value) or value
            return int(value) if value.isdigit() else value
        assert parent is not None
        self._bad(parent, key, path, "an integer or a string", value)
        return None

    def labels(self, parent: YMap | None, key: str, path: str) -> dict[str, str]:
        found = self.mapping(parent, key, path)
        return {text_of(k): text_of(v) for k, v in found.items()} if found else {}

    def strings(self, parent: YMap | None, key: str, path: str) -> tuple[str, ...]:
        return tuple(text_of(v) for v in self.seq(parent, key, path))


def bound(value: str) -> bool:
    """Whether a value is a chainsaw binding, `($namespace)`, an expression over the test's
    bindings that chainsaw evaluates as it applies the file
    (https://kyverno.github.io/chainsaw/latest/quick-start/bindings/; Kong/kong-operator's
    test/e2e/chainsaw; judge371)."""
    return value.startswith("(") and value.endswith(")") and "$" in value


def templated(value: str) -> bool:
    """Whether a value holds a template action a tool fills in before it is applied (also
    escaped, ``\\{\\{ … \\}\\}``: a kustomize source a build turns into Helm templates), a
    variable ``envsubst`` or ``clusterctl`` fills in (``${VAR}``, ``${VAR:=default}``), or an
    expression Garden evaluates (``${var.replicas}``, ``${jsonEncode(var.env)}``: its
    template strings, https://docs.garden.io/reference/template-strings; garden-io/garden's
    examples; judge454)."""
    plain = value.replace("\\{", "{").replace("\\}", "}")
    return ("{{" in plain and "}}" in plain) or bool(_EXPRESSION.search(value))


# A variable Cluster API's clusterctl (and envsubst, drone/envsubst's syntax) fills in before
# the manifests are applied, with its default: `${VAR}`, `${VAR:=default}`, `${VAR:-default}`
# (https://cluster-api.sigs.k8s.io/clusterctl/provider-contract#components-yaml)
_VARIABLE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*(?::?[-=]([^{}]*))?\}")
# Any `${…}`: those variables, and a template tool's expressions (Garden's)
_EXPRESSION = re.compile(r"\$\{[^{}\n]+\}")


# A token a build step or the reader replaces by text (a sed, a chart generator, a docs
# template): a value, or the one key of a mapping, spelled as a constant where no such word is
# valid (gatekeeper's helmify input cmd/build/helmify/kustomize-for-helm.yaml:
# `replicas: HELMSUBST_DEPLOYMENT_REPLICAS`, `topologySpreadConstraints: {HELMSUBST_…: ""}`;
# judge160), or a value in angle brackets (aws-load-balancer-controller's
# docs/examples/cognito-ingress-template.yaml: `number: <service-port>`; judge162)
_TOKEN = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|<[^<>\n]+>")


def variable_default(value: str) -> str | None:
    """What a value that is only such a variable defaults to (``${PORT:=8081}``: ``8081``)."""
    found = _VARIABLE.fullmatch(value.strip())
    return (found.group(1) or None) if found else None
