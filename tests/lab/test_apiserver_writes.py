"""The lab API server's writes (create, delete, deletecollection, patch, dry runs, the
admission hooks, RBAC per verb) against the real kubectl v1.35 and raw HTTP."""

from __future__ import annotations

import asyncio
import http.client
import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from svcdoctor.lab.apiserver import (
    Admission,
    ObjectStore,
    StatusError,
    Verb,
    invalid,
    json_patch,
    merge_patch,
    rbac_rules,
    strategic_merge_patch,
)
from tests.kubectl import kubectl_fixture, run_kubectl  # noqa: F401 (the kubectl fixture)
from tests.lab.test_apiserver import TOKEN, Running, lab_store

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
MANAGED = "app.kubernetes.io/managed-by"


def deployment(name: str = "web") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "lab", "generation": 1, "labels": {"app": name}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "lab/web:1"}]},
            },
        },
        "status": {"observedGeneration": 1, "replicas": 3, "readyReplicas": 3},
    }


def configmap(name: str = "agent", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels or {MANAGED: "svcdoctor"}},
        "data": {"agent.py": "print('hello')\n"},
    }


def job(image: str = "python:3.12-slim", **meta: Any) -> dict[str, Any]:
    container = {
        "name": "agent",
        "image": image,
        "command": ["python", "-I", "/svcdoctor/agent.py", "--mode", "direct"],
        "volumeMounts": [{"name": "agent", "mountPath": "/svcdoctor"}],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta or {"generateName": "svcdoctor-probe-", "labels": {MANAGED: "svcdoctor"}},
        "spec": {
            "activeDeadlineSeconds": 120,
            "ttlSecondsAfterFinished": 60,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [container],
                    "volumes": [{"name": "agent", "configMap": {"name": "agent"}}],
                }
            },
        },
    }


def agent_pod(name: str = "probe-node-1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {MANAGED: "svcdoctor"}},
        "spec": {
            "nodeName": "node-1",
            "restartPolicy": "Never",
            "containers": [{"name": "agent", "image": "python:3.12-slim"}],
        },
    }


class Lab(Running):
    """A Running server with a Deployment, raw JSON requests with bodies, and helpers to
    run code in its loop."""

    def send(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        token: str = TOKEN,
    ) -> tuple[int, Any]:
        url = urlparse(self.server.url)
        conn = http.client.HTTPSConnection(
            url.hostname or "", url.port, context=self.tls, timeout=10
        )
        data = body if isinstance(body, bytes) else None if body is None else json.dumps(body)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": content_type}
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        try:
            return response.status, json.loads(response.read())
        finally:
            conn.close()

    def kubectl(self, binary: Path, *args: str, config: Path | None = None) -> tuple[int, str]:
        result = run_kubectl(binary, config or self.kubeconfig, args, timeout=30)
        return result.returncode, result.stdout + result.stderr

    def stored(self, api_version: str, kind: str, labels: str = "") -> list[str]:
        return [o["metadata"]["name"] for o in self.store.select(api_version, kind, "lab", labels)]


def documents(text: str) -> list[Any]:
    """The JSON documents of kubectl's output, one after the other."""
    decoder, found, at = json.JSONDecoder(), [], 0
    text = text.strip()
    while at < len(text):
        doc, end = decoder.raw_decode(text, at)
        found.append(doc)
        at = end
        while at < len(text) and text[at].isspace():
            at += 1
    return found


def write_manifests(tmp: Path, *objects: dict[str, Any]) -> Path:
    path = tmp / f"objects-{time.monotonic_ns()}.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return path


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    store = lab_store()
    store.put(deployment())
    running = Lab(store, tmp_path)
    yield running
    running.stop()


def ok(lab: Lab, kubectl: Path, *args: str) -> str:
    code, out = lab.kubectl(kubectl, *args)
    assert code == 0, out
    return out


# ---------------------------------------------------------------------------------------
# kubectl


