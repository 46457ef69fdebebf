"""``svcdoctor collect``: the pure filters and manifest, and the bundle written over a
``ClusterReader`` fed real-shaped objects and logs (``tests/fixtures/cluster/collect``),
read back by diagnose's own reader."""

from __future__ import annotations

import _thread
import asyncio
import copy
import json
import queue
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from click.testing import CliRunner

from svcdoctor.cli import cli
from svcdoctor.cluster import ClusterError, Forbidden, WatchEvent
from svcdoctor.cluster.collect import (
    SEEN,
    BundleError,
    Request,
    ServiceNotFound,
    check_out,
    collect,
    manifest,
    merge_events,
    upstream_names,
    watch_record,
)
from svcdoctor.cluster.meshlogs import envoy_lines_for, ingress_nginx_lines, request_lines
from svcdoctor.cluster.resources import RESOURCES
from svcdoctor.evidence import read_evidence
from svcdoctor.evidence.kubectl import CHANGE_SEEN, TRIGGER_TIME
from svcdoctor.model import SourceSummary
from tests.cluster.conftest import serve

if TYPE_CHECKING:
    from tests.cluster.conftest import Served

FIXTURES = Path(__file__).parent.parent / "fixtures" / "cluster" / "collect"
NGINX_POD = ("ingress-nginx", "ingress-nginx-controller-5f8d9c7b6-abcde", "controller")


def _fixture_objects() -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads((FIXTURES / "cluster.json").read_text())["items"]
    return items


def _resource(obj: dict[str, Any]) -> str:
    return next(
        key
        for key, r in RESOURCES.items()
        if r.kind == obj["kind"] and r.api_version == obj["apiVersion"]
    )


def _matches(obj: dict[str, Any], labels: str | None, fields: str | None) -> bool:
    meta = obj.get("metadata") or {}
    have = meta.get("labels") or {}
    for term in filter(None, (labels or "").split(",")):
        key, _, value = term.partition("=")
        if have.get(key) != value:
            return False
    for term in filter(None, (fields or "").split(",")):
        key, _, value = term.partition("=")
        assert key == "metadata.name", key
        if meta.get("name") != value:
            return False
    return True


