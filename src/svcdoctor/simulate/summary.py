"""From runs to answers: failures per rollout with an interval over runs, by cause and
mechanism, the timeline, how long the proxies took, and the model's closed-form expectation
of the race."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

import numpy as np

from svcdoctor.model import Cause
from svcdoctor.simulate.arrays import Floats
from svcdoctor.simulate.engine import CAUSE_OF, FAILURES, MECHANISMS, Mechanism, Run, simulate_run
from svcdoctor.simulate.params import SimParams
from svcdoctor.simulate.rollout import Pods
from svcdoctor.simulate.routes import Routes, event_rates, router_rates

TIMELINE_BINS = 120
K = TypeVar("K", bound=StrEnum)


class Router(StrEnum):
    """A kind of router that carries the Service's traffic to its pods."""

    KUBE_PROXY = "kube-proxy"
    INGRESS = "ingress-nginx"
    LOAD_BALANCER = "load balancer"


@dataclass(frozen=True, slots=True)
class Quantiles:
    """Of delays, in seconds: the median and the 99th percentile (to the millisecond), the
    maximum; all 0 without a delay."""

    p50: float
    p99: float
    max: float

    @classmethod
    def of(cls, values: Floats) -> Quantiles:
        if values.size == 0:
            return cls(0.0, 0.0, 0.0)
        p50, p99 = np.quantile(values, [0.5, 0.99])
        return cls(round(float(p50), 3), round(float(p99), 3), float(values.max()))


@dataclass(frozen=True, slots=True)
class Timeline:
    bin_seconds: float
    requests: tuple[int, ...]
    failed: Mapping[Cause, tuple[int, ...]]  # failures per bin, every cause
    deletions: tuple[float, ...]  # seconds into the window


@dataclass(frozen=True, slots=True)
class RunSummary:
    seed: int
    requests: int
    failed: int
    attempts: int
    by_mechanism: Mapping[Mechanism, int]  # every failure mechanism
    deletions: int
    sigkilled: int
    expected_race: float  # the closed form for new connections (see ``expected_race``)
    programming: Mapping[Router, Quantiles]
    """Per kind of router that carries traffic: the seconds from a deletion until the
    router stopped routing to the pod."""
    window: Quantiles  # seconds a router kept routing to a pod that stopped accepting
    rollout: tuple[float, float] | None  # see ``rollout_span``
    rollout_requests: int  # requests started within the rollout
    rollout_failed: int  # failures of the rollout: its mechanisms anywhere, others within it
    rollout_by_mechanism: Mapping[Mechanism, int]  # those failures by mechanism
    clients: int  # clients that sent requests
    clients_failed: int  # clients with at least one failed request

    @property
    def by_cause(self) -> dict[Cause, int]:
        out = dict.fromkeys(Cause, 0)
        for mechanism, count in self.by_mechanism.items():
            out[CAUSE_OF[mechanism]] += count
        return out


def _mean(rows: Iterable[Mapping[K, int]]) -> dict[K, float]:
    """Key by key, the mean over runs (the keys of the first)."""
    every = list(rows)
    return {k: float(np.mean([row[k] for row in every])) for k in every[0]}


@dataclass(frozen=True, slots=True)
class Simulation:
    params: SimParams
    runs: tuple[RunSummary, ...]
    timeline: Timeline  # of the first run

    @property
    def requests(self) -> float:
        return float(np.mean([r.requests for r in self.runs]))

    @property
    def failed(self) -> float:
        return float(np.mean([r.failed for r in self.runs]))

    @property
    def failure_rate(self) -> float:
        total = sum(r.requests for r in self.runs)
        return sum(r.failed for r in self.runs) / total if total else 0.0

    @property
    def rollout_failure_rate(self) -> float | None:
        """The share of the requests sent during the rollout that failed (None without a
        rollout): what a target "per rollout" is measured against."""
        total = sum(r.rollout_requests for r in self.runs)
        if not total:
            return None
        return sum(r.rollout_failed for r in self.runs) / total

    def interval(self, confidence: float = 0.95) -> tuple[float, float] | None:
        """Student-t interval of the mean failures per window (None for a single run)."""
        values = np.array([r.failed for r in self.runs], dtype=float)
        if len(values) < 2:
            return None
        from scipy.special import stdtrit

        half = float(stdtrit(len(values) - 1, 0.5 + confidence / 2)) * values.std(ddof=1)
        half /= math.sqrt(len(values))
        mean = float(values.mean())
        return (max(0.0, mean - half), mean + half)

    def mean_by_mechanism(self) -> dict[Mechanism, float]:
        """Failures per window by mechanism, the mean over runs."""
        return _mean(r.by_mechanism for r in self.runs)

    def mean_by_cause(self) -> dict[Cause, float]:
        """Failures per window by cause, the mean over runs."""
        return _mean(r.by_cause for r in self.runs)

    def mean_rollout_by_mechanism(self) -> dict[Mechanism, float]:
        """The rollout's failures by mechanism, the mean over runs."""
        return _mean(r.rollout_by_mechanism for r in self.runs)


def race_terms(p: SimParams, pods: Pods, routes: Routes) -> tuple[Floats, Floats]:
    """For every (deleted pod, router): the delay from deletion until the router stopped
    routing to it, and the rate of new connections it sent that pod meanwhile (its rate
    over the size of its list at the deletion)."""
    gone = np.flatnonzero(np.isfinite(pods.deleted))
    if len(gone) == 0:
        return np.zeros((0, p.routers)), np.zeros((0, p.routers))
    weight = event_rates(p) / np.maximum(routes.view_sizes(pods.deleted[gone]), 1)
    return routes.remove[gone] - pods.deleted[gone, None], weight