def test_kubectl_create_fills_metadata_and_get_shows_tables(kubectl: Path, lab: Lab) -> None:
    before = {o["metadata"]["name"] for o in lab.store.select("v1", "Pod", "lab")}
    manifests = write_manifests(lab.kubeconfig.parent, configmap(), job(), agent_pod())
    out = ok(lab, kubectl, "create", "-f", str(manifests), "-o", "name")
    created = out.split()
    assert created[0] == "configmap/agent"
    assert created[1].startswith("job.batch/svcdoctor-probe-")
    assert len(created[1]) == len("job.batch/svcdoctor-probe-") + 5
    assert created[2] == "pod/probe-node-1"

    name = created[1].split("/")[1]
    got = json.loads(ok(lab, kubectl, "get", "job", name, "-o", "json"))
    meta = got["metadata"]
    assert meta["namespace"] == "lab"
    assert meta["uid"]
    assert meta["creationTimestamp"]
    assert int(meta["resourceVersion"]) > 0
    assert meta["generation"] == 1
    template = got["spec"]["template"]
    assert template["metadata"]["labels"]["job-name"] == name
    assert template["metadata"]["labels"]["batch.kubernetes.io/controller-uid"] == meta["uid"]
    assert got["spec"]["selector"] == {
        "matchLabels": {"batch.kubernetes.io/controller-uid": meta["uid"]}
    }
    assert got["spec"]["backoffLimit"] == 0  # given values are kept, the rest defaulted
    assert got["spec"]["completions"] == 1
    assert template["spec"]["terminationGracePeriodSeconds"] == 30
    pod = json.loads(ok(lab, kubectl, "get", "pod", "probe-node-1", "-o", "json"))
    assert pod["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert pod["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"

    table = ok(lab, kubectl, "get", "cm").splitlines()
    assert table[0].split() == ["NAME", "DATA", "AGE"]
    assert table[1].split()[:2] == ["agent", "1"]
    table = ok(lab, kubectl, "get", "jobs").splitlines()
    assert table[0].split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert table[1].split()[:3] == [name, "Running", "0/1"]
    pods = {line.split()[0] for line in ok(lab, kubectl, "get", "pods").splitlines()[1:]}
    assert pods == before | {"probe-node-1"}


def test_kubectl_create_twice_is_already_exists(kubectl: Path, lab: Lab) -> None:
    seen: list[Admission] = []
    lab.server.admit("configmaps", seen.append)
    manifests = write_manifests(lab.kubeconfig.parent, configmap())
    ok(lab, kubectl, "create", "-f", str(manifests))
    first = lab.store.get("v1", "ConfigMap", "lab", "agent")
    code, out = lab.kubectl(kubectl, "create", "-f", str(manifests))
    assert code == 1
    assert "Error from server (AlreadyExists): error when creating" in out
    assert 'configmaps "agent" already exists' in out
    assert lab.store.get("v1", "ConfigMap", "lab", "agent") == first  # untouched
    assert len(seen) == 1  # the handler never saw the second: it could not act on it


def test_kubectl_dry_run_server_stores_nothing(kubectl: Path, lab: Lab) -> None:
    seen: list[Admission] = []
    lab.server.admit("jobs", seen.append)
    _, rv = lab.store._snapshot("jobs")
    manifests = write_manifests(lab.kubeconfig.parent, configmap(), job())
    out = ok(lab, kubectl, "create", "-f", str(manifests), "--dry-run=server", "-o", "json")
    items = documents(out)
    assert [i["kind"] for i in items] == ["ConfigMap", "Job"]
    assert items[1]["metadata"]["name"].startswith("svcdoctor-probe-")
    assert items[1]["spec"]["template"]["metadata"]["labels"]["job-name"]
    assert [(a.verb, a.dry_run) for a in seen] == [(Verb.CREATE, True)]
    assert lab.store._snapshot("jobs")[1] == rv  # no change at all
    assert lab.stored("v1", "ConfigMap") == lab.stored("batch/v1", "Job") == []
    # a dry run of a name that exists still conflicts
    again = str(write_manifests(lab.kubeconfig.parent, configmap()))
    ok(lab, kubectl, "create", "-f", again)
    code, out = lab.kubectl(kubectl, "create", "-f", again, "--dry-run=server")
    assert code == 1
    assert "AlreadyExists" in out


def test_kubectl_delete_and_delete_by_label(kubectl: Path, lab: Lab) -> None:
    other = configmap("keep", app="other")
    manifests = write_manifests(
        lab.kubeconfig.parent, configmap(), configmap("agent-2"), other, job(), agent_pod()
    )
    ok(lab, kubectl, "create", "-f", str(manifests))
    [name] = lab.stored("batch/v1", "Job")
    assert "deleted" in ok(lab, kubectl, "delete", "job", name)
    assert lab.stored("batch/v1", "Job") == []
    out = ok(lab, kubectl, "delete", "cm,pods", "-l", f"{MANAGED}=svcdoctor")
    assert 'configmap "agent" deleted' in out
    assert 'pod "probe-node-1" deleted' in out
    assert lab.stored("v1", "ConfigMap") == ["keep"]
    assert "probe-node-1" not in lab.stored("v1", "Pod")
    assert "web-0" in lab.stored("v1", "Pod")  # not selected, not deleted
    code, out = lab.kubectl(kubectl, "delete", "job", name)
    assert code == 1
    assert f'jobs.batch "{name}" not found' in out


def test_kubectl_rollout_restart_reaches_the_hook(kubectl: Path, lab: Lab) -> None:
    seen: list[Admission] = []

    def roll(admission: Admission) -> dict[str, Any]:
        seen.append(admission)  # the lab would start a rollout here; it fills the status
        return {**admission.obj, "status": {"observedGeneration": 2, "replicas": 3}}

    lab.server.admit("deployments", roll)
    out = ok(lab, kubectl, "rollout", "restart", "deployment/web")
    assert out.strip() == "deployment.apps/web restarted"
    [admission] = seen
    assert (admission.verb, admission.resource, admission.name) == (
        Verb.PATCH,
        "deployments",
        "web",
    )
    assert admission.patch_type == "strategic"
    annotations = admission.obj["spec"]["template"]["metadata"]["annotations"]
    assert RESTARTED_AT in annotations
    assert admission.old is not None
    assert "annotations" not in admission.old["spec"]["template"]["metadata"]
    stored = lab.store.get("apps/v1", "Deployment", "lab", "web")
    assert stored is not None
    assert stored["spec"]["template"]["metadata"]["annotations"] == annotations
    assert stored["spec"]["template"]["spec"]["containers"] == [
        {"name": "app", "image": "lab/web:1"}
    ]
    assert stored["metadata"]["generation"] == 2
    assert stored["status"]["observedGeneration"] == 2


def test_kubectl_hook_refuses_and_deletes_gracefully(kubectl: Path, lab: Lab) -> None:
    admissions: list[Admission] = []

    def jobs(admission: Admission) -> None:
        admissions.append(admission)
        if admission.verb == Verb.CREATE:
            image = admission.obj["spec"]["template"]["spec"]["containers"][0]["image"]
            if not image.startswith("python"):
                raise invalid(
                    admission.obj,
                    "spec.template.spec.containers[0].image",
                    image,
                    f"the lab runs only python images (the agent); got {image}",
                )

    def pods(admission: Admission) -> dict[str, Any] | None:
        if admission.verb != Verb.DELETE or admission.dry_run:
            return None
        # the process gets SIGTERM; the pod goes when it has exited
        asyncio.get_running_loop().call_later(
            0.5, lab.store.delete, "v1", "Pod", "lab", admission.name
        )
        return admission.obj

    lab.server.admit("jobs", jobs)
    lab.server.admit("pods", pods)
    code, out = lab.kubectl(
        kubectl, "create", "-f", str(write_manifests(lab.kubeconfig.parent, job("nginx:1")))
    )
    assert code == 1
    assert re.search(
        r'The Job "svcdoctor-probe-\w{5}" is invalid: spec.template.spec.containers\[0\].image: '
        r'Invalid value: "nginx:1": the lab runs only python images \(the agent\); got nginx:1',
        out,
    ), out
    assert lab.stored("batch/v1", "Job") == []

    ok(lab, kubectl, "create", "-f", str(write_manifests(lab.kubeconfig.parent, job())))
    [name] = lab.stored("batch/v1", "Job")
    ok(lab, kubectl, "delete", "job", name, "--cascade=foreground")
    assert (admissions[-1].verb, admissions[-1].propagation) == (Verb.DELETE, "Foreground")
    assert admissions[-1].obj["metadata"]["deletionTimestamp"]

    ok(lab, kubectl, "create", "-f", str(write_manifests(lab.kubeconfig.parent, agent_pod())))
    started = time.monotonic()
    out = ok(lab, kubectl, "delete", "pod", "probe-node-1", "--grace-period=5")
    assert 'pod "probe-node-1" deleted' in out
    assert time.monotonic() - started >= 0.4  # kubectl waited for the lab to remove it
    assert "probe-node-1" not in lab.stored("v1", "Pod")


def test_kubectl_logs_and_wait_find_a_jobs_pod(kubectl: Path, lab: Lab) -> None:
    """What the lab does with the hook: on a Job's create it schedules the Job's pod (the
    template's labels, an owner reference), serves its log and completes the Job; kubectl
    finds the pod through the Job's defaulted selector."""

    def run(job: dict[str, Any]) -> None:
        meta = job["metadata"]
        template = job["spec"]["template"]
        name = f"{meta['name']}-abcde"
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"]}
        owner |= {"uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}
        pod_meta = {"name": name, "namespace": "lab", "labels": template["metadata"]["labels"]}
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": pod_meta | {"ownerReferences": [owner]},
        }
        lab.store.put(pod | {"spec": template["spec"], "status": {"phase": "Succeeded"}})
        lab.store.set_logs("lab", name, lambda container: '{"agent": "done"}\n')
        done = {"type": "Complete", "status": "True"}
        status = {"succeeded": 1, "conditions": [done], "startTime": meta["creationTimestamp"]}
        lab.store.put(job | {"status": status | {"completionTime": meta["creationTimestamp"]}})

    def jobs(admission: Admission) -> None:
        if admission.verb == Verb.CREATE and not admission.dry_run:
            asyncio.get_running_loop().call_soon(run, admission.obj)

    lab.server.admit("jobs", jobs)
    ok(lab, kubectl, "create", "-f", str(write_manifests(lab.kubeconfig.parent, job(name="p"))))
    out = ok(lab, kubectl, "wait", "--for=condition=complete", "job/p", "--timeout=10s")
    assert "job.batch/p condition met" in out
    assert ok(lab, kubectl, "logs", "job/p") == '{"agent": "done"}\n'
    row = ok(lab, kubectl, "get", "job", "p").splitlines()[1].split()
    assert row[:4] == ["p", "Complete", "1/1", "0s"]


def test_kubectl_watch_sees_created_and_deleted(kubectl: Path, lab: Lab) -> None:
    ok(lab, kubectl, "create", "-f", str(write_manifests(lab.kubeconfig.parent, configmap("x"))))
    cache = lab.kubeconfig.parent / "kube-cache"
    command = [
        *("timeout", "30", str(kubectl), f"--kubeconfig={lab.kubeconfig}"),
        *(f"--cache-dir={cache}", "get", "configmaps", "--watch", "--output-watch-events"),
        *("-o", "json"),
    ]
    events: list[dict[str, Any]] = []
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as watch:
        assert watch.stdout is not None
        try:
            text = ""
            while len(events) < 3:
                line = watch.stdout.readline()
                assert line, "the watch ended early"
                text += line
                try:
                    events += documents(text)
                except ValueError:
                    continue  # an object spans lines
                text = ""
                if len(events) == 1:  # listed and watching: now create and delete
                    manifests = write_manifests(lab.kubeconfig.parent, configmap())
                    ok(lab, kubectl, "create", "-f", str(manifests))
                    ok(lab, kubectl, "delete", "-f", str(manifests))
        finally:
            watch.terminate()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "x"),
        ("ADDED", "agent"),
        ("DELETED", "agent"),
    ]


