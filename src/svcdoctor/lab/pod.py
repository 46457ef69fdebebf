"""The lab's sample service: one pod's container, run as its own process.

A minimal HTTP/1.1 server on raw asyncio sockets (the lab needs exact control of what a
socket does at shutdown: a closed listener, an RST, a ``Connection: close``). Every response
names the pod in ``X-Pod``. ``/readyz`` always answers 200, even on a bad pod: readiness
that is shallower than the failure, as in the field.

    python -m svcdoctor.lab.pod --name api-1 --listen 127.0.0.1:0 --shutdown naive

Prints ``LISTENING host:port`` once it accepts connections.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import signal
import sys

from svcdoctor.lab.datapath import reset


class Pod:
    def __init__(self, args: argparse.Namespace) -> None:
        self.name: str = args.name
        self.shutdown: str = args.shutdown
        self.fault: str = args.fault
        self.latency_ms: float = args.latency_ms
        self.slow_share: float = args.slow_share
        self.slow_ms: float = args.slow_ms
        self.stopping = False
        self.in_flight = 0
        self.idle: set[asyncio.StreamWriter] = set()
        self.server: asyncio.Server | None = None
        self.rng = random.Random(args.seed)

    def delay(self) -> float:
        if self.slow_share and self.rng.random() < self.slow_share:
            return self.slow_ms / 1000
        return self.rng.expovariate(1000 / self.latency_ms) if self.latency_ms else 0.0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                self.idle.add(writer)
                request = await reader.readuntil(b"\r\n\r\n")
                self.idle.discard(writer)
                self.in_flight += 1
                try:
                    keep = await self.respond(request, writer)
                finally:
                    self.in_flight -= 1
                if not keep:
                    break
        except (
            asyncio.IncompleteReadError,
            ConnectionError,
            asyncio.LimitOverrunError,
            asyncio.CancelledError,
        ):
            pass  # a closed or reset connection, or the process exiting
        finally:
            self.idle.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    async def respond(self, request: bytes, writer: asyncio.StreamWriter) -> bool:
        line = request.split(b"\r\n", 1)[0].decode("latin-1")
        path = line.split(" ")[1] if " " in line else "/"
        wants_close = b"connection: close" in request.lower()
        if path == "/readyz":
            status, body = 200, b"ok"
        elif self.fault == "reset":
            reset(writer)
            return False
        elif self.fault == "hang":
            await asyncio.sleep(3600)
            return False
        else:
            await asyncio.sleep(self.delay())
            status, body = (503, b"unavailable") if self.fault == "5xx" else (200, b"hello")
        close = wants_close or (self.stopping and self.shutdown == "graceful")
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
        print(f"LISTENING {bound[0]}:{bound[1]}", flush=True)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        await self.terminate()

    async def terminate(self) -> None:
        """SIGTERM. naive: the listener closes and the process exits at once, breaking every
        connection. graceful: stop accepting, answer in-flight requests with
        ``Connection: close``, close idle keep-alive connections, then exit."""
        self.stopping = True
        assert self.server is not None
        self.server.close()
        if self.shutdown == "naive":
            for writer in list(self.idle):
                reset(writer)
            return
        for writer in list(self.idle):
            writer.close()
        while self.in_flight:
            await asyncio.sleep(0.01)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="svcdoctor lab pod")
    parser.add_argument("--name", required=True)
    parser.add_argument("--listen", default="127.0.0.1:0")
    parser.add_argument("--shutdown", choices=["naive", "graceful"], default="naive")
    parser.add_argument("--fault", choices=["none", "reset", "5xx", "hang"], default="none")
    parser.add_argument("--latency-ms", type=float, default=5.0)
    parser.add_argument("--slow-share", type=float, default=0.0)
    parser.add_argument("--slow-ms", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    asyncio.run(Pod(args).serve(host, int(port)))
    sys.exit(0)


if __name__ == "__main__":
    main()
