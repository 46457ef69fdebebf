"""What a probe's rows say (pure): per backend and per node, the success rate with its exact
(Clopper-Pearson) 95 % interval, latency percentiles, failure kinds, and which of them fail
more than the others by more than chance.

The verdict is the test ``diagnose`` uses to single out a bad backend
(``svcdoctor.diagnose.backend``): given all failures, the number on one group is
Binomial(total failures, its share of the requests) when every group fails alike; a group is
singled out when that is improbable (p below ``alpha`` after Bonferroni over the groups), its
failure rate is at least ``min_backend_ratio`` times the others' at the low end of the
interval and exceeds theirs by ``min_backend_excess``, with at least ``min_failures``
failures in all. The thresholds are diagnose's ``Settings``.

A comparison needs something to compare: with one endpoint, or when every endpoint fails
alike, nobody can be singled out and ``limits`` says so. The Service as a whole fails the
probe when even the upper end of its success rate's 95 % interval is below
``SERVICE_TARGET``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from svcdoctor.diagnose.backend import Outlier, outlier
from svcdoctor.diagnose.context import Settings
from svcdoctor.diagnose.stats import proportion_ci
from svcdoctor.model.breakdown import BackendRate, Breakdown

PERCENTILES = (50, 90, 99)
SERVICE_TARGET = 0.99  # through the Service: failing when the 95 % upper bound is below


@dataclass(frozen=True, slots=True)
class Tally:
    """The requests of one group (a backend, a node, the Service as a whole)."""

    key: str
    requests: int
    failures: int
    by_outcome: tuple[tuple[str, int], ...]  # failure kinds, most frequent first
    success_ci95: tuple[float, float]
    latency_ms: tuple[tuple[int, float], ...]  # (percentile, ms) of the successful requests
    label: str | None = None  # the pod or node name shown next to the key
    outlier: Outlier | None = None

    @property
    def success_rate(self) -> float:
        return 1.0 - self.failures / self.requests if self.requests else math.nan

    @property
    def singled_out(self) -> bool:
        return self.outlier is not None

    @property
    def failure_share(self) -> float:
        """The share of the requests that failed (0 without requests)."""
        return self.failures / self.requests if self.requests else 0.0

    @property
    def failure_ci95(self) -> tuple[float, float]:
        """The 95 % interval of the failure share: the success interval's complement."""
        low, high = self.success_ci95
        return 1.0 - high, 1.0 - low

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "name": self.label,
            "requests": self.requests,
            "failures": self.failures,
            "success_rate": round(self.success_rate, 5) if self.requests else None,
            "success_rate_ci95": [round(x, 5) for x in self.success_ci95],
            "failures_by_outcome": dict(self.by_outcome),
            "latency_ms": {f"p{p}": ms for p, ms in self.latency_ms},
            "singled_out": self.singled_out,
            "p_value": self.outlier.p_value if self.outlier else None,
            "rate_ratio_low": self.outlier.rate_ratio_ci95[0] if self.outlier else None,
        }


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """A probe's verdicts: each backend probed directly, the Service as a whole, and
    (with ``--per-node``) each node's route to the Service."""

    backends: tuple[Tally, ...]
    service: Tally | None
    nodes: tuple[Tally, ...]

    @property
    def bad_backends(self) -> tuple[Tally, ...]:
        return tuple(t for t in self.backends if t.singled_out)

    @property
    def bad_nodes(self) -> tuple[Tally, ...]:
        return tuple(t for t in self.nodes if t.singled_out)

    @property
    def singled_out(self) -> bool:
        return bool(self.bad_backends or self.bad_nodes)

    @property
    def service_failing(self) -> bool:
        """The Service's success rate is below ``SERVICE_TARGET`` beyond chance (the upper
        end of its 95 % interval is)."""
        return self.service is not None and self.service.success_ci95[1] < SERVICE_TARGET

    @property
    def failing(self) -> bool:
        """What ``probe`` exits 1 for: a backend or node singled out, or the Service
        failing as a whole."""
        return self.singled_out or self.service_failing

    def to_dict(self) -> dict[str, Any]:
        return {
            "backends": [t.to_dict() for t in self.backends],
            "service": self.service.to_dict() if self.service else None,
            "nodes": [t.to_dict() for t in self.nodes],
            "bad_backends": [t.label or t.key for t in self.bad_backends],
            "bad_nodes": [t.key for t in self.bad_nodes],
        }


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (linear interpolation, as numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    at = (len(ordered) - 1) * q / 100
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def tally(key: str, rows: Sequence[Mapping[str, Any]], label: str | None = None) -> Tally:
    """The requests of one group: counts, failure kinds, the exact 95 % interval of the
    success rate and the latency percentiles of the successful requests (no verdict)."""
    failed = [r for r in rows if r.get("outcome") != "ok"]
    kinds = Counter(str(r.get("outcome")) for r in failed)
    latencies = [
        float(r["latency_ms"])
        for r in rows
        if r.get("outcome") == "ok" and r.get("latency_ms") is not None
    ]
    n, k = len(rows), len(failed)
    low, high = proportion_ci(n - k, n) if n else (0.0, 1.0)
    return Tally(
        key,
        n,
        k,
        tuple(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))),
        (low, high),
        tuple((p, round(percentile(latencies, p), 3)) for p in PERCENTILES) if latencies else (),
        label,
    )