ACTIVE_ROLE = """
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: svcdoctor-active, namespace: NAMESPACE}
rules:
  - apiGroups: [""]
    resources: [pods, services]
    verbs: [get, list, watch]
  - apiGroups: [""]
    resources: [pods/log]
    verbs: [get]
  - apiGroups: [batch]
    resources: [jobs]
    verbs: [get, list, watch, create, delete]
  - apiGroups: [""]
    resources: [configmaps, pods]
    verbs: [create, delete]
  - apiGroups: [apps]
    resources: [deployments, statefulsets]
    verbs: [get, patch]
"""


def test_kubectl_rbac_per_verb(kubectl: Path, lab: Lab) -> None:
    active = lab.server.add_user(
        "system:serviceaccount:lab:svcdoctor-active", rbac_rules(ACTIVE_ROLE, "lab")
    )
    reader = lab.server.add_user(
        "system:serviceaccount:lab:reader",
        rbac_rules(ACTIVE_ROLE.split("  - apiGroups: [batch]", maxsplit=1)[0], "lab"),
    )
    configs = {}
    for user, token in (("active", active), ("reader", reader)):
        configs[user] = lab.kubeconfig.parent / f"{user}.kubeconfig"
        lab.server.write_kubeconfig(configs[user], token=token)
    manifests = str(write_manifests(lab.kubeconfig.parent, configmap(), job()))

    code, out = lab.kubectl(kubectl, "create", "-f", manifests, config=configs["reader"])
    assert code == 1
    assert (
        'configmaps is forbidden: User "system:serviceaccount:lab:reader" cannot create '
        'resource "configmaps" in API group "" in the namespace "lab"'
    ) in out
    assert 'cannot create resource "jobs" in API group "batch"' in out
    assert lab.stored("v1", "ConfigMap") == []

    ok_active = lab.kubectl(kubectl, "create", "-f", manifests, config=configs["active"])
    assert ok_active[0] == 0, ok_active[1]
    code, out = lab.kubectl(
        kubectl, "rollout", "restart", "deployment/web", config=configs["active"]
    )
    assert code == 0, out
    code, out = lab.kubectl(kubectl, "delete", "deployment", "web", config=configs["active"])
    assert code == 1
    assert 'cannot delete resource "deployments"' in out
    code, out = lab.kubectl(kubectl, "get", "cm", config=configs["active"])
    assert code == 1
    assert 'cannot list resource "configmaps"' in out
    code, out = lab.kubectl(kubectl, "get", "pods", "-A", config=configs["active"])
    assert code == 1
    assert "at the cluster scope" in out
    code, out = lab.kubectl(
        kubectl, "delete", "cm", "agent", "-n", "kube-system", config=configs["active"]
    )
    assert code == 1
    assert 'in the namespace "kube-system"' in out


