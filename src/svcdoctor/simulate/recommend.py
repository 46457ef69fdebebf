"""The smallest preStop and grace period that keep a rollout's failures under a target.

The target is a share of the requests sent during the rollout (from its start until the
routers have dropped the last old pod), so it does not depend on how long a window is
simulated. The race's failures fall as the preStop grows: with the routers' removal delays
δ and the rate w each router sends a pod (both from the model, over several seeded
rollouts), a preStop of P seconds leaves Σ w·max(δ - P, 0) failed new connections. The grace
period must then cover the preStop plus the latency tail, or SIGKILL cuts the slowest
requests: each deleted pod loses its rate x E[max(L - slack, 0)] requests, L the request
latency (a client gives up at its timeout) and slack the seconds between SIGTERM and SIGKILL
(at least the kubelet's 2 s). Both are closed forms over the model's samples; the answer is
then checked by simulating other rollouts with it, and raised while the simulated
failures exceed the target.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from svcdoctor.model import MIN_SHUTDOWN_WINDOW, remedy
from svcdoctor.model.scenario import ConnectionMode, ShutdownMode
from svcdoctor.simulate.arrays import Floats
from svcdoctor.simulate.engine import Mechanism
from svcdoctor.simulate.params import ParamError, SimParams
from svcdoctor.simulate.rollout import build_pods
from svcdoctor.simulate.routes import build_routes
from svcdoctor.simulate.summary import (
    Simulation,
    expected_race,
    race_terms,
    rollout_span,
    simulate,
)

SLEEP_ACTION = remedy.NATIVE_SLEEP_VERSION  # the remedy model's version rule
LATENCY_SAMPLES = 200_000
MAX_PRESTOP = 3600
MAX_RAISES = 5  # how often the simulated check may raise the answer
CURVE_POINTS = 12  # preStop values on the curve, at least
CURVE_MAX_POINTS = 24  # past this many seconds, the curve steps over whole seconds
CURVE_BEYOND = 3  # seconds of preStop past the recommendation, at least
M = Mechanism
FIXABLE = (M.STALE_ENDPOINT, M.IN_FLIGHT, M.SIGKILL)  # what preStop and grace act on
UNFIXABLE = {
    M.STALE_CONNECTION: "keep-alive connections break when the server exits at SIGTERM: close "
    "them on SIGTERM (graceful shutdown: Connection: close, HTTP/2 GOAWAY) or set a "
    "maximum connection age",
    M.BAD_BACKEND: "a bad backend fails requests whatever the shutdown settings: fix its "
    "readiness probe so it leaves the endpoints (SVD2xx)",
    M.CONNTRACK: "the conntrack table is full: raise nf_conntrack_max or reuse connections",
    M.NO_ENDPOINTS: "the rollout leaves the Service with no endpoints: lower maxUnavailable",
}


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """The expected failures per rollout that preStop and grace act on (the race, and the
    requests cut at shutdown) with a preStop of ``prestop_seconds`` and the grace period
    ``grace_seconds``: the preStop plus the recommendation's seconds from SIGTERM to
    SIGKILL, so the curve shows what the preStop alone changes."""

    prestop_seconds: int
    grace_seconds: int
    failed_per_rollout: float


@dataclass(frozen=True, slots=True)
class Recommendation:
    """``curve``: the closed form of the search at whole preStop seconds from 0 to past the
    recommendation (which is one of its points)."""

    prestop_seconds: int
    grace_seconds: int  # the smallest that meets the target
    target: float  # failure rate among the rollout's requests
    rollout_requests: float  # requests per rollout (the target's denominator)
    predicted_failure_rate: float  # closed form at the recommendation
    current: Simulation  # the rollout with the given settings
    checked: Simulation  # other rollouts, with the recommendation
    met: bool
    reasons: tuple[str, ...]
    kubernetes_version: tuple[int, int]
    curve: tuple[CurvePoint, ...] = ()
    sidecar_drain_seconds: int | None = None
    """The pod's mesh sidecar must keep taking connections this long after the deletion
    (the preStop and the app's drain): its terminationDrainDuration (Istio) or
    proxy-wait-before-exit-seconds (Linkerd); None without a (non-native) sidecar."""
    lb_deregistration_seconds: int | None = None
    """The load balancer's deregistration delay must be at least this (the requests it sent
    until its leg ended must finish: the preStop and the app's drain); None when there is
    no load balancer or its delay is long enough."""

    @property
    def allowed_per_rollout(self) -> float:
        """The target as failed requests per rollout (the curve's unit)."""
        return self.target * self.rollout_requests

    @property
    def recommended_point(self) -> CurvePoint | None:
        """The curve's point at the recommended preStop."""
        return next((c for c in self.curve if c.prestop_seconds == self.prestop_seconds), None)

    @property
    def plan(self) -> remedy.ShutdownPlan:
        """The remedy model's plan for the simulated preStop: grace covers it plus lint's
        longest request and margin, never below the current grace period."""
        return remedy.plan_shutdown(
            remedy.ShutdownFacts(
                window_seconds=self.prestop_seconds,
                source=remedy.WindowSource.ASSUMED,  # the margin is in the simulated answer
                kube_version=self.kubernetes_version,
                current_grace_seconds=math.ceil(self.current.params.grace),
            )
        )

    @property
    def grace_to_set(self) -> int:
        """The smallest grace period meeting the target, raised to the remedy plan's (which
        never lowers the current one)."""
        return max(self.grace_seconds, self.plan.grace_seconds)


class _Excess:
    """x ↦ E[max(L - x, 0)] over latency samples (sorted, with suffix sums), vectorised."""

    def __init__(self, latency: np.ndarray) -> None:
        self.sorted = np.sort(latency)
        self.suffix = np.append(np.cumsum(self.sorted[::-1])[::-1], 0.0)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        n = len(self.sorted)
        idx = np.searchsorted(self.sorted, x, side="right")
        return np.asarray((self.suffix[idx] - (n - idx) * x) / n)


@dataclass(frozen=True, slots=True)
class _Losses:
    """The closed forms over sampled rollouts."""

    p: SimParams
    terms: list[tuple[Floats, Floats]]  # per rollout: (removal delays, router rates)
    excess: _Excess

    @property
    def held(self) -> bool:
        return (
            self.p.connection is not ConnectionMode.NEW
        )  # clients keep sending on held connections

    def __call__(self, prestop: int, slack: float | None) -> float:
        """Expected failures per rollout: the race, plus what is in flight when the process
        ends (naive: at SIGTERM, ``slack`` None; graceful: at SIGKILL, ``slack`` later)."""
        total = 0.0
        for delay, weight in self.terms:
            total += expected_race(delay, weight, prestop)
            if not self.held:
                # a request that started while routers still sent traffic, still running
                last = np.minimum(delay, prestop)
                total += float((weight * self.excess(prestop + (slack or 0.0) - last)).sum())
        total /= len(self.terms)
        if self.held:
            deletions = float(np.mean([len(d) for d, _ in self.terms]))
            total += (
                deletions
                * self.p.rate
                / self.p.replicas
                * float(self.excess(np.array([slack or 0.0]))[0])
            )
        return total


def recommend(
    p: SimParams,
    target: float,
    runs: int = 3,
    seed: int = 1,
    version: tuple[int, int] = SLEEP_ACTION,
    progress: Callable[[], None] | None = None,
) -> Recommendation:
    """Search whole seconds (preStop ``sleep`` takes whole seconds) for the smallest preStop,
    then the smallest grace period, whose expected failures stay within ``target``; check on
    ``runs`` other rollouts. ``progress`` is called after each sampled or simulated window
    (``runs`` for the search, ``runs`` for the current settings, ``runs`` per check)."""
    if not p.rollout:
        raise ParamError("recommend needs a rollout: without one the race does not happen")
    terms, spans = [], []
    # the plan makes the hops outlast the shutdown (``path_covering``): search over the
    # routers' legs as they are then, not cut short by a deregistration delay
    legs = path_covering(p, MAX_PRESTOP)
    for k in range(runs):
        r = np.random.default_rng(seed + k)
        pods = build_pods(legs, r)
        routes = build_routes(legs, pods, r)
        terms.append(race_terms(legs, pods, routes))
        span = rollout_span(legs, pods, routes)
        spans.append(max(span[1] - span[0], 1.0) if span else 1.0)
        if progress:
            progress()
    rollout_requests = p.rate * float(np.mean(spans))
    allowed = target * rollout_requests
    latency = np.minimum(p.latency.sample(np.random.default_rng(seed), LATENCY_SAMPLES), p.timeout)
    lost = _Losses(p, terms, _Excess(latency))
    longest_slack = math.ceil(p.timeout) + 1  # a client gives up at its timeout

    def smallest_slack(prestop: int) -> int | None:
        """The smallest seconds from SIGTERM to SIGKILL (bisection: losses only fall)."""
        if p.shutdown is ShutdownMode.NAIVE:  # the process exits at SIGTERM: no slack needed
            return MIN_SHUTDOWN_WINDOW if lost(prestop, None) <= allowed else None
        if lost(prestop, longest_slack) > allowed:
            return None
        low, high = MIN_SHUTDOWN_WINDOW, longest_slack
        while low < high:
            mid = (low + high) // 2
            low, high = (low, mid) if lost(prestop, mid) <= allowed else (mid + 1, high)
        return low

    longest = max((float(d.max()) for d, _ in terms if d.size), default=0.0)
    ceiling = min(MAX_PRESTOP, math.ceil(longest) + 1)  # past every router: no race left
    prestop, slack = (
        ceiling,
        longest_slack if p.shutdown is ShutdownMode.GRACEFUL else MIN_SHUTDOWN_WINDOW,
    )
    for candidate in range(ceiling + 1):
        found = smallest_slack(candidate)
        if found is not None:
            prestop, slack = candidate, found
            break
    current = simulate(p, runs, seed, progress)
    # the whole path: the preStop covers the slowest router's leg (the delays above are
    # every router's); the pod's own sidecar must outlive the preStop and the app's drain
    p = path_covering(p, prestop + slack)
    checked, raises = _check(p, prestop, slack, runs, seed + runs, progress), 0
    while not _consistent(checked, target) and raises < MAX_RAISES:
        by = checked.mean_rollout_by_mechanism()
        if by[M.SIGKILL] > by[M.STALE_ENDPOINT] + by[M.IN_FLIGHT]:
            slack += 1
        elif by[M.STALE_ENDPOINT] > 0 or p.connection is ConnectionMode.NEW:
            prestop += 1
        else:  # requests cut on held connections by a naive exit: no preStop helps
            break
        raises += 1
        p = path_covering(p, prestop + slack)
        checked = _check(p, prestop, slack, runs, seed + runs, progress)
    expected = lost(prestop, None if p.shutdown is ShutdownMode.NAIVE else slack)
    by = checked.mean_rollout_by_mechanism()
    reasons: list[str] = []
    if not _consistent(checked, target):
        fixable = sum(by[m] for m in FIXABLE)
        reasons.append(
            f"≈{fixable:.2g} requests per rollout still fail in the race or at shutdown (the "
            f"target allows {allowed:.2g})"
            + (
                ": finish in-flight requests on SIGTERM (graceful shutdown)"
                if p.shutdown is ShutdownMode.NAIVE
                else ""
            )
        )
    for name, why in UNFIXABLE.items():
        if by[name] > 0:
            expected += by[name]
            reasons.append(f"{name} ({by[name]:.0f} per rollout): {why}")
    grace = prestop + slack
    naive = p.shutdown is ShutdownMode.NAIVE
    curve = tuple(
        CurvePoint(x, x + slack, lost(x, None if naive else slack)) for x in curve_prestops(prestop)
    )
    return Recommendation(
        prestop,
        grace,
        target,
        rollout_requests,
        expected / rollout_requests,
        current,
        checked,
        not reasons,
        tuple(reasons),
        version,
        curve,
        None if p.sidecar_drain is None else math.ceil(p.sidecar_drain),
        _raised(p.lb_deregistration, current.params.lb_deregistration),
    )


def _raised(planned: float, given: float) -> int | None:
    return math.ceil(planned) if planned > given else None


def path_covering(p: SimParams, seconds: float) -> SimParams:
    """``p`` with the hops that would cut the pod's shutdown short made to last ``seconds``
    after the deletion (never shortened): the pod's sidecar's drain, and the load
    balancer's deregistration delay (it cuts the requests it sent until its leg ended)."""
    need = float(math.ceil(seconds))
    if p.sidecar_drain is not None and p.sidecar_drain < need:
        p = replace(p, sidecar_drain=need)
    if p.lb_share > 0 and p.lb_deregistration < need:
        p = replace(p, lb_deregistration=need)
    return p


def curve_prestops(recommended: int) -> tuple[int, ...]:
    """The preStop seconds of the curve: from 0 to a few seconds past the recommendation (at
    least ``CURVE_POINTS`` values), every second or, for long ones, every few seconds; the
    recommendation always among them."""
    upper = max(recommended + max(CURVE_BEYOND, recommended // 4), CURVE_POINTS - 1)
    step = max(1, math.ceil(upper / CURVE_MAX_POINTS))
    return tuple(sorted({*range(0, upper + 1, step), recommended, upper}))


def _check(
    p: SimParams,
    prestop: int,
    slack: int,
    runs: int,
    seed: int,
    progress: Callable[[], None] | None,
) -> Simulation:
    return simulate(
        replace(p, prestop=float(prestop), grace=float(prestop + slack)), runs, seed, progress
    )


def fixable_per_rollout(s: Simulation) -> float:
    """The simulated failures per rollout that preStop and grace act on (the curve's
    mechanisms), the mean over runs."""
    by = s.mean_rollout_by_mechanism()
    return sum(by[m] for m in FIXABLE)


def _consistent(s: Simulation, target: float) -> bool:
    """Whether the simulated failures that preStop and grace act on stay within the target,
    over the requests of the simulated rollouts."""
    failed = sum(r.rollout_by_mechanism[m] for r in s.runs for m in FIXABLE)
    return failed <= target * sum(r.rollout_requests for r in s.runs)
