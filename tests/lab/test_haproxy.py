"""The lab's load balancer in IP mode is a real haproxy (``lab/haproxy.py``) driven through
its runtime API: through its leg the kube-proxy-sized preStop fails (``lb-ip``), every
failure to a pod that had stopped accepting and that the LB had not yet removed; the
path-aware plan has none (``lb-ip-fixed``). The runs need haproxy (CI installs it); on the
kernel datapath where it can run (root, netns), else on userspace. Runs leave nothing
behind, also when interrupted with Ctrl-C."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from svcdoctor.lab import haproxy
from svcdoctor.lab.cleanup import job_processes, leftovers, lock_dir, pod_processes
from svcdoctor.lab.datapath import UserspaceDatapath
from svcdoctor.lab.haproxy import (
    BalancerDatapath,
    TargetState,
    Transition,
    available,
    config,
    expected_failures,
    parse_log,
)
from svcdoctor.lab.kernel import available as kernel_missing
from svcdoctor.lab.kernel import namespaces_of_runs
from svcdoctor.lab.scenarios import FIXED_PLAN, LB_LEG, LB_PLAN, SCENARIOS, Scenario
from svcdoctor.model.scenario import LoadBalancerSpec
from tests.lab.procs import runs_started_by

HAPROXY_MISSING = available()
DATAPATH = "userspace" if kernel_missing() else "kernel"
SVCDOCTOR = [sys.executable, "-m", "svcdoctor"]
# two pods rolled (each waits for the LB's registration, its leg): about a minute a run
QUICK = ("--replicas", "2", "--baseline", "2", "--tail", "1")
needs_haproxy = pytest.mark.skipif(HAPROXY_MISSING is not None, reason=str(HAPROXY_MISSING))


def command(name: str, out: Path, *extra: str) -> list[str]:
    run = [*SVCDOCTOR, "lab", "run", "--scenario", name, "--datapath", DATAPATH]
    return [*run, *QUICK, "--out", str(out), *extra]


def test_the_scenarios_are_the_plans() -> None:
    """lb-ip has the kube-proxy-sized preStop, shorter than the LB's leg; lb-ip-fixed the
    plan over the path with the LB, which covers it, and plan_hops' deregistration delay."""
    bad, fixed = SCENARIOS["lb-ip"], SCENARIOS["lb-ip-fixed"]
    assert bad.pod.prestop == FIXED_PLAN.prestop_seconds < LB_LEG.a
    assert fixed.pod.prestop == LB_PLAN.prestop_seconds >= LB_LEG.high
    assert LB_PLAN.window_hop == "cloud load balancer"
    assert bad.lb is not None
    assert fixed.lb is not None
    assert bad.lb.readiness_gate
    assert fixed.lb.readiness_gate
    assert bad.lb.deregistration == 300.0  # ELB's default
    assert fixed.lb.deregistration == 10.0  # the longest request (lint's 10 s) ≤ it ≤ grace
    with pytest.raises(ValueError, match="not both"):
        Scenario(
            name="x", expect=None, ingress=SCENARIOS["keepalive"].ingress, lb=LoadBalancerSpec()
        )


LINES = [
    "10.233.255.10:40312 [05/Dec/2026:20:47:56.586] lb targets/api-7f6d5c4b3-00 0/0/0/3/3 200 "
    '164 - - ---- 3/3/0/0/0 0/0 "GET / HTTP/1.1"',
    "Server targets/api-7f6d5c4b3-00 enters drain state. 3 active and 0 backup servers online.",
    "2026-12-05T20:47:57.002+00:00 10.233.255.11:40313 [05/Dec/2026:20:47:57.001] lb "
    "targets/api-7f6d5c4b3-01 0/0/-1/-1/0 503 "
    '217 - - SC-- 3/3/0/0/0 0/0 "GET / HTTP/1.1"',
    "127.0.0.1:5 [05/Dec/2026:20:47:58.000] lb targets/<NOSRV> 0/-1/-1/-1/0 503 217 - - SC-- "
    '1/1/0/0/0 0/0 "GET / HTTP/1.1"',
]