def test_the_active_role_files_are_enforced(kubectl: Path, lab: Lab) -> None:
    """deploy/rbac/svcdoctor-probe.yaml and svcdoctor-rollout-test.yaml, read as the lab
    enforces them: the agent's Job and ConfigMap are allowed, a bare Pod is not; only the
    rollout-test role restarts, and only the workload it names."""
    rbac = Path(__file__).resolve().parents[2] / "deploy" / "rbac"
    probe = (rbac / "svcdoctor-probe.yaml").read_text()
    rollout = (rbac / "svcdoctor-rollout-test.yaml").read_text()
    configs = {}
    for user, text in (
        ("probe", probe),
        ("rollout", rollout.replace("WORKLOAD", "web")),
        ("other", rollout.replace("WORKLOAD", "not-web")),
    ):
        token = lab.server.add_user(user, rbac_rules(text, "lab"))
        configs[user] = lab.kubeconfig.parent / f"{user}.kubeconfig"
        lab.server.write_kubeconfig(configs[user], token=token)
    manifests = str(write_manifests(lab.kubeconfig.parent, configmap(), job()))
    code, out = lab.kubectl(kubectl, "create", "-f", manifests, config=configs["probe"])
    assert code == 0, out
    pod = str(write_manifests(lab.kubeconfig.parent, agent_pod()))
    code, out = lab.kubectl(kubectl, "create", "-f", pod, config=configs["probe"])
    assert code == 1
    assert 'cannot create resource "pods"' in out
    code, out = lab.kubectl(
        kubectl, "rollout", "restart", "deployment/web", config=configs["probe"]
    )
    assert code == 1
    assert "forbidden" in out
    code, out = lab.kubectl(
        kubectl, "rollout", "restart", "deployment/web", config=configs["other"]
    )
    assert code == 1
    assert "forbidden" in out
    code, out = lab.kubectl(
        kubectl, "rollout", "restart", "deployment/web", config=configs["rollout"]
    )
    assert code == 0, out
    code, out = lab.kubectl(kubectl, "delete", "cm,job", "-l", MANAGED, config=configs["probe"])
    assert code == 0, out
    assert lab.stored("batch/v1", "Job") == []
    for user in ("probe", "rollout"):
        code, out = lab.kubectl(kubectl, "delete", "deployment", "web", config=configs[user])
        assert code == 1
        assert "forbidden" in out
        code, out = lab.kubectl(kubectl, "get", "nodes", config=configs[user])
        assert code == 1
        assert "forbidden" in out


