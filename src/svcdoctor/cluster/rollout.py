"""``svcdoctor rollout-test``: restart a workload under load from inside the cluster and
measure what the rollout drops (or drain a node: ``Mode.DRAIN``, ``cluster/drain.py``; the
same load, watch, bundle and report, the node uncordoned at the end whatever ends it).

The load is the agent (``agentjob``) in service mode through the Service; the restart is
the patch ``kubectl rollout restart`` sends (``kubectl.kubernetes.io/restartedAt``); pods
and EndpointSlices are watched as ``collect --watch`` watches them (collect's stream
records), and the bundle is a collect bundle plus the agent's request rows
(``client-<pod>.jsonl``), which ``diagnose`` reads like any other. The summary's numbers
(phases, the deletion → endpoint-update delay, the per-pod window) are pure functions of
the rows and the watch; the cause, its window and the remedy are diagnose's, whose remedy
is ``svcdoctor.model.remedy.plan_shutdown``'s.

The agent's rows and the watched streams are written first, while the agent's objects are
deleted; then collect's snapshot of the Service joins them (its failure is a note): the
bundle is always written. A test is complete only when the rollout finished within
``--duration`` and the agent printed its done line; otherwise ``incomplete`` says why.

Ctrl-C (or SIGTERM) stops the load and the watch, leaves the rollout to finish, deletes
what svcdoctor created and still writes the bundle; a second Ctrl-C while the load stops
and the evidence is written is ignored (``agentjob.shielded``), and one while collecting
the snapshot ends that step with a note.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from svcdoctor.cluster import edge as edges
from svcdoctor.cluster.agentjob import (
    START_SECONDS,
    AgentSpec,
    Cleanup,
    Follower,
    Interrupted,
    check_args,
    deployed,
    egress_to,
    shielded,
)
from svcdoctor.cluster.api import ApiReader
from svcdoctor.cluster.collect import (
    SEEN,
    SERVICE_NAME_LABEL,
    Stream,
    check_out,
    label_selector,
)
from svcdoctor.cluster.drain import Victims, agent_node, check_node, cordoned, evict_all, victims
from svcdoctor.cluster.edge import Edge, EdgeKind
from svcdoctor.cluster.reader import ClusterError, WatchEvent, WatchGap
from svcdoctor.cluster.rollout_evidence import Evidence, diagnose_bundle
from svcdoctor.cluster.rollout_plan import (
    RESTARTED_AT,
    Mode,
    Plan,
    Refused,
    Timing,
    check_plan,
    parse_workload,
    restart_patch,
)
from svcdoctor.evidence.times import rfc3339
from svcdoctor.model import Assessment, Cause, Diagnosis, Outcome, RaceDetails

# importers name the plan's parts here too (cluster/rollout_plan.py)
__all__ = [
    "RESTARTED_AT",
    "Mode",
    "Plan",
    "Refused",
    "Timing",
    "check_plan",
    "parse_workload",
    "restart_patch",
]
service_address = edges.service_address
STOP_SECONDS = 20.0  # for the agent to end after its pod is deleted
LOST_SECONDS = 15.0  # reads failing this long (after the policy's retries): the server is lost
PHASES = ("before", "during", "after")


@dataclass(frozen=True, slots=True)
class PodDelay:
    """One deleted pod: when its deletion and its endpoint update were seen, and the
    failures after its deletion that no later deletion explains."""

    pod: str
    deleted: float
    endpoint_update: float | None
    last_failure: float | None

    @property
    def update_seconds(self) -> float | None:
        """Deletion → endpoint update as the API showed them (two watches: an update seen
        before the deletion counts as 0)."""
        if self.endpoint_update is None:
            return None
        return max(0.0, self.endpoint_update - self.deleted)

    @property
    def window_seconds(self) -> float | None:
        return None if self.last_failure is None else self.last_failure - self.deleted


@dataclass(frozen=True, slots=True)
class RolloutTest:
    """A finished test: the numbers, the diagnosis of its bundle (``None`` with
    ``diagnosis_error`` when the bundle could not be read) and notes."""

    plan: Plan
    service: str
    requests: int
    failed: int
    by_outcome: dict[str, int]
    by_phase: dict[str, dict[str, int]]
    delays: tuple[PodDelay, ...]
    timing: Timing
    diagnosis: Diagnosis | None
    bundle: Path
    interrupted: bool
    cleanup: Cleanup | None
    notes: tuple[str, ...] = ()
    diagnosis_error: str | None = None
    incomplete: tuple[str, ...] = ()  # why the test cannot pass (empty: complete)
    edge: Edge | None = None  # where the load entered (None: not resolved)

    @property
    def race(self) -> RaceDetails | None:
        """The race analysis' measurements, when a request failed."""
        if self.diagnosis is None or not self.failed:
            return None
        details = self.diagnosis.cause(Cause.RACE).details
        return details if isinstance(details, RaceDetails) else None

    @property
    def primary(self) -> Assessment | None:
        return self.diagnosis.primary if self.diagnosis is not None and self.failed else None

    @property
    def window_seconds(self) -> float | None:
        """The diagnosed race window; without one, the longest deletion → last failure."""
        if self.race is not None and self.race.window is not None:
            return self.race.window.seconds
        measured = [d.window_seconds for d in self.delays if d.window_seconds is not None]
        return round(max(measured), 3) if measured and self.failed else None

    @property
    def endpoint_update_seconds(self) -> float | None:
        seen = [d.update_seconds for d in self.delays if d.update_seconds is not None]
        return round(max(seen), 3) if seen else None

    @property
    def dropped_at(self) -> str | None:
        """Which hop dropped the failed requests, when the evidence can tell: a hop whose
        own log shows it still routed to the deleted pods (its leg held the failures); else,
        through an edge, the edge's own 5xx answers (its leg to the pods) against failed
        connections to the edge itself; else, by the ClusterIP, kube-proxy's leg."""
        if not self.failed:
            return None
        legs = [leg for leg in (self.race.hops if self.race else ()) if leg.failures]
        if legs:
            leg = max(legs, key=lambda x: x.failures)
            return (
                f"the {leg.hop.value}'s leg ({leg.by}): {leg.failures} of {self.failed} failed "
                "requests went to pods it had not yet stopped routing to"
            )
        answered = self.by_outcome.get(Outcome.HTTP_ERROR.value, 0)
        connections = self.failed - answered
        if self.edge is None or self.edge.kind is EdgeKind.SERVICE:
            if not connections:
                return f"the pods: {answered} answered 5xx themselves"
            return (
                "the Service's datapath (kube-proxy's leg): new connections still sent to "
                "pods that had stopped"
            )
        where = f"{self.edge.kind.value} {self.edge.address}"
        parts = []
        if answered:
            parts.append(
                f"{answered} answered 5xx by the edge ({where}) itself: the drop was on its "
                "leg to the pods (it still sent to pods that had stopped)"
            )
        if connections:
            parts.append(
                f"{connections} failed on the connection to the edge ({where}): the edge "
                "itself, or what is in front of it"
            )
        return "; ".join(parts)

    @property
    def remedy(self) -> tuple[int | None, int | None]:
        """(preStop seconds, grace seconds) planned from the window by the one remedy
        model (``svcdoctor.model.remedy``, through the race analysis)."""
        race = self.race
        if race is None:
            return None, None
        return race.recommended_prestop_seconds, race.recommended_grace_seconds


