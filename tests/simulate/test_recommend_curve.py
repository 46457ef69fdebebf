"""The preStop curve of ``recommend``: the closed form the search uses, at whole preStop
seconds from 0 to past the recommendation; it agrees with simulated rollouts of the same
seeds, falls as the preStop grows, and carries the recommended point."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace

import pytest
from click.testing import CliRunner

from svcdoctor.cli import cli
from svcdoctor.simulate import SimParams, recommend, simulate
from svcdoctor.simulate.recommend import (
    CURVE_BEYOND,
    CURVE_POINTS,
    curve_prestops,
    fixable_per_rollout,
)

NEW = SimParams(nodes=50, rate=300)  # a new connection per request: the closed form is exact


@pytest.mark.parametrize("shutdown", ["naive", "graceful"])
def test_curve_points_equal_the_simulated_losses(shutdown: str) -> None:
    """Simulating each point's preStop and grace on the search's own rollouts (same
    seeds, so the same deletions and router delays) fails as many requests as the curve
    says, within Poisson noise."""
    p = replace(NEW, shutdown=shutdown)
    runs, seed = 4, 11
    r = recommend(p, 1e-4, runs=runs, seed=seed)
    checked = 0
    for c in r.curve[:4]:
        s = simulate(
            replace(p, prestop=float(c.prestop_seconds), grace=float(c.grace_seconds)),
            runs,
            seed,
        )
        simulated = fixable_per_rollout(s)
        # mean of `runs` Poisson counts: 4 standard errors, plus rounding of small counts
        assert simulated == pytest.approx(
            c.failed_per_rollout, abs=4 * math.sqrt(c.failed_per_rollout / runs) + 0.75
        ), c
        checked += c.failed_per_rollout >= 1
    assert checked >= 2  # the comparison saw real failures, not only zeros


def test_curve_falls_as_the_prestop_grows() -> None:
    r = recommend(NEW, 1e-4)
    values = [c.failed_per_rollout for c in r.curve]
    assert all(a >= b for a, b in itertools.pairwise(values))
    assert values[0] > 100 * max(values[-1], r.allowed_per_rollout)  # the race, unfixed
    assert values[-1] == pytest.approx(0.0, abs=1e-6)  # past every router: no race left


def test_the_recommended_point_is_on_the_curve() -> None:
    r = recommend(SimParams(), 1e-4)
    assert r.met
    point = r.recommended_point
    assert point is not None
    assert (point.prestop_seconds, point.grace_seconds) == (r.prestop_seconds, r.grace_seconds)
    # nothing outside preStop's reach here: the closed-form prediction is the point
    assert point.failed_per_rollout == pytest.approx(r.predicted_failure_rate * r.rollout_requests)
    assert point.failed_per_rollout <= r.allowed_per_rollout
    # the smallest: every shorter preStop on the curve misses the target
    shorter = [c for c in r.curve if c.prestop_seconds < r.prestop_seconds]
    assert shorter
    assert all(c.failed_per_rollout > r.allowed_per_rollout for c in shorter)


@pytest.mark.parametrize("shutdown", ["naive", "graceful"])
def test_grace_follows_the_prestop(shutdown: str) -> None:
    """Along the curve the grace period is the preStop plus the recommendation's seconds
    from SIGTERM to SIGKILL (the kubelet's 2 s for a naive exit)."""
    r = recommend(replace(NEW, shutdown=shutdown), 1e-4)
    slack = r.grace_seconds - r.prestop_seconds
    if shutdown == "naive":
        assert slack == 2
    assert all(c.grace_seconds == c.prestop_seconds + slack for c in r.curve)


def test_prestops_cover_zero_to_past_the_recommendation() -> None:
    for recommended in (0, 1, 4, 11, 30, 200, 3600):
        xs = curve_prestops(recommended)
        assert xs[0] == 0
        assert recommended in xs
        assert xs[-1] >= recommended + CURVE_BEYOND
        assert list(xs) == sorted(set(xs))
        assert CURVE_POINTS <= len(xs) <= 27


def test_a_naive_http2_curve_levels_off_above_the_target() -> None:
    """What preStop cannot fix stays: requests cut on held connections at a naive exit."""
    r = recommend(SimParams(connection="http2", nodes=50), 1e-4)
    assert not r.met
    tail = [c.failed_per_rollout for c in r.curve[-4:]]
    assert min(tail) > r.allowed_per_rollout
    assert max(tail) == pytest.approx(min(tail))


def test_recommend_json_carries_the_curve() -> None:
    model = ["--nodes", "50", "--rate", "300", "--runs", "2", "--seed", "7"]
    done = CliRunner().invoke(cli, ["simulate", "recommend", *model, "--format", "json"])
    assert done.exit_code in (0, 1), done.output
    got = json.loads(done.output)
    r = recommend(NEW, 1e-4, runs=2, seed=7)
    assert got["curve"] == [
        {
            "prestop_seconds": c.prestop_seconds,
            "grace_seconds": c.grace_seconds,
            "failed_per_rollout": round(c.failed_per_rollout, 4),
        }
        for c in r.curve
    ]
    assert got["prestop_seconds"] in [c["prestop_seconds"] for c in got["curve"]]
