"""From lint's findings to what ``svcdoctor fix`` changes: one patch per object (the safe
fixes combined), the manual steps, and the files it refuses to touch."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from svcdoctor.checks import LintResult, Settings, run_checks
from svcdoctor.errors import CommandError
from svcdoctor.fix.patch import Step, combine, decide, effective
from svcdoctor.manifests import LoadResult, RawObject, build_inventory, load
from svcdoctor.model import Finding, ObjectRef
from svcdoctor.model.diagnosis import SCHEMA_VERSION
from svcdoctor.model.remedy import ShutdownPlan, plan_from_data

HELM_TEMPLATE = "SVD002"


@dataclass(frozen=True, slots=True)
class ObjectFix:
    """The patch of one object: what it changes (``None`` values delete a field), the
    findings it fixes, where the object is."""

    ref: ObjectRef
    api_version: str
    file: str
    line: int
    patch: dict[str, Any]
    findings: tuple[Finding, ...]
    namespace: str | None = None  # as the object says it (None: it names none)

    @property
    def rules(self) -> tuple[str, ...]:
        return tuple(sorted({f.rule for f in self.findings}))


@dataclass(slots=True)
class Plan:
    fixes: list[ObjectFix] = field(default_factory=list)
    manual: list[Step] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # file -> one-line reason

    def refuse(
        self, name: str, fixes: list[ObjectFix], reason: str, file: str | None = None
    ) -> None:
        """Leave ``name`` (a file, or an object of ``file``) as it is: its fixes become
        manual steps with the reason."""
        self.refused[name] = reason
        self.fixes = [f for f in self.fixes if (f.file != name if file is None else f not in fixes)]
        self.manual.extend(Step(finding, None, reason) for f in fixes for finding in f.findings)

    def by_file(self) -> dict[str, list[ObjectFix]]:
        out: dict[str, list[ObjectFix]] = defaultdict(list)
        for fix in self.fixes:
            out[fix.file].append(fix)
        return dict(out)


def lint_inputs(
    paths: list[str],
    settings: Settings,
    max_file_mb: float,
    *,
    stdin: BinaryIO | None,
    exclude: tuple[str, ...],
    namespace: str | None,
    skip: set[Path],
) -> tuple[LintResult, LoadResult]:
    """Read and check as ``lint`` does, from ``stdin`` (the bytes read already) and
    leaving out the objects of ``skip`` (what an earlier ``--patch-dir`` wrote)."""
    loaded = load(paths, stdin=stdin, max_file_mb=max_file_mb, exclude=exclude)
    if skip:
        loaded.objects = [o for o in loaded.objects if Path(o.location.file).resolve() not in skip]
    return run_checks(build_inventory(loaded, namespace), settings), loaded


def make_plan(result: LintResult, loaded: LoadResult, rules: Iterable[str] | None = None) -> Plan:
    """The fixes of the findings (of ``rules`` only, when given), combined per object."""
    wanted = set(rules) if rules else None
    plan = Plan()
    for f in result.findings:
        if f.rule == HELM_TEMPLATE:
            plan.refused.setdefault(
                f.location.file,
                f"Helm template (SVD002, line {f.location.line}): fix the chart's templates "
                "by hand, or the rendered chart: helm template … | svcdoctor fix --write -",
            )
    index: dict[tuple[str, str, str], list[RawObject]] = defaultdict(list)
    for obj in loaded.objects:
        meta = obj.body.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if isinstance(name, str):
            index[(obj.location.file, obj.kind, name)].append(obj)
    # by object (not by file and line: a one-line JSON file holds every object on line 1)
    grouped: dict[int, list[tuple[Step, RawObject]]] = defaultdict(list)
    for f in result.findings:
        if f.cause is None or (wanted is not None and f.rule not in wanted):
            continue
        raw = _object(index, f)
        step = decide(f, raw.body if raw else None)
        if step.patch is None or raw is None:
            if f.fix:
                plan.manual.append(step)
            continue
        if f.location.file in plan.refused:
            plan.manual.append(Step(f, None, plan.refused[f.location.file]))
            continue
        grouped[id(raw)].append((step, raw))
    for steps in grouped.values():
        raw = steps[0][1]
        combined = combine([s.patch for s, _ in steps if s.patch is not None])
        change = effective(combined, raw.body)
        ref = steps[0][0].finding.object
        assert ref is not None
        if not change:
            continue
        api = raw.body.get("apiVersion")
        meta = raw.body.get("metadata")
        ns = meta.get("namespace") if isinstance(meta, Mapping) else None
        plan.fixes.append(
            ObjectFix(
                ref=ref,
                api_version=api if isinstance(api, str) else "",
                file=raw.location.file,
                line=raw.location.line,
                patch=change,
                findings=tuple(s.finding for s, _ in steps),
                namespace=ns if isinstance(ns, str) and ns else None,
            )
        )
    return plan


def _object(index: Mapping[tuple[str, str, str], list[RawObject]], f: Finding) -> RawObject | None:
    """The object a finding is about: by file, kind and name, in its namespace, the
    nearest one starting at or before the finding's line."""
    if f.object is None:
        return None
    candidates = []
    for raw in index.get((f.location.file, f.object.kind, f.object.name), []):
        meta = raw.body.get("metadata")
        ns = meta.get("namespace") if isinstance(meta, Mapping) else None
        if ns in (None, "") or ns == f.object.namespace:
            candidates.append(raw)
    before = [r for r in candidates if r.location.line <= f.location.line]
    if before:
        return max(before, key=lambda r: r.location.line)
    return candidates[0] if candidates else None


