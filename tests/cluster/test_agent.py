"""The in-cluster agent, run for real: a copy of its file in an isolated interpreter
(``python -I -S``: no site-packages, no PYTHONPATH) against real local servers."""

from __future__ import annotations

import ast
import asyncio
import contextlib
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest

from svcdoctor.cluster import agent
from svcdoctor.cluster.agent import (
    GRPC_MISSING,
    ROW_KEYS,
    BadResponse,
    ClosedEarly,
    Response,
    ResponseReader,
    grpc_outcome,
    health_status,
    outcome_of,
    parse_address,
    parse_args,
    parse_head,
)

AGENT = Path(agent.__file__)
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOSTNAME": "agent-pod", "NODE_NAME": "n1"}


# --- real servers -------------------------------------------------------------------


@dataclass
class Stats:
    """What one server saw (written by the server thread, read after the agent exits)."""

    connections: int = 0
    heads: list[bytes] = field(default_factory=list)


class _Server(asyncio.Protocol):
    def __init__(self, kind: str, stats: Stats) -> None:
        self.kind = kind
        self.stats = stats
        self.buffer = b""
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.stats.connections += 1

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while b"\r\n\r\n" in self.buffer:
            head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
            self.stats.heads.append(head)
            self.respond(b"connection: close" in head.lower())

    def respond(self, close: bool) -> None:
        conn = b"close" if close else b"keep-alive"
        if self.kind == "reset":
            sock = self.transport.get_extra_info("socket")
            sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
            self.transport.abort()
            return
        if self.kind == "eof":
            self.transport.close()
            return
        if self.kind == "slow":
            return  # never answers
        if self.kind == "chunked":
            self.transport.write(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Pod: pod-c\r\n"
                b"Connection: " + conn + b"\r\n\r\n5\r\nhello\r\n6;x=1\r\n world\r\n0\r\n\r\n"
            )
        else:
            status = b"503 Service Unavailable" if self.kind == "503" else b"200 OK"
            self.transport.write(
                b"HTTP/1.1 " + status + b"\r\nX-Backend: pod-" + self.kind.encode() + b"\r\n"
                b"Content-Length: 5\r\nConnection: " + conn + b"\r\n\r\nhello"
            )
        if close:
            self.transport.close()
        elif self.kind == "idle-close":  # a short keep-alive idle timeout, as many servers have
            asyncio.get_running_loop().call_later(0.02, self.transport.close)


@dataclass
class Servers:
    address: dict[str, str]  # kind -> 127.0.0.1:PORT (refused: a closed port)
    stats: dict[str, Stats]


KINDS = ("ok", "reset", "eof", "slow", "503", "chunked", "idle-close")


@pytest.fixture
def servers() -> Iterator[Servers]:
    loop = asyncio.new_event_loop()
    stats = {kind: Stats() for kind in KINDS}
    address: dict[str, str] = {}

    async def start() -> list[asyncio.Server]:
        out = []
        for kind in KINDS:
            server = await loop.create_server(
                lambda k=kind: _Server(k, stats[k]), "127.0.0.1", 0, backlog=1024
            )
            address[kind] = f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
            out.append(server)
        return out

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    started = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        address["refused"] = f"127.0.0.1:{closed.getsockname()[1]}"
    try:
        yield Servers(address, stats)
    finally:

        async def stop() -> None:
            for server in started:
                server.close()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


# --- the agent as a process -----------------------------------------------------------


@dataclass
class Run:
    code: int
    rows: list[dict[str, Any]]
    done: dict[str, Any] | None
    stderr: str


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The agent's file alone in a temp dir, as the ConfigMap mounts it."""
    target = tmp_path / "agent.py"
    target.write_text(AGENT.read_text())
    return target


def command(copy: Path, *args: str) -> list[str]:
    return [sys.executable, "-I", "-S", str(copy), *args]


def parse(stdout: str) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    lines = [json.loads(line) for line in stdout.splitlines()]
    done = lines[-1] if lines and "agent" in lines[-1] else None
    rows = lines[:-1] if done else lines
    assert all("agent" not in row for row in rows), "the done line must come last, once"
    return rows, done


def run(copy: Path, *args: str, timeout: float = 60) -> Run:
    proc = subprocess.run(
        command(copy, *args),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=ENV,
        cwd=copy.parent,
        check=False,
    )
    rows, done = parse(proc.stdout)
    return Run(proc.returncode, rows, done, proc.stderr)


