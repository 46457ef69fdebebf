"""From runs to answers: failures per rollout with an interval over runs, by cause and
mechanism, the timeline, how long the proxies took, and the model's closed-form expectation
of the race."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from svcdoctor.model import Cause
from svcdoctor.simulate.arrays import Floats
from svcdoctor.simulate.engine import CAUSE_OF, MECHANISMS, Run, simulate_run
from svcdoctor.simulate.params import SimParams
from svcdoctor.simulate.rollout import Pods
from svcdoctor.simulate.routes import Routes, router_rates

TIMELINE_BINS = 120


@dataclass(frozen=True, slots=True)
class Timeline:
    bin_seconds: float
    requests: tuple[int, ...]
    failed: dict[str, tuple[int, ...]]  # cause → failures per bin
    deletions: tuple[float, ...]  # seconds into the window


@dataclass(frozen=True, slots=True)
class RunSummary:
    seed: int
    requests: int
    failed: int
    attempts: int
    by_mechanism: dict[str, int]
    deletions: int
    sigkilled: int
    expected_race: float  # the closed form for new connections (see ``expected_race``)
    programming: dict[str, dict[str, float]]
    """Per kind of router (kube-proxy, ingress-nginx, load balancer): quantiles of the
    seconds from a deletion until the router stopped routing to the pod."""
    window: dict[str, float]  # seconds a router kept routing to a pod that stopped accepting
    rollout: tuple[float, float] | None  # see ``rollout_span``
    rollout_requests: int  # requests started within the rollout
    rollout_failed: int  # failures of the rollout: its mechanisms anywhere, others within it
    rollout_by_mechanism: dict[str, int]  # those failures by mechanism
    clients: int  # clients that sent requests
    clients_failed: int  # clients with at least one failed request

    @property
    def by_cause(self) -> dict[str, int]:
        out = {c.value: 0 for c in Cause}
        for name, count in self.by_mechanism.items():
            out[CAUSE_OF[name].value] += count
        return out


@dataclass(frozen=True, slots=True)
class Simulation:
    params: SimParams
    runs: tuple[RunSummary, ...]
    timeline: Timeline  # of the first run
    extra: dict[str, object] = field(default_factory=dict)

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

    def mean_by(self, attr: str) -> dict[str, float]:
        keys = getattr(self.runs[0], attr)
        return {k: float(np.mean([getattr(r, attr)[k] for r in self.runs])) for k in keys}


def race_terms(p: SimParams, pods: Pods, routes: Routes) -> tuple[Floats, Floats]:
    """For every (deleted pod, router): the delay from deletion until the router stopped
    routing to it, and the rate of new connections it sent that pod meanwhile (its rate
    over the size of its list at the deletion)."""
    gone = np.flatnonzero(np.isfinite(pods.deleted))
    if len(gone) == 0:
        return np.zeros((0, p.routers)), np.zeros((0, p.routers))
    weight = router_rates(p) / np.maximum(routes.view_sizes(pods.deleted[gone]), 1)
    return routes.remove[gone] - pods.deleted[gone, None], weight


def expected_race(delay: Floats, weight: Floats, stop_accepting: float) -> float:
    """Closed form: every router sends a pod ``weight`` new connections per second from the
    moment it stops accepting (``stop_accepting`` seconds after deletion) until the router
    removes it."""
    return float((weight * np.maximum(delay - stop_accepting, 0.0)).sum())


def _quantiles(values: Floats) -> dict[str, float]:
    if values.size == 0:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0}
    p50, p99 = np.quantile(values, [0.5, 0.99])
    return {"p50": round(float(p50), 3), "p99": round(float(p99), 3), "max": float(values.max())}


def router_kinds(p: SimParams) -> dict[str, slice]:
    """The columns of each kind of router that carries traffic."""
    kinds = {"kube-proxy": slice(0, p.nodes)}
    if p.ingress_routers:
        kinds["ingress-nginx"] = slice(p.nodes, p.nodes + p.ingress_routers)
    if p.lb_share > 0:
        kinds["load balancer"] = slice(p.routers - 1, p.routers)
    if p.ingress_share + p.lb_share >= 1:
        del kinds["kube-proxy"]
    return kinds


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
    window = np.maximum(delay - np.minimum(p.prestop, p.grace), 0.0)
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
        by_mechanism={m: int(c) for m, c in zip(MECHANISMS[1:], counts[1:], strict=True)},
        deletions=int(gone.sum()),
        sigkilled=int(run.killed.sum()),
        expected_race=round(expected_race(delay, weight, min(p.prestop, p.grace)), 2),
        programming={
            kind: _quantiles(delay[:, columns].ravel()) for kind, columns in router_kinds(p).items()
        },
        window=_quantiles(window[:, carries].ravel()),
        rollout=(round(span[0], 3), round(span[1], 3)) if span else None,
        rollout_requests=int(inside.sum()),
        rollout_failed=int(of_rollout.sum()),
        rollout_by_mechanism={
            m: int(c) for m, c in zip(MECHANISMS[1:], in_rollout[1:], strict=True)
        },
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
        failed[cause.value] = tuple(int(v) for v in np.bincount(index[hit], minlength=count))
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