# ---------------------------------------------------------------------------------------
# Raw HTTP


CM = "/api/v1/namespaces/lab/configmaps"
JOBS = "/apis/batch/v1/namespaces/lab/jobs"
PODS = "/api/v1/namespaces/lab/pods"


def test_raw_invalid_bodies_are_real_statuses(lab: Lab) -> None:
    status, body = lab.send("POST", PODS, {**agent_pod(), "spec": {"containers": []}})
    assert (status, body["kind"], body["reason"], body["code"]) == (422, "Status", "Invalid", 422)
    assert body["message"] == 'Pod "probe-node-1" is invalid: spec.containers: Required value'
    assert body["details"] == {
        "name": "probe-node-1",
        "kind": "Pod",
        "causes": [
            {
                "reason": "FieldValueRequired",
                "message": "Required value",
                "field": "spec.containers",
            }
        ],
    }
    bad = configmap("Not_A_Name")
    status, body = lab.send("POST", CM, bad)
    assert status == 422
    assert body["message"].startswith(
        'ConfigMap "Not_A_Name" is invalid: metadata.name: Invalid value: "Not_A_Name": '
        "a lowercase RFC 1123 subdomain"
    )
    broken = job()
    broken["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    broken["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["name"] = "nope"
    status, body = lab.send("POST", JOBS, broken)
    assert status == 422
    assert [c["field"] for c in body["details"]["causes"]] == [
        "spec.template.spec.containers[0].volumeMounts[0].name",
        "spec.template.spec.restartPolicy",
    ]
    assert 'Unsupported value: "Always": supported values: "OnFailure", "Never"' in body["message"]
    assert body["details"]["group"] == "batch"
    status, body = lab.send("POST", CM, {"metadata": {}})
    assert (status, body["reason"]) == (400, "BadRequest")
    status, body = lab.send(
        "POST", CM, {**configmap(), "metadata": {"name": "x", "namespace": "o"}}
    )
    assert (status, body["reason"]) == (400, "BadRequest")
    status, body = lab.send("POST", CM, b"{not json")
    assert (status, body["reason"]) == (400, "BadRequest")
    status, body = lab.send("POST", CM, b"data: x", content_type="application/yaml")
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")
    status, body = lab.send("POST", "/api/v1/namespaces/nowhere/configmaps", configmap())
    assert (status, body["reason"], body["message"]) == (
        404,
        "NotFound",
        'namespaces "nowhere" not found',
    )
    status, body = lab.send("POST", "/api/v1/namespaces/lab/services", {})
    assert (status, body["reason"]) == (405, "MethodNotAllowed")
    status, body = lab.send("POST", CM, configmap(), token="wrong")
    assert status == 401
    status, body = lab.send("POST", f"{CM}?dryRun=Some", configmap())
    assert (status, body["reason"]) == (400, "BadRequest")
    assert lab.stored("v1", "ConfigMap") == []


def test_raw_patches_of_each_type(lab: Lab) -> None:
    assert lab.send("POST", CM, configmap())[0] == 201
    path = f"{CM}/agent"
    status, body = lab.send(
        "PATCH",
        path,
        {"data": {"extra": "1", "agent.py": None}, "metadata": {"labels": {"x": "y"}}},
        "application/merge-patch+json",
    )
    assert status == 200
    assert body["data"] == {"extra": "1"}
    assert body["metadata"]["labels"] == {MANAGED: "svcdoctor", "x": "y"}
    rv = body["metadata"]["resourceVersion"]
    ops = [
        {"op": "test", "path": "/data/extra", "value": "1"},
        {"op": "add", "path": "/metadata/annotations", "value": {"a~b/c": "1"}},
        {"op": "replace", "path": "/metadata/annotations/a~0b~1c", "value": "2"},
        {"op": "move", "from": "/data/extra", "path": "/data/moved"},
    ]
    status, body = lab.send("PATCH", path, ops, "application/json-patch+json")
    assert status == 200, body
    assert body["data"] == {"moved": "1"}
    assert body["metadata"]["annotations"] == {"a~b/c": "2"}
    assert int(body["metadata"]["resourceVersion"]) > int(rv)
    failing = [{"op": "test", "path": "/data/moved", "value": "2"}]
    status, body = lab.send("PATCH", path, failing, "application/json-patch+json")
    assert (status, body["reason"]) == (422, "Invalid")
    stale = {"metadata": {"resourceVersion": rv, "labels": {"z": "1"}}}
    status, body = lab.send("PATCH", path, stale, "application/merge-patch+json")
    assert (status, body["reason"]) == (409, "Conflict")
    assert "the object has been modified" in body["message"]
    renamed = {"metadata": {"name": "other", "uid": "forged"}}
    status, body = lab.send("PATCH", path, renamed, "application/strategic-merge-patch+json")
    assert status == 200
    assert body["metadata"]["name"] == "agent"
    assert body["metadata"]["uid"] != "forged"
    status, body = lab.send("PATCH", path, {}, "application/apply-patch+yaml")
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")
    status, body = lab.send("PATCH", "/api/v1/namespaces/lab/services/web", {})
    assert (status, body["reason"]) == (405, "MethodNotAllowed")
    status, body = lab.send("PATCH", f"{CM}/nope", {}, "application/merge-patch+json")
    assert (status, body["reason"]) == (404, "NotFound")
    dry = {"data": {"dry": "1"}}
    status, body = lab.send("PATCH", f"{path}?dryRun=All", dry, "application/merge-patch+json")
    assert status == 200
    assert body["data"]["dry"] == "1"
    stored = lab.store.get("v1", "ConfigMap", "lab", "agent")
    assert stored is not None
    assert "dry" not in stored["data"]


def test_raw_delete_options_preconditions_and_collections(lab: Lab) -> None:
    seen: list[Admission] = []

    def record(admission: Admission) -> None:
        seen.append(admission)

    lab.server.admit("pods", record)
    for i in range(3):
        assert lab.send("POST", PODS, agent_pod(f"probe-{i}"))[0] == 201
    options = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 7}
    status, body = lab.send("DELETE", f"{PODS}/probe-0?propagationPolicy=Orphan", options)
    assert status == 200
    assert body["status"] == "Success"
    assert body["details"]["name"] == "probe-0"
    assert (seen[-1].grace_seconds, seen[-1].propagation) == (7, "Orphan")
    assert seen[-1].obj["metadata"]["deletionGracePeriodSeconds"] == 7
    status, body = lab.send("DELETE", f"{PODS}/probe-1", {"preconditions": {"uid": "other"}})
    assert (status, body["reason"]) == (409, "Conflict")
    assert "Precondition failed: UID in precondition: other" in body["message"]
    status, body = lab.send("DELETE", f"{PODS}/probe-1?dryRun=All")
    assert status == 200
    assert seen[-1].dry_run
    assert seen[-1].obj["metadata"]["deletionGracePeriodSeconds"] == 30  # the pod's default
    assert sorted(lab.stored("v1", "Pod", f"{MANAGED}=svcdoctor")) == ["probe-1", "probe-2"]
    status, body = lab.send("DELETE", f"{PODS}?labelSelector={MANAGED}%3Dsvcdoctor")
    assert status == 200
    assert body["kind"] == "PodList"
    assert [i["metadata"]["name"] for i in body["items"]] == ["probe-1", "probe-2"]
    assert lab.stored("v1", "Pod", f"{MANAGED}=svcdoctor") == []
    assert "web-0" in lab.stored("v1", "Pod")
    status, body = lab.send("DELETE", f"{PODS}/web-0?propagationPolicy=Sideways")
    assert (status, body["reason"]) == (400, "BadRequest")
    status, body = lab.send("DELETE", "/apis/apps/v1/namespaces/lab/deployments/web")
    assert (status, body["reason"]) == (405, "MethodNotAllowed")


