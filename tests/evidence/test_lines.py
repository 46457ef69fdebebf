"""Text evidence read line by line, each line by its own shape (issue 15, sections 4 and 5).

Every fixture line is shaped after a public report; the source of each shape is named
beside the test that uses it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from svcdoctor.evidence import EvidenceError, detect, read_evidence
from svcdoctor.evidence.proxylogs import nginx_access
from svcdoctor.evidence.times import rfc3339
from svcdoctor.model import FAILURES

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "evidence"


def at(text: str) -> float:
    value = rfc3339(text)
    assert value is not None
    return value


def notes(ev, fmt: str) -> str:  # type: ignore[no-untyped-def]
    return " | ".join(s.note for s in ev.sources if s.format == fmt)


def copy(tmp_path: Path, *names: str) -> Path:
    for name in names:
        shutil.copy(FIXTURES / name, tmp_path / name)
    return tmp_path


# Shapes: banner kubernetes/ingress-nginx#9656; klog kubernetes/ingress-nginx#9943;
# access + error lines (three 5 s connect timeouts, one request) kubernetes/ingress-nginx#9443;
# stream error line: nginx's stream proxy ("client: …, server: 0.0.0.0:9009, upstream:
# "172.26.144.225:9009", bytes from/to client:0/0, …", no scheme), as in
# kubernetes/ingress-nginx#9943.
def test_interleaved_controller_log_is_read_by_shape_and_counted() -> None:
    ev = read_evidence([str(FIXTURES / "ingress-nginx-controller.log")])
    by_format = {s.format: s for s in ev.sources}
    assert set(by_format) == {"nginx-access", "nginx-error", "routing"}
    assert by_format["routing"].start == pytest.approx(1678291318.98909)  # the reload
    assert by_format["nginx-access"].rows == 4  # 2 requests, 2 retried attempts
    assert by_format["nginx-error"].rows == 4  # 3 http + 1 stream upstream failure
    assert "1 lines without an upstream failure" in by_format["nginx-error"].note
    assert any("4 klog lines and 7 other lines: not evidence" in p for p in ev.problems)
    rows = ev.requests.sort("ts", "role").select("role", "outcome", "backend", "upstream").rows()
    assert rows == [
        ("request", "timeout", "192.168.215.1:80", "pc-dev-example-web-service-80"),
        ("masked", "timeout", "192.168.215.1:80", "pc-dev-example-web-service-80"),
        ("masked", "timeout", "192.168.215.1:80", "pc-dev-example-web-service-80"),
        ("request", "ok", "192.168.215.7:80", "pc-dev-example-web-service-80"),
        ("error_log", "refused", "172.26.144.225:9009", None),
    ]
    # the three error lines refined the three attempts instead of adding three failures
    assert (
        "3 of 4 failure lines describe requests of the access log" in by_format["nginx-error"].note
    )
    detail = ev.requests.filter(pl.col("backend") == "192.168.215.1:80").get_column("detail")
    assert set(detail.to_list()) == {
        "upstream timed out (110: Operation timed out) while connecting to upstream"
    }


def test_stream_upstream_error_line_has_no_scheme() -> None:
    ev = read_evidence([str(FIXTURES / "ingress-nginx-controller.log")])
    stream = ev.requests.filter(pl.col("role") == "error_log").to_dicts()
    assert len(stream) == 1
    assert stream[0]["backend"] == "172.26.144.225:9009"
    assert stream[0]["client"] == "10.0.0.9"
    assert stream[0]["ts"] == at("2023-03-08T16:03:01Z")
    assert stream[0]["detail"].startswith("connect() failed (111: Connection refused)")


def test_detection_samples_lines_not_the_first() -> None:
    """The banner comes first; most lines say what the file is."""
    head = (FIXTURES / "ingress-nginx-controller.log").read_bytes()
    assert detect(head) in ("nginx-access", "nginx-error")
    assert detect(b"I1204 10:00:00.123456       7 controller.go:123] hello\n") == "unknown"


# Older ingress-nginx format (real IP in brackets, no alternative-upstream bracket):
# kubernetes/ingress-nginx#334 (0.9.0-beta.2: client "-", no request id), the default
# log-format-upstream quoted in nielsbasjes/logparser#51 and kubernetes/ingress-nginx#2114;
# 499 after seven 504 attempts (with the "[]" bracket): kubernetes/ingress-nginx#4312.
def test_older_ingress_nginx_access_format() -> None:
    ev = read_evidence([str(FIXTURES / "ingress-nginx-old.log")])
    assert ev.problems == ()
    requests = ev.requests.filter(pl.col("role") == "request").sort("ts")
    assert requests.select("client", "status", "outcome", "backend", "upstream").rows() == [
        ("111.93.10.20", 304, "ok", "100.96.14.20:3000", "service-3000"),  # client "-"
        ("176.12.1.10", 499, "aborted", "10.1.244.233:80", "upstream-default-backend"),
        ("176.12.1.9", 502, "http_error", "10.1.244.234:80", "shop-api-80"),
        ("10.2.3.4", 200, "ok", "10.1.244.234:80", "shop-api-80"),
    ]
    masked = ev.requests.filter(pl.col("role") == "masked")
    assert masked.height == 1 + 7
    assert masked.filter(pl.col("outcome") == "timeout").height == 7


# Client aborts: nginx 499 (kubernetes/ingress-nginx#4312), Envoy DC with response code 0
# (istio/istio#9292 style; details downstream_remote_disconnect).
def test_client_aborts_are_aborted_in_every_format() -> None:
    nginx = read_evidence([str(FIXTURES / "ingress-nginx-old.log")]).requests
    envoy = read_evidence([str(FIXTURES / "istio-proxy-shapes.log")]).requests
    assert nginx.filter(pl.col("status") == 499).get_column("outcome").to_list() == ["aborted"]
    assert envoy.filter(pl.col("status") == 0).get_column("outcome").to_list() == ["aborted"]
    assert "aborted" not in FAILURES


# Istio's default format with %RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS%
# "%UPSTREAM_TRANSPORT_FAILURE_REASON%": istio/istio#45802 (503 UC, authority a host name);
# UF with delayed_connect_error:_111: istio/istio#51267; the older Istio format with the
# mixer status before the transport failure reason: istio/istio#13848 era (Istio 1.1 docs).
def test_istio_shapes_backend_by_position_cluster_and_detail() -> None:
    ev = read_evidence([str(FIXTURES / "istio-proxy-shapes.log")])
    assert ev.problems == ()
    rows = ev.requests.sort("ts").select("outcome", "backend", "upstream", "detail").rows()
    assert rows == [
        (
            "eof",
            "127.0.0.1:8080",
            "inbound|80|http-web|app.sauron-seo-app.svc.cluster.local",
            "UC",  # the response flags lead the detail (diagnose.signatures reads them)
        ),
        (
            "eof",
            "10.80.47.192:8181",
            "outbound|80||health-api.production.svc.cluster.local",
            "UC; upstream_reset_before_response_started{connection_termination}",
        ),
        # :authority is an IP:port too; the backend is UPSTREAM_HOST
        ("ok", "10.244.1.27:80", "outbound|8000||httpbin.foo.svc.cluster.local", None),
        (
            "refused",
            "10.244.2.31:8080",
            "outbound|8080||api.shop.svc.cluster.local",
            "UF; upstream_reset_before_response_started{remote_connection_failure,"
            "delayed_connect_error:_111}; delayed_connect_error:_111",
        ),
        (
            "aborted",
            "10.244.2.31:8080",
            "outbound|8080||api.shop.svc.cluster.local",
            "DC; downstream_remote_disconnect",
        ),
    ]
    assert ev.requests.sort("ts").get_column("client").to_list()[1] == "10.80.46.220"


def test_envoy_json_lines_give_cluster_and_details(tmp_path: Path) -> None:
    record = {
        "start_time": "2023-07-05T10:11:12.345Z",
        "response_code": 503,
        "response_flags": "UC",
        "response_code_details": "upstream_reset_before_response_started{connection_termination}",
        "upstream_transport_failure_reason": None,
        "upstream_host": "10.80.47.192:8181",
        "upstream_cluster": "outbound|80||health-api.production.svc.cluster.local",
        "authority": "10.96.0.20:80",
        "downstream_remote_address": "10.80.46.220:59375",
        "duration": 0,
    }
    (tmp_path / "proxy.jsonl").write_text(json.dumps(record) + "\nnot json\n")
    ev = read_evidence([str(tmp_path)])
    assert ev.requests.select("outcome", "backend", "upstream", "detail").rows() == [
        (
            "eof",
            "10.80.47.192:8181",
            "outbound|80||health-api.production.svc.cluster.local",
            "UC; upstream_reset_before_response_started{connection_termination}",
        )
    ]
    assert any("1 other line: not evidence" in p for p in ev.problems)


ISTIO_LINE = (FIXTURES / "istio-proxy-shapes.log").read_text().splitlines()[1]
NGINX_LINE = next(
    line
    for line in (FIXTURES / "ingress-nginx-controller.log").read_text().splitlines()
    if "/custom/default.html" in line
)


# Prefixes: kubectl logs --timestamps (RFC 3339 with nanoseconds, kubernetes/kubernetes
# logs), CRI "<time> stdout F " (kubernetes/ingress-nginx#11244 quotes
# "2024-03-26T16:21:04.076718973+01:00 stderr F 2024/03/26 15:21:04 [error] …"),
# kubectl logs --prefix "[pod/NAME/CONTAINER] ", Docker json-file {"log":…,"time":…}.
@pytest.mark.parametrize(
    "wrap",
    [
        lambda s: f"2025-07-28T23:45:27.915419813Z {s}",
        lambda s: f"2025-07-28T23:45:27.915419813Z stdout F {s}",
        lambda s: f"[pod/ingress-nginx-controller-abc/controller] {s}",
        lambda s: f"[pod/istio-x/istio-proxy] 2025-07-28T23:45:27.915419813Z {s}",
        lambda s: json.dumps(
            {"log": s + "\n", "stream": "stdout", "time": "2025-07-28T23:45:27.915419813Z"}
        ),
    ],
    ids=["kubectl-timestamps", "cri", "kubectl-prefix", "prefix-and-timestamps", "docker"],
)
def test_collector_prefixes_are_stripped(tmp_path: Path, wrap) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "proxy.log").write_text(f"{wrap(ISTIO_LINE)}\n{wrap(NGINX_LINE)}\n")
    ev = read_evidence([str(tmp_path)])
    assert ev.problems == ()
    assert {s.format for s in ev.sources} == {"envoy", "nginx-access"}
    assert sorted(ev.requests.get_column("backend").cast(pl.Utf8).to_list()) == [
        "10.244.1.27:80",
        "192.168.215.7:80",
    ]


# Kernel lines: a bare "kernel: [1694413.644132] nf_conntrack: nf_conntrack: table full,
# dropping packet" (canonical/hotsos#101); syslog "Feb 23 16:44:36 jobs kernel:
# [38775494.393661] nf_conntrack: table full, dropping packet" (wballard/starphleet#352).
def test_bare_kernel_lines_dated_by_the_collector_prefix(tmp_path: Path) -> None:
    bare = read_evidence([str(FIXTURES / "kernel-bare.txt")])
    assert [(e.kind, e.count, e.aligned) for e in bare.kernel] == [
        ("conntrack_full", 1, False),
        ("conntrack_full", 1, False),
        ("suppressed", 212, False),
    ]
    lines = (FIXTURES / "kernel-bare.txt").read_text().splitlines()
    stamped = "".join(f"2026-12-02T10:00:0{i}Z {line}\n" for i, line in enumerate(lines))
    (tmp_path / "node.log").write_text(stamped)
    ev = read_evidence([str(tmp_path)])
    assert [(e.ts, e.aligned) for e in ev.kernel if e.kind == "conntrack_full"] == [
        (at("2026-12-02T10:00:00Z"), True),
        (at("2026-12-02T10:00:01Z"), True),
    ]


def test_syslog_kernel_lines_with_boot_seconds_inside(tmp_path: Path) -> None:
    copy(tmp_path, "syslog-kernel.txt")
    (tmp_path / "requests.csv").write_text("ts,outcome\n2026-12-02T10:00:30Z,ok\n")
    ev = read_evidence([str(tmp_path)])
    assert [(e.ts, e.node, e.count) for e in ev.kernel] == [
        (at("2026-12-02T10:00:36Z"), "jobs", 1),
        (at("2026-12-02T10:00:36Z"), "jobs", 1),
    ]


def test_ratelimit_suppressed_messages_are_not_drops() -> None:
    """net_ratelimit counts rate-limited messages of any kind: one event of kind
    "suppressed", never 212 conntrack drops."""
    ev = read_evidence([str(FIXTURES / "kernel-bare.txt")])
    drops = [e for e in ev.kernel if e.kind == "conntrack_full"]
    assert sum(e.count for e in drops) == 2
    assert [e.count for e in ev.kernel if e.kind == "suppressed"] == [212]


# conntrack -S output as conntrack-tools 1.4.x prints it, snapshots after `date -u` and
# `date -Is` lines (the loop the conntrack DNS-race write-ups use).
def test_conntrack_snapshots_each_with_its_time() -> None:
    ev = read_evidence([str(FIXTURES / "conntrack-S-snapshots.txt")])
    assert [(e.ts, e.kind, e.count) for e in ev.kernel] == [
        (at("2026-12-04T21:39:28Z"), "insert_failed", 22),
        (at("2026-12-04T21:39:28Z"), "drop", 22),
        (at("2026-12-04T21:40:28Z"), "insert_failed", 39),
        (at("2026-12-04T21:40:28Z"), "drop", 39),
    ]
    assert "2 snapshots" in notes(ev, "conntrack-stats")


def test_conntrack_without_timestamps_keeps_ts_none() -> None:
    ev = read_evidence([str(FIXTURES / "conntrack-S.txt")])
    assert [(e.ts, e.kind, e.count) for e in ev.kernel] == [
        (None, "insert_failed", 22),
        (None, "drop", 22),
    ]


def _access(client: str, when: str, status: int, backend: str, rt: float = 0.002) -> str:
    # upstreaminfo as in kubernetes/ingress-nginx#9877 (502 with upstream status 502)
    upstream_status = "502" if status == 502 else str(status)
    return (
        f'{client} - - [{when}] "POST /api/authentication/token HTTP/1.1" {status} 150 "-" '
        f'"axios/0.23.0" 340 {rt:.3f} [shop-api-80] [] {backend} 0 {rt:.3f} {upstream_status} '
        "baef50777d0f3651f32233c609ad0e7e"
    )


def _error(client: str, when: str, backend: str) -> str:
    # kubernetes/ingress-nginx#12285 / #9877
    return (
        f"{when} [error] 397#397: *56382572 upstream prematurely closed connection while "
        f"reading response header from upstream, client: {client}, server: shop.example.com, "
        f'request: "POST /api/authentication/token HTTP/1.1", upstream: '
        f'"http://{backend}/api/authentication/token", host: "shop.example.com"'
    )


def test_access_and_error_logs_count_each_failure_once(tmp_path: Path) -> None:
    """15 failed requests seen in both logs are 15 failures, not 29 or 30."""
    access, errors = [], []
    for i in range(15):
        client, backend = f"3.18.201.{i + 1}", f"10.244.{i % 3}.9:8080"
        access.append(_access(client, f"17/Apr/2023:20:24:{10 + i:02d} +0000", 502, backend))
        access.append(_access(client, f"17/Apr/2023:20:25:{10 + i:02d} +0000", 200, backend))
        errors.append(_error(client, f"2023/04/17 20:24:{10 + i:02d}", backend))
    errors.append(_error("9.9.9.9", "2023/04/17 20:30:00", "10.244.0.9:8080"))  # not logged
    (tmp_path / "access.log").write_text("\n".join(access) + "\n")
    (tmp_path / "error.log").write_text("\n".join(errors) + "\n")
    ev = read_evidence([str(tmp_path)])
    failed = ev.requests.filter(pl.col("outcome").is_in(list(FAILURES)))
    assert failed.filter(pl.col("role") == "request").height == 15
    assert set(failed.filter(pl.col("role") == "request").get_column("outcome")) == {"eof"}
    assert failed.filter(pl.col("role") == "error_log").height == 1
    assert failed.height == 16
    note = notes(ev, "nginx-error")
    assert "15 of 16 failure lines describe requests of the access log" in note
    assert ev.requests.filter(pl.col("outcome") == "ok").height == 15


def test_error_log_zone_from_the_access_log(tmp_path: Path) -> None:
    """$time_local carries +0200; the error log's 12:24:10 is then 10:24:10 UTC, and joins."""
    (tmp_path / "access.log").write_text(
        _access("3.18.201.1", "17/Apr/2023:12:24:10 +0200", 502, "10.244.0.9:8080") + "\n"
    )
    (tmp_path / "error.log").write_text(
        _error("3.18.201.1", "2023/04/17 12:24:10", "10.244.0.9:8080")
        + "\n"
        + _error("3.18.201.2", "2023/04/17 12:30:00", "10.244.0.9:8080")
        + "\n"
    )
    ev = read_evidence([str(tmp_path)])
    assert "UTC+02:00, the zone of the access log access.log" in notes(ev, "nginx-error")
    kept = ev.requests.filter(pl.col("role") == "error_log")
    assert kept.get_column("ts").to_list() == [at("2023-04-17T10:30:00Z")]
    assert ev.requests.filter(pl.col("role") == "request").get_column("outcome").to_list() == [
        "eof"
    ]


