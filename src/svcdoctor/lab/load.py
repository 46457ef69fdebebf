"""The load generator: clients sending requests through a node's Service address, every
request recorded (ts, outcome, status, latency, client, backend, conn)."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from svcdoctor.lab.datapath import Datapath
from svcdoctor.model import RETRY_BACKOFF
from svcdoctor.model.scenario import ConnectionMode, LoadSpec

REQUEST_TIMEOUT = 5.0
MAX_IN_FLIGHT = 512  # requests open at once, all clients together (sockets are finite)


class ConnectFailed(Exception):
    """A connection that could not be made, with the local port it used (to attribute it)."""

    def __init__(self, cause: BaseException, port: int | None) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.port = port


_OUTCOMES: tuple[tuple[type[BaseException], str], ...] = (
    (ConnectionRefusedError, "refused"),
    (ConnectionResetError, "reset"),
    (asyncio.IncompleteReadError, "eof"),
    (BrokenPipeError, "eof"),
    (TimeoutError, "timeout"),
    (OSError, "error"),
)


def outcome_of(exc: BaseException) -> str:
    return next(name for kind, name in _OUTCOMES if isinstance(exc, kind))


@dataclass
class _Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    ident: str
    port: int
    opened: float


@dataclass
class Load:
    spec: LoadSpec
    datapath: Datapath
    nodes: int
    seed: int = 0
    keep: int | None = None  # keep only about the last ``keep`` records (a long-running lab)
    # told each request's record as it ends (``lab serve`` counts them for /metrics where no
    # proxy of its own sees the requests: the load generator stands in for the ingress)
    on_record: Callable[[dict[str, Any]], None] | None = None
    records: list[dict[str, Any]] = field(default_factory=list)
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    _sent: int = 0

    async def run(self, stop: asyncio.Event, deadline: float) -> None:
        """Run every client until ``stop`` is set, ``deadline`` (``time.time()``) passes or
        the request bound is reached: the traffic is bounded in time and count."""
        per_client = self.spec.rate / self.spec.clients
        in_flight = asyncio.Semaphore(MAX_IN_FLIGHT)
        await asyncio.gather(
            *(
                self._client(c, per_client, stop, deadline, in_flight)
                for c in range(self.spec.clients)
            )
        )

    async def _client(
        self,
        index: int,
        rate: float,
        stop: asyncio.Event,
        deadline: float,
        in_flight: asyncio.Semaphore,
    ) -> None:
        """Requests at Poisson times. With a new connection per request they go out on
        schedule, however long earlier ones take (an open loop: the rate holds when requests
        are slow); a keep-alive client has one connection, so each request waits for the
        one before it."""
        rng = random.Random(self.seed * 1000 + index)
        node = index % self.nodes
        conn: _Conn | None = None
        pending: set[asyncio.Task[_Conn | None]] = set()
        next_at = time.time() + rng.uniform(0, 1 / rate)
        while not stop.is_set() and next_at < deadline and self._sent < self.spec.max_requests:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, next_at - time.time()))
            if stop.is_set():
                break
            next_at += rng.expovariate(rate)
            self._sent += 1
            if self.spec.connection is ConnectionMode.NEW:
                await in_flight.acquire()
                task = asyncio.create_task(self._attempts(index, node, None))
                task.add_done_callback(lambda _: in_flight.release())
                pending.add(task)
                task.add_done_callback(pending.discard)
            else:
                conn = await self._attempts(index, node, conn)
        await asyncio.gather(*pending)
        if conn is not None:
            conn.writer.close()

    async def _attempts(self, index: int, node: int, conn: _Conn | None) -> _Conn | None:
        """One request, and its retries while it fails."""
        for attempt in range(self.spec.retries + 1):
            if attempt:
                await asyncio.sleep(RETRY_BACKOFF * 2 ** (attempt - 1))
            record, conn = await self._request(index, node, conn)
            record["attempt"] = attempt
            self.records.append(record)
            if self.on_record is not None:
                self.on_record(record)
            if self.keep is not None and len(self.records) > 2 * self.keep:
                del self.records[: -self.keep]  # like a rotated log: the oldest rows go
            if record["outcome"] == "ok":
                break
        return conn

    def sent_by_node(self) -> dict[int, list[float]]:
        """The start times of the requests (first attempts and retries), sorted, per node."""
        out: dict[int, list[float]] = {}
        for r in self.records:
            out.setdefault(r["node"], []).append(r["ts"])
        return {node: sorted(times) for node, times in out.items()}

    async def _connect(self, node: int) -> _Conn:
        sock = self.datapath.client_socket(node)
        loop = asyncio.get_running_loop()
        try:
            await asyncio.wait_for(
                loop.sock_connect(sock, self.datapath.service_address(node)), REQUEST_TIMEOUT
            )
        except (OSError, TimeoutError) as exc:
            port = None
            with contextlib.suppress(OSError):
                port = sock.getsockname()[1]
            sock.close()
            raise ConnectFailed(exc, port) from exc
        reader, writer = await asyncio.open_connection(sock=sock)
        port = sock.getsockname()[1]
        return _Conn(reader, writer, f"n{node}-{next(self._ids)}", port, time.time())

    async def _request(
        self, index: int, node: int, conn: _Conn | None
    ) -> tuple[dict[str, Any], _Conn | None]:
        keep = self.spec.connection is ConnectionMode.KEEPALIVE
        age = self.spec.max_connection_age
        if conn is not None and age is not None and time.time() - conn.opened > age:
            conn.writer.close()
            conn = None
        start = time.time()
        record: dict[str, Any] = {
            "ts": start,
            "client": f"client-{index}",
            "node": node,  # the index; the request log names it node-N
            "status": None,
            "backend": None,
            "conn": None,
        }
        reused = conn is not None
        try:
            if conn is None:
                conn = await self._connect(node)
            record["conn"] = conn.ident
            record["port"] = conn.port
            header = "keep-alive" if keep else "close"
            conn.writer.write(
                f"GET / HTTP/1.1\r\nHost: svc\r\nConnection: {header}\r\n\r\n".encode()
            )
            await conn.writer.drain()
            head = await asyncio.wait_for(conn.reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT)
            status, headers = _parse(head)
            length = int(headers.get("content-length", "0"))
            if length:
                await asyncio.wait_for(conn.reader.readexactly(length), REQUEST_TIMEOUT)
            record["status"] = status
            record["backend"] = headers.get("x-pod")
            record["outcome"] = "http_error" if status >= 500 else "ok"
            if not keep or headers.get("connection", "").lower() == "close":
                conn.writer.close()
                conn = None
        except ConnectFailed as exc:
            record["outcome"] = outcome_of(exc.cause)
            record["port"] = exc.port
            conn = None
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
            record["outcome"] = outcome_of(exc)
            _drop(conn)
            conn = None
        record.setdefault("port", None)
        record["latency_ms"] = round((time.time() - start) * 1000, 3)
        record["reused"] = reused
        return record, conn


def _drop(conn: _Conn | None) -> None:
    if conn is not None:
        with contextlib.suppress(Exception):
            conn.writer.close()


def _parse(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return status, headers
