"""The lab's ``/metrics`` (``svcdoctor.lab.metrics``): the exposition text, the series made
from the served objects, kube-proxy's programming latencies, and the request counts of a
real userspace proxy against the requests its clients made."""

from __future__ import annotations

import asyncio
import math
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from svcdoctor.lab import hop_objects, objects
from svcdoctor.lab.datapath import Backend, UserspaceDatapath
from svcdoctor.lab.kernel import read_conntrack
from svcdoctor.lab.load import Load
from svcdoctor.lab.logs import nginx_line
from svcdoctor.lab.metrics import (
    PROGRAMMING,
    PROGRAMMING_BUCKETS,
    Conntrack,
    Family,
    Kind,
    MetricsServer,
    MetricsTarget,
    Outcome,
    ProxyTally,
    RequestCounts,
    RequestFlavour,
    Sample,
    conntrack_families,
    exposition,
    histogram,
    kube_state,
    parse_conntrack_stat,
    programming_durations,
    record_status,
    request_families,
    scrape_config,
)
from svcdoctor.lab.scenarios import SCENARIOS
from svcdoctor.model import ContainerExit, EndpointChange, PodInfo
from svcdoctor.model.scenario import LoadSpec

PROMTOOL = shutil.which("promtool")
T0 = 1_780_000_000.0


def _samples(families: list[Family], name: str) -> list[Sample]:
    return [s for f in families for s in f.samples if s.name == name]


def _labels(sample: Sample) -> dict[str, str]:
    return dict(sample.labels)


# ---- the text format -------------------------------------------------------------------------


def test_exposition_writes_help_type_and_escaped_labels() -> None:
    family = Family(
        "x_requests",
        Kind.COUNTER,
        "Requests\nwith a line break",
        (
            Sample("x_requests", (("path", 'a"b\\c'), ("status", "200")), 3.0),
            Sample("x_requests", (), 0.5),
        ),
    )
    assert exposition([family]) == (
        "# HELP x_requests Requests\\nwith a line break\n"
        "# TYPE x_requests counter\n"
        'x_requests{path="a\\"b\\\\c",status="200"} 3\n'
        "x_requests 0.5\n"
    )


def test_histogram_buckets_are_cumulative_with_inf_sum_and_count() -> None:
    fam = histogram("h_seconds", "h", {(("node", "n0"),): [0.1, 0.3, 2.0, 400.0]}, (0.25, 1.0))
    rows = {(s.name, _labels(s).get("le")): s.value for s in fam.samples}
    assert rows == {
        ("h_seconds_bucket", "0.25"): 1,
        ("h_seconds_bucket", "1"): 2,
        ("h_seconds_bucket", "+Inf"): 4,
        ("h_seconds_sum", None): pytest.approx(402.4),
        ("h_seconds_count", None): 4,
    }


def test_kube_proxy_buckets_are_its_own() -> None:
    assert len(PROGRAMMING_BUCKETS) == 80
    assert PROGRAMMING_BUCKETS[:3] == (0.25, 0.5, 1.0)
    assert PROGRAMMING_BUCKETS[-1] == 300.0
    assert list(PROGRAMMING_BUCKETS) == sorted(set(PROGRAMMING_BUCKETS))