def test_tz_argument_wins_and_utc_is_said(tmp_path: Path) -> None:
    (tmp_path / "error.log").write_text(
        _error("3.18.201.2", "2023/04/17 12:30:00", "10.244.0.9:8080") + "\n"
    )
    plain = read_evidence([str(tmp_path)])
    assert plain.requests.get_column("ts").to_list() == [at("2023-04-17T12:30:00Z")]
    assert "read as UTC: no access log gives the zone (pass --tz)" in notes(plain, "nginx-error")
    shifted = read_evidence([str(tmp_path)], tz="+02:00")
    assert shifted.requests.get_column("ts").to_list() == [at("2023-04-17T10:30:00Z")]
    assert "UTC+02:00 (--tz)" in notes(shifted, "nginx-error")
    with pytest.raises(EvidenceError, match="not a UTC offset"):
        read_evidence([str(tmp_path)], tz="Europe/Paris")


def test_error_log_zone_from_kubectl_timestamps(tmp_path: Path) -> None:
    """No access log, but the collector's UTC stamps show nginx wrote local time +02:00."""
    line = _error("3.18.201.2", "2023/04/17 12:30:00", "10.244.0.9:8080")
    (tmp_path / "error.log").write_text(f"2023-04-17T10:30:00.000412Z {line}\n")
    ev = read_evidence([str(tmp_path)])
    assert ev.requests.get_column("ts").to_list() == [at("2023-04-17T10:30:00Z")]
    assert "from the log's timestamps" in notes(ev, "nginx-error")