# --from-diagnosis


@dataclass(frozen=True, slots=True)
class Measured:
    """The numbers of a diagnosis' race cause, as lint settings."""

    propagation_seconds: float
    max_request_seconds: float | None
    margin_seconds: float | None
    window_seconds: float
    plan: ShutdownPlan | None = None  # schema 2: the plan the race fix applies as given


def read_diagnosis(path: Path) -> Measured:
    """The race window measured by ``svcdoctor diagnose -o json`` as lint settings:
    propagation = the recommended preStop (the window and its margin), longest request =
    the p99.9 latency, margin = what the recommended grace period leaves beyond those. A
    document of ``schema_version`` 2 carries the plan (the race details' ``plan``): its
    ``prestop_seconds`` and ``grace_seconds`` are taken as they are; an older one gives
    them as ``recommended_prestop_seconds`` and ``recommended_grace_seconds``; the plan
    itself comes back (``Measured.plan``) for the checks to apply without planning again.
    :class:`CommandError` (exit 2) for a file that is not such a diagnosis."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"--from-diagnosis {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise CommandError(f"--from-diagnosis {path}: not UTF-8 text") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CommandError(
            f"--from-diagnosis {path}: not JSON ({exc}); give `svcdoctor diagnose -o json` output"
        ) from None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise CommandError(
            f"--from-diagnosis {path}: schema_version {version} is newer than this svcdoctor "
            f"reads ({SCHEMA_VERSION}): upgrade svcdoctor"
        )
    causes = data.get("causes") if isinstance(data, dict) else None
    if not isinstance(causes, list):
        raise CommandError(
            f"--from-diagnosis {path}: no 'causes' list: not `svcdoctor diagnose -o json` output"
        )
    race = next(
        (
            c
            for c in causes
            if isinstance(c, dict)
            and c.get("cause") == "race"
            and isinstance(c.get("details"), dict)
        ),
        None,
    )
    details: dict[str, Any] = race["details"] if race else {}
    window = _number(details.get("window_seconds"))
    prestop = _number(details.get("recommended_prestop_seconds"))
    grace = _number(details.get("recommended_grace_seconds"))
    plan = None
    if isinstance(version, int) and version >= 2 and isinstance(details.get("plan"), dict):
        # the plan the diagnosis carries (schema 2): its preStop and grace as they are
        try:
            plan = plan_from_data(details["plan"])
        except ValueError as exc:
            raise CommandError(f"--from-diagnosis {path}: race details.plan: {exc}") from None
        prestop, grace = float(plan.prestop_seconds), float(plan.grace_seconds)
    if race is None or (window is None and prestop is None):
        raise CommandError(
            f"--from-diagnosis {path}: the diagnosis measured no race window "
            "(no race cause with window_seconds)"
        )
    propagation = prestop if prestop is not None else window
    assert propagation is not None
    latency = _number(details.get("latency_p999_seconds"))
    margin = None
    if grace is not None:
        margin = max(grace - propagation - (latency if latency is not None else 10.0), 0.0)
    return Measured(
        propagation, latency, margin, window if window is not None else propagation, plan
    )


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and 0 <= value <= 86_400 else None


__all__ = ["Measured", "ObjectFix", "Plan", "lint_inputs", "make_plan", "read_diagnosis"]