@pytest.mark.skipif(PROMTOOL is None, reason="needs promtool (Debian: prometheus)")
def test_promtool_parses_every_family() -> None:
    """``promtool check metrics`` parses the text; its only complaints are the real
    exporters' own names (ingress-nginx's counter has no ``_total``)."""
    counts = RequestCounts()
    counts.add(Outcome(200, "api-1"))
    counts.add(Outcome(502, None, "UF"))
    families = [
        *request_families({"ctrl-0": counts}, RequestFlavour),
        *kube_state(objects.pods(_view())),
        histogram(PROGRAMMING, "p", {(): [0.5, 1.2]}, PROGRAMMING_BUCKETS),
        *conntrack_families(Conntrack(10, 262144, {"insert_failed": 2, "drop": 1})),
    ]
    assert PROMTOOL is not None
    done = subprocess.run(
        [PROMTOOL, "check", "metrics"],
        input=exposition(families),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    problems = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    allowed = ('nginx_ingress_controller_requests counter metrics should have "_total" suffix',)
    assert [p for p in problems if p not in allowed] == []


# ---- requests --------------------------------------------------------------------------------


def test_request_families_name_the_service_status_and_pod() -> None:
    counts = RequestCounts()
    for _ in range(3):
        counts.add(Outcome(200, "api-7f6d5c4b3-00"))
    counts.add(Outcome(200, "api-7f6d5c4b3-01"))
    counts.add(Outcome(502, "api-7f6d5c4b3-01", "UF"))
    counts.add(Outcome(499, "api-7f6d5c4b3-00", "DC"))
    nginx, istio = request_families({"ingress-nginx-controller-abcde": counts}, RequestFlavour)
    by_status = {_labels(s)["status"]: s.value for s in nginx.samples}
    assert by_status == {"200": 4, "502": 1, "499": 1}  # nginx has no pod label: merged
    first = _labels(nginx.samples[0])
    assert first["namespace"] == "lab"
    assert first["service"] == "api"
    assert first["controller_pod"] == "ingress-nginx-controller-abcde"
    assert nginx.kind is Kind.COUNTER
    rows = {
        (_labels(s)["destination_pod"], _labels(s)["response_code"], _labels(s)["response_flags"])
        for s in istio.samples
    }
    assert rows == {
        ("api-7f6d5c4b3-00", "200", "-"),
        ("api-7f6d5c4b3-01", "200", "-"),
        ("api-7f6d5c4b3-01", "502", "UF"),
        ("api-7f6d5c4b3-00", "0", "DC"),  # Envoy's code when the client went away
    }
    assert {_labels(s)["reporter"] for s in istio.samples} == {"source"}
    assert sum(s.value for s in istio.samples) == counts.total == 6


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        ({"outcome": "ok", "status": 200, "backend": "p"}, Outcome(200, "p")),
        ({"outcome": "http_error", "status": 503, "backend": "p"}, Outcome(503, "p")),
        ({"outcome": "refused", "status": None, "backend": None}, Outcome(502, None, "UF")),
        ({"outcome": "reset", "status": None, "backend": None}, Outcome(502, None, "UC")),
        ({"outcome": "eof", "status": None, "backend": None}, Outcome(502, None, "UC")),
        ({"outcome": "timeout", "status": None, "backend": None}, Outcome(499, None, "DC")),
    ],
)
def test_a_load_record_counts_as_nginx_logs_it(
    record: dict[str, object], expected: Outcome
) -> None:
    row = {"ts": T0, "latency_ms": 1.0, "conn": "c", **record}
    assert record_status(row) == expected
    line = nginx_line(row, "10.0.0.1:8080", "x")
    assert f'"GET / HTTP/1.1" {expected.status} ' in line  # the same status as the access log


def _response(status: int, body: bytes) -> bytes:
    return f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body


def test_tally_counts_responses_across_chunks_and_unanswered_requests() -> None:
    counts = RequestCounts()
    tally = ProxyTally(counts, "api-0")
    request = b"GET / HTTP/1.1\r\nHost: svc\r\n\r\n"
    tally.from_client(request + request[:7])
    tally.from_client(request[7:] + request)  # three requests, one split across reads
    stream = _response(200, b"HTTP/1.1 500 in the body\r\n\r\n") + _response(503, b"no")
    for i in range(0, len(stream), 5):  # the responses arrive in small pieces
        tally.from_upstream(stream[i : i + 5])
    tally.close(upstream_first=True)  # the third request was never answered
    assert counts.counts == {
        Outcome(200, "api-0"): 1,
        Outcome(503, "api-0"): 1,
        Outcome(502, "api-0", "UC"): 1,
    }
    left = RequestCounts()
    gone = ProxyTally(left, "api-0")
    gone.from_client(request)
    gone.close(upstream_first=False)
    assert left.counts == {Outcome(499, None, "DC"): 1}