def test_a_file_of_klog_only_is_not_evidence(tmp_path: Path) -> None:
    (tmp_path / "controller.log").write_text(
        "I0601 03:05:56.829402       7 controller.go:167] reload\n"
        "W0601 03:05:56.828406       7 controller.go:456] no endpoints\n"
    )
    with pytest.raises(EvidenceError) as info:
        read_evidence([str(tmp_path)])
    message = str(info.value)
    assert message.count("not a recognised evidence format") == 1
    assert "2 klog lines" in message


def test_big_access_log_is_read_without_a_python_loop_per_line(tmp_path: Path) -> None:
    """200,000 lines with a banner in front: all read (a smoke test of the vectorised path)."""
    line = _access("10.0.0.1", "17/Apr/2023:20:24:10 +0000", 200, "10.244.0.9:8080")
    text = "NGINX Ingress controller\n" + (line + "\n") * 200_000
    (tmp_path / "access.log").write_text(text)
    ev = read_evidence([str(tmp_path)])
    assert ev.requests.height == 200_000


# The cloud load balancer readers (evidence/cloudlb.py) are called from the line reader:
# ALB entries as in the AWS documentation examples, GCP entries one JSON object a line
# (gcloud logging read --format=json writes an array: read whole).
def test_cloud_load_balancer_logs_are_read_by_shape(tmp_path: Path) -> None:
    copy(tmp_path, "alb-access.log", "gcp-requests.jsonl", "gcp-requests.json")
    ev = read_evidence([str(tmp_path)])
    formats = {(Path(s.path).name, s.format) for s in ev.sources}
    assert formats == {
        ("alb-access.log", "alb"),
        ("gcp-requests.jsonl", "gcp"),
        ("gcp-requests.json", "gcp"),
    }
    assert all(s.rows > 0 for s in ev.sources)
    assert ev.requests.height == sum(s.rows for s in ev.sources)


