"""Run the enabled rules over an inventory and apply suppressions."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from svcdoctor.checks.inputs import INVALID_SUPPRESSION
from svcdoctor.checks.registry import Rule, all_rules, lookup
from svcdoctor.checks.settings import Settings
from svcdoctor.model import Finding, Inventory, ObjectRef, Service, Workload
from svcdoctor.model.path import trace_paths
from svcdoctor.model.route import Route

SUPPRESS_PREFIX = "ignore.svcdoctor.io/"


@dataclass(frozen=True, slots=True)
class LintResult:
    """Findings (sorted, suppressions applied) and what was read to produce them."""

    findings: tuple[Finding, ...]
    suppressed: int
    files: int
    objects: int
    skipped: int
    workloads: int
    services: int

    @property
    def input_errors(self) -> int:
        return sum(1 for f in self.findings if f.cause is None)

    def counts(self) -> dict[str, int]:
        by = Counter(f.severity.value for f in self.findings)
        return {s: by.get(s, 0) for s in ("error", "warning", "info")}


def active_rules(settings: Settings) -> list[Rule]:
    """The check rules that run under these settings (input rules always apply)."""
    return [
        r
        for r in all_rules()
        if r.check is not None
        and r.id not in settings.disabled
        and (settings.enabled is None or r.id in settings.enabled)
    ]


def run_checks(inventory: Inventory, settings: Settings) -> LintResult:
    """All findings for the inventory: reading problems first, then every active rule."""
    if settings.paths is None:
        settings = replace(settings, paths=trace_paths(inventory, settings.path_settings))
    subjects: list[Workload | Service | Route] = [
        *inventory.workloads,
        *inventory.services,
        *inventory.routes,
    ]
    suppressions, problems = _suppressions(subjects)
    findings = list(inventory.problems) + problems
    suppressed = 0
    for r in active_rules(settings):
        for finding in r.run(inventory, settings):
            where = (finding.object, finding.location.file)
            if finding.object and r.id in suppressions.get(where, ()):
                suppressed += 1
                continue
            override = settings.severities.get(r.id)
            findings.append(replace(finding, severity=override) if override else finding)
    findings.sort(key=lambda f: f.sort_key)
    return LintResult(
        findings=tuple(findings),
        suppressed=suppressed,
        files=inventory.files,
        objects=inventory.objects,
        skipped=inventory.skipped,
        workloads=len(inventory.workloads),
        services=len(inventory.services),
    )


def _suppressions(
    subjects: list[Workload | Service | Route],
) -> tuple[dict[tuple[ObjectRef | None, str], set[str]], list[Finding]]:
    """Valid ``ignore.svcdoctor.io/<ID>: reason`` annotations per object, and the invalid ones."""
    valid: dict[tuple[ObjectRef | None, str], set[str]] = {}
    problems: list[Finding] = []
    for subject in subjects:
        for key, reason in subject.annotations.items():
            if not key.startswith(SUPPRESS_PREFIX):
                continue
            name = key.removeprefix(SUPPRESS_PREFIX)
            try:
                target = lookup(name)
            except KeyError:
                problems.append(_invalid(subject, f"{key} names no rule (see svcdoctor rules)"))
                continue
            if not reason.strip():
                problems.append(
                    _invalid(
                        subject,
                        f"{key} gives no reason; write why {target.id} does not apply "
                        "as the annotation value (the finding is not suppressed)",
                    )
                )
                continue
            valid.setdefault((subject.ref, subject.location.file), set()).add(target.id)
    return valid, problems


def _invalid(subject: Workload | Service | Route, message: str) -> Finding:
    return INVALID_SUPPRESSION.finding(
        subject.location, f"{subject.ref}: {message}", subject=subject
    )
