"""What ``diagnose --prometheus`` pulls from a metrics store: per-step counts of one Service's
requests and failures, its pods' lifecycles and the nodes' conntrack pressure.

Every query is PromQL pushed down to the store (``sum by``, ``max_over_time``), so only
aggregated series travel. Request counts per step are the counters' exact differences
between evaluation steps (``(x - x offset S) >= 0 or x``): they are integers and add up to
the counters' growth over the range, which ``increase`` (extrapolated to the window's edges)
does not; a counter reset or a series' first step counts its value since the reset.

Queries are structured (:class:`Query`: a selector, a function over a window, an
aggregation ``by`` labels; ``.promql`` renders it), so a source may evaluate them its own
way. The store is reached through :class:`MetricsSource`, a Protocol that the reader's
client (``svcdoctor.evidence.prometheus.PromClient``, which sends ``.promql``) satisfies
structurally: the analyses never import the readers. ``RawSource``
(``svcdoctor.evidence.prometheus_raw``) pulls raw samples instead and evaluates the same
queries client-side: the baseline of ``benchmarks/prometheus_scale.py``.

Node series are many (thousands of nodes): what is asked per step is asked only of the
nodes whose counters moved, or whose conntrack table was at least :data:`FILL_FLOOR`
full, found first with one query per metric over the range (in tiles of at most a day,
so no query reads more than a day of samples)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import partial
from typing import Protocol

import numpy as np

from svcdoctor.diagnose.stats import Floats
from svcdoctor.errors import SvcdoctorError
from svcdoctor.model.duration import promql_duration
from svcdoctor.model.series import Series

STEPS = (15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0, 3600.0)
MAX_BINS = 25_000  # per series over the range (the client chunks requests to the store)
POD_POINTS = 2_000_000  # per-pod series: pods x steps pulled at most (coarser steps beyond)
LIFECYCLE_BINS = 2_000  # lifecycle series change rarely: a coarser step, never over 300 s
LOOKBACK_STEP = 290.0  # under Prometheus' default 5 min lookback
LOOKBACK = 300.0  # Prometheus' default lookback of an instant selector
TILE = 86_400.0  # whole-range questions are asked per tile of at most this many seconds
FILL_FLOOR = 0.5  # per step, table fill is exact where at least this (lower: 0 or less)
MAX_NODES = 500  # per-step node queries name at most this many nodes (else all of them)
VANISHED = 60.0  # a pod series ending this long before the others' end: the pod is gone
UNKNOWN_SCRAPE = 60.0  # the scrape interval taken when no series shows it
SCRAPE_WINDOW = 3600.0  # seconds per query window when samples are counted
UNKNOWN = "unknown"  # Istio's value of a label it cannot fill
REPORTER = "source"  # Istio reports each request twice; the client side's report is used
CLOSE_FLAGS = ("UC", "URX")  # Envoy: upstream closed the connection / retries exhausted


class Fn(StrEnum):
    """What a query takes of each selected series at an evaluation time ``t``."""

    GROWTH = "growth"  # the counter's exact growth over (t - window, t]: see ``counted``
    SEEN = "count_over_time"  # the samples in the window
    MAX = "max_over_time"  # the largest sample in the window
    STAMP = "timestamp"  # the time of the sample an instant selector sees (5 min lookback)


class Agg(StrEnum):
    """How the series' values at one time are aggregated (per ``by`` group)."""

    SUM = "sum"
    MAX = "max"
    COUNT = "count"


@dataclass(frozen=True, slots=True)
class Selector:
    """A series selector: a metric name and label matchers (PromQL text each)."""

    metric: str
    matchers: tuple[str, ...] = ()

    @property
    def promql(self) -> str:
        return f"{self.metric}{_fmt_matchers(self.matchers)}" if self.matchers else self.metric

    def having(self, *matchers: str) -> Selector:
        return Selector(self.metric, (*self.matchers, *matchers))