def max_overlap(rows: list[dict[str, Any]]) -> int:
    """The most requests open at once, from their start times and latencies."""
    edges = sorted(
        [(r["ts"], 1) for r in rows] + [(r["ts"] + r["latency_ms"] / 1000, -1) for r in rows],
        key=lambda e: (e[0], e[1]),
    )
    open_, peak = 0, 0
    for _, step in edges:
        open_ += step
        peak = max(peak, open_)
    return peak


# --- tests ----------------------------------------------------------------------------


def test_direct_mode_counts_and_classifies_each_endpoint(copy: Path, servers: Servers) -> None:
    kinds = ("ok", "reset", "refused", "eof", "slow", "503", "chunked")
    endpoints = ",".join(servers.address[k] for k in kinds)
    result = run(
        copy,
        *("--mode", "direct", "--endpoints", endpoints, "--count", "4", "--timeout", "0.4"),
        *("--upstream", "shop/api"),
    )
    assert result.code == 0, result.stderr
    assert result.stderr == ""
    assert result.done == {"agent": "done", "requests": 28, "reason": "finished"}
    assert all(tuple(row) == ROW_KEYS for row in result.rows)
    by_backend: dict[str, list[dict[str, Any]]] = {}
    for row in result.rows:
        by_backend.setdefault(row["backend"], []).append(row)
    expected = {
        "ok": ("ok", 200),
        "reset": ("reset", None),
        "refused": ("refused", None),
        "eof": ("eof", None),
        "slow": ("timeout", None),
        "503": ("http_error", 503),
        "chunked": ("ok", 200),
    }
    for kind, (outcome, status) in expected.items():
        rows = by_backend[servers.address[kind]]
        assert len(rows) == 4, kind
        assert {(r["outcome"], r["status"]) for r in rows} == {(outcome, status)}, kind
        # sequential per endpoint: each request starts after the one before ended
        for before, after in itertools.pairwise(rows):
            assert after["ts"] >= before["ts"] + before["latency_ms"] / 1000 - 1e-4
    slow = by_backend[servers.address["slow"]]
    assert all(380 <= r["latency_ms"] < 1500 for r in slow)
    assert all(r["detail"] for r in result.rows if r["outcome"] != "ok")
    assert all(r["detail"] is None for r in result.rows if r["outcome"] == "ok")
    row = result.rows[0]
    assert (row["client"], row["node"], row["upstream"]) == ("agent-pod", "n1", "shop/api")
    assert (row["role"], row["source"], row["mode"]) == ("request", "agent", "direct")
    assert len({r["conn"] for r in result.rows}) == 28  # a new connection per request
    assert servers.stats["ok"].connections == 4


def test_service_mode_holds_the_rate_with_new_connections(copy: Path, servers: Servers) -> None:
    result = run(
        copy,
        *("--mode", "service", "--service", servers.address["ok"], "--rate", "200"),
        *("--duration", "2", "--client", "c1", "--node", "node-x"),
    )
    assert result.code == 0, result.stderr
    assert result.done == {"agent": "done", "requests": 400, "reason": "finished"}
    rows = result.rows
    assert Counter(r["outcome"] for r in rows) == {"ok": 400}
    ts = sorted(r["ts"] for r in rows)
    achieved = (len(ts) - 1) / (ts[-1] - ts[0])
    assert 0.9 * 200 <= achieved <= 1.1 * 200
    assert {r["backend"] for r in rows} == {"pod-ok"}  # from X-Backend
    assert {(r["client"], r["node"], r["mode"]) for r in rows} == {("c1", "node-x", "service")}
    assert len({r["conn"] for r in rows}) == 400
    assert servers.stats["ok"].connections == 400
    assert all(b"connection: close" in h.lower() for h in servers.stats["ok"].heads)
    # timestamps resolve far below a millisecond: not rounded to whole milliseconds
    assert any(abs(t * 1000 - round(t * 1000)) > 1e-3 for t in ts)


def test_open_loop_requests_start_on_schedule_while_earlier_ones_hang(
    copy: Path, servers: Servers
) -> None:
    result = run(
        copy,
        *("--mode", "service", "--service", servers.address["slow"], "--rate", "40"),
        *("--duration", "1", "--timeout", "0.5"),
    )
    assert result.code == 0, result.stderr
    assert result.done == {"agent": "done", "requests": 40, "reason": "finished"}
    assert {r["outcome"] for r in result.rows} == {"timeout"}
    ts = sorted(r["ts"] for r in result.rows)
    assert ts[-1] - ts[0] < 1.3  # a closed loop would take 40 * 0.5 s
    assert max_overlap(result.rows) >= 15


