"""A real hop in a served lab: ``lab serve`` of a scenario with an ingress (nginx) or a
load balancer (haproxy) runs it as ``lab run`` does (``run.make_datapath``, the cluster
following it as ``run.run`` wires it), shows it (a ``HopView`` for ``hop_objects``, the
nginx pod's log) and, when the serve ends, stops it and reads its ground truth from its
own logs (``nginx.ingress_facts``, ``haproxy.balancer_facts``)."""

from __future__ import annotations

import asyncio
import csv
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from svcdoctor.lab.cluster import Cluster
from svcdoctor.lab.datapath import Datapath, LabError
from svcdoctor.lab.haproxy import (
    BACKEND,
    BalancerDatapath,
    BalancerFacts,
    TargetState,
    balancer_facts,
)
from svcdoctor.lab.hopstate import HopKind, HopView, Target
from svcdoctor.lab.load import Load
from svcdoctor.lab.logs import log_time
from svcdoctor.lab.nginx import ACCESS_LOG, ERROR_LOG, IngressDatapath, ingress_facts
from svcdoctor.lab.run import lb_truth
from svcdoctor.lab.scenarios import Scenario
from svcdoctor.model.truth import LabTruth

POLL = 0.25  # seconds between reads of haproxy's targets and nginx's logs
KEEP_LINES = 50_000  # nginx log lines the controller pod's log keeps (older ones rotate)

Hop = IngressDatapath | BalancerDatapath


def also(first: Callable[[], None] | None, then: Callable[[], None]) -> Callable[[], None]:
    """``first`` (when there is one), then ``then``."""
    if first is None:
        return then

    def both() -> None:
        first()
        then()

    return both


class NginxLog:
    """The ingress-nginx controller pod's log: nginx's error log and access log (the
    controller's container writes them to its stderr and stdout), each line stamped when
    it was read (every ``POLL`` and at each read of the log); the newest ``keep`` lines.
    An error log line is read before the access log line of its request (nginx writes the
    access log line when the request ends). Read from the API server's threads: locked."""

    def __init__(self, folder: Path, keep: int = KEEP_LINES) -> None:
        self.paths = (folder / ERROR_LOG, folder / ACCESS_LOG)
        self._offsets = dict.fromkeys(self.paths, 0)
        self._partial = dict.fromkeys(self.paths, b"")
        self._lines: deque[str] = deque(maxlen=keep)
        self._lock = threading.Lock()

    def poll(self) -> None:
        with self._lock:
            stamp = log_time(time.time())
            for path in self.paths:
                try:
                    with path.open("rb") as f:
                        f.seek(self._offsets[path])
                        data = f.read()
                except OSError:
                    continue  # not written yet, or gone with the lab
                self._offsets[path] += len(data)
                *complete, self._partial[path] = (self._partial[path] + data).split(b"\n")
                self._lines.extend(f"{stamp} {ln.decode(errors='replace')}\n" for ln in complete)

    def text(self, container: str | None = None) -> str:
        self.poll()
        with self._lock:
            return "".join(self._lines)


async def read_targets(dp: BalancerDatapath) -> tuple[Target, ...]:
    """haproxy's servers, from its runtime API (``show stat``: one CSV row per server of
    the backend, management guide 9.3), in name order."""
    assert dp.haproxy is not None
    assert dp.group is not None
    answer, _ = await dp.haproxy.command("show stat -1 4 -1")
    rows = csv.DictReader(answer.removeprefix("# ").splitlines())
    enabled = {t.pod for t in dp.group.transitions if t.state is TargetState.READY}
    out = []
    for row in rows:
        if row.get("pxname") != BACKEND or not row.get("svname"):
            continue
        ip, _, port = str(row.get("addr") or "").rpartition(":")
        pod = row["svname"]
        out.append(Target(pod, ip, int(port or 0), str(row.get("status") or ""), pod in enabled))
    return tuple(sorted(out, key=lambda t: t.pod))


