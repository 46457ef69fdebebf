"""Which cluster, as kubectl decides it: kubeconfig files, context, namespace.

kubectl's loading rules, which lightkube only partly follows (it reads one file and tries
the in-cluster account *first*): ``--kubeconfig`` alone when given; else every file of
``$KUBECONFIG`` (``:``-separated, missing ones skipped) merged — for each cluster, user and
context name the first file that defines it wins, and so does the first
``current-context``; else ``~/.kube/config``; else the in-cluster service account. Relative
paths in a file are relative to that file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from svcdoctor.cluster.reader import ClusterError

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_PATH_FIELDS = {
    "clusters": ("cluster", ("certificate-authority",)),
    "users": ("user", ("client-certificate", "client-key", "tokenFile")),
}


@dataclass(frozen=True, slots=True)
class Target:
    """The resolved choice: a kubeconfig (merged, with absolute paths), its context and
    namespace, and where it came from (for messages)."""

    config: dict[str, Any]
    context: str
    namespace: str
    sources: tuple[str, ...]


def resolve(
    kubeconfig: str | None = None,
    context: str | None = None,
    namespace: str | None = None,
    env: Mapping[str, str] | None = None,
    service_account: Path = SERVICE_ACCOUNT,
) -> Target:
    """Pick the kubeconfig, context and namespace like kubectl; ``ClusterError`` otherwise."""
    env = os.environ if env is None else env
    if kubeconfig:
        files = [Path(kubeconfig).expanduser()]
        if not files[0].is_file():
            raise ClusterError(f"kubeconfig {kubeconfig} not found")
    elif env.get("KUBECONFIG"):
        files = [Path(p).expanduser() for p in env["KUBECONFIG"].split(os.pathsep) if p]
        files = [p for p in files if p.is_file()]
        if not files:
            raise ClusterError(f"none of the files in KUBECONFIG={env['KUBECONFIG']} exists")
    else:
        home = Path(env.get("HOME", "~")).expanduser() / ".kube" / "config"
        files = [home] if home.is_file() else []
    if not files:
        if context is None and _in_cluster(env, service_account):
            return _service_account_target(env, service_account, namespace)
        raise ClusterError(
            "no kubeconfig: pass --kubeconfig, set KUBECONFIG or create ~/.kube/config"
        )
    merged = merge([(str(f), _read(f)) for f in files])
    name = context or merged.get("current-context")
    sources = tuple(str(f) for f in files)
    if not name:
        raise ClusterError(f"no current-context in {', '.join(sources)}: pass --context")
    contexts = {c["name"]: c.get("context") or {} for c in merged["contexts"]}
    if name not in contexts:
        known = ", ".join(sorted(contexts)) or "none"
        raise ClusterError(
            f"context {name!r} not found in {', '.join(sources)} (contexts: {known})"
        )
    chosen = contexts[name]
    clusters = {c["name"] for c in merged["clusters"]}
    if chosen.get("cluster") not in clusters:
        raise ClusterError(f"context {name!r} names cluster {chosen.get('cluster')!r}, not defined")
    users = {u["name"] for u in merged["users"]}
    if chosen.get("user") and chosen["user"] not in users:
        raise ClusterError(f"context {name!r} names user {chosen['user']!r}, not defined")
    merged["current-context"] = name
    return Target(merged, name, namespace or chosen.get("namespace") or "default", sources)


def chosen(target: Target) -> tuple[tuple[str, dict[str, Any]], tuple[str, dict[str, Any]]]:
    """The (name, body) of the cluster and of the user (empty when none) of the target's
    context."""
    context = next(c["context"] or {} for c in target.config["contexts"]
                   if c["name"] == target.context)  # fmt: skip
    cluster = next(c for c in target.config["clusters"] if c["name"] == context["cluster"])
    user_name = context.get("user") or ""
    user: dict[str, Any] = next((u for u in target.config["users"] if u["name"] == user_name), {})
    return (cluster["name"], cluster.get("cluster") or {}), (user_name, user.get("user") or {})


def merge(files: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """kubectl's merge of several kubeconfig files: first definition of a name wins."""
    sections = ("clusters", "users", "contexts")
    out: dict[str, Any] = {key: [] for key in sections}
    seen: dict[str, set[str]] = {key: set() for key in sections}
    for source, doc in files:
        base = Path(source).resolve().parent
        if doc.get("current-context") and "current-context" not in out:
            out["current-context"] = doc["current-context"]
        for key in sections:
            entries = doc.get(key) or []
            if not isinstance(entries, list):
                raise ClusterError(f"{source}: {key} must be a list")
            for entry in entries:
                if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                    raise ClusterError(f"{source}: every entry of {key} needs a name")
                if entry["name"] in seen[key]:
                    continue
                seen[key].add(entry["name"])
                out[key].append(_absolute(source, key, entry, base))
    return out


def _absolute(source: str, key: str, entry: dict[str, Any], base: Path) -> dict[str, Any]:
    """The entry with its file paths made absolute against the file it came from."""
    if key not in _PATH_FIELDS:
        return entry
    inner, fields = _PATH_FIELDS[key]
    if not isinstance(entry.get(inner) or {}, dict):
        raise ClusterError(f"{source}: {key} {entry['name']!r}: {inner} must be a mapping")
    body = dict(entry.get(inner) or {})
    for name in fields:
        if isinstance(body.get(name), str) and not Path(body[name]).is_absolute():
            body[name] = str(base / body[name])
    plugin = body.get("exec")
    if isinstance(plugin, dict) and isinstance(plugin.get("command"), str):
        # client-go resolves an exec command relative to its file only when it is a path
        # (tools/clientcmd/loader.go GetAuthInfoFileReferences)
        command = plugin["command"]
        if os.sep in command and not Path(command).is_absolute():
            body["exec"] = {**plugin, "command": str(base / command)}
    return {**entry, inner: body}


def _read(path: Path) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise ClusterError(f"cannot read kubeconfig {path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        raise ClusterError(f"{path}{where}: not a valid kubeconfig (invalid YAML)") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ClusterError(f"{path}: not a valid kubeconfig (expected a mapping)")
    return doc


def _in_cluster(env: Mapping[str, str], account: Path) -> bool:
    return bool(env.get("KUBERNETES_SERVICE_HOST")) and (account / "token").is_file()


def _service_account_target(env: Mapping[str, str], account: Path, namespace: str | None) -> Target:
    """The pod's own service account, as client-go's in-cluster config reads it."""
    host, port = env["KUBERNETES_SERVICE_HOST"], env.get("KUBERNETES_SERVICE_PORT", "443")
    if ":" in host:
        host = f"[{host}]"
    own = account / "namespace"
    config = {
        "current-context": "in-cluster",
        "clusters": [
            {
                "name": "in-cluster",
                "cluster": {
                    "server": f"https://{host}:{port}",
                    "certificate-authority": str(account / "ca.crt"),
                },
            }
        ],
        "users": [{"name": "in-cluster", "user": {"tokenFile": str(account / "token")}}],
        "contexts": [
            {"name": "in-cluster", "context": {"cluster": "in-cluster", "user": "in-cluster"}}
        ],
    }
    default = own.read_text().strip() if own.is_file() else "default"
    return Target(config, "in-cluster", namespace or default, (str(account),))