def test_in_flight_bound_and_duration_hold_against_a_hanging_server(
    copy: Path, servers: Servers
) -> None:
    result = run(
        copy,
        *("--mode", "service", "--service", servers.address["slow"], "--rate", "100"),
        *("--duration", "1", "--timeout", "0.3", "--max-in-flight", "4"),
    )
    assert result.code == 0, result.stderr
    assert result.done is not None
    assert result.done["reason"] == "finished"
    assert 8 <= len(result.rows) <= 24  # about 4 per 0.3 s for 1 s, not 100
    assert max_overlap(result.rows) <= 4
    ts = sorted(r["ts"] for r in result.rows)
    assert ts[-1] - ts[0] < 1.2


def test_keepalive_reuses_connections(copy: Path, servers: Servers) -> None:
    result = run(
        copy,
        *("--mode", "both", "--service", servers.address["ok"], "--rate", "50"),
        *("--duration", "1", "--keepalive", "--endpoints", servers.address["chunked"]),
        *("--count", "10", "--backend-header", "X-Pod,X-Backend"),
    )
    assert result.code == 0, result.stderr
    assert result.done == {"agent": "done", "requests": 60, "reason": "finished"}
    assert {r["outcome"] for r in result.rows} == {"ok"}
    service = [r for r in result.rows if r["mode"] == "service"]
    direct = [r for r in result.rows if r["mode"] == "direct"]
    assert len(service) == 50
    assert len(direct) == 10
    conns = {r["conn"] for r in service}
    assert len(conns) <= 3
    assert servers.stats["ok"].connections == len(conns)
    assert len({r["conn"] for r in direct}) == 1
    assert servers.stats["chunked"].connections == 1
    assert {r["backend"] for r in direct} == {servers.address["chunked"]}
    assert all(b"connection: keep-alive" in h.lower() for h in servers.stats["ok"].heads)


def test_keepalive_does_not_reuse_a_connection_the_server_closed(
    copy: Path, servers: Servers
) -> None:
    result = run(
        copy,
        *("--mode", "service", "--service", servers.address["idle-close"], "--rate", "20"),
        *("--duration", "0.5", "--keepalive"),
    )
    assert result.code == 0, result.stderr
    assert [r["outcome"] for r in result.rows] == ["ok"] * 10
    assert len({r["conn"] for r in result.rows}) == 10  # each idle one was closed in between
    assert servers.stats["idle-close"].connections == 10


def test_names_are_resolved_and_failures_are_rows(copy: Path, servers: Servers) -> None:
    port = servers.address["ok"].rsplit(":", 1)[1]
    by_name = run(
        copy,
        "--mode",
        "service",
        "--service",
        f"localhost:{port}",
        "--rate",
        "100",
        "--duration",
        "0.3",
    )
    assert by_name.code == 0, by_name.stderr
    assert {r["outcome"] for r in by_name.rows} == {"ok"}
    assert len(by_name.rows) == 30
    unknown = run(
        copy,
        *("--mode", "service", "--service", "no-such-host.invalid:80", "--rate", "10"),
        *("--duration", "0.3", "--timeout", "3"),
    )
    assert unknown.code == 0, unknown.stderr
    assert unknown.done == {"agent": "done", "requests": 3, "reason": "finished"}
    assert {r["outcome"] for r in unknown.rows} == {"error"}
    assert all(r["detail"].startswith("cannot resolve no-such-host.invalid") for r in unknown.rows)


