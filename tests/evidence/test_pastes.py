"""The shapes people paste (issue 29, Deliver 5): each fixture is in the real shape, its
source named in tests/fixtures/evidence/paste-SOURCES.md."""

from __future__ import annotations

import json
from io import BytesIO
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from svcdoctor.cli import cli
from svcdoctor.evidence import EvidenceError, detect, read_evidence
from svcdoctor.evidence.stdin import read_with_stdin
from svcdoctor.evidence.times import rfc3339
from svcdoctor.model import Evidence

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "evidence"


def paste(name: str) -> str:
    return str(FIXTURES / f"paste-{name}")


def at(text: str) -> float:
    value = rfc3339(text)
    assert value is not None
    return value


def formats(ev: Evidence) -> dict[str, int]:
    return {s.format: s.rows for s in ev.sources}


def rows(ev: Evidence, *columns: str) -> list[tuple[object, ...]]:
    return ev.requests.sort("ts").select(*columns).rows()


def stdin(text: str) -> Evidence:
    return read_with_stdin(["-"], BytesIO(text.encode()))


# ---------------------------------------------------------------- conntrack -S, kernel


def test_conntrack_s_older_layout_one_key_a_line() -> None:
    assert detect(Path(paste("conntrack-S-old.txt")).read_bytes()) == "conntrack-stats"
    ev = read_evidence([paste("conntrack-S-old.txt")])
    counters = [(e.kind, e.count, e.ts) for e in ev.kernel]
    first, second = at("2026-12-05T10:00:00Z"), at("2026-12-05T10:05:00Z")
    assert counters == [
        ("insert_failed", 217, first),
        ("drop", 4, first),
        ("insert_failed", 5329, second),
        ("drop", 97, second),
    ]
    assert "2 snapshots" in ev.sources[0].note


def test_conntrack_s_older_layout_without_dates_is_one_snapshot(tmp_path: Path) -> None:
    text = "".join(
        line for line in Path(paste("conntrack-S-old.txt")).read_text().splitlines(True)[1:18]
    )
    (tmp_path / "ct.txt").write_text(text)
    ev = read_evidence([str(tmp_path / "ct.txt")])
    assert [(e.kind, e.count, e.ts) for e in ev.kernel] == [
        ("insert_failed", 217, None),
        ("drop", 4, None),
    ]


def test_doubled_nf_conntrack_prefix_without_brackets() -> None:
    ev = read_evidence([paste("conntrack-doubled.txt")])
    assert [e.kind for e in ev.kernel] == ["conntrack_full"] * 3
    assert formats(ev) == {"kernel": 3}
    assert ev.sources[0].note == "no times: the lines carry none"


def test_doubled_prefix_dated_by_its_collector_prefix(tmp_path: Path) -> None:
    (tmp_path / "k.log").write_text(
        "2026-12-02T10:00:03.5Z nf_conntrack: nf_conntrack: table full, dropping packet\n"
    )
    ev = read_evidence([str(tmp_path / "k.log")])
    assert [(e.kind, e.ts, e.aligned) for e in ev.kernel] == [
        ("conntrack_full", at("2026-12-02T10:00:03.5Z"), True)
    ]


# ---------------------------------------------------------------- nginx


def test_nginx_main_lines_take_the_error_lines_that_describe_them() -> None:
    """ingress-nginx#12285: two 502s, each with its error line: two failures, not four; the
    backend comes from the error line (the "main" format names none)."""
    ev = read_evidence([paste("nginx-main.log")])
    assert rows(ev, "outcome", "status", "backend", "role") == [
        ("eof", 502, "10.244.3.84:5601", "request"),
        ("eof", 502, "10.244.3.84:5601", "request"),
    ]
    assert not ev.problems


def test_nginx_combined_and_spacing_variants() -> None:
    ev = read_evidence([paste("nginx-combined-spacing.log")])
    assert rows(ev, "status", "outcome", "client") == [
        (200, "ok", "192.168.58.11"),
        (502, "http_error", "192.168.58.11"),
        (504, "timeout", "10.1.2.3"),  # the first X-Forwarded-For address
    ]
    assert ev.requests.get_column("ts").to_list()[0] == at("2024-11-03T06:09:31Z")
    assert not ev.problems


def test_ingress_nginx_stream_lines_spaced_and_not() -> None:
    ev = read_evidence([paste("ingress-nginx-stream.log")])
    assert formats(ev) == {"nginx-stream": 3, "routing": 1}  # "Backend successfully reloaded."
    got = rows(ev, "status", "outcome", "client", "detail")
    assert got[0] == (200, "ok", None, None)  # 2018, unspaced: no client, no session time
    assert got[1] == (200, "ok", "10.0.0.9", None)
    assert got[2][:3] == (502, "http_error", "fd69:1:10:f980::a13:26df")
    assert "could not be reached" in str(got[2][3])
    spaced = ev.requests.sort("ts").row(1, named=True)
    assert spaced["ts"] == pytest.approx(at("2019-09-06T13:18:34Z") - 0.473)
    assert spaced["latency_ms"] == pytest.approx(473.0)
    assert any("1 klog line: not evidence" in p for p in ev.problems)