def test_lines_starting_with_a_bracket_are_not_json(tmp_path: Path) -> None:
    """ingress-nginx's TCP stream access line starts with an IPv6 client in brackets
    (kubernetes/ingress-nginx#9943): not JSON; read by lines, the stream line as a request
    of the stream log (issue 29: its 502 is a failure)."""
    (tmp_path / "stream.log").write_text(
        "[fd69:1:10:f980::a13:26df] [01/Jun/2023:03:05:57 +0000] TCP 502 0 0 0.000\n"
        + _error("3.18.201.2", "2023/04/17 12:30:00", "10.244.0.9:8080")
        + "\n"
    )
    ev = read_evidence([str(tmp_path)])
    assert ev.requests.height == 2
    assert {s.format for s in ev.sources} == {"nginx-stream", "nginx-error"}
    assert not ev.problems


def test_docker_json_file_with_a_broken_line(tmp_path: Path) -> None:
    good = json.dumps(
        {"log": ISTIO_LINE + "\n", "stream": "stdout", "time": "2025-07-28T23:45:27Z"}
    )
    (tmp_path / "container.log").write_text(good + '\n{"log": "cut off\n' + good + "\n")
    ev = read_evidence([str(tmp_path)])
    assert ev.requests.height == 2
    assert any("1 other line: not evidence" in p for p in ev.problems)


def test_retried_attempts_without_a_request_id() -> None:
    """The older format may end with the upstream statuses: "502, 200" is one list, not a
    status "502," and a request id "200"."""
    line = (
        '52.190.7.1 - [52.190.7.1] - - [04/Dec/2026:10:01:11 +0000] "GET /api/v1/items/571 '
        'HTTP/1.1" 200 1809 "-" "axios/0.23.0" 476 0.001 [shop-api-80] 10.244.1.10:8080, '
        "10.244.100.13:8080 0, 1809 0.000, 0.001 502, 200"
    )
    frame, unparsed = nginx_access(line, "old")
    assert unparsed == 0
    assert frame.select("role", "status", "backend").rows() == [
        ("masked", 502, "10.244.1.10:8080"),
        ("request", 200, "10.244.100.13:8080"),
    ]
