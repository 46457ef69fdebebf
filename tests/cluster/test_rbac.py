"""The RBAC files grant exactly what scan and collect ask of the API, and nothing else."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

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
