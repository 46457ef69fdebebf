"""The API reader against a real HTTPS Kubernetes-shaped server: pages, watches, 410,
credentials and the one-line errors."""

from __future__ import annotations

import socket
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from svcdoctor.cluster import ClusterError, Forbidden
from svcdoctor.cluster import api as api_module
from svcdoctor.cluster.api import connect
from svcdoctor.cluster.credentials import CredentialPlugin
from tests.cluster.conftest import Served, serve

API_V1 = "client.authentication.k8s.io/v1"


def pod(name: str, namespace: str = "shop", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {"app": "api"}},
        "spec": {"containers": [{"name": "app", "image": "app:1"}], "nodeName": "node-0"},
        "status": {"phase": "Running", "podIP": "10.0.0.1"},
    }


def test_lists_in_pages_with_selectors(api: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    api.put(*(pod(f"api-{i:04d}") for i in range(250)))
    api.put(pod("worker", app="worker"), pod("other-ns", namespace="default"))
    monkeypatch.setattr(api_module, "PAGE_SIZE", 40)
    reader = connect(kubeconfig=str(api.kubeconfig))
    pages = 0
    send = reader._http.send  # type: ignore[attr-defined]

    def counting(request: Any, **kw: Any) -> Any:
        nonlocal pages
        pages += "limit" in str(request.url)
        return send(request, **kw)

    reader._http.send = counting  # type: ignore[attr-defined]
    pods = reader.list("pods", "shop", labels="app=api")
    assert len(pods) == 250
    assert pages == 7  # 250 objects in pages of 40
    assert {p["kind"] for p in pods} == {"Pod"}
    assert pods[0]["apiVersion"] == "v1"
    assert len(reader.list("pods")) == 252  # every namespace
    assert [p["metadata"]["name"] for p in reader.list("pods", "shop", labels="app!=api")] == [
        "worker"
    ]
    named = reader.list("pods", None, fields="metadata.namespace=default")
    assert [p["metadata"]["name"] for p in named] == ["other-ns"]
    assert reader.get("pods", "shop", "worker") is not None
    assert reader.get("pods", "shop", "nope") is None
    assert reader.version()["gitVersion"].startswith("v1.")
    assert reader.serves("endpointslices")
    assert reader.serves("pods")


def test_watch_sees_changes_and_ends_at_its_deadline(api: Served) -> None:
    api.put(pod("api-0"))
    reader = connect(kubeconfig=str(api.kubeconfig))
    seen: list[tuple[str, str]] = []
    started = time.time()

    def consume() -> None:
        for event in reader.watch("pods", "shop", until=time.time() + 3):
            seen.append((event.type, event.object["metadata"]["name"]))

    thread = threading.Thread(target=consume)
    thread.start()
    time.sleep(0.5)
    changed = pod("api-0")
    changed["status"]["phase"] = "Succeeded"
    api.put(changed, pod("api-1"))
    api.call(api.store.delete, "v1", "Pod", "shop", "api-1")
    thread.join(timeout=15)
    assert not thread.is_alive()
    assert seen == [
        ("ADDED", "api-0"),
        ("MODIFIED", "api-0"),
        ("ADDED", "api-1"),
        ("DELETED", "api-1"),
    ]
    assert time.time() - started < 8


def test_watch_relists_after_410_gone(tmp_path: Path) -> None:
    for api in serve(tmp_path, log_size=10):
        _relists_after_410(api)


def _relists_after_410(api: Served) -> None:
    api.put(pod("api-0"), pod("api-1"))
    reader = connect(kubeconfig=str(api.kubeconfig))
    events = reader.watch("pods", "shop", until=time.time() + 5)
    first = [next(events), next(events)]
    assert {e.type for e in first} == {"ADDED"}
    # while the reader is between its list and its watch, the server forgets that version
    for i in range(30):
        changed = pod("api-0")
        changed["metadata"]["labels"]["round"] = str(i)
        api.put(changed)
    api.call(api.store.delete, "v1", "Pod", "shop", "api-1")  # 31 changes: 10 are kept
    after = [next(events), next(events)]
    assert [(e.type, e.object["metadata"]["name"]) for e in after] == [
        ("MODIFIED", "api-0"),
        ("DELETED", "api-1"),
    ]
    assert after[0].object["metadata"]["labels"]["round"] == "29"
    events.close()


def test_logs(api: Served) -> None:
    api.put(pod("api-0"))
    api.call(api.store.set_logs, "shop", "api-0", lambda container: "line 1\nline 2\n")
    reader = connect(kubeconfig=str(api.kubeconfig))
    assert reader.logs("shop", "api-0", "app") == "line 1\nline 2\n"


def _with_user(path: Path, user: dict[str, Any]) -> Path:
    doc = yaml.safe_load(path.read_text())
    doc["users"][0]["user"] = user
    out = path.with_name("edited.kubeconfig")
    out.write_text(yaml.safe_dump(doc))
    return out


def test_wrong_token_is_one_line(api: Served) -> None:
    wrong = _with_user(api.kubeconfig, {"token": "not-the-token"})
    with pytest.raises(ClusterError, match=r"unauthorized: .* rejected the credentials") as err:
        connect(kubeconfig=str(wrong)).list("pods", "shop")
    assert "\n" not in str(err.value)


def test_exec_credential_plugin(api: Served, tmp_path: Path) -> None:
    plugin = tmp_path / "credential-plugin"
    plugin.write_text(
        f"#!{sys.executable}\nimport json\nprint(json.dumps({{"
        '"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",'
        f' "status": {{"token": "{api.token}"}}}}))\n'
    )
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    config = _with_user(
        api.kubeconfig,
        {"exec": {"apiVersion": API_V1, "command": str(plugin), "interactiveMode": "Never"}},
    )
    api.put(pod("api-0"))
    assert len(connect(kubeconfig=str(config)).list("pods", "shop")) == 1


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("import time; time.sleep(30)", "gave no credentials within 1 s"),
        ("print('')", "printed no ExecCredential"),
        ("import sys; sys.exit('login required')", "failed (1): login required"),
        (None, "No such file or directory"),
    ],
)
def test_failing_credential_plugins_are_one_line_and_bounded(
    api: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str | None, message: str
) -> None:
    monkeypatch.setattr(CredentialPlugin, "MIN_TIMEOUT", 0.0)
    plugin = tmp_path / "plugin"
    if script is not None:
        plugin.write_text(f"#!{sys.executable}\n{script}\n")
        plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    config = _with_user(
        api.kubeconfig,
        {"exec": {"apiVersion": API_V1, "command": str(plugin), "interactiveMode": "Never"}},
    )
    started = time.time()
    with pytest.raises(ClusterError) as err:
        connect(kubeconfig=str(config), timeout=1.0).list("pods", "shop")
    assert message in str(err.value)
    assert "\n" not in str(err.value)
    assert time.time() - started < 10


