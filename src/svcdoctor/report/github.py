"""GitHub Actions workflow commands: one annotation per finding."""

from __future__ import annotations

from svcdoctor.checks import LintResult
from svcdoctor.model import Severity
from svcdoctor.report.fixes import fix_text

_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _escape(text: str, *, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def render_github(result: LintResult) -> str:
    lines = []
    for f in result.findings:
        title = f"{f.rule} {f.name}"
        fix = fix_text(f.fix)
        body = f.message + (f"\n\nFix:\n{fix}" if fix else "")
        lines.append(
            f"::{_LEVEL[f.severity]} file={_escape(f.location.file, prop=True)},"
            f"line={f.location.line},title={_escape(title, prop=True)}::{_escape(body)}"
        )
    return "\n".join(lines)
