"""The lab's load balancer in IP mode: Debian's real ``haproxy`` in front of the pods (it
targets pod IPs, skipping kube-proxy), driven through its runtime API as a cloud load
balancer's controller drives a target group.

* It runs in a network namespace of its own on the fabric (kernel datapath), or on the
  host's loopback (userspace datapath), from a working directory of the run (its config,
  pid file, runtime-API socket and log): ``haproxy -db -f DIR/haproxy.cfg``. As root it
  serves as ``nobody``; it dies with the lab (``PDEATHSIG``), with its namespace, or by
  ``lab clean`` (its working directory names the run, see ``cleanup``).
* Targets (:class:`TargetGroup`): a pod that becomes routable (ready, not terminating) is
  registered at once as a server in maintenance (``add server … disabled``) and gets
  traffic (``set server … state ready``) the LB's leg later (``Propagation.lb``, one draw
  per change); a pod that stops being routable is deregistered: the LB stops sending it
  new requests the leg later (``state drain``), and when the deregistration delay
  (``LoadBalancerSpec.deregistration``, from the deregistration) ends, what is still in
  flight is cut (``state maint`` + ``shutdown sessions server``). Runtime commands:
  haproxy's management guide, section 9.3
  (https://docs.haproxy.org/2.6/management.html#9.3; Debian's
  /usr/share/doc/haproxy/management.txt.gz): "drain" removes a server from load
  balancing, "maint" disables any traffic to it, "add server" needs a dynamic algorithm.
* Readiness gate (``LoadBalancerSpec.readiness_gate``): a pod is Ready for the
  Deployment only once the LB has registered it (:class:`GatedCluster`), as the AWS Load
  Balancer Controller's gate holds a rollout
  (https://kubernetes-sigs.github.io/aws-load-balancer-controller/latest/deploy/pod_readiness_gate/).
  The pods that run before the rollout were registered before it (``begin``).
* Like a cloud LB it does not retry another target (``retries 0``, no ``redispatch``:
  https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-troubleshooting.html,
  a refused connection is the client's 502) and has no health check of its own here (an
  ALB's, 15 s x 2 by default, is slower than its leg). Each request opens its own
  connection to the pod (``option http-server-close``, ``http-reuse never``), balanced
  round-robin (ALB's default algorithm).
* Log: haproxy's own ``option httplog`` lines (one per request, with the server and the
  termination state) and its server state changes, on stdout into ``haproxy.log``.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import random
import re
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

from svcdoctor.lab.cluster import Cluster
from svcdoctor.lab.datapath import Backend, Datapath, LabError
from svcdoctor.lab.front import (
    START_SECONDS,
    FrontedDatapath,
    binary,
    last_complaint,
    missing,
    read_lines,
    spawn,
    stop,
    until_listening,
)
from svcdoctor.lab.kernel import SUBNET
from svcdoctor.model.dist import Dist
from svcdoctor.model.scenario import LoadBalancerSpec

LISTEN_IP = f"{SUBNET}.255.201"  # the LB's namespace on the fabric (nginx: .200, nodes: .10+)
LISTEN_PORT = 80
FRONTEND, BACKEND = "lb", "targets"
LOG = "haproxy.log"
SOCKET = "admin.sock"
# haproxy logs times to the millisecond; the lab's timers and the log's clock differ by
# that and the event loop's latency
TOLERANCE = 0.05


class HaproxyUnavailable(LabError):
    """The scenario's load balancer cannot run here (no haproxy): a usage problem (exit 2)."""

    exit_code = 2


class TargetState(StrEnum):
    """A target's state in the LB, in haproxy's words (``added``: registered, in maint)."""

    ADDED = "added"
    READY = "ready"
    DRAIN = "drain"
    MAINT = "maint"


@dataclass(frozen=True, slots=True)
class Transition:
    """haproxy took a target's new state at ``at`` (Unix seconds: when its first command was
    written; haproxy acknowledged it)."""

    at: float
    pod: str
    state: TargetState


def available() -> str | None:
    """``None`` when haproxy can run here, else why not."""
    return missing("haproxy", "the load balancer")


