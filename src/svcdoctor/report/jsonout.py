"""The ``--format json`` document of ``svcdoctor lint``."""

from __future__ import annotations

import json
from typing import Any

from svcdoctor.checks import LintResult
from svcdoctor.model import Finding
from svcdoctor.report.fixes import fix_text


def finding_to_dict(f: Finding) -> dict[str, Any]:
    return {
        "rule": f.rule,
        "name": f.name,
        "cause": f.cause.value if f.cause else None,
        "severity": f.severity.value,
        "message": f.message,
        "file": f.location.file,
        "line": f.location.line,
        "object": (
            {"kind": f.object.kind, "namespace": f.object.namespace, "name": f.object.name}
            if f.object
            else None
        ),
        "container": f.container,
        "fix": fix_text(f.fix),
    }


def summary(result: LintResult) -> dict[str, Any]:
    return {
        "files": result.files,
        "objects": result.objects,
        "skipped_non_kubernetes": result.skipped,
        "workloads": result.workloads,
        "services": result.services,
        "findings": len(result.findings),
        "by_severity": result.counts(),
        "input_errors": result.input_errors,
        "suppressed": result.suppressed,
    }


def lint_to_dict(result: LintResult) -> dict[str, Any]:
    return {
        "findings": [finding_to_dict(f) for f in result.findings],
        "summary": summary(result),
    }


def render_json(result: LintResult) -> str:
    return json.dumps(lint_to_dict(result), indent=2)
