"""``rollout-test --mode drain``: kubectl drain's filters (pure), the refusals before anything
is created, and end to end against ``lab serve`` (the ``drain`` and ``drain-fixed``
scenarios, kernel datapath): the load's failures are the ground truth's race, the node is
uncordoned afterwards (read with the real kubectl) and nothing svcdoctor created is left.

Run the lab ones serialised: ``flock /tmp/svcdoctor-lab.lock pytest ...``."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from svcdoctor.cluster.agentjob import MANAGED_BY, MANAGER
from svcdoctor.cluster.api import ApiStatus
from svcdoctor.cluster.drain import (
    CORDON,
    UNCORDON,
    agent_node,
    check_node,
    cordoned,
    evict_all,
    victims,
)
from svcdoctor.cluster.reader import ClusterError
from svcdoctor.cluster.rollout import Mode, Plan, Refused, check_plan
from tests.kubectl import kubectl_fixture, run_kubectl  # noqa: F401 (the kubectl fixture)


def pod(name: str, owner: str | None = "ReplicaSet", **meta: Any) -> dict[str, Any]:
    refs = [{"kind": owner, "name": "x", "controller": True}] if owner else []
    metadata = {"name": name, "namespace": "lab", "uid": f"u-{name}", "ownerReferences": refs}
    return {"metadata": metadata | meta, "status": {"phase": "Running"}}


def test_a_drain_evicts_as_kubectl_drain_filters() -> None:
    found = victims(
        "node-0",
        [
            pod("api-1"),
            pod("kube-proxy-x", "DaemonSet"),
            pod("etcd-node-0", "Node", annotations={"kubernetes.io/config.mirror": "h"}),
            pod("agent", "Job", labels={MANAGED_BY: MANAGER}),
            pod("old", deletionTimestamp="2026-01-01T00:00:00Z"),
            pod("job-1", "Job"),
        ],
    )
    assert found.evict == (("lab", "api-1", "u-api-1"), ("lab", "job-1", "u-job-1"))
    assert [line.split(":")[0] for line in found.skipped] == [
        "lab/kube-proxy-x",
        "lab/etcd-node-0",
        "lab/agent",
        "lab/old",
    ]


def test_a_pod_without_controller_refuses_the_drain_as_kubectl_does() -> None:
    with pytest.raises(Refused, match=r"declare no controller \(lab/bare\).*--force"):
        victims("node-0", [pod("api-1"), pod("bare", None)])
    done = pod("bare", None) | {"status": {"phase": "Succeeded"}}
    assert victims("node-0", [done]).evict == (("lab", "bare", "u-bare"),)


def test_the_node_must_be_there_uncordoned_and_the_load_elsewhere() -> None:
    with pytest.raises(Refused, match="node node-9 not found"):
        check_node("node-9", None)
    with pytest.raises(Refused, match="cordoned already"):
        check_node("node-0", {"spec": {"unschedulable": True}})
    ready = {"conditions": [{"type": "Ready", "status": "True"}]}
    nodes = [
        {"metadata": {"name": "node-0"}, "status": ready},
        {"metadata": {"name": "node-1"}, "spec": {"unschedulable": True}, "status": ready},
        {"metadata": {"name": "node-2"}, "status": ready},
    ]
    assert agent_node("node-0", nodes) == "node-2"
    with pytest.raises(Refused, match="besides node-0"):
        agent_node("node-0", nodes[:2])


def test_a_drain_needs_a_node_and_a_rollout_none(tmp_path: Path) -> None:
    with pytest.raises(Refused, match="--mode drain needs --node NAME"):
        check_plan(Plan("lab", "deployments", "api", tmp_path, mode=Mode.DRAIN))
    with pytest.raises(Refused, match="--node is for --mode drain or scale-down"):
        check_plan(Plan("lab", "deployments", "api", tmp_path, node="node-0"))
    for mode in (Mode.DRAIN, Mode.SCALE_DOWN):  # scale-down: the drain's steps
        check_plan(Plan("lab", "deployments", "api", tmp_path, mode=mode, node="node-0"))


def test_without_yes_a_drain_is_refused_naming_the_flag() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "svcdoctor", "rollout-test", "deployment/api", "--mode",
         "drain", "--node", "node-0"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "cordons node-0" in done.stderr
    assert "pass --yes" in done.stderr


class Budget:
    """An API whose evictions a PodDisruptionBudget always refuses; its patches recorded."""

    def __init__(self) -> None:
        self.patches: list[Any] = []

    def evict(self, namespace: str, name: str, uid: str | None = None) -> bool:
        raise ApiStatus(
            429,
            "429 from /api/v1/namespaces/lab/pods/api-0/eviction: Cannot evict pod as it would "
            "violate the pod's disruption budget. (The disruption budget api needs 3 healthy "
            "pods and has 3 currently)",
        )

    def patch(self, resource: str, namespace: str, name: str, body: Any) -> dict[str, Any]:
        self.patches.append((resource, name, body))
        return {}


def test_a_drain_the_budget_blocks_ends_in_one_line_naming_it() -> None:
    api: Any = Budget()
    with pytest.raises(ClusterError) as failed:
        evict_all(api, "node-0", [("lab", "api-0", "u")], until=time.time() + 1)
    message = str(failed.value)
    assert message.startswith("the drain of node-0 waited 0 s to evict lab/api-0: ")
    assert "The disruption budget api needs 3 healthy pods" in message
    assert "\n" not in message


def test_the_node_is_uncordoned_after_ctrl_c_and_errors() -> None:
    for ending in (KeyboardInterrupt(), ClusterError("boom")):
        api: Any = Budget()
        notes: list[str] = []
        with pytest.raises(type(ending)), cordoned(api, "node-0", notes):
            raise ending
        assert api.patches == [("nodes", "node-0", CORDON), ("nodes", "node-0", UNCORDON)]
        assert notes == ["node-0 uncordoned"]  # said once it is


# ---- end to end against lab serve -------------------------------------------------------


def _lab_drain(tmp_path: Path, kubectl: Path, scenario: str) -> tuple[Any, dict[str, Any]]:
    """``rollout-test --mode drain --node node-0`` against ``lab serve``; after it, the
    real kubectl reads node-0's ``spec.unschedulable`` and svcdoctor's leftovers."""
    from tests.cluster.test_live_lab import lab_serve, svcdoctor

    with lab_serve(tmp_path, scenario, "--no-load") as kubeconfig:
        done = svcdoctor("rollout-test", "deployment/api", "--kubeconfig", str(kubeconfig),
                         "--mode", "drain", "--node", "node-0", "--yes", "--rate", "40",
                         "--duration", "60", "--max-failures", "100000", "-o", "json",
                         "--out", str(tmp_path / "bundle"), timeout=150)  # fmt: skip
        assert done.returncode == 0, done.stderr
        read = run_kubectl(kubectl, kubeconfig, ["get", "node", "node-0", "-o",
                                                 "jsonpath={.spec.unschedulable}"])  # fmt: skip
        assert read.returncode == 0, read.stderr
        assert read.stdout.strip() == ""  # uncordoned: the field is gone
        mine = f"{MANAGED_BY}={MANAGER}"
        listed = ["get", "all,configmaps,jobs", "-A", "-l", mine, "-o", "name"]
        left = run_kubectl(kubectl, kubeconfig, listed)
        assert left.returncode == 0, left.stderr
        assert left.stdout.strip() == ""
    truth = json.loads((tmp_path / "truth.json").read_text())
    return json.loads(done.stdout), truth


def _race(truth: dict[str, Any], bundle: Path) -> tuple[list[float], int]:
    """The agent's failures, and how many of its requests the ground truth puts in the race:
    those it sent from node n while n still routed to an evicted pod that had stopped
    accepting (each fails when n's rules pick that pod)."""
    rows = [json.loads(line) for f in bundle.glob("client-*.jsonl") for line in f.open()]
    failures = [float(r["ts"]) for r in rows if r["outcome"] != "ok"]
    inside = 0
    for r in rows:
        node = int(str(r["node"]).removeprefix("node-"))
        for p in truth["deleted_pods"].values():
            stopped = p["routing_stopped"]
            if len(stopped) > node and p["stopped_accepting"] <= r["ts"] <= stopped[node]:
                inside += 1
    return failures, inside


def _bounds(inside: int, low: float, high: float) -> tuple[float, float]:
    """The failures ``inside`` race requests give when the evicted pod is one rule in 1/low
    to 1/high of its node's rules: 3 binomial sd below the fewest, above the most."""

    def spread(share: float) -> float:
        return 3 * math.sqrt(inside * share * (1 - share))

    return inside * low - spread(low), inside * high + spread(high)


@pytest.mark.lab
def test_rollout_test_drains_a_node_and_measures_the_truths_race(
    tmp_path: Path, kubectl: Path
) -> None:
    report, truth = _lab_drain(tmp_path, kubectl, "drain")
    assert (report["mode"], report["node"]) == ("drain", "node-0")
    assert sorted(truth["deleted_pods"]) == ["api-7f6d5c4b3-00", "api-7f6d5c4b3-02"]
    failures, inside = _race(truth, tmp_path / "bundle")
    assert report["failed"] == len(failures) > 0
    assert report["primary_cause"] == "race"
    # every failure in a window of the truth (widened by a request's flight: one sent just
    # before the pod stopped accepting reaches it after), and as many as its race predicts
    windows = [
        (p["stopped_accepting"] - 0.5, max(p["routing_stopped"]) + 0.5)
        for p in truth["deleted_pods"].values()
    ]
    outside = [ts for ts in failures if not any(lo <= ts <= hi for lo, hi in windows)]
    assert not outside, (outside, windows)
    # its node's rules hold 3 to 5 pods (4 replicas, the PDB's one missing, the surge of a
    # replacement): the evicted one is 1 of 5 to 1 of 3
    low, high = _bounds(inside, 1 / 5, 1 / 3)
    assert low <= report["failed"] <= high, (report["failed"], inside)


@pytest.mark.lab
def test_rollout_test_drain_with_the_fix_loses_nothing(tmp_path: Path, kubectl: Path) -> None:
    report, truth = _lab_drain(tmp_path, kubectl, "drain-fixed")
    failures, inside = _race(truth, tmp_path / "bundle")
    assert len(truth["deleted_pods"]) == 2
    assert inside == 0
    assert report["failed"] == len(failures) == 0


@pytest.mark.lab
def test_ctrl_c_during_a_drain_uncordons_the_node_and_cleans_up(
    tmp_path: Path, kubectl: Path
) -> None:
    from tests.cluster.test_live_lab import lab_serve

    def unschedulable(kubeconfig: Path) -> str:
        read = run_kubectl(kubectl, kubeconfig, ["get", "node", "node-0", "-o",
                                                 "jsonpath={.spec.unschedulable}"])  # fmt: skip
        assert read.returncode == 0, read.stderr
        return read.stdout.strip()

    with lab_serve(tmp_path, "drain-fixed", "--no-load") as kubeconfig:
        proc = subprocess.Popen(
            [sys.executable, "-m", "svcdoctor", "rollout-test", "deployment/api", "--yes",
             "--mode", "drain", "--node", "node-0", "--kubeconfig", str(kubeconfig),
             "--out", str(tmp_path / "b"), "-o", "json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.time() + 60
        while unschedulable(kubeconfig) != "true":  # until the cordon
            if time.time() > deadline:
                proc.kill()
                pytest.fail("rollout-test never cordoned node-0")
            time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 130, err
        assert unschedulable(kubeconfig) == ""
        mine = ["get", "all,configmaps,jobs", "-A", "-l", f"{MANAGED_BY}={MANAGER}", "-o", "name"]
        left = run_kubectl(kubectl, kubeconfig, mine)
        assert (left.returncode, left.stdout.strip()) == (0, ""), left.stderr
        assert json.loads(out)["mode"] == "drain"