# ---------------------------------------------------------------- pure parts


def ready_replicas(obj: Mapping[str, Any]) -> int:
    """The workload's ``status.readyReplicas`` (0 when absent)."""
    return int((obj.get("status") or {}).get("readyReplicas") or 0)


def rolled_out(obj: Mapping[str, Any]) -> bool:
    """Whether the workload's rollout is complete, as ``kubectl rollout status`` decides."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        return False
    want = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
    if obj.get("kind") == "StatefulSet":
        return (
            status.get("updateRevision") == status.get("currentRevision")
            and int(status.get("readyReplicas") or 0) >= want
        )
    return (
        int(status.get("updatedReplicas") or 0) >= want
        and int(status.get("replicas") or 0) <= want
        and int(status.get("availableReplicas") or 0) >= want
    )


def selects(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """Whether a Service's (non-empty) ``selector`` matches ``labels``."""
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def pick_service(
    services: Sequence[Mapping[str, Any]], template_labels: Mapping[str, str], workload: str
) -> Mapping[str, Any]:
    """The one Service selecting the workload's pods."""
    found = [s for s in services if selects((s.get("spec") or {}).get("selector") or {},
                                             template_labels)]  # fmt: skip
    if len(found) == 1:
        return found[0]
    names = ", ".join(sorted(str((s.get("metadata") or {}).get("name")) for s in found))
    if not found:
        raise Refused(f"no Service selects the pods of {workload}; pass --service")
    raise Refused(f"several Services select the pods of {workload} ({names}); pass --service")


