"""The lab's sample service: one pod's container, run as its own process.

A minimal HTTP/1.1 server on raw asyncio sockets (the lab needs exact control of what a
socket does at shutdown: a closed listener, an RST, a ``Connection: close``). Every response
names the pod in ``X-Pod``. ``/readyz`` answers 200 until SIGTERM, even on a bad pod:
readiness that is shallower than the failure, as in the field.

    python -m svcdoctor.lab.pod --name api-1 --listen 127.0.0.1:0 --shutdown naive

Prints ``LISTENING host:port`` once it accepts connections. With ``--parent PID`` it dies
with that process (the lab), so a lab that is killed leaves no pod behind. Started as root
(the lab), it serves as ``nobody`` once its socket is bound: a pod is no root on the host.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import math
import os
import random
import signal
import sys
import time

from svcdoctor.lab.datapath import reset
from svcdoctor.model.dist import Dist, DistError, DistKind, parse_dist
from svcdoctor.model.scenario import FaultMode, ShutdownMode, modes

PR_SET_PDEATHSIG = 1
NOBODY = 65534  # the user (and group) a pod serves as: Debian base-passwd's nobody
IDLE_DRAIN_SECONDS = 1.0
"""How long a graceful server waits for the clients of idle keep-alive connections to send
one more request (answered with ``Connection: close``) before it closes the connections
still idle: closing an idle connection at once races with a request already on its way."""
KEEPALIVE_HELP = (
    "close a kept-alive connection idle longer than this, unanswered, when its next request "
    "arrives (the server's idle close and the proxy's reuse crossing on the wire)"
)


class Pod:
    def __init__(self, args: argparse.Namespace) -> None:
        self.name: str = args.name
        self.shutdown = ShutdownMode(args.shutdown)
        self.shutdown_delay: float = args.shutdown_delay
        self.fault = FaultMode(args.fault)
        self.latency: Dist = args.latency
        self.slow_share, self.slow_seconds = args.slow
        self.stopping = False  # SIGTERM arrived: readiness fails from now on
        self.closing = False  # graceful: every response says Connection: close
        self.in_flight = 0
        self.connections: set[asyncio.StreamWriter] = set()
        self.idle: set[asyncio.StreamWriter] = set()
        self.server: asyncio.Server | None = None
        self.rng = random.Random(args.seed)
        self.parent: int | None = args.parent
        # An app's keep-alive idle timeout, as the proxy in front meets it: a real server
        # closes at the timeout, and a request the proxy sent on the connection meanwhile
        # gets no answer (nginx: "upstream prematurely closed connection"). On a real network
        # only the requests within the close's flight time do; here every request on a
        # connection idle past the timeout does, so that seconds of load show it.
        self.keepalive_timeout: float | None = args.keepalive_timeout

    def delay(self) -> float:
        if self.slow_share and self.rng.random() < self.slow_share:
            return float(self.slow_seconds)
        return self.latency.draw(self.rng)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections.add(writer)
        last = time.monotonic()
        try:
            while True:
                self.idle.add(writer)
                request = await reader.readuntil(b"\r\n\r\n")
                self.idle.discard(writer)
                timeout = self.keepalive_timeout
                if timeout is not None and time.monotonic() - last > timeout:
                    break  # closed unanswered (see keepalive_timeout)
                self.in_flight += 1
                try:
                    keep = await self.respond(request, writer)
                finally:
                    self.in_flight -= 1
                if not keep:
                    break
                last = time.monotonic()
        except (
            asyncio.IncompleteReadError,
            ConnectionError,
            asyncio.LimitOverrunError,
            asyncio.CancelledError,
        ):
            pass  # a closed or reset connection, or the process exiting
        finally:
            self.idle.discard(writer)
            self.connections.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    async def respond(self, request: bytes, writer: asyncio.StreamWriter) -> bool:
        line = request.split(b"\r\n", 1)[0].decode("latin-1")
        path = line.split(" ")[1] if " " in line else "/"
        wants_close = b"connection: close" in request.lower()
        if path == "/readyz":
            status, body = (503, b"shutting down") if self.stopping else (200, b"ok")
        elif self.fault is FaultMode.RESET:
            reset(writer)
            return False
        elif self.fault is FaultMode.HANG:
            await asyncio.sleep(3600)
            return False
        else:
            await asyncio.sleep(self.delay())
            status, body = (
                (503, b"unavailable") if self.fault is FaultMode.HTTP_5XX else (200, b"hello")
            )
        close = wants_close or self.closing
        head = (
            f"HTTP/1.1 {status} {'OK' if status == 200 else 'Service Unavailable'}\r\n"
            f"X-Pod: {self.name}\r\nContent-Length: {len(body)}\r\n"
            f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n"
        )
        writer.write(head.encode() + body)
        await writer.drain()
        return not close

    async def serve(self, host: str, port: int) -> None:
        self.server = await asyncio.start_server(
            self.handle, host, port, backlog=1024, reuse_address=True
        )
        bound = self.server.sockets[0].getsockname()
        self.unprivileged()
        print(f"LISTENING {bound[0]}:{bound[1]}", flush=True)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        await self.terminate()

    def unprivileged(self) -> None:
        """As root: become ``NOBODY`` (no supplementary groups) now that the socket is bound.
        What is imported later must be readable by that user: the codecs are loaded first."""
        if os.geteuid() != 0:
            return
        b"".decode("latin-1")  # the codec the requests are read with
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
        if self.parent:
            die_with(self.parent)  # a change of user clears the parent-death signal

    async def terminate(self) -> None:
        """SIGTERM. naive: the listener closes and the process exits at once, breaking every
        connection. graceful: fail readiness, answer every request with ``Connection: close``,
        keep accepting for ``shutdown_delay`` seconds, then stop accepting; close the
        keep-alive connections left idle after IDLE_DRAIN_SECONDS, finish in-flight
        requests, exit."""
        self.stopping = True
        assert self.server is not None
        if self.shutdown is ShutdownMode.NAIVE:
            self.server.close()
            for writer in list(self.idle):
                reset(writer)
            return
        self.closing = True
        await asyncio.sleep(self.shutdown_delay)
        self.server.close()
        until = time.monotonic() + IDLE_DRAIN_SECONDS
        while self.connections - self.idle or (self.idle and time.monotonic() < until):
            await asyncio.sleep(0.01)
        for writer in list(self.idle):
            writer.close()


def die_with(parent: int) -> None:
    """Ask the kernel to SIGKILL this process when ``parent`` exits (Linux), and exit now
    if it already has."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        sys.exit(1)