@dataclass(frozen=True, slots=True)
class Query:
    """``agg by (by) (fn(selector, window) [/ fn(per, window)])``, optionally inside
    ``histogram_quantile(quantile, …)`` (then ``by`` holds ``le``). ``per`` divides each
    series by the one of the same labels (its name aside)."""

    agg: Agg
    fn: Fn
    selector: Selector
    window: float = 0.0
    by: tuple[str, ...] = ()
    per: Selector | None = None
    quantile: float | None = None

    def _of(self, sel: Selector) -> str:
        text = sel.promql
        if self.fn is Fn.GROWTH:
            return counted(text, self.window)
        if self.fn in (Fn.SEEN, Fn.MAX):
            return f"{self.fn.value}({text}[{promql_duration(self.window)}])"
        if self.fn is Fn.STAMP:
            return f"timestamp({text})"
        return text

    @property
    def promql(self) -> str:
        inner = self._of(self.selector)
        if self.per is not None:
            inner = f"{inner} / {self._of(self.per)}"
        out = (
            f"{self.agg.value} by ({', '.join(self.by)}) ({inner})"
            if self.by
            else f"{self.agg.value}({inner})"
        )
        return out if self.quantile is None else f"histogram_quantile({self.quantile:g}, {out})"


class MetricsSource(Protocol):
    """The metrics store as the analysis needs it (``PromClient`` has this shape)."""

    def query_range(self, query: Query, start: float, end: float, step: float) -> list[Series]:
        """Evaluate ``query`` at ``start``, ``start + step``, … ``end``."""
        ...

    def series_names(self, start: float, end: float) -> set[str]:
        """The metric names with samples in the range."""
        ...


class NoRequestSeries(SvcdoctorError):
    """The store holds no request series the analysis reads, for the range or Service."""


class RequestSource(StrEnum):
    """Which exporter's request counter the outcomes come from."""

    NGINX = "nginx_ingress_controller_requests"
    ISTIO = "istio_requests_total"


LIFECYCLE = (
    "kube_pod_created",
    "kube_pod_deletion_timestamp",
    "kube_pod_owner",
    "kube_replicaset_owner",
    "kube_pod_container_status_last_terminated_reason",
)
CONNTRACK = (
    "node_nf_conntrack_stat_insert_failed",
    "node_nf_conntrack_stat_drop",
    "node_nf_conntrack_entries",
    "node_nf_conntrack_entries_limit",
)
PROGRAMMING = "kubeproxy_network_programming_duration_seconds_bucket"

# What each metric decides, said when it is missing.
DECIDES: Mapping[str, str] = {
    RequestSource.NGINX.value: "request outcomes per Service (ingress-nginx)",
    RequestSource.ISTIO.value: "request outcomes per Service and pod, with Envoy's response "
    "flags (UC/URX: idle connections closed by the upstream, cause reuse)",
    "kube_pod_created": "when pods started: replicas over time",
    "kube_pod_deletion_timestamp": "pod deletions: the race test and the rollouts (cause race)",
    "kube_pod_owner": "which ReplicaSet owns each pod: the workload behind the Service",
    "kube_replicaset_owner": "which Deployment owns each ReplicaSet: rollouts per Deployment",
    "kube_pod_container_status_last_terminated_reason": "how containers ended (Error after "
    "SIGKILL: a grace period too short)",
    "node_nf_conntrack_stat_insert_failed": "conntrack insert failures per node (cause infra)",
    "node_nf_conntrack_stat_drop": "conntrack drops per node (cause infra)",
    "node_nf_conntrack_entries": "conntrack table fill per node (cause infra)",
    "node_nf_conntrack_entries_limit": "conntrack table size per node (cause infra)",
    PROGRAMMING: "kube-proxy programming latency: the floor of the race window per node",
}