class FakeReader:
    """A ``ClusterReader`` over objects in memory; ``apply`` changes them as the API would
    and tells every open watch. ``forbidden`` holds (verb, resource, namespace) triples."""

    context = "fake"
    namespace = "shop"

    def __init__(
        self,
        objects: list[dict[str, Any]],
        logs: dict[tuple[str, str, str], str] | None = None,
        forbidden: set[tuple[str, str, str | None]] | None = None,
        unserved: set[str] | None = None,
    ) -> None:
        self.store: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
        for obj in objects:
            self._put(obj)
        self.logs_of = dict(logs or {})
        self.forbidden = forbidden or set()
        self.unserved = unserved or set()
        self.watchers: list[tuple[str, queue.Queue[WatchEvent]]] = []
        self.lock = threading.Lock()
        self.log_calls: list[tuple[str, str, str | None, int | None]] = []

    def _put(self, obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        resource = _resource(obj)
        self.store.setdefault(resource, {})[(meta.get("namespace", ""), meta["name"])] = obj
        return resource

    def _check(self, verb: str, resource: str, namespace: str | None) -> None:
        if (verb, resource, namespace) in self.forbidden:
            raise Forbidden(verb, resource, namespace)

    def apply(self, kind: str, obj: dict[str, Any]) -> None:
        """ADDED/MODIFIED/DELETED ``obj``, seen by the open watches."""
        meta = obj["metadata"]
        with self.lock:
            if kind == "DELETED":
                resource = _resource(obj)
                self.store[resource].pop((meta["namespace"], meta["name"]), None)
                self.logs_of = {k: v for k, v in self.logs_of.items() if k[1] != meta["name"]}
            else:
                resource = self._put(obj)
            for watched, events in self.watchers:
                if watched == resource:
                    events.put(WatchEvent(kind, copy.deepcopy(obj), time.time()))

    def version(self) -> dict[str, str]:
        return {"gitVersion": "v1.35.0", "major": "1", "minor": "35", "platform": "linux/amd64"}

    def serves(self, resource: str) -> bool:
        return resource not in self.unserved

    def list(
        self,
        resource: str,
        namespace: str | None = None,
        labels: str | None = None,
        fields: str | None = None,
    ) -> list[dict[str, Any]]:
        self._check("list", resource, namespace)
        with self.lock:
            return [
                copy.deepcopy(obj)
                for (ns, _), obj in sorted(self.store.get(resource, {}).items())
                if namespace in (None, ns) and _matches(obj, labels, fields)
            ]

    def get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        self._check("get", resource, namespace)
        with self.lock:
            found = self.store.get(resource, {}).get((namespace or "", name))
            return copy.deepcopy(found)

    def watch(
        self,
        resource: str,
        namespace: str | None = None,
        labels: str | None = None,
        fields: str | None = None,
        until: float | None = None,
        on_gap: Any = None,
    ) -> Iterator[WatchEvent]:
        self._check("watch", resource, namespace)
        events: queue.Queue[WatchEvent] = queue.Queue()
        with self.lock:
            self.watchers.append((resource, events))
        for obj in self.list(resource, namespace, labels, fields):
            yield WatchEvent("ADDED", obj, time.time())
        while until is None or time.time() < until:
            try:
                event = events.get(timeout=0.05)
            except queue.Empty:
                continue
            meta = event.object["metadata"]
            if namespace in (None, meta.get("namespace")) and _matches(
                event.object, labels, fields
            ):
                yield event

    def logs(
        self,
        namespace: str,
        pod: str,
        container: str | None = None,
        since_seconds: int | None = None,
        limit_bytes: int | None = None,
    ) -> str:
        self._check("get", "pods/log", namespace)
        self.log_calls.append((namespace, pod, container, since_seconds))
        with self.lock:
            text = self.logs_of.get((namespace, pod, container or ""))
        if text is None:
            raise ClusterError(f'pods "{pod}" not found')
        return text


def _logs() -> dict[tuple[str, str, str], str]:
    sidecar = (FIXTURES / "istio-proxy.log").read_text()
    return {
        NGINX_POD: (FIXTURES / "ingress-nginx-controller.log").read_text(),
        ("shop", "api-7d9f8b6c5-x2x4q", "istio-proxy"): sidecar,
        ("shop", "api-7d9f8b6c5-x2x4q", "app"): "listening on :8080\n",
        ("shop", "loadgen-6b7c8d9e0-zzzzz", "load"): (FIXTURES / "client.log").read_text(),
    }


@pytest.fixture
def fake() -> FakeReader:
    return FakeReader(_fixture_objects(), _logs())


def _names(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir())


def _read_back(out: Path) -> Any:
    """What diagnose reads from the bundle; every file must be read."""
    evidence = read_evidence([str(out)])
    assert evidence.problems == ()
    return evidence


# ---------------------------------------------------------------- pure parts


def test_upstream_names_are_namespace_service_port_by_number_and_name() -> None:
    service = _fixture_objects()[0]
    assert upstream_names(service) == {"shop-api-80", "shop-api-http"}


def test_ingress_nginx_lines_keep_only_this_service() -> None:
    text = (FIXTURES / "ingress-nginx-controller.log").read_text()
    access, errors = ingress_nginx_lines(
        text, frozenset({"shop-api-80"}), frozenset({"10.244.1.7"})
    )
    assert [line.split()[0] for line in access] == ["10.0.0.5", "10.0.0.6", "10.0.0.7"]
    # 10.244.2.9 and 10.244.6.6 (a pod gone before collect) are named by kept access lines;
    # 10.244.9.9 is another Service's backend
    assert [line.split("upstream: ")[1][:22] for line in errors] == [
        '"http://10.244.2.9:808',
        '"http://10.244.6.6:808',
    ]


def test_ingress_nginx_no_live_upstreams_names_the_upstream() -> None:
    line = (
        "2026/12/02 09:09:31 [error] 31#31: *9 no live upstreams while connecting to upstream, "
        'client: 10.0.0.6, server: _, request: "GET / HTTP/1.1", '
        'upstream: "http://shop-api-80/", host: "shop.example.com"'
    )
    assert ingress_nginx_lines(line, frozenset({"shop-api-80"}), frozenset()) == ([], [line])


def test_request_lines_keep_rows_and_drop_the_rest() -> None:
    found = request_lines((FIXTURES / "client.log").read_text())
    assert found is not None
    fmt, lines = found
    assert fmt == "jsonl"
    assert len(lines) == 4
    assert all('"outcome"' in line for line in lines)


def test_request_lines_csv_keeps_header_and_rows_of_its_width() -> None:
    text = "booting\nts,outcome,backend\n1.5,ok,10.0.0.1:80\nnot,a,row,at all\n2.5,reset,x\n"
    assert request_lines(text) == (
        "csv",
        ["ts,outcome,backend", "1.5,ok,10.0.0.1:80", "2.5,reset,x"],
    )


def test_request_lines_none_without_request_rows() -> None:
    assert request_lines("hello\nworld\n") is None
    assert request_lines("noise\nts,outcome\n") is None


def test_envoy_lines_for_keep_inbound_and_this_service() -> None:
    found = request_lines((FIXTURES / "istio-proxy.log").read_text())
    assert found is not None
    fmt, lines = found
    assert fmt == "envoy"
    assert len(lines) == 3  # Envoy's own log lines left out
    kept = envoy_lines_for(lines, "api", "shop")
    assert len(kept) == 2
    assert all("inbound|8080||" in line for line in kept)
    outbound = (
        '[2026-12-02T09:09:30.409Z] "GET / HTTP/1.1" 200 - x '
        "outbound|80||api.shop.svc.cluster.local"
    )
    assert envoy_lines_for([outbound], "api", "shop") == [outbound]


def test_merge_events_takes_the_precise_view_once() -> None:
    events = [o for o in _fixture_objects() if o["kind"] == "Event"]
    core = [e for e in events if e["apiVersion"] == "v1"]
    new = [e for e in events if e["apiVersion"] == "events.k8s.io/v1"]
    merged = merge_events(core, new)
    assert [(e["apiVersion"], e["reason"]) for e in merged] == [
        ("events.k8s.io/v1", "Killing"),  # only this view has the microsecond eventTime
        ("v1", "SuccessfulCreate"),
    ]
    assert merge_events(core, []) == core
    assert merge_events([], new) == new


def test_watch_record_stamps_the_seen_time() -> None:
    slice_ = next(o for o in _fixture_objects() if o["kind"] == "EndpointSlice")
    seen = 1796202571.25
    first = watch_record(WatchEvent("ADDED", slice_, seen), initial=True)
    notes = first["object"]["metadata"]["annotations"]
    assert first["type"] == "ADDED"
    assert notes[SEEN] == "2026-12-02T09:09:31.250000Z"
    assert notes[TRIGGER_TIME] == "2026-12-02T09:10:02Z"  # its last change, before collect
    changed = watch_record(WatchEvent("MODIFIED", slice_, seen), initial=False)
    notes = changed["object"]["metadata"]["annotations"]
    assert notes[CHANGE_SEEN] == notes[SEEN]
    assert notes[TRIGGER_TIME] == "2026-12-02T09:10:02Z"  # the controller's, untouched
    assert slice_["metadata"]["annotations"] == {TRIGGER_TIME: "2026-12-02T09:10:02Z"}


def test_check_out(tmp_path: Path) -> None:
    assert check_out(tmp_path / "new") is False
    assert check_out(tmp_path) is False
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(BundleError, match=r"not a collect bundle \(notes.txt\)"):
        check_out(tmp_path)
    (tmp_path / "notes.txt").unlink()
    (tmp_path / "pods.json").write_text("{}")
    with pytest.raises(BundleError):  # bundle-like names without collect.json: not ours
        check_out(tmp_path)
    (tmp_path / "collect.json").write_text(json.dumps({"svcdoctor_collect": 1}))
    assert check_out(tmp_path) is True
    (tmp_path / "requests.csv").write_text("ts,outcome\n")
    with pytest.raises(BundleError, match=r"requests.csv"):
        check_out(tmp_path)
    file = tmp_path / "file"
    file.write_text("")
    with pytest.raises(BundleError, match="not a directory"):
        check_out(file)


def test_manifest_lists_files_rows_and_span(tmp_path: Path) -> None:
    sources = [
        SourceSummary(str(tmp_path / "pods.json"), "kubectl-json", 3, 100.0, 200.0),
        SourceSummary(str(tmp_path / "collect.json"), "collect-manifest", 0),
        SourceSummary(str(tmp_path / "service.json"), "manifest", 0),
    ]
    result = manifest(
        tmp_path,
        sources,
        [f"{tmp_path}/x.log: not a recognised evidence format"],
        {"service": "shop/api", "notes": ["a note"]},
    )
    assert result["svcdoctor_collect"] == 1
    assert result["service"] == "shop/api"
    assert [f["file"] for f in result["files"]] == ["pods.json", "service.json"]
    assert result["files"][0] == {
        "file": "pods.json",
        "format": "kubectl-json",
        "rows": 3,
        "start": "1970-01-01T00:01:40.000Z",
        "end": "1970-01-01T00:03:20.000Z",
    }
    assert result["span"] == {
        "start": "1970-01-01T00:01:40.000Z",
        "end": "1970-01-01T00:03:20.000Z",
    }
    assert result["notes"] == ["a note", "diagnose skips x.log: not a recognised evidence format"]


# ---------------------------------------------------------------- over a reader


def test_collect_writes_a_bundle_diagnose_reads_whole(fake: FakeReader, tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    request = Request("shop", "api", out, since=600, client_logs="app.kubernetes.io/component=load")
    result = collect(fake, request)
    assert _names(out) == [
        "client-loadgen-6b7c8d9e0-zzzzz.jsonl",
        "collect.json",
        "endpointslices.json",
        "events.json",
        "ingress-nginx-ingress-nginx-controller-5f8d9c7b6-abcde.error.log",
        "ingress-nginx-ingress-nginx-controller-5f8d9c7b6-abcde.log",
        "istio-proxy-api-7d9f8b6c5-x2x4q.log",
        "owners.json",
        "pods.json",
        "service.json",
    ]
    evidence = _read_back(out)
    formats = {Path(s.path).name: (s.format, s.rows) for s in evidence.sources}
    assert formats["collect.json"] == ("collect-manifest", 0)
    assert formats["pods.json"] == ("kubectl-json", 3)
    assert formats["client-loadgen-6b7c8d9e0-zzzzz.jsonl"] == ("jsonl", 4)
    assert formats["istio-proxy-api-7d9f8b6c5-x2x4q.log"] == ("envoy", 2)
    nginx = "ingress-nginx-ingress-nginx-controller-5f8d9c7b6-abcde"
    assert formats[f"{nginx}.log"][0] == "nginx-access"
    assert formats[f"{nginx}.error.log"] == ("nginx-error", 2)
    # pods with their termination states, owners read as manifests (lint joins in)
    pods = {p.name: p for p in evidence.pods}
    assert sorted(pods) == ["api-7d9f8b6c5-m3n4b", "api-7d9f8b6c5-q8w7e", "api-7d9f8b6c5-x2x4q"]
    assert [e.exit_code for e in pods["api-7d9f8b6c5-q8w7e"].exits] == [137]
    assert evidence.replicas_hint == 3
    assert evidence.inventory is not None
    assert {e.reason for e in evidence.events} >= {"Killing", "SuccessfulCreate"}
    killing = [e for e in evidence.events if e.reason == "Killing"]
    assert len(killing) == 1
    assert killing[0].resolution == 0.0  # the events.k8s.io view, microseconds
    owners = json.loads((out / "owners.json").read_text())
    assert [o["kind"] for o in owners["items"]] == ["Deployment", "ReplicaSet"]
    assert (
        "managedFields" not in json.loads((out / "pods.json").read_text())["items"][0]["metadata"]
    )
    # the manifest: on disk and returned
    assert json.loads((out / "collect.json").read_text()) == result
    assert result["service"] == "shop/api"
    assert result["server_version"] == "v1.35.0"
    assert result["complete"] is True
    assert result["watch_seconds"] is None
    assert result["span"]["start"] is not None
    assert {f["file"] for f in result["files"]} == set(_names(out)) - {"collect.json"}
    # logs read over --since, the controller's whole, the sidecar's only
    assert (*NGINX_POD[:2], "controller") in {c[:3] for c in fake.log_calls}
    assert all(c[3] is not None and c[3] >= 600 for c in fake.log_calls)


def test_collect_replaces_an_earlier_bundle_and_refuses_other_dirs(
    fake: FakeReader, tmp_path: Path
) -> None:
    out = tmp_path / "bundle"
    collect(fake, Request("shop", "api", out, client_logs="app.kubernetes.io/component=load"))
    collect(fake, Request("shop", "api", out))
    assert "client-loadgen-6b7c8d9e0-zzzzz.jsonl" not in _names(out)  # not mixed with old
    _read_back(out)
    other = tmp_path / "other"
    other.mkdir()
    (other / "data.csv").write_text("x\n")
    with pytest.raises(BundleError):
        collect(fake, Request("shop", "api", other))
    assert _names(other) == ["data.csv"]


def test_collect_unknown_service(fake: FakeReader, tmp_path: Path) -> None:
    with pytest.raises(ServiceNotFound, match=r"^service shop/nope not found$"):
        collect(fake, Request("shop", "nope", tmp_path / "b"))
    assert not (tmp_path / "b").exists()


def test_collect_tolerates_forbidden_logs_and_controllers(tmp_path: Path) -> None:
    cluster_wide = {("list", "pods", None)}
    fake = FakeReader(_fixture_objects(), _logs(), forbidden=cluster_wide)
    result = collect(fake, Request("shop", "api", tmp_path / "a"))
    assert any("ingress-nginx" in f["file"] for f in result["files"])  # its namespace, then
    fake = FakeReader(
        _fixture_objects(),
        _logs(),
        forbidden={*cluster_wide, ("list", "pods", "ingress-nginx"), ("get", "pods/log", "shop")},
    )
    result = collect(fake, Request("shop", "api", tmp_path / "b"))
    notes = " | ".join(result["notes"])
    assert "ingress-nginx controllers not searched: forbidden: cannot list pods" in notes
    assert "logs of api-7d9f8b6c5-x2x4q: forbidden: cannot get pods/log" in notes
    assert not any(f["file"].endswith(".log") for f in result["files"])
    _read_back(tmp_path / "b")


def test_collect_falls_back_to_endpoints(tmp_path: Path) -> None:
    endpoints = {
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": "api", "namespace": "shop", "uid": "ep-uid-1"},
        "subsets": [
            {
                "addresses": [
                    {
                        "ip": "10.244.1.7",
                        "targetRef": {"kind": "Pod", "name": "api-7d9f8b6c5-x2x4q"},
                    }
                ],
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            }
        ],
    }
    objects = [o for o in _fixture_objects() if o["kind"] != "EndpointSlice"] + [endpoints]
    fake = FakeReader(objects, _logs(), unserved={"endpointslices"})
    result = collect(fake, Request("shop", "api", tmp_path))
    assert "endpoints.json" in _names(tmp_path)
    assert "endpointslices.json" not in _names(tmp_path)
    assert any("core Endpoints read instead" in n for n in result["notes"])
    _read_back(tmp_path)


def test_collect_service_without_selector_has_the_pods_its_endpoints_name(
    tmp_path: Path,
) -> None:
    objects = _fixture_objects()
    del objects[0]["spec"]["selector"]
    result = collect(FakeReader(objects, _logs()), Request("shop", "api", tmp_path, watch=0.3))
    assert "the Service has no selector: its pods are listed, not watched" in result["notes"]
    names = {p.name for p in _read_back(tmp_path).pods}
    assert names == {"api-7d9f8b6c5-m3n4b", "api-7d9f8b6c5-q8w7e", "api-7d9f8b6c5-x2x4q"}


def play_rollout(api: Served) -> None:
    """After a second, the changes of ``_rollout`` on the served API, 0.1 s apart."""
    time.sleep(1.0)
    for kind, obj in _rollout():
        meta = obj["metadata"]
        if kind == "DELETED":
            api.call(api.store.delete, obj["apiVersion"], obj["kind"], "shop", meta["name"])
        else:
            api.put(obj)
        time.sleep(0.1)


def _rollout() -> list[tuple[str, dict[str, Any]]]:
    """A pod replaced as a rollout does it: deletion, endpoint terminating, SIGKILL at the
    end of the grace period, the pod gone and its address removed, a new pod."""
    objects = _fixture_objects()
    old = next(o for o in objects if o["metadata"]["name"] == "api-7d9f8b6c5-x2x4q")
    slice_ = next(o for o in objects if o["kind"] == "EndpointSlice")
    deleting = copy.deepcopy(old)
    deleting["metadata"].update(
        deletionTimestamp="2026-12-02T09:20:30Z", deletionGracePeriodSeconds=30
    )
    terminating = copy.deepcopy(slice_)
    terminating["endpoints"][0]["conditions"] = {
        "ready": False,
        "serving": True,
        "terminating": True,
    }
    killed = copy.deepcopy(deleting)
    killed["status"]["containerStatuses"] = [
        {
            "name": "app",
            "ready": False,
            "restartCount": 0,
            "state": {
                "terminated": {
                    "exitCode": 137,
                    "reason": "Error",
                    "finishedAt": "2026-12-02T09:20:30Z",
                }
            },
        }
    ]
    removed = copy.deepcopy(terminating)
    removed["endpoints"] = removed["endpoints"][1:]
    fresh = copy.deepcopy(old)
    fresh["metadata"].update(name="api-7d9f8b6c5-new01", uid="pod-uid-4")
    fresh["status"]["podIP"] = "10.244.5.5"
    steps = [
        ("MODIFIED", deleting),
        ("MODIFIED", terminating),
        ("MODIFIED", killed),
        ("DELETED", killed),
        ("MODIFIED", removed),
        ("ADDED", fresh),
    ]
    for i, (_, obj) in enumerate(steps):  # as the API server numbers them
        obj["metadata"]["resourceVersion"] = str(2001 + i)
    return steps


def _check_rollout_bundle(out: Path) -> None:
    evidence = _read_back(out)
    pods = {p.name: p for p in evidence.pods}
    gone = pods["api-7d9f8b6c5-x2x4q"]  # deleted during the watch: its last state kept
    assert [(e.exit_code, e.reason) for e in gone.exits] == [(137, "Error")]
    assert gone.deleted_at is not None
    assert "api-7d9f8b6c5-new01" in pods
    changes = [(c.address, c.ready, c.terminating, c.removed) for c in evidence.endpoints]
    assert ("10.244.1.7", False, True, False) in changes
    assert ("10.244.1.7", False, True, True) in changes
    stamped = [c.ts for c in evidence.endpoints if c.address == "10.244.1.7" and not c.ready]
    assert all(ts is not None and abs(ts - time.time()) < 60 for ts in stamped)  # seen, now
    stream = [json.loads(line) for line in (out / "pods.json").read_text().splitlines()]
    assert [r["type"] for r in stream].count("DELETED") == 1
    assert all(SEEN in r["object"]["metadata"]["annotations"] for r in stream)
    # the terminating pod's sidecar log, read before it went
    assert "istio-proxy-api-7d9f8b6c5-x2x4q.log" in _names(out)


def test_collect_watch_records_a_rollout(fake: FakeReader, tmp_path: Path) -> None:
    def rollout() -> None:
        time.sleep(0.4)
        for kind, obj in _rollout():
            fake.apply(kind, obj)
            time.sleep(0.05)

    mutator = threading.Thread(target=rollout)
    mutator.start()
    result = collect(fake, Request("shop", "api", tmp_path, watch=1.5))
    mutator.join()
    assert 1.0 <= result["watch_seconds"] < 5
    _check_rollout_bundle(tmp_path)


def test_ctrl_c_ends_the_watch_and_the_bundle_is_complete(fake: FakeReader, tmp_path: Path) -> None:
    timer = threading.Timer(0.5, _thread.interrupt_main)
    timer.start()
    started = time.time()
    result = collect(fake, Request("shop", "api", tmp_path, watch=60))
    assert time.time() - started < 10
    assert result["complete"] is True
    assert result["watch_seconds"] < 5
    assert any("Ctrl-C" in n for n in result["notes"])
    assert "pods.json" in _names(tmp_path)
    _read_back(tmp_path)


# ---------------------------------------------------------------- command line


@pytest.fixture
def connected(fake: FakeReader, monkeypatch: pytest.MonkeyPatch) -> FakeReader:
    monkeypatch.setattr("svcdoctor.cluster.api.connect", lambda **_: fake)
    return fake


def test_cli_json_manifest_then_diagnose(connected: FakeReader, tmp_path: Path) -> None:
    out = tmp_path / "b"
    runner = CliRunner()
    done = runner.invoke(cli, ["collect", "-n", "shop", "api", "--out", str(out), "-o", "json"])
    assert done.exit_code == 0, done.output
    result = json.loads(done.output)
    assert result["service"] == "shop/api"
    assert result["since_seconds"] == 3600
    text = runner.invoke(cli, ["collect", "api", "--out", str(out), "--since", "2m"])
    assert text.exit_code == 0, text.output
    assert f"next: svcdoctor diagnose {out}" in text.output
    assert "pods.json" in text.output
    diagnosed = runner.invoke(cli, ["diagnose", str(out), "--format", "json"])
    assert diagnosed.exit_code == 0, diagnosed.output
    assert json.loads(diagnosed.output)["summary"]["skipped_inputs"] == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "svcdoctor: error: service shop/nope not found\n"),
        (["api", "--since", "soon"], None),
    ],
)
def test_cli_errors(
    connected: FakeReader, tmp_path: Path, args: list[str], message: str | None
) -> None:
    done = CliRunner().invoke(cli, ["collect", *args, "--out", str(tmp_path / "b")])
    assert done.exit_code == 2
    if message:
        assert done.output == message


