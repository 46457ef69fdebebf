"""How a Service's virtual IP reaches pods: two implementations behind one interface.

* ``UserspaceDatapath``: one asyncio L4 proxy per node on loopback that picks a backend per
  *connection* from its current endpoint view. No privileges needed.
* ``KernelDatapath`` (``kernel.py``): network namespaces per node and pod, and the Service
  VIP programmed with kube-proxy's iptables structure; connection tracking is the kernel's.

Both take endpoint views through ``program(node, backends)``; when a node applies a change
(propagation delay, min-sync batching) is decided by the caller, as kube-proxy's own
timing is.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from svcdoctor.errors import SvcdoctorError
from svcdoctor.lab.metrics import CONNECT_FAILED, NO_ENDPOINT, Outcome, ProxyTally, RequestCounts


class LabError(SvcdoctorError, RuntimeError):
    """The lab could not run the scenario as specified (a one-line reason); exit 1."""

    exit_code = 1


PICKS_KEPT = 8  # per client port, the proxy's picks kept to attribute failed requests


@dataclass(frozen=True, slots=True)
class Backend:
    """A ready pod behind the Service, and where it listens."""

    pod: str
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class PodNet:
    """Where a pod process listens, and the namespace it runs in (``None``: the host's)."""

    ip: str
    port: int
    netns: str | None = None


class Datapath(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def errors(self) -> list[str]:
        """What went wrong in the datapath itself (a run with errors is invalid)."""
        ...

    async def start(self, nodes: int) -> None: ...
    async def add_pod(self, pod: str) -> PodNet: ...
    async def remove_pod(self, pod: str) -> None: ...
    def program(self, node: int, backends: list[Backend]) -> None: ...
    def service_address(self, node: int) -> tuple[str, int]: ...
    def client_socket(self, node: int) -> socket.socket: ...
    def probe_socket(self, pod: PodNet) -> socket.socket: ...
    def backend_of(self, node: int, local_port: int, at: float | None = None) -> str | None: ...
    def node_netns(self, node: int) -> str | None: ...
    def break_node(self, node: int, share: float) -> None: ...
    async def close(self) -> None: ...


def _plain_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    return sock


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with an RST (SO_LINGER 0)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def get_status(
    sock: socket.socket, address: tuple[str, int], path: str, timeout: float
) -> int:
    """GET ``path`` over ``sock`` (a fresh, unconnected socket) and return the status code.
    The socket is always closed; failures raise OSError, TimeoutError or EOFError."""
    loop = asyncio.get_running_loop()
    writer: asyncio.StreamWriter | None = None
    try:
        await asyncio.wait_for(loop.sock_connect(sock, address), timeout)
        reader, writer = await asyncio.open_connection(sock=sock)
        writer.write(f"GET {path} HTTP/1.1\r\nHost: pod\r\nConnection: close\r\n\r\n".encode())
        line = await asyncio.wait_for(reader.readline(), timeout)
        if not line:
            raise EOFError("closed before a response")
        return int(line.split()[1])
    except (ValueError, IndexError):
        raise EOFError("not an HTTP response") from None
    finally:
        if writer is not None:
            writer.close()
        else:
            sock.close()


@dataclass
class _Proxy:
    backends: list[Backend] = field(default_factory=list)
    server: asyncio.Server | None = None
    port: int = 0
    # client port → each pick for a connection from it: (time, pod); ports are used again
    chosen: dict[int, list[tuple[float, str]]] = field(default_factory=dict)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)


class UserspaceDatapath:
    """kube-proxy's userspace mode, per node: a connection picks one ready backend at
    random and keeps it for its whole life; a backend that refuses resets the client. A
    broken node's proxy (``break_node``) resets that share of its new connections.

    Each node's proxy counts the requests it passes as an ingress would (``requests``,
    ``metrics.ProxyTally``): the statuses of the responses, 502 for a refused connect or
    an upstream that closed under a request, 503 with no endpoint, 499 when the client
    left. A connection failed before the client's request was read counts as one request
    (the one the client opened it for)."""

    name = "userspace"

    def __init__(self, seed: int = 0) -> None:
        self.proxies: list[_Proxy] = []
        self.errors: list[str] = []
        self.rng = random.Random(seed)
        self.broken: dict[int, float] = {}  # node → share of connections it drops
        self.requests: list[RequestCounts] = []  # per node: what its proxy passed

    async def start(self, nodes: int) -> None:
        for node in range(nodes):
            self.requests.append(RequestCounts())
            proxy = _Proxy()
            proxy.server = await asyncio.start_server(
                functools.partial(self._accept, node), "127.0.0.1", 0, backlog=4096
            )
            proxy.port = proxy.server.sockets[0].getsockname()[1]
            self.proxies.append(proxy)

    async def add_pod(self, pod: str) -> PodNet:
        return PodNet("127.0.0.1", 0)

    async def remove_pod(self, pod: str) -> None:
        return None

    def program(self, node: int, backends: list[Backend]) -> None:
        self.proxies[node].backends = list(backends)

    def service_address(self, node: int) -> tuple[str, int]:
        return ("127.0.0.1", self.proxies[node].port)

    def client_socket(self, node: int) -> socket.socket:
        return _plain_socket()

    def probe_socket(self, pod: PodNet) -> socket.socket:
        return _plain_socket()

    def backend_of(self, node: int, local_port: int, at: float | None = None) -> str | None:
        picks = self.proxies[node].chosen.get(local_port)
        if not picks:
            return None
        if at is None:
            return picks[-1][1]
        return min(picks, key=lambda pick: abs(pick[0] - at))[1]  # the port's connection then

    def node_netns(self, node: int) -> str | None:
        return None  # the nodes' clients run on the host, with their node's proxy address

    def break_node(self, node: int, share: float) -> None:
        """From now on, node ``node``'s route to the Service resets ``share`` of the new
        connections (a broken node datapath: the ``broken-node`` scenario)."""
        self.broken[node] = share

    async def _accept(
        self, node: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        proxy = self.proxies[node]
        task = asyncio.current_task()
        if task is not None:  # close() cancels the connections still being piped
            proxy.tasks.add(task)
            task.add_done_callback(proxy.tasks.discard)
        peer = writer.get_extra_info("peername")
        counts = self.requests[node]
        if not proxy.backends or self.rng.random() < self.broken.get(node, 0.0):
            counts.add(CONNECT_FAILED if proxy.backends else NO_ENDPOINT)
            reset(writer)
            return
        backend = self.rng.choice(proxy.backends)
        picks = proxy.chosen.setdefault(peer[1], [])
        picks.append((time.time(), backend.pod))
        del picks[:-PICKS_KEPT]  # a long serve: a port's latest connections only
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(backend.host, backend.port), 2.0
            )
        except (OSError, TimeoutError):
            counts.add(Outcome(CONNECT_FAILED.status, backend.pod, CONNECT_FAILED.flags))
            reset(writer)  # connection refused by the pod: the client sees a reset
            return
        tally = ProxyTally(counts, backend.pod)
        ended: list[str] = []  # which side's stream ended first
        await asyncio.gather(
            _pipe(reader, up_writer, tally.from_client, lambda: ended.append("client")),
            _pipe(up_reader, writer, tally.from_upstream, lambda: ended.append("upstream")),
        )
        tally.close(upstream_first=bool(ended) and ended[0] == "upstream")

    async def close(self) -> None:
        for proxy in self.proxies:
            if proxy.server:
                proxy.server.close()
            for task in list(proxy.tasks):
                task.cancel()
            await asyncio.gather(*proxy.tasks, return_exceptions=True)


async def _pipe(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    seen: Callable[[bytes], None] | None = None,
    ended: Callable[[], None] | None = None,
) -> None:
    """Copy bytes until EOF; an RST on one side becomes an RST on the other. ``seen`` is
    shown each chunk read, ``ended`` told when the reading side ended (EOF or reset)."""
    try:
        while data := await reader.read(65536):
            if seen:
                seen(data)
            writer.write(data)
            await writer.drain()
        if ended:
            ended()
        with contextlib.suppress(OSError):
            writer.write_eof()
    except (ConnectionError, OSError):
        if ended:
            ended()
        reset(writer)
    except asyncio.CancelledError:
        reset(writer)
        raise


SocketFactory = Callable[[], socket.socket]