def expected_race(delay: Floats, weight: Floats, stop_accepting: float) -> float:
    """Closed form: every router sends a pod ``weight`` new connections per second from the
    moment it stops accepting (``stop_accepting`` seconds after deletion) until the router
    removes it."""
    return float((weight * np.maximum(delay - stop_accepting, 0.0)).sum())


def router_kinds(p: SimParams) -> dict[Router, slice]:
    """The columns of each kind of router that carries traffic."""
    kinds = {Router.KUBE_PROXY: slice(0, p.nodes)}
    if p.ingress_routers:
        kinds[Router.INGRESS] = slice(p.nodes, p.nodes + p.ingress_routers)
    if p.lb_share > 0:
        kinds[Router.LOAD_BALANCER] = slice(p.routers - 1, p.routers)
    if p.ingress_share + p.lb_share >= 1:
        del kinds[Router.KUBE_PROXY]
    return kinds


def stop_accepting(p: SimParams) -> float:
    """Seconds from a deletion until the pod stops accepting: the preStop (cut at the grace
    period), or the end of its sidecar's drain when that comes first."""
    drain = math.inf if p.sidecar_drain is None else p.sidecar_drain
    return min(p.prestop, p.grace, drain)


ROLLOUT_MECHANISMS = tuple(m for m, c in CAUSE_OF.items() if c in (Cause.RACE, Cause.REUSE))
"""Failures only a rollout causes (the race's and reuse's): counted for the rollout wherever
they fall in the window."""


def rollout_span(p: SimParams, pods: Pods, routes: Routes) -> tuple[float, float] | None:
    """From the rollout's start until every router carrying traffic has dropped its last
    deleted pod (clipped to the window). It depends on the rollout and the routers only,
    not on preStop or grace, so settings can be compared on the same requests."""
    gone = np.flatnonzero(np.isfinite(pods.deleted))
    if not p.rollout or len(gone) == 0:
        return None
    carries = np.flatnonzero(router_rates(p) > 0)
    end = float(routes.remove[np.ix_(gone, carries)].max(initial=p.rollout_at))
    return p.rollout_at, max(min(end, p.duration), p.rollout_at)


def summarize(run: Run) -> RunSummary:
    p, t, pods = run.params, run.traffic, run.pods
    counts = np.bincount(t.mechanism, minlength=len(MECHANISMS))
    delay, weight = race_terms(p, pods, run.routes)
    carries = router_rates(p) > 0
    gone = np.isfinite(pods.deleted)
    window = np.maximum(delay - stop_accepting(p), 0.0)
    span = rollout_span(p, pods, run.routes)
    inside = (t.ts >= span[0]) & (t.ts <= span[1]) if span else np.zeros(len(t.ts), bool)
    failed = t.mechanism != 0
    caused = np.isin(t.mechanism, [MECHANISMS.index(m) for m in ROLLOUT_MECHANISMS])
    of_rollout = (caused | inside) & failed if span else np.zeros(len(t.ts), bool)
    in_rollout = np.bincount(t.mechanism[of_rollout], minlength=len(MECHANISMS))
    return RunSummary(
        seed=run.seed,
        requests=len(t.ts),
        failed=int(failed.sum()),
        attempts=int(t.attempts.sum()),
        by_mechanism=dict(zip(FAILURES, counts[1:].tolist(), strict=True)),
        deletions=int(gone.sum()),
        sigkilled=int(run.killed.sum()),
        expected_race=round(expected_race(delay, weight, stop_accepting(p)), 2),
        programming={
            kind: Quantiles.of(delay[:, columns].ravel())
            for kind, columns in router_kinds(p).items()
        },
        window=Quantiles.of(window[:, carries].ravel()),
        rollout=(round(span[0], 3), round(span[1], 3)) if span else None,
        rollout_requests=int(inside.sum()),
        rollout_failed=int(of_rollout.sum()),
        rollout_by_mechanism=dict(zip(FAILURES, in_rollout[1:].tolist(), strict=True)),
        clients=int(np.unique(t.client).size),
        clients_failed=int(np.unique(t.client[failed]).size),
    )


def timeline(run: Run, bins: int = TIMELINE_BINS) -> Timeline:
    p, t = run.params, run.traffic
    width = max(p.duration / bins, 1.0)
    count = math.ceil(p.duration / width)
    index = np.minimum((t.ts / width).astype(np.int64), count - 1)
    failed = {}
    for cause in Cause:
        codes = [i for i, m in enumerate(MECHANISMS) if m in CAUSE_OF and CAUSE_OF[m] is cause]
        hit = np.isin(t.mechanism, codes)
        failed[cause] = tuple(int(v) for v in np.bincount(index[hit], minlength=count))
    deleted = run.pods.deleted[np.isfinite(run.pods.deleted)]
    return Timeline(
        width,
        tuple(int(v) for v in np.bincount(index, minlength=count)),
        failed,
        tuple(round(float(d), 3) for d in deleted),
    )


def simulate(
    p: SimParams, runs: int = 1, seed: int = 1, progress: Callable[[], None] | None = None
) -> Simulation:
    """``runs`` independent windows (seeds ``seed``, ``seed + 1``, …); ``progress`` is
    called after each."""
    summaries, first = [], None
    for k in range(runs):
        run = simulate_run(p, seed + k)
        first = first or run
        summaries.append(summarize(run))
        if progress:
            progress()
    assert first is not None
    return Simulation(p, tuple(summaries), timeline(first))