def test_cli_refuses_a_foreign_out_before_connecting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreachable(**_: Any) -> None:
        raise AssertionError("connected")

    monkeypatch.setattr("svcdoctor.cluster.api.connect", unreachable)
    (tmp_path / "mine.txt").write_text("")
    done = CliRunner().invoke(cli, ["collect", "api", "--out", str(tmp_path)])
    assert done.exit_code == 2
    assert done.output.count("\n") == 1
    assert "not a collect bundle (mine.txt)" in done.output


def test_cli_cluster_error_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(**_: Any) -> None:
        raise ClusterError("cannot reach https://127.0.0.1:1: connection refused")

    monkeypatch.setattr("svcdoctor.cluster.api.connect", unreachable)
    done = CliRunner().invoke(cli, ["collect", "api", "--out", str(tmp_path / "b")])
    assert done.exit_code == 2
    assert done.output == "svcdoctor: error: cannot reach https://127.0.0.1:1: connection refused\n"


def test_collect_and_diagnose_through_the_lab_api_server(api: Served, tmp_path: Path) -> None:
    """The real path: kubeconfig, HTTPS, paginated lists, watches, pods/log."""
    logs = _logs()
    for obj in _fixture_objects():
        api.put(obj)
    for ns, pod in {k[:2] for k in logs}:
        source = {c: text for (n, p, c), text in logs.items() if (n, p) == (ns, pod)}
        api.call(api.store.set_logs, ns, pod, lambda c, s=source: s.get(c or "", ""))

    out = tmp_path / "bundle"
    mutator = threading.Thread(target=play_rollout, args=(api,))
    mutator.start()
    args = ["collect", "--kubeconfig", str(api.kubeconfig), "-n", "shop", "api"]
    args += ["--out", str(out), "--watch", "3", "-o", "json"]
    args += ["--client-logs", "app.kubernetes.io/component=load"]
    done = CliRunner().invoke(cli, args)
    mutator.join()
    assert done.exit_code == 0, done.output
    result = json.loads(done.output)
    assert result["server_version"] == "v1.31.4-lab"
    assert 2.5 <= result["watch_seconds"] < 8
    _check_rollout_bundle(out)
    files = {f["file"] for f in result["files"]}
    assert "client-loadgen-6b7c8d9e0-zzzzz.jsonl" in files
    assert "ingress-nginx-ingress-nginx-controller-5f8d9c7b6-abcde.log" in files
    diagnosed = CliRunner().invoke(cli, ["diagnose", str(out), "--format", "json"])
    assert diagnosed.exit_code == 0, diagnosed.output
    summary = json.loads(diagnosed.output)["summary"]
    assert summary["skipped_inputs"] == []
    assert summary["deletions"] >= 1


