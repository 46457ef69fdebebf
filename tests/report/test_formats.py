"""The JSON document and the GitHub Actions annotations of ``svcdoctor lint``."""

from __future__ import annotations

import io
import json
import re
from importlib.resources import as_file, files
from pathlib import Path

import pytest
from rich.console import Console

from svcdoctor.checks import LintResult, Settings, run_checks
from svcdoctor.manifests import build_inventory, load
from svcdoctor.model import Cause, Finding, Location, ObjectRef, Severity
from svcdoctor.model.patch import Fix, ObjectPatch
from svcdoctor.report import lint_to_dict, render_github, render_json, render_text
from svcdoctor.report.fixes import fix_text
from tests.conftest import lint_paths, lint_text

FINDING_KEYS = {
    "rule",
    "name",
    "cause",
    "severity",
    "message",
    "file",
    "line",
    "object",
    "container",
    "fix",
}
SUMMARY_KEYS = {
    "files",
    "objects",
    "skipped_non_kubernetes",
    "workloads",
    "services",
    "findings",
    "by_severity",
    "input_errors",
    "suppressed",
    "test_inputs_not_shown",
}


@pytest.fixture(scope="module")
def example() -> LintResult:
    with as_file(files("svcdoctor.examples") / "shop.yaml") as path:
        return lint_paths([str(path)])


def result_of(*findings: Finding) -> LintResult:
    return LintResult(
        findings=findings,
        suppressed=0,
        files=1,
        objects=1,
        skipped=0,
        workloads=1,
        services=0,
    )


# --- json ----------------------------------------------------------------------------------


def test_json_has_exactly_the_documented_keys(example: LintResult) -> None:
    document = json.loads(render_json(example))
    assert set(document) == {"findings", "summary", "paths"}
    assert document["findings"]
    for finding in document["findings"]:
        assert set(finding) == FINDING_KEYS
        assert set(finding["object"]) == {"kind", "namespace", "name"}
        assert finding["cause"] in {c.value for c in Cause}
        assert finding["severity"] in {s.value for s in Severity}
        assert isinstance(finding["line"], int)
        assert finding["line"] >= 1
    assert set(document["summary"]) == SUMMARY_KEYS
    assert set(document["summary"]["by_severity"]) == {"error", "warning", "info"}


def test_json_findings_carry_the_finding_values(example: LintResult) -> None:
    document = lint_to_dict(example)
    for finding, out in zip(example.findings, document["findings"], strict=True):
        assert out["rule"] == finding.rule
        assert out["name"] == finding.name
        assert out["message"] == finding.message
        assert (out["file"], out["line"]) == (finding.location.file, finding.location.line)
        assert finding.object is not None
        assert out["object"] == {
            "kind": finding.object.kind,
            "namespace": finding.object.namespace,
            "name": finding.object.name,
        }
        assert out["container"] == finding.container
        assert out["fix"] == fix_text(finding.fix)


def test_json_summary_counts_agree_with_the_findings(example: LintResult) -> None:
    document = lint_to_dict(example)
    summary = document["summary"]
    assert summary["findings"] == len(document["findings"])
    assert sum(summary["by_severity"].values()) == summary["findings"]
    for level, count in summary["by_severity"].items():
        assert count == sum(1 for f in document["findings"] if f["severity"] == level)
    assert (summary["files"], summary["workloads"], summary["services"]) == (1, 4, 4)
    assert summary["objects"] == 8
    assert summary["input_errors"] == 0


def test_json_input_problems_have_null_cause_and_object(tmp_path: Path) -> None:
    stdin = io.BytesIO(b"foo: bar\n---\napiVersion: v1\nkind: Service\nmetadata: [\n")
    loaded = load(["-", str(tmp_path / "missing.yaml")], stdin=stdin)
    document = json.loads(render_json(run_checks(build_inventory(loaded), Settings())))
    problems = {(f["rule"], f["file"]) for f in document["findings"]}
    assert problems == {("SVD001", "stdin"), ("SVD003", str(tmp_path / "missing.yaml"))}
    for finding in document["findings"]:
        assert set(finding) == FINDING_KEYS
        assert (finding["cause"], finding["object"], finding["fix"]) == (None, None, None)
    assert document["summary"]["input_errors"] == 2
    assert document["summary"]["skipped_non_kubernetes"] == 1


def test_json_counts_suppressions() -> None:
    text = (
        "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n"
        "spec: {selector: {app: a}, ports: [{port: 80, targetPort: 8080}]}\n---\n"
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: a\n  annotations:\n"
        '    ignore.svcdoctor.io/SVD101: "drains on SIGTERM"\n'
        "spec:\n  replicas: 2\n  template:\n    metadata: {labels: {app: a}}\n    spec:\n"
        "      containers: [{name: a, image: a, ports: [{containerPort: 8080}]}]\n"
    )
    document = lint_to_dict(lint_text(text))
    assert document["summary"]["suppressed"] == 1
    assert "SVD101" not in {f["rule"] for f in document["findings"]}


# --- github ----------------------------------------------------------------------------------

ANNOTATION = re.compile(
    r"::(?P<level>error|warning|notice) "
    r"file=(?P<file>[^,:\n]*),line=(?P<line>\d+),title=(?P<title>[^,:\n]*)"
    r"::(?P<message>[^\r\n]*)"
)
LEVELS = {"error": "error", "warning": "warning", "info": "notice"}


