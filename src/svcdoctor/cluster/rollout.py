"""``svcdoctor rollout-test``: restart a workload under load from inside the cluster and
measure what the rollout drops.

The load is the agent (``agentjob``) in service mode through the Service; the restart is
the patch ``kubectl rollout restart`` sends (``kubectl.kubernetes.io/restartedAt``); pods
and EndpointSlices are watched as ``collect --watch`` watches them (collect's stream
records), and the bundle is a collect bundle plus the agent's request rows
(``client-<pod>.jsonl``), which ``diagnose`` reads like any other. The summary's numbers
(phases, the deletion → endpoint-update delay, the per-pod window) are pure functions of
the rows and the watch; the cause, its window and the remedy are diagnose's, whose remedy
is ``svcdoctor.model.remedy.plan_shutdown``'s.

Ctrl-C (or SIGTERM) stops the load and the watch, leaves the rollout to finish, deletes
what svcdoctor created and still writes the bundle.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from svcdoctor.cluster.agentjob import AgentSpec, Cleanup, Follower, deployed
from svcdoctor.cluster.api import ApiReader
from svcdoctor.cluster.collect import (
    MARKER,
    SERVICE_NAME_LABEL,
    Request,
    Stream,
    check_out,
    collect,
    manifest,
    stream,
    write_atomic,
)
from svcdoctor.cluster.reader import ClusterError, WatchEvent
from svcdoctor.errors import SvcdoctorError
from svcdoctor.evidence.times import rfc3339
from svcdoctor.model import REQUEST_COLUMNS

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
KINDS = {"deployment": "deployments", "statefulset": "statefulsets"}
ALIASES = {"deploy": "deployment", "deployments": "deployment", "sts": "statefulset",
           "statefulsets": "statefulset"}  # fmt: skip
START_SECONDS = 120.0  # for the agent's pod to start and send its first requests
STOP_SECONDS = 20.0  # for the agent to end after its pod is deleted
PHASES = ("before", "during", "after")


class Refused(SvcdoctorError):
    """rollout-test will not run as asked (one line, exit 2)."""


@dataclass(frozen=True, slots=True)
class Plan:
    """What to test and how."""

    namespace: str
    kind: str  # deployments | statefulsets
    name: str
    out: Path
    service: str | None = None
    rate: float = 50.0
    duration: float = 120.0  # bound on the whole test, start of the load to its end
    warmup: float = 3.0
    tail: float = 5.0
    keepalive: bool = False
    path: str = "/"
    port: str | None = None
    image: str | None = None
    allow_outage: bool = False
    timeout: float = 2.0

    @property
    def workload(self) -> str:
        return f"{self.kind[:-1]}/{self.name}"


@dataclass(frozen=True, slots=True)
class Timing:
    """When the test did what (Unix seconds; None: it did not get there)."""

    load_started: float | None = None
    restarted: float | None = None
    rolled_out: float | None = None
    load_stopped: float | None = None


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
class Outcome:
    """A finished test: the numbers, the diagnosis (as diagnose's JSON) and notes."""

    plan: Plan
    service: str
    requests: int
    failed: int
    by_outcome: dict[str, int]
    by_phase: dict[str, dict[str, int]]
    delays: tuple[PodDelay, ...]
    timing: Timing
    diagnosis: dict[str, Any]
    bundle: Path
    interrupted: bool
    cleanup: Cleanup | None
    notes: tuple[str, ...] = ()

    @property
    def race(self) -> dict[str, Any]:
        for cause in self.diagnosis.get("causes") or []:
            if cause.get("cause") == "race":
                return dict(cause.get("details") or {})
        return {}

    @property
    def primary_cause(self) -> str | None:
        return self.diagnosis.get("primary_cause") if self.failed else None

    @property
    def window_seconds(self) -> float | None:
        window = self.race.get("window_seconds")
        if window is not None and self.failed:
            return float(window)
        measured = [d.window_seconds for d in self.delays if d.window_seconds is not None]
        return round(max(measured), 3) if measured else None

    @property
    def endpoint_update_seconds(self) -> float | None:
        seen = [d.update_seconds for d in self.delays if d.update_seconds is not None]
        return round(max(seen), 3) if seen else None

    @property
    def remedy(self) -> dict[str, int | None]:
        race = self.race if self.failed else {}
        return {
            "prestop_seconds": race.get("recommended_prestop_seconds"),
            "grace_seconds": race.get("recommended_grace_seconds"),
        }

    def to_dict(self) -> dict[str, Any]:
        """``--format json``: the keys ``lab run --format json`` uses where they overlap."""
        return {
            "workload": self.plan.workload,
            "requests": self.requests,
            "failed": self.failed,
            "by_outcome": self.by_outcome,
            "primary_cause": self.primary_cause,
            "window_seconds": self.window_seconds,
            "endpoint_update_seconds": self.endpoint_update_seconds,
            "remedy": self.remedy,
            "bundle": str(self.bundle),
        }


# ---------------------------------------------------------------- pure parts


def parse_workload(text: str) -> tuple[str, str]:
    """``deployment/NAME`` (kubectl's spellings: deploy, deployments, sts …) → (plural,
    name); a bare NAME is a Deployment."""
    kind, sep, name = text.partition("/")
    if not sep:
        kind, name = "deployment", text
    kind = ALIASES.get(kind.lower(), kind.lower())
    if kind not in KINDS or not name:
        raise Refused(f"{text!r}: expected deployment/NAME or statefulset/NAME")
    return KINDS[kind], name


def restart_patch(now: float) -> dict[str, Any]:
    """The patch ``kubectl rollout restart`` sends (strategic merge)."""
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: stamp}}}}}