def test_raw_handler_may_store_its_own_version_and_schedule_work(lab: Lab) -> None:
    """A handler's object is stored instead; work it schedules finds the object stored."""
    found: list[dict[str, Any] | None] = []

    async def jobs(admission: Admission) -> dict[str, Any] | None:
        await asyncio.sleep(0)
        if admission.verb != Verb.CREATE or admission.dry_run:
            return None
        loop = asyncio.get_running_loop()
        loop.call_soon(
            lambda: found.append(lab.store.get("batch/v1", "Job", "lab", admission.name))
        )
        return {**admission.obj, "status": {"active": 1}}

    def broken(admission: Admission) -> None:
        raise RuntimeError("the lab's bug")

    lab.server.admit("configmaps", broken)
    status, body = lab.send("POST", CM, configmap())
    assert (status, body["reason"]) == (500, "InternalError")
    assert body["message"] == "Internal error occurred: RuntimeError: the lab's bug"
    assert lab.stored("v1", "ConfigMap") == []
    lab.server.admit("jobs", jobs)
    with pytest.raises(ValueError, match="already has"):
        lab.server.admit("jobs", jobs)
    with pytest.raises(ValueError, match="does not write"):
        lab.server.admit("services", jobs)
    status, body = lab.send("POST", JOBS, job(name="probe"))
    assert status == 201
    assert body["status"] == {"active": 1}
    deadline = time.monotonic() + 5
    while not found and time.monotonic() < deadline:
        time.sleep(0.05)
    assert found
    assert found[0] is not None
    assert found[0]["status"] == {"active": 1}


