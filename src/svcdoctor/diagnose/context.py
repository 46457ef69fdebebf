"""Facts every analysis needs, computed once from the evidence (vectorised)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from svcdoctor.checks import Settings as CheckSettings
from svcdoctor.diagnose.stats import Floats
from svcdoctor.model import FAILURES, Assessment, Cause, EventKind, Evidence, PodInfo

EMPTY: Floats = np.zeros(0)


@dataclass(frozen=True, slots=True)
class Settings:
    """Analysis parameters. ``max_lag``: how long after a deletion failures may still be
    the race; ``test_window``: the window of the significance test.

    ``floor_rate``: the failure rate a healthy Service shows anyway (0.05 %: a 99.95 %
    availability objective, the common tier between 99.9 % and 99.99 %). Below it, only
    strong structure (a "likely" cause) is named; weaker patterns are reported as background.
    ``min_backend_ratio`` / ``min_backend_excess``: the smallest effect that makes a backend
    a suspect: its failure rate at least this many times the others' (the lower end of the
    95 % interval) and this much above it. ``checks``: the rules' settings for the notes on
    the manifests given with the evidence (the user's, as ``lint`` reads them). ``pictures``:
    whether the diagnosis carries what its pictures draw (the lanes, the breakdown per
    backend); a report without pictures is spared their cost."""

    max_lag: float = 60.0
    test_window: float = 30.0
    alpha: float = 0.001  # for exact tests
    permutation_alpha: float = 0.01  # for permutation tests (their p is at least 1/rounds)
    rounds: int = 499
    min_failures: int = 5
    floor_rate: float = 0.0005
    min_backend_ratio: float = 2.0
    min_backend_excess: float = 0.0005
    checks: CheckSettings = field(default_factory=CheckSettings)
    pictures: bool = True


@dataclass(frozen=True, slots=True)
class Context:
    evidence: Evidence
    frame: pl.DataFrame  # requests + failed/reused/attempt columns
    attempt_ts: Floats  # every request and masked attempt, sorted
    failure_ts: Floats  # when each failure happened (start + latency), sorted; every role
    failure_start_ts: Floats  # when each failed request started, sorted (drops hit the SYN)
    new_conn_failure_ts: Floats  # failures on a connection's first request (or conn unknown)
    start: float
    end: float
    deletions: dict[str, float]  # pod → earliest deletion moment
    resolution: float  # clock granularity of the deletion times
    request_resolution: float  # clock granularity of the request times
    has_conn: bool
    has_backend: bool
    has_client: bool

    @property
    def span(self) -> tuple[float, float]:
        return (self.start, self.end)

    @property
    def traffic_span(self) -> tuple[float, float]:
        """The span of the request evidence (all evidence when there is none)."""
        if self.attempt_ts.size:
            return (float(self.attempt_ts[0]), float(self.attempt_ts[-1]))
        return self.span

    @property
    def deletion_ts(self) -> Floats:
        return np.sort(np.fromiter(self.deletions.values(), float, len(self.deletions)))

    def new_conn_failures_without(self, backends: list[str]) -> Floats:
        """Failures on new connections, leaving out the given (already explained) backends."""
        if not backends:
            return self.new_conn_failure_ts
        rows = self.frame.filter(
            pl.col("failed")
            & (pl.col("reused").is_null() | ~pl.col("reused"))
            & ~pl.col("backend").is_in(backends).fill_null(False)
        )
        return np.sort(rows.get_column("ended").to_numpy())

    def pod_of(self, backend: str) -> PodInfo | None:
        """The pod behind an ``IP:port``, an IP or a pod name. Pods that share an IP
        (hostNetwork pods of one node) are told apart by their container ports; when that
        cannot decide, no pod is named rather than the wrong one."""
        host, _, port = backend.rpartition(":") if backend.count(":") == 1 else (backend, "", "")
        host = host.strip("[]")
        named = [p for p in self.evidence.pods if p.name == backend]
        if named:
            return named[0]
        same_ip = [p for p in self.evidence.pods if p.ip in (backend, host)]
        if len(same_ip) > 1 and port.isdigit():
            same_ip = [p for p in same_ip if int(port) in p.ports]
        if len({p.name for p in same_ip}) == 1:
            return same_ip[0]
        if same_ip:
            return None
        for ep in self.evidence.endpoints:
            if ep.address == host and ep.pod:
                return next(
                    (p for p in self.evidence.pods if p.name == ep.pod), PodInfo(ep.pod, ip=host)
                )
        return None


def _deletions(evidence: Evidence) -> tuple[dict[str, float], float]:
    """The deletion moment of each pod, and the coarsest clock among those chosen.

    A precise time (events.k8s.io eventTime) wins over a whole-second one that it refines
    (falls within that second); otherwise the earliest report wins."""
    chosen: dict[str, tuple[float, float]] = {}
    for e in sorted(
        (e for e in evidence.events if e.kind is EventKind.DELETE and e.pod),
        key=lambda e: (e.resolution, e.ts),
    ):
        assert e.pod is not None
        old = chosen.get(e.pod)
        if old is None:
            chosen[e.pod] = (e.ts, e.resolution)
        elif old[1] == 0.0 and e.resolution > 0 and e.ts <= old[0] < e.ts + e.resolution:
            continue  # the precise report refines this coarse one
        elif e.ts < old[0]:
            chosen[e.pod] = (e.ts, e.resolution)
    members = _members(evidence, set(chosen))  # once: it reads every request's backend
    chosen = {pod: v for pod, v in chosen.items() if pod in members}
    resolution = max((r for _, r in chosen.values()), default=0.0)
    return {pod: ts for pod, (ts, _) in chosen.items()}, resolution


def _replica_set(pod: str) -> str:
    """The owner a Deployment's pod name carries (``api-7d9f8b6c5-x2k4q`` → ``api-7d9f8b6c5``)."""
    return pod.rsplit("-", 1)[0]


def _members(evidence: Evidence, deleted: set[str]) -> set[str]:
    """The deleted pods that belong to the requests' Service: those a request reached (by
    IP or name) and the other pods of their ReplicaSets. A node drain deletes every pod of
    the node; the other workloads' pods are no deletions of this Service. When no deleted
    pod can be tied to a request (no backend column, or backends that name no pod), all
    are kept: the evidence cannot tell."""
    requests = evidence.requests
    if not deleted or requests.height == 0:
        return deleted
    distinct = requests.lazy().select(pl.col("backend").drop_nulls().unique()).collect()
    backends = {str(b) for b in distinct.get_column("backend").to_list()}  # lazy: in parallel
    if not backends:
        return deleted
    hosts = {b.rsplit(":", 1)[0].strip("[]") if b.count(":") == 1 else b for b in backends}
    ips = {p.name: p.ip for p in evidence.pods if p.ip}
    reached = {pod for pod in deleted if pod in backends or ips.get(pod) in hosts}
    if not reached:
        return deleted
    owners = {_replica_set(pod) for pod in reached}
    return reached | {pod for pod in deleted if _replica_set(pod) in owners}


def _sorted(values: Floats) -> Floats:
    """Sorted values; request logs usually are already, and checking is cheap."""
    if values.size < 2 or bool((values[1:] >= values[:-1]).all()):
        return values
    return np.sort(values)


# The tries of one request follow each other within a connect plus a read timeout (nginx's
# defaults: 60 s each, https://nginx.org/en/docs/http/ngx_http_proxy_module.html
# #proxy_read_timeout; ingress-nginx's connect timeout is 5 s)
TRIES_WITHIN = 120.0


def one_per_request(frame: pl.DataFrame) -> pl.DataFrame:
    """Error-log failures counted once per request: the lines of one request's tries carry
    the same nginx connection number and request (``conn`` of the error-log rows, e.g.
    ``*1427 GET /api HTTP/1.1``); each try but the last is a ``masked`` row (a failed
    attempt the proxy retried), as in an access log. The error-log key is then dropped: it
    names the client's connection, not a connection to a backend."""
    is_log = pl.col("role") == "error_log"
    keyed = frame.select((is_log & pl.col("conn").is_not_null()).any()).item()
    if not keyed:
        return frame
    frame = frame.with_row_index("__i")
    tries = (
        frame.filter(is_log & pl.col("conn").is_not_null())
        .select("__i", "conn", "ts")
        .sort(["conn", "ts"])
        .with_columns(pl.col("ts").shift(-1).over("conn").alias("__next"))
        .filter(pl.col("__next") - pl.col("ts") <= TRIES_WITHIN)
        .get_column("__i")
        .implode()
    )
    role = pl.col("role")
    return frame.with_columns(
        pl.when(pl.col("__i").is_in(tries))
        .then(pl.lit("masked", dtype=frame.schema["role"]))
        .otherwise(role)
        .alias("role"),
        pl.when(is_log).then(None).otherwise(pl.col("conn")).alias("conn"),
    ).drop("__i")


def build(evidence: Evidence) -> Context:
    frame = one_per_request(evidence.requests)
    has = {
        c: frame.height > 0 and frame.get_column(c).null_count() < frame.height
        for c in ("conn", "backend", "client")
    }
    frame = frame.with_columns(
        pl.col("outcome").is_in(FAILURES).alias("failed"),
        (pl.col("ts") + pl.col("latency_ms").fill_null(0.0) / 1000).alias("ended"),
    )
    if has["conn"]:
        frame = frame.with_columns(
            pl.when(pl.col("conn").is_null())
            .then(None)
            .otherwise(pl.int_range(pl.len()).over("conn") > 0)
            .alias("reused")
        )
    else:
        frame = frame.with_columns(pl.lit(None, dtype=pl.Boolean).alias("reused"))
    logged = frame.get_column("role") == "error_log"
    attempts = frame.filter(~logged) if logged.any() else frame
    failures = frame.filter(pl.col("failed"))
    new_conn = failures.filter(pl.col("reused").is_null() | ~pl.col("reused"))
    deletions, resolution = _deletions(evidence)
    stamps = [
        t
        for t in (frame.get_column("ts").min(), frame.get_column("ts").max())
        if isinstance(t, float)
    ]
    stamps += [e.ts for e in evidence.events]
    return Context(
        evidence=evidence,
        frame=frame,
        attempt_ts=_sorted(attempts.get_column("ts").to_numpy()),
        failure_ts=np.sort(failures.get_column("ended").to_numpy()),
        failure_start_ts=np.sort(failures.get_column("ts").to_numpy()),
        new_conn_failure_ts=np.sort(new_conn.get_column("ended").to_numpy()),
        start=min(stamps, default=0.0),
        end=max(stamps, default=0.0),
        deletions=deletions,
        resolution=resolution,
        request_resolution=max((src.resolution for src in evidence.sources), default=0.0),
        has_conn=has["conn"],
        has_backend=has["backend"],
        has_client=has["client"],
    )


def untestable(cause: Cause, reason: str, *collect: str) -> Assessment:
    """A cause this evidence cannot test (score 0): why, and what evidence would settle it."""
    return Assessment(cause, 0.0, evidence=(reason,), collect=collect)
