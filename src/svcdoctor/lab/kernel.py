"""The kernel datapath: pods and nodes in their own network namespaces, the Service VIP
programmed like kube-proxy's iptables mode.

Layout (every name carries the run's prefix, so runs never collide and ``lab clean`` can
find leftovers):

* ``PREFIX-fab``: a bridge that every pod and node namespace is wired to by a veth pair
  (10.233.0.0/16, addresses that exist only inside these namespaces);
* ``PREFIX-nI``: node I; its clients connect to the VIP, its ``nat`` table holds
  ``KUBE-SERVICES → KUBE-SVC-<hash> → KUBE-SEP-<hash>`` with ``-m statistic --mode random
  --probability 1/(n-i)`` and DNAT, replaced atomically by ``iptables-restore``;
* ``PREFIX-pJ``: pod J, its process listening on its own IP.

Connection tracking is the kernel's: an established connection keeps its backend after a
rule change, exactly as on a real node. Which pod the rules picked for each connection is
read from each node's conntrack event stream (``conntrack -E``): the table itself forgets a
refused connection at once, and those are the failures whose backend matters most.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ctypes
import hashlib
import os
import re
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from svcdoctor.lab.datapath import Backend, LabError, PodNet
from svcdoctor.lab.metrics import Conntrack, parse_conntrack_stat

VIP = "10.96.77.10"
VIP_PORT = 80
POD_PORT = 8080
SUBNET = "10.233"
SERVICE = "lab/api:http"
CLONE_NEWNET = 0x40000000
NETNS_DIR = "/var/run/netns"
PREFIX_PATTERN = re.compile(r"^svcd[0-9a-f]{6}-")


class KernelUnavailable(LabError):
    """The kernel datapath cannot run here (not root, no CAP_NET_ADMIN/CAP_SYS_ADMIN, or
    ip/iptables missing): a usage problem (exit 2), the userspace datapath is the way."""

    exit_code = 2


CAP_NET_ADMIN = 12
CAP_SYS_ADMIN = 21  # `ip netns add` bind-mounts the namespace (mount --make-shared)


def effective_capabilities(status: str | None = None) -> int | None:
    """The effective capability set of this process (``/proc/self/status``), or None when
    it cannot be read."""
    try:
        text = status if status is not None else Path("/proc/self/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return None


def available() -> str | None:
    """``None`` when the kernel datapath can run, else the reason it cannot."""
    if os.geteuid() != 0:
        return "the kernel datapath needs root (network namespaces and iptables)"
    caps = effective_capabilities()
    if caps is not None:
        lacking = [
            name
            for name, bit in (("CAP_NET_ADMIN", CAP_NET_ADMIN), ("CAP_SYS_ADMIN", CAP_SYS_ADMIN))
            if not caps >> bit & 1
        ]
        if lacking:
            return (
                f"the kernel datapath needs {' and '.join(lacking)} (network namespaces and "
                "iptables), which this root lacks (an unprivileged container? run it with "
                "--privileged or --cap-add NET_ADMIN --cap-add SYS_ADMIN)"
            )
    missing = [tool for tool in ("ip", "iptables-restore", "conntrack") if not shutil.which(tool)]
    if missing:
        return (
            f"the kernel datapath needs {', '.join(missing)} (apt-get install iproute2 "
            "iptables conntrack)"
        )
    return None


def _refused(message: str) -> bool:
    """Whether a failed ``ip``/``iptables`` call was refused for want of privileges (root
    in a container without CAP_NET_ADMIN/CAP_SYS_ADMIN: mount --make-shared /run/netns)."""
    lowered = message.lower()
    return any(s in lowered for s in ("not permitted", "permission denied", "cannot mount"))


def _run(*args: str, check: bool = True, input_text: str | None = None) -> str:
    done = subprocess.run(
        args, capture_output=True, text=True, timeout=30, check=False, input=input_text
    )
    if check and done.returncode:
        raise LabError(f"{' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def _chain(kind: str, text: str) -> str:
    """kube-proxy's chain names: a hash of the service port (and endpoint)."""
    digest = hashlib.sha256(text.encode()).digest()
    return f"KUBE-{kind}-{base64.b32encode(digest).decode()[:16]}"