def other_python(version: str) -> str | None:
    """An interpreter of that version: pyenv's (if any) or one on PATH."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    found = sorted(root.glob(f"{version}.*/bin/python{version}"))
    if found:
        return str(found[-1])
    python = shutil.which(f"python{version}")
    if (
        python is None
        or subprocess.run([python, "-c", ""], capture_output=True, check=False).returncode
    ):
        return None
    return python


@pytest.mark.parametrize("version", ["3.9", "3.10", "3.12", "3.13"])
def test_runs_on_other_pythons(tmp_path: Path, servers: Servers, version: str) -> None:
    python = other_python(version)
    if python is None:
        pytest.skip(f"no python{version} here")
    copy = tmp_path / "agent.py"
    copy.write_text(AGENT.read_text())
    endpoints = ",".join(servers.address[k] for k in ("ok", "refused", "slow"))
    proc = subprocess.run(
        [
            *(python, "-I", "-S", str(copy), "--mode", "both", "--endpoints", endpoints),
            *("--count", "2", "--timeout", "0.3", "--service", servers.address["chunked"]),
            *("--rate", "50", "--duration", "0.2", "--keepalive"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=ENV,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    rows, done = parse(proc.stdout)
    assert done == {"agent": "done", "requests": 16, "reason": "finished"}
    assert Counter(r["outcome"] for r in rows) == {"ok": 12, "refused": 2, "timeout": 2}


def test_max_requests_bounds_the_run(copy: Path, servers: Servers) -> None:
    result = run(
        copy,
        *("--mode", "service", "--service", servers.address["ok"], "--rate", "100"),
        *("--duration", "5", "--max-requests", "30"),
    )
    assert result.code == 0, result.stderr
    assert result.done == {"agent": "done", "requests": 30, "reason": "bound"}
    assert len(result.rows) == 30
    ts = sorted(r["ts"] for r in result.rows)
    assert ts[-1] - ts[0] < 1.0


def test_tcp_connect_probe_path_and_host_header(copy: Path, servers: Servers) -> None:
    tcp = run(
        copy,
        *("--mode", "direct", "--protocol", "tcp", "--count", "3"),
        *("--endpoints", f"{servers.address['slow']},{servers.address['refused']}"),
    )
    assert tcp.code == 0, tcp.stderr
    outcomes = Counter((r["backend"], r["outcome"], r["status"]) for r in tcp.rows)
    assert outcomes == {
        (servers.address["slow"], "ok", None): 3,
        (servers.address["refused"], "refused", None): 3,
    }
    assert servers.stats["slow"].heads == []  # a connect only, no request
    http = run(
        copy,
        *("--mode", "direct", "--endpoints", servers.address["ok"], "--count", "1"),
        *("--path", "/healthz?x=1", "--host-header", "api.shop.svc"),
    )
    assert http.code == 0, http.stderr
    head = servers.stats["ok"].heads[0].decode().split("\r\n")
    assert head[0] == "GET /healthz?x=1 HTTP/1.1"
    assert "Host: api.shop.svc" in head


def test_a_connect_that_hangs_times_out(copy: Path) -> None:
    with socket.socket() as full:  # never accepts: once its queue is full, SYNs are dropped
        full.bind(("127.0.0.1", 0))
        full.listen(0)
        address = f"127.0.0.1:{full.getsockname()[1]}"
        result = run(
            copy,
            *("--mode", "direct", "--protocol", "tcp", "--endpoints", address),
            *("--count", "4", "--timeout", "0.3"),
        )
    assert result.code == 0, result.stderr
    outcomes = [r["outcome"] for r in result.rows]
    assert outcomes[-1] == "timeout"
    assert set(outcomes) <= {"ok", "timeout"}
    assert all(290 <= r["latency_ms"] < 1000 for r in result.rows if r["outcome"] == "timeout")


def test_sigterm_mid_run_lets_in_flight_requests_end(copy: Path, servers: Servers) -> None:
    proc = subprocess.Popen(
        command(
            copy,
            *("--mode", "both", "--service", servers.address["slow"], "--rate", "20"),
            *("--duration", "30", "--timeout", "1", "--endpoints", servers.address["ok"]),
            *("--count", "100000"),
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,  # unbuffered: readline() reads no further than its line, and
        env=ENV,  # communicate() (which reads the pipe itself) gets every row after it
    )
    try:
        assert proc.stdout is not None
        first = [proc.stdout.readline().decode() for _ in range(50)]  # direct rows: it runs
        assert all(first)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(0.6)  # let service requests pile up against the hanging server
        proc.send_signal(signal.SIGTERM)
        raw_out, raw_err = proc.communicate(timeout=10)
        out, err = raw_out.decode(), raw_err.decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert err == ""
    rows, done = parse("".join(first) + out)
    assert done == {"agent": "done", "requests": len(rows), "reason": "signal"}
    hung = [r for r in rows if r["mode"] == "service"]
    assert hung
    assert {r["outcome"] for r in hung} == {"timeout"}  # ended, each within --timeout
    assert servers.stats["slow"].connections == len(hung)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "--mode"),
        (("--mode", "direct"), "needs --endpoints"),
        (("--mode", "service"), "needs --service"),
        (("--mode", "direct", "--endpoints", "10.0.0.1"), "not HOST:PORT"),
        (("--mode", "service", "--service", "a:80", "--rate", "0"), "--rate"),
        (("--mode", "service", "--service", "a:80", "--rate", "x"), "invalid float"),
        (("--mode", "direct", "--endpoints", "a:1", "--protocol", "udp"), "invalid choice"),
        (("--mode", "direct", "--endpoints", "a:1", "--path", "healthz"), "--path"),
        (("--mode", "direct", "--endpoints", "a:1", "--bogus"), "unrecognized"),
        (("--mode", "direct", "--endpoints", "a:1", "--max-requests", "0"), "--max-requests"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    copy: Path, args: tuple[str, ...], message: str
) -> None:
    result = run(copy, *args, timeout=20)
    assert result.code == 2
    assert result.rows == []
    assert result.done is None
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("svcdoctor-agent: error: ")
    assert message in result.stderr


def test_grpc_without_grpcio_exits_2(copy: Path) -> None:
    probe = subprocess.run(
        [sys.executable, "-I", "-S", "-c", "import grpc"], capture_output=True, check=False
    )
    assert probe.returncode != 0, "grpc must not be importable in an isolated interpreter"
    result = run(copy, "--mode", "direct", "--endpoints", "10.0.0.1:50051", "--protocol", "grpc")
    assert result.code == 2
    assert result.stderr == f"svcdoctor-agent: error: {GRPC_MISSING}\n"
    assert result.rows == []


def test_grpc_health_check_when_grpcio_is_there(tmp_path: Path) -> None:
    grpc = pytest.importorskip("grpc")
    health = pytest.importorskip("grpc_health.v1.health")
    health_pb2 = pytest.importorskip("grpc_health.v1.health_pb2")
    health_pb2_grpc = pytest.importorskip("grpc_health.v1.health_pb2_grpc")
    from concurrent import futures

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    servicer = health.HealthServicer()
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    servicer.set("down", health_pb2.HealthCheckResponse.NOT_SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        refused = f"127.0.0.1:{closed.getsockname()[1]}"
    try:
        base = [sys.executable, str(AGENT), "--mode", "direct", "--protocol", "grpc"]
        for extra, expected in (
            ([], {("ok", 0)}),
            (["--grpc-service", "down"], {("http_error", 0)}),
        ):
            proc = subprocess.run(
                [*base, "--endpoints", f"127.0.0.1:{port}", "--count", "3", *extra],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert proc.returncode == 0, proc.stderr
            rows, done = parse(proc.stdout)
            assert done == {"agent": "done", "requests": 3, "reason": "finished"}
            assert {(r["outcome"], r["status"]) for r in rows} == expected
            assert len({r["conn"] for r in rows}) == 3
        proc = subprocess.run(
            [*base, "--endpoints", refused, "--count", "1", "--timeout", "2"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        rows, _ = parse(proc.stdout)
        assert rows[0]["outcome"] in {"refused", "timeout", "error"}
        assert rows[0]["outcome"] != "ok"
    finally:
        server.stop(0)


def test_the_file_imports_only_the_standard_library(copy: Path) -> None:
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('agent', {str(copy)!r})\n"
        "module = sys.modules['agent'] = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "names = {m.split('.')[0] for m in sys.modules} - {'agent', '__main__'}\n"
        "print(sorted(names - set(sys.stdlib_module_names)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=copy.parent,
        check=True,
    )
    assert proc.stdout.strip() == "[]"
    tree = ast.parse(AGENT.read_text(), feature_version=(3, 9))  # runs on python:3.9-slim
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.module is not None
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            assert top == "__future__" or top in sys.stdlib_module_names, name


def test_the_package_ships_the_file() -> None:
    text = files("svcdoctor.cluster").joinpath("agent.py").read_text()
    assert text == AGENT.read_text()
    assert text.startswith('"""svcdoctor\'s in-cluster agent')


