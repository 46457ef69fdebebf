"""``svcdoctor collect``: one Service's evidence bundle, read from a live cluster.

The bundle is what ``svcdoctor diagnose DIR`` reads, in the formats users already have:
``service.json``, ``endpointslices.json`` (or ``endpoints.json``), ``pods.json``,
``owners.json`` and ``events.json`` as ``kubectl get -o json`` writes them; with
``--watch``, ``endpointslices.json`` and ``pods.json`` are instead the stream of
``kubectl get -w -o json --output-watch-events``: every object as first listed, then every
change, each stamped with the moment collect saw it (annotation ``SEEN``; on EndpointSlice
changes also ``CHANGE_SEEN``, the time diagnose's timeline prefers; the objects are
otherwise as the API sent them). Logs keep their native format:
ingress-nginx controllers' access and error logs, Istio sidecars' and Envoy-based gateways'
access logs, filtered to this Service, the pods' Linkerd proxy access logs
(``cluster.meshlogs``), and the request rows of ``--client-logs`` pods. ``routes.json``
holds the hop objects of the namespace (``cluster.hops``: Ingresses, Gateway API kinds,
TargetGroupBindings, their classes, the Namespace). ``collect.json`` records
the run (manifest, context, server version, notes).

The filters and the manifest are pure functions; ``collect`` is the I/O over a
``ClusterReader``.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from svcdoctor.cluster.hops import read_hops
from svcdoctor.cluster.meshlogs import (
    GATEWAYS,
    LINKERD_PROXY,
    REQUEST_FORMATS,
    envoy_lines_for,
    gateway_lines,
    ingress_nginx_lines,
    prefixed,
    request_lines,
)
from svcdoctor.cluster.reader import (
    ClusterError,
    ClusterReader,
    Forbidden,
    Unreachable,
    WatchEvent,
    WatchGap,
)
from svcdoctor.errors import SvcdoctorError
from svcdoctor.evidence.kubectl import CHANGE_SEEN
from svcdoctor.evidence.reader import read_evidence
from svcdoctor.evidence.redact import Redactor
from svcdoctor.model import SourceSummary, iso_utc

MARKER = "svcdoctor_collect"  # collect.json's format version key (diagnose skips the file)
SEEN = "collect.svcdoctor.io/seen"
INGRESS_NGINX_LABELS = "app.kubernetes.io/name=ingress-nginx,app.kubernetes.io/component=controller"
INGRESS_NGINX_NAMESPACE = "ingress-nginx"  # tried when pods cannot be listed cluster-wide
SIDECAR = "istio-proxy"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"

# What a bundle may hold besides collect.json: a directory with anything else is refused.
BUNDLE_NAMES = re.compile(
    r"^(?:(?:service|endpointslices|endpoints|pods|owners|events|routes|diagnosis)\.json"
    r"|ingress-nginx-[^/]+\.(?:error\.)?log|(?:istio|linkerd)-proxy-[^/]+\.(?:log|jsonl)"
    r"|gateway-[^/]+\.(?:log|jsonl)"
    r"|client-[^/]+\.(?:log|jsonl|csv))$"
)

LOG_LIMIT_BYTES = 256 << 20  # per container log


class BundleError(SvcdoctorError, ValueError):
    """``--out`` cannot take a bundle (one line, for the user)."""


class ServiceNotFound(ClusterError):
    """The Service does not exist."""


@dataclass(frozen=True, slots=True)
class Request:
    """What to collect: ``since`` and ``watch`` in seconds, ``client_logs`` a selector."""

    namespace: str
    service: str
    out: Path
    since: float = 3600.0
    watch: float | None = None
    client_logs: str | None = None


# ---------------------------------------------------------------- pure parts


def label_selector(service: Mapping[str, Any]) -> str:
    """The Service's ``spec.selector`` as a label selector string (``a=1,b=2``, sorted);
    ``""`` when it has none."""
    selector = (service.get("spec") or {}).get("selector") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items()))


def upstream_names(service: dict[str, Any]) -> frozenset[str]:
    """ingress-nginx's ``$proxy_upstream_name`` for each port: ``NS-SERVICE-PORT`` with the
    port as the Ingress names it (number or name)."""
    meta = service.get("metadata") or {}
    prefix = f"{meta.get('namespace')}-{meta.get('name')}-"
    names: set[str] = set()
    for port in (service.get("spec") or {}).get("ports") or []:
        names.update(f"{prefix}{port[k]}" for k in ("port", "name") if port.get(k) is not None)
    return frozenset(names)


def addresses(objects: Iterable[dict[str, Any]]) -> frozenset[str]:
    """The IPs of pods (status.podIP/podIPs) and of EndpointSlice/Endpoints addresses."""
    found: set[str] = set()
    for obj in objects:
        status = obj.get("status") or {}
        found.update(str(ip) for ip in [status.get("podIP")] if ip)
        found.update(str(p.get("ip")) for p in status.get("podIPs") or [] if p.get("ip"))
        for ep in obj.get("endpoints") or []:
            found.update(str(a) for a in ep.get("addresses") or [])
        for subset in obj.get("subsets") or []:
            for key in ("addresses", "notReadyAddresses"):
                found.update(str(a.get("ip")) for a in subset.get(key) or [] if a.get("ip"))
    return frozenset(found)


def merge_events(core: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]]) -> list[Any]:
    """One item per event: the core/v1 one, or the events.k8s.io/v1 view of the same event
    (by uid, else namespace/name) when only that one has a microsecond ``eventTime`` —
    never both, which would count each event twice."""

    def key(e: dict[str, Any]) -> tuple[str, ...]:
        meta = e.get("metadata") or {}
        return (
            (str(meta["uid"]),)
            if meta.get("uid")
            else (str(meta.get("namespace")), str(meta.get("name")))
        )

    def precise(e: dict[str, Any]) -> bool:
        return bool(e.get("eventTime") or (e.get("series") or {}).get("lastObservedTime"))

    better = {key(e): e for e in new if precise(e)}
    merged = [better.get(key(e), e) if not precise(e) else e for e in core]
    known = {key(e) for e in core}
    merged += [e for e in new if key(e) not in known]
    return merged


def clean(obj: dict[str, Any]) -> dict[str, Any]:
    """The object as kubectl prints it: without ``metadata.managedFields``."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def kube_list(items: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """``kubectl get -o json`` of several objects."""
    return {"apiVersion": "v1", "kind": "List", "items": list(items), "metadata": {}}


def _stamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def watch_record(event: WatchEvent, initial: bool) -> dict[str, Any]:
    """One element of a ``-w -o json --output-watch-events`` stream, stamped with the moment
    it was seen; a changed EndpointSlice also as ``CHANGE_SEEN``, which diagnose dates the
    change by (the objects as first listed keep their trigger time: their last change came
    before collect)."""
    obj = copy.deepcopy(event.object)
    meta = obj.setdefault("metadata", {})
    notes = meta.get("annotations") or {}
    meta["annotations"] = notes
    notes[SEEN] = _stamp(event.seen)
    if obj.get("kind") == "EndpointSlice" and not initial:
        notes[CHANGE_SEEN] = notes[SEEN]
    return {"type": event.type, "object": obj}


def stream(records: Iterable[dict[str, Any]]) -> str:
    """Concatenated JSON objects, one a line (what ``json_documents`` reads back)."""
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)


def check_out(out: Path) -> bool:
    """Whether ``out`` is usable: missing, empty (False) or an earlier collect bundle (True);
    anything else raises ``BundleError`` so collect never mixes with other files."""
    if not out.exists():
        return False
    if not out.is_dir():
        raise BundleError(f"--out {out}: exists and is not a directory")
    names = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    if not names:
        return False
    earlier = "collect.json" in names and _is_manifest(out / "collect.json")
    others = [n for n in names if n != "collect.json" and not BUNDLE_NAMES.match(n)]
    if not earlier or others:
        shown = ", ".join((others or names)[:3])
        raise BundleError(
            f"--out {out}: holds files that are not a collect bundle ({shown}); "
            "give a new or empty directory, or an earlier collect bundle"
        )
    return True


def _is_manifest(path: Path) -> bool:
    try:
        return MARKER in json.loads(path.read_text())
    except (OSError, ValueError, TypeError):
        return False


def manifest(
    out: Path,
    sources: Sequence[SourceSummary],
    problems: Sequence[str],
    context: dict[str, Any],
) -> dict[str, Any]:
    """collect.json and ``--format json``: each file with its format, rows (objects or
    requests) and time span as diagnose reads it, the span of all the evidence, the run's
    ``context`` and notes (including any file diagnose would skip)."""
    files = []
    for s in sorted(sources, key=lambda s: s.path):
        if Path(s.path).name == "collect.json":
            continue
        files.append(
            {
                "file": Path(s.path).name,
                "format": s.format,
                "rows": s.rows,
                "start": iso_utc(s.start),
                "end": iso_utc(s.end),
            }
        )
    starts = [s.start for s in sources if s.start is not None]
    ends = [s.end for s in sources if s.end is not None]
    notes = list(context.get("notes", []))
    notes += [f"diagnose skips {p.removeprefix(str(out) + os.sep)}" for p in problems]
    return {
        MARKER: 1,
        "bundle": str(out),
        **{k: v for k, v in context.items() if k != "notes"},
        "files": files,
        "span": {
            "start": iso_utc(min(starts)) if starts else None,
            "end": iso_utc(max(ends)) if ends else None,
        },
        "notes": notes,
    }


# ---------------------------------------------------------------- I/O


def write_atomic(path: Path, text: str) -> None:
    """Write via a hidden temporary file and a rename: readers never see half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _json(doc: Any) -> str:
    return json.dumps(doc, indent=2) + "\n"


