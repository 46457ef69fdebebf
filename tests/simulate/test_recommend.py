"""``recommend``: the smallest preStop and grace period that meet a failure target."""

from __future__ import annotations

from dataclasses import replace

import pytest
import yaml

from svcdoctor.simulate import Dist, Propagation, SimParams, recommend, simulate, snippet


def test_default_cluster_gets_a_prestop_that_meets_the_target() -> None:
    p = SimParams()
    r = recommend(p, 1e-4)
    assert r.met
    assert r.current.failure_rate > 1e-3  # the race, today
    assert r.prestop_seconds >= 1
    assert r.grace_seconds > r.prestop_seconds
    assert r.predicted_failure_rate <= 1e-4
    assert r.checked.failure_rate <= 2e-4  # the simulated check agrees (sampling noise)
    assert r.checked.params.prestop == r.prestop_seconds
    # minimal: one second less of preStop misses the target
    shorter = simulate(replace(p, prestop=r.prestop_seconds - 1.0, grace=30.0), runs=3)
    assert shorter.failure_rate > 1e-4


def test_prestop_covers_a_long_propagation() -> None:
    prop = Propagation(override=Dist("uniform", 4.0, 9.0), min_sync=0.0, services=1, endpoints=1)
    p = SimParams(nodes=100, shutdown="graceful", propagation=prop)
    r = recommend(p, 0.0)
    assert r.met
    assert 9 <= r.prestop_seconds <= 10
    assert r.checked.failed == 0


def test_grace_period_covers_the_latency_tail() -> None:
    # median 0.5 s, p99 10 s: SIGKILL at preStop + 1 s would cut many requests
    p = SimParams(shutdown="graceful", latency=Dist("lognormal", 0.5, 10.0), rate=200)
    r = recommend(p, 1e-4)
    slack = r.grace_seconds - r.prestop_seconds
    assert slack >= 10
    assert r.checked.mean_by("by_mechanism")["sigkill"] <= 1e-4 * p.rate * p.duration * 2


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
    assert hook == {"exec": {"command": ["sleep", "5"]}}
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
