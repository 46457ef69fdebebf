"""``svcdoctor probe``: the verdicts and what limits them (pure), the agent's bound, what it
would create without --yes (nothing is created), its refusals (bad agent arguments, no node
for --per-node: exit 2, nothing created), and end to end against ``lab serve``: the bad pod
and the broken node singled out, a healthy Service passes, and nothing svcdoctor created
remains."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from svcdoctor.cli import cli
from svcdoctor.cluster.agent import DIRECT_PARALLEL
from svcdoctor.cluster.agentjob import MANAGED_SELECTOR, remaining
from svcdoctor.cluster.api import connect_active
from svcdoctor.cluster.probe import bound_seconds, endpoints_of
from svcdoctor.cluster.probing import assess, limits, outlier, percentile, tally
from svcdoctor.diagnose import Settings
from tests.cluster.conftest import Served


def rows(backend: str, n: int, failed: int, node: str = "node-0") -> list[dict[str, Any]]:
    rng = random.Random(backend)
    out = []
    for i in range(n):
        ok = i >= failed
        out.append({"ts": float(i), "outcome": "ok" if ok else "reset", "backend": backend,
                    "latency_ms": rng.uniform(1, 3), "node": node, "mode": "direct"})  # fmt: skip
    return out


def test_the_bad_backend_is_singled_out_with_few_requests() -> None:
    direct = [r for i in range(8) for r in rows(f"10.0.0.{i}:8080", 50, 50 if i == 3 else 0)]
    result = assess(direct, [], names={"10.0.0.3:8080": "api-3"})
    assert [t.label for t in result.bad_backends] == ["api-3"]
    bad = result.bad_backends[0]
    assert bad.failures == 50
    assert bad.by_outcome == (("reset", 50),)
    assert bad.success_ci95[1] < 0.08  # exact interval of 0 of 50
    assert bad.outlier is not None
    assert bad.outlier.p_value < 0.001
    assert result.singled_out
    healthy = result.backends[0]
    assert healthy.success_rate == 1.0
    assert healthy.success_ci95[0] > 0.9
    assert dict(healthy.latency_ms)[50] == pytest.approx(2, abs=0.5)


def test_spread_failures_and_small_numbers_single_out_nobody() -> None:
    spread = [r for i in range(8) for r in rows(f"10.0.0.{i}:8080", 50, 1)]
    assert not assess(spread, []).singled_out
    few = [r for i in range(8) for r in rows(f"10.0.0.{i}:8080", 50, 3 if i == 0 else 0)]
    assert not assess(few, []).singled_out  # 3 failures: below diagnose's minimum
    assert not assess([], []).singled_out


def test_the_test_is_diagnoses() -> None:
    s = Settings()
    assert outlier(50, 50, 400, 50, 8, s) is not None
    assert outlier(50, 6, 400, 50, 8, s) is None  # its share of the failures, as expected
    assert outlier(50, 5, 400, 5, 8, s) is not None  # exact even with no other failures
    assert outlier(50, 4, 400, 4, 8, s) is None  # below min_failures


def test_a_broken_node_is_singled_out() -> None:
    per_node = [r for i in range(4)
                for r in rows(f"svc-{i}", 100, 40 if i == 2 else 1, node=f"node-{i}")]  # fmt: skip
    result = assess([], [], per_node)
    assert [t.key for t in result.bad_nodes] == ["node-2"]
    assert result.nodes[2].by_outcome == (("reset", 40),)


def test_nothing_to_compare_is_said_and_a_failing_service_fails() -> None:
    one = assess(rows("10.0.0.1:8080", 50, 50), [], names={"10.0.0.1:8080": "api-1"})
    assert not one.singled_out  # nothing to compare it with, even at 100 % failures
    (note,) = limits(one)
    assert note.startswith("only one endpoint (api-1): nothing to compare")
    alike = assess([r for i in range(4) for r in rows(f"10.0.0.{i}:8080", 50, 25)], [])
    assert not alike.singled_out
    (note,) = limits(alike)
    assert note.startswith("every endpoint fails alike (50.0% to 50.0%")
    healthy = [r for i in range(4) for r in rows(f"10.0.0.{i}:8080", 50, 0)]
    assert limits(assess(healthy, rows("svc", 400, 0))) == ()
    assert not assess(healthy, rows("svc", 400, 0)).failing
    # 4 failures in 400: 1 % observed, but the 95 % upper bound is above 99 %: no verdict
    assert not assess(healthy, rows("svc", 400, 4)).failing
    broken = assess(healthy, rows("svc", 400, 12))  # 3 %: below 99 % beyond chance
    assert broken.service_failing
    assert broken.failing
    assert not broken.singled_out
    assert any(n.startswith("through the Service: success at most") for n in limits(broken))


def test_the_agents_bound_counts_direct_probes_in_parallel_batches() -> None:
    assert bound_seconds(1, 50, 2.0, 10.0) == 10.0 + 50 * 2.0
    assert bound_seconds(DIRECT_PARALLEL, 50, 2.0, 10.0) == 10.0 + 50 * 2.0
    assert bound_seconds(DIRECT_PARALLEL + 1, 50, 2.0, 10.0) == 10.0 + 2 * 50 * 2.0


def test_tallies_and_percentiles() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
    assert percentile([5.0], 99) == 5.0
    t = tally("x", [{"outcome": "ok", "latency_ms": 1.0}, {"outcome": "timeout"}])
    assert (t.requests, t.failures, t.by_outcome) == (2, 1, (("timeout", 1),))
    assert t.to_dict()["latency_ms"] == {"p50": 1.0, "p90": 1.0, "p99": 1.0}


SLICE = {
    "metadata": {"name": "api-x", "labels": {"kubernetes.io/service-name": "api"}},
    "ports": [{"name": "http", "port": 8080}],
    "endpoints": [
        {"addresses": ["10.0.0.1"], "conditions": {"ready": True},
         "targetRef": {"kind": "Pod", "name": "api-1"}},
        {"addresses": ["10.0.0.2"], "conditions": {"ready": False},
         "targetRef": {"kind": "Pod", "name": "api-2"}},
        {"addresses": ["10.0.0.3"], "targetRef": {"kind": "Pod", "name": "api-3"}},
    ],
}  # fmt: skip


def test_the_ready_endpoints_are_probed() -> None:
    endpoints, names = endpoints_of([SLICE], "http")
    assert endpoints == ("10.0.0.1:8080", "10.0.0.3:8080")
    assert names["10.0.0.3:8080"] == "api-3"
    assert endpoints_of([SLICE], "grpc") == ((), {})


def _service(api: Served) -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "api", "namespace": "shop", "uid": "svc-1"},
        "spec": {"clusterIP": "10.96.0.10", "selector": {"app": "api"},
                 "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
    }  # fmt: skip
    slice_ = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
              "addressType": "IPv4", **SLICE}  # fmt: skip
    slice_["metadata"] = {**SLICE["metadata"], "namespace": "shop", "uid": "sl-1"}
    api.put(service, slice_)


def test_without_yes_it_prints_a_short_plan_and_creates_nothing(api: Served) -> None:
    _service(api)
    base = ["probe", "api", "--kubeconfig", str(api.kubeconfig), "-n", "shop", "--count", "7"]
    done = CliRunner().invoke(cli, base)
    assert done.exit_code == 0, done.output
    lines = done.stdout.splitlines()
    assert len(lines) <= 12, done.stdout  # not the agent's source
    assert "def " not in done.stdout
    assert lines[0] == "svcdoctor probe would create, in namespace shop (nothing created):"
    assert "ConfigMap svcdoctor-probe-" in lines[1]
    assert " lines, " in lines[1]
    assert "image python:3.12-slim" in lines[2]
    assert "2 endpoint(s) directly (10.0.0.1:8080, 10.0.0.3:8080), 7 GET / each" in done.stdout
    assert "the Service 10.96.0.10:80: 50 at 50/s over 1 s" in done.stdout  # at least 1 s
    assert "--show-agent" in lines[-1]
    plan = json.loads(CliRunner().invoke(cli, [*base, "-o", "json"]).stdout)
    assert plan["created"] is False
    assert [o["kind"] for o in plan["objects"]] == ["ConfigMap", "Job"]
    assert plan["objects"][0]["lines"] > 500
    assert plan["endpoints"] == ["10.0.0.1:8080", "10.0.0.3:8080"]
    assert (plan["requests_per_endpoint"], plan["service_requests"]) == (7, 50)
    assert plan["bound_seconds"] == bound_seconds(2, 7, 2.0, 1.0)
    reader = connect_active(kubeconfig=str(api.kubeconfig))
    assert remaining(reader, None, MANAGED_SELECTOR) == []


def test_the_plan_names_the_per_node_jobs(api: Served) -> None:
    _service(api)
    api.put({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-7"},
             "status": {"conditions": [{"type": "Ready", "status": "True"}]}})  # fmt: skip
    done = CliRunner().invoke(
        cli, ["probe", "api", "--kubeconfig", str(api.kubeconfig), "-n", "shop", "--per-node",
              "-o", "json"],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    plan = json.loads(done.stdout)
    pod = plan["objects"][2]
    assert (pod["kind"], pod["node"]) == ("Job", "node-7")
    assert pod["name"] == f"svcdoctor-probe-{plan['run']}-node-0"
    assert plan["nodes"] == ["node-7"]


def test_show_agent_prints_the_objects_in_full_and_creates_nothing(api: Served) -> None:
    _service(api)
    done = CliRunner().invoke(
        cli,
        ["probe", "api", "--kubeconfig", str(api.kubeconfig), "-n", "shop", "--count", "7",
         "--show-agent"],
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    assert [d["kind"] for d in docs] == ["ConfigMap", "Job"]
    command = docs[1]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[command.index("--endpoints") + 1] == "10.0.0.1:8080,10.0.0.3:8080"
    assert command[command.index("--service") + 1] == "10.96.0.10:80"
    assert command[command.index("--count") + 1] == "7"
    assert "def " in docs[0]["data"]["agent.py"]
    reader = connect_active(kubeconfig=str(api.kubeconfig))
    assert remaining(reader, None, MANAGED_SELECTOR) == []


@pytest.mark.parametrize("yes", [False, True])
@pytest.mark.parametrize(
    ("args", "words"),
    [(("--path", "no-slash"), "--path must start with /"),
     (("--timeout", "700s"), "--timeout must be in (0, 600]")],
)  # fmt: skip
def test_arguments_the_agent_would_refuse_create_nothing(
    api: Served, yes: bool, args: tuple[str, ...], words: str
) -> None:
    _service(api)
    base = ["probe", "api", "--kubeconfig", str(api.kubeconfig), "-n", "shop", *args]
    done = CliRunner().invoke(cli, [*base, *(["--yes"] if yes else [])])
    assert done.exit_code == 2, done.output
    (line,) = done.output.strip().splitlines()
    assert words in line
    reader = connect_active(kubeconfig=str(api.kubeconfig))
    assert remaining(reader, None, MANAGED_SELECTOR) == []


def test_per_node_without_a_node_refuses(api: Served) -> None:
    _service(api)  # the server has no Node at all
    base = ["probe", "api", "--kubeconfig", str(api.kubeconfig), "-n", "shop", "--per-node"]
    for extra in ([], ["--yes"]):
        done = CliRunner().invoke(cli, [*base, *extra])
        assert done.exit_code == 2, done.output
        (line,) = done.output.strip().splitlines()
        assert "--per-node: no Ready, schedulable node" in line
    reader = connect_active(kubeconfig=str(api.kubeconfig))
    assert remaining(reader, None, MANAGED_SELECTOR) == []


def test_ctrl_c_says_the_objects_were_deleted(api: Served) -> None:
    _service(api)  # a bare API server: the Job is stored, its pod never runs
    proc = subprocess.Popen(
        [sys.executable, "-m", "svcdoctor", "probe", "api", "--kubeconfig", str(api.kubeconfig),
         "-n", "shop", "--yes"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    reader = connect_active(kubeconfig=str(api.kubeconfig))
    deadline = time.time() + 60
    while not reader.list("configmaps", "shop", labels=MANAGED_SELECTOR):
        if time.time() > deadline or proc.poll() is not None:
            proc.kill()
            pytest.fail(f"probe created nothing: {proc.communicate()}")
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip() == "svcdoctor: interrupted; the probe's objects were deleted"
    assert remaining(reader, "shop", MANAGED_SELECTOR) == []


def test_unknown_service_is_one_line_exit_2(api: Served) -> None:
    done = CliRunner().invoke(cli, ["probe", "nope", "--kubeconfig", str(api.kubeconfig)])
    assert done.exit_code == 2
    assert "service lab/nope not found" in done.output


# ---- end to end against lab serve -------------------------------------------------------


@dataclass(frozen=True)
class Probed:
    """``probe --yes`` against a ``lab serve --no-load`` of a scenario; what ``cleanup
    --dry-run`` found after it; the serve's ground truth."""

    done: subprocess.CompletedProcess[str]
    left: subprocess.CompletedProcess[str]
    truth: dict[str, Any]
    page: Path


