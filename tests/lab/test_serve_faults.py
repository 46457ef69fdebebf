"""The lab API server's fault mode (``lab serve --api-fault``): each fault through raw HTTP
and through the real kubectl v1.35, on an in-process server (no lab, no privileges)."""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from svcdoctor.lab.apiserver import Fault, FaultError, FaultKind, ObjectStore, parse_fault
from svcdoctor.lab.apiserver.faults import unique
from tests.kubectl import kubectl_fixture, run_kubectl  # noqa: F401 (the kubectl fixture)
from tests.lab.test_apiserver import TOKEN, Running, lab_store, pod


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    """Start a server with the given fault specs; stopped after the test."""
    started: list[Running] = []

    def start(*specs: str, store: ObjectStore | None = None) -> Running:
        faults = [parse_fault(s) for s in specs]
        started.append(Running(store or lab_store(), tmp_path, faults=faults))
        return started[-1]

    yield start
    for running in started:
        running.stop()


# ---- the spec ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("429:0.3", Fault(FaultKind.TOO_MANY_REQUESTS, 0.3)),
        ("500:1", Fault(FaultKind.INTERNAL_ERROR, 1.0)),
        (" 503:0.5 ", Fault(FaultKind.UNAVAILABLE, 0.5)),
        ("504:0.1", Fault(FaultKind.TIMEOUT, 0.1)),
        ("slow-body:1", Fault(FaultKind.SLOW_BODY, 1.0)),
        ("Cut-Watch:2.5", Fault(FaultKind.CUT_WATCH, 2.5)),
        ("gone-watch", Fault(FaultKind.GONE_WATCH, 0.0)),
        ("gone-watch:3", Fault(FaultKind.GONE_WATCH, 3.0)),
        ("loss-after:30", Fault(FaultKind.LOSS_AFTER, 30.0)),
    ],
)
def test_specs_parse(text: str, fault: Fault) -> None:
    assert parse_fault(text) == fault
    assert parse_fault(fault.spec) == fault


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("418:0.5", "unknown fault '418'; one of 429, 500, 503, 504, slow-body"),
        ("429", "429 takes a share of requests in (0, 1], such as 429:0.3"),
        ("429:1.5", "429 takes a share of requests in (0, 1]"),
        ("500:0", "500 takes a share of requests in (0, 1]"),
        ("503:nan", "503 takes a share"),
        ("slow-body:0", "slow-body takes a rate in bytes per second, more than 0"),
        ("cut-watch:inf", "cut-watch takes seconds, more than 0"),
        ("gone-watch:1.5", "gone-watch takes a whole number of resourceVersions"),
        ("loss-after:", "loss-after takes seconds, more than 0"),
    ],
)
def test_bad_specs_are_one_line(text: str, message: str) -> None:
    with pytest.raises(FaultError) as caught:
        parse_fault(text)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_each_kind_once() -> None:
    with pytest.raises(FaultError, match="429: given twice"):
        unique([parse_fault("429:0.5"), parse_fault("500:1"), parse_fault("429:1")])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--api-fault", "429:2"), "'429:2': 429 takes a share of requests in (0, 1]"),
        (("--api-fault", "drop:1"), "unknown fault 'drop'"),
        (("--api-fault", "429:1", "--api-fault", "429:0.5"), "429: given twice"),
    ],
)
def test_command_refuses_bad_specs(args: tuple[str, ...], message: str) -> None:
    from click.testing import CliRunner

    from svcdoctor.cli import cli

    result = CliRunner().invoke(cli, ["lab", "serve", "--datapath", "userspace", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


# ---- status faults -------------------------------------------------------------------------
def test_429_as_priority_and_fairness_answers(serve: Any) -> None:
    """429:0.5 refuses the 1st, 3rd … request after authentication, with Retry-After: 1 and
    APF's plain text; health checks are exempt and not counted."""
    lab = serve("429:0.5")
    assert lab.request("/api/v1/pods", token="wrong").status == 401  # not counted
    first = lab.request("/api/v1/pods")
    assert first.status == 429
    assert first.getheader("Retry-After") == "1"
    assert first.getheader("Content-Type", "").startswith("text/plain")
    assert first.read() == b"Too many requests, please try again later.\n"
    assert lab.request("/healthz").status == 200
    assert [lab.request("/api/v1/pods").status for _ in range(4)] == [200, 429, 200, 429]


@pytest.mark.parametrize(
    ("spec", "code", "reason"),
    [
        ("500:1", 500, "InternalError"),
        ("503:1", 503, "ServiceUnavailable"),
        ("504:1", 504, "Timeout"),
    ],
)
def test_5xx_are_status_objects(serve: Any, spec: str, code: int, reason: str) -> None:
    lab = serve(spec)
    for path in ("/api/v1/pods", "/api/v1/namespaces/lab/pods/web-0", "/version"):
        status, body = lab.get(path)
        assert (status, body["kind"], body["reason"], body["code"]) == (
            code,
            "Status",
            reason,
            code,
        )
    response = lab.request("/api/v1/namespaces/lab/configmaps", method="POST")  # writes too
    assert response.status == code


def test_kubectl_retries_429_and_reports_5xx(kubectl: Path, serve: Any) -> None:
    """kubectl honours Retry-After: every other request refused, it still succeeds (after a
    second per refusal); a 500 without Retry-After is not retried."""
    lab = serve("429:0.5")
    started = time.monotonic()
    done = run_kubectl(kubectl, lab.kubeconfig, ["get", "pods", "-o", "name"], timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [f"pod/{n}" for n in ("load-0", "web-0", "web-1", "web-2")]
    assert time.monotonic() - started >= 1.0
    failing = serve("500:1")
    done = run_kubectl(kubectl, failing.kubeconfig, ["get", "pods"])
    assert done.returncode == 1
    assert "(InternalError)" in done.stderr


# ---- slow bodies ---------------------------------------------------------------------------
def test_slow_body_trickles_after_prompt_headers(kubectl: Path, serve: Any) -> None:
    lab = serve("slow-body:4000")
    started = time.monotonic()
    response = lab.request("/api/v1/pods")
    headers_after = time.monotonic() - started
    assert response.status == 200
    assert response.getheader("Transfer-Encoding") == "chunked"
    body = response.read()
    assert len(json.loads(body)["items"]) == 4
    assert headers_after < 0.5
    assert time.monotonic() - started >= len(body) / 4000 * 0.8
    # kubectl's --request-timeout bounds the body too: it gives up
    slow = serve("slow-body:50")
    done = run_kubectl(
        kubectl, slow.kubeconfig, ["get", "pods", "--request-timeout=1s"], timeout=60
    )
    assert done.returncode == 1
    assert "Client.Timeout" in done.stderr or "deadline exceeded" in done.stderr, done.stderr


# ---- watches -------------------------------------------------------------------------------
def test_cut_watch_ends_the_stream_without_its_last_chunk(kubectl: Path, serve: Any) -> None:
    lab = serve("cut-watch:0.5")
    started = time.monotonic()
    response = lab.request("/api/v1/pods?watch=1&resourceVersion=0")
    assert response.status == 200
    with pytest.raises(http.client.IncompleteRead):
        response.read()  # the initial events, then the cut: no terminating chunk
    assert 0.4 <= time.monotonic() - started < 3
    # kubectl get -w ends when its watch is cut (it does not resume)
    started = time.monotonic()
    done = run_kubectl(kubectl, lab.kubeconfig, ["get", "pods", "-w"], timeout=20)
    assert done.returncode != 124, "kubectl get -w was not ended by the cut"
    assert "web-0" in done.stdout
    assert time.monotonic() - started < 10


def test_gone_watch_expires_old_resource_versions(serve: Any) -> None:
    lab = serve("gone-watch")
    rv = int(lab.get("/api/v1/pods")[1]["metadata"]["resourceVersion"])
    lab.store.put(pod("new"))
    (gone,) = _watch(lab, f"/api/v1/pods?watch=1&resourceVersion={rv}&timeoutSeconds=1")
    assert gone["type"] == "ERROR"
    status = gone["object"]
    assert (status["code"], status["reason"]) == (410, "Expired")
    assert status["message"] == f"too old resource version: {rv} ({rv + 1})"
    # from the newest version, or from the start: no error
    assert _watch(lab, f"/api/v1/pods?watch=1&resourceVersion={rv + 1}&timeoutSeconds=1") == []
    initial = _watch(lab, "/api/v1/pods?watch=1&resourceVersion=0&timeoutSeconds=1")
    assert {e["type"] for e in initial} == {"ADDED"}
    kept = serve("gone-watch:1")
    rv = int(kept.get("/api/v1/pods")[1]["metadata"]["resourceVersion"])
    kept.store.put(pod("new"))
    (added,) = _watch(kept, f"/api/v1/pods?watch=1&resourceVersion={rv}&timeoutSeconds=1")
    assert (added["type"], added["object"]["metadata"]["name"]) == ("ADDED", "new")


def _drain(response: http.client.HTTPResponse) -> str:
    """Read a stream to its end: "ended" (its last chunk came) or "cut"."""
    try:
        while response.read(1 << 16):
            pass
    except (http.client.IncompleteRead, ConnectionError, ssl.SSLError):
        return "cut"
    return "ended"


def _watch(lab: Running, path: str) -> list[dict[str, Any]]:
    response = lab.request(path)
    return [json.loads(line) for line in response.read().splitlines() if line.strip()]


# ---- the server's loss ---------------------------------------------------------------------
def test_loss_after_drops_connections_and_refuses_new_ones(kubectl: Path, serve: Any) -> None:
    lab = serve("loss-after:1")
    assert lab.request("/healthz").status == 200
    watch = lab.request("/api/v1/pods?watch=1&resourceVersion=0")
    watch.readline()
    started = time.monotonic()
    assert _drain(watch) == "cut"
    assert time.monotonic() - started < 3
    url = urlparse(lab.server.url)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((url.hostname, url.port), timeout=2)
    assert lab.server.lost
    done = run_kubectl(kubectl, lab.kubeconfig, ["get", "pods", "--request-timeout=3s"])
    assert done.returncode == 1
    assert "connection refused" in done.stderr


# ---- clients leaving -----------------------------------------------------------------------
def test_clients_leaving_watches_log_no_tracebacks(
    serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A client that leaves mid-stream (closed, aborted or reset connections while the store
    changes fast) is normal: nothing is logged."""
    lab = serve()
    url = urlparse(lab.server.url)

    async def churn_and_leave() -> None:
        async def churn() -> None:
            i = 0
            while True:
                lab.store.put(pod(f"c{i % 20}", phase=f"p{i}"))
                i += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(churn())
        try:
            for path in ("/api/v1/pods?watch=1", "/api/v1/namespaces/lab/pods/web-0/log?follow=1"):
                for _ in range(4):
                    reader, writer = await asyncio.open_connection(
                        url.hostname, url.port, ssl=lab.tls
                    )
                    request = (
                        f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
                    )
                    writer.write(request.encode())
                    await reader.read(1000)
                    writer.transport.abort()
                    await asyncio.sleep(0.2)
        finally:
            task.cancel()

    with caplog.at_level(logging.DEBUG, logger="aiohttp"):
        lab.call(churn_and_leave())
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


# ---- lab serve, for real -------------------------------------------------------------------
@pytest.mark.lab
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_in_the_background_with_faults(
    tmp_path: Path, kubectl: Path, stop: signal.Signals
) -> None:
    """``lab serve --api-fault 429:0.3 &`` from a script (SIGINT ignored, as bash starts
    background jobs without job control): kubectl still reads the pods, with the columns it
    shows on a cluster; kill -INT and kill -TERM stop it and leave nothing behind."""
    from svcdoctor.lab.cleanup import alive, pod_processes
    from tests.lab.test_serve import SVCDOCTOR, Served, _prefix_of

    kubeconfig = tmp_path / "kubeconfig"
    command = [*SVCDOCTOR, "--scenario", "race", "--datapath", "userspace", "--for", "90"]
    command += ["--kubeconfig-out", str(kubeconfig), "--format", "json", "--no-load"]
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # inherited, as from bash's `&`
    try:
        proc = subprocess.Popen(
            [*command, "--api-fault", "429:0.3"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        served = Served(proc, kubeconfig, kubectl)
        get = ["get", "pods", "-n", "lab", "-l", "app=api"]
        table = run_kubectl(kubectl, kubeconfig, get, timeout=60)
        assert table.returncode == 0, table.stderr
        lines = table.stdout.splitlines()
        assert lines[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        assert len(lines) == 5
        assert all(line.split()[1:4] == ["1/1", "Running", "0"] for line in lines[1:])
        wide = run_kubectl(kubectl, kubeconfig, [*get, "-o", "wide"], timeout=60)
        assert wide.returncode == 0, wide.stderr
        header, *rows = wide.stdout.splitlines()
        assert header.split()[5:7] == ["IP", "NODE"]
        assert all(row.split()[6].startswith("node-") for row in rows)
        prefix = _prefix_of(proc.pid)
        proc.send_signal(stop)
        proc.wait(30)
        assert proc.returncode == 0, served.proc.stderr.read() if served.proc.stderr else ""
        assert [run for run, _, _ in pod_processes().values() if run == prefix] == []
        assert not alive(prefix)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