def test_haproxy_s_httplog_lines_are_read() -> None:
    entries = parse_log(LINES)
    assert [(e.client, e.server, e.status, e.termination) for e in entries] == [
        (("10.233.255.10", 40312), "api-7f6d5c4b3-00", 200, "----"),
        (("10.233.255.11", 40313), "api-7f6d5c4b3-01", 503, "SC--"),
        (("127.0.0.1", 5), "<NOSRV>", 503, "SC--"),
    ]
    assert entries[1].at - entries[0].at == pytest.approx(0.415)
    assert entries[0].at == pytest.approx(1796503676.586)  # UTC (haproxy runs with TZ=UTC)


def test_the_expected_failures_are_the_leg_times_the_share() -> None:
    """A pod stopped accepting at 10 and the LB kept it ready among 2 until 12, then among
    1: the requests sent in [10, 12) go to it one time in two."""
    marks = [
        Transition(0.0, "a", TargetState.READY),
        Transition(0.0, "b", TargetState.READY),
        Transition(12.0, "a", TargetState.DRAIN),
    ]
    sent = [float(t) / 10 for t in range(0, 200)]  # 10 a second for 20 s
    assert expected_failures(marks, {"a": 10.0}, sent) == pytest.approx(20 / 2)


@needs_haproxy
def test_haproxy_accepts_the_config(tmp_path: Path) -> None:
    (tmp_path / "haproxy.cfg").write_text(config(("127.0.0.1", 18931), tmp_path))
    done = subprocess.run(
        ["haproxy", "-c", "-f", str(tmp_path / "haproxy.cfg")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def test_without_haproxy_the_run_stops_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(haproxy, "available", lambda: "the load balancer needs haproxy (…)")
    dp = BalancerDatapath(UserspaceDatapath(), LoadBalancerSpec(), LB_LEG, tmp_path)
    with pytest.raises(haproxy.HaproxyUnavailable, match="needs haproxy") as caught:
        asyncio.run(dp.start(2))
    assert caught.value.exit_code == 2
    assert dp.haproxy is None


def lab_run(name: str, folder: Path) -> tuple[dict[str, Any], Path]:
    bundle = folder / name
    done = subprocess.run(
        command(name, bundle, "--format", "json"),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), bundle


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict[str, Any], Path]]:
    if HAPROXY_MISSING:
        pytest.skip(HAPROXY_MISSING)
    folder = tmp_path_factory.mktemp("haproxy")
    names = ("lb-ip", "lb-ip-fixed")
    before = leftovers()  # other runs on this machine are left alone
    with ThreadPoolExecutor(len(names)) as pool:
        done = list(pool.map(lambda name: lab_run(name, folder), names))
    after = leftovers()  # of runs that ended: namespaces, pods, haproxy, lock files
    assert set(after.namespaces) <= set(before.namespaces)
    assert set(after.processes) <= set(before.processes)
    assert set(after.folders) <= set(before.folders)
    return dict(zip(names, done, strict=True))


@pytest.mark.lab
def test_the_kube_proxy_sized_prestop_fails_in_the_lb_s_leg(
    runs: dict[str, tuple[dict[str, Any], Path]],
) -> None:
    out, bundle = runs["lb-ip"]
    failed = out["failed"]
    assert failed >= 20, out
    assert out["by_outcome"] == {"ok": out["requests"] - failed, "http_error": failed}
    truth = json.loads((bundle / "lab.json").read_text())
    lb = truth["load_balancer"]
    assert lb["failed"] == failed
    assert lb["failed_in_leg"] == failed  # each after its pod stopped, before the LB left it
    assert lb["failed_without_target"] == 0
    assert lb["expected_failures"] == pytest.approx(failed, rel=0.25)
    assert truth["ground_truth"]["expected_race_failures"] == lb["expected_failures"]
    states = [(t["pod"], t["state"]) for t in lb["transitions"]]
    for pod, timeline in truth["ground_truth"]["deleted_pods"].items():
        assert (pod, "drain") in states
        # the LB stopped sending new requests its leg after the deletion, after the preStop
        removed = lb["stopped_sending"][pod]
        assert LB_LEG.a - 0.1 <= removed - timeline["deleted"] <= LB_LEG.b + 0.5
        assert removed > timeline["stopped_accepting"]
    for pod in ("api-5b4c3d2e1-00", "api-5b4c3d2e1-01"):  # registered, then ready a leg later
        assert states.index((pod, "added")) < states.index((pod, "ready"))
    log = (bundle / "load-balancer" / "haproxy.log").read_text().splitlines()
    # each failure is the server's side in haproxy's words: refused (503 SC--), or, for a
    # connection the stopping pod had accepted, closed before its response (502 SH--)
    server_side = (" 503 ", " SC-- "), (" 502 ", " SH-- ")
    assert sum(1 for ln in log if any(a in ln and b in ln for a, b in server_side)) == failed
    assert any("enters drain state" in ln for ln in log)  # haproxy's own words
    rows = (bundle / "requests.csv").read_text().splitlines()
    failures = [r for r in rows[1:] if ",http_error," in r]
    old = tuple(truth["ground_truth"]["deleted_pods"])
    assert all(any(f",{pod}," in r for pod in old) for r in failures)  # the right pod's lane


