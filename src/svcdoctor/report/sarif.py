"""SARIF 2.1.0 output for GitHub code scanning and other SARIF consumers."""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Any
from urllib.parse import quote

from svcdoctor import __version__
from svcdoctor.checks import LintResult, Rule, all_rules
from svcdoctor.model import Finding, Severity, is_live
from svcdoctor.report.fixes import fix_text

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFO_URI = "https://github.com/svcdoctor/svcdoctor"
_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _rule(r: Rule) -> dict[str, Any]:
    return {
        "id": r.id,
        "name": r.name,
        "shortDescription": {"text": r.summary},
        "fullDescription": {"text": r.section("What it does") or r.summary},
        "help": {"text": r.doc, "markdown": r.doc},
        "helpUri": r.help_uri,
        "defaultConfiguration": {"level": _LEVEL[r.severity]},
        "properties": {"tags": [r.cause.value if r.cause else "input"]},
    }


def _uri(path: str) -> str:
    """A URI reference (RFC 3986) for a path: spaces, ``:``, ``#``… percent-encoded."""
    return "stdin" if path in ("-", "stdin") else quote(PurePath(path).as_posix())


def _live_location(f: Finding) -> dict[str, Any]:
    """A live object has no file: a logical location names it (kind, namespace, name)."""
    context = f.location.file.partition(":")[2]
    logical: dict[str, Any] = {"kind": "resource"}
    if f.object:
        ns = f"{f.object.namespace}/" if f.object.namespace else ""
        logical |= {
            "name": f.object.name,
            "fullyQualifiedName": f"{context}/{ns}{f.object.kind}/{f.object.name}",
            "properties": {
                "kind": f.object.kind,
                "namespace": f.object.namespace,
                "context": context,
            },
        }
    else:
        logical |= {"name": context, "fullyQualifiedName": context}
    return {"logicalLocations": [logical]}


def _result(f: Finding, index: int) -> dict[str, Any]:
    fix = fix_text(f.fix)
    text = f.message + (f"\nFix:\n{fix}" if fix else "")
    out: dict[str, Any] = {
        "ruleId": f.rule,
        "ruleIndex": index,
        "level": _LEVEL[f.severity],
        "message": {"text": text},
        "locations": [
            _live_location(f)
            if is_live(f.location)
            else {
                "physicalLocation": {
                    "artifactLocation": {"uri": _uri(f.location.file)},
                    "region": {"startLine": max(1, f.location.line)},
                },
                **(
                    {"logicalLocations": [{"name": str(f.object), "kind": "object"}]}
                    if f.object
                    else {}
                ),
            }
        ],
        "properties": {"cause": f.cause.value if f.cause else "input"},
    }
    if f.container:
        out["properties"]["container"] = f.container
    return out


def to_sarif(result: LintResult) -> dict[str, Any]:
    rules = all_rules()
    index = {r.id: i for i, r in enumerate(rules)}
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "svcdoctor",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": INFO_URI,
                        "rules": [_rule(r) for r in rules],
                    }
                },
                "results": [_result(f, index[f.rule]) for f in result.findings],
            }
        ],
    }


def render_sarif(result: LintResult) -> str:
    return json.dumps(to_sarif(result), indent=2)