# scenario → probe's options besides --count 40 --yes -o json
PROBES = {
    "bad-backend": ("--html", "probe.html"),
    "race-fixed": ("--html", "probe.html"),
    "broken-node": ("--per-node",),
}


def _probe_lab(tmp: Path, scenario: str) -> Probed:
    from tests.cluster.test_live_lab import lab_serve, svcdoctor

    extra = [str(tmp / a) if a.endswith(".html") else a for a in PROBES[scenario]]
    with lab_serve(tmp, scenario, "--no-load") as kubeconfig:
        done = svcdoctor("probe", "api", "--kubeconfig", str(kubeconfig), "--count", "40",
                         "--yes", "-o", "json", *extra, timeout=180)  # fmt: skip
        left = svcdoctor("cleanup", "--kubeconfig", str(kubeconfig), "--dry-run", "-o", "json")
    return Probed(done, left, json.loads((tmp / "truth.json").read_text()), tmp / "probe.html")


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Probed]:
    """Each scenario's serve and probe, the three at the same time (each mostly waits, as
    test_lab.py's runs do; the probes' verdicts come from each lab's own faults)."""
    folders = {s: tmp_path_factory.mktemp(s) for s in PROBES}
    with ThreadPoolExecutor(len(PROBES)) as pool:
        futures = {s: pool.submit(_probe_lab, folders[s], s) for s in PROBES}
        return {s: f.result() for s, f in futures.items()}


