"""Meta-tests: every rule is documented, its docs are generated and in sync, ids are stable."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from svcdoctor.checks import DOC_SECTIONS, RULES, Settings, lookup
from svcdoctor.checks.registry import input_rule, rule
from svcdoctor.cli.rules import rule_markdown
from svcdoctor.model import Cause, Severity
from tests.conftest import lint_paths, lint_text

DOCS = Path(__file__).resolve().parents[2] / "docs" / "rules"
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "rules"
ID_SERIES = {
    None: "SVD0",
    Cause.RACE: "SVD1",
    Cause.BACKEND: "SVD2",
    Cause.REUSE: "SVD3",
    Cause.INFRA: "SVD4",
}


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_doc_has_every_section_and_yaml_examples(rule_id: str) -> None:
    r = RULES[rule_id]
    assert r.summary.endswith("."), f"{rule_id}: one-sentence summary first"
    for title in DOC_SECTIONS:
        assert r.section(title), f"{rule_id}: missing section '## {title}'"
    assert r.section("Example").count("```yaml") >= 2, f"{rule_id}: bad and good YAML"
    assert re.search(r"https://", r.section("References")), f"{rule_id}: no reference URL"


@pytest.mark.parametrize("rule_id", sorted(RULES))
def test_generated_doc_is_in_sync(rule_id: str) -> None:
    page = DOCS / f"{rule_id}.md"
    assert page.exists(), f"{page} missing: run `make docs`"
    assert page.read_text() == rule_markdown(RULES[rule_id]), f"{page} is stale: `make docs`"


def test_no_stale_doc_pages() -> None:
    assert {p.stem for p in DOCS.glob("*.md")} == set(RULES)


def test_ids_names_and_series() -> None:
    for r in RULES.values():
        assert re.fullmatch(r"SVD\d{3}", r.id)
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", r.name)
        assert r.id.startswith(ID_SERIES[r.cause]), f"{r.id} is not in its cause's series"
        assert lookup(r.name) is r
        assert lookup(r.id.lower()) is r


def test_registry_rejects_a_reused_id_or_name() -> None:
    with pytest.raises(ValueError, match="clashes"):
        rule("SVD101", "something-new", Cause.RACE, Severity.INFO)(lambda inv, s: [])
    with pytest.raises(ValueError, match="clashes"):
        input_rule("SVD099", "invalid-yaml", Severity.ERROR, "x")


@pytest.mark.parametrize("rule_id", sorted(r.id for r in RULES.values() if r.check and not r.live))
def test_every_finding_of_the_fixture_carries_a_fix(rule_id: str) -> None:
    fixture = FIXTURES / f"{rule_id}.yaml"
    settings = Settings(enabled=frozenset({rule_id}))
    if (FIXTURES / rule_id).is_dir():  # a repository tree beside it (SVD117's Dockerfiles)
        findings = lint_paths([str(fixture)], settings).findings
    else:
        findings = lint_text(fixture.read_text(), settings).findings
    findings = [f for f in findings if f.rule == rule_id]  # not input problems (SVD006)
    assert findings
    for f in findings:
        assert f.fix, f"{rule_id} at line {f.location.line} has no fix"
        assert f.cause is RULES[rule_id].cause
