"""The simulation's parts: distributions, parameters, the Deployment controller's rolling
update, the kubelet's timeline and the routers' programming."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdoctor.model import shutdown_timeline
from svcdoctor.model.scenario import Propagation
from svcdoctor.simulate import (
    Dist,
    DistError,
    ParamError,
    SimParams,
    parse_dist,
    resolve_count,
    simulate,
)
from svcdoctor.simulate.rollout import build_pods, rolling_update
from svcdoctor.simulate.routes import build_routes


@pytest.mark.parametrize(
    ("text", "dist"),
    [
        ("0.5", Dist("const", 0.5)),
        ("const:2", Dist("const", 2.0)),
        ("uniform:1,3", Dist("uniform", 1.0, 3.0)),
        ("exp:0.2", Dist("exp", 0.2)),
        ("exp:0", Dist("const", 0.0)),
        (" LogNormal:0.05,0.5 ", Dist("lognormal", 0.05, 0.5)),
    ],
)
def test_distribution_specs(text: str, dist: Dist) -> None:
    assert parse_dist(text) == dist
    assert parse_dist(str(dist)) == dist


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gamma:1,2", "unknown distribution 'gamma'"),
        ("uniform:a,b", "must be numbers"),
        ("uniform:1", "uniform takes 2 numbers"),
        ("exp:1,2", "exp takes 1 number"),
        ("uniform:3,1", "LOW ≤ HIGH"),
        ("lognormal:2,1", "0 < MEDIAN < P99"),
        ("-1", "finite and ≥ 0"),
        ("nan", "finite and ≥ 0"),
    ],
)
def test_bad_distribution_specs_say_why_in_one_line(text: str, message: str) -> None:
    with pytest.raises(DistError, match=message) as err:
        parse_dist(text)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("spec", ["uniform:1,3", "exp:0.5", "lognormal:0.05,0.5"])
def test_quantiles_and_means_match_the_samples(spec: str) -> None:
    d = parse_dist(spec)
    x = d.sample(np.random.default_rng(3), 400_000)
    for q in (0.5, 0.9, 0.99):
        assert np.quantile(x, q) == pytest.approx(d.quantile(q), rel=0.02)
    assert x.mean() == pytest.approx(d.mean, rel=0.02)


def test_lognormal_is_given_by_its_median_and_p99() -> None:
    d = parse_dist("lognormal:0.1,1")
    assert d.quantile(0.5) == pytest.approx(0.1)
    assert d.quantile(0.99) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("value", "replicas", "up", "count"),
    [("25%", 10, True, 3), ("25%", 10, False, 2), ("25%", 4, True, 1), ("0", 9, True, 0)],
)
def test_surge_rounds_up_and_unavailable_down(
    value: str, replicas: int, up: bool, count: int
) -> None:
    assert resolve_count(value, replicas, up, "max-surge") == count


def test_bad_counts_name_the_option() -> None:
    with pytest.raises(ParamError, match="max-surge: 'x' is neither"):
        resolve_count("x", 4, True, "max-surge")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"nodes": 0}, "nodes must be at least 1"),
        ({"max_surge": 0, "max_unavailable": 0}, "cannot both be 0"),
        ({"bad_backends": 11}, "exceeds replicas"),
        ({"rate": 100_000.0, "duration": 600.0}, "at most 20,000,000"),
        ({"nodes": 20_000, "replicas": 1000}, "pods x routers is 40,000,000"),
        ({"ingress_share": 0.7, "lb_share": 0.5}, "must not exceed 1"),
        ({"grace": math.inf}, "grace must be a finite number"),
        ({"connection": "keepalive", "clients": 2}, "add clients"),
        ({"shutdown": "polite"}, "shutdown must be one of"),
    ],
)
def test_impossible_parameters_are_refused(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ParamError, match=message):
        SimParams(**changes).validate()  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(
    replicas=st.integers(1, 40),
    surge=st.integers(0, 12),
    unavailable=st.integers(0, 12),
    seed=st.integers(0, 2**16),
)
def test_rolling_update_honours_surge_and_unavailable(
    replicas: int, surge: int, unavailable: int, seed: int
) -> None:
    if surge == 0 and unavailable == 0:
        surge = 1
    startup = np.random.default_rng(seed).uniform(1, 9, replicas)
    created, ready, deleted = rolling_update(replicas, surge, unavailable, 10.0, startup)
    assert len(created) == len(deleted) == replicas
    assert np.all(ready >= created)
    # check the invariants just after every moment something happened
    for t in np.unique(np.concatenate([created, ready, deleted])):
        old = replicas - int((deleted <= t).sum())
        new = int((created <= t).sum())
        available = old + int((ready <= t).sum())
        assert old + new <= replicas + surge
        # available pods never fall below replicas - maxUnavailable (or what the start had)
        assert available >= min(replicas - unavailable, replicas)


def test_kubelet_timeline() -> None:
    rng = np.random.default_rng(1)
    pods = build_pods(SimParams(prestop=5.0, grace=30.0), rng)
    gone = np.isfinite(pods.deleted)
    assert gone.sum() == 10
    assert np.allclose(pods.term[gone] - pods.deleted[gone], 5.0)
    assert np.allclose(pods.kill[gone] - pods.deleted[gone], 30.0)
    # a preStop that outlives the grace period: SIGTERM at the grace period, SIGKILL 2 s on
    late = build_pods(SimParams(prestop=40.0, grace=30.0), rng)
    assert np.allclose(late.term[gone] - late.deleted[gone], 30.0)
    assert np.allclose(late.kill[gone] - late.deleted[gone], 32.0)


@pytest.mark.parametrize(
    ("prestop", "grace", "sigterm", "sigkill"),
    [
        (0.0, 30.0, 0.0, 30.0),
        (5.0, 30.0, 5.0, 30.0),
        (29.5, 30.0, 29.5, 31.5),  # 30 - 29 whole seconds = 1 s left, raised to 2
        (2.0, 3.0, 2.0, 4.0),
        (40.0, 30.0, 30.0, 32.0),
        (0.0, 1.0, 0.0, 2.0),  # never less than 2 s after SIGTERM
        (0.0, 0.0, 0.0, 2.0),
    ],
)
def test_the_kubelet_leaves_at_least_2_s_after_sigterm(
    prestop: float, grace: float, sigterm: float, sigkill: float
) -> None:
    """kuberuntime_container.go killContainer: the grace period minus the whole seconds the
    preStop hook took, never under minimumGracePeriodInSeconds (2)."""
    assert shutdown_timeline(prestop, grace) == (sigterm, sigkill)


def test_sigkill_losses_do_not_jump_with_the_prestop() -> None:
    """Just under and at the grace period the kubelet's 2 s window is the same."""
    base = SimParams(
        nodes=20, connection="http2", shutdown="graceful", latency=Dist("const", 1.0), grace=30
    )
    under, at = (simulate(replace(base, prestop=x), runs=1, seed=3) for x in (29.5, 30.0))
    assert under.mean_by_mechanism()["sigkill"] == at.mean_by_mechanism()["sigkill"] == 0


