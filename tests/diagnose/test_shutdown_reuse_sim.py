"""The reuse-at-shutdown pattern (issue 29) on the simulator's evidence, as a user collects
it after the rollout: the request log, ``kubectl get events`` and the EndpointSlice watch,
but no exit times (the deleted pods are gone from ``kubectl get pods``, and a ``Killing``
event is the start of a pod's shutdown, a 20 s preStop before its exit). Each pod's exit is
then the moment it stopped serving, and failures on kept-alive connections at those
moments are reuse even at about 0.04 % of the traffic; the same rollout with clients that
move their connections in time, and traffic without a rollout, with background failures at
the healthy floor, still have no cause."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from svcdoctor.diagnose import diagnose
from svcdoctor.evidence import read_evidence
from svcdoctor.evidence.write import write_bundle
from svcdoctor.model import Cause, Diagnosis, Verdict
from svcdoctor.model.diagnosis import ReuseDetails
from svcdoctor.model.scenario import ConnectionMode, ShutdownMode
from svcdoctor.simulate import SimParams, simulate_run
from svcdoctor.simulate.bundle import NAMESPACE, SERVICE, sim_evidence

# keep-alive clients, a preStop long enough that routing has stopped before SIGTERM
# (propagation p99 under 3 s), a naive app that exits at SIGTERM under held connections
SHAPE = {
    "nodes": 20,
    "clients": 40,
    "rate": 200.0,
    "duration": 600.0,
    "prestop": 20.0,
    "grace": 45.0,
    "connection": ConnectionMode.KEEPALIVE,
}


def run(
    tmp_path: Path,
    *,
    shutdown: ShutdownMode = ShutdownMode.NAIVE,
    rollout: bool = True,
    noise: float = 0.0,
    with_pods: bool = False,
    seed: int = 3,
) -> tuple[Diagnosis, int]:
    """The diagnosis of one simulated window, and how many requests the simulator failed.
    ``noise``: the share of requests that fail anyway (a healthy Service's background,
    resets at random). Failed requests name no pod, as a client logs them."""
    sim = sim_evidence(simulate_run(SimParams(shutdown=shutdown, rollout=rollout, **SHAPE), seed))
    frame = sim.requests
    failed = int((frame.get_column("outcome") != "ok").sum())
    rng = np.random.default_rng(seed)
    background = pl.Series(rng.random(frame.height) < noise) & (frame.get_column("outcome") == "ok")
    frame = frame.with_columns(
        pl.when(background).then(pl.lit("reset")).otherwise("outcome").alias("outcome"),
        pl.when(background).then(None).otherwise("status").alias("status"),
    ).with_columns(
        pl.when(pl.col("outcome") == "ok").then("backend").otherwise(None).alias("backend")
    )
    folder = tmp_path / "bundle"
    pods = sim.pods if with_pods else ()
    write_bundle(folder, frame, sim.events, pods, sim.endpoints, NAMESPACE, SERVICE)
    if not with_pods:
        (folder / "pods.json").unlink()
    return diagnose(read_evidence([str(folder)])), failed


def test_failures_when_pods_stop_serving_are_reuse_without_exit_times(tmp_path: Path) -> None:
    d, failed = run(tmp_path)
    assert failed > 20
    assert d.summary.error_rate is not None
    assert d.summary.error_rate < d.summary.floor_rate  # below the healthy floor
    assert d.primary is not None, d.next_steps
    assert d.primary.cause is Cause.REUSE
    assert d.primary.verdict is Verdict.LIKELY
    details = d.primary.details
    assert isinstance(details, ReuseDetails)
    at_exit = details.failures_at_exit_on_reused
    assert at_exit is not None
    assert at_exit.own_backend
    assert at_exit.failures >= 0.8 * failed
    assert any("stopped serving" in line for line in d.primary.evidence)
    assert d.cause(Cause.RACE).verdict is Verdict.UNLIKELY  # a long preStop: no race


def test_with_the_pods_exit_times_it_is_reuse_too(tmp_path: Path) -> None:
    d, _ = run(tmp_path, with_pods=True)
    assert d.primary is not None
    assert d.primary.cause is Cause.REUSE
    assert not any("stopped serving" in line for line in d.primary.evidence)


def test_exit_failures_among_background_ones_are_named(tmp_path: Path) -> None:
    d, _ = run(tmp_path, noise=3e-4)
    assert d.summary.error_rate is not None
    assert d.summary.error_rate < 2 * d.summary.floor_rate
    assert d.primary is not None, d.next_steps
    assert d.primary.cause is Cause.REUSE
    assert d.primary.verdict in (Verdict.POSSIBLE, Verdict.LIKELY)


def test_the_rollout_handled_well_has_no_cause(tmp_path: Path) -> None:
    d, failed = run(tmp_path, shutdown=ShutdownMode.GRACEFUL, noise=4e-4)
    assert failed == 0
    assert d.primary is None, [(a.cause, a.score, a.evidence) for a in d.causes]
    assert d.next_steps[0].startswith("no cause")


def test_healthy_traffic_without_a_rollout_has_no_cause(tmp_path: Path) -> None:
    d, _ = run(tmp_path, rollout=False, noise=4e-4)
    assert d.primary is None, [(a.cause, a.score, a.evidence) for a in d.causes]
