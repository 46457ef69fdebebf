"""kubeconfig resolution as kubectl does it (files, merge, context, namespace, in-cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from svcdoctor.cluster import ClusterError, resolve


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc))
    return path


def _config(
    name: str, server: str, current: str | None = None, namespace: str | None = None
) -> dict[str, Any]:
    context: dict[str, Any] = {"cluster": name, "user": name}
    if namespace:
        context["namespace"] = namespace
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": name, "cluster": {"server": server, "certificate-authority": "ca.crt"}}
        ],
        "users": [{"name": name, "user": {"token": f"token-{name}"}}],
        "contexts": [{"name": name, "context": context}],
    }
    if current:
        doc["current-context"] = current
    return doc


def _server(target: Any, cluster: str) -> str:
    return next(c["cluster"]["server"] for c in target.config["clusters"] if c["name"] == cluster)


def test_kubeconfig_list_is_merged_first_definition_wins(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = _write(tmp_path / "a" / "config", _config("prod", "https://prod:6443", current="prod"))
    b_doc = _config("dev", "https://dev:6443", current="dev", namespace="team")
    b_doc["clusters"].append({"name": "prod", "cluster": {"server": "https://shadowed:1"}})
    b = _write(tmp_path / "b" / "config", b_doc)
    env = {"KUBECONFIG": f"{a}:{tmp_path / 'missing'}:{b}", "HOME": str(tmp_path)}

    target = resolve(env=env)
    assert target.context == "prod"  # the first file's current-context wins
    assert _server(target, "prod") == "https://prod:6443"  # first definition wins
    assert target.namespace == "default"
    assert target.sources == (str(a), str(b))  # the missing file is skipped, like kubectl

    dev = resolve(context="dev", env=env)
    assert dev.namespace == "team"  # the context's namespace
    assert resolve(context="dev", namespace="other", env=env).namespace == "other"
    # relative paths are relative to the file that defined them
    cas = {c["name"]: c["cluster"]["certificate-authority"] for c in dev.config["clusters"]}
    assert cas == {"prod": str(tmp_path / "a" / "ca.crt"), "dev": str(tmp_path / "b" / "ca.crt")}


def test_explicit_kubeconfig_beats_the_environment(tmp_path: Path) -> None:
    a = _write(tmp_path / "a.yaml", _config("a", "https://a:1", current="a"))
    b = _write(tmp_path / "b.yaml", _config("b", "https://b:1", current="b"))
    target = resolve(kubeconfig=str(b), env={"KUBECONFIG": str(a), "HOME": str(tmp_path)})
    assert target.context == "b"
    assert [c["name"] for c in target.config["contexts"]] == ["b"]


def test_home_config_is_the_default(tmp_path: Path) -> None:
    (tmp_path / ".kube").mkdir()
    _write(tmp_path / ".kube" / "config", _config("home", "https://h:1", current="home"))
    assert resolve(env={"HOME": str(tmp_path)}).context == "home"


@pytest.mark.parametrize(
    ("kwargs", "env", "message"),
    [
        ({"kubeconfig": "/nope/config"}, {}, "kubeconfig /nope/config not found"),
        ({}, {"KUBECONFIG": "/nope/a:/nope/b"}, "none of the files in KUBECONFIG"),
        ({}, {}, "no kubeconfig: pass --kubeconfig"),
        ({"context": "staging"}, None, "context 'staging' not found in"),
    ],
)
def test_errors_are_one_line(
    tmp_path: Path, kwargs: dict[str, Any], env: dict[str, str] | None, message: str
) -> None:
    if env is None:
        good = _write(tmp_path / "c.yaml", _config("prod", "https://p:1", current="prod"))
        env = {"KUBECONFIG": str(good)}
    env = {"HOME": str(tmp_path), **env}
    with pytest.raises(ClusterError, match=message) as caught:
        resolve(env=env, service_account=tmp_path / "no-account", **kwargs)
    assert "\n" not in str(caught.value)


def test_no_current_context_and_broken_files(tmp_path: Path) -> None:
    plain = _write(tmp_path / "c.yaml", _config("x", "https://x:1"))
    with pytest.raises(ClusterError, match=r"no current-context .* pass --context"):
        resolve(kubeconfig=str(plain))
    assert resolve(kubeconfig=str(plain), context="x").context == "x"
    broken = tmp_path / "broken.yaml"
    broken.write_text("clusters: [\n")
    with pytest.raises(ClusterError, match=r"broken.yaml:.*invalid YAML"):
        resolve(kubeconfig=str(broken))
    dangling = _config("x", "https://x:1", current="x")
    dangling["contexts"][0]["context"]["user"] = "ghost"
    with pytest.raises(ClusterError, match="names user 'ghost'"):
        resolve(kubeconfig=str(_write(tmp_path / "d.yaml", dangling)))


def test_in_cluster_service_account(tmp_path: Path) -> None:
    account = tmp_path / "sa"
    account.mkdir()
    (account / "token").write_text("abc")
    (account / "namespace").write_text("shop\n")
    (account / "ca.crt").write_text("")
    env = {"HOME": str(tmp_path), "KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    target = resolve(env=env, service_account=account)
    assert target.context == "in-cluster"
    assert target.namespace == "shop"
    assert _server(target, "in-cluster") == "https://10.0.0.1:443"
    assert target.config["users"][0]["user"]["tokenFile"] == str(account / "token")


def test_exec_commands_and_bad_sections(tmp_path: Path) -> None:
    doc = _config("x", "https://x:1", current="x")
    exec_ = {"apiVersion": "client.authentication.k8s.io/v1", "interactiveMode": "Never"}
    doc["users"] = [
        {"name": "x", "user": {"exec": {**exec_, "command": "bin/login"}}},
        {"name": "y", "user": {"exec": {**exec_, "command": "kubelogin"}}},
    ]
    target = resolve(kubeconfig=str(_write(tmp_path / "c.yaml", doc)))
    commands = [u["user"]["exec"]["command"] for u in target.config["users"]]
    # a path is relative to its file (client-go loader.go); a bare name is looked up on PATH
    assert commands == [str(tmp_path / "bin" / "login"), "kubelogin"]
    doc["users"] = [{"name": "x", "user": "oops"}]
    with pytest.raises(ClusterError, match=r"c.yaml: users 'x': user must be a mapping"):
        resolve(kubeconfig=str(_write(tmp_path / "c.yaml", doc)))
