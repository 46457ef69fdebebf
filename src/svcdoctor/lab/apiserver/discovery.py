"""Discovery: ``/version``, ``/api``, ``/apis``, the group-version resource lists and the
OpenAPI v3 documents kubectl reads."""

from __future__ import annotations

import platform
import re
import sys
from collections.abc import Mapping
from typing import Any

from svcdoctor.cluster.resources import Resource
from svcdoctor.lab.apiserver.resources import EVICTION, WRITABLE

_ALL_CATEGORY = {"pods", "services", "deployments", "replicasets", "statefulsets", "daemonsets"}


_GOARCH = {"x86_64": "amd64", "aarch64": "arm64"}  # /version's platform names machines as Go


def _group_document(group: str, versions: list[str]) -> dict[str, Any]:
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": gvs,
        "preferredVersion": gvs[0],
    }


class Discovery:
    """The documents of ``/version``, ``/api``, ``/apis``, the group-versions and
    ``/openapi/v3`` for the ``served`` resources; ``address`` is the server's, once it
    listens."""

    def __init__(self, served: Mapping[str, Resource], version: str) -> None:
        self._served = served
        self._version = version
        self.address = ""

    def document(self, path: str) -> dict[str, Any] | None:
        """The discovery document at ``path``, or None (not a discovery path)."""
        groups = self._groups()
        parts = path.strip("/").split("/")
        if path == "/version":
            return self._version_document()
        if path == "/api":
            cidrs = [{"clientCIDR": "0.0.0.0/0", "serverAddress": self.address}]
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": cidrs}
        if path == "/apis":
            items = [_group_document(g, vs) for g, vs in groups.items()]
            for item in items:
                del item["kind"], item["apiVersion"]
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": items}
        if parts[0] == "apis" and len(parts) == 2 and parts[1] in groups:
            return _group_document(parts[1], groups[parts[1]])
        if parts[0] == "api" and len(parts) == 2:
            return self._resource_list("", parts[1])
        if parts[0] == "apis" and len(parts) == 3:
            return self._resource_list(parts[1], parts[2])
        if parts[:2] == ["openapi", "v3"]:
            return self._openapi("/".join(parts[2:]))
        return None

    def _openapi(self, gv_path: str) -> dict[str, Any] | None:
        """OpenAPI v3: the index of group-versions, or one group-version's document with
        the PATCH operations of its writable resources (parameters only, no schemas). That
        much tells kubectl that the server validates fields and dry-runs itself."""
        gvs = {
            f"apis/{r.group}/{r.version}" if r.group else f"api/{r.version}": r
            for r in self._served.values()
        }
        if not gv_path:
            return {"paths": {gv: {"serverRelativeURL": f"/openapi/v3/{gv}"} for gv in gvs}}
        if gv_path not in gvs:
            return None
        group, version = gvs[gv_path].group, gvs[gv_path].version
        params = [
            {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
            for name in ("dryRun", "fieldManager", "fieldValidation", "force")
        ]
        paths: dict[str, Any] = {}
        for key, r in self._served.items():
            if (r.group, r.version) != (group, version) or key not in WRITABLE:
                continue
            operation = {
                "operationId": f"patch{r.kind}",
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": {
                    "group": r.group,
                    "version": r.version,
                    "kind": r.kind,
                },
            }
            paths[r.path("{namespace}" if r.namespaced else None, "{name}")] = {"patch": operation}
        info = {"title": "Kubernetes (svcdoctor lab)", "version": self._version}
        return {"openapi": "3.0.0", "info": info, "paths": paths}

    def _version_document(self) -> dict[str, str]:
        machine = platform.machine()
        m = re.match(r"v(\d+)\.(\d+)", self._version)
        return {
            "major": m[1] if m else "",
            "minor": m[2] if m else "",
            "gitVersion": self._version,
            "gitCommit": "",
            "gitTreeState": "clean",
            "buildDate": "",
            "goVersion": "",
            "compiler": platform.python_implementation().lower(),
            "platform": f"{sys.platform}/{_GOARCH.get(machine, machine)}",
        }

    def _groups(self) -> dict[str, list[str]]:
        """Served API groups (not core) with their versions, in the table's order."""
        groups: dict[str, list[str]] = {}
        for r in self._served.values():
            if r.group and r.version not in groups.setdefault(r.group, []):
                groups[r.group].append(r.version)
        return groups

    def _resource_list(self, group: str, version: str) -> dict[str, Any] | None:
        served = [
            (k, r) for k, r in self._served.items() if (r.group, r.version) == (group, version)
        ]
        if not served:
            return None
        resources: list[dict[str, Any]] = []
        for key, r in served:
            doc: dict[str, Any] = {
                "name": r.plural,
                "singularName": r.kind.lower(),
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": sorted({"get", "list", "watch", *WRITABLE.get(key, ())}),
            }
            if r.short_names:
                doc["shortNames"] = list(r.short_names)
            if key in _ALL_CATEGORY:
                doc["categories"] = ["all"]
            resources.append(doc)
            if key == "pods":
                log = {"name": "pods/log", "singularName": "", "namespaced": True, "kind": "Pod"}
                resources.append({**log, "verbs": ["get"]})
                # kubectl drain evicts only when discovery lists this (kubernetes/kubectl
                # pkg/drain/drain.go, CheckEvictionSupport); else it deletes the pods
                eviction = {"name": EVICTION, "singularName": "", "namespaced": True}
                eviction |= {"group": "policy", "version": "v1", "kind": "Eviction"}
                resources.append({**eviction, "verbs": ["create"]})
        group_version = f"{group}/{version}" if group else version
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group_version,
            "resources": resources,
        }
