"""The rule registry: ``@rule`` adds a check under a stable id that is never reused."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from svcdoctor.checks.settings import Settings
from svcdoctor.model import (
    Cause,
    Finding,
    Inventory,
    Location,
    ProxyConfig,
    Service,
    Severity,
    Workload,
    is_live,
)
from svcdoctor.model.patch import Fix, FixAvailability
from svcdoctor.model.route import Route

DOCS_URL = "https://github.com/svcdoctor/svcdoctor/blob/main/docs/rules/{id}.md"
DOC_SECTIONS = ("What it does", "Why it matters", "Example", "Fix", "References")


# What a finding is about: a workload, a Service, a proxy's settings, or a route (an
# Ingress whose annotations configure its load balancer).
Subject = Workload | Service | ProxyConfig | Route


@dataclass(frozen=True, slots=True)
class Hit:
    """What a check reports; the registry turns it into a ``Finding``."""

    subject: Subject
    message: str
    fix: Fix | None = None
    container: str | None = None
    line: int | None = None
    severity: Severity | None = None


Check = Callable[[Inventory, Settings], Iterable[Hit]]


@dataclass(frozen=True, slots=True)
class Rule:
    """A check with its stable id, kebab-case name, cause, default severity and doc.

    Input rules (``SVD0xx``) have no check: the readers report them. ``live`` rules read
    what only a cluster knows (``Inventory.live``): ``scan`` runs them, ``lint`` finds
    nothing for them. ``fix``: whether the rule's fixes are safe to apply. ``absence``
    rules conclude from an object that is not there: not run on an incomplete bundle,
    where an object may be missing only because it was not collected.
    """

    id: str
    name: str
    cause: Cause | None
    severity: Severity
    doc: str
    check: Check | None = None
    live: bool = False
    fix: FixAvailability = FixAvailability.MANUAL
    absence: bool = False

    @property
    def summary(self) -> str:
        return self.doc.split("\n", 1)[0].strip()

    @property
    def help_uri(self) -> str:
        return DOCS_URL.format(id=self.id)

    def section(self, title: str) -> str:
        """The body of one ``## title`` section of the doc (empty if missing)."""
        body: list[str] = []
        inside = False
        for line in self.doc.splitlines():
            if line.startswith("## "):
                inside = line[3:].strip() == title
                continue
            if inside:
                body.append(line)
        return "\n".join(body).strip()

    def finding(
        self,
        location: Location,
        message: str,
        *,
        subject: Subject | None = None,
        container: str | None = None,
        fix: Fix | None = None,
        severity: Severity | None = None,
    ) -> Finding:
        if fix is not None:
            fix = replace(fix, safe=self.fix is FixAvailability.SAFE)
        return Finding(
            rule=self.id,
            name=self.name,
            cause=self.cause,
            severity=severity or self.severity,
            message=message,
            location=location,
            object=subject.ref if subject else None,
            container=container,
            fix=fix,
        )

    def run(self, inventory: Inventory, settings: Settings) -> Iterator[Finding]:
        if self.check is None:
            return
        for hit in self.check(inventory, settings):
            loc = hit.subject.location
            if hit.line is not None and not is_live(loc):  # a live object has no lines
                loc = Location(loc.file, hit.line)
            yield self.finding(
                loc,
                hit.message,
                subject=hit.subject,
                container=hit.container,
                fix=hit.fix,
                severity=hit.severity,
            )


RULES: dict[str, Rule] = {}


def _register(new: Rule) -> Rule:
    for old in RULES.values():
        if new.id == old.id or new.name == old.name:
            raise ValueError(f"rule {new.id} {new.name} clashes with {old.id} {old.name}")
    RULES[new.id] = new
    return new


def rule(
    id: str,
    name: str,
    cause: Cause,
    severity: Severity,
    *,
    live: bool = False,
    fix: FixAvailability = FixAvailability.MANUAL,
    absence: bool = False,
) -> Callable[[Check], Check]:
    """Register the decorated check; its docstring is the rule's documentation. ``fix``:
    ``SAFE`` when its fixes change only the shutdown path (``fix`` applies them);
    ``absence`` when it concludes from a missing object (see ``Rule``)."""

    def decorate(check: Check) -> Check:
        doc = inspect.getdoc(check) or ""
        _register(Rule(id, name, cause, severity, doc, check, live, fix, absence))
        return check

    return decorate


def input_rule(id: str, name: str, severity: Severity, doc: str) -> Rule:
    """Register a rule that the readers report (bad input), not a check."""
    return _register(Rule(id, name, None, severity, inspect.cleandoc(doc)))


def all_rules() -> list[Rule]:
    """Every rule, input rules included, in id order."""
    return sorted(RULES.values(), key=lambda r: r.id)


def lookup(key: str) -> Rule:
    """A rule by id (``SVD101``) or name (``no-prestop-delay``); ``KeyError`` if unknown."""
    if key.upper() in RULES:
        return RULES[key.upper()]
    for r in RULES.values():
        if r.name == key:
            return r
    raise KeyError(key)
