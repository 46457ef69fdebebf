"""Node drains in the lab, for real: ``kubectl drain`` of node-0 (cordon, evictions through
the Eviction API semantics with a PodDisruptionBudget of maxUnavailable 1, replacements on
node-1, node-0's kube-proxy stopped once it is empty) under load. ``drain`` (naive pods,
no preStop) races and diagnose names the race from its bundle; ``drain-fixed`` (the
planned preStop and grace period) loses nothing. Each run's own ground truth (lab.json's
``drain`` block) shows the PDB honoured.

Run them serialised with the other lab runs: ``flock /tmp/svcdoctor-lab.lock pytest ...``.
The kernel runs need root, ip, iptables and conntrack (else they skip with the reason)."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from svcdoctor.lab import objects
from svcdoctor.lab.cleanup import leftovers, pod_processes
from svcdoctor.lab.cluster import EVICTION_RETRY, Drain
from svcdoctor.lab.kernel import available
from svcdoctor.lab.scenarios import SCENARIOS
from svcdoctor.model.scenario import Event
from svcdoctor.simulate import SimParams

KERNEL_MISSING = available()
DATAPATHS = ("kernel", "userspace")
NAMES = ("drain", "drain-fixed")
PARALLEL = 2  # runs at a time (each mostly waits, ≈ 25 s), beside the other group's lab
pytestmark = pytest.mark.lab


@dataclass(frozen=True)
class Run:
    out: dict[str, Any]  # what ``lab run --format json`` printed
    bundle: Path
    pid: int  # the lab run's process: its pods name it as their parent

    @property
    def lab(self) -> dict[str, Any]:
        return dict(json.loads((self.bundle / "lab.json").read_text()))

    @property
    def drain(self) -> dict[str, Any]:
        return dict(self.lab["drain"])


def lab_run(name: str, datapath: str, folder: Path) -> Run:
    bundle = folder / f"{name}-{datapath}"
    args = ["--scenario", name, "--datapath", datapath, "--out", str(bundle), "-o", "json"]
    with subprocess.Popen(
        [sys.executable, "-m", "svcdoctor", "lab", "run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return Run(json.loads(out), bundle, proc.pid)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Run]:
    """Both scenarios on each datapath there is, and the check that these runs left
    nothing behind (other lab runs on the machine are not ours to judge)."""
    folder = tmp_path_factory.mktemp("drain")
    before = leftovers()
    todo = [(n, dp) for n in NAMES for dp in DATAPATHS if dp == "userspace" or not KERNEL_MISSING]
    with ThreadPoolExecutor(PARALLEL) as pool:
        done = list(pool.map(lambda job: lab_run(*job, folder), todo))
    after = leftovers()
    assert set(after.namespaces) <= set(before.namespaces)
    assert set(after.locks) <= set(before.locks)
    ours = {r.pid for r in done}
    assert not [pid for pid, (_, named, _) in pod_processes().items() if named in ours]
    return dict(zip(todo, done, strict=True))


@pytest.fixture(params=DATAPATHS)
def datapath(request: pytest.FixtureRequest) -> str:
    if request.param == "kernel" and KERNEL_MISSING:
        pytest.skip(KERNEL_MISSING)
    return str(request.param)


def test_the_drain_races_and_diagnose_names_it(
    runs: dict[tuple[str, str], Run], datapath: str
) -> None:
    run = runs["drain", datapath]
    assert run.out["failed"] > 10, run.out["failed"]
    assert run.lab["ground_truth"]["expected_race_failures"] > 10
    done = subprocess.run(
        [sys.executable, "-m", "svcdoctor", "diagnose", str(run.bundle), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["primary_cause"] == "race"


def test_the_fixed_drain_loses_nothing(runs: dict[tuple[str, str], Run], datapath: str) -> None:
    run = runs["drain-fixed", datapath]
    assert run.out["failed"] == 0
    assert run.out["requests"] > 1000
    assert run.out["diagnosis"]["primary_cause"] is None


@pytest.mark.parametrize("name", NAMES)
def test_the_drain_honours_the_budget_and_stops_the_node(
    runs: dict[tuple[str, str], Run], datapath: str, name: str
) -> None:
    scenario = SCENARIOS[name]
    assert scenario.pdb_max_unavailable is not None
    drain = runs[name, datapath].drain
    floor = scenario.replicas - scenario.pdb_max_unavailable
    assert drain["node"] == "node-0"
    assert drain["min_healthy_allowed"] == floor
    assert drain["min_healthy"] >= floor  # never fewer Ready than the budget allows
    evictions = drain["evictions"]
    # node-0's pods (pod j on node j mod nodes), all evicted and replaced on node-1
    assert sorted(evictions) == [f"api-7f6d5c4b3-{j:02d}" for j in scenario.drained]
    assert {e["replacement_node"] for e in evictions.values()} == {"node-1"}
    # the budget lets one go at once; the other's eviction is refused (429) until the first
    # one's replacement is Ready, and retried kubectl's 5 s later
    first, second = sorted(evictions.values(), key=lambda e: e["evicted"])
    assert first["refused"] == []
    assert second["refused"]
    assert second["evicted"] - second["refused"][-1] >= EVICTION_RETRY - 0.1
    assert drain["cordoned"] <= first["evicted"] < drain["finished"]
    assert drain["kube_proxy_stopped"] >= drain["finished"]
    timelines = runs[name, datapath].lab["ground_truth"]["deleted_pods"]
    assert sorted(timelines) == sorted(evictions)
    for pod, timeline in timelines.items():
        assert timeline["deleted"] == pytest.approx(evictions[pod]["evicted"], abs=0.01)
        assert timeline["exited"] is not None
        assert timeline["routing_stopped"]  # node-1 dropped it (node-0 froze maybe before)


def test_the_eviction_check_is_the_budgets() -> None:
    """One more disruption must leave replicas - maxUnavailable healthy pods; no budget
    allows every eviction."""
    drain = Drain(node=0, budget=1, replicas=4, cordoned_at=0.0)
    assert drain.allowed(4)
    assert not drain.allowed(3)
    assert Drain(node=0, budget=None, replicas=4, cordoned_at=0.0).allowed(1)
    assert Drain(node=0, budget=2, replicas=4, cordoned_at=0.0).allowed(3)


def test_a_cordoned_node_is_unschedulable() -> None:
    view = objects.LabView(
        run="svcdabcdef",
        scenario=SCENARIOS["drain"],
        datapath="kernel",
        started=0.0,
        node_ips=("10.233.255.10", "10.233.255.11"),
        pods=(),
        events=(),
        cordoned=(0,),
    )
    specs = {n["metadata"]["name"]: n["spec"] for n in objects.nodes(view)}
    assert specs == {"node-0": {"unschedulable": True}, "node-1": {}}


def test_the_drain_and_simulate_describe_the_same_event() -> None:
    p = SimParams.of(SCENARIOS["drain"])
    assert (p.event, p.pdb_max_unavailable, p.nodes, p.replicas) == (Event.DRAIN, 1, 2, 4)
    assert SCENARIOS["drain"].drained == (0, 2)
    assert SCENARIOS["race"].drained == ()