def test_proxies_stop_routing_after_the_programming_delay() -> None:
    prop = Propagation(override=Dist("uniform", 1.0, 2.0), min_sync=0.0, services=1, endpoints=1)
    p = SimParams(nodes=300, propagation=prop)
    rng = np.random.default_rng(2)
    pods = build_pods(p, rng)
    routes = build_routes(p, pods, rng)
    gone = np.flatnonzero(np.isfinite(pods.deleted))
    delay = routes.remove[gone] - pods.deleted[gone, None]
    assert delay.min() >= 1.0
    assert delay.max() <= 2.0 + prop.apply + 1e-9
    # new pods are routed only after they are Ready
    new = ~pods.old
    assert np.all(routes.add[new] >= pods.ready[new, None])


def test_min_sync_period_batches_changes() -> None:
    base = Propagation(override=Dist("const", 0.1), services=1, endpoints=1)
    for period in (1.0, 10.0):
        p = SimParams(nodes=500, propagation=replace(base, min_sync=period))
        rng = np.random.default_rng(5)
        pods = build_pods(p, rng)
        routes = build_routes(p, pods, rng)
        gone = np.flatnonzero(np.isfinite(pods.deleted))
        delay = routes.remove[gone] - pods.deleted[gone, None]
        assert delay.max() <= 0.1 + period + base.apply + 1e-9
        # each node waits for its next sync slot: on average about half a period
        assert delay.mean() == pytest.approx(0.1 + period / 2, rel=0.15)


def test_apply_time_grows_with_the_ruleset() -> None:
    small, big = (
        Propagation(services=10, endpoints=100),
        Propagation(services=10_000, endpoints=100_000),
    )
    assert small.apply < 0.02
    # kubernetes#96018: ~696k lines took 12.8 s
    assert 5.0 < big.apply < 7.0
    assert big.sync_period == big.apply


def test_every_delay_default_states_its_source() -> None:
    """Each delay of the model has an attribute docstring saying where its default comes
    from (a public figure, or that it is an assumption)."""
    import ast
    import inspect
    import itertools

    from svcdoctor.model import scenario
    from svcdoctor.simulate import params

    trees = [ast.parse(inspect.getsource(m)) for m in (params, scenario)]
    documented: dict[str, str] = {}
    for cls in (n for tree in trees for n in tree.body if isinstance(n, ast.ClassDef)):
        body = cls.body
        for field_node, after in itertools.pairwise(body):
            if (
                isinstance(field_node, ast.AnnAssign)
                and isinstance(field_node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
            ):
                documented[field_node.target.id] = str(after.value.value)
    delays = ["controller", "watch", "min_sync", "ingress_sync", "lb", "startup", "latency"]
    for name in [*delays, "conntrack_max", "conntrack_timewait"]:
        text = documented.get(name, "")
        assert text, f"{name} has no docstring"
        cited = any(w in text for w in ("SLO", "reference", "default", "sig-", "assumption"))
        assert cited, f"{name}: the docstring names no source: {text!r}"


@pytest.mark.parametrize(
    "dist",
    [Dist("lognormal", 0.1, 0.1000001), Dist("const", 1 / 3), Dist("uniform", 0.5, 1.5)],
)
def test_a_spec_round_trips_exactly(dist: Dist) -> None:
    """The lab hands distributions to its pod processes as text."""
    assert parse_dist(str(dist)) == dist