def compare(tallies: Sequence[Tally], s: Settings) -> tuple[Tally, ...]:
    """The tallies, each with its verdict against the others."""
    total_n = sum(t.requests for t in tallies)
    total_k = sum(t.failures for t in tallies)
    out = []
    for t in tallies:
        found = outlier(t.requests, t.failures, total_n, total_k, len(tallies), s)
        out.append(Tally(t.key, t.requests, t.failures, t.by_outcome, t.success_ci95,
                         t.latency_ms, t.label, found))  # fmt: skip
    return tuple(out)


def group(
    rows: Iterable[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], str | None]
) -> dict[str, list[Mapping[str, Any]]]:
    """The rows by ``key(row)``, in first-seen order; rows whose key is None are left out."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        k = key(row)
        if k is not None:
            groups.setdefault(k, []).append(row)
    return groups


def assess(
    direct: Sequence[Mapping[str, Any]],
    service: Sequence[Mapping[str, Any]],
    per_node: Sequence[Mapping[str, Any]] = (),
    names: Mapping[str, str] | None = None,
    s: Settings | None = None,
) -> ProbeResult:
    """The verdicts of a probe: ``direct`` rows by backend (``names``: backend → pod),
    ``service`` rows as a whole, ``per_node`` rows (through the Service from one pod per
    node) by the node they came from."""
    s = s or Settings()
    names = names or {}
    by_backend = group(direct, lambda r: str(r["backend"]) if r.get("backend") else None)
    backends = compare([tally(b, rows, names.get(b)) for b, rows in sorted(by_backend.items())], s)
    by_node = group(per_node, lambda r: str(r["node"]) if r.get("node") else None)
    nodes = compare([tally(n, rows, n) for n, rows in sorted(by_node.items())], s)
    whole = tally("service", service) if service else None
    return ProbeResult(backends, whole, nodes)


def limits(result: ProbeResult) -> tuple[str, ...]:
    """Notes on what the verdicts cannot say: nothing to compare (one endpoint, or every
    endpoint failing alike) and the Service failing as a whole."""
    notes = []
    failing = [t for t in result.backends if t.failures]
    if len(result.backends) == 1:
        (only,) = result.backends
        notes.append(
            f"only one endpoint ({only.label or only.key}): nothing to compare it with, so no "
            "endpoint can be singled out; judge its own success rate"
        )
    elif (
        len(result.backends) > 1
        and len(failing) == len(result.backends)
        and not result.bad_backends
    ):
        low = min(t.failures / t.requests for t in failing)
        high = max(t.failures / t.requests for t in failing)
        notes.append(
            f"every endpoint fails alike ({low:.1%} to {high:.1%} of its requests): no "
            "single pod is to blame; look at what they share (the app's release, a "
            "dependency, the network)"
        )
    if len(result.nodes) == 1:
        notes.append("only one node probed the Service: no node can be singled out")
    if result.service_failing:
        assert result.service is not None
        notes.append(
            f"through the Service: success at most {result.service.success_ci95[1]:.1%} "
            f"(upper end of the 95 % interval), below {SERVICE_TARGET:.0%}"
        )
    return tuple(notes)


def probe_breakdown(result: ProbeResult) -> Breakdown:
    """The direct probe as failure rates per backend (intervals from the success rates')."""
    return Breakdown(
        backends=tuple(
            BackendRate(
                backend=t.key,
                pod=t.label,
                requests=t.requests,
                failures=t.failures,
                rate=t.failures / t.requests if t.requests else 0.0,
                ci95=(1.0 - t.success_ci95[1], 1.0 - t.success_ci95[0]),
                suspect=t.outlier is not None,
            )
            for t in result.backends
        ),
        pairs=(),
    )