def ready_replicas(obj: Mapping[str, Any]) -> int:
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


def service_address(service: Mapping[str, Any], port: str | None = None) -> str:
    """``ClusterIP:port`` of the Service (``port``: a port's name or number; default: the
    first)."""
    spec = service.get("spec") or {}
    name = (service.get("metadata") or {}).get("name")
    ip = spec.get("clusterIP")
    if not ip or ip == "None":
        raise Refused(f"service {name} is headless (no ClusterIP): nothing to load through")
    ports = spec.get("ports") or []
    chosen = [p for p in ports if port is None or port in (str(p.get("port")), p.get("name"))]
    if not chosen:
        known = ", ".join(str(p.get("name") or p.get("port")) for p in ports) or "none"
        raise Refused(f"service {name} has no port {port} (ports: {known})")
    host = f"[{ip}]" if ":" in str(ip) else str(ip)
    return f"{host}:{chosen[0]['port']}"


def phase_of(ts: float, timing: Timing) -> str:
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
    from svcdoctor.cluster.collect import SEEN

    notes = (obj.get("metadata") or {}).get("annotations") or {}
    return rfc3339(notes.get(SEEN))


def canonical(row: Mapping[str, Any]) -> dict[str, Any]:
    """An agent row with only the canonical request-log columns."""
    return {k: row.get(k) for k in REQUEST_COLUMNS if k in row}


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
            for event in self.api.watch(what, self.namespace, labels, until=self.until):
                if into.closed:
                    return
                first = event.seen if first is None else first
                into.add(event, initial=event.type == "ADDED" and event.seen == first)
        except ClusterError as exc:
            self.notes.append(f"watch of {what} stopped: {exc}")

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
                self.notes.append(f"listing {what} after the watch failed: {exc}")

    def stop(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        pods, _ = self.streams["pods"].close()
        slices, _ = self.streams["slices"].close()
        return pods, slices


def _wait(condition: Callable[[], bool], until: float, step: float = 0.5) -> bool:
    while time.time() < until:
        if condition():
            return True
        time.sleep(step)
    return condition()


def agent_args(plan: Plan, address: str, service: str) -> tuple[str, ...]:
    args = [
        "--mode", "service", "--service", address, "--rate", f"{plan.rate:g}",
        "--duration", f"{plan.duration:g}", "--protocol", "http", "--path", plan.path,
        "--timeout", f"{plan.timeout:g}", "--upstream", f"{plan.namespace}/{service}",
        "--max-requests", str(int(plan.rate * plan.duration) + 1),
    ]  # fmt: skip
    if plan.keepalive:
        args.append("--keepalive")
    return tuple(args)


def run(
    api: ApiReader,
    plan: Plan,
    progress: Callable[[str], None] = lambda _: None,
) -> Outcome:
    """The test (see the module docstring). ``Refused`` before anything is created when the
    workload, its Service or ``--out`` do not allow it."""
    ns = plan.namespace
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
    address = service_address(service, plan.port)
    selector = (service.get("spec") or {}).get("selector") or {}
    pod_labels = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    spec = AgentSpec(ns, "rollout", agent_args(plan, address, svc_name), plan.duration)
    if plan.image:
        spec = replace(spec, image=plan.image)
    started = time.time()
    end = started + START_SECONDS + plan.duration
    timing = Timing()
    notes: list[str] = []
    interrupted = False
    cleaned: list[Cleanup] = []
    follower = Follower(api, ns, end + STOP_SECONDS, selector=f"job-name={spec.name}")
    watch = _Watch(api, ns, svc_name, pod_labels, end + STOP_SECONDS)
    progress(f"load through {ns}/{svc_name} ({address}) at {plan.rate:g}/s: job {spec.name}")
    with deployed(api, spec, on_cleanup=cleaned.append):
        try:
            follower.start()
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
            timing = Timing(load_started=time.time())
            progress(f"load running; steady for {plan.warmup:g} s, then the restart")
            watch.start()
            time.sleep(plan.warmup)
            api.patch(plan.kind, ns, plan.name, restart_patch(time.time()))
            timing = Timing(timing.load_started, restarted=time.time())
            progress(f"restarted {plan.workload}; waiting for the rollout")
            # the agent stops by itself after --duration: the rollout and its tail fit in it
            assert timing.load_started is not None
            deadline = timing.load_started + plan.duration - plan.tail
            if _wait(lambda: _done(api, plan, watch), deadline, 1.0):
                timing = Timing(timing.load_started, timing.restarted, time.time())
                progress(f"rolled out; {plan.tail:g} s tail")
                time.sleep(plan.tail)
            else:
                notes.append(f"the rollout did not finish within --duration {plan.duration:g} s")
        except KeyboardInterrupt:
            interrupted = True
            notes.append("interrupted: the load and the watch stopped; the rollout goes on")
        finally:
            _stop_load(api, ns, follower, timing, notes)
            timing = Timing(timing.load_started, timing.restarted, timing.rolled_out, time.time())
            watch.final()
            pod_records, slice_records = watch.stop()
    output = follower.output()
    if output.done is None:
        notes.append("the load agent ended without its done line (killed or crashed)")
    bundle = _write_bundle(
        api, plan, svc_name, pod_records, slice_records, output.rows, follower, started, notes
    )
    notes += watch.notes
    rows = output.rows
    failures = sorted(float(r["ts"]) for r in rows if r.get("outcome") != "ok")
    kinds: dict[str, int] = {}
    for r in rows:
        kinds[str(r.get("outcome"))] = kinds.get(str(r.get("outcome")), 0) + 1
    return Outcome(
        plan,
        svc_name,
        len(rows),
        len(failures),
        dict(sorted(kinds.items())),
        by_phase(rows, timing),
        pod_delays(pod_records, slice_records, failures, record_seen),
        timing,
        _diagnose(bundle),
        bundle,
        interrupted,
        cleaned[0] if cleaned else None,
        tuple(notes),
    )


def _agent_failed(follower: Follower, job: str) -> str:
    output = follower.output()
    last = output.other[-1] if output.other else f"exit code {follower.exit_code}"
    return f"the load agent (job {job}) ended before sending a request: {last}"


def _done(api: ApiReader, plan: Plan, watch: _Watch) -> bool:
    """Rolled out, and no old pod is still terminating."""
    obj = api.get(plan.kind, plan.namespace, plan.name)
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


def _stop_load(
    api: ApiReader, namespace: str, follower: Follower, timing: Timing, notes: list[str]
) -> None:
    """Delete the agent's pod (SIGTERM: it ends its requests and prints its done line) and
    wait for the log to end."""
    if follower.pod is None:
        return
    try:
        api.delete("pods", namespace, follower.pod)
    except ClusterError as exc:
        notes.append(f"stopping the load agent: {exc}")
    follower.join(STOP_SECONDS)


def _write_bundle(
    api: ApiReader,
    plan: Plan,
    service: str,
    pod_records: list[dict[str, Any]],
    slice_records: list[dict[str, Any]],
    rows: Sequence[Mapping[str, Any]],
    follower: Follower,
    started: float,
    notes: list[str],
) -> Path:
    """collect's bundle of the Service, with the watched streams and the agent's rows."""
    from svcdoctor.evidence.reader import read_evidence

    out = plan.out
    since = time.time() - started + 60.0
    result = collect(api, Request(plan.namespace, service, out, since))
    write_atomic(out / "endpointslices.json", stream(slice_records))
    write_atomic(out / "pods.json", stream(pod_records))
    client = f"client-{follower.pod or 'svcdoctor-agent'}.jsonl"
    write_atomic(
        out / client, "".join(json.dumps(canonical(r), separators=(",", ":")) + "\n" for r in rows)
    )
    names = [p.name for p in out.iterdir() if not p.name.startswith(".")]
    found = read_evidence([str(out / n) for n in sorted(names) if n != "collect.json"])
    context = {
        k: v for k, v in result.items() if k not in (MARKER, "bundle", "files", "span", "notes")
    }
    context["watch_seconds"] = round(time.time() - started, 3)
    context["rollout_test"] = {"workload": f"{plan.namespace}/{plan.workload}", "rate": plan.rate}
    context["notes"] = [*result.get("notes", []), *notes]
    write_atomic(
        out / "collect.json",
        json.dumps(manifest(out, found.sources, found.problems, context), indent=2) + "\n",
    )
    return out


def _diagnose(bundle: Path) -> dict[str, Any]:
    from svcdoctor.diagnose import Settings, diagnose
    from svcdoctor.evidence.reader import read_evidence
    from svcdoctor.report.diagnosis import diagnosis_to_dict

    try:
        found = read_evidence([str(bundle)])
    except SvcdoctorError as exc:
        return {"primary_cause": None, "causes": [], "error": str(exc)}
    return diagnosis_to_dict(diagnose(found, Settings()))
