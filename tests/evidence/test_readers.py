"""Every evidence format, read from hand-written files in the real formats."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

from svcdoctor.evidence import EvidenceError, detect, read_evidence
from svcdoctor.evidence.times import rfc3339
from svcdoctor.model import EventKind

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "evidence"
T10 = rfc3339("2026-12-02T10:00:00Z")
assert T10 is not None


def one(name: str, offsets: dict[str, float] | None = None):  # type: ignore[no-untyped-def]
    return read_evidence([str(FIXTURES / name)], offsets)


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("ingress-nginx-access.log", "nginx-access"),
        ("ingress-nginx-error.log", "nginx-error"),
        ("envoy.log", "envoy"),
        ("istio-proxy.log", "envoy"),
        ("envoy.jsonl", "envoy-json"),
        ("dmesg.txt", "kernel"),
        ("dmesg-T.txt", "kernel"),
        ("journal-k.txt", "kernel"),
        ("conntrack-S.txt", "conntrack-stats"),
        ("events-v1.json", "json"),
        ("endpointslices-watch.json", "json"),
        ("requests-bad-rows.csv", "csv"),
    ],
)
def test_formats_are_detected_by_content(name: str, fmt: str) -> None:
    assert detect((FIXTURES / name).read_bytes()) == fmt


def test_nginx_access_log_keeps_retried_attempts_as_masked_rows() -> None:
    ev = one("ingress-nginx-access.log")
    rows = ev.requests.sort("client", "role").to_dicts()  # one client per line
    requests = [r for r in rows if r["role"] == "request"]
    masked = [r for r in rows if r["role"] == "masked"]
    assert len(requests) == 5
    assert [r["status"] for r in requests] == [200, 200, 502, 504, 200]
    assert [r["outcome"] for r in requests] == ["ok", "ok", "http_error", "timeout", "ok"]
    # 502 then 200: the client saw success, the first upstream failed
    assert {(r["backend"], r["status"]) for r in masked} == {
        ("10.244.1.7:8080", 502),
        ("10.244.2.9:8080", 502),
        ("10.244.1.7:8080", 502),
    }
    assert len(masked) == 4  # 1 + 2 + 1 (the " : " internal-redirect separator)
    assert requests[0]["ts"] == pytest.approx(T10 + 1 - 0.004)  # logged at completion
    assert requests[0]["client"] == "10.0.0.5"
    assert requests[2]["backend"] == "10.244.3.4:8080"  # the last attempt answered the client
    # read line by line: the junk line is counted by its shape, not a failed access line
    assert any("1 other line: not evidence" in p for p in ev.problems)


def test_nginx_error_log_gives_failure_kinds_per_upstream() -> None:
    ev = one("ingress-nginx-error.log")
    rows = ev.requests.sort("ts").select("outcome", "backend", "role", "client").rows()
    assert rows == [
        ("refused", "10.244.1.7:8080", "error_log", "10.0.0.6"),
        ("eof", "10.244.2.9:8080", "error_log", "10.0.0.7"),
        ("reset", "10.244.3.4:8080", "error_log", "10.0.0.7"),
        ("timeout", "10.244.2.9:8080", "error_log", "10.0.0.8"),
    ]


def test_envoy_response_flags() -> None:
    ev = one("envoy.log")
    rows = ev.requests.sort("ts").select("outcome", "status", "backend", "latency_ms").rows()
    assert rows == [
        ("ok", 200, "10.244.1.7:8080", 4.0),
        ("refused", 503, "10.244.1.7:8080", 1.0),
        ("eof", 503, "10.244.2.9:8080", 12.0),
        ("refused", 503, "10.244.2.9:8080", 3.0),
        ("http_error", 503, None, 0.0),
        ("timeout", 504, "10.244.3.4:8080", 15000.0),
    ]
    assert ev.requests.get_column("client").to_list()[:2] == ["10.0.0.5", "10.0.0.6"]


def test_istio_format_gives_the_upstream_connection() -> None:
    """The sidecar's pooled connection to the pod (upstream local address → upstream host)
    is the reused one, not the app's connection to its sidecar (issue 29)."""
    ev = one("istio-proxy.log")
    rows = ev.requests.sort("ts").select("outcome", "backend", "client", "conn").rows()
    assert rows == [
        ("ok", "10.244.1.27:80", "10.244.1.23", "10.244.1.23:37652→10.244.1.27:80"),
        ("eof", "10.244.2.31:80", "10.244.1.23", "10.244.1.23:37660→10.244.2.31:80"),
    ]


