"""The hops' legs (a load balancer in IP mode, the pod's mesh sidecar) and the events that
take pods away (rollout, drain, scale-down)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from svcdoctor.model.dist import Dist, DistKind
from svcdoctor.model.scenario import Event, ShutdownMode
from svcdoctor.simulate import (
    Mechanism,
    ParamError,
    SimParams,
    recommend,
    simulate,
    simulate_run,
)
from svcdoctor.simulate.rollout import EVICTION_RETRY, build_pods
from svcdoctor.simulate.routes import build_routes
from svcdoctor.simulate.summary import race_terms

BASE = SimParams(
    nodes=20,
    replicas=6,
    max_surge=2,
    max_unavailable=1,
    rate=200.0,
    duration=120.0,
    rollout_at=10.0,
    shutdown=ShutdownMode.GRACEFUL,
    prestop=5.0,  # covers kube-proxy's leg (controller + watch + a 1 s sync: p99 ≈ 2.6 s)
    latency=Dist(DistKind.EXP, 0.01),
)
LB = replace(
    BASE, lb_share=1.0, propagation=replace(BASE.propagation, lb=Dist(DistKind.UNIFORM, 8.0, 12.0))
)


def test_a_kube_proxy_sized_prestop_closes_the_race_without_a_load_balancer() -> None:
    assert simulate(BASE, runs=2).failed == 0


def test_a_kube_proxy_sized_prestop_still_fails_through_a_longer_lb_leg() -> None:
    s = simulate(LB, runs=2)
    assert s.mean_by_mechanism()[Mechanism.STALE_ENDPOINT] > 0


def test_recommend_plans_over_the_whole_path() -> None:
    """The preStop covers the slowest leg (the LB's 8-12 s), not kube-proxy's."""
    r = recommend(LB, 0.0001, runs=2, seed=3)
    assert r.prestop_seconds >= 12 > BASE.prestop
    assert r.met
    assert r.checked.failed == 0


def test_a_short_deregistration_delay_cuts_requests_in_flight() -> None:
    slow = replace(
        LB, prestop=15.0, grace=40.0, latency=Dist(DistKind.UNIFORM, 1.0, 3.0), timeout=10.0
    )
    assert simulate(slow, runs=2).failed == 0  # 300 s: every request finishes
    cut = simulate(replace(slow, lb_deregistration=0.5), runs=2)
    assert cut.mean_by_mechanism()[Mechanism.IN_FLIGHT] > 0


def test_recommend_raises_a_deregistration_delay_that_cuts_requests() -> None:
    slow = replace(LB, latency=Dist(DistKind.UNIFORM, 1.0, 3.0), timeout=10.0)
    r = recommend(replace(slow, lb_deregistration=2.0), 0.0001, runs=2, seed=3)
    assert r.lb_deregistration_seconds is not None
    assert r.lb_deregistration_seconds >= r.prestop_seconds + 3
    assert r.met
    assert r.checked.failed == 0
    assert recommend(slow, 0.0001, runs=1, seed=3).lb_deregistration_seconds is None


def test_a_sidecar_that_stops_before_the_prestop_ends_brings_the_race_back() -> None:
    long = replace(BASE, prestop=10.0)
    assert simulate(long, runs=2).failed == 0
    short = simulate(replace(long, sidecar_drain=0.5), runs=2)
    assert short.mean_by_mechanism()[Mechanism.STALE_ENDPOINT] > 0


def test_recommend_asks_the_sidecar_to_outlive_the_shutdown() -> None:
    r = recommend(replace(BASE, sidecar_drain=1.0), 0.0001, runs=2, seed=3)
    assert r.sidecar_drain_seconds is not None
    assert r.sidecar_drain_seconds >= r.prestop_seconds
    assert r.met
    assert r.checked.failed == 0
    assert recommend(BASE, 0.0001, runs=1, seed=3).sidecar_drain_seconds is None


def _pods(p: SimParams, seed: int = 1):  # type: ignore[no-untyped-def]
    return build_pods(p.validate(), np.random.default_rng(seed))


def test_a_drain_evicts_the_nodes_pods_at_once_without_a_budget() -> None:
    p = replace(BASE, nodes=3, replicas=9, event=Event.DRAIN)
    pods = _pods(p)
    on_node = np.flatnonzero(pods.old & (pods.node == 0))
    assert len(on_node) == 3
    assert set(pods.deleted[on_node]) == {p.rollout_at}
    assert not np.isfinite(pods.deleted[pods.old & (pods.node != 0)]).any()
    new = ~pods.old
    assert new.sum() == 3
    assert (pods.node[new] != 0).all()
    assert (pods.created[new] == p.rollout_at).all()


def test_a_drain_honours_the_pod_disruption_budget() -> None:
    p = replace(BASE, nodes=3, replicas=9, event=Event.DRAIN, pdb_max_unavailable=1)
    pods = _pods(p)
    at = np.sort(pods.deleted[np.isfinite(pods.deleted)])
    assert len(at) == 3
    assert at[0] == p.rollout_at
    # one at a time: the next eviction is retried every 5 s until a replacement is Ready
    gaps = np.diff(at)
    assert (gaps >= EVICTION_RETRY).all()
    assert np.allclose(gaps % EVICTION_RETRY, 0)
    ready = np.sort(pods.ready[~pods.old])
    assert (at[1:] >= ready[:-1]).all()


def test_a_drain_moves_the_nodes_clients_and_fails_without_a_prestop() -> None:
    p = replace(BASE, nodes=3, replicas=9, event=Event.DRAIN, prestop=0.0)
    s = simulate(p, runs=2)
    assert s.mean_by_mechanism()[Mechanism.STALE_ENDPOINT] > 0
    assert simulate(replace(p, prestop=5.0), runs=2).failed == 0
    pods = _pods(p)
    routes = build_routes(p, pods, np.random.default_rng(1))
    _, weight = race_terms(p, pods, routes)
    assert (weight[:, 0] == 0).all()  # nobody calls through the drained node any more
    t = simulate_run(p, 1).traffic
    after = t.ts >= p.rollout_at
    assert not (t.node[after] == 0).any()
    assert (t.node[~after] == 0).any()


def test_a_scale_down_removes_pods_without_replacing_them() -> None:
    p = replace(BASE, event=Event.SCALE_DOWN, scale_to=2)
    pods = _pods(p)
    assert pods.count == p.replicas
    assert int(np.isfinite(pods.deleted).sum()) == 4
    assert simulate(replace(p, prestop=0.0), runs=2).failed > 0
    assert simulate(p, runs=2).failed == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"event": Event.DRAIN, "pdb_max_unavailable": 0}, "pdb-max-unavailable"),
        ({"event": Event.SCALE_DOWN, "scale_to": 6}, "scale-to"),
        ({"sidecar_drain": -1.0}, "sidecar-drain"),
        ({"event": "evacuate"}, "event must be one of"),
        ({"event": Event.DRAIN, "nodes": 1}, "a drain needs at least 2 nodes"),
    ],
)
def test_impossible_events_are_refused(change: dict[str, object], message: str) -> None:
    with pytest.raises(ParamError, match=message):
        replace(BASE, **change).validate()  # type: ignore[arg-type]


def _lb_low(p: SimParams, seed: int) -> int:
    """The fewest pods the load balancer routes to during the rollout."""
    pods = _pods(p, seed)
    routes = build_routes(p, pods, np.random.default_rng(seed))
    changes = np.concatenate([routes.add[:, -1], routes.remove[:, -1]])
    t = np.sort(changes[np.isfinite(changes) & (changes > 0)])
    return int(routes.view_sizes(t)[:, -1].min())


def test_the_readiness_gate_keeps_the_lbs_targets() -> None:
    """Without the gate the Deployment deletes an old pod once the new container is Ready,
    before the LB registered the new pod: its list shrinks below the replicas. With the gate
    (maxUnavailable 0) it never does, and the rollout waits for the registrations."""
    p = replace(LB, max_surge=1, max_unavailable=0)
    assert min(_lb_low(p, seed) for seed in range(5)) < p.replicas
    gated = replace(p, lb_readiness_gate=True)
    assert min(_lb_low(gated, seed) for seed in range(5)) == p.replicas
    slower = _pods(gated).deleted
    assert np.nanmax(slower[np.isfinite(slower)]) > np.nanmax(
        _pods(p).deleted[np.isfinite(_pods(p).deleted)]
    )
