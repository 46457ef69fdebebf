"""Findings: what a check reports, in the vocabulary shared by every command."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from svcdoctor.model.patch import Fix


class Cause(StrEnum):
    """The four causes of intermittent Service failures (see problem.md)."""

    RACE = "race"
    BACKEND = "backend"
    REUSE = "reuse"
    INFRA = "infra"


class Severity(StrEnum):
    """How bad a finding is; ordered: info < warning < error."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return _RANKS[self]


_RANKS = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


@dataclass(frozen=True, slots=True)
class Location:
    """A place in an input: file path (``-`` is stdin) and 1-based line."""

    file: str
    line: int


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """A Kubernetes object by kind, namespace (``""`` when unset) and name."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        ns = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {ns}{self.name}"


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem found by one rule at one place.

    ``cause`` is ``None`` only for input problems (``SVD0xx``). ``fix`` is the exact
    change to make (a typed patch with computed numbers; ``report`` prints it as YAML).
    """

    rule: str
    name: str
    cause: Cause | None
    severity: Severity
    message: str
    location: Location
    object: ObjectRef | None = None
    container: str | None = None
    fix: Fix | None = None

    @property
    def sort_key(self) -> tuple[str, int, str, str]:
        return (self.location.file, self.location.line, self.rule, self.container or "")
