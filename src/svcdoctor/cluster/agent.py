"""svcdoctor's in-cluster agent: probes endpoints and loads a Service, one JSON line per request.

Standard library only (any ``python:3.x-slim`` image, Python >= 3.9): svcdoctor ships this
file in a ConfigMap and runs it as a Job with ``python -I /svcdoctor/agent.py``.

    --mode direct   each of --endpoints IP:PORT,... --count times (sequential per endpoint,
                    endpoints in parallel, at most 32 at once)
    --mode service  open-loop load through --service HOST:PORT at --rate for --duration:
                    request i starts at t0 + i/rate whether or not earlier ones finished
                    (at most --max-in-flight open), a new connection per request unless
                    --keepalive (then an idle connection is reused, as a client pool does)
    --mode both     the two at once

Protocols: ``http`` (GET --path; ``backend`` in service mode from the response header
--backend-header, default X-Backend, several names allowed), ``tcp`` (a connect, then close)
and ``grpc`` (``grpc.health.v1.Health/Check`` of --grpc-service when grpcio is importable;
``status`` is then the gRPC status code, NOT_SERVING is ``http_error``). Each row has
exactly the keys of ``ROW_KEYS``; rows are written and flushed as they end (one write per
event-loop pass); the last line is
``{"agent": "done", "requests": N, "reason": "finished"|"signal"|"bound"}``. SIGTERM/SIGINT
stop new requests, in-flight ones end (each within --timeout), exit 0. Bad arguments: one
line on stderr, exit 2. Linux only (epoll), as in any pod.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import errno
import functools
import importlib
import itertools
import json
import math
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import IO, Any, NoReturn

PROGRAM = "svcdoctor-agent"
GRPC_MISSING = "grpcio is not installed in this image; use --image with grpcio or --protocol http"
ROW_KEYS = (
    "ts",
    "outcome",
    "status",
    "latency_ms",
    "client",
    "backend",
    "conn",
    "node",
    "upstream",
    "detail",
    "role",
    "source",
    "mode",
)
MAX_IN_FLIGHT = 512  # service mode: requests open at once (sockets are finite)
DIRECT_PARALLEL = 32  # direct mode: endpoints probed at once
SLEEP_SLICE = 0.05  # the scheduler never sleeps longer, so a signal stops it within this
MAX_LINE = 65536  # bytes of a response head or a chunk-size line
DNS_TTL = 30.0  # seconds a resolved --service name is reused
HEALTH_METHOD = "/grpc.health.v1.Health/Check"
GRPC_SERVING = 1
GRPC_STATES = {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}


Done = Callable[[], None]


class UsageError(Exception):
    """A bad command line: one line on stderr, exit 2."""


class ClosedEarly(Exception):
    """The peer closed the connection before a full response (outcome ``eof``)."""


class BadResponse(ValueError):
    """A response that is not HTTP/1.x (outcome ``error``)."""


class GrpcFailure(Exception):
    """A failed health call, already classified."""

    def __init__(self, outcome: str, status: int | None, detail: str) -> None:
        super().__init__(detail)
        self.outcome = outcome
        self.status = status


_OUTCOMES: tuple[tuple[type[BaseException], str], ...] = (
    (ConnectionRefusedError, "refused"),
    (ConnectionResetError, "reset"),
    (ClosedEarly, "eof"),
    (BrokenPipeError, "eof"),
    (TimeoutError, "timeout"),
    (OSError, "error"),
    (BadResponse, "error"),
)


def outcome_of(exc: BaseException) -> str:
    """The request-log outcome of a failed request (as the lab's load generator names them)."""
    return next((name for kind, name in _OUTCOMES if isinstance(exc, kind)), "error")


def grpc_outcome(code: str, details: str) -> str:
    """The outcome of a failed gRPC call from its status code name and details text."""
    text = details.lower()
    if code == "DEADLINE_EXCEEDED":
        return "timeout"
    if code == "UNAVAILABLE":
        if "refused" in text:
            return "refused"
        if "reset" in text:
            return "reset"
        if "closed" in text or "eof" in text:
            return "eof"
    return "error"


# Frozen dataclasses without slots=True, which needs Python 3.10.
@dataclass(frozen=True)
class Address:
    """A HOST:PORT target (HOST: an IP literal or a name)."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Options:
    """The parsed command line."""

    mode: str
    endpoints: tuple[Address, ...]
    count: int
    service: Address | None
    rate: float
    duration: float
    keepalive: bool
    protocol: str
    path: str
    host_header: str | None
    timeout: float
    client: str
    node: str | None
    upstream: str | None
    max_requests: int
    max_in_flight: int
    backend_headers: tuple[str, ...]
    grpc_service: str

    @property
    def planned_service(self) -> int:
        """Requests the service-mode schedule holds: i/rate < duration."""
        if self.mode == "direct":
            return 0
        return max(1, math.ceil(self.rate * self.duration - 1e-9))

    @property
    def planned_direct(self) -> int:
        return 0 if self.mode == "service" else self.count * len(self.endpoints)


def _ip_family(host: str) -> int | None:
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except OSError:
            continue
        return family
    return None


def parse_address(text: str) -> Address:
    """``HOST:PORT`` or ``[IPv6]:PORT``."""
    text = text.strip()
    if text.startswith("["):
        host, sep, port = text[1:].partition("]:")
    else:
        host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"not HOST:PORT: {text!r}")
    return Address(host, int(port))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse's two-line error: one line
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROGRAM, description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--mode", choices=("direct", "service", "both"), required=True)
    p.add_argument("--endpoints", default="", help="IP:PORT,IP:PORT,... (direct mode)")
    p.add_argument("--count", type=int, default=20, help="requests per endpoint (direct)")
    p.add_argument("--service", help="HOST:PORT (service mode)")
    p.add_argument("--rate", type=float, default=50.0, help="requests per second (service)")
    p.add_argument("--duration", type=float, default=60.0, help="seconds (service)")
    p.add_argument("--keepalive", action="store_true", help="reuse connections")
    p.add_argument("--protocol", choices=("http", "tcp", "grpc"), default="http")
    p.add_argument("--path", default="/")
    p.add_argument("--host-header")
    p.add_argument("--timeout", type=float, default=2.0, help="seconds per request")
    p.add_argument("--client", default=None, help="default: $HOSTNAME")
    p.add_argument("--node", default=None, help="default: $NODE_NAME")
    p.add_argument("--upstream")
    p.add_argument("--max-requests", type=int, help="default: rate*duration + count*endpoints")
    p.add_argument("--max-in-flight", type=int, default=MAX_IN_FLIGHT)
    p.add_argument("--backend-header", default="X-Backend", help="NAME[,NAME...] (service)")
    p.add_argument("--grpc-service", default="", help="service name for the health check")
    return p


def parse_args(argv: Sequence[str], environ: dict[str, str] | None = None) -> Options:
    """Options from a command line, or UsageError with a one-line message."""
    env = dict(os.environ) if environ is None else environ
    ns = _parser().parse_args(list(argv))
    endpoints = tuple(parse_address(e) for e in ns.endpoints.split(",") if e.strip())
    service = parse_address(ns.service) if ns.service else None
    if ns.mode in ("direct", "both"):
        if not endpoints:
            raise UsageError(f"--mode {ns.mode} needs --endpoints IP:PORT,...")
        if ns.count < 1:
            raise UsageError("--count must be at least 1")
    if ns.mode in ("service", "both"):
        if service is None:
            raise UsageError(f"--mode {ns.mode} needs --service HOST:PORT")
        if not (0 < ns.rate <= 100_000) or not math.isfinite(ns.rate):
            raise UsageError("--rate must be in (0, 100000]")
        if not (0 < ns.duration <= 86_400) or not math.isfinite(ns.duration):
            raise UsageError("--duration must be in (0, 86400]")
    if not (0 < ns.timeout <= 600) or not math.isfinite(ns.timeout):
        raise UsageError("--timeout must be in (0, 600]")
    if ns.max_in_flight < 1:
        raise UsageError("--max-in-flight must be at least 1")
    if not _printable(ns.path) or not ns.path.startswith("/"):
        raise UsageError("--path must start with / and be printable ASCII without spaces")
    if ns.host_header is not None and not _printable(ns.host_header):
        raise UsageError("--host-header must be printable ASCII without spaces")
    if ns.protocol == "grpc" and _grpc() is None:
        raise UsageError(GRPC_MISSING)
    opts = Options(
        mode=ns.mode,
        endpoints=endpoints,
        count=ns.count,
        service=service,
        rate=ns.rate,
        duration=ns.duration,
        keepalive=ns.keepalive,
        protocol=ns.protocol,
        path=ns.path,
        host_header=ns.host_header,
        timeout=ns.timeout,
        client=ns.client or env.get("HOSTNAME") or socket.gethostname(),
        node=ns.node or env.get("NODE_NAME") or None,
        upstream=ns.upstream,
        max_requests=0,
        max_in_flight=ns.max_in_flight,
        backend_headers=tuple(h.strip().lower() for h in ns.backend_header.split(",") if h),
        grpc_service=ns.grpc_service,
    )
    bound = ns.max_requests
    if bound is None:
        bound = opts.planned_service + opts.planned_direct
    if bound < 1:
        raise UsageError("--max-requests must be at least 1")
    return dataclasses.replace(opts, max_requests=bound)


def _printable(text: str) -> bool:
    return bool(text) and all("!" <= c <= "~" for c in text)


def _grpc() -> Any:
    """The grpc module, or None when this interpreter has no grpcio."""
    try:
        return importlib.import_module("grpc")
    except ImportError:
        return None


# --- HTTP/1.1 and TCP on raw non-blocking sockets --------------------------------------


@dataclass(frozen=True)
class Response:
    status: int
    reason: str
    headers: dict[str, str]
    keep_alive: bool  # the connection may carry another request


def parse_head(head: bytes) -> tuple[str, int, str, dict[str, str]]:
    """(version, status, reason, lower-cased headers) of a response head without its blank
    line; BadResponse when it is not HTTP/1.x."""
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise BadResponse(f"not an HTTP/1.x response: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return version, int(code), reason, headers


class ResponseReader:
    """An incremental HTTP/1.x response parser: ``feed`` it bytes as they come; it returns
    the Response once complete. Bodies are counted, not kept (memory stays small whatever
    their size); 1xx responses are skipped."""

    __slots__ = ("buffer", "chunk_left", "framing", "head", "remaining", "trailers")

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.head: tuple[str, int, str, dict[str, str]] | None = None
        self.framing = ""  # length | chunked | eof (the body ends when the server closes)
        self.remaining = 0
        self.chunk_left = 0
        self.trailers = False

    def feed(self, data: bytes, eof: bool = False) -> Response | None:
        """Add ``data`` (``eof``: the peer has closed); BadResponse on a malformed one."""
        buffer = self.buffer
        buffer += data
        while self.head is None:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(buffer) > MAX_LINE:
                    raise BadResponse(f"response head over {MAX_LINE} bytes")
                return None
            head = parse_head(bytes(buffer[:end]))
            del buffer[: end + 4]
            if not 100 <= head[1] < 200:
                self._frame(head)
        if self.framing == "length":
            self.remaining -= len(buffer)
            buffer.clear()
            complete = self.remaining <= 0
        elif self.framing == "chunked":
            complete = self._chunks()
        else:
            buffer.clear()
            complete = eof
        return self._response() if complete else None

    def _frame(self, head: tuple[str, int, str, dict[str, str]]) -> None:
        self.head = head
        status, headers = head[1], head[3]
        length = headers.get("content-length", "")
        if status in (204, 304):
            self.framing, self.remaining = "length", 0
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self.framing = "chunked"
        elif length.isdigit():
            self.framing, self.remaining = "length", int(length)
        else:
            self.framing = "eof"

    def _chunks(self) -> bool:
        """Consume chunked body bytes; True once the last chunk and the trailers are in."""
        buffer = self.buffer
        while True:
            if self.chunk_left:  # chunk data and its CRLF
                take = min(len(buffer), self.chunk_left)
                del buffer[:take]
                self.chunk_left -= take
                if self.chunk_left:
                    return False
            eol = buffer.find(b"\r\n")
            if eol < 0:
                if len(buffer) > MAX_LINE:
                    raise BadResponse(f"chunk line over {MAX_LINE} bytes")
                return False
            line = bytes(buffer[:eol])
            del buffer[: eol + 2]
            if self.trailers:
                if not line:
                    return True
                continue
            try:
                size = int(line.split(b";")[0].strip(), 16)
            except ValueError:
                raise BadResponse(f"bad chunk size {line[:40]!r}") from None
            if size == 0:
                self.trailers = True
            else:
                self.chunk_left = size + 2

    def _response(self) -> Response:
        assert self.head is not None
        version, status, reason, headers = self.head
        connection = headers.get("connection", "").lower()
        keep = self.framing != "eof" and (
            "keep-alive" in connection if version == "HTTP/1.0" else "close" not in connection
        )
        return Response(status, reason, headers, keep)


# Linux's values, so that the module imports anywhere (main() refuses to run without epoll)
_IN = getattr(select, "EPOLLIN", 0x001) | getattr(select, "EPOLLRDHUP", 0x2000)
_OUT = getattr(select, "EPOLLOUT", 0x004)
_CONNECT, _SEND, _READ, _LINGER, _IDLE, _CLOSED = range(6)


class _Poller:
    """The agent's sockets, watched through one epoll descriptor that the event loop
    watches: a socket costs an ``epoll_ctl`` in C, not asyncio's Python-level selector
    bookkeeping and a Handle per event (the agent's CPU per request halves)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.epoll = select.epoll()
        self.loop = loop
        self.handlers: dict[int, _Exchange] = {}
        loop.add_reader(self.epoll.fileno(), self._ready)

    def _ready(self) -> None:
        # No handler opens a socket (requests start from coroutines only), so a descriptor
        # number closed and reused within one batch of events cannot be misdelivered.
        handlers = self.handlers
        for fd, events in self.epoll.poll(0):
            exchange = handlers.get(fd)
            if exchange is not None:
                exchange.on_event(events)

    def close(self) -> None:
        self.loop.remove_reader(self.epoll.fileno())
        self.epoll.close()


class _Exchange:
    """One HTTP request (or TCP connect) on a non-blocking socket, a small state machine
    driven by epoll events: no task, no transport, no stream, which is what lets one core
    open a new connection 2,000+ times a second. A connection that is not reused waits for
    the server's FIN before it closes, so the TIME_WAIT state (and the port it holds) stays
    on the server, not in the agent's pod."""

    __slots__ = (
        "agent",
        "backend",
        "began",
        "conn",
        "done",
        "fd",
        "mode",
        "pending",
        "reader",
        "recorded",
        "sock",
        "state",
        "target",
        "timer",
        "ts",
    )

    def __init__(
        self, agent: Agent, mode: str, target: Address, backend: str | None, done: Done
    ) -> None:
        self.agent = agent
        self.mode = mode
        self.target = target
        self.backend = backend
        self.done = done
        self.sock: socket.socket | None = None
        self.fd = -1
        self.conn = ""
        self.reader = ResponseReader()
        self.pending = b""
        self.recorded = False
        self.state = _CONNECT

    def start(self, address: tuple[str, int], family: int) -> None:
        agent = self.agent
        self.ts = time.time()
        self.began = time.perf_counter()
        self.timer = agent.loop.call_later(agent.opts.timeout, self._expire)
        pooled = agent.pooled(self.target) if agent.opts.keepalive else None
        if pooled is not None:
            self.sock, self.conn = pooled
            self.fd = self.sock.fileno()
            self.state = _IDLE  # not in the epoll set while idle
            agent.poller.handlers[self.fd] = self
            self._send()
            return
        self.conn = agent.conn_id()
        try:
            sock = self.sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setblocking(False)
            self.fd = sock.fileno()
            err = sock.connect_ex(address)
            if err in (0, errno.EINPROGRESS):
                agent.poller.handlers[self.fd] = self
                agent.poller.epoll.register(self.fd, _OUT)
        except OSError as exc:
            self._fail(exc)
            return
        if err not in (0, errno.EINPROGRESS):
            self._fail(OSError(err, os.strerror(err)))

    def on_event(self, events: int) -> None:
        state = self.state
        if state == _CONNECT:
            assert self.sock is not None
            err = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                self._fail(OSError(err, os.strerror(err)))
            elif self.agent.opts.protocol == "tcp":
                self._record("ok", None, None, None)
                self._close()
            else:
                self._send()
        elif state == _SEND:
            self._send()
        elif state in (_READ, _LINGER):
            self._read()

    def _send(self) -> None:
        assert self.sock is not None
        data = self.pending or self.agent.request_bytes(self.target)
        try:
            sent = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError as exc:
            self._fail(exc)
            return
        epoll = self.agent.poller.epoll
        if sent < len(data):
            self.pending = data[sent:]
            if self.state == _IDLE:
                epoll.register(self.fd, _OUT)
            elif self.state != _SEND:
                epoll.modify(self.fd, _OUT)
            self.state = _SEND
            return
        self.pending = b""
        if self.state == _IDLE:
            epoll.register(self.fd, _IN)
        else:
            epoll.modify(self.fd, _IN)
        self.state = _READ

    def _read(self) -> None:
        assert self.sock is not None
        try:
            chunk = self.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            if self.state == _LINGER:
                self._close()
            else:
                self._fail(exc)
            return
        if self.state == _LINGER:  # the response is in: waiting for the server to close
            if not chunk:
                self._close()
            return
        try:
            response = self.reader.feed(chunk, eof=not chunk)
        except BadResponse as exc:
            self._fail(exc)
            return
        if response is not None:
            self._complete(response, closed=not chunk)
        elif not chunk:
            self._fail(ClosedEarly("connection closed before a full response"))

    def _complete(self, response: Response, closed: bool) -> None:
        agent = self.agent
        status = response.status
        headers = response.headers
        seen = next((headers[h] for h in agent.opts.backend_headers if h in headers), None)
        if status >= 500:
            self._record("http_error", status, f"HTTP {status} {response.reason}".strip(), seen)
        else:
            self._record("ok", status, None, seen)
        if closed:
            self._close()
        elif agent.opts.keepalive and response.keep_alive:
            assert self.sock is not None
            self.timer.cancel()
            self.state = _IDLE
            agent.poller.epoll.unregister(self.fd)  # (a mask of 0 would still report HUP)
            del agent.poller.handlers[self.fd]
            agent.idle.setdefault(self.target, []).append((self.sock, self.conn))
        elif len(agent.lingering) >= agent.opts.max_in_flight:
            self._close()  # too many servers slow to close: sockets are finite
        else:  # the server closes (we or it said Connection: close): let it close first
            self.state = _LINGER
            agent.lingering.add(self)
            self._read()

    def _record(
        self, outcome: str, status: int | None, detail: str | None, seen: str | None
    ) -> None:
        if self.recorded:
            return
        self.recorded = True
        latency = (time.perf_counter() - self.began) * 1000
        self.agent.emit(
            self.ts, outcome, status, latency, self.backend or seen, self.conn, detail, self.mode
        )
        self.done()

    def _fail(self, exc: BaseException) -> None:
        self._record(outcome_of(exc), None, str(exc) or type(exc).__name__, None)
        self._close()

    def _expire(self) -> None:
        if not self.recorded:
            self._record("timeout", None, f"no answer within {self.agent.opts.timeout:g}s", None)
        self._close()

    def close(self) -> None:
        """Close at once (the agent is exiting)."""
        self._close()

    def _close(self) -> None:
        if self.state == _CLOSED:
            return
        self.timer.cancel()
        poller = self.agent.poller
        if self.sock is not None:
            if poller.handlers.get(self.fd) is self:
                del poller.handlers[self.fd]
            self.sock.close()  # also leaves the epoll set
            self.sock = None
        if self.state == _LINGER:
            self.agent.lingering.discard(self)
        self.state = _CLOSED


def _json(value: str | None) -> str:
    return "null" if value is None else json.dumps(value)


# --- the agent ------------------------------------------------------------------------


class _Trace:
    """What a gRPC call learnt before it failed (the connection it used)."""

    __slots__ = ("conn",)

    def __init__(self) -> None:
        self.conn: str | None = None


class Agent:
    """Runs the requests of one command line and writes their rows to ``out``."""

    def __init__(self, opts: Options, out: IO[str], loop: asyncio.AbstractEventLoop) -> None:
        self.opts = opts
        self.out = out
        self.loop = loop
        self.rows = 0
        self.started = 0
        self.stopping = False
        self.reason = "finished"
        self.in_flight = 0
        self.idle: dict[Address, list[tuple[socket.socket, str]]] = {}
        self.lingering: set[_Exchange] = set()
        self.poller = _Poller(loop)
        self._slot: asyncio.Future[None] | None = None
        self._ids = itertools.count(1)
        self._lines: list[str] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._expired: set[asyncio.Task[Any]] = set()
        self._requests: dict[Address, bytes] = {}
        self._names: dict[str, tuple[str, int, float]] = {}  # host -> (ip, family, until)
        self._resolving: dict[str, asyncio.Task[None]] = {}
        self._channels: dict[Address, tuple[Any, str]] = {}
        self._grpc = _grpc() if opts.protocol == "grpc" else None
        self._fixed = (_json(opts.client), _json(opts.node), _json(opts.upstream))
        for address in (*opts.endpoints, *([opts.service] if opts.service else [])):
            family = _ip_family(address.host)
            if family is not None:  # an IP literal: resolved for good
                self._names[address.host] = (address.host, family, math.inf)

    async def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.loop.add_signal_handler(sig, self.stop, "signal")
        jobs = []
        if self.opts.mode in ("direct", "both"):
            jobs.append(self._direct())
        if self.opts.mode in ("service", "both"):
            jobs.append(self._service())
        try:
            await asyncio.gather(*jobs)
        finally:
            await self._close_all()
        self._lines.append(
            json.dumps({"agent": "done", "requests": self.rows, "reason": self.reason}) + "\n"
        )
        self._flush()
        return 0

    def stop(self, reason: str) -> None:
        """Start no more requests; ``reason`` is the done line's (the first one wins)."""
        if not self.stopping:
            self.stopping = True
            self.reason = reason
        self._wake()

    def _wake(self) -> None:
        if self._slot is not None and not self._slot.done():
            self._slot.set_result(None)

    def _take(self) -> bool:
        """Count one more request against --max-requests; False once stopped or bound."""
        if self.stopping:
            return False
        if self.started >= self.opts.max_requests:
            self.stop("bound")
            return False
        self.started += 1
        return True

    async def _direct(self) -> None:
        queue = list(self.opts.endpoints)

        async def worker() -> None:
            while queue and not self.stopping:
                endpoint = queue.pop(0)
                for _ in range(self.opts.count):
                    if not self._take():
                        return
                    finished = self.loop.create_future()
                    done = functools.partial(finished.set_result, None)
                    self._launch("direct", endpoint, str(endpoint), done)
                    await finished

        await asyncio.gather(*(worker() for _ in range(min(len(queue), DIRECT_PARALLEL))))

    async def _service(self) -> None:
        """Open loop: request i starts at t0 + i/rate (late ones start at once, catching
        up), at most --max-in-flight open at a time, none after t0 + duration."""
        assert self.opts.service is not None
        target = self.opts.service
        begin = time.monotonic()
        end = begin + self.opts.duration
        for i in range(self.opts.planned_service):
            due = begin + i / self.opts.rate
            while not self.stopping:
                delay = due - time.monotonic()
                if delay <= 0:
                    break
                await asyncio.sleep(min(delay, SLEEP_SLICE))
            if self.in_flight >= self.opts.max_in_flight:
                while self.in_flight >= self.opts.max_in_flight and not self.stopping:
                    await self._wait()
                if time.monotonic() >= end:
                    break  # held back by --max-in-flight past --duration: the run is over
            if not self._take():
                break
            self.in_flight += 1
            self._launch("service", target, None, self._finished)
        while self.in_flight:
            await self._wait()

    async def _wait(self) -> None:
        self._slot = self.loop.create_future()
        await self._slot

    def _finished(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _launch(self, mode: str, target: Address, backend: str | None, done: Done) -> None:
        """Start one request; ``done`` is called once its row is written."""
        if self.opts.protocol == "grpc":
            self._spawn(self._grpc_one(mode, target, backend), done)
            return
        cached = self._names.get(target.host)
        if cached is None or cached[2] < time.monotonic():
            self._spawn(self._resolve_then_start(mode, target, backend, done), None)
            return
        _Exchange(self, mode, target, backend, done).start((cached[0], target.port), cached[1])

    def _spawn(self, coro: Coroutine[Any, Any, None], done: Done | None) -> None:
        task = self.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if done is not None:
            task.add_done_callback(lambda _: done())

    async def _resolve_then_start(
        self, mode: str, target: Address, backend: str | None, done: Done
    ) -> None:
        """Resolve ``target``'s name (one lookup at a time per name, bounded by --timeout),
        then start the request; a failed lookup is a row with outcome ``error``."""
        ts, began = time.time(), time.perf_counter()
        lookup = self._resolving.get(target.host)
        if lookup is None:
            lookup = self._resolving[target.host] = self.loop.create_task(self._resolve(target))
            lookup.add_done_callback(lambda _: self._resolving.pop(target.host, None))
        try:
            await lookup
        except (OSError, asyncio.TimeoutError) as exc:  # noqa: UP041 (not TimeoutError on 3.9/3.10)
            latency = (time.perf_counter() - began) * 1000
            why = str(exc) or f"no answer within {self.opts.timeout:g}s"
            self.emit(
                ts,
                "error",
                None,
                latency,
                backend,
                None,
                f"cannot resolve {target.host}: {why}",
                mode,
            )
            done()
            return
        self._launch(mode, target, backend, done)

    async def _resolve(self, target: Address) -> None:
        lookup = self.loop.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
        infos = await asyncio.wait_for(lookup, self.opts.timeout)
        family, _, _, _, sockaddr = infos[0]
        self._names[target.host] = (str(sockaddr[0]), int(family), time.monotonic() + DNS_TTL)

    def emit(
        self,
        ts: float,
        outcome: str,
        status: int | None,
        latency_ms: float,
        backend: str | None,
        conn: str | None,
        detail: str | None,
        mode: str,
    ) -> None:
        """Queue one row; rows are flushed once per event-loop iteration (promptly, in
        one write)."""
        client, node, upstream = self._fixed
        self._lines.append(
            f'{{"ts":{ts!r},"outcome":"{outcome}","status":{"null" if status is None else status},'
            f'"latency_ms":{round(latency_ms, 3)!r},"client":{client},"backend":{_json(backend)},'
            f'"conn":{_json(conn)},"node":{node},"upstream":{upstream},"detail":{_json(detail)},'
            f'"role":"request","source":"agent","mode":"{mode}"}}\n'
        )
        self.rows += 1
        if len(self._lines) == 1:
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        if self._lines:
            self.out.write("".join(self._lines))
            self._lines.clear()
            self.out.flush()

    def conn_id(self) -> str:
        return f"{self.opts.client}-c{next(self._ids)}"

    def pooled(self, target: Address) -> tuple[socket.socket, str] | None:
        """An idle keep-alive connection to ``target`` that the server has not closed."""
        idle = self.idle.get(target)
        while idle:
            sock, conn = idle.pop()
            try:
                sock.recv(1, socket.MSG_PEEK)
            except (BlockingIOError, InterruptedError):
                return sock, conn  # nothing to read: still open
            except OSError:
                pass
            sock.close()  # closed by the server (b""), broken, or stray bytes: not reusable
        return None

    def request_bytes(self, target: Address) -> bytes:
        data = self._requests.get(target)
        if data is None:
            host = self.opts.host_header or str(target)
            connection = "keep-alive" if self.opts.keepalive else "close"
            data = (
                f"GET {self.opts.path} HTTP/1.1\r\nHost: {host}\r\n"
                f"User-Agent: {PROGRAM}\r\nAccept: */*\r\nConnection: {connection}\r\n\r\n"
            ).encode("latin-1")
            self._requests[target] = data
        return data

    def _expire(self, task: asyncio.Task[Any]) -> None:
        self._expired.add(task)
        task.cancel()

    async def _grpc_one(self, mode: str, target: Address, backend: str | None) -> None:
        """One gRPC health check, bounded by --timeout, and its row."""
        task = asyncio.current_task()
        assert task is not None
        trace = _Trace()
        status: int | None = None
        detail: str | None = None
        ts = time.time()
        began = time.perf_counter()
        timer = self.loop.call_later(self.opts.timeout, self._expire, task)
        try:
            status, detail = await self._grpc_check(target, trace)
            outcome = "ok" if detail is None else "http_error"
        except asyncio.CancelledError:
            if task not in self._expired:
                raise
            uncancel = getattr(task, "uncancel", None)
            if uncancel is not None:
                uncancel()
            outcome, detail = "timeout", f"no answer within {self.opts.timeout:g}s"
        except GrpcFailure as exc:
            outcome, status, detail = exc.outcome, exc.status, str(exc)
        except OSError as exc:
            outcome, detail = outcome_of(exc), str(exc) or type(exc).__name__
        finally:
            timer.cancel()
            self._expired.discard(task)
        latency = (time.perf_counter() - began) * 1000
        self.emit(ts, outcome, status, latency, backend, trace.conn, detail, mode)

    async def _grpc_check(self, target: Address, trace: _Trace) -> tuple[int, str | None]:
        """(gRPC status code, None when SERVING else the health state's name)."""
        grpc = self._grpc
        assert grpc is not None
        channel = None
        if self.opts.keepalive and target in self._channels:
            channel, trace.conn = self._channels[target]
        if channel is None:
            # a local subchannel pool: a new channel is a new connection, not a shared one
            channel = grpc.aio.insecure_channel(
                str(target), options=[("grpc.use_local_subchannel_pool", 1)]
            )
            trace.conn = self.conn_id()
            if self.opts.keepalive:
                self._channels[target] = (channel, trace.conn)
        try:
            request = _health_request(self.opts.grpc_service)
            reply = await channel.unary_unary(HEALTH_METHOD)(request, timeout=self.opts.timeout)
        except grpc.aio.AioRpcError as exc:
            code = exc.code()
            details = str(exc.details() or code.name)
            raise GrpcFailure(grpc_outcome(code.name, details), code.value[0], details) from None
        finally:
            if not self.opts.keepalive:
                await channel.close()
        state = health_status(bytes(reply))
        return 0, None if state == GRPC_SERVING else GRPC_STATES.get(state, str(state))

    async def _close_all(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for conns in self.idle.values():
            for sock, _ in conns:
                sock.close()
        self.idle.clear()
        for exchange in list(self.lingering):
            exchange.close()
        for channel, _ in self._channels.values():
            with contextlib.suppress(Exception):
                await channel.close()
        self._channels.clear()
        self.poller.close()


def _health_request(service: str) -> bytes:
    """grpc.health.v1.HealthCheckRequest{service} in protobuf wire format."""
    data = service.encode()
    return b"\x0a" + _varint(len(data)) + data if data else b""


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def health_status(reply: bytes) -> int:
    """The ``status`` field (1) of a grpc.health.v1.HealthCheckResponse; 0 when absent."""
    pos, status = 0, 0
    while pos < len(reply):
        key, pos = _read_varint(reply, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(reply, pos)
            if field == 1:
                status = value
        elif wire == 2:
            size, pos = _read_varint(reply, pos)
            pos += size
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise BadResponse(f"bad protobuf wire type {wire}")
    return status


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise BadResponse("truncated protobuf")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _raise_fd_limit(wanted: int) -> None:
    """Lift the soft open-files limit towards ``wanted`` (within the hard limit)."""
    try:
        import resource
    except ImportError:  # not POSIX
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def main(argv: Sequence[str] | None = None) -> int:
    try:
        opts = parse_args(sys.argv[1:] if argv is None else argv)
    except UsageError as exc:
        sys.stderr.write(f"{PROGRAM}: error: {exc}\n")
        return 2
    if not hasattr(select, "epoll"):
        sys.stderr.write(f"{PROGRAM}: error: needs Linux (epoll); run it in a Linux pod\n")
        return 2
    _raise_fd_limit(opts.max_in_flight * 2 + DIRECT_PARALLEL + 64)
    return asyncio.run(_run(opts))


async def _run(opts: Options) -> int:
    return await Agent(opts, sys.stdout, asyncio.get_running_loop()).run()


if __name__ == "__main__":
    sys.exit(main())
