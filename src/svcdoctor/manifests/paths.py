"""Which files under the inputs are manifests to read: what ``--exclude`` leaves out, a Helm
chart's ``templates/``, vendored dependencies, hidden folders and test assertion files."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import yaml


class Excludes:
    """``--exclude`` patterns, gitignore-like: a pattern without ``/`` matches any path
    component (``node_modules``, ``*.json``); one with ``/`` matches a path relative to the
    directory given (``charts/*/ci``), at any depth if it starts with ``**/``; a trailing
    ``/`` is ignored. ``*`` may cross ``/``."""

    def __init__(self, patterns: Iterable[str] = ()) -> None:
        self.names: list[str] = []
        self.paths: list[str] = []
        for raw in patterns:
            pattern = raw.strip().removeprefix("./").strip("/")
            anywhere = pattern.startswith("**/")
            while pattern.startswith("**/"):
                pattern = pattern[3:]
            if not pattern:
                continue
            if "/" not in pattern:
                self.names.append(pattern)
            else:
                self.paths.append(pattern)
                if anywhere:
                    self.paths.append(f"*/{pattern}")

    def __bool__(self) -> bool:
        return bool(self.names or self.paths)

    def match(self, relative: str) -> bool:
        """Whether a path (relative to the directory given, ``/``- or os-separated) or one
        of the directories above it is excluded."""
        if not self:
            return False
        parts = [p for p in relative.replace(os.sep, "/").split("/") if p not in ("", ".")]
        if any(fnmatchcase(part, n) for part in parts for n in self.names):
            return True
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        return any(fnmatchcase(prefix, p) for p in self.paths for prefix in prefixes)


# A Helm chart's folders of Go templates: ``templates/``, and ``files/``, which charts render
# with `tpl (.Files.Get ...)` (kserve's charts/*/files/*-patch.yaml; judge193)
CHART_TEMPLATES = frozenset({"templates", "files"})


# A Helm chart's definition, or the template a build generates it from (gloo's
# install/helm/gloo/Chart-template.yaml, which its `make` turns into Chart.yaml; judge421;
# heron's deploy/kubernetes/helm/Chart.yaml.template, filled in by its Bazel build; judge482;
# patch-operator's config/helmchart/Chart.yaml.tpl, which `make helmchart` fills; judge523)
CHART_FILES = (
    "Chart.yaml",
    "Chart.yml",
    "Chart-template.yaml",
    "Chart.yaml.tmpl",
    "Chart.yaml.template",
    "Chart.yaml.tpl",
)


def is_chart(folder: Path) -> bool:
    """Whether the folder is a Helm chart's (``CHART_FILES``)."""
    return any((folder / name).is_file() for name in CHART_FILES)


def chart_templates(name: str) -> bool:
    """Whether a folder beside a Chart.yaml holds its Go templates (``CHART_TEMPLATES``), or
    templates set aside that Helm never renders (onyx's `templates_disabled/`; judge372)."""
    return name in CHART_TEMPLATES or name.startswith("templates")


def helm_chart_of(directory: Path) -> Path | None:
    """The Helm chart whose ``templates/`` or ``files/`` holds ``directory`` (such a folder
    beside a ``Chart.yaml``), if any."""
    for folder in (directory, *directory.absolute().parents):
        if chart_templates(folder.name) and is_chart(folder.parent):
            return folder.parent
    return None


def chart_holding(file: str) -> Path | None:
    """The Helm chart (the nearest folder above with a ``Chart.yaml``) holding the file
    outside its ``templates/`` and ``files/``: a file it renders with `tpl (.Files.Glob ...)`
    from a folder of its own choosing (Meridio's `deployment/`; judge412)."""
    path = Path(file).absolute()
    for folder in path.parents:
        if is_chart(folder):
            return None if chart_templates(path.relative_to(folder).parts[0]) else folder
    return None


def vendored(top: str, name: str, files: list[str]) -> bool:
    """Whether the directory ``name`` in ``top`` holds copies of other projects: npm's
    ``node_modules``, Go's ``vendor`` beside a ``go.mod`` or holding its ``modules.txt``
    (https://go.dev/ref/mod#vendoring; csi-driver-nfs vendors Kubernetes' e2e manifests), or
    jsonnet-bundler's ``vendor`` (``vendor_jsonnet``...: ``jb --jsonnetpkg-home``) beside a
    ``jsonnetfile.json`` (https://github.com/jsonnet-bundler/jsonnet-bundler; sealed-secrets'
    vendor_jsonnet/kube-libsonnet/tests/golden, judge185), or a ``third_party`` folder, the
    copies of other projects' releases Go and Chromium-style repositories keep (Knative's
    eventing-kafka-broker installs cert-manager and KEDA from third_party/ for its tests;
    judge240), or kubevirtci's ``cluster-up`` (its ``up.sh`` beside), which KubeVirt's
    projects download and unpack (hostpath-provisioner's hack/update-cluster.sh; judge430)."""
    if name in ("node_modules", "third_party", "third-party"):
        return True
    if name == "cluster-up" and os.path.isfile(os.path.join(top, name, "up.sh")):
        return True  # kubevirtci's, which KubeVirt's projects unpack (hostpath-provisioner)
    if "jsonnetfile.json" in files and _VENDOR.fullmatch(name):
        return True
    return name == "vendor" and (
        "go.mod" in files or os.path.isfile(os.path.join(top, name, "modules.txt"))
    )


_VENDOR = re.compile(r"vendor(?:[-_]\w+)?")


# kuttl compares the cluster with a step's `NN-assert.yaml` (`NN-*-assert.yaml`) and checks
# that no object of its `NN-errors.yaml` exists: partial objects holding only the fields a
# test compares, never applied (https://kuttl.dev/docs/testing/asserts-errors.html;
# jaeger-operator's tests/e2e: a collector Service without clusterIP, which the operator
# makes headless; judge159); chainsaw's steps name theirs so too, or `NN-assert-WHAT.yaml`
# (https://kyverno.github.io/chainsaw/latest/operations/assert/; tempo-operator's
# tests/e2e-openshift-upgrade, judge183)
_ASSERTION = re.compile(r"^\d+-(.*-)?(assert|errors)(-.*)?\.ya?ml$")


def assertion(name: str, asserted: frozenset[str] = frozenset()) -> bool:
    """Whether a file is a kuttl or chainsaw test step's assertion: by its name
    (``_ASSERTION``), or named by its folder's chainsaw test (``asserted``)."""
    return bool(_ASSERTION.match(name)) or name in asserted


# `kyverno test` evaluates a folder's policies against its resources offline, as its
# kyverno-test.yaml lists them: inputs, never applied (Kyverno's test/cli; judge352;
# https://kyverno.io/docs/kyverno-cli/usage/test/)
_KYVERNO_TESTS = ("kyverno-test.yaml", "kyverno-test.yml")


def kyverno_test_inputs(files: list[str]) -> frozenset[str]:
    """Every file of a folder that holds a `kyverno test` definition (``_KYVERNO_TESTS``)."""
    return frozenset(files) if any(t in files for t in _KYVERNO_TESTS) else frozenset()


_CHAINSAW_TESTS = ("chainsaw-test.yaml", "chainsaw-test.yml")
_CHAINSAW_BLOCKS = ("try", "catch", "finally", "cleanup")


def chainsaw_assertions(top: str, files: list[str]) -> frozenset[str]:
    """The files of ``top`` its chainsaw Test names in `assert` and `error` operations
    (`ready-svc.yaml`: the objects an operator should have made, never applied;
    https://kyverno.github.io/chainsaw/latest/reference/apis/chainsaw.v1alpha1/;
    OT-CONTAINER-KIT/redis-operator's tests/e2e-chainsaw, judge199)."""
    found: set[str] = set()
    for test in (f for f in _CHAINSAW_TESTS if f in files):
        for op in _chainsaw_operations(os.path.join(top, test)):
            for kind in ("assert", "error"):
                target = op.get(kind)
                if isinstance(target, dict) and isinstance(target.get("file"), str):
                    found.add(os.path.normpath(target["file"]))
    return frozenset(found)


def _chainsaw_operations(path: str) -> Iterator[dict[str, Any]]:
    """The operations of a chainsaw Test file's steps (none when it cannot be read)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            documents = list(yaml.safe_load_all(handle))
    except (OSError, yaml.YAMLError):
        return
    for doc in documents:
        spec = doc.get("spec") if isinstance(doc, dict) else None
        steps = spec.get("steps") if isinstance(spec, dict) else None
        for step in steps if isinstance(steps, list) else ():
            blocks = [step.get(b) for b in _CHAINSAW_BLOCKS] if isinstance(step, dict) else []
            for block in (b for b in blocks if isinstance(b, list)):
                yield from (op for op in block if isinstance(op, dict))


_MOST_HIDDEN = 2000  # directory entries looked at for manifests in hidden folders


def hidden_manifests(top: str, name: str) -> bool:
    """Whether ``top/name`` is a hidden folder holding a manifest (a file with top-level
    ``apiVersion`` and ``kind``: ``.deploy``, ``.examples``), not a tool's (``.github``);
    the walk skips hidden folders and says so of these."""
    if not name.startswith(".") or name in _TOOL_FOLDERS:
        return False
    budget = _MOST_HIDDEN
    for here, dirs, files in os.walk(os.path.join(top, name)):
        budget -= len(dirs) + len(files)
        if budget < 0:
            return False
        if any(_manifest(Path(here) / f) for f in files):
            return True
        dirs[:] = sorted(d for d in dirs if d not in _TOOL_FOLDERS)
    return False


# folders of tools, not of manifests (version control, editors, CI)
_TOOL_FOLDERS = frozenset({".git", ".github", ".vscode", ".idea", ".devcontainer", ".circleci"})
_TOP_LEVEL = re.compile(r"^apiVersion:|^kind:", re.MULTILINE)


def _manifest(file: Path) -> bool:
    """Whether a YAML file's first 4 KiB hold top-level ``apiVersion`` and ``kind``."""
    if not file.name.endswith((".yaml", ".yml")):
        return False
    try:
        with file.open(encoding="utf-8", errors="replace") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return len({m.group(0) for m in _TOP_LEVEL.finditer(head)}) == 2


_UP = 12  # parent directories looked through for a repository's ``.git``


def git_root(path: Path) -> Path | None:
    """The git repository a path is in (its folder holding ``.git``), resolved."""
    here = path.resolve()
    for candidate in [here, *here.parents][:_UP]:
        try:
            if (candidate / ".git").exists():
                return candidate
        except OSError:  # unreadable: no repository seen there (lint names the directory)
            continue
    return None


def below_repositories(files: Iterable[str], roots: Iterable[Path]) -> dict[str, str]:
    """Each file inside one of the git repositories ``roots``, with the part of its path
    below the innermost, or below the working directory when that is inside it and the path
    is relative (the folders the user named): what a path's folders say it holds (a test's,
    a unit test's input) is said inside the checkout, never by the folders above it (a clone
    in ~/tests/repo, a CI workspace named integration-tests)."""
    ordered = sorted({str(r).rstrip("/") for r in roots}, key=len, reverse=True)
    here = os.getcwd().rstrip("/")
    out: dict[str, str] = {}
    for file in files:
        full = os.path.abspath(file)
        root = next((r for r in ordered if full.startswith(r + "/")), None)
        if root is None:
            continue
        inner = not os.path.isabs(file) and (here + "/").startswith(root + "/")
        base = here if inner and full.startswith(here + "/") else root
        out[file] = full[len(base) + 1 :]
    return out
