"""The model against what can be computed by hand (the validation the issue asks for), and
against its own closed form for the race."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from svcdoctor.simulate import Dist, Propagation, SimParams, simulate, simulate_run
from svcdoctor.simulate.engine import MECHANISMS


def three_sigma(p: float, n: float) -> float:
    return 3 * math.sqrt(p * (1 - p) / n)


def test_one_bad_backend_of_eight_fails_an_eighth() -> None:
    p = SimParams(nodes=50, replicas=8, bad_backends=1, rollout=False, rate=1000, duration=60)
    s = simulate(p, runs=3)
    assert s.failure_rate == pytest.approx(1 / 8, abs=three_sigma(1 / 8, 3 * s.requests))
    assert s.mean_by_cause()["backend"] == s.failed
    # and the failures are all on the bad pod (the last of the old ReplicaSet)
    run = simulate_run(p, 1)
    failed = run.traffic.backend[run.traffic.mechanism != 0]
    assert set(failed.tolist()) == {7}
    assert run.pods.bad.tolist() == [False] * 7 + [True]


@pytest.mark.parametrize("fault", ["reset", "hang"])
def test_each_fault_fails_the_same_share(fault: str) -> None:
    p = SimParams(nodes=20, replicas=4, bad_backends=1, fault=fault, rollout=False, rate=400)
    s = simulate(p, runs=1)
    assert s.failure_rate == pytest.approx(1 / 4, abs=three_sigma(1 / 4, s.requests))


def test_prestop_longer_than_propagation_with_graceful_shutdown_drops_nothing() -> None:
    # bounded delays: every proxy stops routing within 1.5 s (+ the ruleset's apply time)
    prop = Propagation(override=Dist("uniform", 0.2, 1.5), min_sync=0.0)
    p = SimParams(
        nodes=500,
        replicas=20,
        rate=2000,
        prestop=3.0,
        grace=30.0,
        shutdown="graceful",
        propagation=prop,
    )
    assert prop.override is not None
    assert p.prestop > prop.override.high + prop.apply
    s = simulate(p, runs=3)
    assert s.requests > 500_000
    assert s.failed == 0
    assert all(r.deletions == 20 for r in s.runs)
    # the same rollout without the preStop loses requests
    assert simulate(replace(p, prestop=0.0), runs=1).failed > 100


def test_keepalive_clients_of_a_bad_backend_are_an_nth() -> None:
    n = 8
    p = SimParams(
        nodes=100,
        replicas=n,
        bad_backends=1,
        rollout=False,
        connection="keepalive",
        clients=2000,
        rate=2000,
        duration=60,
    )
    run = simulate_run(p, 4)
    t = run.traffic
    per_client = np.bincount(t.client, weights=t.mechanism != 0, minlength=p.clients)
    affected = float((per_client > 0).mean())
    assert affected == pytest.approx(1 / n, abs=three_sigma(1 / n, p.clients))
    # pinned: an affected client fails every request; the others none
    requests = np.bincount(t.client, minlength=p.clients)
    hit = per_client > 0
    assert np.all(per_client[hit] == requests[hit])


def test_the_race_matches_its_closed_form() -> None:
    p = SimParams(nodes=300, replicas=12, rate=3000, duration=120)
    s = simulate(p, runs=4)
    stale = s.mean_by_mechanism()["stale_endpoint"]
    expected = float(np.mean([r.expected_race for r in s.runs]))
    assert expected > 200
    # Poisson noise of the mean over four runs, plus a little for the view-size estimate
    assert stale == pytest.approx(expected, abs=4 * math.sqrt(expected / 4) + 0.03 * expected)


def test_no_rollout_no_faults_no_failures() -> None:
    s = simulate(SimParams(rollout=False), runs=2)
    assert s.failed == 0
    assert s.requests == pytest.approx(500 * 300, rel=0.02)


def test_keepalive_naive_shutdown_breaks_held_connections() -> None:
    base = SimParams(nodes=50, clients=400, connection="keepalive", prestop=5.0, rate=400)
    naive = simulate(base, runs=2)
    stale = naive.mean_by_mechanism()["stale_connection"]
    assert stale > 50
    assert naive.mean_by_cause()["reuse"] == stale
    graceful = simulate(replace(base, shutdown="graceful"), runs=2)
    assert graceful.mean_by_mechanism()["stale_connection"] == 0
    h2 = simulate(replace(base, connection="http2"), runs=2)
    assert h2.mean_by_mechanism()["stale_connection"] == 0


def test_max_connection_age_lets_new_pods_get_traffic() -> None:
    base = SimParams(
        nodes=20,
        clients=200,
        connection="keepalive",
        rate=400,
        duration=120,
        shutdown="graceful",
        prestop=3.0,
    )
    pinned = simulate_run(base, 1)
    aged = simulate_run(replace(base, max_connection_age=5.0), 1)
    for run in (pinned, aged):
        assert int((run.traffic.mechanism != 0).sum()) == 0
    conns = len(np.unique(aged.traffic.conn)), len(np.unique(pinned.traffic.conn))
    assert conns[0] > 5 * conns[1]


def test_sigkill_cuts_the_latency_tail() -> None:
    p = SimParams(
        nodes=20,
        rate=400,
        shutdown="graceful",
        prestop=2.0,
        grace=3.0,
        latency=Dist("lognormal", 0.2, 4.0),
        timeout=30.0,
    )
    s = simulate(p, runs=2)
    assert s.mean_by_mechanism()["sigkill"] > 0
    assert all(r.sigkilled > 0 for r in s.runs)
    roomy = simulate(replace(p, grace=60.0), runs=2)
    assert roomy.mean_by_mechanism()["sigkill"] == 0


def test_retries_hide_most_race_failures() -> None:
    p = SimParams(nodes=100, rate=1000, duration=120)
    plain = simulate(p, runs=2).failed
    retried = simulate(replace(p, retries=2), runs=2)
    assert retried.failed < 0.2 * plain
    assert all(r.attempts > r.requests for r in retried.runs)


def test_full_conntrack_tables_drop_new_connections() -> None:
    # 1,500 other new connections/s x 120 s TIME_WAIT = 180k entries against 131,072
    p = SimParams(nodes=20, rate=200, rollout=False, node_conn_rate=1500.0)
    s = simulate(p, runs=1)
    drop = 1 - 131072 / ((200 / 20 + 1500) * 120)
    assert s.failure_rate == pytest.approx(drop, abs=three_sigma(drop, s.requests))
    assert s.mean_by_cause()["infra"] == s.failed


def test_no_endpoints_when_the_rollout_empties_the_service() -> None:
    p = SimParams(nodes=10, replicas=2, max_surge=0, max_unavailable=2, rate=200)
    s = simulate(p, runs=1)
    assert s.mean_by_mechanism()["no_endpoints"] > 0


def test_ingress_and_lb_have_their_own_delays() -> None:
    p = SimParams(nodes=50, rate=1000, ingress_share=0.5, lb_share=0.2, prestop=4.0)
    run = simulate_run(p, 2)
    lb = p.routers - 1
    failed_by = np.bincount(run.traffic.router[run.traffic.mechanism != 0], minlength=p.routers)
    # a 4 s preStop covers the nodes, not a 5-20 s load-balancer deregistration
    assert failed_by[:50].sum() == 0
    assert failed_by[lb] > 0


def test_runs_are_reproducible_by_seed() -> None:
    a, b = simulate(SimParams(), runs=2, seed=7), simulate(SimParams(), runs=2, seed=7)
    assert [r.failed for r in a.runs] == [r.failed for r in b.runs]
    assert a.timeline == b.timeline
    assert [r.failed for r in simulate(SimParams(), runs=2, seed=8).runs] != [
        r.failed for r in a.runs
    ]
    assert MECHANISMS[0] == "ok"


def test_conntrack_load_is_that_of_the_nodes_with_clients() -> None:
    """10 clients on 1,000 nodes: the 10 nodes that hold them carry all their connections."""
    p = SimParams(nodes=1000, clients=10, rate=20_000, duration=5, rollout=False)
    s = simulate(p, runs=1)
    drop = 1 - 131072 / (20_000 / 10 * 120)
    assert s.failure_rate == pytest.approx(drop, abs=three_sigma(drop, s.requests))


def test_a_connection_retired_by_age_is_not_broken_by_its_pod() -> None:
    """With a maximum age shorter than the gap between requests every request opens a new
    connection: a pod's exit breaks none."""
    p = SimParams(
        nodes=20, clients=200, connection="keepalive", max_connection_age=0.001, prestop=5.0
    )
    assert simulate(p, runs=2).mean_by_mechanism()["stale_connection"] == 0


