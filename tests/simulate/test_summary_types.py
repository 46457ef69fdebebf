"""The simulation's results are typed records keyed by enums (mechanisms, causes, kinds of
router); only the renderers turn them into strings."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from svcdoctor.model import Cause, Outcome
from svcdoctor.simulate import (
    CAUSE_OF,
    MECHANISMS,
    Mechanism,
    Quantiles,
    Router,
    SimParams,
    simulate,
    simulate_run,
)
from svcdoctor.simulate.bundle import sim_evidence

P = SimParams(nodes=10, replicas=4, rate=60, duration=60, rollout_at=6, bad_backends=1)


def test_mechanisms_are_an_enum_in_code_order() -> None:
    assert tuple(Mechanism) == MECHANISMS
    assert MECHANISMS[0] is Mechanism.OK
    assert set(CAUSE_OF) == set(MECHANISMS[1:])


def test_quantiles_of_no_delay_are_zero() -> None:
    assert Quantiles.of(np.zeros(0)) == Quantiles(0.0, 0.0, 0.0)
    q = Quantiles.of(np.arange(101, dtype=float) / 7)
    assert (q.p50, q.max) == (round(50 / 7, 3), 100 / 7)


@pytest.mark.parametrize(
    ("shares", "kinds"),
    [
        ({}, {Router.KUBE_PROXY}),
        ({"ingress_share": 0.5}, {Router.KUBE_PROXY, Router.INGRESS}),
        ({"ingress_share": 0.6, "lb_share": 0.4}, {Router.INGRESS, Router.LOAD_BALANCER}),
    ],
)
def test_programming_is_per_kind_of_router_that_carries_traffic(
    shares: dict[str, float], kinds: set[Router]
) -> None:
    s = simulate(replace(P, **shares))
    run = s.runs[0]
    assert set(run.programming) == kinds
    assert all(q.p50 <= q.p99 <= q.max + 1e-3 for q in run.programming.values())
    assert run.window.max <= max(q.max for q in run.programming.values())


def test_counts_are_keyed_by_enums_and_add_up() -> None:
    s = simulate(P, runs=2)
    run = s.runs[0]
    assert list(run.by_mechanism) == list(MECHANISMS[1:])
    assert list(run.by_cause) == list(Cause)
    assert sum(run.by_mechanism.values()) == sum(run.by_cause.values()) == run.failed
    assert run.by_cause[Cause.BACKEND] == run.by_mechanism[Mechanism.BAD_BACKEND] > 0
    assert sum(s.mean_by_cause().values()) == pytest.approx(s.failed)
    assert set(s.timeline.failed) == set(Cause)
    assert sum(s.timeline.failed[Cause.BACKEND]) == run.by_cause[Cause.BACKEND]


def test_simulated_ground_truth_is_typed() -> None:
    run = simulate_run(P, 1)
    truth = sim_evidence(run).truth
    assert sum(truth.by_mechanism.values()) == len(run.traffic.ts)
    assert truth.outcome_of_mechanism[Mechanism.BAD_BACKEND] is Outcome.HTTP_ERROR
    assert len(truth.bad_pods) == 1
    assert set(truth.bad_pods) <= set(truth.deleted_pods)
