"""Benchmark: ``svcdoctor simulate`` at cluster scale, side by side in one run.

A 5,000-node cluster rolling 100 pods under 2,000 requests/s for 10 minutes (≈1.2 M
requests, naive shutdown, no preStop):

* vectorised: the model as shipped (numpy over all requests at once), one window;
* with the hop legs: the same window with 30 % of the requests through ingress-nginx, 20 %
  through a cloud load balancer in IP mode (its leg and deregistration delay) and a mesh
  sidecar on the pods (its drain) — the goal's figure (issue 31: under 2 s);
* per process: ``svcdoctor simulate`` with the hop legs as a command (interpreter start,
  imports, one window, JSON), wall time;
* event queue: the same pods and the same per-router programming times, replayed as a
  time-ordered stream of events (route changes and request arrivals) in Python, each
  request picking a backend from its router's current list: the classic discrete-event
  approach, for the ratio and as a cross-check of the race count;
* recommend: the preStop/grace search (three seeded rollouts, closed form, then two
  checking simulations of three windows each).
Goals (issue 5): simulate < 2 s, recommend < 10 s.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import replace

import numpy as np

from svcdoctor.simulate import SimParams, recommend, simulate_run
from svcdoctor.simulate.rollout import build_pods
from svcdoctor.simulate.routes import build_routes


def event_queue(p: SimParams, seed: int) -> tuple[int, int]:
    """Requests and race failures (new connections to a pod past its SIGTERM), one event
    at a time."""
    rng = np.random.default_rng(seed)
    pods = build_pods(p, rng)
    routes = build_routes(p, pods, rng)
    n = int(rng.poisson(p.rate * p.duration))
    ts = np.sort(rng.uniform(0.0, p.duration, n))
    router = rng.integers(0, p.client_count, n) % p.nodes
    # route changes: (time, kind 0 add / 1 remove, pod, router), in time order
    pod_idx, router_idx = np.meshgrid(np.arange(pods.count), np.arange(p.nodes), indexing="ij")
    add, remove = routes.add[:, : p.nodes], routes.remove[:, : p.nodes]
    finite = np.isfinite(remove)
    times = np.concatenate([add.ravel(), remove[finite]])
    kinds = np.concatenate([np.zeros(add.size, int), np.ones(int(finite.sum()), int)])
    which = np.concatenate([pod_idx.ravel(), pod_idx[finite]])
    where = np.concatenate([router_idx.ravel(), router_idx[finite]])
    order = np.argsort(times, kind="stable")
    changes = zip(
        times[order].tolist(),
        kinds[order].tolist(),
        which[order].tolist(),
        where[order].tolist(),
        strict=True,
    )
    views: list[list[int]] = [[] for _ in range(p.nodes)]
    term = pods.term.tolist()
    pick = random.Random(seed)
    failed = 0
    upcoming = next(changes, None)
    for t, r in zip(ts.tolist(), router.tolist(), strict=True):
        while upcoming is not None and upcoming[0] <= t:
            _, kind, pod, at = upcoming
            if kind == 0:
                views[at].append(pod)
            else:
                views[at].remove(pod)
            upcoming = next(changes, None)
        view = views[r]
        if view and t >= term[view[int(pick.random() * len(view))]]:
            failed += 1
    return n, failed


def timed(work):  # type: ignore[no-untyped-def]
    begin = time.perf_counter()
    out = work()
    return time.perf_counter() - begin, out


HOPS = {"ingress_share": 0.3, "lb_share": 0.2, "sidecar_drain": 5.0}


def per_process(p: SimParams) -> float:
    """Wall seconds of ``svcdoctor simulate`` with the hop legs, one window (bytecode cached
    in a temporary directory after a first run, as an installed package has it)."""
    args = [
        sys.executable,
        "-m",
        "svcdoctor",
        "simulate",
        *("--nodes", str(p.nodes), "--replicas", str(p.replicas), "--rate", f"{p.rate:g}"),
        *("--duration", f"{p.duration:g}", "--runs", "1", "-o", "json"),
        *("--ingress-share", "0.3", "--lb-share", "0.2", "--sidecar-drain", "5"),
    ]
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPYCACHEPREFIX": cache}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run(args, env=env, check=True, capture_output=True)
        begin = time.perf_counter()
        subprocess.run(args, env=env, check=True, capture_output=True)
        return time.perf_counter() - begin


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--replicas", type=int, default=100)
    parser.add_argument("--rate", type=float, default=2000.0)
    parser.add_argument("--duration", type=float, default=600.0)
    args = parser.parse_args()
    p = SimParams(
        nodes=args.nodes,
        replicas=args.replicas,
        rate=args.rate,
        duration=args.duration,
        max_surge=-(-args.replicas // 4),
        max_unavailable=args.replicas // 4,
    )
    print(
        f"simulate: {p.nodes:,} nodes, {p.replicas} pods rolled, {p.rate:g} req/s for "
        f"{p.duration:g} s (maxSurge {p.max_surge}, maxUnavailable {p.max_unavailable})"
    )
    simulate_run(p, 99)  # warm imports and caches once
    vec_s, run = timed(lambda: simulate_run(p, 1))
    requests = len(run.traffic.ts)
    stale = int((run.traffic.mechanism == 1).sum())
    ev_s, (ev_requests, ev_failed) = timed(lambda: event_queue(p, 1))
    print(f"  {'':<28}{'seconds':>9}{'requests':>11}{'race failures':>15}")
    print(f"  {'vectorised (shipped)':<28}{vec_s:>9.2f}{requests:>11,}{stale:>15,}")
    print(f"  {'event queue (Python)':<28}{ev_s:>9.2f}{ev_requests:>11,}{ev_failed:>15,}")
    print(
        f"  event queue / vectorised: {ev_s / vec_s:.1f}x the time; race failures agree "
        f"within {abs(ev_failed - stale) / max(stale, 1):.1%} (goal: vectorised < 2 s)"
    )
    hops = replace(p, **HOPS)  # type: ignore[arg-type]
    simulate_run(hops, 98)
    hop_s, hop_run = timed(lambda: simulate_run(hops, 1))
    hop_failed = int((hop_run.traffic.mechanism != 0).sum())
    print(
        f"  {'with the hop legs':<28}{hop_s:>9.2f}{len(hop_run.traffic.ts):>11,}"
        f"{hop_failed:>15,}  (ingress 30 %, LB 20 %, sidecar drain 5 s; goal < 2 s)"
    )
    print(f"  per process (svcdoctor simulate, hop legs, one window): {per_process(p):.2f} s")
    rec_s, rec = timed(lambda: recommend(p, 1e-4))
    print(
        f"  recommend: {rec_s:.2f} s (goal < 10 s) → preStop {rec.prestop_seconds} s, grace "
        f"{rec.grace_seconds} s, predicted {rec.predicted_failure_rate:.2g}, simulated "
        f"{rec.checked.failure_rate:.2g}, met {rec.met}"
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak memory of this process: {peak:,.0f} MB")


if __name__ == "__main__":
    main()
