"""A real proxy in front of the lab's pods (nginx as the ingress, haproxy as a load
balancer): its process, in a network namespace of its own on the kernel datapath or on
loopback on the userspace one, dying with the lab (``lab clean`` finds what a crash left),
waited for until it listens and stopped with SIGTERM, then SIGKILL; and the datapath whose
clients go through it, everything else (pods, kube-proxy's rules, probes) being the inner
datapath's."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar, Protocol

from svcdoctor.lab.datapath import Backend, Datapath, LabError, PodNet
from svcdoctor.lab.kernel import KernelDatapath

START_SECONDS = 10.0  # a proxy listens within this, or the run fails
STOP_SECONDS = 5.0  # after SIGTERM, then SIGKILL to its process group
PR_SET_PDEATHSIG = 1  # prctl(2)


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM (nginx's fast shutdown, haproxy's hard stop) when
    the lab exits."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def binary(name: str) -> str:
    """The proxy's program: on PATH, else where Debian installs it (``/usr/sbin``, which a
    user's PATH may lack)."""
    return shutil.which(name) or f"/usr/sbin/{name}"


def missing(name: str, needed: str) -> str | None:
    """``None`` when the proxy's program ``name`` can run here, else why not (``needed``:
    what needs it)."""
    if Path(binary(name)).is_file():
        return None
    return f"{needed} needs {name} (apt-get install {name})"


def read_lines(path: Path) -> list[str]:
    """A proxy's log, line by line (none when it wrote none)."""
    try:
        return path.read_text(errors="replace").splitlines()
    except OSError:
        return []


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spawn(
    command: list[str], folder: Path, netns: str | None, stdout: str | None, stderr: str
) -> subprocess.Popen[bytes]:
    """The proxy's process, in ``netns`` when given, working in ``folder`` (its standard
    output and error in files there; no output file: discarded), in a session of its own,
    on UTC. Call it from the event loop's thread (the parent-death signal is the calling
    thread's)."""
    if netns:
        command = ["ip", "netns", "exec", netns, *command]
    with contextlib.ExitStack() as files:
        out = files.enter_context((folder / stdout).open("wb")) if stdout else None
        return subprocess.Popen(
            command,
            cwd=folder,
            env={"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin"), "TZ": "UTC"},
            stdin=subprocess.DEVNULL,
            stdout=out or subprocess.DEVNULL,
            stderr=files.enter_context((folder / stderr).open("wb")),
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 (no threads fork here)
        )


async def until_listening(
    process: subprocess.Popen[bytes],
    probe: socket.socket,
    listen: tuple[str, int],
    name: str,
    why: Callable[[], str],
) -> None:
    """Wait until ``process`` accepts on ``listen`` (``probe``: an unconnected socket from
    where the clients are); ``LabError`` with ``why()`` when it exits, or after
    ``START_SECONDS``."""
    loop = asyncio.get_running_loop()
    end = time.monotonic() + START_SECONDS
    with probe:
        while True:
            if process.poll() is not None:
                raise LabError(f"{name} did not start: {why()}")
            try:
                await asyncio.wait_for(loop.sock_connect(probe, listen), 0.5)
                return
            except (OSError, TimeoutError) as exc:
                if time.monotonic() > end:
                    raise LabError(f"{name} did not listen within {START_SECONDS:g} s") from exc
                await asyncio.sleep(0.05)


def last_complaint(path: Path, marks: tuple[str, ...]) -> str | None:
    """The last line of ``path`` holding one of ``marks`` (else its last line; ``None``
    when it is unreadable or empty)."""
    with contextlib.suppress(OSError):
        lines = path.read_text(errors="replace").strip().splitlines()
        bad = [ln for ln in lines if any(m in ln for m in marks)] or lines
        if bad:
            return bad[-1].strip()
    return None


async def stop(process: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM, then SIGKILL to its process group after ``STOP_SECONDS``."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        await asyncio.wait_for(asyncio.to_thread(process.wait), STOP_SECONDS)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await asyncio.to_thread(process.wait)


async def until(done: Callable[[], bool], timeout: float, what: str) -> None:
    """Wait until ``done()``; after ``timeout`` seconds, a LabError saying ``what`` did not
    happen in time."""
    end = time.monotonic() + timeout
    while not done():
        if time.monotonic() > end:
            raise LabError(f"{what} within {timeout:g} s")
        await asyncio.sleep(0.05)


class Hop(Protocol):
    """A proxy's view of the endpoints: told every change, and whether it applied them."""

    def watch(self, backends: Sequence[Backend]) -> None: ...

    @property
    def settled(self) -> bool: ...


class FrontedDatapath(abc.ABC):
    """What a datapath behind a proxy passes to its inner datapath unchanged; its proxy
    starts after the inner datapath (``start_hop``, each proxy's own, once ``unavailable``
    said it can run here) and stops first when it closes (``stop_hop``), the pods'
    namespaces go whatever happened."""

    inner: Datapath
    settle_seconds: ClassVar[float]  # the hop applies the last change within this
    unsettled: ClassVar[str]  # the error when it did not
    reload_pause: ClassVar[float] = 0.0  # after it applied it, until it routes by it

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    @abc.abstractmethod
    def hop(self) -> Hop | None:
        """The proxy's view of the endpoints, once ``start_hop`` made it."""

    def watch(self, backends: Sequence[Backend]) -> None:
        if self.hop is not None:
            self.hop.watch(backends)

    async def settled(self) -> None:
        """Wait until the proxy routes to what the endpoints last said."""
        await until(
            lambda: self.hop is None or self.hop.settled, self.settle_seconds, self.unsettled
        )
        await asyncio.sleep(self.reload_pause)

    @property
    def errors(self) -> list[str]:
        """One list: the inner datapath's errors and the proxy's."""
        return self.inner.errors

    @abc.abstractmethod
    def unavailable(self) -> LabError | None:
        """Why the proxy cannot run here (a usage problem), else ``None``."""

    @abc.abstractmethod
    async def start_hop(self) -> None:
        """Start the proxy in front of the inner datapath (which runs)."""

    async def start(self, nodes: int) -> None:
        problem = self.unavailable()
        if problem is not None:
            raise problem
        await self.inner.start(nodes)
        await self.start_hop()

    @abc.abstractmethod
    async def stop_hop(self) -> None:
        """Stop the proxy (and read what it logged); the pods and nodes run on."""

    async def close(self) -> None:
        try:
            await self.stop_hop()
        finally:
            await self.inner.close()

    async def listen_address(
        self, tag: str, ip: str, port: int
    ) -> tuple[tuple[str, int], str | None]:
        """Where the proxy listens, and its network namespace: on the kernel datapath a
        namespace of its own at ``ip:port`` on the fabric; else a free port on loopback."""
        if isinstance(self.inner, KernelDatapath):
            netns = await asyncio.to_thread(self.inner.add_namespace, tag, ip)
            return (ip, port), netns
        return ("127.0.0.1", free_port()), None

    async def add_pod(self, pod: str) -> PodNet:
        return await self.inner.add_pod(pod)

    async def remove_pod(self, pod: str) -> None:
        await self.inner.remove_pod(pod)

    def program(self, node: int, backends: list[Backend]) -> None:
        self.inner.program(node, backends)

    def client_socket(self, node: int) -> socket.socket:
        return self.inner.client_socket(node)

    def probe_socket(self, pod: PodNet) -> socket.socket:
        return self.inner.probe_socket(pod)

    def node_netns(self, node: int) -> str | None:
        return self.inner.node_netns(node)

    def break_node(self, node: int, share: float) -> None:
        self.inner.break_node(node, share)
