"""simulate and the lab agree: each lab scenario, fed to simulate through the shared
scenario model (``SimParams.of``), predicts what the lab's own ground truth expects.

Two references:

* the lab's model in closed form (race): each deleted pod stays in a node's rules from its
  SIGTERM until the node applies its removal; the lab deletes an old pod as soon as the new
  one is Ready, so the new pod's arrival (delay d1) and the removal (d2, delivered in order:
  at max(d1, d2)) are in flight together, and the node holds R pods (the new one not yet
  there) for d1, then R + 1 until max(d1, d2). A naive pod stops accepting at its deletion
  (no preStop). That is ``Cluster.expected_race_failures`` (lab/cluster.py) in expectation;
* real lab runs' ``expected_race_failures`` (the same model over the run's measured
  timelines and requests) and measured failures, recorded per scenario in
  golden/lab_truth.json with the command that made them: one run varies by ≈10 % (8 sampled
  delays, Poisson traffic), so their means are compared.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from svcdoctor.lab.scenarios import SCENARIOS
from svcdoctor.model.dist import DistKind
from svcdoctor.model.scenario import Event, LoadBalancerSpec
from svcdoctor.simulate import SimParams, simulate

TOLERANCE = 0.10
RECORDED: dict[str, Any] = json.loads(
    (Path(__file__).parent / "golden" / "lab_truth.json").read_text()
)
SCENARIOS_RUN = sorted(k for k in RECORDED if not k.startswith("_"))


def lab_model_expectation(name: str) -> float:
    """The lab's expected race failures for a scenario with uniform per-node delays, a naive
    shutdown, no preStop and no min-sync batching (see the module docstring)."""
    s = SCENARIOS[name]
    d = s.delay
    assert d.kind is DistKind.UNIFORM
    assert s.propagation.min_sync == 0
    assert s.pod.prestop == 0
    low, high = d.a, d.b
    mean = (low + high) / 2
    mean_max = low + 2 * (high - low) / 3  # E[max] of two uniforms on [low, high]
    per_node = s.load.rate / s.nodes
    per_deletion = per_node * (mean / s.replicas + (mean_max - mean) / (s.replicas + 1))
    return s.nodes * s.replicas * per_deletion


def _means(name: str) -> tuple[float, float]:
    runs = RECORDED[name]["runs"]
    truth = sum(r["expected_race_failures"] for r in runs) / len(runs)
    return truth, sum(r["failed"] for r in runs) / len(runs)


def test_race_predicts_the_lab_models_expectation() -> None:
    sim = simulate(SimParams.of(SCENARIOS["race"], duration=120.0), runs=40, seed=1)
    expected = lab_model_expectation("race")
    assert abs(sim.failed / expected - 1) <= TOLERANCE, (sim.failed, expected)


@pytest.mark.parametrize("name", SCENARIOS_RUN)
def test_simulate_predicts_the_lab_runs_ground_truth(name: str) -> None:
    truth, measured = _means(name)
    sim = simulate(SimParams.of(SCENARIOS[name], duration=120.0), runs=40, seed=1)
    assert abs(sim.failed / truth - 1) <= TOLERANCE, (sim.failed, truth)
    # what the lab's clients saw, too (not only its model of it)
    assert abs(sim.failed / measured - 1) <= TOLERANCE, (sim.failed, measured)


def test_the_lab_models_expectation_matches_its_runs() -> None:
    """The closed form above is the lab's model: its runs' ground truth agrees."""
    truth, _ = _means("race")
    assert abs(truth / lab_model_expectation("race") - 1) <= TOLERANCE


def test_the_scenario_model_carries_events_and_the_load_balancer() -> None:
    """What a lab scenario says of its event and its load balancer reaches simulate."""
    lb = LoadBalancerSpec(share=0.5, deregistration=30.0, readiness_gate=True)
    s = replace(SCENARIOS["race"], event=Event.DRAIN, pdb_max_unavailable=1, lb=lb)
    p = SimParams.of(s)
    assert (p.event, p.pdb_max_unavailable) == (Event.DRAIN, 1)
    assert (p.lb_share, p.lb_deregistration, p.lb_readiness_gate) == (0.5, 30.0, True)
    assert SimParams.of(SCENARIOS["race"]).lb_share == 0
    assert replace(SCENARIOS["race"], event="scale-down").event is Event.SCALE_DOWN
