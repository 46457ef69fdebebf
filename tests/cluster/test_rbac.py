"""The RBAC files grant exactly what scan and collect ask of the API, and nothing else."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from svcdoctor.cluster import RBAC_FILE, RESOURCES
from svcdoctor.cluster.api import connect
from svcdoctor.cluster.collect import Request, collect
from svcdoctor.cluster.snapshot import read_snapshot
from tests.cluster.conftest import Served, serve

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "cluster" / "collect"
Grant = tuple[str, str, str]  # (verb, API group, resource)


def _grants(path: Path) -> tuple[set[Grant], set[Grant], list[dict[str, Any]]]:
    """Cluster-wide grants, grants limited to kube-proxy's and Cilium's ConfigMaps, and the
    documents."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    wide: set[Grant] = set()
    narrow: set[Grant] = set()
    for doc in docs:
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        for rule in doc["rules"]:
            grants = {
                (verb, group, resource)
                for group in rule["apiGroups"]
                for resource in rule["resources"]
                for verb in rule["verbs"]
            }
            if rule.get("resourceNames"):
                assert doc["metadata"]["namespace"] == "kube-system"
                assert rule["resourceNames"] == ["kube-proxy", "cilium-config"]
                narrow |= grants
            else:
                wide |= grants
    return wide, narrow, docs


def _asked(used: set[tuple[str, str]]) -> set[Grant]:
    out = set()
    for verb, resource in used:
        plural, _, sub = resource.partition("/")
        res = RESOURCES[plural]
        out.add((verb, res.group, f"{res.plural}/{sub}" if sub else res.plural))
    return out