def test_a_hung_http2_backend_keeps_its_clients() -> None:
    """A hung HTTP/2 stream does not end the connection: those clients stay on the pod and
    fail every request (an HTTP/1.1 client drops the connection at its timeout)."""
    base = SimParams(
        nodes=50, replicas=8, bad_backends=1, fault="hang", rollout=False, clients=400, rate=400
    )
    h2 = simulate_run(replace(base, connection="http2"), 1)
    h1 = simulate_run(replace(base, connection="keepalive"), 1)
    for run, pinned in ((h2, True), (h1, False)):
        t = run.traffic
        failed = np.bincount(t.client, weights=t.mechanism != 0, minlength=400)
        sent = np.bincount(t.client, minlength=400)
        hit = failed > 0
        assert np.all(failed[hit] == sent[hit]) == pinned


def test_changes_apply_in_order_at_every_router() -> None:
    """A watch delivers changes in order: no router drops a deleted pod before it has added
    the new pod created (and Ready) earlier."""
    p = SimParams(nodes=200, replicas=10, max_surge=1, max_unavailable=0)
    run = simulate_run(p, 3)
    pods, routes = run.pods, run.routes
    changes = sorted(
        [(float(pods.ready[j]), routes.add[j]) for j in np.flatnonzero(~pods.old)]
        + [(float(pods.deleted[j]), routes.remove[j]) for j in np.flatnonzero(pods.old)],
        key=lambda c: c[0],
    )
    applied = np.array([at for _, at in changes])
    assert np.all(np.diff(applied, axis=0) >= 0)