def test_raw_refusal_status_passes_through(lab: Lab) -> None:
    def refuse(admission: Admission) -> None:
        raise StatusError(409, "Conflict", "a rollout is already running")

    lab.server.admit("deployments", refuse)
    patch = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: "now"}}}}}
    status, body = lab.send(
        "PATCH",
        "/apis/apps/v1/namespaces/lab/deployments/web",
        patch,
        "application/strategic-merge-patch+json",
    )
    assert (status, body["reason"], body["message"]) == (
        409,
        "Conflict",
        "a rollout is already running",
    )
    stored = lab.store.get("apps/v1", "Deployment", "lab", "web")
    assert stored is not None
    assert "annotations" not in stored["spec"]["template"]["metadata"]


def test_raw_discovery_lists_write_verbs_and_openapi(lab: Lab) -> None:
    _, core = lab.get("/api/v1")
    verbs = {r["name"]: r["verbs"] for r in core["resources"]}
    assert verbs["configmaps"] == [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "watch",
    ]
    assert verbs["services"] == ["get", "list", "watch"]
    _, batch = lab.get("/apis/batch/v1")
    assert [(r["name"], r["kind"]) for r in batch["resources"]] == [("jobs", "Job")]
    _, apps = lab.get("/apis/apps/v1")
    assert "patch" in {r["name"]: r["verbs"] for r in apps["resources"]}["deployments"]
    _, index = lab.get("/openapi/v3")
    assert index["paths"]["apis/batch/v1"]["serverRelativeURL"] == "/openapi/v3/apis/batch/v1"
    _, doc = lab.get("/openapi/v3/apis/batch/v1")
    [operation] = [p["patch"] for p in doc["paths"].values()]
    assert operation["x-kubernetes-group-version-kind"]["kind"] == "Job"
    assert {"dryRun", "fieldValidation"} <= {p["name"] for p in operation["parameters"]}


# ---------------------------------------------------------------------------------------
# Pure parts


def test_strategic_merge_patch_merges_lists_by_key() -> None:
    target: dict[str, Any] = {
        "spec": {
            "containers": [
                {"name": "app", "image": "a:1", "env": [{"name": "X", "value": "1"}]},
                {"name": "side", "image": "s:1"},
            ],
            "tolerations": [{"key": "a"}],
        }
    }
    patch = {
        "spec": {
            "containers": [
                {"name": "app", "env": [{"name": "Y", "value": "2"}]},
                {"name": "side", "$patch": "delete"},
                {"name": "new", "image": "n:1"},
            ],
            "tolerations": [{"key": "b"}],
            "$setElementOrder/containers": [{"name": "app"}, {"name": "new"}],
        }
    }
    assert strategic_merge_patch(target, patch) == {
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "a:1",
                    "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}],
                },
                {"name": "new", "image": "n:1"},
            ],
            "tolerations": [{"key": "b"}],  # no merge key: replaced
        }
    }
    replaced = strategic_merge_patch({"a": {"b": 1, "c": 2}}, {"a": {"$patch": "replace", "d": 3}})
    assert replaced == {"a": {"d": 3}}
    assert target["spec"]["containers"][1] == {"name": "side", "image": "s:1"}  # untouched


