"""SARIF 2.1.0 output: valid against the official OASIS schema, and usable by code scanning."""

from __future__ import annotations

import io
import json
import re
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import jsonschema
import pytest

from svcdoctor import __version__
from svcdoctor.checks import RULES, LintResult, Settings, run_checks
from svcdoctor.manifests import build_inventory, load
from svcdoctor.model import Severity
from svcdoctor.report import render_sarif, to_sarif
from svcdoctor.report.fixes import fix_text
from tests.conftest import lint_paths

# jsonschema checks "uri"/"uri-reference" only with optional packages: check RFC 3986 here.
_URI_CHARS = re.compile(r"(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*")
FORMATS = jsonschema.FormatChecker()


@FORMATS.checks("uri-reference")
def _is_uri_reference(value: object) -> bool:
    return not isinstance(value, str) or _URI_CHARS.fullmatch(value) is not None


@FORMATS.checks("uri")
def _is_uri(value: object) -> bool:
    return not isinstance(value, str) or (
        _URI_CHARS.fullmatch(value) is not None
        and re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", value) is not None
    )


LEVELS = {"error": "error", "warning": "warning", "info": "note"}


@pytest.fixture(scope="module")
def validator(sarif_schema: Path) -> jsonschema.Draft4Validator:
    schema = json.loads(sarif_schema.read_text())
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema, format_checker=FORMATS)


@pytest.fixture(scope="module")
def example() -> LintResult:
    with as_file(files("svcdoctor.examples") / "shop.yaml") as path:
        return lint_paths([str(path)])


@pytest.fixture(scope="module")
def input_errors(tmp_path_factory: pytest.TempPathFactory) -> LintResult:
    """SVD001 from stdin, SVD003 for a missing and a binary file, beside a real finding."""
    folder = tmp_path_factory.mktemp("inputs")
    binary = folder / "image.yaml"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    good = folder / "svc.yaml"
    good.write_text(
        "apiVersion: v1\nkind: Service\nmetadata: {name: api}\n"
        "spec: {selector: {app: api}, ports: [{port: 80}]}\n"
    )
    stdin = io.BytesIO(b"apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n labels: {}\n")
    loaded = load(["-", str(folder / "missing.yaml"), str(binary), str(good)], stdin=stdin)
    return run_checks(build_inventory(loaded), Settings())


def validate(validator: jsonschema.Draft4Validator, log: dict[str, Any]) -> None:
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:10]
    )


def test_example_report_is_valid_sarif_2_1_0(
    validator: jsonschema.Draft4Validator, example: LintResult
) -> None:
    log = json.loads(render_sarif(example))
    validate(validator, log)
    assert log["version"] == "2.1.0"
    assert len(log["runs"]) == 1
    assert len(log["runs"][0]["results"]) == len(example.findings) > 0


def test_report_with_input_errors_is_valid_sarif(
    validator: jsonschema.Draft4Validator, input_errors: LintResult
) -> None:
    log = to_sarif(input_errors)
    validate(validator, log)
    results = log["runs"][0]["results"]
    by_rule = {
        (r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"])
        for r in results
    }
    assert ("SVD001", "stdin") in by_rule
    assert sum(1 for rule, _ in by_rule if rule == "SVD003") == 2
    stdin_error = next(r for r in results if r["ruleId"] == "SVD001")
    assert stdin_error["level"] == "error"
    assert stdin_error["locations"][0]["physicalLocation"]["region"]["startLine"] == 5
    assert stdin_error["properties"]["cause"] == "input"
    assert "logicalLocations" not in stdin_error["locations"][0]  # no object to name


def test_an_empty_report_is_valid_sarif(validator: jsonschema.Draft4Validator) -> None:
    empty = run_checks(build_inventory(load(["-"], stdin=io.BytesIO(b""))), Settings())
    log = to_sarif(empty)
    validate(validator, log)
    assert log["runs"][0]["results"] == []


@pytest.mark.parametrize("which", ["example", "input_errors"])
def test_every_result_points_at_its_rule_and_a_line(
    which: str, request: pytest.FixtureRequest
) -> None:
    result: LintResult = request.getfixturevalue(which)
    run = to_sarif(result)["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    for finding, sarif in zip(result.findings, run["results"], strict=True):
        assert sarif["ruleId"] == finding.rule
        assert rules[sarif["ruleIndex"]]["id"] == finding.rule
        assert sarif["level"] == LEVELS[finding.severity.value]
        assert sarif["message"]["text"].startswith(finding.message)
        if finding.fix:
            assert (fix_text(finding.fix) or "") in sarif["message"]["text"]
        region = sarif["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] == max(1, finding.location.line) >= 1
        if finding.object:
            (logical,) = sarif["locations"][0]["logicalLocations"]
            assert logical["name"] == str(finding.object)
        if finding.container:
            assert sarif["properties"]["container"] == finding.container


def test_the_driver_describes_every_rule_with_help(example: LintResult) -> None:
    driver = to_sarif(example)["runs"][0]["tool"]["driver"]
    assert driver["name"] == "svcdoctor"
    assert driver["version"] == __version__
    ids = [r["id"] for r in driver["rules"]]
    assert sorted(ids) == sorted(RULES)
    assert len(set(ids)) == len(ids)
    for rule in driver["rules"]:
        source = RULES[rule["id"]]
        assert rule["name"] == source.name
        assert rule["helpUri"].startswith("https://")
        assert rule["id"] in rule["helpUri"]
        assert rule["help"]["text"].strip()
        assert "## Fix" in rule["help"]["markdown"]
        assert rule["shortDescription"]["text"] == source.summary
        assert rule["fullDescription"]["text"]
        assert rule["defaultConfiguration"]["level"] == LEVELS[source.severity.value]


def test_severity_overrides_show_in_the_result_level() -> None:
    with as_file(files("svcdoctor.examples") / "shop.yaml") as path:
        result = lint_paths([str(path)], Settings(severities={"SVD101": Severity.ERROR}))
    sarif = to_sarif(result)["runs"][0]["results"]
    levels = {r["level"] for r in sarif if r["ruleId"] == "SVD101"}
    assert levels == {"error"}


def test_file_paths_become_valid_uri_references(
    tmp_path: Path, validator: jsonschema.Draft4Validator
) -> None:
    folder = tmp_path / "my manifests" / "50% off#1"
    folder.mkdir(parents=True)
    path = folder / "svc:v1.yaml"
    path.write_text("apiVersion: v1\nkind: Service\nmetadata: [oops]\n")
    result = lint_paths([str(path)])
    log = to_sarif(result)
    validate(validator, log)
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in log["runs"][0]["results"]
    }
    assert uris
    for uri in uris:
        assert " " not in uri
        assert "#" not in uri
        assert unquote(uri) == path.as_posix()


def test_the_schema_check_rejects_what_code_scanning_would(
    validator: jsonschema.Draft4Validator, example: LintResult
) -> None:
    """Guards the tests above: a broken log must not validate."""
    log = to_sarif(example)
    result = log["runs"][0]["results"][0]
    result["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] = "a b.yaml"
    result["ruleIndex"] = -2
    messages = {e.message for e in validator.iter_errors(log)}
    assert any("0 is less than the minimum" in m for m in messages), messages
    assert any("a b.yaml" in m for m in messages), messages
    assert any("-2" in m for m in messages), messages