def test_envoy_json() -> None:
    ev = one("envoy.jsonl")
    assert ev.requests.sort("ts").select("outcome", "backend", "conn").rows() == [
        ("ok", "10.244.1.7:8080", "10.0.0.5:51234"),
        # UF: no upstream connection was made, whatever connection the client came on
        ("refused", "10.244.1.7:8080", None),
    ]


def test_kernel_logs_in_three_styles() -> None:
    boot = one("dmesg.txt")
    assert sum(e.count for e in boot.kernel) == 2 + 37
    assert not any(e.aligned for e in boot.kernel)
    shifted = one("dmesg.txt", {"dmesg.txt": T10 - 9000})
    assert all(e.aligned for e in shifted.kernel)
    assert min(e.ts for e in shifted.kernel if e.ts) == pytest.approx(T10 + 1.000123)
    wall = one("dmesg-T.txt")
    assert [(e.ts, e.netns) for e in wall.kernel] == [(T10 + 3, None), (T10 + 3, "4026532331")]
    journal = one("journal-k.txt")
    assert [(e.ts, e.count, e.node) for e in journal.kernel] == [
        (T10 + 3, 1, "node-7"),
        (T10 + 4, 12, "node-7"),
    ]


def test_conntrack_counters_are_summed_over_cpus() -> None:
    ev = one("conntrack-S.txt")
    assert {e.kind: e.count for e in ev.kernel} == {"insert_failed": 22, "drop": 22}


def test_core_v1_events_with_one_second_resolution() -> None:
    ev = one("events-v1.json")
    kinds = [(e.kind, e.pod, e.ts - T10, e.resolution) for e in ev.events]
    assert kinds == [
        (EventKind.CREATE, "api-5c4b3a291-zz9k2", -2.0, 1.0),
        (EventKind.DELETE, "api-7d9f8b6c5-x2x4q", 1.0, 1.0),  # SuccessfulDelete names the pod
        (EventKind.DELETE, "api-7d9f8b6c5-x2x4q", 2.0, 1.0),  # Killing
        (EventKind.PRESTOP_FAILED, "api-7d9f8b6c5-x2x4q", 12.0, 1.0),  # lastTimestamp
    ]


def test_events_k8s_io_v1_use_micro_time_and_series() -> None:
    ev = one("events-eventsv1.json")
    assert [(e.kind, round(e.ts - T10, 6), e.resolution) for e in ev.events] == [
        (EventKind.DELETE, 2.123456, 0.0),
        (EventKind.UNHEALTHY, 9.5, 0.0),
    ]


def test_pods_give_ips_deletion_moment_and_exit_codes() -> None:
    ev = one("pods.json")
    pods = {p.name: p for p in ev.pods}
    gone = pods["api-7d9f8b6c5-x2x4q"]
    assert (gone.ip, gone.node, gone.ready, gone.grace_seconds) == (
        "10.244.1.7",
        "node-3",
        False,
        30,
    )
    assert [(x.exit_code, x.reason) for x in gone.exits] == [(137, "Error")]
    deletion = [e for e in ev.events if e.kind is EventKind.DELETE]
    assert [(e.pod, e.ts - T10) for e in deletion] == [("api-7d9f8b6c5-x2x4q", 2.0)]
    assert pods["api-7d9f8b6c5-q8w7e"].exits[0].exit_code == 1  # lastState


def test_endpointslice_watch_stream_gives_condition_changes_and_removal() -> None:
    ev = one("endpointslices-watch.json")
    changes = [
        (c.address, c.ready, c.terminating, c.removed, c.ts - T10 if c.ts else None)
        for c in ev.endpoints
    ]
    assert changes == [
        ("10.244.1.7", True, False, False, -60.0),
        ("10.244.2.9", True, False, False, -60.0),
        ("10.244.1.7", False, True, False, 1.5),
        ("10.244.1.7", False, True, True, 33.0),
    ]


def test_canonical_csv_rejects_bad_rows_by_name_and_line() -> None:
    ev = one("requests-bad-rows.csv")
    assert ev.requests.height == 3
    assert ev.requests.get_column("ts").to_list() == pytest.approx(
        [T10 + 0.1, T10 + 0.2, T10 + 0.3]
    )
    assert ev.requests.get_column("outcome").to_list() == ["ok", "reset", "ok"]
    problems = " | ".join(ev.problems)
    assert "1 rows skipped: ts is not RFC 3339 or Unix time (first at line 5: 'yesterday')" in (
        problems
    )
    assert "(first at line 6: 'exploded')" in problems