async def _app(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A backend answering 200 (or 503 for every fourth request) with Connection: close."""
    await reader.readuntil(b"\r\n\r\n")
    _app.served += 1  # type: ignore[attr-defined]
    status = 503 if _app.served % 4 == 0 else 200  # type: ignore[attr-defined]
    body = b"hello"
    writer.write(
        f"HTTP/1.1 {status} X\r\nX-Pod: good\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n".encode()
        + body
    )
    await writer.drain()
    writer.close()


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("connection", ["new", "keepalive"])
def test_the_userspace_proxy_counts_what_its_clients_saw(connection: str) -> None:
    """Real sockets: clients through one node's proxy to a live pod and a dead one; the
    proxy's counts by status equal the clients' records by outcome and status."""

    async def main() -> tuple[RequestCounts, list[dict[str, object]]]:
        _app.served = 0  # type: ignore[attr-defined]
        pod = await asyncio.start_server(_app, "127.0.0.1", 0)
        port = pod.sockets[0].getsockname()[1]
        dp = UserspaceDatapath(seed=5)
        await dp.start(1)
        dp.program(
            0, [Backend("good", "127.0.0.1", port), Backend("dead", "127.0.0.1", _closed_port())]
        )
        load = Load(LoadSpec(rate=200.0, clients=4, connection=connection, max_requests=300), dp, 1)
        stop = asyncio.Event()
        await load.run(stop, time.time() + 20)
        await asyncio.sleep(0.2)  # the proxy's side of the last connections ends
        await dp.close()
        pod.close()
        return dp.requests[0], load.records

    counts, records = asyncio.run(main())
    assert len(records) >= 300  # the bound is checked before each send: a few more
    seen: dict[int, int] = {}
    for r in records:
        status = record_status(r).status
        seen[status] = seen.get(status, 0) + 1
    counted: dict[int, int] = {}
    for o, n in counts.counts.items():
        counted[o.status] = counted.get(o.status, 0) + n
    assert counted == seen
    assert seen.get(502, 0) > 20  # the dead pod's share: refused connects
    assert seen.get(503, 0) > 10  # the live pod's own errors
    assert {o.pod for o in counts.counts if o.status != 502} == {"good"}
    assert {o.flags for o in counts.counts if o.status == 502} <= {"UF", "UC"}


# ---- kube-state-metrics ----------------------------------------------------------------------


def _pod(
    name: str, *, deleted: float | None = None, exit_code: int | None = None
) -> objects.ApiPod:
    exits = (ContainerExit("app", exit_code, "Error", T0 + 9),) if exit_code is not None else ()
    info = PodInfo(
        name,
        "lab",
        "10.233.1.10",
        None,
        deleted is None,
        T0 + 1,
        deleted,
        30,
        {"app": "api"},
        exits,
    )
    return objects.ApiPod(info, 8080, exit_code is None, "node-0")


def _view() -> objects.LabView:
    return objects.LabView(
        run="svcdabcdef",
        scenario=SCENARIOS["race"],
        datapath="kernel",
        started=T0,
        node_ips=("10.233.255.10",),
        pods=(
            _pod("api-7f6d5c4b3-00"),
            _pod("api-7f6d5c4b3-01", deleted=T0 + 5.7, exit_code=137),
        ),
        events=(),
        clients=1,
    )


def test_kube_state_reads_the_served_objects() -> None:
    view = _view()
    served = [*objects.pods(view), *objects.replica_sets(view), *hop_objects.load_pods(view)]
    fams = kube_state(served)
    created = {_labels(s)["pod"]: s.value for s in _samples(fams, "kube_pod_created")}
    assert created["api-7f6d5c4b3-00"] == T0 + 1
    assert "load-0" in created  # every pod, as kube-state-metrics exports them
    (deletion,) = _samples(fams, "kube_pod_deletion_timestamp")
    # metadata.deletionTimestamp: the deletion (whole seconds) plus the 30 s grace period
    assert _labels(deletion)["pod"] == "api-7f6d5c4b3-01"
    assert deletion.value == math.floor(T0 + 5.7) + 30
    ready = {
        (_labels(s)["pod"], _labels(s)["condition"]): s.value
        for s in _samples(fams, "kube_pod_status_ready")
    }
    assert ready[("api-7f6d5c4b3-00", "true")] == 1
    assert ready[("api-7f6d5c4b3-01", "true")] == 0
    assert ready[("api-7f6d5c4b3-01", "false")] == 1
    owners = {
        _labels(s)["pod"]: (_labels(s)["owner_kind"], _labels(s)["owner_name"])
        for s in _samples(fams, "kube_pod_owner")
    }
    assert owners["api-7f6d5c4b3-00"] == ("ReplicaSet", "api-7f6d5c4b3")
    rs = {
        _labels(s)["replicaset"]: (_labels(s)["owner_kind"], _labels(s)["owner_name"])
        for s in _samples(fams, "kube_replicaset_owner")
    }
    assert rs == {"api-7f6d5c4b3": ("Deployment", "api")}
    (ended,) = _samples(fams, "kube_pod_container_status_terminated_reason")
    assert _labels(ended) | {"uid": ""} == {
        "namespace": "lab",
        "pod": "api-7f6d5c4b3-01",
        "uid": "",
        "container": "app",
        "reason": "Error",
    }
    # the container ended and was not restarted: no lastState, as kubectl shows it
    assert _samples(fams, "kube_pod_container_status_last_terminated_reason") == []


# ---- kube-proxy ------------------------------------------------------------------------------


def _change(ts: float, pod: str, ready: bool, removed: bool = False) -> EndpointChange:
    return EndpointChange(ts, pod, pod, ready, ready, not ready, removed)


def test_programming_durations_observe_each_change_a_sync_applied() -> None:
    changes = [
        _change(T0, "a", True),  # {a}
        _change(T0, "b", True),  # {a, b}
        _change(T0 + 10, "a", False),  # {b}
        _change(T0 + 11, "c", True),  # {b, c}
        _change(T0 + 11.5, "c", True),  # nothing a proxy sees
        _change(T0 + 20, "b", False),  # {c}
    ]
    synced = [
        (T0 + 0.5, 0, ("a", "b")),
        (T0 + 0.7, 1, ("a", "b")),
        (T0 + 10.5, 0, ("b",)),  # node 0: each change in its own sync
        (T0 + 12.0, 0, ("b", "c")),
        (T0 + 13.0, 1, ("b", "c")),  # node 1: two changes in one sync (min-sync batching)
        (T0 + 21.5, 0, ("c",)),
    ]
    node0, node1 = programming_durations(changes, synced, 2)
    # the first sync applies the two start-up changes: one observation each
    assert node0 == pytest.approx([0.5, 0.5, 0.5, 1.0, 1.5])
    assert node1 == pytest.approx([0.7, 0.7, 3.0, 2.0])


# ---- node-exporter ---------------------------------------------------------------------------

HEADER = (
    "entries  clashres found new invalid ignore delete chainlength insert insert_failed drop "
    "early_drop icmp_error  expect_new expect_create expect_delete search_restart"
)
CPU0 = [3, 0, 1, 0, 10, 0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 4]
CPU1 = [3, 0, 2, 0, 1, 0, 0, 0, 0, 15, 0, 0, 0, 0, 0, 0, 0]
STAT = "\n".join([HEADER, *(" ".join(f"{v:08x}" for v in cpu) for cpu in (CPU0, CPU1))]) + "\n"


def test_conntrack_stat_sums_the_cpus() -> None:
    stats = parse_conntrack_stat(STAT)
    assert stats["insert_failed"] == 0x2 + 0xF
    assert stats["drop"] == 1
    assert stats["invalid"] == 11
    assert stats["search_restart"] == 4
    fams = conntrack_families(Conntrack(7, 65536, stats))
    values = {f.name: f.samples[0].value for f in fams}
    assert values["node_nf_conntrack_entries"] == 7
    assert values["node_nf_conntrack_entries_limit"] == 65536
    assert values["node_nf_conntrack_stat_insert_failed"] == 17
    assert all(f.kind is Kind.GAUGE for f in fams)


def test_conntrack_is_read_in_the_nodes_namespace() -> None:
    from svcdoctor.lab.kernel import available

    if available():
        pytest.skip(available() or "")
    ns = f"h2m{int(time.time() * 1000) % 10**8}"
    subprocess.run(["ip", "netns", "add", ns], check=True, timeout=30)
    try:
        ct = read_conntrack(ns)
        assert ct.entries == 0  # a fresh namespace tracks nothing yet
        assert ct.limit > 0
        assert "insert_failed" in ct.stats
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False, timeout=30)


# ---- serving ---------------------------------------------------------------------------------


def test_metrics_server_serves_the_text_format() -> None:
    import urllib.request

    async def main() -> tuple[str, str, int]:
        server = MetricsServer()
        calls = 0

        async def render() -> list[Family]:
            nonlocal calls
            calls += 1
            return [Family("x", Kind.GAUGE, "x", (Sample("x", (), float(calls)),))]

        target = await server.serve("node", render, "node-0")

        def get() -> tuple[str, str]:
            with urllib.request.urlopen(target.url, timeout=10) as r:
                return r.read().decode(), r.headers["Content-Type"]

        try:
            await asyncio.to_thread(get)
            text, kind = await asyncio.to_thread(get)
        finally:
            await server.close()
        return text, kind, calls

    text, kind, calls = asyncio.run(main())
    assert text.endswith("x 2\n")  # rendered per scrape
    assert kind.startswith("text/plain; version=0.0.4")
    assert calls == 2


@pytest.mark.skipif(PROMTOOL is None, reason="needs promtool (Debian: prometheus)")
def test_scrape_config_is_a_valid_prometheus_config(tmp_path: Path) -> None:
    targets = [
        MetricsTarget("kube-state-metrics", "http://127.0.0.1:4001/metrics"),
        MetricsTarget("node", "http://127.0.0.1:4002/metrics", "node-0"),
        MetricsTarget("node", "http://127.0.0.1:4003/metrics", "node-1"),
    ]
    text = scrape_config(targets, 1.0)
    path = tmp_path / "prometheus.yml"
    path.write_text(text)
    assert PROMTOOL is not None
    done = subprocess.run(
        [PROMTOOL, "check", "config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "scrape_interval: 1s" in text
    assert "labels: {node: 'node-1'}" in text