def test_merge_and_json_patch_follow_their_rfcs() -> None:
    # RFC 7386 appendix A, a few of its cases
    assert merge_patch({"a": "b"}, {"a": "c"}) == {"a": "c"}
    assert merge_patch({"a": "b", "b": "c"}, {"a": None}) == {"b": "c"}
    assert merge_patch({"a": [{"b": "c"}]}, {"a": [1]}) == {"a": [1]}
    assert merge_patch({"e": None}, {"a": 1}) == {"e": None, "a": 1}
    assert merge_patch({"a": "foo"}, "bar") == "bar"
    # RFC 6902 appendix A, a few of its cases
    assert json_patch({"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1", "value": "q"}]) == {
        "foo": ["bar", "q", "baz"]
    }
    assert json_patch({"foo": ["bar"]}, [{"op": "add", "path": "/foo/-", "value": ["x"]}]) == {
        "foo": ["bar", ["x"]]
    }
    assert json_patch({"baz": "q", "foo": "b"}, [{"op": "remove", "path": "/baz"}]) == {"foo": "b"}
    assert json_patch(
        {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
        [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
    ) == {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}}
    with pytest.raises(ValueError, match="missing"):
        json_patch({"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}])
    with pytest.raises(ValueError, match="out of bounds"):
        json_patch({"foo": []}, [{"op": "replace", "path": "/foo/0", "value": 1}])
    with pytest.raises(ValueError, match="failed"):
        json_patch({"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}])
    with pytest.raises(ValueError, match="unknown"):
        json_patch({}, [{"op": "frobnicate", "path": "/a"}])


_KEYS = st.sampled_from(["a", "b", "c", "spec", "x/y", "~0"])
_SCALARS = st.one_of(st.integers(-3, 3), st.text("xyz", max_size=2), st.booleans())
_MAPS = st.recursive(
    st.dictionaries(_KEYS, _SCALARS, max_size=3),
    lambda inner: st.dictionaries(_KEYS, st.one_of(_SCALARS, inner), max_size=3),
    max_leaves=12,
)
_PATCHES = st.recursive(
    st.dictionaries(_KEYS, st.one_of(_SCALARS, st.none()), max_size=3),
    lambda inner: st.dictionaries(_KEYS, st.one_of(_SCALARS, st.none(), inner), max_size=3),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(_MAPS, _PATCHES)
def test_patches_agree_on_maps(target: dict[str, Any], patch: dict[str, Any]) -> None:
    """Without lists, a strategic merge patch is a merge patch; and the JSON patch that
    replaces the whole document with the result gives the same object. Neither changes
    its inputs."""
    before = json.dumps([target, patch], sort_keys=True)
    merged = merge_patch(target, patch)
    assert strategic_merge_patch(target, patch) == merged
    assert json_patch(target, [{"op": "replace", "path": "", "value": merged}]) == merged
    assert json.dumps([target, patch], sort_keys=True) == before
    for key, value in patch.items():  # RFC 7386: null removes, other values land
        assert key not in merged if value is None else key in merged


@settings(max_examples=200, deadline=None)
@given(_MAPS, _KEYS, _SCALARS)
def test_json_patch_add_then_remove_is_identity(
    target: dict[str, Any], key: str, value: Any
) -> None:
    pointer = "/" + key.replace("~", "~0").replace("/", "~1")
    added = json_patch(target, [{"op": "add", "path": pointer, "value": value}])
    assert added[key] == value
    if key not in target:
        assert json_patch(added, [{"op": "remove", "path": pointer}]) == target


def test_rbac_rules_read_roles_and_cluster_roles() -> None:
    text = """
kind: ClusterRole
metadata: {name: r}
rules: [{apiGroups: [""], resources: [nodes], verbs: [list]}]
---
kind: Role
metadata: {name: r, namespace: NAMESPACE}
rules:
  - {apiGroups: [batch], resources: ["*"], verbs: [create]}
  - {apiGroups: [""], resources: [configmaps], verbs: [get], resourceNames: [kube-proxy]}
---
kind: RoleBinding
metadata: {name: r}
"""
    nodes, jobs, named = rbac_rules(text, "shop")
    assert nodes.namespace is None
    assert nodes.allows("list", "", "nodes", None, None)
    assert not nodes.allows("get", "", "nodes", None, "n")
    assert jobs.allows("create", "batch", "jobs", "shop", None)
    assert not jobs.allows("create", "batch", "jobs", "other", None)
    assert not jobs.allows("create", "", "pods", "shop", None)
    assert named.allows("get", "", "configmaps", "shop", "kube-proxy")
    assert not named.allows("get", "", "configmaps", "shop", "other")
    assert not named.allows("list", "", "configmaps", "shop", None)


def test_store_select_and_create_conflicts() -> None:
    store = ObjectStore()
    for name, app in (("b", "x"), ("a", "x"), ("c", "y")):
        store.put(
            {
                **configmap(name, app=app),
                "metadata": {"name": name, "namespace": "lab", "labels": {"app": app}},
            }
        )
    assert [o["metadata"]["name"] for o in store.select("v1", "ConfigMap", "lab", "app=x")] == [
        "a",
        "b",
    ]
    assert store.select("v1", "ConfigMap", "other") == []
    with pytest.raises(StatusError) as refused:
        store._write(configmap("a") | {"metadata": {"name": "a", "namespace": "lab"}}, new=True)
    assert refused.value.code == 409
    threads = [
        threading.Thread(
            target=lambda i=i: store.put(
                {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"j{i}"}}
            )
        )
        for i in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(store.select("batch/v1", "Job")) == 4