def rules(backends: list[Backend], broken: float = 0.0) -> str:
    """The ``iptables-restore`` input for a node's endpoint view, as kube-proxy writes it;
    ``broken``: the share of new connections to the Service the node rejects (a broken node
    route: not kube-proxy's, the ``broken-node`` scenario's fault, matched on the original
    destination as the connection is DNATed before the filter table sees it)."""
    svc = _chain("SVC", SERVICE + "tcp")
    lines = [
        "*filter",
        ":KUBE-SERVICES - [0:0]",
    ]
    if broken > 0:
        lines.append(
            f"-A OUTPUT -p tcp -m conntrack --ctstate NEW --ctorigdst {VIP}/32 "
            f'--ctorigdstport {VIP_PORT} -m comment --comment "lab: broken node route" '
            f"-m statistic --mode random --probability {min(broken, 1.0):.11f} "
            "-j REJECT --reject-with tcp-reset"
        )
    lines.append(
        '-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service '
        'portals" -j KUBE-SERVICES'
    )
    if not backends:
        lines.append(
            f'-A KUBE-SERVICES -d {VIP}/32 -p tcp -m comment --comment "{SERVICE} has '
            f'no endpoints" -m tcp --dport {VIP_PORT} -j REJECT --reject-with '
            "icmp-port-unreachable"
        )
    lines += ["COMMIT", "*nat", ":KUBE-SERVICES - [0:0]", f":{svc} - [0:0]"]
    seps = [(_chain("SEP", SERVICE + "tcp" + f"{b.host}:{b.port}"), b) for b in backends]
    lines += [f":{sep} - [0:0]" for sep, _ in seps]
    lines.append('-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES')
    lines.append(
        f'-A KUBE-SERVICES -d {VIP}/32 -p tcp -m comment --comment "{SERVICE} cluster '
        f'IP" -m tcp --dport {VIP_PORT} -j {svc}'
    )
    for i, (sep, b) in enumerate(seps):
        left = len(seps) - i
        chance = "" if left == 1 else (f"-m statistic --mode random --probability {1 / left:.11f} ")
        lines.append(
            f'-A {svc} -m comment --comment "{SERVICE} -> {b.host}:{b.port}" {chance}-j {sep}'
        )
        lines.append(
            f'-A {sep} -p tcp -m comment --comment "{SERVICE}" -m tcp -j DNAT '
            f"--to-destination {b.host}:{b.port}"
        )
    lines.append("COMMIT")
    return "\n".join(lines) + "\n"


