"""AWS ALB access logs and GCP Cloud Load Balancing request logs → request rows.

Fixture line shapes come from public sources:
- alb-access.log: the examples of
  https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-access-logs.html
  (HTTP, HTTPS, h2, wss, Lambda); the keep-alive 502 of
  https://repost.aws/knowledge-center/elb-alb-troubleshoot-502-errors (whole, and cut after
  trace_id as the page prints it); the ``0.003 0.0 -1`` 502s of
  https://github.com/uNetworking/uWebSockets.js/issues/939 (and kartikk221/hyper-express#179:
  keep-alive 502s are dispatched, rpt >= 0, rspt -1); the 460 of
  https://stackoverflow.com/q/43736680 (older format, ends at trace_id); newer trailing
  fields (conn_trace_id ``TID_…``, transformed_host/uri, request_transform_status).
- gcp-requests.json / .jsonl: ``gcloud logging read --format=json`` entries shaped as in
  https://cloud.google.com/load-balancing/docs/https/https-logging-monitoring and entries
  quoted in public repositories (GKE NEG backend ``serverIp`` without port; a regional
  external LB with ``ip:port`` and ``backend_target_name``; an entry without statusDetails).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from svcdoctor.evidence.cloudlb import (
    ALB_LINE,
    UNDISPATCHED,
    alb_access,
    gcp_requests,
    is_gcp_entry,
)
from svcdoctor.evidence.requests import SCHEMA
from svcdoctor.model import FAILURES, REQUEST_COLUMNS

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "evidence"


def alb_rows() -> tuple[list[dict[str, Any]], int]:
    lines = (FIXTURES / "alb-access.log").read_text().splitlines()
    frame, unparsed = alb_access(lines, "alb-access.log")
    assert frame.columns == list(REQUEST_COLUMNS)
    assert dict(frame.schema) == SCHEMA
    return frame.to_dicts(), unparsed


def gcp_records(name: str) -> list[dict[str, Any]]:
    text = (FIXTURES / name).read_text()
    if name.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    records: list[dict[str, Any]] = json.loads(text)
    return records


# -------------------------------------------------------------------------------- ALB


def test_alb_every_entry_parses_and_bad_lines_are_counted() -> None:
    rows, unparsed = alb_rows()
    assert len(rows) == 15
    assert unparsed == 2  # the prose line and the truncated one; the blank line is not counted
    assert {r["source"] for r in rows} == {"alb-access.log"}
    assert {r["role"] for r in rows} == {"request"}


def test_alb_outcomes_follow_the_documented_codes() -> None:
    rows, _ = alb_rows()
    assert [(r["status"], r["outcome"]) for r in rows] == [
        (200, "ok"),
        (200, "ok"),
        (200, "ok"),  # a redirect action
        (101, "ok"),  # websocket upgrade
        (502, "error"),  # Lambda: no target, error_reason LambdaInvalidResponse
        (502, "eof"),  # target closed with a request outstanding (response time -1)
        (502, "eof"),  # the same, older format
        (502, "eof"),  # keep-alive race: dispatched, no response headers
        # all three times -1: a TCP RST on connect or a target closing a kept-alive
        # connection, AWS lists both; left open (issue 29)
        (502, "error"),
        (504, "timeout"),
        (460, "aborted"),  # the client closed first
        (503, "error"),  # no registered targets
        (500, "http_error"),  # the target answered 500 itself
        (463, "ok"),  # X-Forwarded-For too long: the client's request
        (200, "ok"),
    ]
    assert "aborted" not in FAILURES


def test_alb_detail_is_error_reason_or_a_phrase_and_null_when_ok() -> None:
    rows, _ = alb_rows()
    details = [r["detail"] for r in rows]
    assert details[4] == "LambdaInvalidResponse"
    assert details[5] == "target closed the connection before responding (502, target status -)"
    assert details[8] == UNDISPATCHED
    assert details[9] == "target did not respond before the timeout (504)"
    assert details[10] == "client closed the connection before the response (460)"
    assert details[11] == "no registered targets (503)"
    assert details[12] == "target responded 500"
    assert all(d is None for r, d in zip(rows, details, strict=True) if r["outcome"] == "ok")


def test_alb_times_client_backend_and_target_group() -> None:
    rows, _ = alb_rows()
    first = rows[0]
    # ts is request_creation_time, latency the sum of the three processing times
    assert first["ts"] == pytest.approx(1530570168.364)  # 2018-07-02T22:22:48.364Z
    assert first["latency_ms"] == pytest.approx(1.0)
    assert rows[1]["latency_ms"] == pytest.approx(171.0)  # 0.086 + 0.048 + 0.037
    assert first["client"] == "192.168.131.39"
    assert first["backend"] == "10.0.0.1:80"
    assert first["upstream"] == "targetgroup/my-targets/73e2d6bc24d8a067"
    assert rows[4]["backend"] is None  # Lambda target "-"
    # a -1 among the times: the wall time from request_creation_time to time
    assert rows[9]["latency_ms"] == pytest.approx(60_000.0)
    assert rows[9]["ts"] == pytest.approx(1710410410.0)  # 2024-03-14T10:00:10Z
    # older format (no request_creation_time): start = time - the known processing times
    assert rows[6]["latency_ms"] == pytest.approx(4206.0)
    assert rows[6]["ts"] == pytest.approx(1650041570.757968 - 4.206)
    assert rows[10]["upstream"] == "targetgroup/TARGET-GROUP/e6120e5adr245b79107e"
    assert rows[13]["upstream"] is None  # target_group_arn "-"
    assert rows[14]["client"] == "2001:db8:85a3::8a2e:370:7334"  # IPv6, port stripped


def test_alb_regex_tolerates_any_trailing_fields() -> None:
    line = (FIXTURES / "alb-access.log").read_text().splitlines()[7]
    longer = line + ' "new-field" 42 "and another"'
    frame, unparsed = alb_access([longer], "x")
    assert unparsed == 0
    assert frame.get_column("outcome").to_list() == ["eof"]
    assert pl.Series([longer]).str.contains(ALB_LINE).all()


def test_alb_empty_input() -> None:
    frame, unparsed = alb_access([], "x")
    assert frame.height == 0
    assert unparsed == 0
    assert dict(frame.schema) == SCHEMA


# -------------------------------------------------------------------------------- GCP


@pytest.mark.parametrize("name", ["gcp-requests.json", "gcp-requests.jsonl"])
def test_gcp_outcomes_from_status_details(name: str) -> None:
    frame = gcp_requests(gcp_records(name), name)
    assert frame.columns == list(REQUEST_COLUMNS)
    assert dict(frame.schema) == SCHEMA
    rows = frame.to_dicts()
    assert [(r["status"], r["outcome"]) for r in rows] == [
        (200, "ok"),  # response_sent_by_backend
        (502, "eof"),  # backend_connection_closed_before_data_sent_to_client
        (502, "timeout"),  # backend_timeout
        (503, "refused"),  # failed_to_connect_to_backend
        (0, "aborted"),  # client_disconnected_before_any_response
        (200, "reset"),  # backend_connection_closed_after_partial_response_sent
        (503, "http_error"),  # response_sent_by_backend: the backend's own 503
        (503, "error"),  # failed_to_pick_backend
        (429, "ok"),  # denied_by_security_policy: not the Service
        (404, "ok"),  # no statusDetails: from the status
        (502, "eof"),  # regional external LB
        (504, "timeout"),  # internal LB
    ]
    assert rows[1]["detail"] == "backend_connection_closed_before_data_sent_to_client"
    assert rows[0]["detail"] is None
    assert rows[8]["detail"] is None


def test_gcp_fields() -> None:
    rows = gcp_requests(gcp_records("gcp-requests.json"), "g").to_dicts()
    first = rows[0]
    # timestamp is when the first-layer GFE received the request: the start
    assert first["ts"] == pytest.approx(1796205601.0)  # 2026-12-02T10:00:01Z
    assert first["latency_ms"] == pytest.approx(25.376)
    assert first["client"] == "198.51.100.14"
    assert first["backend"] == "10.88.1.139"
    assert first["upstream"] == "k8s1-18cca515-shop-api-80-9719b3d2"
    assert rows[7]["backend"] is None  # no backend picked
    regional = rows[10]
    assert regional["client"] == "203.0.113.197"  # port stripped
    assert regional["backend"] == "192.168.0.17:443"  # port kept
    assert regional["upstream"] == "tenant-bs"  # backend_target_name
    assert rows[11]["upstream"] == "pay-bs"


def test_gcp_tolerates_snake_case_missing_status_and_duration_objects() -> None:
    record = {
        "http_request": {
            "remote_ip": "[2001:db8::7]:443",
            "server_ip": "10.0.0.5",
            "latency": {"seconds": 1, "nanos": 500_000_000},
        },
        "json_payload": {
            "@type": "type.googleapis.com/google.cloud.loadbalancing.type.LoadBalancerLogEntry",
            "status_details": "client_disconnected_after_partial_response",
        },
        "resource": {"type": "http_load_balancer", "labels": {"backend_service_name": "b"}},
        "timestamp": "2026-12-02T10:00:00.250Z",
    }
    assert is_gcp_entry(record)
    row = gcp_requests([record], "g").to_dicts()[0]
    assert row["outcome"] == "aborted"  # status 0 is omitted from JSON: detail decides
    assert row["status"] is None
    assert row["latency_ms"] == pytest.approx(1500.0)
    assert row["client"] == "2001:db8::7"
    assert row["ts"] == pytest.approx(1796205600.25)


def test_is_gcp_entry_rejects_other_records() -> None:
    records = gcp_records("gcp-requests.json")
    assert all(is_gcp_entry(r) for r in records)
    envoy = {"start_time": "2026-12-02T10:00:00Z", "response_code": 200, "upstream_host": "x"}
    container = {
        "httpRequest": {"status": 200},
        "resource": {"type": "k8s_container", "labels": {}},
        "jsonPayload": {"message": "GET / 200"},
    }
    no_http = {"jsonPayload": records[0]["jsonPayload"], "resource": records[0]["resource"]}
    assert not any(is_gcp_entry(r) for r in (envoy, container, no_http))
    by_type_only = {"httpRequest": {"status": 200}, "resource": {"type": "internal_http_lb_rule"}}
    assert is_gcp_entry(by_type_only)
    frame = gcp_requests([envoy, *records[:2]], "g")
    assert frame.height == 2


def test_gcp_empty_input() -> None:
    frame = gcp_requests([], "g")
    assert frame.height == 0
    assert dict(frame.schema) == SCHEMA


def test_alb_malformed_target_response_and_escaped_quotes() -> None:
    line = (FIXTURES / "alb-access.log").read_text().splitlines()[12]  # the target's own 500
    malformed = line.replace("0.000 0.012 0.000 500 500", "0.000 0.012 0.000 502 -")
    quoted = line.replace('"curl/8.5.0"', '"Agent \\"quoted\\" 1.0"')
    frame, unparsed = alb_access([malformed, quoted], "x")
    assert unparsed == 0
    rows = frame.to_dicts()
    assert rows[0]["outcome"] == "error"  # a response came, but not a valid one
    assert rows[0]["detail"] == "invalid response from the target (502)"
    assert rows[1]["outcome"] == "http_error"