@dataclass(frozen=True, slots=True)
class Grid:
    """The evaluation times of every binned series: bin ``i`` holds what happened in
    ``(t[i] - step, t[i]]``."""

    start: float
    end: float
    step: float

    @property
    def n(self) -> int:
        return math.floor((self.end - self.start) / self.step + 1e-9) + 1

    @property
    def t(self) -> Floats:
        return self.start + self.step * np.arange(self.n, dtype=np.float64)

    def place(self, series: Series) -> Floats:
        """The series' values on the grid (0 where it has none)."""
        out = np.zeros(self.n)
        idx = np.rint((series.t - self.start) / self.step).astype(np.int64)
        keep = (idx >= 0) & (idx < out.size) & np.isfinite(series.v)
        np.add.at(out, idx[keep], series.v[keep])
        return out


@dataclass(frozen=True, slots=True)
class Counts:
    """Requests and failures per bin; ``closed``: the failures flagged as connections the
    upstream closed (``None`` when the source has no flags)."""

    requests: Floats
    failures: Floats
    closed: Floats | None = None


@dataclass(frozen=True, slots=True)
class PodLife:
    """One pod of the Service's workloads: created/deleted (Unix s), owner workload."""

    pod: str
    workload: str
    replicaset: str | None = None
    created: float | None = None
    deleted: float | None = None


@dataclass(frozen=True, slots=True)
class NodeTotal:
    """One node's conntrack insert failures and drops over the range, and the fullest its
    table was (entries / limit; ``None`` without those series)."""

    node: str
    insert_failed: int
    drop: int
    fill: float | None = None


@dataclass(frozen=True, slots=True)
class Conntrack:
    """The nodes' conntrack pressure: per bin, insert failures and drops summed over the
    nodes and the fullest table (``None`` without the entries series); per node, totals.
    Summed at the store, so two thousand nodes cost three series."""

    insert_failed: Floats
    drop: Floats
    fill: Floats | None
    nodes: tuple[NodeTotal, ...]


@dataclass(frozen=True, slots=True)
class History:
    """One Service's history as the analyses read it. Per-pod counts are on ``grid``, or on
    a coarser ``pod_grid`` when pods x steps would exceed ``POD_POINTS``."""

    service: str
    source: RequestSource
    grid: Grid
    counts: Counts
    pods: tuple[PodLife, ...] = ()
    per_pod: Mapping[str, Counts] = field(default_factory=dict)
    pod_grid: Grid | None = None  # the per-pod counts' grid (``grid`` when None)
    conntrack: Conntrack | None = None
    programming_p99: float | None = None  # kube-proxy network programming, seconds
    found: frozenset[str] = frozenset()
    # how much later than ``PodLife.deleted`` a deletion may have been: each is known only
    # to a scrape (at most one before kube_pod_deletion_timestamp's first sample, or where
    # the pod's series end), so this is the scrape interval whenever a pod was deleted
    deletion_lateness: float = 0.0
    sigkilled: tuple[str, ...] = ()  # pods whose container last ended with reason Error
    warnings: tuple[str, ...] = ()

    @property
    def pods_grid(self) -> Grid:
        return self.pod_grid or self.grid


def _pod_grid(grid: Grid, pods: int) -> Grid:
    """The grid of per-pod counts: ``grid`` unless pods x steps exceed ``POD_POINTS``."""
    if max(pods, 1) * grid.n <= POD_POINTS:
        return grid
    span = grid.end - grid.start
    step = next((s for s in STEPS if max(pods, 1) * span / s <= POD_POINTS), STEPS[-1])
    return Grid(grid.start, grid.end, max(step, grid.step))


def choose_step(start: float, end: float) -> float:
    """The finest step that keeps every series under ``MAX_BINS`` over the range."""
    span = max(end - start, 0.0)
    return next((s for s in STEPS if span / s <= MAX_BINS), math.ceil(span / MAX_BINS))


def counted(selector: str, step: float) -> str:
    """Per-step growth of the counters ``selector`` selects (exact, see the module doc)."""
    s = promql_duration(step)
    return f"((({selector}) - ({selector} offset {s})) >= 0 or ({selector}))"


def _fmt_matchers(matchers: Iterable[str]) -> str:
    return "{" + ",".join(m for m in matchers if m) + "}"


