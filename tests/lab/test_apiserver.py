"""The lab's Kubernetes API server against the real kubectl v1.35, lightkube and raw HTTP."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import ssl
import stat
import subprocess
import threading
import time
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode, urlparse

import pytest

from svcdoctor.lab.apiserver import ApiServer, ObjectStore
from tests.kubectl import kubectl_fixture, run_kubectl  # noqa: F401 (the kubectl fixture)

TOKEN = "lab-token"
T = TypeVar("T")


class Running:
    """An ApiServer on its own event loop in a background thread."""

    def __init__(self, store: ObjectStore, tmp: Path, **options: Any) -> None:
        self.store = store
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = ApiServer(store, TOKEN, **options)
        self.call(self.server.start())
        self.kubeconfig = tmp / "kubeconfig"
        self.server.write_kubeconfig(self.kubeconfig)
        self.tls = ssl.create_default_context(cadata=self.server.ca_pem.decode())

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(10)

    def stop(self) -> None:
        self.call(self.server.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()

    def request(
        self, path: str, token: str = TOKEN, method: str = "GET", **headers: str
    ) -> http.client.HTTPResponse:
        """A raw HTTPS request; the response is left open for streaming."""
        url = urlparse(self.server.url)
        conn = http.client.HTTPSConnection(
            url.hostname or "", url.port, context=self.tls, timeout=5
        )
        conn.request(method, path, headers={"Authorization": f"Bearer {token}", **headers})
        return conn.getresponse()

    def get(self, path: str, **query: Any) -> tuple[int, Any]:
        response = self.request(f"{path}?{urlencode(query)}" if query else path)
        return response.status, json.loads(response.read())


def pod(name: str, node: str = "node-1", phase: str = "Running", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "lab", "labels": labels or {"app": "web"}},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "lab/web:1"}]},
        "status": {"phase": phase, "podIP": "10.0.1.1"},
    }


def slice_(name: str, ready: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": "lab",
            "labels": {"kubernetes.io/service-name": "web"},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.1.1"], "conditions": {"ready": ready}}],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }


def event(name: str, about: str, reason: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "lab"},
        "involvedObject": {"kind": "Pod", "name": about, "namespace": "lab"},
        "reason": reason,
        "type": "Normal",
        "message": f"{reason} {about}",
    }


def lab_store() -> ObjectStore:
    store = ObjectStore()
    store.put({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lab"}})
    store.put({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}})
    for i, node in enumerate(("node-1", "node-2", "node-1")):
        store.put(pod(f"web-{i}", node))
    store.put(pod("load-0", phase="Pending", app="load"))
    store.put(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "lab"},
            "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]},
        }
    )
    store.put(slice_("web-abcde"))
    store.put(event("web-0.1", "web-0", "Started"))
    store.put(event("web-1.1", "web-1", "Killing"))
    store.put(
        {**event("other.1", "x", "Pulled"), "metadata": {"name": "o.1", "namespace": "kube-system"}}
    )
    store.set_logs("lab", "web-0", lambda container: f"one {container}\ntwo\nthree\n")
    return store


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    running = Running(lab_store(), tmp_path_factory.mktemp("apiserver"))
    yield running
    running.stop()


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Any]:
    """Start servers with options on a store of their own; stopped after the test."""
    started: list[Running] = []

    def start(store: ObjectStore | None = None, **options: Any) -> Running:
        started.append(Running(store or lab_store(), tmp_path, **options))
        return started[-1]

    yield start
    for running in started:
        if running.server.url and not running.loop.is_closed():
            running.stop()


def ok(kubectl: Path, lab: Running, *args: str) -> str:
    result = run_kubectl(kubectl, lab.kubeconfig, args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def names(output: str) -> list[str]:
    return [item["metadata"]["name"] for item in json.loads(output)["items"]]


# ---------------------------------------------------------------------------------------
# The store


def test_put_fills_metadata_and_replace_keeps_identity() -> None:
    store = ObjectStore()
    first = store.put(pod("a"))
    meta = first["metadata"]
    assert meta["uid"]
    assert meta["creationTimestamp"]
    assert meta["resourceVersion"] == "1"
    second = store.put(pod("a", phase="Succeeded"))["metadata"]
    assert (second["uid"], second["resourceVersion"]) == (meta["uid"], "2")
    got = store.get("v1", "Pod", "lab", "a")
    assert got is not None
    assert got["status"]["phase"] == "Succeeded"
    got["status"]["phase"] = "changed"  # a copy: the store is unaffected
    assert store.get("v1", "Pod", "lab", "a")["status"]["phase"] == "Succeeded"  # type: ignore[index]
    store.delete("v1", "Pod", "lab", "a")
    store.delete("v1", "Pod", "lab", "a")  # absent: no error
    assert store.get("v1", "Pod", "lab", "a") is None
    with pytest.raises(ValueError, match="does not serve"):
        store.put({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}})


# ---------------------------------------------------------------------------------------
# kubectl


def test_kubectl_version_and_api_resources(kubectl: Path, lab: Running) -> None:
    assert "Server Version: v1.31.4-lab" in ok(kubectl, lab, "version")
    resources = ok(kubectl, lab, "api-resources")
    for line in ("endpointslices", "discovery.k8s.io/v1", "pods", "po", "deployments", "hpa"):
        assert line in resources


def test_kubectl_get_json(kubectl: Path, lab: Running) -> None:
    out = json.loads(ok(kubectl, lab, "get", "pods,svc,endpointslices", "-o", "json"))
    kinds = [(i["kind"], i["metadata"]["name"]) for i in out["items"]]
    assert kinds == [
        ("Pod", "load-0"),
        ("Pod", "web-0"),
        ("Pod", "web-1"),
        ("Pod", "web-2"),
        ("Service", "web"),
        ("EndpointSlice", "web-abcde"),
    ]
    assert names(ok(kubectl, lab, "get", "events", "-A", "-o", "json")) == [
        "o.1",
        "web-0.1",
        "web-1.1",
    ]


def test_kubectl_get_table(kubectl: Path, lab: Running) -> None:
    out = ok(kubectl, lab, "get", "pods")
    assert out.splitlines()[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert out.splitlines()[1].split()[:4] == ["load-0", "0/1", "Pending", "0"]
    wide = ok(kubectl, lab, "get", "pods", "-o", "wide").splitlines()
    assert wide[0].split()[5:] == ["IP", "NODE", "NOMINATED", "NODE", "READINESS", "GATES"]
    assert wide[2].split()[5:] == ["10.0.1.1", "node-1", "<none>", "<none>"]
    assert [line.split()[0] for line in out.splitlines()[1:]] == [
        "load-0",
        "web-0",
        "web-1",
        "web-2",
    ]
    services = ok(kubectl, lab, "get", "svc", "-o", "wide").splitlines()
    assert services[0].split() == [
        "NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR"
    ]  # fmt: skip
    cells = services[1].split()
    assert cells[:5] == ["web", "ClusterIP", "<none>", "<none>", "80/TCP"]
    assert cells[6:] == ["app=web"]
    nodes = ok(kubectl, lab, "get", "nodes").splitlines()
    assert nodes[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert nodes[1].split()[:3] == ["node-1", "Unknown", "<none>"]  # no Ready condition
    from svcdoctor.lab.apiserver.tables import _node_cells

    unknown = {"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}
    assert _node_cells(unknown, 0.0)[0] == "NotReady"  # as kubectl's printNode
    cordoned = {"spec": {"unschedulable": True}, "status": {"conditions": [
        {"type": "Ready", "status": "True"}]}}  # fmt: skip
    assert _node_cells(cordoned, 0.0)[0] == "Ready,SchedulingDisabled"
    events = ok(kubectl, lab, "get", "events", "-A").splitlines()
    assert events[0].split() == ["NAMESPACE", "NAME", "AGE"]
    assert events[1].split()[:2] == ["kube-system", "o.1"]


def test_kubectl_selectors(kubectl: Path, lab: Running) -> None:
    def get(*args: str) -> list[str]:
        return names(ok(kubectl, lab, "get", "pods", "-o", "json", *args))

    assert get("-l", "app=web") == ["web-0", "web-1", "web-2"]
    assert get("-l", "app!=web") == ["load-0"]
    assert get("-l", "app in (load,nothing)") == ["load-0"]
    assert get("-l", "app notin (web)") == ["load-0"]
    assert get("-l", "app,!missing") == ["load-0", "web-0", "web-1", "web-2"]
    assert get("-l", "missing") == []
    assert get("--field-selector", "spec.nodeName=node-2") == ["web-1"]
    assert get("--field-selector", "status.phase!=Running,metadata.name=load-0") == ["load-0"]
    events = ok(
        kubectl, lab, "get", "events", "-A", "--field-selector", "involvedObject.name=web-1"
    )
    assert "web-1.1" in events
    assert "web-0.1" not in events
    result = run_kubectl(kubectl, lab.kubeconfig, ["get", "pods", "--field-selector", "spec.x=1"])
    assert result.returncode != 0
    assert "field label not supported: spec.x" in result.stderr


def test_kubectl_pagination(kubectl: Path, lab: Running) -> None:
    out = ok(kubectl, lab, "get", "pods", "-A", "--chunk-size=2", "-o", "json")
    assert names(out) == ["load-0", "web-0", "web-1", "web-2"]


def test_kubectl_logs(kubectl: Path, lab: Running) -> None:
    assert ok(kubectl, lab, "logs", "web-0") == "one app\ntwo\nthree\n"
    assert ok(kubectl, lab, "logs", "web-0", "--tail=1") == "three\n"
    assert ok(kubectl, lab, "logs", "web-0", "--limit-bytes=3") == "one"
    assert ok(kubectl, lab, "logs", "web-1") == ""
    missing = run_kubectl(kubectl, lab.kubeconfig, ["logs", "nope"])
    assert missing.returncode != 0
    assert 'pods "nope" not found' in missing.stderr


def test_kubectl_watch_sees_added_then_modified(kubectl: Path, lab: Running) -> None:
    command = [
        str(kubectl),
        f"--kubeconfig={lab.kubeconfig}",
        "get",
        "endpointslices",
        "-w",
        "-o",
        "json",
        "--output-watch-events",
    ]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as watch:
        watchdog = threading.Timer(15, watch.kill)  # a hung watch fails instead of blocking
        watchdog.start()
        assert watch.stdout is not None
        try:
            events = [json.loads(watch.stdout.readline())]
            lab.store.put(slice_("web-abcde", ready=False))
            events.append(json.loads(watch.stdout.readline()))
        finally:
            watchdog.cancel()
            watch.kill()
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED"]
    assert events[1]["object"]["endpoints"][0]["conditions"]["ready"] is False


def test_kubectl_wrong_token_and_writes(kubectl: Path, lab: Running, tmp_path: Path) -> None:
    config = lab.server.kubeconfig()
    config["users"][0]["user"]["token"] = "wrong"
    bad = tmp_path / "bad"
    bad.write_text(json.dumps(config))
    result = run_kubectl(kubectl, bad, ["get", "pods"])  # kubectl 1.35 words 401s in discovery
    assert result.returncode != 0
    assert "You must be logged in to the server" in result.stderr
    result = run_kubectl(kubectl, bad, ["get", "--raw", "/api/v1/namespaces/lab/pods"])
    assert result.returncode != 0
    assert "(Unauthorized)" in result.stderr
    result = run_kubectl(kubectl, lab.kubeconfig, ["delete", "service", "web"])  # read-only
    assert result.returncode != 0
    assert "MethodNotAllowed" in result.stderr


def test_kubectl_forbidden_and_unserved(kubectl: Path, fresh: Any) -> None:
    lab = fresh(forbidden={("list", "endpointslices")}, unserved={"events.k8s.io"})
    result = run_kubectl(kubectl, lab.kubeconfig, ["get", "endpointslices", "-A"])
    assert result.returncode != 0
    assert (
        'endpointslices.discovery.k8s.io is forbidden: User "system:serviceaccount:lab:svcdoctor"'
        ' cannot list resource "endpointslices" in API group "discovery.k8s.io" at the cluster'
        " scope"
    ) in result.stderr
    assert "events.k8s.io" not in ok(kubectl, lab, "api-resources")
    assert lab.get("/apis/events.k8s.io/v1/events")[0] == 404


# ---------------------------------------------------------------------------------------
# Raw HTTP


def test_raw_auth_status_and_methods(lab: Running) -> None:
    response = lab.request("/version", token="wrong")
    assert response.status == 401
    assert json.loads(response.read())["reason"] == "Unauthorized"
    assert lab.request("/healthz", token="").status == 200
    response = lab.request("/api/v1/namespaces/lab/services", method="POST")
    assert response.status == 405
    assert json.loads(response.read())["reason"] == "MethodNotAllowed"
    status, body = lab.get("/api/v1/namespaces/lab/pods/nope")
    assert (status, body["reason"], body["details"]) == (
        404,
        "NotFound",
        {"name": "nope", "kind": "pods"},
    )
    status, body = lab.get("/api/v1/pods", labelSelector="a in (b")
    assert (status, body["reason"]) == (400, "BadRequest")
    assert lab.get("/api/v1/namespaces/lab/widgets")[0] == 404


def test_raw_table_rows_carry_partial_metadata(lab: Running) -> None:
    response = lab.request(
        "/api/v1/namespaces/lab/pods?limit=1",
        Accept="application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
    )
    table = json.loads(response.read())
    assert table["kind"] == "Table"
    assert table["metadata"]["continue"]
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "Ready",
        "Status",
        "Restarts",
        "Age",
        "IP",
        "Node",
        "Nominated Node",
        "Readiness Gates",
    ]
    assert [c["priority"] for c in table["columnDefinitions"]] == [0] * 5 + [1] * 4
    row = table["rows"][0]
    assert row["cells"][0] == "load-0"
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["object"]["metadata"]["namespace"] == "lab"


def test_raw_continue_is_a_consistent_snapshot(fresh: Any) -> None:
    lab = fresh()
    _, first = lab.get("/api/v1/pods", limit=2)
    assert first["metadata"]["remainingItemCount"] == 2
    lab.store.put(pod("web-00"))  # sorts into the second page
    lab.store.delete("v1", "Pod", "lab", "web-2")
    _, second = lab.get("/api/v1/pods", limit=2, **{"continue": first["metadata"]["continue"]})
    assert [p["metadata"]["name"] for p in first["items"] + second["items"]] == [
        "load-0",
        "web-0",
        "web-1",
        "web-2",
    ]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert "continue" not in second["metadata"]
    assert lab.get("/api/v1/pods", limit=2, **{"continue": "garbage"})[0] == 400


def test_raw_watch_replays_and_expires(fresh: Any) -> None:
    lab = fresh(ObjectStore(log_size=3))
    for i in range(5):
        lab.store.put(pod(f"p-{i}"))
    lines = _watch(lab, "/api/v1/namespaces/lab/pods", resourceVersion=3, timeoutSeconds=1)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in lines] == [
        ("ADDED", "p-3"),
        ("ADDED", "p-4"),
    ]
    (gone,) = _watch(lab, "/api/v1/namespaces/lab/pods", resourceVersion=1, timeoutSeconds=1)
    assert gone["type"] == "ERROR"
    assert (gone["object"]["code"], gone["object"]["reason"]) == (410, "Expired")
    initial = _watch(lab, "/api/v1/pods", resourceVersion=0, timeoutSeconds=1)
    assert [e["object"]["metadata"]["name"] for e in initial] == [f"p-{i}" for i in range(5)]


def test_raw_compact_expires_watches_and_continues(fresh: Any) -> None:
    lab = fresh()
    _, first = lab.get("/api/v1/pods", limit=1)
    rv = int(first["metadata"]["resourceVersion"])
    lab.store.put(pod("web-0", phase="Failed"))
    lab.store.compact()
    (gone,) = _watch(lab, "/api/v1/pods", resourceVersion=rv, timeoutSeconds=1)
    assert (gone["type"], gone["object"]["code"]) == ("ERROR", 410)
    status, body = lab.get("/api/v1/pods", limit=1, **{"continue": first["metadata"]["continue"]})
    assert (status, body["reason"]) == (410, "Expired")
    assert _watch(lab, "/api/v1/pods", resourceVersion=rv + 1, timeoutSeconds=1) == []


def test_raw_watch_selector_transitions_and_bookmarks(fresh: Any) -> None:
    lab = fresh(ObjectStore(), bookmark_interval=0.2)
    lab.store.put(pod("a"))
    response = _open_watch(lab, "/api/v1/pods", labelSelector="app=web", allowWatchBookmarks=1)
    # the watch's initial state is taken after its headers are sent: wait for it, or the
    # changes below may be folded into it (as a real API server may do for resourceVersion 0)
    events: list[dict[str, Any]] = [json.loads(response.readline())]
    lab.store.put(pod("a", app="other"))  # leaves the selection
    lab.store.put(pod("a"))  # enters it again
    # bookmarks come every 0.2 s and may come first on a loaded machine: read until the
    # three changes are in (bounded: 100 lines are 20 s of bookmarks)
    while sum(e["type"] != "BOOKMARK" for e in events) < 3 and len(events) < 100:
        events.append(json.loads(response.readline()))
    assert [e["type"] for e in events if e["type"] != "BOOKMARK"] == ["ADDED", "DELETED", "ADDED"]
    while events[-1]["type"] != "BOOKMARK":
        events.append(json.loads(response.readline()))
    assert events[-1]["object"]["metadata"]["resourceVersion"] == "3"


def test_raw_concurrent_watchers_and_close(fresh: Any) -> None:
    lab = fresh()
    rv = lab.get("/api/v1/pods")[1]["metadata"]["resourceVersion"]
    watchers = [_open_watch(lab, "/api/v1/pods", resourceVersion=rv) for _ in range(20)]
    lab.store.put(pod("web-0", phase="Failed"))
    for response in watchers:
        change = json.loads(response.readline())
        assert (change["type"], change["object"]["status"]["phase"]) == ("MODIFIED", "Failed")
    started = time.monotonic()
    lab.stop()
    assert all(response.readline() == b"" for response in watchers)
    assert time.monotonic() - started < 5


def test_raw_forbidden_in_namespace_and_logs(fresh: Any) -> None:
    lab = fresh(forbidden={("get", "pods/log"), ("watch", "pods")})
    status, body = lab.get("/api/v1/namespaces/lab/pods/web-0/log")
    assert (status, body["reason"]) == (403, "Forbidden")
    assert body["message"] == (
        'pods "web-0" is forbidden: User "system:serviceaccount:lab:svcdoctor" cannot get '
        'resource "pods/log" in API group "" in the namespace "lab"'
    )
    status, body = lab.get("/api/v1/namespaces/lab/pods", watch="true")
    assert status == 403
    assert 'cannot watch resource "pods"' in body["message"]


def test_raw_timestamped_logs(fresh: Any) -> None:
    lab = fresh()
    now = time.time()
    old = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now - 600))
    new = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now - 5))
    lab.store.set_logs(
        "lab", "web-1", lambda _: f"{old}.123456789Z old\n{new}Z new\n", timestamped=True
    )
    path = "/api/v1/namespaces/lab/pods/web-1/log"
    assert lab.request(path).read() == b"old\nnew\n"
    assert lab.request(f"{path}?sinceSeconds=60").read() == b"new\n"
    assert lab.request(f"{path}?sinceSeconds=60&timestamps=true").read() == f"{new}Z new\n".encode()


def test_raw_follow_streams_whole_lines_until_close(fresh: Any) -> None:
    lab = fresh()
    written = ["first\n"]
    lab.store.set_logs("lab", "web-2", lambda _: "".join(written))
    response = lab.request("/api/v1/namespaces/lab/pods/web-2/log?follow=true")
    assert response.readline() == b"first\n"
    written.append("second\npart")
    assert response.readline() == b"second\n"
    lab.stop()
    assert response.read() == b""


def _open_watch(lab: Running, path: str, **query: Any) -> http.client.HTTPResponse:
    response = lab.request(f"{path}?{urlencode({'watch': 'true', **query})}")
    assert response.status == 200
    return response


def _watch(lab: Running, path: str, **query: Any) -> list[dict[str, Any]]:
    """Every event of a watch that ends by itself (timeoutSeconds or an error)."""
    return [json.loads(line) for line in _open_watch(lab, path, **query)]


# ---------------------------------------------------------------------------------------
# lightkube


def test_lightkube_lists_in_chunks_and_watches(lab: Running) -> None:
    from lightkube import Client, KubeConfig
    from lightkube.resources.core_v1 import Pod

    client = Client(KubeConfig.from_dict(lab.server.kubeconfig()))
    assert [p.metadata.name for p in client.list(Pod, chunk_size=1)] == [  # type: ignore[union-attr]
        "load-0",
        "web-0",
        "web-1",
        "web-2",
    ]
    rv = lab.get("/api/v1/pods")[1]["metadata"]["resourceVersion"]
    timer = threading.Timer(0.2, lambda: lab.store.put(pod("web-2", phase="Succeeded")))
    timer.start()
    for kind, changed in client.watch(Pod, namespace="lab", resource_version=rv):
        assert (kind, changed.metadata.name) == ("MODIFIED", "web-2")  # type: ignore[union-attr]
        break
    timer.join()


def test_write_kubeconfig_is_private(lab: Running) -> None:
    assert stat.S_IMODE(os.stat(lab.kubeconfig).st_mode) == 0o600
    config = lab.server.kubeconfig()
    assert config["current-context"] == "svcdoctor-lab"
    assert config["contexts"][0]["context"]["namespace"] == "lab"