# --- the pure parts -------------------------------------------------------------------


def test_outcomes_of_errors() -> None:
    assert outcome_of(ConnectionRefusedError()) == "refused"
    assert outcome_of(ConnectionResetError()) == "reset"
    assert outcome_of(ClosedEarly()) == "eof"
    assert outcome_of(BrokenPipeError()) == "eof"
    assert outcome_of(TimeoutError()) == "timeout"
    assert outcome_of(OSError(113, "No route to host")) == "error"
    assert outcome_of(BadResponse("x")) == "error"
    assert grpc_outcome("DEADLINE_EXCEEDED", "") == "timeout"
    assert grpc_outcome("UNAVAILABLE", "failed to connect: Connection refused") == "refused"
    assert grpc_outcome("UNAVAILABLE", "recvmsg:Connection reset by peer") == "reset"
    assert grpc_outcome("UNAVAILABLE", "Socket closed") == "eof"
    assert grpc_outcome("UNIMPLEMENTED", "") == "error"


def test_http_parsing() -> None:
    assert parse_head(b"HTTP/1.1 503 Service Unavailable\r\nX-Pod: a\r\nContent-Length: 0") == (
        "HTTP/1.1",
        503,
        "Service Unavailable",
        {"x-pod": "a", "content-length": "0"},
    )
    with pytest.raises(BadResponse):
        parse_head(b"SSH-2.0-OpenSSH_9.6")