@pytest.mark.lab
def test_the_path_aware_plan_has_no_failure(
    runs: dict[str, tuple[dict[str, Any], Path]],
) -> None:
    out, bundle = runs["lb-ip-fixed"]
    assert out["failed"] == 0, out
    assert out["requests"] >= 1000
    lb = json.loads((bundle / "lab.json").read_text())["load_balancer"]
    assert lb["failed"] == 0
    assert lb["expected_failures"] == 0
    assert len(lb["stopped_sending"]) == 2


@needs_haproxy
@pytest.mark.lab
def test_ctrl_c_leaves_no_haproxy_behind(tmp_path: Path) -> None:
    others = set(job_processes().values())  # other runs on this machine
    proc = subprocess.Popen(
        command("lb-ip", tmp_path / "bundle"), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    end = time.monotonic() + 60
    ours: set[str] = set()
    while not ours and time.monotonic() < end and proc.poll() is None:
        ours = runs_started_by(proc.pid) - others  # this run's, not a neighbour test's
        time.sleep(0.1)
    assert len(ours) == 1, "haproxy never started"
    time.sleep(1.0)  # haproxy serves, the pods start
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 128 + signal.SIGINT
    (run,) = ours
    assert run not in set(job_processes().values())
    assert not [ns for ns in namespaces_of_runs() if ns.startswith(f"{run}-")]
    assert not [p for p, (r, _, _) in pod_processes().items() if r == run]
    assert not (lock_dir() / f"{run}-jobs").exists()


@pytest.mark.lab
def test_diagnose_measures_the_load_balancer_s_leg_from_haproxy_s_own_log(
    runs: dict[str, tuple[dict[str, Any], Path]],
) -> None:
    """diagnose reads haproxy's state changes in the bundle as the LB's leg: for every
    deleted pod, when haproxy drained it, as the lab's truth has it; the plan covers it."""
    _, bundle = runs["lb-ip"]
    lab = json.loads((bundle / "lab.json").read_text())
    done = subprocess.run(
        [*SVCDOCTOR, "diagnose", str(bundle), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    race = next(c for c in json.loads(done.stdout)["causes"] if c["cause"] == "race")
    leg = next(h for h in race["details"]["hops"] if h["by"] == "haproxy")
    assert leg["hop"] == "load-balancer"
    stops = {s["pod"]: s for s in leg["stops"]}
    assert set(stops) == set(lab["ground_truth"]["deleted_pods"])
    for pod, stop in stops.items():  # haproxy's clock and the lab's agree to the millisecond
        assert stop["stopped_at"] == pytest.approx(
            lab["load_balancer"]["stopped_sending"][pod], abs=0.05
        )
    assert LB_LEG.a - 0.6 <= leg["median_seconds"] <= LB_LEG.b + 1.5
    assert any(line.startswith("load-balancer (haproxy") for line in race["evidence"])
    # two deletions are too few for the placement test; each failure inside the LB's leg
    # of the pod it went to names the race, and the plan covers that leg
    assert leg["failures"] >= 0.95 * lab["load_balancer"]["failed_in_leg"]
    assert json.loads(done.stdout)["primary_cause"] == "race"
    assert race["details"]["recommended_prestop_seconds"] >= leg["covers_seconds"]
