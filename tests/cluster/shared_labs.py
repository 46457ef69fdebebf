"""Lab serves that several modules' tests check, each run once per session (the fixtures
are in tests/cluster/conftest.py, started by the first test that asks): every command runs
as its own test ran it on a serve of its own (the same scenario and options, started at
the same moment after the pods are Ready); only the serve is shared. Read-only commands
watch the one rollout side by side; a command that creates objects runs after the others.
Serves whose checks do not hang on the machine's timing (which rules scan finds, that
investigate finds nothing) run at the same time."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.test_live_lab import SVCDOCTOR, lab_serve, scan, svcdoctor

LOAD = "app.kubernetes.io/component=load"


@dataclass(frozen=True)
class RaceWatched:
    """``lab serve --scenario race --rollout-at 8``: ``investigate`` (read-only) from the
    start, and ``collect --watch 30s`` and ``scan`` beside it, as test_live_lab's and
    test_investigate's race tests each ran them; then the kubectl plugin's investigate and
    what kubectl lists (``kubectl`` None: kubectl is not installed, with ``why``)."""

    tmp: Path
    truth: dict[str, Any]
    scan: dict[str, Any]
    collect: subprocess.CompletedProcess[str]
    collected: Path
    investigate: subprocess.CompletedProcess[str]
    investigated: Path
    kubectl: Path | None
    why: str
    plugin: subprocess.CompletedProcess[str] | None
    jobs: subprocess.CompletedProcess[str] | None


def _plugin_env(tmp: Path) -> dict[str, str]:
    from tests.cluster.test_investigate import _plugin

    return _plugin(tmp)


def race_watched(tmp: Path) -> RaceWatched:
    from tests.kubectl import kubectl_path, run_kubectl

    kubectl: Path | None = None
    why = ""
    try:
        kubectl = kubectl_path()
    except pytest.skip.Exception as exc:
        why = str(exc)
    collected, investigated = tmp / "bundle", tmp / "inv"
    plugin = jobs = None
    with lab_serve(tmp, "race", "--rollout-at", "8") as kubeconfig:
        command = [*SVCDOCTOR, "investigate", "--kubeconfig", str(kubeconfig), "api", "--out",
                   str(investigated), "--watch-rollout", "30s", "--client-logs", LOAD,
                   "-o", "json"]  # fmt: skip
        collecting = [*SVCDOCTOR, "collect", "--kubeconfig", str(kubeconfig), "api",
                      "--out", str(collected), "--watch", "30s", "--client-logs", LOAD,
                      "-o", "json"]  # fmt: skip
        # both watch from the start: a scan slowed by a loaded machine must not make
        # collect begin after the rollout's first deletions (the rollout is at 8 s)
        procs = [
            subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for argv in (command, collecting)
        ]
        try:
            before = scan(kubeconfig)
            (out, err), (c_out, c_err) = (p.communicate(timeout=240) for p in procs)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        investigate = subprocess.CompletedProcess(command, procs[0].returncode, out, err)
        collect = subprocess.CompletedProcess(collecting, procs[1].returncode, c_out, c_err)
        if kubectl is not None:
            plugin = subprocess.run(  # kubectl takes no flag before a plugin's name
                [str(kubectl), "svcdoctor", "investigate", "api", "--kubeconfig",
                 str(kubeconfig), "--out", str(tmp / "plugin"), "--client-logs", LOAD],
                capture_output=True, text=True, timeout=240, check=False,
                env=_plugin_env(tmp),
            )  # fmt: skip
            jobs = run_kubectl(kubectl, kubeconfig, ["get", "jobs,configmaps", "-A", "-o", "json"])
    truth = json.loads((tmp / "truth.json").read_text())
    return RaceWatched(tmp, truth, before, collect, collected, investigate, investigated,
                       kubectl, why, plugin, jobs)  # fmt: skip


@dataclass(frozen=True)
class BadBackend:
    """``lab serve --scenario bad-backend`` under its load for 8 s; then ``collect`` (read
    only), then ``investigate --yes`` (its direct probe creates Jobs), one after the other
    as test_live_lab's and test_investigate's bad-backend tests each ran them."""

    tmp: Path
    truth: dict[str, Any]
    collect: subprocess.CompletedProcess[str]
    collected: Path
    investigate: subprocess.CompletedProcess[str]
    investigated: Path


def bad_backend(tmp: Path) -> BadBackend:
    collected, investigated = tmp / "bundle", tmp / "inv"
    with lab_serve(tmp, "bad-backend") as kubeconfig:
        subprocess.run(["sleep", "8"], check=True)  # load on the pods
        collect = svcdoctor(
            "collect", "--kubeconfig", str(kubeconfig), "api", "--out", str(collected),
            "--client-logs", LOAD, "-o", "json",
        )  # fmt: skip
        investigate = svcdoctor(
            "investigate", "--kubeconfig", str(kubeconfig), "api", "--out", str(investigated),
            "--yes", "--client-logs", LOAD, "-o", "json", timeout=300,
        )  # fmt: skip
    truth = json.loads((tmp / "truth.json").read_text())
    return BadBackend(tmp, truth, collect, collected, investigate, investigated)


@dataclass(frozen=True)
class RolloutsWatched:
    """Three serves at the same time (each mostly waits on its timeline, as test_lab.py's
    runs do), each with its own rollout and its own watcher: ``scan --watch 30`` of sigkill
    and of race-fixed rolled 3 s after Ready (test_live_lab), and ``investigate
    --watch-rollout 30s`` of race-fixed rolled 8 s after Ready (test_investigate)."""

    scans: dict[str, tuple[dict[str, Any], dict[str, Any]]]  # scenario → (report, truth)
    investigate: subprocess.CompletedProcess[str]


def _scan_watching(tmp: Path, scenario: str) -> tuple[dict[str, Any], dict[str, Any]]:
    with lab_serve(tmp, scenario, "--rollout-at", "3") as kubeconfig:
        # the lab's endpoint propagation takes 0.5-1.5 s (scan assumes 5 s unless told)
        report = scan(kubeconfig, "--watch", "30", "--propagation-seconds", "2")
    return report, json.loads((tmp / "truth.json").read_text())


def _investigate_fixed(tmp: Path) -> subprocess.CompletedProcess[str]:
    with lab_serve(tmp, "race-fixed", "--rollout-at", "8") as kubeconfig:
        return svcdoctor(
            "investigate", "--kubeconfig", str(kubeconfig), "api", "--out", str(tmp / "inv"),
            "--watch-rollout", "30s", "--client-logs", LOAD, "-o", "json", timeout=240,
        )  # fmt: skip


def rollouts_watched(tmp: Path) -> RolloutsWatched:
    scenarios = ("sigkill", "race-fixed")
    folders = {name: tmp / name for name in (*scenarios, "investigate")}
    for folder in folders.values():
        folder.mkdir()
    with ThreadPoolExecutor(len(folders)) as pool:
        scans = {s: pool.submit(_scan_watching, folders[s], s) for s in scenarios}
        investigate = pool.submit(_investigate_fixed, folders["investigate"])
        return RolloutsWatched({s: f.result() for s, f in scans.items()}, investigate.result())