@dataclass(frozen=True, slots=True)
class ServiceRef:
    """A Service as the request series name it: ``namespace/name`` and its matchers."""

    namespace: str
    name: str
    source: RequestSource

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def matchers(self) -> list[str]:
        if self.source is RequestSource.NGINX:
            return [f'namespace="{self.namespace}"', f'service="{self.name}"']
        return [
            f'reporter="{REPORTER}"',
            f'destination_service=~"{_escape(self.name)}'
            f'(\\\\.{_escape(self.namespace)}(\\\\..*)?)?"',
        ]

    def selector(self, *more: str) -> Selector:
        """The Service's request series (with ``more`` matchers)."""
        return Selector(self.source.value, tuple(m for m in (*self.matchers(), *more) if m))


def _escape(text: str) -> str:
    return "".join(f"\\\\{c}" if c in ".+*?()[]{}|^$\\" else c for c in text)


def parse_service(text: str, source: RequestSource) -> ServiceRef:
    """``NS/NAME`` (or an Istio FQDN ``name.ns.svc.cluster.local``) as a ``ServiceRef``."""
    if "/" in text:
        ns, _, name = text.partition("/")
    else:
        name, _, rest = text.partition(".")
        ns = rest.split(".", 1)[0] if rest else "default"
    if not ns or not name:
        raise NoRequestSeries(f"bad --service {text!r}: give NAMESPACE/NAME")
    return ServiceRef(ns, name, source)


def request_sources(found: set[str]) -> list[RequestSource]:
    """The request counters in the store, Istio's first (it names pods and flags)."""
    out = [src for src in (RequestSource.ISTIO, RequestSource.NGINX) if src.value in found]
    if not out:
        raise NoRequestSeries(
            "no request series in the range: the store has neither "
            f"{RequestSource.ISTIO.value} nor {RequestSource.NGINX.value}"
        )
    return out


def services(src: MetricsSource, source: RequestSource, grid: Grid) -> list[ServiceRef]:
    """Every Service with request series in the range."""
    if source is RequestSource.NGINX:
        by = ("namespace", "service")
        sel = Selector(source.value, ('service!=""',))
    else:
        by = ("destination_service", "destination_workload_namespace")
        sel = Selector(source.value, (f'reporter="{REPORTER}"',))
    step = _lifecycle_step(grid)
    found = src.query_range(
        Query(Agg.COUNT, Fn.SEEN, sel, step, by), grid.start, grid.end + step, step
    )
    out = set()
    for s in found:
        lab = s.labels
        if source is RequestSource.NGINX:
            out.add(ServiceRef(lab.get("namespace", ""), lab.get("service", ""), source))
        else:
            fqdn = lab.get("destination_service", "")
            name, _, rest = fqdn.partition(".")
            ns = lab.get("destination_workload_namespace") or rest.split(".", 1)[0]
            out.add(ServiceRef(ns, name, source))
    return sorted((r for r in out if r.name and r.name != UNKNOWN), key=lambda r: r.key)


def _failed(source: RequestSource) -> str:
    if source is RequestSource.NGINX:
        return 'status=~"5.."'
    return 'response_code=~"5..|0"'


def _per_bin(src: MetricsSource, grid: Grid, query: Query) -> Floats:
    """``query`` (one series, or summed) on the grid."""
    return sum(
        (grid.place(s) for s in src.query_range(query, grid.start, grid.end, grid.step)),
        np.zeros(grid.n),
    )


def _growth(sel: Selector, step: float, by: tuple[str, ...] = ()) -> Query:
    return Query(Agg.SUM, Fn.GROWTH, sel, step, by)