def phase_of(ts: float, timing: Timing) -> str:
    """``before`` the restart, ``during`` the rollout (until it finished, or to the end
    when it did not) or ``after`` it, for a request started at ``ts``."""
    if timing.restarted is None or ts < timing.restarted:
        return "before"
    if timing.rolled_out is None or ts <= timing.rolled_out:
        return "during"
    return "after"


def by_phase(rows: Iterable[Mapping[str, Any]], timing: Timing) -> dict[str, dict[str, int]]:
    """Requests and failures by kind in each phase of the rollout."""
    out: dict[str, dict[str, int]] = {p: {"requests": 0} for p in PHASES}
    for row in rows:
        phase = out[phase_of(float(row["ts"]), timing)]
        phase["requests"] += 1
        if row.get("outcome") != "ok":
            kind = str(row.get("outcome"))
            phase[kind] = phase.get(kind, 0) + 1
    return out


def _address_states(slice_obj: Mapping[str, Any]) -> dict[str, bool]:
    """Pod name → ready, for the endpoints of one EndpointSlice."""
    out = {}
    for ep in slice_obj.get("endpoints") or []:
        pod = (ep.get("targetRef") or {}).get("name")
        if pod:
            out[str(pod)] = (ep.get("conditions") or {}).get("ready") is not False
    return out


def pod_delays(
    pod_records: Sequence[Mapping[str, Any]],
    slice_records: Sequence[Mapping[str, Any]],
    failures: Sequence[float],
    seen: Callable[[Mapping[str, Any]], float | None],
) -> tuple[PodDelay, ...]:
    """Per pod deleted during the watch: the first sighting of its deletion, of its address
    leaving the ready endpoints, and the last failure before the next deletion (failures
    are attributed to the most recent deletion)."""
    deleted: dict[str, float] = {}
    for rec in pod_records:
        obj = rec.get("object") or {}
        meta = obj.get("metadata") or {}
        name = str(meta.get("name"))
        if name in deleted or not (meta.get("deletionTimestamp") or rec.get("type") == "DELETED"):
            continue
        at = seen(obj)
        if at is not None:
            deleted[name] = at
    updates: dict[str, float] = {}
    ready: dict[tuple[str, str], bool] = {}  # (slice, pod) → ready
    for rec in slice_records:
        obj = rec.get("object") or {}
        meta = obj.get("metadata") or {}
        key = str(meta.get("name"))
        states = {} if rec.get("type") == "DELETED" else _address_states(obj)
        at = seen(obj)
        for (slice_name, pod), was in list(ready.items()):
            changed = slice_name == key and was and not states.get(pod, False)
            if changed and pod in deleted and pod not in updates and at is not None:
                updates[pod] = at
        for pod, now in states.items():
            ready[(key, pod)] = now
    order = sorted(deleted.items(), key=lambda kv: kv[1])
    out = []
    for i, (pod, at) in enumerate(order):
        until = order[i + 1][1] if i + 1 < len(order) else float("inf")
        mine = [t for t in failures if at <= t < until]
        out.append(PodDelay(pod, at, updates.get(pod), max(mine) if mine else None))
    return tuple(out)