# ---------------------------------------------------------------- Traefik


def test_traefik_clf_v1_and_v2() -> None:
    ev = read_evidence([paste("traefik-clf.log")])
    assert formats(ev) == {"traefik": 3}
    assert rows(ev, "status", "backend", "upstream", "latency_ms") == [
        (200, "172.17.0.3:80", "Host-nginx1-test-tld-3", 0.0),
        (200, "172.17.0.4:80", "Host-nginx2-test-tld-2", 0.0),
        (502, "10.42.1.7:8080", "websecure-api@kubernetescrd", 3.0),
    ]
    assert ev.requests.get_column("ts").min() == at("2017-12-13T19:49:27Z")
    assert next(s for s in ev.sources).resolution == 1.0


def test_traefik_json_pretty_printed_v1_and_v2() -> None:
    ev = read_evidence([paste("traefik-pretty.json")])
    assert formats(ev) == {"traefik-json": 2}
    assert rows(ev, "status", "outcome", "backend", "client", "conn", "latency_ms") == [
        (502, "http_error", "172.17.0.10:3000", None, None, None),
        (499, "aborted", "33.33.33.33", "92.243.1.2", "92.243.1.2:55842", 5.80017),
    ]


def test_traefik_json_one_record_a_line(tmp_path: Path) -> None:
    docs = Path(paste("traefik-pretty.json")).read_text().replace("}\n{", "}\n\n{")
    records = [json.loads(d) for d in docs.split("\n\n")]
    (tmp_path / "access.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    ev = read_evidence([str(tmp_path / "access.jsonl")])
    assert formats(ev) == {"traefik-json": 2}


# ---------------------------------------------------------------- prefixes


def test_docker_compose_prefix_with_and_without_timestamps() -> None:
    ev = read_evidence([paste("compose.log")])
    assert formats(ev) == {"traefik": 2}
    assert rows(ev, "status", "backend") == [(502, "172.26.0.3:80"), (200, "172.26.0.3:80")]
    assert any("1 other line: not evidence" in p for p in ev.problems)  # Traefik's own log


def test_stern_prefix_with_colours_and_timestamps() -> None:
    ev = read_evidence([paste("stern.log")])
    assert rows(ev, "outcome", "status", "backend", "upstream") == [
        ("eof", 502, "10.244.2.17:8080", "api-token-80")
    ]
    error = next(s for s in ev.sources if s.format == "nginx-error")
    assert "1 of 1 failure lines describe requests" in error.note


def test_stern_names_the_pod_of_a_server_side_log(tmp_path: Path) -> None:
    """Linkerd's access log is the answering pod's own: under stern the pod is the first
    field, as ``kubectl logs --prefix`` would name it (the Linkerd line of the docs,
    https://linkerd.io/2-edge/features/access-logging/)."""
    line = (
        "webapp-7d5c9b8f6-x2x4k linkerd-proxy 10.42.0.63:51160 "
        "traffic.booksapp.serviceaccount.identity.linkerd.cluster.local - "
        '[2022-08-23T20:28:20.071809491Z] "GET http://webapp:7000/ HTTP/2.0" 200\n'
    )
    (tmp_path / "stern.log").write_text(line)
    ev = read_evidence([str(tmp_path / "stern.log")])
    assert rows(ev, "backend", "upstream") == [("webapp-7d5c9b8f6-x2x4k", "webapp:7000")]


def test_cri_partial_lines_are_joined() -> None:
    ev = read_evidence([paste("cri-partial.log")])
    assert rows(ev, "outcome", "backend", "upstream") == [
        ("eof", "10.244.1.9:8080", "shop-api-8080")
    ]
    assert not ev.problems


def test_log_shipper_wrappers_and_uh_as_no_ready_endpoints() -> None:
    ev = read_evidence([paste("shippers.jsonl")])
    assert formats(ev) == {"envoy": 3}
    got = rows(ev, "outcome", "status", "detail")
    assert got[0] == ("http_error", 503, "UH; no_healthy_upstream")
    assert got[1] == ("ok", 200, None)


def test_uh_in_envoys_default_format_is_named_no_ready_endpoints(tmp_path: Path) -> None:
    line = (
        '[2021-05-10T00:37:31.782Z] "GET / HTTP/1.1" 503 UH 0 19 0 - "-" "curl/7.64.1" '
        '"a0fbb5a1-6680-4274-a213-2fc3184a0c71" "backend:8443" "-"\n'
    )
    (tmp_path / "envoy.log").write_text(line)
    ev = read_evidence([str(tmp_path / "envoy.log")])
    assert rows(ev, "outcome", "detail") == [
        ("http_error", "UH; no_healthy_upstream: no ready endpoints")
    ]


@pytest.mark.parametrize(
    "name", ["gcloud-read.json", "gcloud-value.txt", "gcloud-yaml.txt", "gcloud-summary.txt"]
)
def test_google_cloud_logging_exports(name: str) -> None:
    ev = read_evidence([paste(name)])
    assert rows(ev, "status", "client") == [(502, "192.168.58.11"), (200, "192.168.58.11")]
    assert not ev.problems


@pytest.mark.parametrize(
    "name", ["aws-logs-tail.txt", "aws-filter-log-events.json", "aws-logs-tail-json.txt"]
)
def test_cloudwatch_logs(name: str) -> None:
    ev = read_evidence([paste(name)])
    assert set(formats(ev)) <= {"envoy", "envoy-json"}
    assert sum(formats(ev).values()) == 2
    assert not ev.problems
    assert rows(ev, "outcome", "backend") == [
        ("eof", "172.18.0.11:8080"),
        ("ok", "172.18.0.11:8080"),
    ]


def test_envoy_debug_dump_is_counted_and_named() -> None:
    ev = read_evidence([paste("envoy-debug.log")])
    assert rows(ev, "outcome", "backend") == [("eof", "10.28.1.4:8443")]
    assert any("3 Envoy debug lines: not evidence" in p for p in ev.problems)


# ---------------------------------------------------------------- one pasted stream


def test_one_paste_of_many_shapes_is_split_by_line_shape() -> None:
    """A paste that mixes an nginx main log, Traefik CLF, a pretty-printed Traefik record,
    Envoy lines, stream lines, kernel lines and a panic: each line to the reader of its
    shape, the rest counted by name."""
    parts = [
        "nginx-main.log",
        "traefik-clf.log",
        "traefik-pretty.json",
        "aws-logs-tail.txt",
        "ingress-nginx-stream.log",
        "conntrack-doubled.txt",
        "nothing-readable.txt",
    ]
    text = "\n".join(Path(paste(p)).read_text() for p in parts)
    ev = stdin(text)
    assert formats(ev) == {
        "nginx-error": 2,
        "nginx-access": 2,
        "traefik": 3,
        "traefik-json": 2,
        "envoy": 2,
        "nginx-stream": 3,
        "kernel": 3,
        "routing": 1,  # the controller's "Backend successfully reloaded."
    }
    assert all(s.path == "-" for s in ev.sources)
    assert not any("stdin" in s.note for s in ev.sources)  # the temporary file is never named
    (problem,) = [p for p in ev.problems if "not evidence" in p]
    assert problem.startswith("-: ")
    for named in ("1 klog line", "Go panic lines", "1 curl error line", "other lines"):
        assert named in problem


def test_a_paste_with_nothing_readable_says_what_it_saw() -> None:
    with pytest.raises(EvidenceError) as caught:
        stdin(Path(paste("nothing-readable.txt")).read_text())
    said = str(caught.value)
    assert said.startswith("nothing readable on stdin: 10 lines: 0 request lines, 0 kernel lines")
    assert "4 Go panic lines" in said
    assert "1 curl error line" in said
    assert "collect next:" in said
    assert "svcdoctor collect" in said
    assert "svcdoctor-stdin" not in said  # the temporary file is never named


def test_kubectl_tables_and_prefixed_debug_lines_are_named() -> None:
    """``kubectl get pods``/``describe`` tables and an Envoy debug line behind kail's
    ``ns/pod[container]:`` prefix (knative-extensions/net-contour#237) are named, not
    "other"."""
    text = (
        "NAME                   READY   STATUS        RESTARTS   AGE\n"
        "api-7c9d-x2x4k         1/1     Terminating   0          3m\n"
        "  Warning  Unhealthy  12s (x3 over 32s)  kubelet  Readiness probe failed: "
        'Get "http://10.244.1.7:8080/healthz": dial tcp 10.244.1.7:8080: connect: '
        "connection refused\n"
        "contour-external/envoy-54hfm[envoy]: [2020-09-08 16:08:59.159][11][debug][http] "
        "[source/common/http/conn_manager_impl.cc:808] [C6931][S1051897512304542336] "
        "request headers complete (end_stream=true):\n"
    )
    with pytest.raises(EvidenceError) as caught:
        stdin(text)
    assert "1 Envoy debug line, 3 kubectl table lines;" in str(caught.value)


def test_diagnose_dash_on_nothing_readable_exits_2_with_one_line() -> None:
    text = Path(paste("nothing-readable.txt")).read_text()
    done = CliRunner().invoke(cli, ["diagnose", "-"], input=text)
    assert done.exit_code == 2
    assert "Traceback" not in done.output
    lines = [ln for ln in done.output.splitlines() if ln.strip()]
    assert len(lines) == 1, done.output
    assert "Go panic" in lines[0]


def test_other_files_beside_an_unreadable_paste_keep_their_message(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(EvidenceError) as caught:
        read_with_stdin([str(tmp_path / "notes.txt"), "-"], BytesIO(b"panic: boom\n"))
    said = str(caught.value)
    assert "notes.txt" in said
    assert "; stdin: 1 line: " in said
    assert "svcdoctor-stdin" not in said


def test_requests_frame_keeps_its_schema() -> None:
    ev = read_evidence([paste("traefik-clf.log"), paste("ingress-nginx-stream.log")])
    assert ev.requests.get_column("ts").dtype == pl.Float64
    assert ev.requests.get_column("ts").is_sorted()
