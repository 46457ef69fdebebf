"""Load generators' output (evidence/loadgen.py), from fixtures in the tools' real shapes
(tests/fixtures/loadgen/SOURCES.md names where each was copied from): summaries are counted
without a time, per-request shapes with real times become rows."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from click.testing import CliRunner

from svcdoctor.cli import cli
from svcdoctor.evidence import loadgen, read_evidence
from svcdoctor.evidence.stdin import read_with_stdin
from svcdoctor.model import LoadSummary, Outcome

FIXTURES = Path(__file__).parent.parent / "fixtures" / "loadgen"


def _one(name: str) -> LoadSummary:
    evidence = read_evidence([str(FIXTURES / name)])
    assert evidence.requests.height == 0, "a summary must not become request rows"
    assert len(evidence.loads) == 1
    return evidence.loads[0]


def _failures(s: LoadSummary) -> dict[str, int]:
    return {o.value: n for o, n in s.failures}


@pytest.mark.parametrize(
    ("name", "shape"),
    [
        ("hey.txt", "hey"),
        ("hey.csv", "hey-csv"),
        ("oha.txt", "oha"),
        ("oha.json", "oha-json"),
        ("wrk.txt", "wrk"),
        ("wrk-non2xx.txt", "wrk"),
        ("k6-legacy.txt", "k6"),
        ("k6-resets.txt", "k6"),
        ("k6-points.json", "k6-json"),
        ("vegeta.txt", "vegeta"),
        ("vegeta-502.txt", "vegeta"),
        ("vegeta-report.json", "vegeta-report-json"),
        ("vegeta-results.jsonl", "vegeta-json"),
        ("fortio.txt", "fortio"),
        ("fortio.json", "fortio-json"),
        ("curl-loop.txt", "curl"),
        ("curl-dated.txt", "curl"),
    ],
)
def test_each_shape_is_told_by_content(name: str, shape: str) -> None:
    assert loadgen.detect((FIXTURES / name).read_text()) == shape


def test_other_evidence_is_not_taken_for_a_load_generator() -> None:
    evidence = Path(__file__).parent.parent / "fixtures" / "evidence"
    for path in sorted(evidence.iterdir()):
        if path.is_file() and path.suffix in {".log", ".txt", ".json", ".jsonl", ".csv"}:
            assert loadgen.detect(path.read_text(errors="replace")[:65536]) is None, path.name


def test_hey_summary_counts_errors_by_their_words() -> None:
    s = _one("hey.txt")
    assert s.tool == "hey"
    assert s.requests == 500
    assert _failures(s) == {"refused": 47, "reset": 15}
    assert s.statuses == ((200, 438),)
    assert s.duration_seconds == pytest.approx(20.6886)
    assert s.start is None
    assert s.end is None


def test_hey_csv_offsets_are_not_times() -> None:
    s = _one("hey.csv")
    assert s.requests == 4
    assert _failures(s) == {"http_error": 1}
    assert s.start is None
    assert "unprinted start" in s.note


def test_oha_text_and_json() -> None:
    s = _one("oha.txt")
    assert s.tool == "oha"
    assert s.requests == 10000
    assert _failures(s) == {"error": 8989}  # "Too many open files": the client's own limit
    j = _one("oha.json")
    assert j.requests == 27653
    assert j.failed == 0
    assert "deadline" in j.note


def test_wrk_socket_errors_and_non_2xx() -> None:
    s = _one("wrk.txt")
    assert s.requests == 2606 + 3268 + 48
    assert _failures(s) == {"reset": 3268, "timeout": 48}
    assert s.connections == 5000
    assert s.keepalive
    n = _one("wrk-non2xx.txt")
    assert _failures(n) == {"http_error": 12479}
    assert "4xx" in n.note


def test_k6_summary_legacy_and_v1_with_warnings() -> None:
    legacy = _one("k6-legacy.txt")
    assert legacy.requests == 180
    assert legacy.failed == 0
    assert "45 of 90" in legacy.note
    v1 = _one("k6-resets.txt")
    assert v1.requests == 90
    assert _failures(v1) == {"reset": 3}


def test_vegeta_text_reports_and_json() -> None:
    s = _one("vegeta.txt")
    assert s.requests == 1200
    assert s.statuses == ((200, 665),)
    # the Error Set has no counts and names several outcomes: the 535 stay "error"
    assert _failures(s) == {"error": 535}
    assert {e.outcome for e in s.errors} >= {Outcome.REFUSED, Outcome.RESET, Outcome.EOF}
    bad = _one("vegeta-502.txt")
    assert _failures(bad) == {"error": 85306, "http_error": 343}
    j = _one("vegeta-report.json")
    assert j.requests == 100
    assert j.failed == 0
    assert j.start == pytest.approx(1442666750.645818631)
    assert j.end is not None


def test_fortio_text_and_json_keep_their_socket_counts() -> None:
    s = _one("fortio.txt")
    assert s.requests == 20
    assert _failures(s) == {"http_error": 3}
    assert (s.sockets, s.connections) == (4, 2)
    j = _one("fortio.json")
    assert j.requests == 100
    assert (j.sockets, j.connections) == (4, 4)
    assert j.start is not None
    assert j.duration_seconds == pytest.approx(0.397924917)


def test_per_request_shapes_with_real_times_become_rows() -> None:
    k6 = read_evidence([str(FIXTURES / "k6-points.json")]).requests
    assert k6.height == 4  # one http_req_duration point per request, vus points ignored
    assert k6.get_column("outcome").to_list() == ["ok", "refused", "refused", "ok"]
    assert k6.get_column("ts")[0] == pytest.approx(1494333285.239531)
    vegeta = read_evidence([str(FIXTURES / "vegeta-results.jsonl")]).requests
    assert vegeta.get_column("outcome").to_list() == ["ok", "refused", "ok"]
    assert vegeta.get_column("latency_ms")[0] == pytest.approx(1.234567)


def test_curl_error_and_its_000_are_one_request() -> None:
    s = _one("curl-loop.txt")
    assert s.requests == 12
    assert _failures(s) == {"refused": 1, "reset": 1, "eof": 1, "error": 1}
    dated = read_evidence([str(FIXTURES / "curl-dated.txt")]).requests
    assert dated.height == 6
    assert dated.get_column("outcome").to_list().count("refused") == 1


def test_curl_times_of_day_alone_are_not_times() -> None:
    text = "10:00:01 200\n10:00:02 000\n10:00:03 200\n"
    summaries, rows, _ = loadgen.read(text, "loop.txt", "curl")
    assert rows.height == 0
    assert summaries[0].requests == 3


def test_outcome_words() -> None:
    assert (
        loadgen.outcome_of("dial tcp 10.0.0.1:80: connect: connection refused") is Outcome.REFUSED
    )
    assert loadgen.outcome_of("read: connection reset by peer") is Outcome.RESET
    assert loadgen.outcome_of('Get "http://x/": EOF') is Outcome.EOF
    assert (
        loadgen.outcome_of("context deadline exceeded (Client.Timeout exceeded)") is Outcome.TIMEOUT
    )
    assert loadgen.outcome_of("aborted due to deadline") is Outcome.ABORTED
    assert loadgen.outcome_of("tls: bad certificate") is Outcome.ERROR


def test_pasted_on_stdin_is_named_dash() -> None:
    text = (FIXTURES / "hey.txt").read_bytes()
    evidence = read_with_stdin(["-"], io.BytesIO(text))
    assert evidence.loads[0].source == "-"
    assert evidence.sources[0].path == "-"
    assert evidence.sources[0].format == "hey"


def test_several_runs_in_one_paste() -> None:
    text = (FIXTURES / "vegeta.txt").read_text() + "\n" + (FIXTURES / "vegeta-502.txt").read_text()
    summaries, rows, _ = loadgen.read(text, "runs.txt", "vegeta")
    assert [s.requests for s in summaries] == [1200, 337744]
    assert rows.height == 0


@pytest.mark.parametrize(
    "text",
    [
        '{"latencies": {}, "status_codes": {"abc": 1}, "requests": "many"}',
        '{"summary": [], "statusCodeDistribution": {"200": "x"}}',
        '{"RetCodes": {"200": null}, "DurationHistogram": 3}',
        "Status code distribution:\n  [200]\t\n",
        '{"type":"Point","data":{"time":"yesterday"},"metric":"http_req_duration"}\n',
        '{"code":"x","timestamp":12,"latency":"slow"}\n',
    ],
)
def test_broken_reports_are_a_line_not_a_traceback(text: str, tmp_path: Path) -> None:
    path = tmp_path / "paste.txt"
    path.write_text(text)
    done = CliRunner().invoke(cli, ["diagnose", str(path)])
    assert done.exit_code in (0, 2), done.output
    assert done.exception is None or isinstance(done.exception, SystemExit)
    assert "Traceback" not in done.output