@dataclass
class Stream:
    """The watched objects of one resource: the stream so far and each object's last state
    (kept after deletion). Threads append under the lock until ``closed``."""

    records: list[dict[str, Any]] = field(default_factory=list)
    last: dict[str, dict[str, Any]] = field(default_factory=dict)  # uid → object
    seen: set[tuple[str, bool, str]] = field(default_factory=set)  # uid, deleted, rv
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False

    def add(self, event: WatchEvent, initial: bool = False) -> bool:
        """Record an event unless this version of the object is recorded already."""
        event = WatchEvent(event.type, clean(event.object), event.seen)
        meta = event.object.get("metadata") or {}
        uid = str(meta.get("uid") or meta.get("name"))
        version = (uid, event.type == "DELETED", str(meta.get("resourceVersion")))
        with self.lock:
            if self.closed or version in self.seen:
                return False
            self.seen.add(version)
            self.records.append(watch_record(event, initial))
            self.last[uid] = event.object
            return True

    def close(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        with self.lock:
            self.closed = True
            return list(self.records), list(self.last.values())


class _Run:
    """One collect: the reader, the request, notes for collect.json, progress."""

    def __init__(
        self, reader: ClusterReader, request: Request, progress: Callable[[str], None]
    ) -> None:
        self.reader, self.request, self.progress = reader, request, progress
        self.redactor = Redactor()  # every file written goes through it
        self.started = time.time()
        self.notes: list[str] = []
        self.missing: list[str] = []  # evidence that should be here and is not: incomplete
        self.lost: str | None = None  # why the API server is unreachable, once it is
        self.written: list[str] = []
        self.sidecar_logs: dict[tuple[str, str], str] = {}  # (pod, sidecar) → last log read

    def note(self, text: str) -> None:
        self.notes.append(text)
        self.progress(text)

    def lack(self, text: str) -> None:
        """A note that evidence is missing: the bundle is incomplete."""
        self.missing.append(text)
        self.note(text)

    def gap(self, gap: WatchGap) -> None:
        """A break in a watch: lost changes make the bundle incomplete; a resumed one
        stamps the changes in it late, a note."""
        (self.lack if gap.relisted else self.note)(gap.text())

    def write(self, name: str, text: str) -> None:
        path = self.request.out / name
        write_atomic(path, self.redactor.file(path, text))
        self.written.append(name)

    def write_lines(self, name: str, lines: Sequence[str]) -> None:
        self.write(name, "\n".join(lines) + "\n")

    def since_seconds(self) -> int:
        """``--since`` counted back from the start of collect (the watch included)."""
        return math.ceil(self.request.since + time.time() - self.started)


def collect(
    reader: ClusterReader,
    request: Request,
    progress: Callable[[str], None] = lambda _: None,
    redactor: Redactor | None = None,
) -> dict[str, Any]:
    """Write the bundle of ``request`` and return its manifest (also in collect.json).
    Every file goes through ``redactor`` (default: redact; ``evidence.redact``).

    Raises ``ServiceNotFound``/``ClusterError`` for what stops it (an unreadable Service,
    pods or slices); what only thins the evidence (Forbidden logs or events, no ingress
    controller) becomes a note. ``KeyboardInterrupt`` during the watch ends the watch early.
    """
    ns, name = request.namespace, request.service
    earlier = check_out(request.out)
    run = _Run(reader, request, progress)
    run.redactor = redactor or run.redactor
    version = reader.version()
    service = reader.get("services", ns, name)
    if service is None:
        raise ServiceNotFound(f"service {ns}/{name} not found")
    if request.client_logs:  # a bad selector fails here, before anything is written
        try:
            reader.list("pods", ns, labels=request.client_logs)
        except ClusterError as exc:
            raise ClusterError(f"--client-logs {request.client_logs!r}: {exc}") from None
    request.out.mkdir(parents=True, exist_ok=True)
    if earlier:
        run.note(f"replaced the earlier bundle in {request.out}")
    context: dict[str, Any] = {
        "context": reader.context,
        "server_version": version.get("gitVersion"),
        "service": f"{ns}/{name}",
        "since_seconds": request.since,
        "watch_seconds": None,
        "started": iso_utc(run.started),
        "complete": False,
    }
    run.write("collect.json", _json({MARKER: 1, **context}))
    run.write("service.json", _json(clean(service)))

    slices: tuple[str, str | None, str | None]
    if reader.serves("endpointslices"):
        slices = ("endpointslices", f"{SERVICE_NAME_LABEL}={name}", None)
    else:
        slices = ("endpoints", None, f"metadata.name={name}")
        run.note("discovery.k8s.io/v1 is not served: core Endpoints read instead (endpoints.json)")
    streams = {"slices": Stream(), "pods": Stream()}
    targets = _Targets(slices, label_selector(service), streams)
    _snapshot(run, targets, initial=True)
    if request.watch:
        context["watch_seconds"] = _watch(run, targets, request.watch)
        # in case a watch failed; what the watch saw is kept when the server is gone
        _optional(run, "listing again after the watch", _snapshot, targets, False)
    slice_records, slice_objects = streams["slices"].close()
    pod_records, pod_objects = streams["pods"].close()
    slice_file = "endpointslices.json" if slices[0] == "endpointslices" else "endpoints.json"
    if request.watch:
        run.write(slice_file, stream(slice_records))
        run.write("pods.json", stream(pod_records))
    else:
        run.write(slice_file, _json(kube_list(slice_objects)))
        run.write("pods.json", _json(kube_list(pod_objects)))
    progress(f"{len(pod_objects)} pods, {len(slice_objects)} {slices[0]}")

    ips = addresses([*pod_objects, *slice_objects])
    _optional(run, "reading owners", _owners, pod_objects)
    _optional(run, "reading events", _events)
    _optional(run, "reading ingress-nginx logs", _ingress_nginx, upstream_names(service), ips)
    _optional(run, "reading sidecar logs", _sidecars, pod_objects)
    _optional(run, "reading linkerd-proxy logs", _linkerd, pod_objects)
    _optional(run, "reading gateway logs", _gateways, ips)
    _optional(run, "reading routes", _routes)
    if request.client_logs:
        _optional(run, "reading client logs", _client_logs, request.client_logs)

    context.update(
        complete=not run.missing,
        missing=run.missing,
        finished=iso_utc(time.time()),
        notes=run.notes,
    )
    context["redacted"] = run.redactor.totals(request.out / n for n in run.written)
    found = read_evidence([str(request.out / n) for n in run.written if n != "collect.json"])
    result = manifest(request.out, found.sources, found.problems, context)
    if earlier:  # files of the earlier bundle this one did not rewrite
        for path in request.out.iterdir():
            if BUNDLE_NAMES.match(path.name) and path.name not in run.written:
                path.unlink()
    write_atomic(request.out / "collect.json", _json(result))
    return result


def _optional(run: _Run, what: str, step: Callable[..., None], *args: Any) -> None:
    """A step that only adds evidence: when the cluster fails it (the server went away
    during a watch), what was gathered so far is written and the bundle says what is
    missing. Once the server is unreachable, the steps after it are skipped."""
    if run.lost is not None:
        run.missing.append(f"{what}: skipped, the API server is unreachable")
        return
    try:
        step(run, *args)
    except Unreachable as exc:
        run.lost = str(exc)
        run.lack(f"{what} failed: {exc}")
    except ClusterError as exc:
        run.lack(f"{what} failed: {exc}")


@dataclass(frozen=True, slots=True)
class _Targets:
    """What a collect lists and watches: the Service's slices (resource, label and field
    selector), its pods by ``labels`` (none: the pods the slices name), and the streams."""

    slices: tuple[str, str | None, str | None]
    labels: str
    streams: dict[str, Stream]


def _snapshot(run: _Run, targets: _Targets, initial: bool) -> None:
    """List the Service's slices and pods into the streams (unchanged objects are not
    recorded twice; after a watch, changed ones are changes seen now). A Service without a
    selector has the pods its endpoints name."""
    ns, now = run.request.namespace, time.time()
    (resource, by_label, by_field), labels, streams = (
        targets.slices,
        targets.labels,
        targets.streams,
    )
    for obj in run.reader.list(resource, ns, labels=by_label, fields=by_field):
        streams["slices"].add(WatchEvent("ADDED", obj, now), initial)
    if labels:
        pods = run.reader.list("pods", ns, labels=labels)
    else:
        with streams["slices"].lock:
            objects = list(streams["slices"].last.values())
        names = sorted(
            {
                str(ref.get("name"))
                for ref in _target_refs(objects)
                if ref.get("kind") == "Pod" and ref.get("name")
            }
        )
        pods = [p for p in (run.reader.get("pods", ns, n) for n in names) if p is not None]
    for pod in pods:
        if streams["pods"].add(WatchEvent("ADDED", pod, now), initial):
            _sidecar_if_terminating(run, pod)


def _target_refs(objects: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for obj in objects:
        for ep in obj.get("endpoints") or []:
            yield ep.get("targetRef") or {}
        for subset in obj.get("subsets") or []:
            for key in ("addresses", "notReadyAddresses"):
                for address in subset.get(key) or []:
                    yield address.get("targetRef") or {}


def _watch(run: _Run, targets: _Targets, seconds: float) -> float:
    """Record every change of the slices and pods for ``seconds`` (two threads, one per
    watch); Ctrl-C ends it early. Returns how long it watched."""
    ns = run.request.namespace
    until = time.time() + seconds
    resource, by_label, by_field = targets.slices
    jobs = [(resource, by_label, by_field, targets.streams["slices"])]
    if targets.labels:
        jobs.append(("pods", targets.labels, None, targets.streams["pods"]))
    else:
        run.note("the Service has no selector: its pods are listed, not watched")

    def follow(what: str, by_label: str | None, by_field: str | None, into: Stream) -> None:
        try:
            events = run.reader.watch(what, ns, by_label, by_field, until=until, on_gap=run.gap)
            for event in events:
                if into.closed:
                    return
                if into.add(event) and what == "pods":
                    _sidecar_if_terminating(run, event.object)
        except ClusterError as exc:
            if isinstance(exc, Unreachable):
                run.lost = str(exc)
            run.lack(f"watch of {what} stopped: {exc}")

    threads = [threading.Thread(target=follow, args=job, daemon=True) for job in jobs]
    run.progress(f"watching {resource} and pods for {seconds:g} s (Ctrl-C ends it early)")
    start = time.time()
    for thread in threads:
        thread.start()
    try:
        while any(t.is_alive() for t in threads) and time.time() < until + 5:
            for thread in threads:
                thread.join(timeout=0.2)
    except KeyboardInterrupt:
        run.note(f"watch ended early by Ctrl-C after {time.time() - start:.0f} s")
    return round(time.time() - start, 3)


def _containers(pod: dict[str, Any]) -> list[str]:
    """The pod's long-running containers: its containers and native sidecars (init
    containers with ``restartPolicy: Always``, as Istio injects from Kubernetes 1.29)."""
    spec = pod.get("spec") or {}
    sidecars = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    return [str(c.get("name")) for c in [*(spec.get("containers") or []), *sidecars]]


def _sidecar_if_terminating(run: _Run, pod: dict[str, Any]) -> None:
    """A terminating pod's sidecar logs, read while they still can be: they go with it."""
    meta = pod.get("metadata") or {}
    containers = _containers(pod) if meta.get("deletionTimestamp") else []
    for sidecar in (c for c in (SIDECAR, LINKERD_PROXY) if c in containers):
        if text := _logs(run, str(meta.get("name")), sidecar):
            run.sidecar_logs[(str(meta.get("name")), sidecar)] = text


def _logs(run: _Run, pod: str, container: str, namespace: str | None = None) -> str | None:
    """One container's log over ``--since``, at most LOG_LIMIT_BYTES (a note says when the
    cap cut it: a busy controller's hour can be gigabytes, read before it is filtered)."""
    try:
        text = run.reader.logs(
            namespace or run.request.namespace,
            pod,
            container,
            run.since_seconds(),
            limit_bytes=LOG_LIMIT_BYTES,
        )
    except Forbidden as exc:
        run.lack(f"logs of {pod}: {exc}")
        return None
    except Unreachable:
        raise
    except ClusterError:  # gone meanwhile, or never started: nothing to read
        return None
    if len(text) >= LOG_LIMIT_BYTES // 4 and len(text.encode()) >= LOG_LIMIT_BYTES:
        run.lack(
            f"logs of {pod}/{container}: only the first {LOG_LIMIT_BYTES >> 20} MiB of "
            "--since were read; shorten --since to cover the incident"
        )
    return text


def _owners(run: _Run, pods: Sequence[dict[str, Any]]) -> None:
    """The pods' controllers and theirs (ReplicaSet → Deployment), as one List."""
    ns = run.request.namespace
    kinds = {
        "ReplicaSet": "replicasets",
        "Deployment": "deployments",
        "StatefulSet": "statefulsets",
        "DaemonSet": "daemonsets",
    }
    found: dict[tuple[str, str], dict[str, Any]] = {}
    todo = [ref for pod in pods for ref in (pod.get("metadata") or {}).get("ownerReferences") or []]
    while todo:
        ref = todo.pop()
        key = (str(ref.get("kind")), str(ref.get("name")))
        if key in found or key[0] not in kinds:
            continue
        try:
            obj = run.reader.get(kinds[key[0]], ns, key[1])
        except Unreachable:
            raise
        except ClusterError as exc:
            run.lack(f"owner {key[0]} {key[1]}: {exc}")
            continue
        if obj is not None:
            found[key] = clean(obj)
            todo += (obj.get("metadata") or {}).get("ownerReferences") or []
    if found:
        run.write("owners.json", _json(kube_list(sorted(found.values(), key=_kind_name))))


def _kind_name(obj: dict[str, Any]) -> tuple[str, str]:
    return str(obj.get("kind")), str((obj.get("metadata") or {}).get("name"))


def _events(run: _Run) -> None:
    """The namespace's events: core/v1, each refined by its events.k8s.io view when only
    that one has microsecond times."""
    ns = run.request.namespace
    try:
        core = run.reader.list("events", ns)
    except Forbidden as exc:
        run.lack(f"events not collected: {exc}")
        return
    new: list[dict[str, Any]] = []
    if run.reader.serves("events.events.k8s.io"):
        try:
            new = run.reader.list("events.events.k8s.io", ns)
        except Forbidden as exc:
            run.note(f"events.k8s.io events not read (core events kept): {exc}")
    events = [clean(e) for e in merge_events(core, new)]
    run.write("events.json", _json(kube_list(events)))
    run.progress(f"{len(events)} events in {ns}")


def _proxy_pods(
    run: _Run, what: str, labels: str, namespace: str
) -> list[tuple[str, str, dict[str, Any]]]:
    """A proxy's pods (ingress-nginx, a gateway) by their labels, as (name, namespace, pod):
    cluster-wide, else in the namespace they are installed to by default; none, and a note
    that ``what`` was not searched, when that is forbidden too."""
    try:
        try:
            pods = run.reader.list("pods", None, labels=labels)
        except Forbidden:
            pods = run.reader.list("pods", namespace, labels=labels)
    except Forbidden as exc:
        run.note(f"{what} not searched: {exc}")
        return []
    metas = [(pod.get("metadata") or {}, pod) for pod in pods]
    return [(str(meta.get("name")), str(meta.get("namespace")), pod) for meta, pod in metas]


def _ingress_nginx(run: _Run, upstreams: frozenset[str], ips: frozenset[str]) -> None:
    """The access and error lines of the ingress-nginx controllers about this Service."""
    what = "ingress-nginx controllers"
    for pod_name, pod_ns, pod in _proxy_pods(
        run, what, INGRESS_NGINX_LABELS, INGRESS_NGINX_NAMESPACE
    ):
        containers = _containers(pod)
        container = "controller" if "controller" in containers else next(iter(containers), "")
        text = _logs(run, pod_name, container, pod_ns) if container else None
        if text is None:
            continue
        access, errors = ingress_nginx_lines(text, upstreams, ips)
        for suffix, lines in ((".log", access), (".error.log", errors)):
            if lines:
                run.write_lines(f"ingress-nginx-{pod_name}{suffix}", lines)
        run.progress(
            f"ingress-nginx {pod_ns}/{pod_name}: {len(access)} access, {len(errors)} error lines"
        )


def _mesh_logs(
    run: _Run,
    pods: Sequence[dict[str, Any]],
    proxy: str,
    keep: Callable[[list[str], str], list[str]],
) -> None:
    """The access logs of the ``proxy`` container of the Service's pods (pods gone by now:
    as last read while they terminated): the lines ``keep`` keeps of each (given the pod)."""
    for pod in pods:
        if proxy not in _containers(pod):
            continue
        pod_name = str((pod.get("metadata") or {}).get("name"))
        text = _logs(run, pod_name, proxy) or run.sidecar_logs.get((pod_name, proxy))
        found = request_lines(text or "")
        kept = keep(found[1], pod_name) if found else []
        if found and kept:
            run.write_lines(f"{proxy}-{pod_name}.{REQUEST_FORMATS[found[0]]}", kept)


def _sidecars(run: _Run, pods: Sequence[dict[str, Any]]) -> None:
    """The Istio sidecars' access logs about this Service."""
    ns, name = run.request.namespace, run.request.service
    _mesh_logs(run, pods, SIDECAR, lambda lines, _pod: envoy_lines_for(lines, name, ns))


def _linkerd(run: _Run, pods: Sequence[dict[str, Any]]) -> None:
    """The Linkerd proxies' access logs of the Service's pods (all about the pod: the proxy
    logs what it answers), each line prefixed with its pod as ``kubectl logs --prefix``."""
    _mesh_logs(run, pods, LINKERD_PROXY, lambda lines, pod: prefixed(lines, pod, LINKERD_PROXY))


def _gateways(run: _Run, ips: frozenset[str]) -> None:
    """The access lines about this Service of the Envoy-based gateways (Envoy Gateway,
    Istio's), searched cluster-wide, else in their default namespaces."""
    ns, name = run.request.namespace, run.request.service
    for gateway in GATEWAYS:
        what = f"{gateway.name} gateways"
        for pod_name, pod_ns, _pod in _proxy_pods(run, what, gateway.labels, gateway.namespace):
            text = _logs(run, pod_name, gateway.container, pod_ns)
            found = request_lines(text or "")
            kept = gateway_lines(found[1], name, ns, ips) if found else []
            if found and kept:
                run.write_lines(f"gateway-{pod_name}.{REQUEST_FORMATS[found[0]]}", kept)
                run.progress(f"{gateway.name} {pod_ns}/{pod_name}: {len(kept)} lines")


def _routes(run: _Run) -> None:
    """The hop objects of the namespace (``routes.json``); absent kinds are notes."""
    hops = read_hops(run.reader, run.request.namespace)
    for text in hops.notes:
        run.note(text)
    if hops.objects:
        objects = [clean(o) for o in (*hops.namespaces, *hops.objects)]
        run.write("routes.json", _json(kube_list(objects)))


def _client_logs(run: _Run, selector: str) -> None:
    """The request rows in the logs of the client pods matching ``selector``."""
    pods = run.reader.list("pods", run.request.namespace, labels=selector)
    if not pods:
        run.note(f"no client pods match {selector!r} in {run.request.namespace}")
    for pod in pods:
        pod_name = str((pod.get("metadata") or {}).get("name"))
        containers = [c for c in _containers(pod) if c not in (SIDECAR, LINKERD_PROXY)]
        for container in containers:
            found = request_lines(_logs(run, pod_name, container) or "")
            if found is None:
                continue
            fmt, lines = found
            stem = pod_name if len(containers) == 1 else f"{pod_name}-{container}"
            run.write_lines(f"client-{stem}.{REQUEST_FORMATS[fmt]}", lines)
            run.progress(f"client {pod_name}/{container}: {len(lines)} {fmt} lines")