def fetch(src: MetricsSource, ref: ServiceRef, grid: Grid, found: set[str]) -> History:
    """Pull one Service's history: every query aggregated at the store."""
    all_sel = ref.selector()
    bad_sel = ref.selector(_failed(ref.source))
    step = grid.step
    requests = _per_bin(src, grid, _growth(all_sel, step))
    failures = _per_bin(src, grid, _growth(bad_sel, step))
    closed = None
    per_pod: dict[str, Counts] = {}
    workloads: set[str] = set()
    warnings: list[str] = []
    if ref.source is RequestSource.ISTIO:
        flags = "|".join(CLOSE_FLAGS)
        flagged = ref.selector(f'response_flags=~".*({flags}).*"')
        closed = _per_bin(src, grid, _growth(flagged, step))
        every = _lifecycle_step(grid)
        for s in src.query_range(
            Query(Agg.COUNT, Fn.SEEN, all_sel, every, ("destination_workload",)),
            grid.start,
            grid.end + every,
            every,
        ):
            if s.labels.get("destination_workload"):
                workloads.add(s.labels["destination_workload"])
    pods, lateness = _pods(src, grid, ref.namespace, found)
    pod_grid = _pod_grid(grid, len(pods))
    if ref.source is RequestSource.ISTIO:
        per_pod = _per_pod(src, pod_grid, all_sel, bad_sel)
    chosen = _workloads_of(ref, pods, workloads, per_pod, warnings)
    mine = tuple(p for p in pods if p.workload in chosen or p.pod in per_pod)
    conntrack = _conntrack(src, grid, found)
    killed = _sigkilled(src, grid, ref.namespace, {p.pod for p in mine}, found)
    return History(
        service=ref.key,
        source=ref.source,
        grid=grid,
        counts=Counts(requests, failures, closed),
        pods=mine,
        per_pod=per_pod,
        pod_grid=pod_grid,
        conntrack=conntrack,
        programming_p99=_programming_p99(src, grid, found),
        found=frozenset(found),
        sigkilled=killed,
        warnings=tuple(warnings),
        deletion_lateness=lateness,
    )


def _per_pod(
    src: MetricsSource, grid: Grid, all_sel: Selector, bad_sel: Selector
) -> dict[str, Counts]:
    """Requests and failures per ``destination_pod`` (only when the label is exported)."""
    step = grid.step
    by = "destination_pod"
    total = src.query_range(_growth(all_sel, step, (by,)), grid.start, grid.end, step)
    if not any(_pod_name(s.labels.get(by)) for s in total):
        return {}
    bad = {
        s.labels.get(by, ""): grid.place(s)
        for s in src.query_range(_growth(bad_sel, step, (by,)), grid.start, grid.end, step)
    }
    zero = np.zeros(grid.n)
    return {
        s.labels[by]: Counts(grid.place(s), bad.get(s.labels[by], zero))
        for s in total
        if _pod_name(s.labels.get(by))
    }


def _pod_name(value: str | None) -> bool:
    """Whether a ``destination_pod`` value names a pod (Istio writes ``unknown`` when no
    pod was reached: those failures are no pod's)."""
    return bool(value) and value != UNKNOWN


def _lifecycle_step(grid: Grid) -> float:
    return float(min(300.0, max(grid.step, math.ceil((grid.end - grid.start) / LIFECYCLE_BINS))))


def _last_values(
    src: MetricsSource, grid: Grid, sel: Selector, keys: tuple[str, ...], over: bool = True
) -> dict[tuple[str, ...], float]:
    """The last value of each series of ``sel`` (``max_over_time`` per lifecycle step, so
    a series that lived between two steps is still seen; ``over=False``: the timestamp of
    the sample the instant selector sees, through the 5 min lookback), keyed by the
    labels."""
    # an instant selector sees through the 5 min lookback: a step within it sees every sample
    step = _lifecycle_step(grid) if over else max(_lifecycle_step(grid), LOOKBACK_STEP)
    query = Query(Agg.MAX, Fn.MAX if over else Fn.STAMP, sel, step if over else 0.0, keys)
    out: dict[tuple[str, ...], float] = {}
    for s in src.query_range(query, grid.start, grid.end + step, step):
        values = s.v[np.isfinite(s.v)]
        if values.size:
            out[tuple(s.labels.get(k, "") for k in keys)] = float(values[-1])
    return out


