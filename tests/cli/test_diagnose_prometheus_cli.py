"""``svcdoctor diagnose --prometheus``: option parsing and one-line errors (the real console
script in a subprocess), and the range and header readers."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest

from svcdoctor.cli._prometheus import DEFAULT_SINCE, Instant, Span
from svcdoctor.cli._prometheus import parse_headers as _headers
from svcdoctor.cli._prometheus import prometheus_range as _prometheus_range
from tests.prometheus_server import (
    PrometheusFactory,
    http_server,
    prometheus_with,  # noqa: F401 (the fixture)
)

SVCDOCTOR = str(Path(sys.executable).with_name("svcdoctor"))
T0 = 1_700_000_000  # 2023-11-14T22:13:20Z


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SVCDOCTOR, "diagnose", *args], capture_output=True, text=True, timeout=120, check=False
    )


def one_line_error(done: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert done.returncode == code, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert "Traceback" not in done.stderr
    # click's usage errors print "Usage: …" and a hint before the one error line
    assert lines[-1].startswith(("Error: ", "svcdoctor: error: ")), done.stderr
    return lines[-1]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


URL = f"http://127.0.0.1:{_closed_port()}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([URL, "some-dir"], "--prometheus reads a metrics store: give no EVIDENCE"),
        ([URL, "--example"], "give no EVIDENCE or --example"),
        ([URL, "--tz", "+02:00"], "--tz applies to evidence files, not --prometheus"),
        ([URL, "--clock-offset", "x=5"], "--clock-offset applies to evidence files"),
        ([URL, "--since", "1d", "--start", str(T0)], "give --since or --start/--end, not both"),
        ([URL, "--end", str(T0)], "--end needs --start"),
        ([URL, "--start", str(T0 + 60), "--end", str(T0)], "--end must be after --start"),
        ([URL, "--start", "0", "--end", str(T0)], "the range is longer than 400 days"),
        ([URL, "--start", "yesterday"], "'yesterday' is not a time: give RFC 3339"),
        ([URL, "--start", "-5"], "'-5' is not a time"),
        ([URL, "--since", "0"], "--since"),
        ([URL, "--since", "7x"], "'7x' is not a span"),
        ([URL, "--since", "401d"], "out of range"),
        ([URL, "--timeout", "0"], "--timeout"),
        ([URL, "--timeout", "nan"], "not a finite number"),
        ([URL, "--service", "api"], "with --prometheus give the Service as NAMESPACE/NAME"),
        ([URL, "--service", "Prod/API"], "NAMESPACE/NAME"),
        ([URL, "--header", "Authorization Bearer x"], "without a colon"),
        ([URL, "--header", ": value"], "expected 'Name: value'"),
        ([URL, "--since", "7d", "--step", "1s"], "more than 25,000 steps: give at least 25s"),
        ([URL, "--step", "0"], "--step"),
    ],
)
def test_bad_flags_and_combinations_are_one_line_usage_errors(
    args: list[str], message: str
) -> None:
    assert message in one_line_error(run("--prometheus", *args))


@pytest.mark.parametrize(
    "args",
    [
        ["--since", "1d", "some-dir"],
        ["--start", str(T0), "--end", str(T0 + 60), "some-dir"],
        ["--header", "Authorization: Bearer x", "some-dir"],
        ["--timeout", "5", "some-dir"],
        ["--step", "1s", "some-dir"],
    ],
)
def test_prometheus_flags_without_prometheus_are_refused(args: list[str]) -> None:
    assert "applies only with --prometheus URL" in one_line_error(run(*args))


def test_a_bad_header_never_echoes_its_value() -> None:
    error = one_line_error(run("--prometheus", URL, "--header", "Bad Name: s3cret-token"))
    assert "s3cret" not in error
    assert "expected 'Name: value'" in error


@pytest.mark.parametrize(
    "url", ["localhost:9090", "ftp://prometheus", "http://", "http://h:port", "http://h/?a=1"]
)
def test_a_bad_url_is_one_line_exit_2(url: str) -> None:
    error = one_line_error(run("--prometheus", url, "--since", "1h"))
    assert error.startswith(f"svcdoctor: error: bad Prometheus URL {url!r}")


# -- the readers behind the flags ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        (str(T0), T0),
        (f"{T0}.25", T0 + 0.25),
        ("2023-11-14T22:13:20Z", T0),
        ("2023-11-14T23:13:20+01:00", T0),
        ("2023-11-14T22:13:20.5Z", T0 + 0.5),
        ("2023-11-14 22:13:20Z", T0),
    ],
)
def test_times_read_as_rfc3339_or_unix_seconds(text: str, seconds: float) -> None:
    assert Instant().convert(text, None, None) == seconds


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("7d", 604_800),
        ("36h", 129_600),
        ("1d12h", 129_600),
        ("90m", 5400),
        ("2w", 1_209_600),
        ("45", 45),
        ("1h30m15s", 5415),
        ("0.5d", 43_200),
    ],
)
def test_spans(text: str, seconds: float) -> None:
    assert Span(0, None, low_open=True).convert(text, None, None) == seconds


def test_ranges() -> None:
    now = T0 + 10 * 86_400
    assert _prometheus_range(None, None, None, now) == (now - DEFAULT_SINCE, now)
    assert _prometheus_range(3600, None, None, now) == (now - 3600, now)
    assert _prometheus_range(None, T0, None, now) == (T0, now)
    assert _prometheus_range(None, T0, T0 + 60, now) == (T0, T0 + 60)
    with pytest.raises(click.UsageError, match="not both"):
        _prometheus_range(60, None, T0, now)


def test_headers() -> None:
    assert _headers(("Authorization: Bearer a:b", "X-Scope-OrgID:tenant-1")) == {
        "Authorization": "Bearer a:b",
        "X-Scope-OrgID": "tenant-1",
    }
    with pytest.raises(click.BadParameter, match="expected 'Name: value'"):
        _headers(("X-Empty:",))


# -- end to end: simulated history → promtool → a real Prometheus → diagnose --------------

SIM = ("--nodes", "20", "--replicas", "6", "--rate", "100", "--duration", "120")
EPOCH = 1_767_225_600  # where simulate --emit-metrics starts its history: 2026-01-01T00:00Z


def _history(out: Path, *options: str) -> Path:
    """``simulate … --emit-metrics out``: three rollouts ten minutes apart."""
    done = subprocess.run(
        [
            SVCDOCTOR,
            "simulate",
            *SIM,
            "--emit-metrics",
            str(out),
            *options,
            "--rollouts",
            "3",
            "--every",
            "10m",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture(scope="module")
def race_history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _history(tmp_path_factory.mktemp("history") / "race.om")


def _range(path: Path) -> tuple[int, int]:
    stamps = [
        int(float(line.rsplit(" ", 1)[1]))
        for line in path.read_text().splitlines()
        if line and not line.startswith("#")
    ]
    return min(stamps), max(stamps)


def test_diagnosis_from_a_real_prometheus(
    prometheus_with: PrometheusFactory,  # noqa: F811
    race_history: Path,
) -> None:
    url = prometheus_with(race_history)
    first, last = _range(race_history)
    assert first == EPOCH
    done = run(
        "--prometheus",
        url,
        "--start",
        "2026-01-01T00:00:00Z",
        "--end",
        str(last),
        "--format",
        "json",
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert {"summary", "primary_cause", "causes", "next_steps", "service"} <= set(report)
    assert report["service"] == "sim/api"
    summary = report["summary"]
    assert summary["start"] == "2026-01-01T00:00:00.000Z"
    assert summary["duration_seconds"] == last - first
    assert summary["requests"] > 0
    assert summary["sources"]
    assert {s["format"] for s in summary["sources"]} == {"prometheus"}
    assert {c["cause"] for c in report["causes"]} == {"race", "backend", "reuse", "infra"}
    for cause in report["causes"]:
        assert cause["verdict"] in ("likely", "possible", "unlikely")
    # the same Service named, the same range as Unix seconds: the same diagnosis, as text
    text = run(
        "--prometheus", url, "--start", str(first), "--end", str(last), "--service", "sim/api"
    )
    assert text.returncode == 0, text.stderr
    assert "Service: sim/api" in text.stdout
    assert "Verdict: " in text.stdout


def _counted(path: Path) -> tuple[int, int]:
    """Requests and failures in the history: the last value of each ingress-nginx counter
    (they start at 0 with the history)."""
    last: dict[str, float] = {}
    for line in path.read_text().splitlines():
        if line.startswith("nginx_ingress_controller_requests{"):
            head, value, _ = line.rsplit(" ", 2)
            last[head] = float(value)
    failed = sum(v for head, v in last.items() if not re.search(r'status="[23]\d\d"', head))
    return int(sum(last.values())), int(failed)


def test_a_race_history_is_diagnosed_race_with_its_rollouts(
    prometheus_with: PrometheusFactory,  # noqa: F811
    race_history: Path,
) -> None:
    url = prometheus_with(race_history)
    first, last = _range(race_history)
    done = run("--prometheus", url, "--start", str(first), "--end", str(last), "-o", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    requests, failed = _counted(race_history)
    assert failed > 0
    assert report["summary"]["errors"] == failed
    assert report["summary"]["requests"] == requests
    assert report["primary_cause"] == "race"
    assert len(report["rollouts"]) == 3  # --rollouts 3 --every 10m
    assert [r["time"][:16] for r in report["rollouts"]] == [
        "2026-01-01T00:00",
        "2026-01-01T00:10",
        "2026-01-01T00:20",
    ]


def test_store_problems_are_one_line_exit_2(
    prometheus_with: PrometheusFactory,  # noqa: F811
    race_history: Path,
) -> None:
    url = prometheus_with(race_history)
    first, last = _range(race_history)
    # the history is in January 2026: a week back from now holds no request series
    assert "request series" in one_line_error(run("--prometheus", url, "--since", "1h"))
    unknown = run(
        "--prometheus", url, "--start", str(first), "--end", str(last), "--service", "sim/nothing"
    )
    assert "sim/nothing" in one_line_error(unknown)
    refused = run("--prometheus", f"http://127.0.0.1:{_closed_port()}", "--since", "1h")
    assert "cannot reach Prometheus at http://127.0.0.1:" in one_line_error(refused)


def test_headers_reach_the_server_and_auth_failures_are_one_line() -> None:
    web = pytest.importorskip("aiohttp.web")
    seen: list[str] = []

    async def handler(request: Any) -> Any:
        seen.append(request.headers.get("Authorization", ""))
        if request.headers.get("Authorization") != "Bearer right":
            return web.Response(status=401, text="Unauthorized\n")
        # an empty store: every list empty, every query without series
        partial = ["partial response:\nstore eu-1 unreachable"]
        if "/label/" in request.path or request.path.endswith("/labels"):
            return web.json_response({"status": "success", "data": [], "warnings": partial})
        kind = "matrix" if request.path.endswith("query_range") else "vector"
        return web.json_response({"status": "success", "data": {"resultType": kind, "result": []}})

    with http_server(handler) as base:
        denied = one_line_error(run("--prometheus", base, "--since", "1h"))
        assert "refused the credentials (401 Unauthorized" in denied
        assert "--header 'Authorization: Bearer TOKEN'" in denied
        allowed = run(
            "--prometheus",
            base,
            "--since",
            "1h",
            "--header",
            "Authorization: Bearer right",
            "--timeout",
            "5s",
        )
        assert "request series" in one_line_error(allowed)
        # the server's warning is said (one line) before the error it may explain
        assert "warning: Prometheus: partial response: store eu-1 unreachable\n" in allowed.stderr
    assert seen[0] == ""
    assert seen[-1] == "Bearer right"


def test_deletions_known_only_to_a_minute_scrape_still_show_the_race(
    prometheus_with: PrometheusFactory,  # noqa: F811
    tmp_path: Path,
) -> None:
    """At a 60 s scrape a deleted pod is gone before kube-state-metrics sees its deletion
    timestamp: the deletion is where its series ends, up to a scrape early, and the race's
    windows must reach that much further (they did not: race was 'unlikely')."""
    history = _history(tmp_path / "minute.om", "--scrape-interval", "60")
    assert "kube_pod_deletion_timestamp{" not in history.read_text()
    url = prometheus_with(history)
    first, last = _range(history)
    done = run("--prometheus", url, "--start", str(first), "--end", str(last), "-o", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["primary_cause"] == "race"
    assert len(report["rollouts"]) == 3
    warnings = report["summary"]["warnings"]
    # the scrape interval as measured from the series: at least the true 60 s, a little more
    # for pods with few samples (their first sample comes up to a scrape after creation)
    scrape = [
        float(m) for w in warnings for m in re.findall(r"known to a scrape \(([\d.]+) s\)", w)
    ]
    assert len(scrape) == 1, warnings
    assert 60 <= scrape[0] <= 70