def parse_slow(text: str, longest: float = math.inf) -> tuple[float, float]:
    """``SHARE,SECONDS``: the share of requests that take SECONDS (at most ``longest``);
    raises ValueError with a one-line reason."""
    share, _, seconds = text.partition(",")
    try:
        pair = (float(share), float(seconds))
    except ValueError:
        raise ValueError(f"{text!r}: expected SHARE,SECONDS such as 0.2,3") from None
    if not 0 <= pair[0] <= 1 or not 0 <= pair[1] <= longest:
        raise ValueError(f"{text!r}: SHARE in [0, 1], SECONDS in [0, {longest:g}]")
    return pair


def _slow(text: str) -> tuple[float, float]:
    try:
        return parse_slow(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _dist(text: str) -> Dist:
    try:
        return parse_dist(text)
    except DistError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="svcdoctor lab pod")
    parser.add_argument("--name", required=True)
    parser.add_argument("--run", default="", help="the lab run's prefix (to find leftovers)")
    parser.add_argument("--parent", type=int, help="exit when this process exits")
    parser.add_argument("--listen", default="127.0.0.1:0")
    parser.add_argument("--shutdown", choices=modes(ShutdownMode), default="naive")
    parser.add_argument("--shutdown-delay", type=float, default=0.0)
    parser.add_argument("--fault", choices=modes(FaultMode), default="none")
    parser.add_argument("--latency", type=_dist, default=Dist(DistKind.EXP, 0.005), help="seconds")
    parser.add_argument("--slow", type=_slow, default=(0.0, 0.0), help="SHARE,SECONDS")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keepalive-timeout", type=float, default=None, help=KEEPALIVE_HELP)
    args = parser.parse_args(argv)
    if args.parent:
        die_with(args.parent)
    host, _, port = args.listen.rpartition(":")
    asyncio.run(Pod(args).serve(host, int(port)))
    sys.exit(0)


if __name__ == "__main__":
    main()