def _scrape_interval(
    src: MetricsSource,
    grid: Grid,
    sel: Selector,
    created: Mapping[tuple[str, ...], float],
    last: Mapping[tuple[str, ...], float],
) -> float | None:
    """The scrape interval of kube-state-metrics, from above, from ``kube_pod_created``
    (``sel``): ``n`` samples of one pod span at least ``n - 1`` intervals, within one window
    of the count (an hour, or the range) and from the pod's creation to its last sample
    (when known: a live store marks a gone series stale, and its end is not seen). The
    least of these over the pods with three samples or more; None when none has three."""
    every = max(min(SCRAPE_WINDOW, grid.end - grid.start), grid.step)
    # a range selector holds both its ends (Prometheus 2): a millisecond less, so that
    # windows one step apart never count a sample twice
    query = Query(Agg.SUM, Fn.SEEN, sel, every - 0.001, ("pod",))
    counts: dict[tuple[str, ...], float] = {}
    spacings: list[float] = []
    for s in src.query_range(query, grid.start + every, grid.end + every, every):
        key = (s.labels.get("pod", ""),)
        seen = s.v[np.isfinite(s.v)]
        counts[key] = counts.get(key, 0.0) + float(seen.sum())
        spacings += [every / (n - 1) for n in seen.tolist() if n >= 3]
    spacings += [
        (last[key] - max(created[key], grid.start)) / (n - 1)
        for key, n in counts.items()
        if n >= 3 and key in created and key in last and last[key] > created[key]
    ]
    return min(spacings) if spacings else None


def _first_seen(
    src: MetricsSource, grid: Grid, sel: Selector, keys: tuple[str, ...], every: float
) -> dict[tuple[str, ...], float]:
    """The time of each series' first sample: ``timestamp()`` evaluated every ``every``
    seconds (at most the scrape interval, so even a series scraped once is seen)."""
    out: dict[tuple[str, ...], float] = {}
    for s in src.query_range(Query(Agg.MAX, Fn.STAMP, sel, 0.0, keys), grid.start, grid.end, every):
        values = s.v[np.isfinite(s.v)]
        if values.size:
            out[tuple(s.labels.get(k, "") for k in keys)] = float(values.min())
    return out


def _owners(
    src: MetricsSource, grid: Grid, found: set[str], ns: str, kind: str, owner_kind: str
) -> dict[str, str]:
    """Each ``kind`` object's owner of ``owner_kind`` by name, from kube-state-metrics'
    ``kube_<kind>_owner`` (empty when the store lacks it)."""
    metric = f"kube_{kind}_owner"
    if metric not in found:
        return {}
    sel = Selector(metric, (ns, f'owner_kind="{owner_kind}"'))
    return {
        name: owner
        for (name, owner), _ in _last_values(src, grid, sel, (kind, "owner_name")).items()
    }


