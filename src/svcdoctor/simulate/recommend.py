"""The smallest preStop and grace period that keep a rollout's failures under a target.

The race's failures fall as the preStop grows: with the routers' removal delays δ and the
rate w each router sends a pod (both from the model, over several seeded rollouts), a
preStop of P seconds leaves Σ w·max(δ - P, 0) failed new connections. The grace period
must then cover the preStop plus the latency tail, or SIGKILL cuts the slowest requests:
each deleted pod loses its rate x E[max(L - slack, 0)] requests, L the request latency and
slack the seconds between SIGTERM and SIGKILL. Both are closed forms over the model's
samples; the answer is then checked by simulating the rollout with it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from svcdoctor.simulate.params import SimParams
from svcdoctor.simulate.rollout import build_pods
from svcdoctor.simulate.routes import build_routes
from svcdoctor.simulate.summary import Simulation, expected_race, race_terms, simulate

SLEEP_ACTION = (1, 30)  # preStop ``sleep`` is beta and on by default from 1.30 (GA 1.34)
LATENCY_SAMPLES = 200_000
MAX_PRESTOP = 3600
MAX_SLACK = 3600  # seconds between SIGTERM and SIGKILL searched for a graceful server
UNFIXABLE = {
    "stale_connection": "keep-alive connections break when the server exits at SIGTERM: close "
    "them on SIGTERM (graceful shutdown: Connection: close, HTTP/2 GOAWAY) or set a "
    "maximum connection age",
    "bad_backend": "a bad backend fails requests whatever the shutdown settings: fix its "
    "readiness probe so it leaves the endpoints (SVD2xx)",
    "conntrack": "the conntrack table is full: raise nf_conntrack_max or reuse connections",
    "no_endpoints": "the rollout leaves the Service with no endpoints: lower maxUnavailable",
}


@dataclass(frozen=True, slots=True)
class Recommendation:
    prestop_seconds: int
    grace_seconds: int
    target: float  # failure rate
    predicted_failure_rate: float  # closed form at the recommendation
    current: Simulation  # the rollout with the given settings
    checked: Simulation  # the rollout with the recommendation
    met: bool
    reasons: tuple[str, ...]
    yaml: str


class _Excess:
    """x ↦ E[max(L - x, 0)] over latency samples (sorted, with suffix sums), vectorised."""

    def __init__(self, latency: np.ndarray) -> None:
        self.sorted = np.sort(latency)
        self.suffix = np.append(np.cumsum(self.sorted[::-1])[::-1], 0.0)
        self.mean = float(self.sorted.mean())

    def __call__(self, x: np.ndarray) -> np.ndarray:
        n = len(self.sorted)
        idx = np.searchsorted(self.sorted, x, side="right")
        return np.asarray((self.suffix[idx] - (n - idx) * x) / n)


def recommend(
    p: SimParams,
    target: float,
    runs: int = 3,
    seed: int = 1,
    version: tuple[int, int] = SLEEP_ACTION,
    progress: Callable[[], None] | None = None,
) -> Recommendation:
    """Search whole seconds (preStop ``sleep`` takes whole seconds) for the smallest preStop,
    then the smallest grace period, whose expected failures stay within ``target``.
    ``progress`` is called ``3 * runs`` times (each rollout sampled, each window checked)."""
    terms = []
    for k in range(runs):
        r = np.random.default_rng(seed + k)
        pods = build_pods(p, r)
        terms.append(race_terms(p, pods, build_routes(p, pods, r)))
        if progress:
            progress()
    requests = p.rate * p.duration
    allowed = target * requests
    excess = _Excess(p.latency.sample(np.random.default_rng(seed), LATENCY_SAMPLES))
    held = p.connection != "new"  # clients keep sending on held connections until SIGTERM
    deletions = float(np.mean([len(d) for d, _ in terms]))
    per_pod = p.rate / p.replicas

    def lost(prestop: int, slack: float | None) -> float:
        """Expected failures: the race, plus what is in flight when the process ends
        (naive: at SIGTERM; graceful: at SIGKILL, ``slack`` seconds later)."""
        total = 0.0
        for delay, weight in terms:
            total += expected_race(delay, weight, prestop)
            if not held:
                # a request that started while routers still sent traffic, still running
                last = np.minimum(delay, prestop)
                total += float((weight * excess(prestop + (slack or 0.0) - last)).sum())
        total /= len(terms)
        if held:
            total += deletions * per_pod * float(excess(np.array([slack or 0.0]))[0])
        return total

    longest = max((float(d.max()) for d, _ in terms if d.size), default=0.0)
    chosen: tuple[int, int, float] | None = None
    fallback = math.ceil(longest) + 1
    for prestop in range(0, min(MAX_PRESTOP, fallback) + 1):
        if p.shutdown == "naive":
            if lost(prestop, None) <= allowed:
                chosen = (prestop, prestop + 1, lost(prestop, None))
                break
            continue
        if lost(prestop, MAX_SLACK) > allowed:
            continue
        slack = 1
        while lost(prestop, slack) > allowed:
            slack += 1
        chosen = (prestop, prestop + slack, lost(prestop, slack))
        break
    reasons: list[str] = []
    if chosen is None:
        chosen = (fallback, fallback + (1 if p.shutdown == "naive" else MAX_SLACK), 0.0)
        chosen = (*chosen[:2], lost(chosen[0], chosen[1] - chosen[0]))
        if p.shutdown == "naive" and chosen[2] > allowed:
            reasons.append(
                f"a naive shutdown drops ≈{chosen[2]:.2g} requests in flight at SIGTERM per "
                f"window, more than the target allows ({allowed:.2g}): finish in-flight "
                "requests on SIGTERM (graceful shutdown)"
            )
        elif chosen[2] > allowed:
            reasons.append(
                f"≈{chosen[2]:.2g} requests per window still fail (the target allows "
                f"{allowed:.2g}): the latency tail outlasts any grace period searched"
            )
    prestop, grace, expected = chosen
    current = simulate(p, runs, seed, progress)
    fixed = replace(p, prestop=float(prestop), grace=float(grace))
    checked = simulate(fixed, runs, seed, progress)
    others = checked.mean_by("by_mechanism")
    for name, why in UNFIXABLE.items():
        if others.get(name, 0.0) > 0:
            expected += others[name]
            reasons.append(f"{name} ({others[name]:.0f} per window): {why}")
    rate = expected / requests
    return Recommendation(
        prestop,
        grace,
        target,
        rate,
        current,
        checked,
        rate <= target,
        tuple(reasons),
        snippet(prestop, grace, version),
    )


def snippet(prestop: int, grace: int, version: tuple[int, int] = SLEEP_ACTION) -> str:
    """The Deployment fields, with the native ``sleep`` action where the version has it."""
    lines = [
        "spec:",
        "  template:",
        "    spec:",
        f"      terminationGracePeriodSeconds: {grace}",
        "      containers:",
        "        - name: app  # your container",
    ]
    if prestop > 0:
        lines += ["          lifecycle:", "            preStop:"]
        if version >= SLEEP_ACTION:
            lines += ["              sleep:", f"                seconds: {prestop}"]
        else:
            lines += [
                "              exec:  # needs a sleep binary in the image (before 1.30)",
                f'                command: ["sleep", "{prestop}"]',
            ]
    return "\n".join(lines) + "\n"