def config(listen: tuple[str, int], folder: Path, user: bool = False) -> str:
    """haproxy.cfg: one frontend, one backend without servers (the targets are added at
    run time). Configuration manual: https://docs.haproxy.org/2.6/configuration.html."""
    return (
        "# svcdoctor lab: a load balancer in IP mode (targets added by the runtime API)\n"
        "global\n"
        # ``iso``: each line after its ISO 8601 time, so the state changes (a target drained,
        # taken down) carry theirs for diagnose to read as the hop's leg (evidence/routing.py)
        "    log stdout format iso local0 info\n"
        f"    stats socket {folder / SOCKET} mode 600 level admin\n"
        f"    pidfile {folder / 'haproxy.pid'}\n"
        "    maxconn 4096\n"
        + ("    user nobody\n    group nogroup\n" if user else "")
        + "defaults\n"
        "    mode http\n"
        "    log global\n"
        "    option httplog\n"
        "    option dontlognull\n"  # the start-up probe's empty connection
        "    option http-server-close\n"
        "    http-reuse never\n"
        "    retries 0\n"
        "    timeout connect 5s\n"
        "    timeout client 30s\n"
        "    timeout server 30s\n"
        f"frontend {FRONTEND}\n"
        f"    bind {listen[0]}:{listen[1]}\n"
        f"    default_backend {BACKEND}\n"
        f"backend {BACKEND}\n"
        "    balance roundrobin\n"
    )


