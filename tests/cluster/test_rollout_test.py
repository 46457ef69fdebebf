"""``svcdoctor rollout-test``: the pure parts (workload names, the restart patch, rollout
completion, phases, the deletion → endpoint delay), its refusals (nothing created), and end
to end against ``lab serve``: race, race-fixed and sigkill, and no object left after a normal
run, Ctrl-C and an agent crash."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from svcdoctor.cli import cli
from svcdoctor.cluster.agentjob import MANAGED_SELECTOR, remaining
from svcdoctor.cluster.api import connect_active
from svcdoctor.cluster.collect import SEEN
from svcdoctor.cluster.rollout import (
    RESTARTED_AT,
    Refused,
    Timing,
    by_phase,
    parse_workload,
    pick_service,
    pod_delays,
    record_seen,
    restart_patch,
    rolled_out,
    service_address,
)
from tests.cluster.conftest import Served

ROOT = Path(__file__).resolve().parents[2]

KEYS = {"workload", "requests", "failed", "by_outcome", "primary_cause", "window_seconds",
        "endpoint_update_seconds", "remedy", "bundle"}  # fmt: skip


def test_workload_names_as_kubectl_spells_them() -> None:
    assert parse_workload("deployment/api") == ("deployments", "api")
    assert parse_workload("deploy/api") == ("deployments", "api")
    assert parse_workload("sts/db") == ("statefulsets", "db")
    assert parse_workload("api") == ("deployments", "api")
    with pytest.raises(Refused, match="expected deployment/NAME"):
        parse_workload("daemonset/x")


def test_the_restart_is_kubectl_rollout_restarts_patch() -> None:
    patch = restart_patch(0.0)
    assert patch == {
        "spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: "1970-01-01T00:00:00Z"}}}}
    }


def _deployment(**status: int) -> dict[str, Any]:
    return {"kind": "Deployment", "metadata": {"generation": 2}, "spec": {"replicas": 3},
            "status": {"observedGeneration": 2, **status}}  # fmt: skip


def test_rollout_completion_as_kubectl_rollout_status() -> None:
    assert rolled_out(_deployment(updatedReplicas=3, replicas=3, availableReplicas=3))
    assert not rolled_out(_deployment(updatedReplicas=3, replicas=4, availableReplicas=3))
    assert not rolled_out(_deployment(updatedReplicas=2, replicas=3, availableReplicas=3))
    stale = _deployment(updatedReplicas=3, replicas=3, availableReplicas=3)
    stale["status"]["observedGeneration"] = 1
    assert not rolled_out(stale)


def test_the_service_is_the_one_selecting_the_pods() -> None:
    api = {"metadata": {"name": "api"}, "spec": {"selector": {"app": "api"}}}
    other = {"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}}}
    assert pick_service([api, other], {"app": "api", "tier": "x"}, "deployment/api") is api
    with pytest.raises(Refused, match="no Service selects"):
        pick_service([other], {"app": "api"}, "deployment/api")
    with pytest.raises(Refused, match=r"several Services .*\(api, api2\)"):
        pick_service([api, {**api, "metadata": {"name": "api2"}}], {"app": "api"}, "d/api")
    svc = {"metadata": {"name": "api"}, "spec": {"clusterIP": "10.96.0.1",
           "ports": [{"name": "http", "port": 80}, {"name": "admin", "port": 81}]}}  # fmt: skip
    assert service_address(svc) == "10.96.0.1:80"
    assert service_address(svc, "admin") == "10.96.0.1:81"
    with pytest.raises(Refused, match="headless"):
        service_address({"metadata": {"name": "h"}, "spec": {"clusterIP": "None"}})


def test_failures_by_phase() -> None:
    rows = [{"ts": t, "outcome": o} for t, o in [(1, "ok"), (5, "reset"), (6, "refused"),
                                                 (9, "ok"), (12, "reset")]]  # fmt: skip
    phases = by_phase(rows, Timing(0.0, 4.0, 10.0, 13.0))
    assert phases == {
        "before": {"requests": 1},
        "during": {"requests": 3, "reset": 1, "refused": 1},
        "after": {"requests": 1, "reset": 1},
    }


def _rec(kind: str, obj: dict[str, Any], at: float) -> dict[str, Any]:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1e6):06d}Z"
    obj["metadata"].setdefault("annotations", {})[SEEN] = stamp
    return {"type": kind, "object": obj}


def test_deletion_to_endpoint_update_and_the_window_per_pod() -> None:
    def pod(name: str, deleting: bool) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name}
        if deleting:
            meta["deletionTimestamp"] = "2026-01-01T00:00:30Z"
        return {"metadata": meta}

    def slice_(**ready: bool) -> dict[str, Any]:
        eps = [{"targetRef": {"name": n}, "conditions": {"ready": r}} for n, r in ready.items()]
        return {"metadata": {"name": "s1"}, "endpoints": eps}

    pods = [_rec("ADDED", pod("a", False), 100.0), _rec("MODIFIED", pod("a", True), 110.0),
            _rec("MODIFIED", pod("b", True), 120.0)]  # fmt: skip
    slices = [_rec("ADDED", slice_(a=True, b=True), 100.0),
              _rec("MODIFIED", slice_(a=False, b=True), 110.75),
              _rec("MODIFIED", slice_(b=True), 111.0),
              _rec("MODIFIED", slice_(), 121.5)]  # fmt: skip
    delays = pod_delays(pods, slices, [110.5, 111.25, 125.0], record_seen)
    assert [(d.pod, d.update_seconds, d.window_seconds) for d in delays] == [
        ("a", pytest.approx(0.75), pytest.approx(1.25)),
        ("b", pytest.approx(1.5), pytest.approx(5.0)),
    ]


def _workload(api: Served, ready: int) -> None:
    labels = {"app": "api"}
    api.put(
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "api", "namespace": "shop", "uid": "d1", "generation": 1},
         "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": {"containers": []}}},
         "status": {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
                    "readyReplicas": ready, "availableReplicas": ready}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "api", "namespace": "shop", "uid": "s1"},
         "spec": {"clusterIP": "10.96.0.9", "selector": labels, "ports": [{"port": 80}]}},
    )  # fmt: skip


def _run(api: Served, *args: str) -> Any:
    base = ["rollout-test", "deployment/api", "--kubeconfig", str(api.kubeconfig), "-n", "shop"]
    return CliRunner().invoke(cli, [*base, *args])


def test_refuses_without_yes_and_with_one_ready_replica(api: Served, tmp_path: Path) -> None:
    _workload(api, ready=1)
    out = str(tmp_path / "b")
    without = _run(api, "--out", out)
    assert without.exit_code == 2
    assert "pass --yes" in without.output
    one = _run(api, "--yes", "--out", out)
    assert one.exit_code == 2
    assert "has 1 ready replica(s)" in one.output
    assert "--allow-outage" in one.output
    kubeconfig = str(api.kubeconfig)
    missing = CliRunner().invoke(
        cli, ["rollout-test", "deployment/nope", "--yes", "--kubeconfig", kubeconfig, "-n", "shop"]
    )
    assert missing.exit_code == 2
    assert "deployment/nope not found" in missing.output
    reader = connect_active(kubeconfig=str(api.kubeconfig))
    assert remaining(reader, None, MANAGED_SELECTOR) == []
    assert not (tmp_path / "b").exists()
    deployment = reader.get("deployments", "shop", "api")
    assert deployment is not None
    assert RESTARTED_AT not in str(deployment)  # never restarted


# ---- end to end against lab serve -------------------------------------------------------


def _lab_rollout(
    tmp_path: Path, scenario: str, *args: str, fmt: str = "json"
) -> tuple[Any, dict[str, Any], list[str]]:
    from tests.cluster.test_live_lab import lab_serve, svcdoctor

    with lab_serve(tmp_path, scenario, "--no-load") as kubeconfig:
        done = svcdoctor("rollout-test", "deployment/api", "--kubeconfig", str(kubeconfig),
                         "--rate", "40", "--duration", "70", "--yes", "-o", fmt,
                         "--out", str(tmp_path / "bundle"), *args, timeout=200)  # fmt: skip
        left = json.loads(
            svcdoctor("cleanup", "--kubeconfig", str(kubeconfig), "--dry-run", "-o", "json").stdout
        )["found"]
    truth = json.loads((tmp_path / "truth.json").read_text())
    return done, truth, left


@pytest.mark.lab
def test_rollout_test_measures_the_race(tmp_path: Path) -> None:
    done, truth, left = _lab_rollout(tmp_path, "race")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert set(report) == KEYS
    assert report["failed"] > 0
    assert report["primary_cause"] == "race"
    assert truth["race_window_seconds"] > 0
    assert (
        truth["race_window_seconds"] <= report["window_seconds"] <= truth["race_window_seconds"] + 3
    )
    assert report["remedy"]["prestop_seconds"] >= report["window_seconds"]
    assert report["remedy"]["grace_seconds"] > report["remedy"]["prestop_seconds"]
    assert report["endpoint_update_seconds"] is not None
    assert left == []
    assert (tmp_path / "bundle" / "collect.json").is_file()


@pytest.mark.lab
def test_rollout_test_passes_the_fixed_rollout(tmp_path: Path) -> None:
    done, _, left = _lab_rollout(tmp_path, "race-fixed")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["failed"] == 0
    assert report["requests"] > 100
    assert report["primary_cause"] is None
    assert left == []


@pytest.mark.lab
def test_rollout_test_names_the_sigkill(tmp_path: Path) -> None:
    done, truth, left = _lab_rollout(tmp_path, "sigkill", "--max-failures", "100000", fmt="text")
    assert done.returncode == 0, done.stderr  # under the gate: a CI pass
    assert "cause: race" in done.stdout
    assert "exited 137 (SIGKILL)" in done.stdout  # the mechanism, in rollout-test's own words
    assert any(p["exit_code"] == 137 for p in truth["deleted_pods"].values())
    diagnosis = subprocess.run(
        [sys.executable, "-m", "svcdoctor", "diagnose", str(tmp_path / "bundle"), "-o", "json"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    race = next(c for c in json.loads(diagnosis.stdout)["causes"] if c["cause"] == "race")
    assert race["details"]["sigkilled"]
    assert any("SIGKILL" in line for line in race["evidence"])
    assert left == []


@pytest.mark.lab
def test_ctrl_c_stops_the_load_lets_the_rollout_finish_and_cleans_up(tmp_path: Path) -> None:
    from tests.cluster.test_live_lab import lab_serve

    with lab_serve(tmp_path, "race-fixed", "--no-load") as kubeconfig:
        proc = subprocess.Popen(
            [sys.executable, "-m", "svcdoctor", "rollout-test", "deployment/api", "--yes",
             "--kubeconfig", str(kubeconfig), "--out", str(tmp_path / "b"), "-o", "json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        reader = connect_active(kubeconfig=str(kubeconfig))
        deadline = time.time() + 60
        while time.time() < deadline:  # until the restart
            dep = reader.get("deployments", "lab", "api") or {}
            if RESTARTED_AT in json.dumps(dep):
                break
            time.sleep(0.3)
        else:
            proc.kill()
            pytest.fail("rollout-test never restarted the deployment")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 130, err
        assert remaining(reader, None, MANAGED_SELECTOR) == []
        assert json.loads(out)["bundle"] == str(tmp_path / "b")
        assert (tmp_path / "b" / "collect.json").is_file()


@pytest.mark.lab
def test_the_active_role_grants_what_probe_rollout_test_and_cleanup_ask(tmp_path: Path) -> None:
    import yaml

    from svcdoctor.cluster.agentjob import cleanup
    from svcdoctor.cluster.api import ACTIVE_RBAC_FILE, EXTRA_RESOURCES
    from svcdoctor.cluster.probe import Options, plan
    from svcdoctor.cluster.probe import run as probe
    from svcdoctor.cluster.resources import RESOURCES
    from svcdoctor.cluster.rollout import Plan, run
    from tests.cluster.test_live_lab import lab_serve

    with lab_serve(tmp_path, "race-fixed", "--no-load") as kubeconfig:
        api = connect_active(kubeconfig=str(kubeconfig))
        probe(api, plan(api, Options("lab", "api", count=5, per_node=True)))
        outcome = run(api, Plan("lab", "deployments", "api", tmp_path / "b", duration=60))
        cleanup(api, "lab", MANAGED_SELECTOR)
    assert outcome.requests > 0
    asked = set()
    for verb, name in api.used:
        plural, _, sub = name.partition("/")
        res = RESOURCES.get(plural) or EXTRA_RESOURCES[plural]
        if res.namespaced:  # nodes: read when allowed, else the pods' nodes
            asked.add((verb, res.group, f"{res.plural}/{sub}" if sub else res.plural))
    granted = set()
    for doc in yaml.safe_load_all((ROOT / ACTIVE_RBAC_FILE).read_text()):
        assert doc["kind"] != "ClusterRole"  # nothing cluster-wide
        if doc["kind"] == "Role":
            assert doc["metadata"]["namespace"] == "NAMESPACE"
            for rule in doc["rules"]:
                granted |= {(v, g, r) for v in rule["verbs"] for g in rule["apiGroups"]
                            for r in rule["resources"]}  # fmt: skip
    assert asked - granted == set()
    reads = {"get", "list", "watch"}
    unused = {g for g in granted - asked if g[0] not in reads}
    # a StatefulSet's restart; kubectl delete -l by hand (svcdoctor deletes collections)
    assert unused == {("patch", "apps", "statefulsets"), ("delete", "", "configmaps"),
                      ("delete", "batch", "jobs")}  # fmt: skip
    assert not {r for _, _, r in granted} & {"secrets", "*"}
