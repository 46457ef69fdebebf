"""``recommend``: the smallest preStop and grace period that meet a failure target."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from svcdoctor.report.simulation import snippet
from svcdoctor.simulate import (
    Dist,
    ParamError,
    Propagation,
    SimParams,
    recommend,
    simulate,
)


def test_default_cluster_gets_a_prestop_that_meets_the_target() -> None:
    p = SimParams()
    r = recommend(p, 1e-4)
    assert r.met
    assert r.current.rollout_failure_rate is not None
    assert r.current.rollout_failure_rate > 1e-2  # the race, today
    assert r.prestop_seconds >= 1
    assert r.grace_seconds >= r.prestop_seconds + 2  # the kubelet's 2 s at least
    assert r.predicted_failure_rate <= 1e-4
    assert r.checked.params.prestop == r.prestop_seconds
    assert {x.seed for x in r.checked.runs}.isdisjoint({x.seed for x in r.current.runs})
    # minimal: one second less of preStop misses the target
    shorter = simulate(replace(p, prestop=r.prestop_seconds - 1.0, grace=30.0), runs=6)
    assert shorter.rollout_failure_rate is not None
    assert shorter.rollout_failure_rate > 1e-4


def test_the_target_is_per_rollout_not_per_window() -> None:
    """The same rollout in a 60 s and a 3,000 s window needs the same settings."""
    short, long = (recommend(SimParams(duration=d, rollout_at=20.0), 1e-3) for d in (60, 3000))
    assert (short.prestop_seconds, short.grace_seconds) == (
        long.prestop_seconds,
        long.grace_seconds,
    )
    assert short.rollout_requests == pytest.approx(long.rollout_requests)


def test_a_naive_http2_server_cannot_meet_a_target() -> None:
    """HTTP/2 clients keep sending on their connection until the pod exits: a naive exit
    cuts what is in flight whatever the preStop. The simulated check sees it, and the
    answer says what to change; a graceful server meets the target."""
    naive = recommend(SimParams(connection="http2", nodes=50), 1e-4)
    assert not naive.met
    assert naive.checked.mean_by_mechanism()["in_flight"] > 0
    assert any("graceful shutdown" in reason for reason in naive.reasons)
    graceful = recommend(SimParams(connection="http2", nodes=50, shutdown="graceful"), 1e-4)
    assert graceful.met
    assert graceful.checked.rollout_failure_rate == 0


def test_recommend_needs_a_rollout() -> None:
    with pytest.raises(ParamError, match="needs a rollout"):
        recommend(SimParams(rollout=False), 1e-4)


def test_prestop_covers_a_long_propagation() -> None:
    prop = Propagation(override=Dist("uniform", 4.0, 9.0), min_sync=0.0, services=1, endpoints=1)
    p = SimParams(nodes=100, shutdown="graceful", propagation=prop)
    r = recommend(p, 0.0)
    assert r.met
    assert 9 <= r.prestop_seconds <= 10
    assert r.checked.failed == 0


def test_grace_period_covers_the_latency_tail() -> None:
    # median 0.5 s, p99 10 s: SIGKILL at preStop + 1 s would cut many requests
    p = SimParams(
        shutdown="graceful", latency=Dist("lognormal", 0.5, 10.0), timeout=120.0, rate=200
    )
    r = recommend(p, 1e-4)
    slack = r.grace_seconds - r.prestop_seconds
    assert slack >= 10
    assert r.checked.mean_by_mechanism()["sigkill"] <= 1e-4 * p.rate * p.duration * 2


def test_what_preStop_cannot_fix_is_reported() -> None:
    bad = recommend(SimParams(bad_backends=1, rollout=True), 1e-4)
    assert not bad.met
    assert any(reason.startswith("bad_backend") for reason in bad.reasons)
    held = recommend(SimParams(connection="keepalive", clients=400, nodes=50), 1e-4)
    assert not held.met
    assert any("stale_connection" in reason for reason in held.reasons)
    assert not any("≈0 " in reason for reason in held.reasons)


def test_snippet_uses_the_native_sleep_from_1_30() -> None:
    native = yaml.safe_load(snippet(5, 40, (1, 30)))
    spec = native["spec"]["template"]["spec"]
    assert spec["terminationGracePeriodSeconds"] == 40
    assert spec["containers"][0]["lifecycle"]["preStop"] == {"sleep": {"seconds": 5}}
    old = yaml.safe_load(snippet(5, 40, (1, 29)))
    hook = old["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"]
    assert hook == {"exec": {"command": ["sh", "-c", "sleep 5"]}}  # as lint writes it
    assert (
        "lifecycle"
        not in yaml.safe_load(snippet(0, 30))["spec"]["template"]["spec"]["containers"][0]
    )


@pytest.mark.parametrize("nodes", [5000])
def test_recommend_at_5000_nodes(nodes: int) -> None:
    p = SimParams(nodes=nodes, replicas=100, rate=2000, duration=600, shutdown="graceful")
    r = recommend(p, 1e-4, runs=1)
    assert r.met
    assert r.prestop_seconds >= 1