@dataclass
class Haproxy:
    """One haproxy process serving from ``folder``, and its runtime API."""

    folder: Path
    listen: tuple[str, int]
    netns: str | None = None
    process: subprocess.Popen[bytes] | None = None

    async def start(self, probe: socket.socket) -> None:
        """Start haproxy and wait until it accepts on ``listen``; ``probe``: an unconnected
        socket from where the clients are. Call it from the event loop's thread."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.folder.chmod(0o755)
        path = self.folder / "haproxy.cfg"
        path.write_text(config(self.listen, self.folder, user=os.geteuid() == 0))
        command = [binary("haproxy"), "-db", "-f", str(path)]
        self.process = spawn(command, self.folder, self.netns, LOG, "haproxy.stderr")
        await until_listening(self.process, probe, self.listen, "haproxy", self._why)
        end = time.monotonic() + START_SECONDS
        while not (self.folder / SOCKET).exists():
            if time.monotonic() > end:
                raise LabError("haproxy's runtime API socket did not appear")
            await asyncio.sleep(0.05)

    def _why(self) -> str:
        found = last_complaint(self.folder / "haproxy.stderr", ("[ALERT]",))
        return found or f"exit {self.process.returncode if self.process else '?'}"

    async def command(self, text: str) -> tuple[str, float]:
        """One runtime-API command (non-interactive: haproxy answers and closes): the answer,
        and when the command went into the socket (Unix s; haproxy applies it then, while
        a busy event loop may read the answer much later)."""
        reader, writer = await asyncio.open_unix_connection(str(self.folder / SOCKET))
        try:
            writer.write(f"{text}\n".encode())
            written = time.time()
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(), 5.0)
            return answer.decode(errors="replace").strip(), written
        finally:
            writer.close()

    async def stop(self) -> None:
        """SIGTERM (haproxy's hard stop), SIGKILL to its process group after a while."""
        await stop(self.process)


# What haproxy answers a command that worked (management guide, section 9.3)
_ACCEPTED = ("", "New server registered.")


@dataclass
class TargetGroup:
    """The LB's controller: it follows the routable pods and changes haproxy's servers a
    leg (``leg``, drawn per change with ``rng``) later; see the module's docstring."""

    haproxy: Haproxy
    spec: LoadBalancerSpec
    leg: Dist
    rng: random.Random
    errors: list[str]
    instant: bool = True  # before the run: the pods running were registered long ago
    transitions: list[Transition] = field(default_factory=list)
    state: dict[str, TargetState] = field(default_factory=dict)
    gated: set[str] = field(default_factory=set)  # pods the LB has registered (gate true)
    _routable: set[str] = field(default_factory=set, init=False)
    _due: dict[str, float] = field(default_factory=dict, init=False)  # pod → its last change
    _cut: dict[str, asyncio.TimerHandle] = field(default_factory=dict, init=False)
    _timers: set[asyncio.TimerHandle] = field(default_factory=set, init=False)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    _pending: int = field(default=0, init=False)  # changes in their leg (the cuts aside)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    def watch(self, backends: Sequence[Backend]) -> None:
        """The routable pods now: register the new ones, deregister the ones gone."""
        now = time.time()
        routable = {b.pod: b for b in backends}
        for pod in sorted(routable.keys() - self._routable):
            backend = routable[pod]
            if pod not in self.state:
                self._spawn(
                    pod,
                    [f"add server {BACKEND}/{pod} {backend.host}:{backend.port} disabled"],
                    TargetState.ADDED,
                )
            if (timer := self._cut.pop(pod, None)) is not None:
                timer.cancel()
            self._later(now, pod, TargetState.READY)
        for pod in sorted(self._routable - routable.keys()):
            self._later(now, pod, TargetState.DRAIN)
            cut = asyncio.get_running_loop().call_later(
                self.spec.deregistration, self._spawn, pod, _CUT, TargetState.MAINT
            )
            self._cut[pod] = cut
            self._timers.add(cut)
        self._routable = set(routable)

    def _later(self, now: float, pod: str, state: TargetState) -> None:
        """``state`` the leg after ``now``, never before the pod's earlier change."""
        delay = 0.0 if self.instant else self.leg.draw(self.rng)
        due = max(now + delay, self._due.get(pod, 0.0))
        self._due[pod] = due
        self._pending += 1
        timer = asyncio.get_running_loop().call_later(
            max(0.0, due - time.time()), self._spawn, pod, [], state, True
        )
        self._timers.add(timer)

    def _spawn(self, pod: str, commands: list[str], state: TargetState, leg: bool = False) -> None:
        task = asyncio.get_running_loop().create_task(self._apply(pod, commands, state, leg))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _apply(self, pod: str, commands: list[str], state: TargetState, leg: bool) -> None:
        """Send the commands (in the order asked: the lock is fair), record the state."""
        async with self._lock:
            try:
                if state in (TargetState.READY, TargetState.DRAIN):
                    if state is TargetState.DRAIN and self.state.get(pod) is TargetState.MAINT:
                        return  # the deregistration delay ended first: already cut
                    commands = [f"set server {BACKEND}/{pod} state {state.value}"]
                applied = []
                for text in commands:
                    answer, written = await self.haproxy.command(
                        text.format(server=f"{BACKEND}/{pod}")
                    )
                    if answer not in _ACCEPTED:
                        self.errors.append(f"haproxy refused {text!r}: {answer}")
                        return
                    applied.append(written)
                self.state[pod] = state
                self.transitions.append(Transition(applied[0], pod, state))
                if state is TargetState.READY:
                    self.gated.add(pod)
            except (OSError, TimeoutError) as exc:
                self.errors.append(f"haproxy's runtime API: {exc}")
            finally:
                if leg:
                    self._pending -= 1

    @property
    def settled(self) -> bool:
        """Whether every change's leg has ended (the deregistration cuts aside)."""
        return self._pending == 0

    async def close(self) -> None:
        for timer in self._timers:
            timer.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


# the deregistration delay's end: no traffic at all to the target, what is in flight cut
_CUT = ["set server {server} state maint", "shutdown sessions server {server}"]


@dataclass
class GatedCluster(Cluster):
    """A cluster whose pods carry the LB's readiness gate: the Deployment counts a pod
    Ready only once ``gate(pod)`` (the LB registered it). kube-proxy's views are not
    gated here: the clients reach the pods through the LB only."""

    gate: Callable[[str], bool] = lambda pod: True

    def ready_count(self, names: list[str]) -> int:
        return sum(
            1 for n in names if self.pods[n].ready and not self.pods[n].terminating and self.gate(n)
        )


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One request line of haproxy's ``option httplog``."""

    at: float  # when haproxy received the request (Unix seconds, to the millisecond)
    client: tuple[str, int]
    server: str  # the pod (``<NOSRV>``: no target to send to)
    status: int
    termination: str  # e.g. ``SC--``: the server refused the connection


_LINE = re.compile(
    r"^(?:\d{4}-\d\d-\d\dT\S+ )?"  # the time ``format iso`` puts first
    r"(?P<ip>[\d.]+):(?P<port>\d+) \[(?P<date>[^\]]+)\] \S+ \S+?/(?P<server>\S+) "
    r"\S+ (?P<status>-?\d+) \S+ \S+ \S+ (?P<term>\S{4}) "
)


def parse_log(lines: Sequence[str]) -> list[LogEntry]:
    """haproxy's request lines (its state-change lines are skipped)."""
    out = []
    for line in lines:
        m = _LINE.match(line)
        if m is None:
            continue
        at = datetime.strptime(m["date"], "%d/%b/%Y:%H:%M:%S.%f").replace(tzinfo=UTC)
        out.append(
            LogEntry(
                at.timestamp(),
                (m["ip"], int(m["port"])),
                m["server"],
                int(m["status"]),
                m["term"],
            )
        )
    return out


@dataclass
class BalancerDatapath(FrontedDatapath):
    """A datapath whose clients reach the pods through the load balancer (haproxy):
    everything else (pods, kube-proxy's rules, probes) is the inner datapath's."""

    inner: Datapath
    spec: LoadBalancerSpec
    leg: Dist
    folder: Path  # haproxy's working directory (its log is read from there)
    seed: int = 0
    haproxy: Haproxy | None = None
    group: TargetGroup | None = None
    entries: list[LogEntry] = field(default_factory=list)  # its log, read at close
    _stopped: bool = False  # haproxy stopped and its log read
    settle_seconds = 60.0
    unsettled = "the load balancer did not apply the targets"

    def unavailable(self) -> LabError | None:
        reason = available()
        return HaproxyUnavailable(reason) if reason else None

    async def start_hop(self) -> None:
        listen, netns = await self.listen_address("lb", LISTEN_IP, LISTEN_PORT)
        self.haproxy = Haproxy(self.folder, listen, netns)
        await self.haproxy.start(self.inner.client_socket(0))
        rng = random.Random(self.seed * 7919 + 31)
        self.group = TargetGroup(self.haproxy, self.spec, self.leg, rng, self.errors)

    def begin(self) -> None:
        """From now on every change takes the LB's leg (the pods running now were
        registered before the run, as a Service's targets have been)."""
        if self.group is not None:
            self.group.instant = False

    def registered(self, pod: str) -> bool:
        """The readiness gate: the LB has registered the pod."""
        return self.group is not None and pod in self.group.gated

    @property
    def hop(self) -> TargetGroup | None:
        """The target group: settled when every change's leg has ended in the LB."""
        return self.group

    def service_address(self, node: int) -> tuple[str, int]:
        assert self.haproxy is not None
        return self.haproxy.listen

    def backend_of(self, node: int, local_port: int, at: float | None = None) -> str | None:
        """The target haproxy logged for the client's connection from ``local_port``."""
        seen = [e for e in self.entries if e.client[1] == local_port]
        if not seen:
            return None
        entry = min(seen, key=lambda e: abs(e.at - at)) if at is not None else seen[-1]
        return None if entry.server.startswith("<") else entry.server

    async def stop_hop(self) -> None:
        """Stop the target group's changes and haproxy, and read its log (once: its
        working directory may go afterwards); the pods and nodes run on."""
        if self.group is not None:
            await self.group.close()
        if self.haproxy is not None and not self._stopped:
            await self.haproxy.stop()
            self.entries = parse_log(read_lines(self.folder / LOG))
            self._stopped = True

    def logs(self) -> dict[str, Path]:
        """haproxy's log (request lines and state changes), when it wrote one."""
        path = self.folder / LOG
        return {LOG: path} if path.is_file() else {}


@dataclass(frozen=True, slots=True)
class BalancerFacts:
    """What the LB did in a run, from its runtime API's answers and its own log: the lab's
    ground truth for the hop."""

    spec: LoadBalancerSpec
    leg: Dist
    transitions: tuple[Transition, ...]
    requests: int  # haproxy's request lines
    statuses: dict[str, int]
    failures: int  # 5xx haproxy answered
    in_leg: int  # …to a pod that had stopped accepting, before the LB removed it
    no_target: int  # …with no target to send to
    removed: dict[str, float]  # deleted pod → when the LB stopped sending it new requests
    expected: float  # the model's count of the failures in the LB's leg
    problems: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": asdict(self.spec) | {"leg": str(self.leg)},
            "transitions": [
                {"at": round(t.at, 3), "pod": t.pod, "state": t.state.value}
                for t in self.transitions
            ],
            "requests": self.requests,
            "statuses": self.statuses,
            "failed": self.failures,
            "failed_in_leg": self.in_leg,
            "failed_without_target": self.no_target,
            "stopped_sending": {p: round(t, 3) for p, t in self.removed.items()},
            "expected_failures": round(self.expected, 1),
        }