def unescape(text: str) -> str:
    return (
        text.replace("%0A", "\n")
        .replace("%0D", "\r")
        .replace("%3A", ":")
        .replace("%2C", ",")
        .replace("%25", "%")
    )


def test_github_emits_one_workflow_command_per_finding(example: LintResult) -> None:
    lines = render_github(example).splitlines()
    assert len(lines) == len(example.findings)
    for finding, line in zip(example.findings, lines, strict=True):
        match = ANNOTATION.fullmatch(line)
        assert match, line
        assert match["level"] == LEVELS[finding.severity.value]
        assert unescape(match["file"]) == finding.location.file
        assert int(match["line"]) == finding.location.line
        assert unescape(match["title"]) == f"{finding.rule} {finding.name}"
        body = unescape(match["message"])
        assert body.startswith(finding.message)
        if finding.fix:
            assert body.endswith(fix_text(finding.fix) or "")
            assert "%0A" in match["message"]  # multi-line fixes stay on one command line


def test_github_warnings_use_the_warning_command(example: LintResult) -> None:
    out = render_github(example)
    warning = next(f for f in example.findings if f.severity is Severity.WARNING)
    assert f"::warning file={warning.location.file},line={warning.location.line}," in out


def test_github_escapes_newlines_percent_and_property_separators() -> None:
    finding = Finding(
        rule="SVD204",
        name="single-replica-service",
        cause=Cause.BACKEND,
        severity=Severity.WARNING,
        message="fails 100 % of requests: line one\r\nline two, with a comma",
        location=Location("deploy/a,b:c 50%.yaml", 7),
        object=ObjectRef("Service", "shop", "cart"),
        fix=Fix(ObjectPatch({"spec": {"replicas": 2}})),
    )
    out = render_github(result_of(finding))
    assert "\n" not in out
    assert "\r" not in out
    assert out.startswith("::warning file=deploy/a%2Cb%3Ac 50%25.yaml,line=7,")
    assert ",title=SVD204 single-replica-service::" in out
    message = out.split("::", 2)[2]
    assert message == (
        "fails 100 %25 of requests: line one%0D%0Aline two, with a comma"
        "%0A%0AFix:%0Aspec:%0A  replicas: 2"
    )
    match = ANNOTATION.fullmatch(out)
    assert match
    assert unescape(match["file"]) == "deploy/a,b:c 50%.yaml"


def test_github_info_findings_are_notices() -> None:
    finding = Finding(
        rule="SVD302",
        name="session-affinity-clientip",
        cause=Cause.REUSE,
        severity=Severity.INFO,
        message="pinned",
        location=Location("a.yaml", 3),
    )
    assert render_github(result_of(finding)) == (
        "::notice file=a.yaml,line=3,title=SVD302 session-affinity-clientip::pinned"
    )


# --- text ----------------------------------------------------------------------------------


def test_text_report_names_file_line_rule_and_ends_with_the_summary(example: LintResult) -> None:
    out = io.StringIO()
    render_text(example, Console(file=out, width=200, no_color=True, highlight=False))
    text = out.getvalue()
    for finding in example.findings:
        assert f"{finding.location.file}:" in text
        assert f"{finding.rule} {finding.name}" in text
    last = text.rstrip().splitlines()[-1]
    assert last.startswith("1 file, 8 objects (4 workloads, 4 services): ")
    assert f"{len(example.findings)} findings" in last


def _render(result: LintResult, console: Console, show_fixes: bool = True) -> str:
    render_text(result, console, show_fixes=show_fixes)
    file = console.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


@pytest.mark.parametrize("show_fixes", [True, False])
def test_plain_text_off_a_terminal_is_the_terminal_layout_without_styles(
    example: LintResult, show_fixes: bool
) -> None:
    terminal = Console(
        file=io.StringIO(), force_terminal=True, color_system=None, width=10_000, highlight=False
    )
    piped = Console(file=io.StringIO(), width=80, highlight=False)
    assert not piped.is_terminal
    assert _render(example, piped, show_fixes) == _render(example, terminal, show_fixes)


def test_plain_text_does_not_wrap_and_drops_control_characters() -> None:
    command = "kubectl -n shop rollout restart deployment/a-deployment-with-a-long-name " * 2
    finding = Finding(
        rule="SVD204",
        name="single-replica-service",
        cause=Cause.BACKEND,
        severity=Severity.WARNING,
        message="one replica:\tscale it\r\x07 " + command,
        location=Location("deploy/" + "x" * 90 + ".yaml", 7),
        object=ObjectRef("Service", "shop", "cart"),
        container="c",
        fix=Fix(note=command),
    )
    out = _render(result_of(finding), Console(file=io.StringIO(), width=80))
    lines = out.splitlines()
    assert lines[0] == f"deploy/{'x' * 90}.yaml:7  Service shop/cart"
    assert lines[1] == "  warning SVD204 single-replica-service [backend]  line 7, container c"
    assert lines[2] == "    one replica:" + " " * 8 + "scale it " + command  # tab stop 24
    assert lines[4] == "      " + command
    assert "\x1b" not in out