def feed_bytewise(data: bytes, eof: bool = False) -> Response | None:
    """Feed one byte at a time (the worst split); the response must appear exactly once,
    on the last byte (or at eof)."""
    reader = ResponseReader()
    for i in range(len(data)):
        got = reader.feed(data[i : i + 1])
        if got is not None:
            assert i == len(data) - 1, f"complete early, at byte {i}"
            return got
    return reader.feed(b"", eof=True) if eof else None


@pytest.mark.parametrize(
    ("raw", "eof", "status", "keep"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", False, 200, True),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", False, 200, False),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", False, 200, False),
        (
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok",
            False,
            200,
            True,
        ),
        (
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nX-Backend: b\r\n\r\n",
            False,
            204,
            True,
        ),
        (
            b"HTTP/1.1 503 Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\nA;ext=1\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n",
            False,
            503,
            True,
        ),
        (b"HTTP/1.1 200 OK\r\n\r\nuntil the server closes", True, 200, False),
    ],
)
def test_response_reader_completes_exactly_at_the_end(
    raw: bytes, eof: bool, status: int, keep: bool
) -> None:
    response = feed_bytewise(raw, eof)
    assert response is not None
    assert (response.status, response.keep_alive) == (status, keep)
    whole = ResponseReader().feed(raw, eof=eof)
    assert whole == response


def test_response_reader_counts_big_bodies_without_keeping_them() -> None:
    reader = ResponseReader()
    assert reader.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10000000\r\n\r\n") is None
    for _ in range(152):
        assert reader.feed(b"x" * 65536) is None
        assert len(reader.buffer) == 0
    assert reader.feed(b"x" * (10_000_000 - 152 * 65536)) is not None
    with pytest.raises(BadResponse):
        ResponseReader().feed(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
    with pytest.raises(BadResponse):
        ResponseReader().feed(b"x" * 70000)
    assert (
        ResponseReader().feed(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort", eof=True)
        is None
    )


def test_grpc_wire_format() -> None:
    assert health_status(b"\x08\x01") == 1
    assert health_status(b"") == 0
    assert health_status(b"\x12\x02ab\x08\x02") == 2  # an unknown field, then status
    with pytest.raises(BadResponse):
        health_status(b"\x08")
    assert agent._health_request("") == b""
    assert agent._health_request("down") == b"\x0a\x04down"


def test_arguments_and_defaults() -> None:
    opts = parse_args(
        ["--mode", "both", "--endpoints", "10.0.0.1:80, [fd00::1]:8080", "--service", "api:80"],
        {"HOSTNAME": "pod-1", "NODE_NAME": "node-2"},
    )
    assert [str(e) for e in opts.endpoints] == ["10.0.0.1:80", "[fd00::1]:8080"]
    assert opts.max_requests == 50 * 60 + 20 * 2
    assert (opts.client, opts.node, opts.timeout, opts.keepalive) == ("pod-1", "node-2", 2.0, False)
    assert opts.backend_headers == ("x-backend",)
    assert parse_address("[::1]:443").host == "::1"
    assert (
        parse_args(
            ["--mode", "service", "--service", "a:1", "--rate", "2.5", "--duration", "1"], {}
        ).max_requests
        == 3
    )


def test_the_agent_writes_the_canonical_request_columns() -> None:
    """The agent cannot import svcdoctor (it runs alone in a stock image), so its own copy
    of the request-log columns must stay the canonical ones, plus its mode."""
    from svcdoctor.model import REQUEST_COLUMNS

    assert (*REQUEST_COLUMNS, "mode") == ROW_KEYS