def removed_at(transitions: Sequence[Transition]) -> dict[str, float]:
    """When the LB first stopped sending each pod new requests (drain or maint)."""
    out: dict[str, float] = {}
    for t in transitions:
        if t.state in (TargetState.DRAIN, TargetState.MAINT):
            out.setdefault(t.pod, t.at)
    return out


def expected_failures(
    transitions: Sequence[Transition], stopped: Mapping[str, float], sent: Sequence[float]
) -> float:
    """The model: for each pod that stopped accepting (``stopped``), the requests sent
    (``sent``: start times, sorted) while the LB still had it ready, each to it with
    probability one over the ready targets then (round-robin)."""
    ready: set[str] = set()
    total, marks = 0.0, [*transitions, Transition(float("inf"), "", TargetState.ADDED)]
    start = float("-inf")
    for mark in marks:
        for pod in ready:
            dead = stopped.get(pod)
            if dead is not None and mark.at > max(start, dead):
                lo, hi = max(start, dead), mark.at
                inside = bisect.bisect_left(sent, hi) - bisect.bisect_left(sent, lo)
                total += inside / len(ready)
        start = mark.at
        if mark.state is TargetState.READY:
            ready.add(mark.pod)
        elif mark.state in (TargetState.DRAIN, TargetState.MAINT):
            ready.discard(mark.pod)
    return total