_libc = ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def entered(netns: str) -> Iterator[None]:
    """Switch this thread into a network namespace (sockets made inside stay there)."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"{NETNS_DIR}/{netns}", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {netns} failed")
        try:
            yield
        finally:
            if _libc.setns(home, CLONE_NEWNET) != 0:  # pragma: no cover - would be fatal
                raise OSError(ctypes.get_errno(), "setns back failed")
    finally:
        os.close(target)
        os.close(home)


def socket_in(netns: str) -> socket.socket:
    with entered(netns):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setblocking(False)
    return sock


def read_conntrack(netns: str) -> Conntrack:
    """The conntrack table of ``netns`` (run in a thread: it enters the namespace)."""
    with entered(netns):
        with open("/proc/sys/net/netfilter/nf_conntrack_count") as f:
            entries = int(f.read().strip())
        with open("/proc/sys/net/netfilter/nf_conntrack_max") as f:
            limit = int(f.read().strip())
        with open("/proc/thread-self/net/stat/nf_conntrack") as f:
            stats = parse_conntrack_stat(f.read())
    return Conntrack(entries, limit, stats)


ROTATE_BYTES = 32 << 20  # a node's conntrack event file moves to a fresh one past this
KEEP_SECONDS = 900.0  # a port's older connections are forgotten (its latest one is kept)


@dataclass
class _Watcher:
    """``conntrack -E`` in a node's namespace: every new connection to the VIP with its
    DNAT target, written to an unnamed file (nothing is left behind; the process dies with
    the namespace)."""

    node: int
    ns: str
    proc: subprocess.Popen[bytes]
    sink: IO[bytes]
    read_to: int = 0

    @classmethod
    def start(cls, node: int, ns: str) -> _Watcher:
        sink = tempfile.TemporaryFile()  # noqa: SIM115 (closed by the datapath)
        proc = subprocess.Popen(
            [
                *("ip", "netns", "exec", ns, "conntrack", "-E", "-e", "NEW"),
                *("-p", "tcp", "--orig-dst", VIP, "-o", "timestamp"),
            ],
            stdout=sink,
            stderr=subprocess.DEVNULL,
        )
        return cls(node, ns, proc, sink)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@dataclass
class KernelDatapath:
    prefix: str
    seed: int = 0
    name: str = "kernel"
    nodes: int = 0
    pods: dict[str, PodNet] = field(default_factory=dict)
    namespaces: list[str] = field(default_factory=list)
    _next_pod: int = 0
    _want: dict[int, list[Backend]] = field(default_factory=dict)
    _syncing: dict[int, asyncio.Task[None]] = field(default_factory=dict)
    _by_ip: dict[str, str] = field(default_factory=dict)
    # (node, client port) → every connection it made: (kernel time of the SYN, pod)
    _conntrack: dict[tuple[int, int], list[tuple[float, str]]] = field(default_factory=dict)
    _watchers: list[_Watcher] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # failed rule syncs: the run is invalid
    broken: dict[int, float] = field(default_factory=dict)  # node → share it rejects

    @property
    def fabric(self) -> str:
        return f"{self.prefix}-fab"

    def _netns(self, name: str) -> str:
        ns = f"{self.prefix}-{name}"
        _run("ip", "netns", "add", ns)
        self.namespaces.append(ns)
        _run("ip", "-n", ns, "link", "set", "lo", "up")
        return ns

    def _wire(self, ns: str, tag: str, address: str) -> None:
        """A veth pair from the namespace's eth0 to the fabric bridge."""
        host_end = f"{self.prefix}{tag}"
        _run(
            "ip",
            "link",
            "add",
            host_end,
            "netns",
            self.fabric,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            ns,
        )
        _run("ip", "-n", self.fabric, "link", "set", host_end, "master", "br0", "up")
        _run("ip", "-n", ns, "addr", "add", f"{address}/16", "dev", "eth0")
        _run("ip", "-n", ns, "link", "set", "eth0", "up")
        _run("ip", "-n", ns, "route", "add", "default", "dev", "eth0")

    def add_namespace(self, tag: str, address: str) -> str:
        """A namespace of its own on the fabric at ``address`` (the ingress's), removed with
        the others (and whatever runs in it) by ``close``."""
        ns = self._netns(tag)
        self._wire(ns, tag, address)
        return ns

    async def start(self, nodes: int) -> None:
        reason = available()
        if reason:
            raise KernelUnavailable(reason)
        try:
            await asyncio.to_thread(self._build, nodes)
        except LabError as exc:
            if not _refused(str(exc)):
                raise
            raise KernelUnavailable(
                f"the kernel datapath is not allowed here ({str(exc).splitlines()[0]})"
            ) from None

    def _build(self, nodes: int) -> None:
        fab = self._netns("fab")
        _run("ip", "-n", fab, "link", "add", "br0", "type", "bridge")
        _run("ip", "-n", fab, "addr", "add", f"{SUBNET}.255.1/16", "dev", "br0")
        _run("ip", "-n", fab, "link", "set", "br0", "up")
        for node in range(nodes):
            ns = self._netns(f"n{node}")
            self._wire(ns, f"n{node}", f"{SUBNET}.255.{10 + node}")
            # keep finished and refused connections in conntrack for the run, so every
            # request can be attributed to the backend the rules picked
            for key in ("tcp_timeout_close", "tcp_timeout_time_wait"):
                _run(
                    "ip",
                    "netns",
                    "exec",
                    ns,
                    "sysctl",
                    "-q",
                    "-w",
                    f"net.netfilter.nf_conntrack_{key}=600",
                    check=False,
                )
            _run(
                "ip",
                "netns",
                "exec",
                ns,
                "iptables-restore",
                "-w",
                "5",
                input_text=rules([], self.broken.get(node, 0.0)),
            )
            self._watchers.append(_Watcher.start(node, ns))
        self.nodes = nodes

    async def add_pod(self, pod: str) -> PodNet:
        index = self._next_pod
        self._next_pod += 1
        address = f"{SUBNET}.{1 + index // 200}.{10 + index % 200}"

        def build() -> str:
            ns = self._netns(f"p{index}")
            self._wire(ns, f"p{index}", address)
            return ns

        ns = await asyncio.to_thread(build)
        net = PodNet(address, POD_PORT, ns)
        self.pods[pod] = net
        self._by_ip[address] = pod
        return net

    async def remove_pod(self, pod: str) -> None:
        return None  # the namespace stays until close(): its conntrack entries are evidence

    def program(self, node: int, backends: list[Backend]) -> None:
        self._want[node] = [b for b in backends if b.host != "127.0.0.1"]
        if node not in self._syncing or self._syncing[node].done():
            self._syncing[node] = asyncio.get_running_loop().create_task(self._sync(node))

    async def _sync(self, node: int) -> None:
        """Apply the latest wanted view atomically; views that arrive meanwhile coalesce."""
        while node in self._want:
            backends = self._want.pop(node)
            proc = await asyncio.create_subprocess_exec(
                "ip",
                "netns",
                "exec",
                f"{self.prefix}-n{node}",
                "iptables-restore",
                "-w",
                "5",
                stdin=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            _, err = await proc.communicate(rules(backends, self.broken.get(node, 0.0)).encode())
            if proc.returncode:
                self.errors.append(f"iptables-restore on node {node}: {err.decode().strip()}")

    def service_address(self, node: int) -> tuple[str, int]:
        return (VIP, VIP_PORT)

    def client_socket(self, node: int) -> socket.socket:
        return socket_in(f"{self.prefix}-n{node}")

    def probe_socket(self, pod: PodNet) -> socket.socket:
        return socket_in(self.fabric)  # the kubelet probes from the node's side of the bridge

    def backend_of(self, node: int, local_port: int, at: float | None = None) -> str | None:
        """The pod the rules gave node ``node``'s connection from ``local_port`` (the one
        made nearest ``at`` when the port was used again; the last one without ``at``)."""
        made = self._conntrack.get((node, local_port))
        if not made:
            return None
        if at is None:
            return made[-1][1]
        return min(made, key=lambda m: abs(m[0] - at))[1]

    def node_netns(self, node: int) -> str | None:
        return f"{self.prefix}-n{node}"

    def break_node(self, node: int, share: float) -> None:
        """Node ``node``'s route to the Service rejects ``share`` of the new connections
        (with a TCP reset) from its next rule sync on; call it before ``start``."""
        self.broken[node] = share

    def read_conntrack(self) -> None:
        """Which pod each client connection was DNATed to, from the nodes' event streams:
        ``[<time>] [NEW] tcp 6 120 SYN_SENT src=<node> dst=<VIP> sport=<port> … src=<pod>``.
        Bounded for a long ``lab serve``: a stream past ``ROTATE_BYTES`` moves to a fresh
        file (the new watcher starts before the old one stops), and a port keeps its
        connections of the last ``KEEP_SECONDS`` and its latest one."""
        for i, w in enumerate(self._watchers):
            self._take(w)
            if w.read_to > ROTATE_BYTES:
                self._watchers[i] = _Watcher.start(w.node, w.ns)
                w.stop()
                self._take(w)
                w.sink.close()
        newest = max((m[-1][0] for m in self._conntrack.values()), default=0.0)
        for key, made in self._conntrack.items():
            if len(made) > 1 and made[0][0] < newest - KEEP_SECONDS:
                self._conntrack[key] = [m for m in made[:-1] if m[0] >= newest - KEEP_SECONDS]
                self._conntrack[key].append(made[-1])

    def _take(self, w: _Watcher) -> None:
        """The whole lines the watcher wrote since the last read."""
        w.sink.seek(w.read_to)
        chunk = w.sink.read()
        whole = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written waits
        w.read_to += len(whole)
        for line in whole.decode(errors="replace").splitlines():
            stamp = re.match(r"\s*\[(\d+\.\d+)\]", line)
            sources = re.findall(r"src=(\S+)", line)
            sport = re.search(r"sport=(\d+)", line)
            if stamp and sport and len(sources) >= 2 and sources[1] in self._by_ip:
                made = self._conntrack.setdefault((w.node, int(sport.group(1))), [])
                made.append((float(stamp.group(1)), self._by_ip[sources[1]]))

    async def close(self) -> None:
        await asyncio.gather(*self._syncing.values(), return_exceptions=True)
        await asyncio.sleep(0.2)  # the last events reach the files
        with contextlib.suppress(Exception):
            await asyncio.to_thread(self.read_conntrack)
        for w in self._watchers:
            w.stop()
            w.sink.close()
        await asyncio.to_thread(remove_namespaces, self.namespaces)


def remove_namespaces(namespaces: list[str]) -> None:
    """Kill whatever runs in the namespaces, then delete them (veths and rules go too)."""
    for ns in namespaces:
        for pid in _run("ip", "netns", "pids", ns, check=False).split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), 9)
    for ns in namespaces:
        _run("ip", "netns", "del", ns, check=False)


def namespaces_of_runs() -> list[str]:
    """The network namespaces of lab runs, going or left behind (see ``cleanup``)."""
    out = _run("ip", "netns", "list", check=False) if shutil.which("ip") else ""
    return [
        line.split()[0]
        for line in out.splitlines()
        if line and PREFIX_PATTERN.match(line.split()[0])
    ]