def test_a_server_lost_mid_watch_leaves_an_honest_incomplete_bundle(tmp_path: Path) -> None:
    """The API server goes away during --watch: the bundle keeps what was seen, says what
    is missing (once, not per step), collect exits 3, and diagnose says so first and does
    not turn the objects it never got into findings (no SVD207)."""
    for api in serve(tmp_path):
        for obj in _fixture_objects():
            api.put(obj)

        def lose(served: Served = api) -> None:
            time.sleep(1.5)
            asyncio.run_coroutine_threadsafe(served.server.close(), served.loop).result(20)

        out = tmp_path / "bundle"
        killer = threading.Thread(target=lose)
        killer.start()
        args = ["collect", "--kubeconfig", str(api.kubeconfig), "-n", "shop", "api"]
        started = time.time()
        done = CliRunner().invoke(cli, [*args, "--out", str(out), "--watch", "4", "-o", "json"])
        killer.join()
        assert done.exit_code == 3, done.output
        assert time.time() - started < 30
        result = json.loads(done.output)
        assert result["complete"] is False
        missing = " | ".join(result["missing"])
        assert "watch of" in missing
        assert "cannot reach the API server" in missing
        assert "skipped, the API server is unreachable" in missing
        assert sum("owner" in m for m in result["missing"]) <= 1
        assert json.loads((out / "collect.json").read_text())["complete"] is False
        diagnosed = CliRunner().invoke(cli, ["diagnose", str(out)])
        assert diagnosed.exit_code == 0, diagnosed.output
        assert diagnosed.output.startswith("INCOMPLETE evidence")
        assert "SVD207" not in diagnosed.output
        as_json = json.loads(CliRunner().invoke(cli, ["diagnose", str(out), "-o", "json"]).output)
        assert as_json["summary"]["incomplete"]