def _pods(
    src: MetricsSource, grid: Grid, namespace: str, found: set[str]
) -> tuple[list[PodLife], float]:
    """The namespace's pods with their creation, deletion and owning workload, and how much
    later than stated a deletion may have been (see ``History.deletion_lateness``).

    kube_pod_deletion_timestamp's value is the pod's ``metadata.deletionTimestamp``: when
    its grace period *ends*. The deletion itself is when that series first appears: at most
    one scrape before its first sample."""
    ns = f'namespace="{namespace}"'
    keys = ("pod",)
    created_sel = Selector("kube_pod_created", (ns,))
    created: dict[tuple[str, ...], float] = {}
    seen: dict[tuple[str, ...], float] = {}
    scrape: float | None = None
    if "kube_pod_created" in found:
        created = _last_values(src, grid, created_sel, keys)
        seen = _last_values(src, grid, created_sel, keys, over=False)
        scrape = _scrape_interval(src, grid, created_sel, created, seen)
    scrape = scrape or UNKNOWN_SCRAPE
    deleted: dict[tuple[str, ...], float] = {}
    if "kube_pod_deletion_timestamp" in found:
        sel = Selector("kube_pod_deletion_timestamp", (ns,))
        for key, first in _first_seen(src, grid, sel, keys, min(scrape, grid.step)).items():
            deleted[key] = max(first - scrape, created.get(key, -math.inf))
    if "kube_pod_created" in found:
        # a pod that exits at once is gone before kube-state-metrics is scraped again and
        # never shows a deletion timestamp: its series' end stands in for the deletion
        last = max(seen.values(), default=0.0)
        for key, at in seen.items():
            if key not in deleted and at < last - VANISHED:
                deleted[key] = at
    lateness = scrape if deleted else 0.0
    rs_of = _owners(src, grid, found, ns, "pod", "ReplicaSet")
    deploy_of = _owners(src, grid, found, ns, "replicaset", "Deployment")
    names = sorted({k[0] for k in created} | {k[0] for k in deleted} | set(rs_of))
    pods = []
    for pod in names:
        owner_rs = rs_of.get(pod)
        workload = deploy_of.get(owner_rs, "") if owner_rs is not None else ""
        if not workload:  # no owner series: the pod-template-hash naming convention
            workload = owner_rs.rsplit("-", 1)[0] if owner_rs else pod.rsplit("-", 2)[0]
        pods.append(
            PodLife(
                pod=pod,
                workload=workload,
                replicaset=owner_rs,
                created=created.get((pod,)),
                deleted=deleted.get((pod,)),
            )
        )
    return pods, lateness


def _workloads_of(
    ref: ServiceRef,
    pods: list[PodLife],
    named: set[str],
    per_pod: Mapping[str, Counts],
    warnings: list[str],
) -> set[str]:
    """The workloads behind the Service: the ones its request series name (Istio's
    ``destination_workload``, or the pods of ``destination_pod``), else the workload of the
    Service's name, else every workload in its namespace (said in a warning)."""
    known = {p.workload for p in pods}
    chosen = (named & known) | {p.workload for p in pods if p.pod in per_pod}
    if chosen:
        return chosen
    if ref.name in known:
        return {ref.name}
    if len(known) > 1:
        warnings.append(
            f"no series ties Service {ref.key} to a workload: the lifecycles of every "
            f"workload in namespace {ref.namespace} ({', '.join(sorted(known))}) are used"
        )
    return known


def _at_end(src: MetricsSource, grid: Grid, query: Query) -> list[Series]:
    """``query`` once, at the range's end."""
    return src.query_range(query, grid.end, grid.end, grid.end - grid.start or 1.0)


def _over_range(
    src: MetricsSource, grid: Grid, make: Callable[[float], Query], reach: float = 0.0
) -> dict[tuple[tuple[str, str], ...], tuple[Mapping[str, str], float]]:
    """The largest value of each series of ``make(window)`` over the range (and ``reach``
    seconds before it), asked in tiles of at most :data:`TILE` seconds that end at the
    range's end, so no query reads more than a tile of samples: labels and value by key."""
    span = grid.end - grid.start + reach
    tiles = max(1, math.ceil(span / TILE))
    window = float(math.ceil(span / tiles)) if span > 0 else 1.0
    first = grid.end - (tiles - 1) * window
    out: dict[tuple[tuple[str, str], ...], tuple[Mapping[str, str], float]] = {}
    for s in src.query_range(make(window), first, grid.end, window):
        values = s.v[np.isfinite(s.v)]
        if values.size:
            out[s.key()] = (s.labels, float(values.max()))
    return out


def _only(sel: Selector, instances: Iterable[str]) -> Selector | None:
    """``sel`` for these nodes only (``None``: none of them; all when too many to name)."""
    names = sorted(instances)
    if not names:
        return None
    if len(names) > MAX_NODES:
        return sel
    return sel.having(f'instance=~"{"|".join(_escape(n) for n in names)}"')


def _node_max(sel: Selector, window: float, per: Selector | None = None) -> Query:
    """Each node's largest sample of ``sel`` (divided by ``per``'s) over ``window``."""
    return Query(Agg.MAX, Fn.MAX, sel, window, ("instance",), per=per)