def test_unreachable_server_is_bounded(tmp_path: Path) -> None:
    # a listener that never accepts: the TCP handshake completes, TLS never does
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(0)
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    for port, message in (
        (hung.getsockname()[1], "did not answer within 1 s"),
        (closed_port, "cannot reach"),
    ):
        doc = {
            "current-context": "x",
            "clusters": [{"name": "x", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
            "users": [{"name": "x", "user": {"token": "t"}}],
            "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
        }
        path = tmp_path / f"k{port}"
        path.write_text(yaml.safe_dump(doc))
        started = time.time()
        with pytest.raises(ClusterError, match=message):
            connect(kubeconfig=str(path), timeout=1.0).version()
        assert time.time() - started < 5
    hung.close()


def test_forbidden_names_the_verb_the_resource_and_the_role(tmp_path: Path) -> None:
    for served in serve(tmp_path, forbidden={("list", "endpointslices")}):
        reader = connect(kubeconfig=str(served.kubeconfig))
        assert reader.list("pods", "shop") == []
        with pytest.raises(Forbidden) as err:
            reader.list("endpointslices", "shop")
        assert str(err.value) == (
            "forbidden: cannot list endpointslices in namespace shop; "
            "grant the read role in deploy/rbac/svcdoctor-read.yaml"
        )


def test_unserved_group_is_reported(tmp_path: Path) -> None:
    for served in serve(tmp_path, unserved={"discovery.k8s.io"}):
        reader = connect(kubeconfig=str(served.kubeconfig))
        assert reader.serves("endpoints")
        assert not reader.serves("endpointslices")


# ---- the writes of the active commands ------------------------------------------------


def test_creates_patches_and_deletes(api: Served) -> None:
    from svcdoctor.cluster.api import connect_active

    writer = connect_active(kubeconfig=str(api.kubeconfig), namespace="shop")
    body = {"metadata": {"name": "cm", "labels": {"app.kubernetes.io/managed-by": "svcdoctor"}},
            "data": {"a": "1"}}  # fmt: skip
    assert writer.create("configmaps", "shop", body, dry_run=True)["metadata"]["name"] == "cm"
    assert writer.list("configmaps", "shop") == []  # a dry run stores nothing
    created = writer.create("configmaps", "shop", body)
    assert created["metadata"]["uid"]
    assert created["kind"] == "ConfigMap"
    with pytest.raises(api_module.ApiStatus) as exists:
        writer.create("configmaps", "shop", body)
    assert exists.value.code == 409
    assert "\n" not in str(exists.value)
    merged = writer.patch("configmaps", "shop", "cm", {"data": {"b": "2"}}, "merge")
    assert merged["data"] == {"a": "1", "b": "2"}
    strategic = writer.patch("configmaps", "shop", "cm", {"metadata": {"annotations": {"x": "y"}}})
    assert strategic["metadata"]["annotations"] == {"x": "y"}
    jsonp = writer.patch("configmaps", "shop", "cm", [{"op": "remove", "path": "/data/a"}], "json")
    assert jsonp["data"] == {"b": "2"}
    with pytest.raises(ValueError, match="patch type"):
        writer.patch("configmaps", "shop", "cm", {}, "apply")
    assert writer.delete("configmaps", "shop", "cm") is True
    assert writer.delete("configmaps", "shop", "cm") is False  # gone already: not an error
    for i in range(3):
        labels = {"run": "r1" if i < 2 else "r2"}
        writer.create("configmaps", "shop", {"metadata": {"name": f"c{i}", "labels": labels}})
    writer.delete_collection("configmaps", "shop", "run=r1")
    assert [c["metadata"]["name"] for c in writer.list("configmaps", "shop")] == ["c2"]
    with pytest.raises(ValueError, match="selector"):
        writer.delete_collection("configmaps", "shop", "")
    assert {("create", "configmaps"), ("patch", "configmaps"), ("delete", "configmaps"),
            ("deletecollection", "configmaps")} <= writer.used  # fmt: skip


def test_a_forbidden_write_names_the_verb_and_the_active_role(tmp_path: Path) -> None:
    from svcdoctor.cluster.api import ACTIVE_RBAC_FILE, ROLLOUT_RBAC_FILE, connect_active

    for served in serve(tmp_path, forbidden={("create", "jobs"), ("patch", "deployments")}):
        writer = connect_active(kubeconfig=str(served.kubeconfig), namespace="shop")
        with pytest.raises(Forbidden) as caught:
            writer.create("jobs", "shop", {"metadata": {"name": "j"}, "spec": {}})
        assert str(caught.value) == (
            f"forbidden: cannot create jobs in namespace shop; run with the role in "
            f"{ACTIVE_RBAC_FILE} (rollout-test: {ROLLOUT_RBAC_FILE})"
        )
        with pytest.raises(Forbidden, match="cannot patch deployments"):
            writer.patch("deployments", "shop", "api", {"spec": {}})
    for served in serve(tmp_path / "drain", forbidden={("patch", "nodes")}):
        writer = connect_active(kubeconfig=str(served.kubeconfig), namespace="shop")
        with pytest.raises(Forbidden) as caught:
            writer.patch("nodes", "", "node-0", {"spec": {"unschedulable": True}})
        assert str(caught.value) == (
            "forbidden: cannot patch nodes cluster-wide; run with the ClusterRole in "
            "deploy/rbac/svcdoctor-drain.yaml"
        )


def test_follows_a_log_as_it_grows_until_the_time_bound(api: Served) -> None:
    from svcdoctor.cluster.api import connect_active

    api.put(pod("agent-x"))
    lines: list[str] = []
    api.store.set_logs("shop", "agent-x", lambda _c: "".join(f"{n}\n" for n in lines))
    writer = connect_active(kubeconfig=str(api.kubeconfig), namespace="shop")
    lines += ["one", "two"]

    def grow() -> None:
        time.sleep(0.8)
        lines.append("three")

    threading.Thread(target=grow, daemon=True).start()
    start = time.time()
    got = []
    for line in writer.follow_logs("shop", "agent-x", until=time.time() + 3):
        got.append(line)
    assert got[:3] == ["one", "two", "three"]
    assert time.time() - start < 3 + 2  # ends by the bound, not by the server
    assert list(writer.follow_logs("shop", "agent-x", until=time.time() - 1)) == []