def test_the_ruleset_apply_time_delays_every_node() -> None:
    small = Propagation(override=None, services=1, endpoints=1, min_sync=0.0)
    big = replace(small, services=20_000, endpoints=200_000)
    delays = []
    for prop in (small, big):
        run = simulate_run(SimParams(nodes=100, propagation=prop), 1)
        gone = np.flatnonzero(np.isfinite(run.pods.deleted))
        delays.append(float((run.routes.remove[gone] - run.pods.deleted[gone, None]).min()))
    # the apply time, plus the wait for a sync slot as long as a sync (back to back)
    assert delays[1] - delays[0] >= big.apply - small.apply - 0.05


def test_ingress_nginx_waits_for_its_resync() -> None:
    p = SimParams(nodes=10, ingress_share=1.0, ingress_replicas=2)
    p = replace(p, propagation=replace(p.propagation, ingress_sync=10.0))
    run = simulate_run(p, 1)
    gone = np.flatnonzero(np.isfinite(run.pods.deleted))
    delay = run.routes.remove[gone][:, 10:] - run.pods.deleted[gone, None]
    assert delay.max() > 5.0  # a 10 s resync: most removals wait seconds
    assert delay.max() <= 10.0 + p.propagation.controller.high + p.propagation.watch.high


def test_a_graceful_pod_exits_after_its_last_request() -> None:
    p = SimParams(nodes=20, shutdown="graceful", latency=Dist("const", 0.8), prestop=0.0)
    run = simulate_run(p, 2)
    t, gone = run.traffic, np.isfinite(run.pods.deleted)
    served = (t.mechanism == 0) & (t.backend >= 0)
    last = np.full(run.pods.count, -np.inf)
    np.maximum.at(last, t.backend[served], (t.ts + t.latency)[served])
    assert np.all(run.exits[gone] >= last[gone] - 1e-9)
    assert np.all(run.exits[gone] >= run.pods.term[gone])


def test_a_stale_endpoint_is_refused_then_times_out() -> None:
    """While the pod's address answers, a connection to it is refused at once; after the
    pod is gone its SYNs go unanswered until the client's timeout."""
    prop = Propagation(override=Dist("const", 8.0), min_sync=0.0, services=1, endpoints=1)
    run = simulate_run(SimParams(nodes=20, propagation=prop, timeout=3.0), 1)
    t = run.traffic
    stale = t.mechanism == MECHANISMS.index("stale_endpoint")
    assert set(np.round(t.latency[stale], 3).tolist()) == {0.001, 3.0}


def test_retries_wait_a_doubling_backoff() -> None:
    p = SimParams(nodes=50, rate=1000, duration=120, retries=2, latency=Dist("const", 0.01))
    run = simulate_run(p, 1)
    t = run.traffic
    retried = t.attempts > 1
    # a first attempt refused at once, then 25 ms of backoff before the second
    assert t.latency[retried].min() >= 0.001 + 0.025
