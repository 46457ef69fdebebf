"""simulate and the lab agree: the lab's race scenario, fed to simulate through the shared
scenario model (``SimParams.of``), predicts what the lab's own ground truth expects.

Two references:

* the lab's model in closed form: each deleted pod stays in a node's rules from its SIGTERM
  until the node applies its removal; the lab deletes an old pod as soon as the new one is
  Ready, so the new pod's arrival (delay d1) and the removal (d2, delivered in order: at
  max(d1, d2)) are in flight together, and the node holds R pods (the new one not yet
  there) for d1, then R + 1 until max(d1, d2). A naive pod stops accepting at its deletion
  (no preStop). That is ``Cluster.expected_race_failures`` (lab/cluster.py) in expectation;
* real lab runs' ``expected_race_failures`` (the same model over the run's measured
  timelines and requests), recorded in golden/lab_race.json with the command that made them:
  one run varies by ≈10 % (8 sampled delays, Poisson traffic), so their mean is compared.
"""

from __future__ import annotations

import json
from pathlib import Path

from svcdoctor.lab.scenarios import SCENARIOS
from svcdoctor.model.dist import DistKind
from svcdoctor.simulate import SimParams, simulate

TOLERANCE = 0.10
RECORDED = Path(__file__).parent / "golden" / "lab_race.json"


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


def test_race_predicts_the_lab_models_expectation() -> None:
    sim = simulate(SimParams.of(SCENARIOS["race"], duration=120.0), runs=40, seed=1)
    expected = lab_model_expectation("race")
    assert abs(sim.failed / expected - 1) <= TOLERANCE, (sim.failed, expected)


def test_race_predicts_the_lab_runs_ground_truth() -> None:
    runs = json.loads(RECORDED.read_text())["runs"]
    truth = sum(r["expected_race_failures"] for r in runs) / len(runs)
    measured = sum(r["failed"] for r in runs) / len(runs)
    sim = simulate(SimParams.of(SCENARIOS["race"], duration=120.0), runs=40, seed=1)
    assert abs(sim.failed / truth - 1) <= TOLERANCE, (sim.failed, truth)
    # what the lab's clients saw, too (not only its model of it)
    assert abs(sim.failed / measured - 1) <= TOLERANCE, (sim.failed, measured)


def test_the_lab_models_expectation_matches_its_runs() -> None:
    """The closed form above is the lab's model: its runs' ground truth agrees."""
    runs = json.loads(RECORDED.read_text())["runs"]
    truth = sum(r["expected_race_failures"] for r in runs) / len(runs)
    assert abs(truth / lab_model_expectation("race") - 1) <= TOLERANCE