@dataclass(eq=False)
class ServedHop:
    """The datapath's real hop, as the served lab shows it."""

    dp: Hop
    log: NginxLog | None = None
    targets: tuple[Target, ...] = ()
    errors: list[str] = field(default_factory=list)
    ingress: dict[str, Any] | None = None  # nginx's ground truth, once stopped
    balancer: BalancerFacts | None = None  # haproxy's, once stopped

    @staticmethod
    def of(dp: Datapath) -> ServedHop | None:
        return ServedHop(dp) if isinstance(dp, IngressDatapath | BalancerDatapath) else None

    def view(self) -> HopView | None:
        """Where the hop listens and, for the load balancer, its targets (None before it
        started)."""
        dp = self.dp
        if isinstance(dp, IngressDatapath):
            if dp.nginx is None:
                return None
            return HopView(HopKind.INGRESS, *dp.nginx.listen)
        if dp.haproxy is None:
            return None
        ip, port = dp.haproxy.listen
        spec = dp.spec
        kind = HopKind.LOAD_BALANCER
        return HopView(kind, ip, port, self.targets, spec.deregistration, spec.readiness_gate)

    def nginx_log(self) -> NginxLog | None:
        """nginx's log, for the controller pod (None: the hop is no nginx)."""
        if isinstance(self.dp, IngressDatapath) and self.log is None:
            self.log = NginxLog(self.dp.folder)
        return self.log

    async def refresh(self) -> bool:
        """Read nginx's new log lines and haproxy's targets; whether the targets changed."""
        dp = self.dp
        if self.log is not None:
            await asyncio.to_thread(self.log.poll)
        if not isinstance(dp, BalancerDatapath) or dp.haproxy is None:
            return False
        try:
            targets = await read_targets(dp)
        except (OSError, TimeoutError, ValueError) as exc:
            if dp.haproxy.process is not None and dp.haproxy.process.poll() is None:
                self.errors.append(f"haproxy's runtime API: {exc}")
            return False
        changed, self.targets = targets != self.targets, targets
        return changed

    async def follow(self, changed: Callable[[], None]) -> None:
        """Until cancelled: ``refresh`` every ``POLL``, telling ``changed`` when the
        targets changed."""
        while True:
            await asyncio.sleep(POLL)
            if await self.refresh():
                changed()

    async def stop(self, scenario: Scenario, cluster: Cluster, load: Load) -> None:
        """Stop the hop's process (before the jobs' directory, which holds its working
        directory, goes) and read its ground truth from its own logs. It never raises: the
        rest of the lab must still go; what failed is the datapath's error."""
        try:
            await self._stop(scenario, cluster, load)
        except Exception as exc:  # reported, not raised (see above)
            self.dp.errors.append(f"stopping the hop: {exc}")

    async def _stop(self, scenario: Scenario, cluster: Cluster, load: Load) -> None:
        dp = self.dp
        await dp.stop_hop()
        failed = sum(1 for r in list(load.records) if r["outcome"] != "ok")
        if isinstance(dp, IngressDatapath):
            if dp.nginx is not None:
                facts = ingress_facts(dp.spec, dp.folder, dp.nginx.reloads, failed)
                self.ingress = facts.to_dict()
            return
        if dp.haproxy is None:
            return
        stopped = {n: t for n, p in cluster.pods.items() if (t := cluster.stopped_listening(p))}
        deleted = [n for n, p in cluster.pods.items() if p.deleted_at is not None]
        sent = sorted(e.at for e in dp.entries)  # every request it took: the lab's, the Jobs'
        bad = scenario.bad > 0
        self.balancer = balancer_facts(dp, stopped, deleted, failed, sent, bad_planned=bad)

    def truth(self, truth: LabTruth) -> tuple[LabTruth, dict[str, Any]]:
        """The served ground truth with the hop's: the load balancer's leg and expected
        failures in it (as ``lab run``'s), and the hop's own facts, keyed as in lab.json."""
        if self.balancer is not None:
            return lb_truth(truth, self.balancer), {"load_balancer": self.balancer.to_dict()}
        if self.ingress is not None:
            return truth, {"ingress": self.ingress}
        return truth, {}

    def check(self) -> None:
        if self.errors:
            raise LabError(self.errors[0])
