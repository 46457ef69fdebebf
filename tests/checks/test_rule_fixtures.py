"""Per-rule fixtures: only that rule on; `# BAD` documents must be flagged, `# OK` ones not,
and the whole text report must match the golden file beside the fixture.

Regenerate goldens after an intended change: ``SVCDOCTOR_UPDATE_GOLDEN=1 pytest tests/checks``.
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest
from rich.console import Console

from svcdoctor.checks import RULES, Settings
from svcdoctor.report import render_text
from tests.conftest import lint_paths, lint_text

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "rules"
# Live rules (scan only) have their fixtures in tests/fixtures/cluster (tests/cluster).
CHECK_RULES = sorted(r.id for r in RULES.values() if r.check is not None and not r.live)


def documents(text: str) -> list[tuple[int, int, str]]:
    """(first line, last line, marker) of each document; the marker is BAD, OK or ''."""
    docs: list[tuple[int, int, str]] = []
    start = 1
    lines = text.splitlines()
    for number, line in enumerate([*lines, "---"], start=1):
        if line.strip() == "---":
            body = lines[start - 1 : number - 1]
            marker = next((m.group(1) for ln in body if (m := re.match(r"# (BAD|OK)\b", ln))), "")
            docs.append((start, number - 1, marker))
            start = number + 1
    return docs


def report(text: str, rule_id: str, path: str | None = None) -> tuple[str, list[int]]:
    settings = Settings(enabled=frozenset({rule_id}))
    result = lint_paths([path], settings) if path else lint_text(text, settings)
    out = io.StringIO()
    render_text(result, Console(file=out, width=200, no_color=True, highlight=False))
    return out.getvalue(), [f.location.line for f in result.findings if f.rule == rule_id]


@pytest.mark.parametrize("rule_id", CHECK_RULES)
def test_rule_fixture(rule_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fixture = FIXTURES / f"{rule_id}.yaml"
    text = fixture.read_text()
    # a repository tree beside the fixture (SVD117's Dockerfiles): lint the file itself, from
    # its directory (searched for Dockerfiles; the paths in the report stay relative)
    monkeypatch.chdir(FIXTURES)
    tree = fixture.name if (FIXTURES / rule_id).is_dir() else None
    rendered, lines = report(text, rule_id, tree)
    for first, last, marker in documents(text):
        hits = [n for n in lines if first <= n <= last]
        if marker == "BAD":
            assert hits, f"{fixture.name}:{first}: BAD document not flagged by {rule_id}"
        elif marker == "OK":
            assert not hits, f"{fixture.name}:{first}: OK document flagged at lines {hits}"
    golden = fixture.with_suffix(".golden")
    if os.environ.get("SVCDOCTOR_UPDATE_GOLDEN") or not golden.exists():
        golden.write_text(rendered)
    assert rendered == golden.read_text(), f"{golden.name} differs (see module docstring)"


def test_every_rule_has_a_fixture_with_both_kinds_of_case() -> None:
    for rule_id in CHECK_RULES:
        fixture = FIXTURES / f"{rule_id}.yaml"
        assert fixture.exists(), f"{rule_id} has no fixture"
        markers = {m for _, _, m in documents(fixture.read_text())}
        assert {"BAD", "OK"} <= markers, f"{fixture.name} needs BAD and OK cases"