def test_a_directory_mixes_formats_and_names_what_it_skipped(tmp_path: Path) -> None:
    for name in ("ingress-nginx-access.log", "events-v1.json", "pods.json", "dmesg-T.txt"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    (tmp_path / "notes.txt").write_text("we rolled out at 10:00\n")
    (tmp_path / "core.bin").write_bytes(b"\x7fELF\0\0\0\x01")
    ev = read_evidence([str(tmp_path)])
    formats = {Path(s.path).name: s.format for s in ev.sources}
    assert formats == {
        "ingress-nginx-access.log": "nginx-access",
        "events-v1.json": "kubectl-json",
        "pods.json": "kubectl-json",
        "dmesg-T.txt": "kernel",
    }
    assert any("notes.txt: not a recognised evidence format" in p for p in ev.problems)
    assert any("core.bin: not a recognised evidence format (binary)" in p for p in ev.problems)
    assert ev.requests.filter(pl.col("role") == "request").height == 5


def test_clock_offset_by_format_name() -> None:
    plain = one("envoy.log")
    moved = one("envoy.log", {"envoy": -3.5})
    assert (moved.requests.get_column("ts") - plain.requests.get_column("ts")).to_list() == (
        pytest.approx([-3.5] * plain.requests.height)
    )


def test_nothing_usable_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(EvidenceError, match=r"notes.txt: not a recognised evidence format"):
        read_evidence([str(tmp_path), str(tmp_path / "missing.log")])


def test_a_runs_ground_truth_is_named_not_skipped(tmp_path: Path) -> None:
    """lab.json and simulate.json sit beside the evidence they describe: listed as the
    run's ground truth, never read as evidence, never reported as a skipped input."""
    shutil.copy(FIXTURES / "events-v1.json", tmp_path / "events.json")
    (tmp_path / "lab.json").write_text('{"scenario": "race", "ground_truth": {"bad_pods": []}}')
    (tmp_path / "other.json").write_text('{"hello": 1}')
    evidence = read_evidence([str(tmp_path)])
    kinds = {Path(s.path).name: s.format for s in evidence.sources}
    assert kinds["lab.json"] == "ground-truth"
    assert [p for p in evidence.problems if "lab.json" in p] == []
    assert any("other.json: JSON without Kubernetes objects" in p for p in evidence.problems)


def test_suppressed_messages_count_only_beside_table_full_lines(tmp_path: Path) -> None:
    """net_ratelimit counts every rate-limited network message: it is conntrack's only in a
    log that says the table is full."""
    quiet = tmp_path / "dmesg.txt"
    quiet.write_text("[  10.000000] net_ratelimit: 40 callbacks suppressed\n")
    (tmp_path / "requests.csv").write_text("ts,outcome\n1767225600,ok\n")
    assert read_evidence([str(tmp_path)]).kernel == ()
    quiet.write_text(
        "[  10.000000] nf_conntrack: nf_conntrack: table full, dropping packet\n"
        "[  10.500000] net_ratelimit: 40 callbacks suppressed\n"
    )
    assert sum(e.count for e in read_evidence([str(tmp_path)]).kernel) == 41


def test_istio_inbound_clusters_are_told_apart_by_authority() -> None:
    """Istio's inbound clusters name no Service (``inbound|9080||``): one sidecar log of
    several Services must not become one upstream (line shape: istio/istio#45802)."""
    from svcdoctor.evidence.proxylogs import envoy_text

    line = (
        '[2026-12-02T10:00:00.000Z] "GET /x HTTP/1.1" 200 - via_upstream - "-" 0 10 1 1 "-" '
        '"curl" "id" "{host}" "10.244.1.7:9080" inbound|9080|| 127.0.0.6:41234 '
        "10.244.1.7:9080 10.244.2.3:51234 outbound_.9080_._.{host}.default.svc.cluster.local "
        "default"
    )
    text = "\n".join(line.format(host=h) for h in ("details:9080", "reviews:9080", "-"))
    frame, unparsed = envoy_text(text, "istio.log")
    assert unparsed == 0
    assert frame.get_column("upstream").cast(str).to_list() == [
        "inbound|9080||details",
        "inbound|9080||reviews",
        "inbound|9080||",
    ]
