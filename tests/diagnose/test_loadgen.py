"""diagnose on load generators' output: a report's numbers are quoted, its dominant outcome
makes a cause "possible" (never "likely": a summary has no times), and a healthy or mixed
report names no cause."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from svcdoctor.cli import cli
from svcdoctor.diagnose import diagnose
from svcdoctor.evidence import read_evidence
from svcdoctor.evidence.requests import empty
from svcdoctor.model import Cause, Diagnosis, Evidence, LoadSummary, Outcome, Verdict
from svcdoctor.report.diagnosis import render_json, render_text

FIXTURES = Path(__file__).parent.parent / "fixtures" / "loadgen"


def _run(name: str) -> Diagnosis:
    return diagnose(read_evidence([str(FIXTURES / name)]))


@pytest.mark.parametrize(
    ("name", "cause"),
    [
        ("hey.txt", Cause.RACE),  # 47 of 62 failures refused
        ("wrk.txt", Cause.REUSE),  # socket read errors on kept-alive connections
        ("wrk-non2xx.txt", Cause.BACKEND),
        ("k6-resets.txt", Cause.REUSE),
        ("vegeta-502.txt", None),  # 85306 failures without a response, kinds unknown
        ("vegeta.txt", None),  # the Error Set mixes refused, reset and closed
        ("fortio.txt", Cause.BACKEND),  # 503s
        ("oha.txt", None),  # the client's own "Too many open files"
        ("curl-loop.txt", None),  # one of each: no outcome dominates
    ],
)
def test_a_summary_makes_a_cause_possible_never_likely(name: str, cause: Cause | None) -> None:
    d = _run(name)
    assert all(a.verdict is not Verdict.LIKELY for a in d.causes)
    if cause is None:
        assert d.primary is None
        assert d.next_steps[0].startswith("no cause:")
        return
    assert d.primary is not None
    assert d.primary.cause is cause
    assert d.primary.verdict is Verdict.POSSIBLE
    quoted = [e for e in d.primary.evidence if e.startswith(d.summary.loads[0].load.tool + ":")]
    assert quoted
    assert " of " in quoted[0]


@pytest.mark.parametrize("name", ["k6-legacy.txt", "oha.json", "vegeta-report.json", "fortio.json"])
def test_healthy_runs_name_no_cause(name: str) -> None:
    d = _run(name)
    assert d.primary is None
    reading = d.summary.loads[0]
    assert reading.load.failed == 0
    assert reading.rate == 0.0
    assert "0 of" in d.next_steps[0]


def test_the_summary_line_and_json_quote_the_numbers() -> None:
    d = _run("fortio.txt")
    console = Console(record=True, width=400)
    render_text(d, console)
    text = console.export_text()
    assert "load generator: fortio" in text
    assert "3 of 20 requests failed" in text
    assert "4 sockets opened where perfect keep-alive needs 2" in text
    doc = json.loads(render_json(d))
    [load] = doc["summary"]["load_summaries"]
    assert load["tool"] == "fortio"
    assert load["requests"] == 20
    assert load["failures"] == 3
    assert load["by_outcome"] == {"http_error": 3}
    assert load["status_codes"] == {"200": 17, "503": 3}
    assert (load["sockets_used"], load["connections"]) == (4, 2)
    assert load["start"] is None  # fortio's text prints no time


def test_round_fraction_of_replicas_is_tested() -> None:
    d = _run("hey.txt")
    reading = d.summary.loads[0]
    assert reading.rate_ci95 is not None
    low, high = reading.rate_ci95
    assert low < 62 / 500 < high
    # one of four replicas refusing: 25 % of the requests, with the replicas known
    load = LoadSummary("hey", "hey.txt", 800, ((Outcome.REFUSED, 196),), ((200, 604),))
    quarter = diagnose(Evidence(requests=empty(), loads=(load,), replicas_hint=4))
    fraction = quarter.summary.loads[0].nearest_fraction
    assert fraction is not None
    assert fraction.consistent
    assert fraction.text == "1/4"
    assert quarter.primary is not None
    assert quarter.primary.cause is Cause.RACE
    assert "fits 1/4 of the replicas" in quarter.primary.evidence[-1]


def test_per_request_rows_go_through_the_request_analyses() -> None:
    d = _run("vegeta-results.jsonl")
    assert d.summary.requests == 3
    assert d.summary.errors == 1
    assert not d.summary.loads
    dated = _run("curl-dated.txt")
    assert dated.summary.requests == 6
    assert dated.summary.start is not None


def test_a_paste_on_stdin_through_the_command() -> None:
    pasted = (FIXTURES / "wrk.txt").read_text()
    done = CliRunner().invoke(cli, ["diagnose", "-", "-o", "json"], input=pasted)
    assert done.exit_code == 0, done.output
    doc = json.loads(done.output)
    [load] = doc["summary"]["load_summaries"]
    assert load["source"] == "-"
    assert load["tool"] == "wrk"
    assert doc["primary_cause"] == "reuse"
    assert doc["causes"][0]["verdict"] == "possible"


def test_a_report_pasted_with_log_lines_keeps_both(tmp_path: Path) -> None:
    access = Path(__file__).parent.parent / "fixtures" / "evidence" / "ingress-nginx-access.log"
    paste = tmp_path / "paste.txt"
    paste.write_text((FIXTURES / "hey.txt").read_text() + access.read_text())
    evidence = read_evidence([str(paste)])
    assert [s.tool for s in evidence.loads] == ["hey"]
    assert evidence.requests.height > 0
    assert {s.format for s in evidence.sources} == {"hey", "nginx-access"}


def test_a_report_below_the_floor_names_no_cause() -> None:
    # 3 refused in 100 000 requests: the background of a healthy Service, not a cause
    load = LoadSummary("hey", "hey.txt", 100_000, ((Outcome.REFUSED, 3),), ((200, 99_997),))
    d = diagnose(Evidence(requests=empty(), loads=(load,)))
    assert d.primary is None
    race = d.cause(Cause.RACE)
    assert any(e.startswith("hey: 3 of 100000 requests refused") for e in race.evidence)