def _conntrack(src: MetricsSource, grid: Grid, found: set[str]) -> Conntrack | None:
    """Conntrack insert failures and drops per bin (summed over the nodes), the fullest
    table per bin, and each node's totals over the range.

    Per bin, only the nodes whose counters are non-zero somewhere a step's growth can
    see (the range, a step and the lookback before it) are asked: the others add zeros.
    The fill per bin is asked of the nodes at least :data:`FILL_FLOOR` full at some time:
    exact wherever the fullest table is at least that full."""
    counters = ("node_nf_conntrack_stat_insert_failed", "node_nf_conntrack_stat_drop")
    if not set(counters) & found:
        return None
    step, span = grid.step, grid.end - grid.start
    zero = np.zeros(grid.n)
    grow: list[Floats] = []
    totals: list[dict[str, float]] = []
    for metric in counters:
        if metric not in found:
            grow.append(zero)
            totals.append({})
            continue
        sel = Selector(metric)
        moved = _over_range(src, grid, partial(_node_max, sel), reach=step + LOOKBACK)
        active = _only(sel, (lab.get("instance", "?") for lab, v in moved.values() if v != 0))
        grow.append(zero if active is None else _per_bin(src, grid, _growth(active, step)))
        totals.append(
            {
                s.labels.get("instance", "?"): float(s.v[-1])
                for s in _at_end(src, grid, _growth(sel, span, ("instance",)))
                if s.v.size
            }
        )
    fill = None
    fullest: dict[str, float] = {}
    if {"node_nf_conntrack_entries", "node_nf_conntrack_entries_limit"} <= found:
        entries = Selector("node_nf_conntrack_entries")
        limit = Selector("node_nf_conntrack_entries_limit")
        fullest = {
            lab.get("instance", "?"): value
            for lab, value in _over_range(
                src, grid, partial(_node_max, entries, per=limit)
            ).values()
        }
        full = _only(entries, (n for n, v in fullest.items() if v >= FILL_FLOOR))
        fill = (
            zero
            if full is None
            else _per_bin(src, grid, Query(Agg.MAX, Fn.MAX, full, step, per=limit))
        )
    names = sorted(set(totals[0]) | set(totals[1]) | set(fullest))
    nodes = tuple(
        NodeTotal(
            node,
            int(np.rint(totals[0].get(node, 0.0))),
            int(np.rint(totals[1].get(node, 0.0))),
            fullest.get(node),
        )
        for node in names
    )
    return Conntrack(grow[0], grow[1], fill, nodes)


def _programming_p99(src: MetricsSource, grid: Grid, found: set[str]) -> float | None:
    """kube-proxy's 99th percentile network-programming latency over the range, all
    nodes together: the least time a deleted pod stays routable. The buckets' exact
    growth over the range (two samples a series) rather than ``increase`` (every sample
    of every node's buckets in one query)."""
    if PROGRAMMING not in found:
        return None
    span = grid.end - grid.start
    query = Query(Agg.SUM, Fn.GROWTH, Selector(PROGRAMMING), span, ("le",), quantile=0.99)
    got = _at_end(src, grid, query)
    values = [float(s.v[-1]) for s in got if s.v.size and np.isfinite(s.v[-1])]
    return values[0] if values else None


def _sigkilled(
    src: MetricsSource, grid: Grid, namespace: str, pods: set[str], found: set[str]
) -> tuple[str, ...]:
    """Pods of the Service whose container last ended with reason ``Error`` (what a
    SIGKILL at the end of the grace period leaves; OOM has its own reason)."""
    metric = "kube_pod_container_status_last_terminated_reason"
    if metric not in found or not pods:
        return ()
    sel = Selector(metric, (f'namespace="{namespace}"', 'reason="Error"'))
    got = _last_values(src, grid, sel, ("pod",))
    return tuple(sorted(k[0] for k, v in got.items() if v > 0 and k[0] in pods))