@pytest.mark.lab
@pytest.mark.parametrize(("scenario", "bad"), [("bad-backend", True), ("race-fixed", False)])
def test_probe_against_the_lab(probed: dict[str, Probed], scenario: str, bad: bool) -> None:
    run = probed[scenario]
    done, left, truth, page = run.done, run.left, run.truth, run.page
    assert done.returncode == (1 if bad else 0), done.stderr
    report = json.loads(done.stdout)
    assert report["bad_backends"] == truth["bad_pods"]
    if bad:  # the page leads with the pod the probe singled out
        assert f"Singled out: {', '.join(truth['bad_pods'])}" in page.read_text()
    assert all(b["requests"] <= 200 for b in report["backends"])
    assert report["service"]["requests"] > 0
    assert json.loads(left.stdout)["found"] == []


@pytest.mark.lab
def test_per_node_probe_names_the_broken_node(probed: dict[str, Probed]) -> None:
    run = probed["broken-node"]
    done, left, truth = run.done, run.left, run.truth
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert len(report["nodes"]) >= 2
    assert truth["broken_nodes"] == ["node-1"]
    assert report["bad_nodes"] == truth["broken_nodes"]
    assert json.loads(left.stdout)["found"] == []


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (the lab's pods and the agents it runs)."""
    found, todo = [], [pid]
    while todo:
        for task in Path(f"/proc/{todo.pop()}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


@pytest.mark.lab
def test_an_agent_killed_mid_probe_is_reported_and_leaves_nothing(tmp_path: Path) -> None:
    from svcdoctor.lab.kernel import available
    from tests.cluster.test_live_lab import SVCDOCTOR, svcdoctor

    if reason := available():
        pytest.skip(reason)
    kubeconfig = tmp_path / "kubeconfig"
    lab = subprocess.Popen(
        [*SVCDOCTOR, "lab", "serve", "--scenario", "race-fixed", "--datapath", "kernel",
         "--for", "90", "--kubeconfig-out", str(kubeconfig), "--no-load", "-o", "json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert lab.stdout is not None
        assert lab.stdout.readline(), "lab serve ended before serving"
        probe = subprocess.Popen(
            [*SVCDOCTOR, "probe", "api", "--kubeconfig", str(kubeconfig), "--count", "60",
             "--rate", "4", "--yes", "-o", "json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.time() + 60
        agents: list[int] = []
        while not agents and time.time() < deadline:
            time.sleep(0.5)
            for pid in _descendants(lab.pid):
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if any(a.endswith(b"agent.py") for a in argv) and b"--mode" in argv:
                    agents.append(pid)
        assert agents, "the agent never ran"
        time.sleep(2)  # rows flowing
        for pid in agents:
            os.kill(pid, signal.SIGKILL)  # a crash: no done line
        out, err = probe.communicate(timeout=120)
        left = svcdoctor("cleanup", "--kubeconfig", str(kubeconfig), "--dry-run", "-o", "json")
    finally:
        lab.send_signal(signal.SIGINT)
        lab.wait(60)
    assert probe.returncode in (0, 1), err
    report = json.loads(out)
    assert any("without its done line" in note for note in report["notes"])
    assert report["backends"]  # what it sent before it died is still assessed
    assert json.loads(left.stdout)["found"] == []
