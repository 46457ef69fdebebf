"""The lab's pod process, for real: its shutdown modes on real sockets, its faults, and that
it dies with the lab that started it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from svcdoctor.lab.cleanup import leftovers, remove
from tests.conftest import deliberate_leftovers

pytestmark = pytest.mark.lab


@contextmanager
def pod(*args: str) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "svcdoctor.lab.pod", "--name", "api-0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert line.startswith("LISTENING"), line
        yield proc, int(line.rsplit(":", 1)[1])
    finally:
        proc.kill()
        proc.wait()


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=3)


def get(sock: socket.socket, path: str = "/", keep: bool = True) -> tuple[int, dict[str, str]]:
    header = "keep-alive" if keep else "close"
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: t\r\nConnection: {header}\r\n\r\n".encode())
    return response(sock)


def response(sock: socket.socket) -> tuple[int, dict[str, str]]:
    """Read one response: the status and the headers (the body is read and dropped)."""
    sock.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            raise EOFError(data)
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    while len(body) < int(headers.get("content-length", "0")):
        body += sock.recv(4096)
    return int(lines[0].split()[1]), headers


def closed_by_peer(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_graceful_shutdown_drains_and_closes_connections() -> None:
    with pod("--shutdown", "graceful", "--shutdown-delay", "0.5", "--slow", "1,0.8") as (
        proc,
        port,
    ):
        busy, idle, held = connect(port), connect(port), connect(port)
        assert get(held) == (
            200,
            {"x-pod": "api-0", "content-length": "5", "connection": "keep-alive"},
        )
        busy.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")  # in flight for 0.8 s at SIGTERM
        time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        # readiness fails; new connections are still accepted during the delay
        end = time.monotonic() + 0.4
        while get(connect(port), "/readyz", keep=False)[0] != 503:
            assert time.monotonic() < end, "readiness still passes after SIGTERM"
            time.sleep(0.02)
        # a held connection is answered, with Connection: close, and then closed
        status, headers = get(held)
        assert (status, headers["connection"]) == (200, "close")
        assert closed_by_peer(held)
        # the in-flight request finishes
        status, headers = response(busy)
        assert (status, headers["connection"]) == (200, "close")
        time.sleep(0.6)  # past the shutdown delay: no longer accepting
        with pytest.raises(ConnectionRefusedError):
            connect(port)
        # an idle keep-alive connection is closed after the drain, not reset
        assert idle.recv(1) == b""
        assert proc.wait(5) == 0


def test_naive_shutdown_resets_held_connections_and_refuses_new_ones() -> None:
    with pod("--shutdown", "naive") as (proc, port):
        held = connect(port)
        assert get(held)[0] == 200
        proc.send_signal(signal.SIGTERM)
        with pytest.raises(ConnectionResetError):
            held.recv(1)
        assert proc.wait(5) == 0
        with pytest.raises(ConnectionRefusedError):
            connect(port)


@pytest.mark.parametrize(("fault", "fails"), [("5xx", 503), ("reset", ConnectionResetError)])
def test_a_bad_pod_passes_readiness_but_fails_requests(
    fault: str, fails: int | type[Exception]
) -> None:
    with pod("--fault", fault) as (_, port):
        assert get(connect(port), "/readyz")[0] == 200
        if isinstance(fails, int):
            assert get(connect(port))[0] == fails
        else:
            with pytest.raises(fails):
                get(connect(port))


def test_latency_follows_the_distribution() -> None:
    with pod("--latency", "0.2") as (_, port):
        sock = connect(port)
        begin = time.perf_counter()
        for _ in range(3):
            assert get(sock)[0] == 200
        assert 0.6 <= time.perf_counter() - begin < 1.5


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_pod_dies_with_its_lab() -> None:
    """A lab killed with SIGKILL runs no cleanup; its pods go anyway (PDEATHSIG)."""
    lab = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, subprocess, sys, time\n"
            "p = subprocess.Popen([sys.executable, '-m', 'svcdoctor.lab.pod', '--name', 'x',"
            " '--run', 'svcd0a0b0c', '--parent', str(os.getpid())], stdout=subprocess.PIPE)\n"
            "p.stdout.readline()\n"
            "print(p.pid, flush=True)\n"
            "time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
    )
    assert lab.stdout is not None
    child = int(lab.stdout.readline())
    assert alive(child)
    assert child not in leftovers().processes  # its lab is alive: not a leftover
    lab.kill()
    lab.wait()
    end = time.time() + 5
    while alive(child) and time.time() < end:
        time.sleep(0.05)
    assert not alive(child)


def test_lab_clean_finds_an_orphaned_pod() -> None:
    """A pod process of a run whose parent is not its lab is a leftover, and is removed."""
    with deliberate_leftovers():
        proc = subprocess.Popen(
            [sys.executable, "-m", "svcdoctor.lab.pod", "--name", "x", "--run", "svcd0d0e0f"],
            stdout=subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None
            proc.stdout.readline()
            found = leftovers()
            assert proc.pid in found.processes
            remove(found)
            assert proc.wait(5) == -signal.SIGKILL
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait()