def record_seen(obj: Mapping[str, Any]) -> float | None:
    notes = (obj.get("metadata") or {}).get("annotations") or {}
    return rfc3339(notes.get(SEEN))


# ---------------------------------------------------------------- I/O


@dataclass
class _Watch:
    """The pods and EndpointSlices of the Service, watched by two threads into collect's
    stream records until ``stop``."""

    api: ApiReader
    namespace: str
    service: str
    pod_labels: str
    until: float
    streams: dict[str, Stream] = field(default_factory=lambda: {"slices": Stream(),
                                                                 "pods": Stream()})  # fmt: skip
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # evidence lost: the test is incomplete
    failing_since: float | None = None  # the polls of the workload fail since then
    error: str = ""

    def read_failed(self, workload: str, exc: ClusterError) -> None:
        """A failed poll of the workload: a note (once per message); retried by the next."""
        self.failing_since = self.failing_since or time.time()
        self.error = str(exc)
        if (note := f"reading {workload} failed (retried): {exc}") not in self.notes:
            self.notes.append(note)

    def read_worked(self) -> None:
        self.failing_since = None

    def lost(self) -> str | None:
        """Why the API server counts as lost: its reads failed for LOST_SECONDS."""
        since = self.failing_since
        if since is None or time.time() - since < LOST_SECONDS:
            return None
        when = datetime.fromtimestamp(since, UTC).strftime("%H:%M:%S")
        return (
            f"the API server stopped answering at {when}Z ({self.error}): "
            "the rollout's end was not seen"
        )

    def gap(self, gap: WatchGap) -> None:
        (self.missing if gap.relisted else self.notes).append(gap.text())

    def start(self) -> None:
        jobs = [
            ("endpointslices", f"{SERVICE_NAME_LABEL}={self.service}", self.streams["slices"]),
            ("pods", self.pod_labels, self.streams["pods"]),
        ]
        for what, labels, into in jobs:
            threading.Thread(target=self._follow, args=(what, labels, into), daemon=True).start()

    def _follow(self, what: str, labels: str, into: Stream) -> None:
        first: float | None = None
        try:
            events = self.api.watch(what, self.namespace, labels, until=self.until, on_gap=self.gap)
            for event in events:
                if into.closed:
                    return
                first = event.seen if first is None else first
                into.add(event, initial=event.type == "ADDED" and event.seen == first)
        except ClusterError as exc:
            self.missing.append(f"watch of {what} stopped: {exc}")

    def final(self) -> None:
        """List both once more (what the watch may have missed at its end)."""
        now = time.time()
        for what, labels, into in (
            ("endpointslices", f"{SERVICE_NAME_LABEL}={self.service}", self.streams["slices"]),
            ("pods", self.pod_labels, self.streams["pods"]),
        ):
            try:
                for obj in self.api.list(what, self.namespace, labels=labels):
                    into.add(WatchEvent("ADDED", obj, now))
            except ClusterError as exc:
                self.missing.append(f"listing {what} after the watch failed: {exc}")

    def stop(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        pods, _ = self.streams["pods"].close()
        slices, _ = self.streams["slices"].close()
        return pods, slices


def incomplete_reasons(
    plan: Plan,
    timing: Timing,
    interrupted: bool,
    done: bool,
    lost: str | None = None,
    missing: Sequence[str] = (),
) -> list[str]:
    """Why a finished test cannot be trusted to pass (pure): the API server was ``lost``,
    or else the rollout did not finish within ``--duration``; evidence ``missing`` (a watch
    that stopped or lost changes); the agent's log has no done line (its rows may be cut)."""
    reasons = []
    if lost is not None:
        reasons.append(lost)
    elif timing.rolled_out is None and not interrupted:
        reasons.append(f"the rollout did not finish within --duration {plan.duration:g}s")
    reasons += missing
    if not done:
        reasons.append("the load agent ended without its done line (killed or crashed)")
    return reasons


def _wait(condition: Callable[[], bool], until: float, step: float = 0.5) -> bool:
    while time.time() < until:
        if condition():
            return True
        time.sleep(step)
    return condition()


def agent_args(plan: Plan, edge: Edge, service: str) -> tuple[str, ...]:
    """The load agent's arguments: service mode to ``edge`` at ``plan.rate`` for
    ``plan.duration``, one connection per request unless ``plan.keepalive``."""
    path = plan.path if plan.path != "/" or edge.kind is EdgeKind.SERVICE else edge.path
    args = [
        "--mode", "service", "--service", edge.address, "--rate", f"{plan.rate:g}",
        "--duration", f"{plan.duration:g}", "--protocol", "http", "--path", path,
        "--timeout", f"{plan.timeout:g}",
        "--upstream", edge.upstream or f"{plan.namespace}/{service}",
        "--max-requests", str(int(plan.rate * plan.duration) + 1),
        *(("--host-header", edge.host) if edge.host else ()),
    ]  # fmt: skip
    if plan.keepalive:
        args.append("--keepalive")
    return tuple(args)


def run(
    api: ApiReader,
    plan: Plan,
    progress: Callable[[str], None] = lambda _: None,
) -> RolloutTest:
    """The test (see the module docstring). ``Refused`` (or ``AgentArgsError``) before
    anything is created when the plan, the workload, its Service or ``--out`` do not allow
    it; ``Interrupted`` when Ctrl-C came outside the load (the objects deleted)."""
    ns = plan.namespace
    check_plan(plan)
    check_out(plan.out)
    workload = api.get(plan.kind, ns, plan.name)
    if workload is None:
        raise Refused(f"{plan.workload} not found in namespace {ns}")
    ready = ready_replicas(workload)
    if ready < 2 and not plan.allow_outage:
        raise Refused(
            f"{plan.workload} has {ready} ready replica(s): a restart would drop every "
            "request while it has none; pass --allow-outage to test it anyway"
        )
    if not rolled_out(workload):
        raise Refused(f"{plan.workload} is rolling out already: wait until it has finished")
    template = (workload.get("spec") or {}).get("template") or {}
    template_labels = (template.get("metadata") or {}).get("labels") or {}
    service: Mapping[str, Any] | None
    if plan.service:
        service = api.get("services", ns, plan.service)
        if service is None:
            raise Refused(f"service {ns}/{plan.service} not found")
    else:
        service = pick_service(api.list("services", ns), template_labels, plan.workload)
    svc_name = str(service["metadata"]["name"])
    edge = edges.target(api, plan.namespace, service, plan.port, plan.through, plan.network_policy)
    pod_labels = label_selector(service)
    bound = plan.duration + plan.timeout  # the last requests end within their timeout
    spec = AgentSpec(ns, "rollout", agent_args(plan, edge, svc_name), bound)
    if plan.image:
        spec = replace(spec, image=plan.image)
    if plan.network_policy:
        slices = api.list("endpointslices", ns, labels=f"{SERVICE_NAME_LABEL}={svc_name}")
        ports = {int(p["port"]) for s in slices for p in s.get("ports") or [] if p.get("port")}
        spec = replace(spec, egress=egress_to(service, ports))
    victims: Victims | None = None
    if plan.mode is not Mode.ROLLOUT:
        assert plan.node is not None  # check_plan
        victims, agent = drain_plan(api, plan, service)
        spec = replace(spec, node=agent)
    check_args(spec)
    started = time.time()
    end = started + START_SECONDS + plan.duration
    reached = [Timing()]  # what the load got to, kept when Ctrl-C ends it
    notes: list[str] = []
    interrupted = False
    cleaned: list[Cleanup] = []
    follower = Follower(api, ns, end + STOP_SECONDS, selector=f"job-name={spec.name}")
    watch = _Watch(api, ns, svc_name, pod_labels, end + STOP_SECONDS)
    evidence = Evidence(plan, svc_name, started, edge)
    progress(f"load through {edge.route(f'{ns}/{svc_name}')} at {plan.rate:g}/s: job {spec.name}")
    try:
        with deployed(api, spec, on_cleanup=cleaned.append), ExitStack() as undo:
            disrupt = None
            if victims is not None:
                notes += [f"left on {plan.node}: {line}" for line in victims.skipped]
                disrupt = _drain(api, plan, undo, notes, progress)
            try:
                follower.start()
                _load_and_restart(
                    api, plan, spec, follower, watch, notes, progress, reached, disrupt
                )
            except KeyboardInterrupt:
                interrupted = True
                goes_on = "; the rollout goes on" if victims is None else ""
                notes.append(f"interrupted: the load and the watch stopped{goes_on}")
            finally:
                with shielded():  # a second Ctrl-C must not lose what was measured
                    _stop_load(api, ns, follower, notes)
                    timing = replace(reached[0], load_stopped=time.time())
                    watch.final()
                    pod_records, slice_records = watch.stop()
                    output = follower.output()
                    evidence.first(pod_records, slice_records, output.rows, follower.pod, notes)
        incomplete = incomplete_reasons(
            plan, timing, interrupted, output.done is not None, watch.lost(), watch.missing
        )
        notes += watch.notes
        if output.done is None:
            notes.append("the load agent ended without its done line (killed or crashed)")
        bundle = evidence.complete(api, notes, incomplete)
        rows = output.rows
        failures = sorted(float(r["ts"]) for r in rows if r.get("outcome") != "ok")
        kinds: dict[str, int] = {}
        for r in rows:
            kinds[str(r.get("outcome"))] = kinds.get(str(r.get("outcome")), 0) + 1
        diagnosis, error = diagnose_bundle(bundle)
    except KeyboardInterrupt:
        if cleaned:
            raise Interrupted(cleaned[0], str(plan.out) if evidence.written else None) from None
        raise
    return RolloutTest(
        plan,
        svc_name,
        len(rows),
        len(failures),
        dict(sorted(kinds.items())),
        by_phase(rows, timing),
        pod_delays(pod_records, slice_records, failures, record_seen),
        timing,
        diagnosis,
        bundle,
        interrupted,
        cleaned[0] if cleaned else None,
        tuple(notes),
        error,
        tuple(incomplete),
        edge,
    )


def _load_and_restart(
    api: ApiReader,
    plan: Plan,
    spec: AgentSpec,
    follower: Follower,
    watch: _Watch,
    notes: list[str],
    progress: Callable[[str], None],
    reached: list[Timing],
    disrupt: Callable[[float], None] | None = None,
) -> None:
    """Wait for the load's first rows, restart the workload (or ``disrupt`` it, within a
    deadline: a drain), wait for the rollout and the tail; ``reached[0]`` is the timing so
    far (``rolled_out`` None: the rollout did not finish in time)."""
    ns = plan.namespace
    started = time.time()
    if not _wait(
        lambda: follower.rows_so_far() > 0 or follower.phase in ("Succeeded", "Failed"),
        started + START_SECONDS,
    ):
        raise ClusterError(
            f"the load agent (job {spec.name}) sent no request within "
            f"{START_SECONDS:g} s (image {spec.image} not pulled? "
            f"kubectl -n {ns} describe job {spec.name})"
        )
    if follower.rows_so_far() == 0:
        raise ClusterError(_agent_failed(follower, spec.name))
    load_started = time.time()
    reached[0] = Timing(load_started=load_started)
    progress(f"load running; steady for {plan.warmup:g} s, then the restart")
    watch.start()
    time.sleep(plan.warmup)
    # the agent stops by itself after --duration: the rollout and its tail fit in it
    deadline = load_started + plan.duration - plan.tail
    if disrupt is None:
        api.patch(plan.kind, ns, plan.name, restart_patch(time.time()))
        reached[0] = replace(reached[0], restarted=time.time())
        progress(f"restarted {plan.workload}; waiting for the rollout")
    else:  # a drain: it starts with the cordon, the evictions take their time
        reached[0] = replace(reached[0], restarted=time.time())
        progress(f"{plan.mode} of {plan.node}: cordon, then the evictions")
        disrupt(deadline)
        progress(f"{plan.node} drained; waiting for {plan.workload} to be whole again")
    if _wait(lambda: _done(api, plan, watch) or watch.lost() is not None, deadline, 1.0):
        if watch.lost() is not None:
            progress(f"{watch.lost()}; stopping")
            return
        reached[0] = replace(reached[0], rolled_out=time.time())
        progress(f"rolled out; {plan.tail:g} s tail")
        time.sleep(plan.tail)


def drain_plan(api: ApiReader, plan: Plan, service: Mapping[str, Any]) -> tuple[Victims, str]:
    """Before anything is created: the node is there and not cordoned, a drain may evict
    its pods (``drain.victims``) and some are the workload's; the load agent's node."""
    assert plan.node is not None
    check_node(plan.node, api.get("nodes", None, plan.node))
    on_node = api.list("pods", None, fields=f"spec.nodeName={plan.node}")
    found = victims(plan.node, on_node)
    selector = (service.get("spec") or {}).get("selector") or {}
    ours = [
        p for p in on_node
        if (p.get("metadata") or {}).get("namespace") == plan.namespace
        and selects(selector, (p.get("metadata") or {}).get("labels") or {})
    ]  # fmt: skip
    if not ours:
        raise Refused(f"no pod of {plan.workload} runs on {plan.node}: its drain tests nothing")
    return found, agent_node(plan.node, api.list("nodes"))


def _drain(
    api: ApiReader,
    plan: Plan,
    undo: ExitStack,
    notes: list[str],
    progress: Callable[[str], None],
) -> Callable[[float], None]:
    """The drain as ``_load_and_restart`` runs it: cordon (undone by ``undo``), evict."""
    assert plan.node is not None
    node = plan.node

    def disrupt(until: float) -> None:
        undo.enter_context(cordoned(api, node, notes))
        # listed again once cordoned, as kubectl drain does: a pod placed on the node since
        # the plan is evicted too (its uid a precondition: a namesake elsewhere is not)
        now = victims(node, api.list("pods", None, fields=f"spec.nodeName={node}"))
        evict_all(api, node, now.evict, until, progress)

    return disrupt


def _agent_failed(follower: Follower, job: str) -> str:
    output = follower.output()
    last = output.other[-1] if output.other else f"exit code {follower.exit_code}"
    return f"the load agent (job {job}) ended before sending a request: {last}"


def _done(api: ApiReader, plan: Plan, watch: _Watch) -> bool:
    """Rolled out, and no old pod is still terminating. A failed read of the workload is a
    note (once per message) and counts as not yet: the next poll retries it."""
    try:
        obj = api.get(plan.kind, plan.namespace, plan.name)
    except ClusterError as exc:
        watch.read_failed(plan.workload, exc)
        return False
    watch.read_worked()
    if obj is None or not rolled_out(obj):
        return False
    with watch.streams["pods"].lock:
        last = list(watch.streams["pods"].last.values())
        gone = {
            str((r["object"].get("metadata") or {}).get("uid"))
            for r in watch.streams["pods"].records
            if r["type"] == "DELETED"
        }
    terminating = [
        p for p in last
        if (p.get("metadata") or {}).get("deletionTimestamp")
        and str((p.get("metadata") or {}).get("uid")) not in gone
    ]  # fmt: skip
    return not terminating


def _stop_load(api: ApiReader, namespace: str, follower: Follower, notes: list[str]) -> None:
    """Delete the agent's pod (SIGTERM: it ends its requests and prints its done line) and
    wait (bounded) for the log to end."""
    if follower.pod is None:
        return
    try:
        api.delete("pods", namespace, follower.pod)
    except ClusterError as exc:
        notes.append(f"stopping the load agent: {exc}")
    follower.join(STOP_SECONDS)