def _with_other_owners(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fixture plus a StatefulSet's and a DaemonSet's pod behind the same Service, so
    that collect reads every kind of owner."""
    api_pod = next(o for o in objects if o["kind"] == "Pod" and o["metadata"]["name"][:3] == "api")
    extra = []
    for kind, plural in (("StatefulSet", "statefulsets"), ("DaemonSet", "daemonsets")):
        name = f"api-{plural[:3]}"
        meta = {"name": name, "namespace": api_pod["metadata"]["namespace"], "uid": name}
        extra.append({"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": {}})
        pod = json.loads(json.dumps(api_pod))
        pod["metadata"]["name"] = pod["metadata"]["uid"] = f"{name}-0"
        pod["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": name, "controller": True}
        ]
        extra.append(pod)
    return objects + extra


def _exercise(api: Served, out: Path) -> set[Grant]:
    """Every read scan and collect make: scan -A, scan of one Service with a selector,
    collect with a watch and client logs."""
    objects = _with_other_owners(json.loads((FIXTURES / "cluster.json").read_text())["items"])
    api.put(*objects)
    for pod in (o for o in objects if o["kind"] == "Pod"):
        meta = pod["metadata"]
        api.call(api.store.set_logs, meta["namespace"], meta["name"], lambda c: "")
    reader = connect(kubeconfig=str(api.kubeconfig))
    read_snapshot(reader, None)
    read_snapshot(reader, "shop", "app=api", ("api",))
    service = next(o for o in objects if o["kind"] == "Service")["metadata"]
    request = Request(service["namespace"], service["name"], out, watch=1.0, client_logs="app=x")
    collect(reader, request)
    return _asked(reader.used)  # type: ignore[attr-defined]


def test_the_read_role_is_exactly_what_the_code_asks(tmp_path: Path) -> None:
    asked: set[Grant] = set()
    for unserved in (set(), {"discovery.k8s.io"}):  # the core Endpoints fallback too
        for api in serve(tmp_path / str(len(unserved)), unserved=unserved):
            asked |= _exercise(api, tmp_path / f"bundle-{len(unserved)}")
    wide, narrow, _ = _grants(ROOT / RBAC_FILE)
    assert narrow == {("get", "", "configmaps")}  # only kube-proxy's and Cilium's
    assert asked - wide == narrow
    assert wide - asked == set()  # nothing granted that no command uses

    per_namespace, none, _ = _grants(ROOT / "deploy/rbac/svcdoctor-read-namespace.yaml")
    assert none == set()
    cluster_scoped = {g for g in wide if not RESOURCES[g[2].split("/")[0]].namespaced}
    assert per_namespace == wide - cluster_scoped


def test_rbac_files_are_valid_and_grant_nothing_secret() -> None:
    for name in ("svcdoctor-read.yaml", "svcdoctor-read-namespace.yaml"):
        path = ROOT / "deploy" / "rbac" / name
        wide, narrow, docs = _grants(path)
        assert {verb for verb, _, _ in wide | narrow} <= {"get", "list", "watch"}
        assert not {r for _, _, r in wide} & {"secrets", "configmaps", "*"}
        for doc in docs:
            assert doc["apiVersion"]
            assert doc["metadata"]["name"]
        # the project's own linter reads them without a finding or an input error
        result = subprocess.run(
            [sys.executable, "-m", "svcdoctor", "lint", str(path), "--format", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert json.loads(result.stdout)["findings"] == []


def _role_grants(path: Path) -> tuple[set[Grant], dict[Grant, list[str]]]:
    """The grants of the one Role in ``path`` (nothing cluster-wide), and those limited by
    resourceNames, with the names."""
    granted: set[Grant] = set()
    named: dict[Grant, list[str]] = {}
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert {d["kind"] for d in docs} == {"ServiceAccount", "Role", "RoleBinding"}
    for doc in docs:
        assert doc["metadata"]["namespace"] == "NAMESPACE"
        if doc["kind"] == "RoleBinding":
            assert doc["roleRef"]["name"] == doc["metadata"]["name"]
            continue
        for rule in doc.get("rules", []):
            grants = {(v, g, r) for v in rule["verbs"] for g in rule["apiGroups"]
                      for r in rule["resources"]}  # fmt: skip
            if rule.get("resourceNames"):
                named |= dict.fromkeys(grants, rule["resourceNames"])
            else:
                granted |= grants
    assert not {r for _, _, r in granted | set(named)} & {"secrets", "*"}
    return granted, named


def _namespaced(used: set[tuple[str, str]]) -> set[Grant]:
    from svcdoctor.cluster.api import EXTRA_RESOURCES

    asked = set()
    for verb, name in used:
        plural, _, sub = name.partition("/")
        res = RESOURCES.get(plural) or EXTRA_RESOURCES[plural]
        if res.namespaced:  # nodes: read when allowed, else the pods' nodes
            asked.add((verb, res.group, f"{res.plural}/{sub}" if sub else res.plural))
    return asked


def test_the_namespaced_files_bind_their_roles() -> None:
    for name in ("svcdoctor-read-namespace.yaml", "svcdoctor-probe.yaml"):
        granted, named = _role_grants(ROOT / "deploy" / "rbac" / name)
        assert named == {}
        assert ("create", "", "pods") not in granted  # the agent runs as Jobs
    granted, named = _role_grants(ROOT / "deploy" / "rbac" / "svcdoctor-rollout-test.yaml")
    assert ("create", "", "pods") not in granted
    # the restart: patch of the one workload named, nothing else patched
    assert named == {("patch", "apps", "deployments"): ["WORKLOAD"],
                     ("patch", "apps", "statefulsets"): ["WORKLOAD"]}  # fmt: skip
    assert not {g for g in granted if g[0] == "patch"}


@pytest.mark.lab
def test_the_probe_and_rollout_test_roles_grant_what_the_commands_ask(tmp_path: Path) -> None:
    from svcdoctor.cluster.agentjob import MANAGED_SELECTOR, cleanup
    from svcdoctor.cluster.api import ACTIVE_RBAC_FILE, ROLLOUT_RBAC_FILE, connect_active
    from svcdoctor.cluster.probe import Options, plan
    from svcdoctor.cluster.probe import run as probe
    from svcdoctor.cluster.rollout import Plan, run
    from tests.cluster.test_live_lab import lab_serve

    with lab_serve(tmp_path, "race-fixed", "--no-load") as kubeconfig:
        prober = connect_active(kubeconfig=str(kubeconfig))
        probe(prober, plan(prober, Options("lab", "api", count=5, per_node=True)))
        assert cleanup(prober, "lab", MANAGED_SELECTOR).clean
        tester = connect_active(kubeconfig=str(kubeconfig))
        outcome = run(tester, Plan("lab", "deployments", "api", tmp_path / "b", duration=60))
        assert cleanup(tester, "lab", MANAGED_SELECTOR).clean
    assert outcome.requests > 0

    granted, _ = _role_grants(ROOT / ACTIVE_RBAC_FILE)
    asked = _namespaced(prober.used)  # type: ignore[attr-defined]
    assert asked - granted == set()
    # used by hand (kubectl delete -l) or with --network-policy (the lab serves none)
    assert granted - asked == {
        ("delete", "batch", "jobs"),
        ("delete", "", "configmaps"),
        ("create", "networking.k8s.io", "networkpolicies"),
        ("delete", "networking.k8s.io", "networkpolicies"),
    }

    granted, named = _role_grants(ROOT / ROLLOUT_RBAC_FILE)
    asked = _namespaced(tester.used)  # type: ignore[attr-defined]
    # kube-system's ConfigMaps (kube-proxy's, cilium-config) are read where allowed; a Role
    # of the namespace cannot grant them and the commands note it
    assert asked - granted - set(named) - {("get", "", "configmaps")} == set()
    assert ("patch", "apps", "deployments") in asked
    unused = {g for g in granted - asked if g[0] not in ("get", "list", "watch")}
    assert unused == {
        ("delete", "batch", "jobs"),
        ("delete", "", "configmaps"),
        ("create", "networking.k8s.io", "networkpolicies"),  # --network-policy only
        ("delete", "networking.k8s.io", "networkpolicies"),
    }


def _everywhere(used: set[tuple[str, str]]) -> set[Grant]:
    """What ``used`` asked, namespaced and cluster-scoped alike."""
    from svcdoctor.cluster.api import EXTRA_RESOURCES

    asked = set()
    for verb, name in used:
        plural, _, sub = name.partition("/")
        res = RESOURCES.get(plural) or EXTRA_RESOURCES[plural]
        asked.add((verb, res.group, f"{res.plural}/{sub}" if sub else res.plural))
    return asked


def _namespaced_kind(plural: str) -> bool:
    from svcdoctor.cluster.api import EXTRA_RESOURCES

    name = plural.partition("/")[0]
    return (RESOURCES.get(name) or EXTRA_RESOURCES[name]).namespaced


@pytest.mark.lab
def test_the_drain_role_grants_what_a_drain_asks(tmp_path: Path) -> None:
    """``rollout-test --mode drain`` asks for nothing beyond the rollout-test Role and the
    drain ClusterRole, and uses every write the ClusterRole grants."""
    from svcdoctor.cluster.api import DRAIN_RBAC_FILE, ROLLOUT_RBAC_FILE, connect_active
    from svcdoctor.cluster.rollout import Plan, run
    from svcdoctor.cluster.rollout_plan import Mode
    from tests.cluster.test_live_lab import lab_serve

    with lab_serve(tmp_path, "drain-fixed", "--no-load") as kubeconfig:
        tester = connect_active(kubeconfig=str(kubeconfig))
        plan = Plan("lab", "deployments", "api", tmp_path / "b", duration=60,
                    mode=Mode.DRAIN, node="node-0")  # fmt: skip
        outcome = run(tester, plan)
    assert outcome.requests > 0

    role, named = _role_grants(ROOT / ROLLOUT_RBAC_FILE)
    docs = [d for d in yaml.safe_load_all((ROOT / DRAIN_RBAC_FILE).read_text()) if d]
    assert {d["kind"] for d in docs} == {"ClusterRole", "ClusterRoleBinding"}
    cluster_role = next(d for d in docs if d["kind"] == "ClusterRole")
    wide = {(v, g, r) for rule in cluster_role["rules"] for v in rule["verbs"]
            for g in rule["apiGroups"] for r in rule["resources"]}  # fmt: skip
    asked = _everywhere(tester.used)  # type: ignore[attr-defined]
    # read where allowed, noted when not: kube-system's ConfigMaps, and the cluster-scoped
    # kinds other than nodes (the Namespace's labels, IngressClasses), as rollout-test does
    optional = {("get", "", "configmaps")} | {
        g for g in asked
        if g[0] in ("get", "list", "watch") and g[2] != "nodes" and not _namespaced_kind(g[2])
    }  # fmt: skip
    assert asked - role - wide - set(named) - optional == set()
    assert {g for g in wide if g[0] not in ("get", "list", "watch")} <= asked
    assert {("patch", "", "nodes"), ("create", "", "pods/eviction")} <= asked
