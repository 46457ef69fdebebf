"""The lab API server's Eviction API (``POST pods/NAME/eviction``) and node cordons, by raw
HTTP and by the real kubectl v1.35 (``kubectl drain``, ``cordon``, ``uncordon``); then
``lab serve``'s own drain semantics with kubectl drain (a PodDisruptionBudget honoured, the
pods replaced on the other node, the node uncordoned)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from svcdoctor.lab.apiserver import EVICTION, Admission, StatusError
from tests.kubectl import kubectl_fixture, run_kubectl  # noqa: F401 (the kubectl fixture)
from tests.lab.test_apiserver import lab_store
from tests.lab.test_apiserver_writes import Lab, deployment, ok

EVICT = "/api/v1/namespaces/lab/pods/{}/eviction"


def eviction(name: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    store = lab_store()
    store.put(deployment())
    running = Lab(store, tmp_path)
    yield running
    running.stop()


def budget(refusals: int) -> tuple[list[str], Any]:
    """An eviction handler refusing the first ``refusals`` evictions as a PDB does."""
    seen: list[str] = []

    def handle(adm: Admission) -> dict[str, Any] | None:
        seen.append(adm.name)
        if len(seen) <= refusals:
            raise StatusError(
                429,
                "TooManyRequests",
                "Cannot evict pod as it would violate the pod's disruption budget.",
                {"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget "
                             "web needs 3 healthy pods and has 3 currently"}]},
            )  # fmt: skip
        return None  # the default: the pod is deleted

    return seen, handle


def test_an_eviction_is_refused_with_429_then_deletes_the_pod(lab: Lab) -> None:
    seen, handle = budget(1)
    lab.server.admit(EVICTION, handle)
    assert lab.send("POST", EVICT.format("nope"), eviction("nope"))[0] == 404
    code, body = lab.send("POST", EVICT.format("web-0"), eviction("web-0"))
    assert code == 429
    assert body["reason"] == "TooManyRequests"
    assert "disruption budget web" in body["details"]["causes"][0]["message"]
    assert lab.store.get("v1", "Pod", "lab", "web-0") is not None
    code, body = lab.send("POST", EVICT.format("web-0"), eviction("web-0"))
    assert (code, body["status"]) == (201, "Success")
    assert lab.store.get("v1", "Pod", "lab", "web-0") is None
    code, body = lab.send("POST", EVICT.format("web-1"), eviction("web-2"))
    assert code == 400  # the body names another pod
    assert seen == ["web-0", "web-0"]


def test_discovery_lists_the_eviction_subresource_as_kubectl_looks_for_it(lab: Lab) -> None:
    code, body = lab.get("/api/v1")
    assert code == 200
    [found] = [r for r in body["resources"] if r["name"] == "pods/eviction"]
    assert (found["group"], found["version"], found["kind"]) == ("policy", "v1", "Eviction")


def test_kubectl_cordon_drain_uncordon(kubectl: Path, lab: Lab) -> None:
    cordons: list[Any] = []

    def node(adm: Admission) -> None:
        cordons.append((adm.obj.get("spec") or {}).get("unschedulable"))

    lab.server.admit("nodes", node)
    seen, handle = budget(1)
    lab.server.admit(EVICTION, handle)
    assert "node/node-1 cordoned" in ok(lab, kubectl, "cordon", "node-1")
    node_1 = lab.store.get("v1", "Node", None, "node-1")
    assert node_1 is not None
    assert node_1["spec"]["unschedulable"] is True
    # the lab's fixture pods declare no controller: kubectl drain's --pod-selector picks
    # web's, and it evicts them through the Eviction API (the first refused, retried 5 s on)
    started = time.time()
    out = ok(lab, kubectl, "drain", "node-1", "--ignore-daemonsets", "--delete-emptydir-data",
             "--force", "--pod-selector", "app=web", "--timeout", "25s")  # fmt: skip
    assert "would violate the pod's disruption budget" in out
    assert "node/node-1 drained" in out
    assert time.time() - started >= 5  # kubectl drain's retry pause
    assert sorted(set(seen)) == ["web-0", "web-2"]  # web-1 runs on node-2
    assert "node/node-1 uncordoned" in ok(lab, kubectl, "uncordon", "node-1")
    node_1 = lab.store.get("v1", "Node", None, "node-1")
    assert node_1 is not None
    assert "unschedulable" not in node_1.get("spec", {})
    assert cordons == [True, None]  # cordon, uncordon (drain found it cordoned already)


# ---- lab serve --------------------------------------------------------------------------


@pytest.mark.lab
def test_kubectl_drain_of_a_lab_serve_node_honours_the_budget(
    kubectl: Path, tmp_path: Path
) -> None:
    from tests.cluster.test_live_lab import lab_serve

    def kc(kubeconfig: Path, *args: str, timeout: float = 20) -> str:
        done = run_kubectl(kubectl, kubeconfig, args, timeout=timeout)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    def placed(kubeconfig: Path) -> dict[str, str]:
        pods = json.loads(kc(kubeconfig, "get", "pods", "-l", "app=api", "-o", "json"))["items"]
        return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}

    with lab_serve(tmp_path, "drain-fixed", "--no-load") as kubeconfig:
        before = placed(kubeconfig)
        on_0 = sorted(n for n, node in before.items() if node == "node-0")
        assert len(on_0) == 2
        out = kc(kubeconfig, "drain", "node-0", "--ignore-daemonsets", "--delete-emptydir-data",
                 "--timeout", "60s", timeout=70)  # fmt: skip
        assert "node/node-0 drained" in out
        # the PodDisruptionBudget (maxUnavailable 1 of 4): the second eviction is refused
        # until the first one's replacement is Ready, and named in the refusal's cause
        assert "would violate the pod's disruption budget" in out
        after = placed(kubeconfig)
        assert not set(on_0) & set(after)
        assert set(after.values()) == {"node-1"}  # no new pod on the cordoned node
        assert len(after) == 4
        assert kc(kubeconfig, "get", "node", "node-0", "-o", "jsonpath={.spec.unschedulable}")
        kc(kubeconfig, "uncordon", "node-0")
        flag = kc(kubeconfig, "get", "node", "node-0", "-o", "jsonpath={.spec.unschedulable}")
        assert flag.strip() == ""
    truth = json.loads((tmp_path / "truth.json").read_text())
    assert sorted(truth["deleted_pods"]) == on_0
