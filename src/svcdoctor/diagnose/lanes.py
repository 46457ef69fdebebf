"""Per-pod lanes from the evidence and its diagnosis: each pod's sourced lifecycle moments,
the failed requests on the pod they hit, requests per second and the diagnosed race window
after each deletion (``svcdoctor.model.lanes``; drawn by ``svcdoctor.report.lanes``).

A moment is only stamped when an input gives it: creation (pod snapshot, events), Ready and
endpoint not ready (EndpointSlices), deletion (the moment the race analysis uses), exits
(pod snapshot, events). The kubelet starts the preStop hook at deletion and sends SIGTERM
when it ends: both are stamped only when the manifests say whether the pod has a hook (and
for how long it sleeps) or a FailedPreStopHook event shows the hook and when it gave up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace

import polars as pl

from svcdoctor.diagnose import upstreams
from svcdoctor.diagnose.context import Context, build
from svcdoctor.diagnose.race import TOLERANCE
from svcdoctor.model import (
    Cause,
    Diagnosis,
    EndpointChange,
    EventKind,
    Evidence,
    Inventory,
    LifecycleEvent,
    Outcome,
    PodInfo,
    RaceDetails,
    Workload,
    owners,
    selector_matches,
    shutdown_timeline,
)
from svcdoctor.model.hops import HopKind
from svcdoctor.model.lanes import (
    OTHER_PODS,
    UNKNOWN_BACKEND,
    FailedRequest,
    Lane,
    Lanes,
    Moment,
    Shade,
    Stamp,
)

ORDER = {m: i for i, m in enumerate(Moment)}


def build_lanes(evidence: Evidence, diagnosis: Diagnosis, *, limit: int = 12) -> Lanes:
    """The lanes of a diagnosis of ``evidence`` (see ``lanes_of``), from the evidence of the
    diagnosed Service."""
    return lanes_of(build(upstreams.of_service(evidence, diagnosis.service)), diagnosis, limit)


def lanes_of(ctx: Context, diagnosis: Diagnosis, limit: int = 12) -> Lanes:
    """The lanes of the diagnosed Service (``diagnosis``: of this context): a lane per pod
    whose life overlaps the requests (and per backend address no pod is known for), pods
    with no failures collapsed into ``OTHER_PODS`` past ``limit`` lanes (pods with failures
    too, the fewest first, when more than ``limit`` have some); a failure without a backend
    on the pod whose race window alone holds it (``inferred``), else on
    ``UNKNOWN_BACKEND``."""
    start, end = ctx.traffic_span
    shades = _shades(ctx, diagnosis, start, end)
    failures = _failures(ctx)
    lane_of = {b: _lane_of(ctx, b) for b in {f.backend for f in failures}}
    by_lane: dict[str, list[FailedRequest]] = {}
    tol = ctx.resolution + TOLERANCE
    for f in failures:
        pod = _windowed(f, shades, tol) if not f.backend else None
        mark = f if pod is None else replace(f, inferred=True)
        by_lane.setdefault(pod or lane_of[f.backend], []).append(mark)
    pods = {p.name: p for p in ctx.evidence.pods}
    index = _Index.of(ctx)
    backends = _backends(ctx)
    names = _like(ctx.evidence, _service_pods(ctx.evidence, start, end), backends) or backends
    hops = _hop_stops(diagnosis)
    stamps = {
        name: tuple(
            sorted(
                (*_stamps(index, name, pods.get(name)), *hops.get(name, ())),
                key=lambda s: (s.ts, ORDER[s.kind]),
            )
        )
        for name in names | (by_lane.keys() - {UNKNOWN_BACKEND})
    }
    kept, collapsed = _choose(stamps, by_lane, limit)
    lanes = [Lane(name, stamps[name], tuple(by_lane.get(name, ()))) for name in kept]
    lane_names = set(kept)
    if collapsed or any(s.pod not in lane_names for s in shades):
        members = tuple(
            Lane(name, stamps[name], tuple(by_lane.get(name, ()))) for name in collapsed
        )
        other = sorted((f for m in members for f in m.failures), key=_when)
        lanes.append(Lane(OTHER_PODS, (), tuple(other), members))
    if UNKNOWN_BACKEND in by_lane:
        lanes.append(Lane(UNKNOWN_BACKEND, (), tuple(by_lane[UNKNOWN_BACKEND])))
    t = diagnosis.timeline
    return Lanes(
        lanes=tuple(lanes),
        second=t.second,
        requests=t.requests,
        shades=shades,
        start=start,
        end=end,
        title=_title(ctx.evidence, diagnosis, kept),
    )


_HOP_MOMENTS = {HopKind.INGRESS: Moment.INGRESS_STOPPED, HopKind.LOAD_BALANCER: Moment.LB_STOPPED}


def _hop_stops(diagnosis: Diagnosis) -> dict[str, list[Stamp]]:
    """Per pod, when each hop whose own log the race analysis read stopped routing to it."""
    race = next((a for a in diagnosis.causes if a.cause is Cause.RACE), None)
    details = race.details if race is not None else None
    out: dict[str, list[Stamp]] = {}
    for leg in details.hops if isinstance(details, RaceDetails) else ():
        if (kind := _HOP_MOMENTS.get(leg.hop)) is not None:
            for stop in leg.stops:
                out.setdefault(stop.pod, []).append(Stamp(kind, stop.stopped_at))
    return out


def _windowed(f: FailedRequest, shades: Iterable[Shade], tol: float) -> str | None:
    """The pod whose diagnosed race window holds a failure that names no backend, when
    exactly one does (within the clocks' tolerance ``tol``); else None."""
    pods = {s.pod for s in shades if s.start - tol <= f.ts <= s.end + tol}
    return pods.pop() if len(pods) == 1 else None


def _when(f: FailedRequest) -> float:
    return f.ts


def _failures(ctx: Context) -> list[FailedRequest]:
    """Failed requests and failed attempts a proxy retried, at their start: what hit a
    backend (error-log rows only repeat them)."""
    rows = (
        ctx.frame.filter(pl.col("failed") & pl.col("role").is_in(["request", "masked"]))
        .select("ts", "outcome", pl.col("backend").cast(pl.Utf8).fill_null(""))
        .sort("ts")
    )
    return [FailedRequest(float(ts), Outcome(o), b) for ts, o, b in rows.iter_rows()]


def _backends(ctx: Context) -> set[str]:
    """Every backend of the requests, when the evidence knows no pod: the lanes then show
    the backends that did not fail too."""
    if not ctx.has_backend:
        return set()
    rows = ctx.frame.filter(pl.col("role") != "error_log").get_column("backend")
    return {_lane_of(ctx, str(b)) for b in rows.drop_nulls().unique().to_list()}


def _lane_of(ctx: Context, backend: str) -> str:
    if not backend:
        return UNKNOWN_BACKEND
    pod = ctx.pod_of(backend)
    return pod.name if pod is not None else backend


def _service_pods(evidence: Evidence, start: float, end: float) -> set[str]:
    """The pods whose life overlaps the requests, of the Services in the manifests when the
    manifests select any of them."""
    info = {p.name: p for p in evidence.pods}
    names = (
        set(info)
        | {e.pod for e in evidence.events if e.pod}
        | {c.pod for c in evidence.endpoints if c.pod}
    )
    created: dict[str, float] = {}
    gone: dict[str, float] = {}
    for e in evidence.events:
        if e.pod and e.kind is EventKind.CREATE:
            created[e.pod] = min(created.get(e.pod, e.ts), e.ts)
        if e.pod and e.kind is EventKind.EXIT and e.pod not in info:
            gone[e.pod] = max(gone.get(e.pod, e.ts), e.ts)
    for p in evidence.pods:
        if p.created_at is not None:
            created[p.name] = p.created_at
        finished = [x.finished_at for x in p.exits if x.finished_at is not None]
        if finished and p.deleted_at is not None:
            gone[p.name] = max(finished)
    alive = {n for n in names if created.get(n, start) <= end and gone.get(n, end) >= start}
    selected = {n for n in alive if _served(evidence.inventory, n, info.get(n))}
    return selected or alive


# labels whose value changes with each revision of a workload (a Service never selects on
# them): the pods of one Service differ there
_REVISION_LABELS = frozenset(
    {
        "pod-template-hash",
        "controller-revision-hash",
        "app.kubernetes.io/version",
        "helm.sh/chart",
        "version",
    }
)


def _family(name: str) -> str:
    """A pod's workload by its name: ``<deployment>-<hash>-<suffix>`` → ``<deployment>``."""
    return name.rsplit("-", 2)[0]


def _like(evidence: Evidence, names: set[str], backends: set[str]) -> set[str]:
    """Of ``names``, the pods like those the requests went to: with the labels all of those
    share (what a Service selects on), or of the same workloads by name where a pod's
    labels are unknown (a pod seen only in events or EndpointSlices: pods.json taken after
    the rollout no longer lists the deleted ones); client pods in the same pods.json are
    not the Service's. Unchanged when no backend is a known pod."""
    info = {p.name: p for p in evidence.pods}
    served = [info[n] for n in backends if n in info]
    if not served:
        return names
    shared = set.intersection(*({*p.labels.items()} for p in served))
    shared = {(k, v) for k, v in shared if k not in _REVISION_LABELS}
    families = {_family(p.name) for p in served}

    def like(name: str) -> bool:
        pod = info.get(name)
        if pod is not None and pod.labels and shared:
            return shared <= {*pod.labels.items()}
        return _family(name) in families

    return {n for n in names if like(n)}


def _served(inventory: Inventory | None, name: str, pod: PodInfo | None) -> bool:
    """Whether a Service of the manifests selects the pod (by its labels, or by its owner's
    name when the evidence has no labels); True when the manifests have no Service."""
    services = [s for s in inventory.services if s.selector] if inventory else []
    if inventory is None or not services:
        return True
    if pod is not None and pod.labels:
        return any(selector_matches(s.selector or {}, pod.labels) for s in services)
    owner = _workload(inventory, name, None)
    return owner is not None and any(owner in inventory.targeted(s) for s in services)


def _workload(inventory: Inventory, name: str, pod: PodInfo | None) -> Workload | None:
    """The workload of the manifests a pod comes from: by its owner's name (the longest
    name that prefixes the pod's), else by its template's labels."""
    serving = [w for w in inventory.workloads if w.serving]
    named = [w for w in serving if name.startswith(w.ref.name + "-")]
    if named:
        return max(named, key=lambda w: len(w.ref.name))
    if pod is not None and pod.labels:
        labelled = [w for w in serving if selector_matches(w.template.labels, pod.labels)]
        if len(labelled) == 1:
            return labelled[0]
    return None


@dataclass(frozen=True, slots=True)
class _Hook:
    """What the manifests say of a pod's preStop: ``present`` None when they do not know."""

    present: bool | None
    sleep: float | None = None
    grace: float | None = None


def _hook(ctx: Context, name: str, pod: PodInfo | None) -> _Hook:
    inventory = ctx.evidence.inventory
    w = _workload(inventory, name, pod) if inventory is not None else None
    if w is None:
        return _Hook(None)
    given = pod.grace_seconds if pod is not None else None
    grace = float(w.template.effective_grace_seconds if given is None else given)
    hooks = [c.prestop for c in w.template.containers if c.prestop is not None]
    if not hooks:
        return _Hook(False, grace=grace)
    sleeps = [h.sleep_seconds for h in hooks]
    known = [s for s in sleeps if s is not None]
    return _Hook(True, max(known) if len(known) == len(sleeps) else None, grace)


@dataclass(frozen=True, slots=True)
class _Index:
    """The events per pod, and the endpoint changes per pod and per address (time order)."""

    ctx: Context
    events: dict[str, list[LifecycleEvent]]
    by_pod: dict[str, list[EndpointChange]]
    by_address: dict[str, list[EndpointChange]]

    @classmethod
    def of(cls, ctx: Context) -> _Index:
        events: dict[str, list[LifecycleEvent]] = {}
        for e in ctx.evidence.events:
            if e.pod:
                events.setdefault(e.pod, []).append(e)
        by_pod: dict[str, list[EndpointChange]] = {}
        by_address: dict[str, list[EndpointChange]] = {}
        for c in sorted((c for c in ctx.evidence.endpoints if c.ts is not None), key=_at):
            by_address.setdefault(c.address, []).append(c)
            if c.pod:
                by_pod.setdefault(c.pod, []).append(c)
        return cls(ctx, events, by_pod, by_address)

    def endpoints(self, name: str, ip: str | None) -> list[EndpointChange]:
        """The pod's endpoint changes: by its name, else by its IP."""
        return self.by_pod.get(name) or (self.by_address.get(ip, []) if ip else [])


def _at(c: EndpointChange) -> float:
    return c.ts or 0.0


def _stamps(index: _Index, name: str, pod: PodInfo | None) -> tuple[Stamp, ...]:
    ctx = index.ctx
    mine = index.events.get(name, [])
    out: list[Stamp] = []
    created = pod.created_at if pod and pod.created_at is not None else None
    if created is None:
        created = min((e.ts for e in mine if e.kind is EventKind.CREATE), default=None)
    if created is not None:
        out.append(Stamp(Moment.CREATED, created))
    changes = index.endpoints(name, pod.ip if pod else None)
    ready = next((c.ts for c in changes if c.ready and not c.removed), None)
    if ready is not None:
        out.append(Stamp(Moment.READY, ready))
    deleted = ctx.deletions.get(name)
    tol = ctx.resolution + TOLERANCE
    if deleted is not None:
        out.append(Stamp(Moment.DELETION, deleted))
        after_deletion = [e for e in mine if e.ts >= deleted - tol]
        out.extend(_shutdown(ctx, name, pod, deleted, after_deletion))
    after = deleted - tol if deleted is not None else (ready if ready is not None else -1e18)
    not_ready = next(
        (c.ts for c in changes if (c.removed or c.ready is False) and (c.ts or 0.0) >= after),
        None,
    )
    if not_ready is not None:
        out.append(Stamp(Moment.ENDPOINT_NOT_READY, not_ready))
    exits: list[tuple[float, int | None]]
    exits = [(x.finished_at, x.exit_code) for x in (pod.exits if pod else ()) if x.finished_at]
    if not exits:
        exits = [(e.ts, e.exit_code) for e in mine if e.kind is EventKind.EXIT]
    out.extend(Stamp(Moment.EXITED, _not_before(ts, deleted), code) for ts, code in exits)
    return tuple(sorted(out, key=lambda s: (s.ts, ORDER[s.kind])))


def _not_before(ts: float, deleted: float | None) -> float:
    """An exit in whole seconds (``finishedAt``) just before the deletion it follows: the
    deletion moment, the earliest the exit can have been."""
    if deleted is not None and deleted - 1.0 - TOLERANCE <= ts < deleted:
        return deleted
    return ts


def _shutdown(
    ctx: Context, name: str, pod: PodInfo | None, deleted: float, mine: list[LifecycleEvent]
) -> list[Stamp]:
    """preStop and SIGTERM after a deletion, from what the inputs (the pod's events since
    it) say, or nothing."""
    failed = next((e.ts for e in mine if e.kind is EventKind.PRESTOP_FAILED), None)
    hook = _hook(ctx, name, pod)
    if failed is not None:  # the hook gave up: SIGTERM follows at once
        return [Stamp(Moment.PRESTOP, deleted), Stamp(Moment.SIGTERM, max(failed, deleted))]
    if hook.present is False:  # no hook: the kubelet sends SIGTERM when it starts killing
        killing = next((e.ts for e in mine if e.reason == "Killing"), deleted)
        return [Stamp(Moment.SIGTERM, max(killing, deleted))]
    if hook.present is None:
        return []
    out = [Stamp(Moment.PRESTOP, deleted)]
    if hook.sleep is not None and hook.grace is not None:
        out.append(Stamp(Moment.SIGTERM, deleted + shutdown_timeline(hook.sleep, hook.grace)[0]))
    return out


def _shades(ctx: Context, diagnosis: Diagnosis, start: float, end: float) -> tuple[Shade, ...]:
    """The diagnosed race window after each deletion that the requests overlap."""
    race = next((a for a in diagnosis.causes if a.cause is Cause.RACE), None)
    details = race.details if race is not None else None
    window = details.window if isinstance(details, RaceDetails) else None
    if window is None:
        return ()
    return tuple(
        Shade(pod, ts, window.seconds)
        for pod, ts in sorted(ctx.deletions.items(), key=lambda x: (x[1], x[0]))
        if ts <= end and ts + window.seconds >= start
    )


def _choose(
    stamps: dict[str, tuple[Stamp, ...]], by_lane: dict[str, list[FailedRequest]], limit: int
) -> tuple[list[str], list[str]]:
    """The pods that get a lane (in creation order, addresses with no pod last) and those
    collapsed: pods with failures first (the most first), then deleted pods, then others."""

    def born(name: str) -> tuple[int, float, str]:
        first = stamps[name][0].ts if stamps[name] else float("-inf")
        return (0 if stamps[name] else 1, first, name)

    names = sorted(stamps, key=born)
    if len(names) <= limit:
        return names, []
    deleted = {n for n in names if any(s.kind is Moment.DELETION for s in stamps[n])}
    ranked = sorted(
        names,
        key=lambda n: (-len(by_lane.get(n, ())), n not in deleted, born(n)),
    )
    keep = set(ranked[: max(limit, 0)])
    return [n for n in names if n in keep], [n for n in names if n not in keep]


def _title(evidence: Evidence, diagnosis: Diagnosis, pods: Iterable[str]) -> str:
    """The Service: as diagnosed, else the manifests' only Service, else the Deployment most
    pods belong to."""
    if diagnosis.service:
        return diagnosis.service
    services = evidence.inventory.services if evidence.inventory else ()
    if len(services) == 1:
        return services[0].ref.name
    owner = Counter(owners(p)[1] for p in pods if p.count("-") >= 2).most_common(1)
    return owner[0][0] if owner else "requests"
