"""The ``--format json`` document of ``svcdoctor lint``."""

from __future__ import annotations

import json
from typing import Any

from svcdoctor.checks import LintResult
from svcdoctor.model import Finding, ObjectRef
from svcdoctor.model.hops import Hop, Leg
from svcdoctor.model.pathreport import WorkloadPaths
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
        "object": _ref(f.object),
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
        "test_inputs_not_shown": result.test_inputs,
    }


def lint_to_dict(result: LintResult) -> dict[str, Any]:
    return {
        "findings": [finding_to_dict(f) for f in result.findings],
        "summary": summary(result),
        "paths": [paths_data(p) for p in result.paths],
    }


def _ref(ref: ObjectRef | None) -> dict[str, str] | None:
    if ref is None:
        return None
    return {"kind": ref.kind, "namespace": ref.namespace, "name": ref.name}


def _leg(leg: Leg | None) -> dict[str, Any] | None:
    return None if leg is None else {"seconds": leg.seconds, "source": leg.source}


def hop_data(hop: Hop) -> dict[str, Any]:
    """One hop as JSON data."""
    return {
        "implementation": hop.implementation.value,
        "label": hop.label,
        "kind": hop.kind.value,
        "text": hop.text(),
        "leg": _leg(hop.leg),
        "via": _ref(hop.via),
        "ip_targets": hop.ip_targets,
        "readiness_gate": hop.readiness_gate,
        "deregistration": _leg(hop.deregistration),
        "drain": _leg(hop.drain),
        "native": hop.native,
        "notes": list(hop.notes),
    }


def paths_data(shown: WorkloadPaths) -> dict[str, Any]:
    """One workload's paths as JSON data (``lint``/``scan`` ``paths``, ``diagnose``
    ``paths``)."""
    return {
        "object": _ref(shown.workload),
        "file": shown.location.file,
        "line": shown.location.line,
        "beyond_datapath": shown.beyond_datapath,
        "paths": [
            {
                "service": _ref(p.service),
                "text": p.text(),
                "hops": [hop_data(h) for h in p.hops],
                "covers_prestop": shown.holds_cover(p),
            }
            for p in shown.paths
        ],
        "prestop_covers": {
            "hop": shown.hop.name if shown.hop else None,
            "implementation": shown.hop.implementation.value if shown.hop else None,
            **(_leg(shown.covered) or {}),
        },
    }


def render_json(result: LintResult) -> str:
    return json.dumps(lint_to_dict(result), indent=2)