def balancer_facts(
    dp: BalancerDatapath,
    stopped: Mapping[str, float],
    deleted: Sequence[str],
    clients_failed: int,
    sent: Sequence[float],
    bad_planned: bool = False,
) -> BalancerFacts:
    """The LB's ground truth, checked: every failure the clients saw is a 5xx haproxy
    logged; without bad backends planned, each went to a pod after it stopped accepting
    (``stopped``) and before the LB stopped sending it new requests; the LB stopped
    sending to every deleted pod (``deleted``)."""
    group = dp.group
    transitions = tuple(group.transitions) if group else ()
    removed = removed_at(transitions)
    entries = dp.entries
    failed = [e for e in entries if e.status >= 500]
    in_leg = sum(
        1
        for e in failed
        if e.server in stopped
        and stopped[e.server] - TOLERANCE <= e.at <= removed.get(e.server, e.at) + TOLERANCE
        and e.server in removed
    )
    no_target = sum(1 for e in failed if e.server.startswith("<"))
    problems = []
    if not entries:
        problems.append("the load balancer logged no request")
    if entries and len(failed) != clients_failed:
        problems.append(
            f"the clients saw {clients_failed} failures, the load balancer logged {len(failed)} 5xx"
        )
    if not bad_planned and in_leg != len(failed):
        problems.append(
            f"{len(failed) - in_leg} failed requests outside the load balancer's leg (to a pod "
            "still accepting, or one it had stopped sending to, or to no target)"
        )
    kept = sorted(p for p in deleted if p not in removed)
    if kept:
        problems.append(f"the load balancer never stopped sending to {', '.join(kept[:3])}")
    statuses = Counter(str(e.status) for e in entries)
    return BalancerFacts(
        dp.spec,
        dp.leg,
        transitions,
        len(entries),
        dict(sorted(statuses.items())),
        len(failed),
        in_leg,
        no_target,
        {p: removed[p] for p in deleted if p in removed},
        expected_failures(transitions, stopped, sent),
        tuple(problems),
    )
