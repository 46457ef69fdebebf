"""``svcdoctor rollout-test``: the pure parts (workload names, the restart patch, rollout
completion, phases, the deletion → endpoint delay, what makes a test incomplete), its
refusals (nothing created), a transient API error while polling, the bundle written even
when collect fails, and end to end against ``lab serve``: race, race-fixed and sigkill, an
incomplete test failing, and no object left after a normal run, Ctrl-C and an agent
crash."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from svcdoctor.cli import cli
from svcdoctor.cluster.agentjob import MANAGED_SELECTOR, remaining
from svcdoctor.cluster.api import connect_active
from svcdoctor.cluster.collect import SEEN, check_out
from svcdoctor.cluster.edge import Edge, EdgeKind
from svcdoctor.cluster.reader import ClusterError
from svcdoctor.cluster.rollout import (
    RESTARTED_AT,
    Plan,
    Refused,
    RolloutTest,
    Timing,
    _done,
    _Watch,
    by_phase,
    check_plan,
    incomplete_reasons,
    parse_workload,
    pick_service,
    pod_delays,
    record_seen,
    restart_patch,
    rolled_out,
    service_address,
)
from svcdoctor.cluster.rollout_evidence import Evidence
from svcdoctor.diagnose.race import BIN
from svcdoctor.fix.plan import read_diagnosis
from tests.cluster.conftest import Served

ROOT = Path(__file__).resolve().parents[2]

KEYS = {"workload", "mode", "node", "through", "path", "requests", "failed", "by_outcome",
        "primary_cause", "dropped_at", "window_seconds", "endpoint_update_seconds", "remedy",
        "bundle", "diagnosis_file"}  # fmt: skip


def test_workload_names_as_kubectl_spells_them() -> None:
    assert parse_workload("deployment/api") == ("deployments", "api")
    assert parse_workload("deploy/api") == ("deployments", "api")
    assert parse_workload("sts/db") == ("statefulsets", "db")
    assert parse_workload("api") == ("deployments", "api")
    with pytest.raises(Refused, match="expected deployment/NAME"):
        parse_workload("daemonset/x")


def test_the_restart_is_kubectl_rollout_restarts_patch() -> None:
    patch = restart_patch(0.0)
    assert patch == {
        "spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: "1970-01-01T00:00:00Z"}}}}
    }


def _deployment(**status: int) -> dict[str, Any]:
    return {"kind": "Deployment", "metadata": {"generation": 2}, "spec": {"replicas": 3},
            "status": {"observedGeneration": 2, **status}}  # fmt: skip


def test_rollout_completion_as_kubectl_rollout_status() -> None:
    assert rolled_out(_deployment(updatedReplicas=3, replicas=3, availableReplicas=3))
    assert not rolled_out(_deployment(updatedReplicas=3, replicas=4, availableReplicas=3))
    assert not rolled_out(_deployment(updatedReplicas=2, replicas=3, availableReplicas=3))
    stale = _deployment(updatedReplicas=3, replicas=3, availableReplicas=3)
    stale["status"]["observedGeneration"] = 1
    assert not rolled_out(stale)


def test_the_service_is_the_one_selecting_the_pods() -> None:
    api = {"metadata": {"name": "api"}, "spec": {"selector": {"app": "api"}}}
    other = {"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}}}
    assert pick_service([api, other], {"app": "api", "tier": "x"}, "deployment/api") is api
    with pytest.raises(Refused, match="no Service selects"):
        pick_service([other], {"app": "api"}, "deployment/api")
    with pytest.raises(Refused, match=r"several Services .*\(api, api2\)"):
        pick_service([api, {**api, "metadata": {"name": "api2"}}], {"app": "api"}, "d/api")
    svc = {"metadata": {"name": "api"}, "spec": {"clusterIP": "10.96.0.1",
           "ports": [{"name": "http", "port": 80}, {"name": "admin", "port": 81}]}}  # fmt: skip
    assert service_address(svc) == "10.96.0.1:80"
    assert service_address(svc, "admin") == "10.96.0.1:81"
    with pytest.raises(Refused, match="headless"):
        service_address({"metadata": {"name": "h"}, "spec": {"clusterIP": "None"}})


def test_failures_by_phase() -> None:
    rows = [{"ts": t, "outcome": o} for t, o in [(1, "ok"), (5, "reset"), (6, "refused"),
                                                 (9, "ok"), (12, "reset")]]  # fmt: skip
    phases = by_phase(rows, Timing(0.0, 4.0, 10.0, 13.0))
    assert phases == {
        "before": {"requests": 1},
        "during": {"requests": 3, "reset": 1, "refused": 1},
        "after": {"requests": 1, "reset": 1},
    }


def _rec(kind: str, obj: dict[str, Any], at: float) -> dict[str, Any]:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1e6):06d}Z"
    obj["metadata"].setdefault("annotations", {})[SEEN] = stamp
    return {"type": kind, "object": obj}


def test_deletion_to_endpoint_update_and_the_window_per_pod() -> None:
    def pod(name: str, deleting: bool) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name}
        if deleting:
            meta["deletionTimestamp"] = "2026-01-01T00:00:30Z"
        return {"metadata": meta}

    def slice_(**ready: bool) -> dict[str, Any]:
        eps = [{"targetRef": {"name": n}, "conditions": {"ready": r}} for n, r in ready.items()]
        return {"metadata": {"name": "s1"}, "endpoints": eps}

    pods = [_rec("ADDED", pod("a", False), 100.0), _rec("MODIFIED", pod("a", True), 110.0),
            _rec("MODIFIED", pod("b", True), 120.0)]  # fmt: skip
    slices = [_rec("ADDED", slice_(a=True, b=True), 100.0),
              _rec("MODIFIED", slice_(a=False, b=True), 110.75),
              _rec("MODIFIED", slice_(b=True), 111.0),
              _rec("MODIFIED", slice_(), 121.5)]  # fmt: skip
    delays = pod_delays(pods, slices, [110.5, 111.25, 125.0], record_seen)
    assert [(d.pod, d.update_seconds, d.window_seconds) for d in delays] == [
        ("a", pytest.approx(0.75), pytest.approx(1.25)),
        ("b", pytest.approx(1.5), pytest.approx(5.0)),
    ]


def test_an_incomplete_test_says_why() -> None:
    plan = Plan("shop", "deployments", "api", Path("b"), duration=30.0)
    done = Timing(1.0, 4.0, 20.0, 30.0)
    assert incomplete_reasons(plan, done, interrupted=False, done=True) == []
    stuck = Timing(1.0, 4.0, None, 30.0)
    assert incomplete_reasons(plan, stuck, interrupted=False, done=True) == [
        "the rollout did not finish within --duration 30s"
    ]
    assert incomplete_reasons(plan, stuck, interrupted=True, done=True) == []  # exit 130
    (reason,) = incomplete_reasons(plan, done, interrupted=False, done=False)
    assert "without its done line" in reason
    check_plan(plan)
    with pytest.raises(Refused, match=r"--duration 8s leaves no time for the rollout"):
        check_plan(Plan("shop", "deployments", "api", Path("b"), duration=8.0, tail=5.0))


def test_an_incomplete_test_never_claims_zero_downtime(capsys: pytest.CaptureFixture[str]) -> None:
    from svcdoctor.cli.rollout_test import _text

    plan = Plan("shop", "deployments", "api", Path("b"))
    base = RolloutTest(plan, "api", 100, 0, {"ok": 100}, by_phase([], Timing()), (),
                       Timing(), None, Path("b"), False, None)  # fmt: skip
    _text(base)
    assert "zero-downtime" in capsys.readouterr().out
    _text(replace(base, incomplete=("the rollout did not finish",)))
    out = capsys.readouterr().out
    assert "zero-downtime" not in out
    assert "INCOMPLETE: the rollout did not finish" in out
    _text(replace(base, interrupted=True))
    assert "zero-downtime" not in capsys.readouterr().out


def test_the_report_says_which_hop_dropped_the_requests() -> None:
    plan = Plan("shop", "deployments", "api", Path("b"))
    base = RolloutTest(plan, "api", 100, 5, {"ok": 95, "refused": 5}, by_phase([], Timing()), (),
                       Timing(), None, Path("b"), False, None)  # fmt: skip
    assert base.dropped_at is not None
    assert base.dropped_at.startswith("the Service's datapath (kube-proxy's leg)")
    edge = Edge(EdgeKind.INGRESS, "ingress/api", "10.0.0.9:80")
    through = replace(base, edge=edge, by_outcome={"ok": 95, "http_error": 3, "refused": 2})
    assert through.dropped_at == (
        "3 answered 5xx by the edge (ingress 10.0.0.9:80) itself: the drop was on its leg to "
        "the pods (it still sent to pods that had stopped); 2 failed on the connection to the "
        "edge (ingress 10.0.0.9:80): the edge itself, or what is in front of it"
    )
    assert replace(base, failed=0, by_outcome={"ok": 100}).dropped_at is None


def test_the_diagnosis_is_written_and_the_fix_command_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from importlib.resources import files

    from svcdoctor.cli.diagnose import EXAMPLE
    from svcdoctor.cli.rollout_test import _text, _write_diagnosis
    from svcdoctor.diagnose import Settings, diagnose
    from svcdoctor.evidence.reader import read_evidence

    diagnosis = diagnose(read_evidence([str(files("svcdoctor.examples") / EXAMPLE)]), Settings())
    plan = Plan("shop", "deployments", "api", tmp_path)
    t = RolloutTest(plan, "api", 100, 5, {"ok": 95, "refused": 5}, by_phase([], Timing()), (),
                    Timing(), diagnosis, tmp_path, False, None)  # fmt: skip
    _write_diagnosis(t)
    _text(t)
    out = capsys.readouterr().out
    written = tmp_path / "diagnosis.json"
    prestop, _ = t.remedy
    assert prestop is not None
    assert f"svcdoctor fix YOUR-MANIFESTS --from-diagnosis {written} --write" in out
    measured = read_diagnosis(written)  # what fix --from-diagnosis reads
    assert measured.plan is not None
    assert measured.plan.prestop_seconds == prestop
    assert json.loads(written.read_text())["causes"][0]["cause"] == diagnosis.causes[0].cause.value


class _Flaky:
    """The workload read fails twice (an API server restarting), then answers."""

    def __init__(self, obj: dict[str, Any]) -> None:
        self.obj, self.calls = obj, 0

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        self.calls += 1
        if self.calls <= 2:
            raise ClusterError("the API server at https://x (context c) did not answer")
        return self.obj


def test_a_transient_api_error_while_polling_is_a_note_and_retried() -> None:
    api: Any = _Flaky(_deployment(updatedReplicas=3, replicas=3, availableReplicas=3))
    plan = Plan("shop", "deployments", "api", Path("b"))
    watch = _Watch(api, "shop", "api", "app=api", 0.0)
    assert _done(api, plan, watch) is False
    assert _done(api, plan, watch) is False
    assert watch.lost() is None  # not for LOST_SECONDS yet
    assert watch.notes == [
        "reading deployment/api failed (retried): the API server at https://x (context c) "
        "did not answer"
    ]
    assert _done(api, plan, watch) is True
    assert watch.failing_since is None


def test_a_server_gone_for_good_is_reported_as_lost_not_as_a_slow_rollout() -> None:
    plan = Plan("shop", "deployments", "api", Path("b"), duration=30)
    watch = _Watch(_Flaky({}), "shop", "api", "app=api", 0.0)
    watch.read_failed("deployment/api", ClusterError("cannot reach the API server"))
    assert watch.failing_since is not None
    watch.failing_since -= 16
    lost = watch.lost()
    assert lost is not None
    assert "stopped answering" in lost
    assert "cannot reach" in lost
    reasons = incomplete_reasons(plan, Timing(), False, True, lost, ["watch of pods stopped: x"])
    assert reasons == [lost, "watch of pods stopped: x"]
    assert not any("did not finish" in r for r in reasons)


def _agent_rows(n: int) -> list[dict[str, Any]]:
    now = time.time()
    return [{"ts": now - n + i, "outcome": "ok" if i % 5 else "reset", "latency_ms": 1.5,
             "client": "agent-x", "mode": "service", "role": "x"} for i in range(n)]  # fmt: skip


@pytest.mark.parametrize("service", [True, False])
def test_the_bundle_holds_the_agents_rows_even_when_collect_fails(
    api: Served, tmp_path: Path, service: bool
) -> None:
    from svcdoctor.evidence.reader import read_evidence

    if service:
        _workload(api, ready=2)
    out = tmp_path / "bundle"
    out.mkdir()  # an earlier bundle: its files are replaced, not mixed in
    (out / "collect.json").write_text(json.dumps({"svcdoctor_collect": 1}))
    (out / "ingress-nginx-old.log").write_text("old\n")
    (out / "diagnosis.json").write_text('{"schema_version": 2, "causes": []}')  # a stale one
    assert check_out(out)  # an earlier rollout-test bundle may be replaced
    reader = connect_active(kubeconfig=str(api.kubeconfig), namespace="shop")
    plan = Plan("shop", "deployments", "api", out)
    evidence = Evidence(plan, "api", time.time() - 30)
    evidence.first([], [], _agent_rows(50), "agent-x", ["a note"])
    client = out / "client-agent-x.jsonl"
    assert len(client.read_text().splitlines()) == 50  # written before collect runs
    assert not (out / "ingress-nginx-old.log").exists()
    assert not (out / "diagnosis.json").exists()
    first = json.loads((out / "collect.json").read_text())
    assert "a note" in first["notes"]
    notes = ["a note"]
    assert evidence.complete(reader, notes) == out
    manifest = json.loads((out / "collect.json").read_text())
    files = {f["file"]: f for f in manifest["files"]}
    assert files["client-agent-x.jsonl"]["rows"] == 50
    assert not [p for p in out.iterdir() if p.name.startswith(".")]
    if service:
        assert (out / "service.json").is_file()
        assert not any("snapshot" in n for n in manifest["notes"])
    else:
        assert any(
            n.startswith("collecting the Service's snapshot failed: service shop/api not found")
            for n in manifest["notes"]
        )
    assert read_evidence([str(out)]).requests.height == 50
    (out / "diagnosis.json").write_text('{"schema_version": 2, "causes": []}')
    found = read_evidence([str(out)])  # rollout-test's diagnosis: a result, not evidence
    assert not [p for p in found.problems if "diagnosis.json" in p]
    assert any(s.format == "svcdoctor-diagnosis" for s in found.sources)


def _workload(api: Served, ready: int) -> None:
    labels = {"app": "api"}
    api.put(
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "api", "namespace": "shop", "uid": "d1", "generation": 1},
         "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": {"containers": []}}},
         "status": {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
                    "readyReplicas": ready, "availableReplicas": ready}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "api", "namespace": "shop", "uid": "s1"},
         "spec": {"clusterIP": "10.96.0.9", "selector": labels, "ports": [{"port": 80}]}},
    )  # fmt: skip


def test_a_duration_without_room_for_the_rollout_is_refused(api: Served, tmp_path: Path) -> None:
    _workload(api, ready=2)
    done = _run(api, "--yes", "--duration", "8s", "--tail", "5s", "--out", str(tmp_path / "b"))
    assert done.exit_code == 2, done.output
    (line,) = done.output.strip().splitlines()
    assert "--duration 8s leaves no time for the rollout" in line
    reader = connect_active(kubeconfig=str(api.kubeconfig))
    assert remaining(reader, None, MANAGED_SELECTOR) == []
    assert RESTARTED_AT not in str(reader.get("deployments", "shop", "api"))
    bad = _run(api, "--yes", "--path", "nope", "--out", str(tmp_path / "b"))
    assert bad.exit_code == 2, bad.output
    assert "--path must start with /" in bad.output
    assert remaining(reader, None, MANAGED_SELECTOR) == []
    assert RESTARTED_AT not in str(reader.get("deployments", "shop", "api"))
    assert not (tmp_path / "b").exists()


def _run(api: Served, *args: str) -> Any:
    base = ["rollout-test", "deployment/api", "--kubeconfig", str(api.kubeconfig), "-n", "shop"]
    return CliRunner().invoke(cli, [*base, *args])


def test_refuses_without_yes_and_with_one_ready_replica(api: Served, tmp_path: Path) -> None:
    _workload(api, ready=1)
    out = str(tmp_path / "b")
    without = _run(api, "--out", out)
    assert without.exit_code == 2
    assert "pass --yes" in without.output
    one = _run(api, "--yes", "--out", out)
    assert one.exit_code == 2
    assert "has 1 ready replica(s)" in one.output
    assert "--allow-outage" in one.output
    kubeconfig = str(api.kubeconfig)
    missing = CliRunner().invoke(
        cli, ["rollout-test", "deployment/nope", "--yes", "--kubeconfig", kubeconfig, "-n", "shop"]
    )
    assert missing.exit_code == 2
    assert "deployment/nope not found" in missing.output
    reader = connect_active(kubeconfig=str(api.kubeconfig))
    assert remaining(reader, None, MANAGED_SELECTOR) == []
    assert not (tmp_path / "b").exists()
    deployment = reader.get("deployments", "shop", "api")
    assert deployment is not None
    assert RESTARTED_AT not in str(deployment)  # never restarted


# ---- end to end against lab serve -------------------------------------------------------


def _rollout_on(
    kubeconfig: Path, tmp_path: Path, *args: str, fmt: str = "json"
) -> tuple[Any, list[str]]:
    """rollout-test of the lab's deployment/api, and what ``cleanup --dry-run`` finds after."""
    from tests.cluster.test_live_lab import svcdoctor

    done = svcdoctor("rollout-test", "deployment/api", "--kubeconfig", str(kubeconfig),
                     "--rate", "40", "--duration", "70", "--yes", "-o", fmt,
                     "--out", str(tmp_path / "bundle"), *args, timeout=200)  # fmt: skip
    left = json.loads(
        svcdoctor("cleanup", "--kubeconfig", str(kubeconfig), "--dry-run", "-o", "json").stdout
    )["found"]
    return done, left


def _lab_rollout(
    tmp_path: Path, scenario: str, *args: str, fmt: str = "json"
) -> tuple[Any, dict[str, Any], list[str]]:
    from tests.cluster.test_live_lab import lab_serve

    with lab_serve(tmp_path, scenario, "--no-load") as kubeconfig:
        done, left = _rollout_on(kubeconfig, tmp_path, *args, fmt=fmt)
    truth = json.loads((tmp_path / "truth.json").read_text())
    return done, truth, left


def _window_seen(truth: dict[str, Any], bundle: Path) -> float:
    """The race window as the load agent could see it: how long the nodes its requests
    left from kept routing to a pod this test deleted after it stopped accepting (the
    truth's ``race_window_seconds`` is the largest over every node, which one agent cannot
    see; its ``deleted_pods`` are every rollout's on the lab)."""
    from svcdoctor.evidence.reader import read_evidence

    rows = [json.loads(line) for f in bundle.glob("client-*.jsonl") for line in f.open()]
    nodes = {int(str(r["node"]).removeprefix("node-")) for r in rows}
    mine = {p.name for p in read_evidence([str(bundle)]).pods if p.deleted_at is not None}
    assert len(mine) == 4, mine
    return max(
        max(stopped[n] for n in nodes) - pod["stopped_accepting"]
        for name, pod in truth["deleted_pods"].items()
        if name in mine and len(stopped := pod["routing_stopped"]) > max(nodes)
    )


@dataclass(frozen=True)
class Rollout:
    """One rollout-test run on a lab serve: its outcome, its bundle, and what ``cleanup
    --dry-run`` found right after it."""

    done: subprocess.CompletedProcess[str]
    bundle: Path
    left: list[Any]

    @property
    def report(self) -> dict[str, Any]:
        assert self.done.returncode == 1, self.done.stderr
        out: dict[str, Any] = json.loads(self.done.stdout)
        return out


@dataclass(frozen=True)
class RaceTwice:
    first: Rollout  # with --html page
    second: Rollout
    truth: dict[str, Any]  # the serve's ground truth: both rollouts' deleted pods
    page: Path


@pytest.fixture(scope="module")
def race_twice(tmp_path_factory: pytest.TempPathFactory) -> RaceTwice:
    """Two rollout-tests in a row on one ``lab serve --scenario race`` (the first as a
    user's first test on the lab runs it, with ``--html``): the first is what
    test_rollout_test_measures_the_race checks, the pair what
    test_a_second_rollout_test_reports_only_its_own_rollout checks."""
    from tests.cluster.test_live_lab import lab_serve, svcdoctor

    tmp = tmp_path_factory.mktemp("race-twice")
    page = tmp / "rollout.html"
    runs = []
    with lab_serve(tmp, "race", "--no-load", "--for", "240") as kubeconfig:
        for out, extra in (("first", ("--html", str(page))), ("second", ())):
            done = svcdoctor("rollout-test", "deployment/api", "--kubeconfig", str(kubeconfig),
                             "--rate", "40", "--duration", "70", "--yes", "-o", "json",
                             "--out", str(tmp / out), *extra, timeout=200)  # fmt: skip
            left = json.loads(
                svcdoctor(
                    "cleanup", "--kubeconfig", str(kubeconfig), "--dry-run", "-o", "json"
                ).stdout
            )["found"]
            runs.append(Rollout(done, tmp / out, left))
    truth = json.loads((tmp / "truth.json").read_text())
    return RaceTwice(runs[0], runs[1], truth, page)


@pytest.mark.lab
def test_rollout_test_measures_the_race(race_twice: RaceTwice) -> None:
    run = race_twice.first
    report = run.report
    assert set(report) == KEYS
    assert report["failed"] > 0
    assert report["primary_cause"] == "race"
    seen = _window_seen(race_twice.truth, run.bundle)
    assert seen > 0
    # the window is the lag of the last failures the agent saw: the race went on after the
    # last one by up to the gap between two requests to that pod, which one lag bin covers
    assert seen - BIN <= report["window_seconds"] <= seen + 3
    assert report["remedy"]["prestop_seconds"] >= max(report["window_seconds"], seen)
    assert report["remedy"]["grace_seconds"] > report["remedy"]["prestop_seconds"]
    assert report["endpoint_update_seconds"] is not None
    assert run.left == []
    assert (run.bundle / "collect.json").is_file()
    # the diagnosis fix --from-diagnosis takes, as diagnose -o json writes it
    assert report["diagnosis_file"] == str(run.bundle / "diagnosis.json")
    measured = read_diagnosis(Path(report["diagnosis_file"]))
    assert measured.plan is not None
    assert measured.plan.prestop_seconds == report["remedy"]["prestop_seconds"]
    again = subprocess.run(
        [sys.executable, "-m", "svcdoctor", "diagnose", str(run.bundle), "-o", "json"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    written = json.loads(Path(report["diagnosis_file"]).read_text())
    assert json.loads(again.stdout)["causes"] == written["causes"]  # diagnose skips the file
    html = race_twice.page.read_text()  # the lanes of the rollout's bundle, one failed mark
    assert "requests failed during the rollout" in html  # per failure
    assert f"{report['failed']} failed requests" in html


@pytest.mark.lab
def test_a_second_rollout_test_reports_only_its_own_rollout(race_twice: RaceTwice) -> None:
    """Two tests in a row on one lab: the second counts its own 4 deletions (not the first's
    too), draws no lane for the first test's pods, ends each old pod's terminating line at
    its exit, and puts the failures (which name no backend: refused through the ClusterIP)
    on the pods whose race window held them, not on an unknown backend."""
    from svcdoctor.diagnose import Settings, diagnose
    from svcdoctor.diagnose.lanes import build_lanes
    from svcdoctor.evidence.reader import read_evidence
    from svcdoctor.model.lanes import UNKNOWN_BACKEND, Moment

    first, second_run = race_twice.first, race_twice.second
    assert first.done.returncode == 1, first.done.stderr
    second = json.loads(Path(second_run.report["diagnosis_file"]).read_text())
    assert second["summary"]["deletions"] == 4
    manifest = json.loads((second_run.bundle / "collect.json").read_text())
    assert any("events about pods this test did not see left out" in n for n in manifest["notes"])
    first_pods = watched_names(first.bundle) - watched_names(second_run.bundle)
    evidence = read_evidence([str(second_run.bundle)])
    lanes = build_lanes(evidence, diagnose(evidence, Settings()))
    assert first_pods
    assert not first_pods & {lane.pod for lane in lanes.lanes}
    deleted = [lane for lane in lanes.lanes if lane.stamp(Moment.DELETION)]
    assert len(deleted) == 4
    for lane in deleted:  # terminating from the deletion to the exit, inside the chart
        deletion, exited = lane.stamp(Moment.DELETION), lane.stamp(Moment.EXITED)
        assert deletion is not None
        assert exited is not None
        assert lanes.start <= deletion.ts <= exited.ts <= lanes.end
    unknown = lanes.lane(UNKNOWN_BACKEND)
    on_pods = sum(len(lane.failures) for lane in deleted)
    assert on_pods >= 0.9 * lanes.failed, (on_pods, lanes.failed)
    assert unknown is None or len(unknown.failures) <= 0.1 * lanes.failed
    assert second_run.left == []


def watched_names(bundle: Path) -> set[str]:
    from svcdoctor.cluster.window import watched_pods

    return watched_pods(bundle / "pods.json")


@pytest.mark.lab
def test_rollout_test_passes_the_fixed_rollout(tmp_path: Path) -> None:
    done, _, left = _lab_rollout(tmp_path, "race-fixed")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["failed"] == 0
    assert report["requests"] > 100
    assert report["primary_cause"] is None
    assert left == []


@pytest.mark.lab
def test_rollout_test_names_the_sigkill(tmp_path: Path) -> None:
    done, truth, left = _lab_rollout(tmp_path, "sigkill", "--max-failures", "100000", fmt="text")
    assert done.returncode == 0, done.stderr  # under the gate: a CI pass
    assert "cause: race" in done.stdout
    assert "exited 137 (SIGKILL)" in done.stdout  # the mechanism, in rollout-test's own words
    # no race window to plan a preStop from: fix --from-diagnosis cannot take it, so the
    # output names the bundle's diagnosis but no fix command
    assert f"its diagnosis: {tmp_path / 'bundle' / 'diagnosis.json'}" in done.stdout
    assert "--from-diagnosis" not in done.stdout
    assert any(p["exit_code"] == 137 for p in truth["deleted_pods"].values())
    diagnosis = subprocess.run(
        [sys.executable, "-m", "svcdoctor", "diagnose", str(tmp_path / "bundle"), "-o", "json"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    race = next(c for c in json.loads(diagnosis.stdout)["causes"] if c["cause"] == "race")
    assert race["details"]["sigkilled"]
    assert any("SIGKILL" in line for line in race["evidence"])
    assert left == []


@pytest.mark.lab
def test_a_rollout_longer_than_the_duration_fails_the_test(tmp_path: Path) -> None:
    # race-fixed's old pods sleep 3 s in preStop: the rollout cannot end 1 s after the restart
    done, _, left = _lab_rollout(tmp_path, "race-fixed", "--duration", "9", "--tail", "5",
                                 fmt="text")  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "zero-downtime" not in done.stdout
    assert "INCOMPLETE" in done.stdout or "failed" in done.stdout
    (line,) = done.stderr.strip().splitlines()
    assert "rollout-test incomplete: the rollout did not finish within --duration 9s" in line
    assert (tmp_path / "bundle" / "collect.json").is_file()
    assert left == []


@pytest.mark.lab
def test_ctrl_c_stops_the_load_lets_the_rollout_finish_and_cleans_up(tmp_path: Path) -> None:
    from tests.cluster.test_live_lab import lab_serve

    with lab_serve(tmp_path, "race-fixed", "--no-load") as kubeconfig:
        proc = subprocess.Popen(
            [sys.executable, "-m", "svcdoctor", "rollout-test", "deployment/api", "--yes",
             "--kubeconfig", str(kubeconfig), "--out", str(tmp_path / "b"), "-o", "json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        reader = connect_active(kubeconfig=str(kubeconfig))
        deadline = time.time() + 60
        while time.time() < deadline:  # until the restart
            dep = reader.get("deployments", "lab", "api") or {}
            if RESTARTED_AT in json.dumps(dep):
                break
            time.sleep(0.3)
        else:
            proc.kill()
            pytest.fail("rollout-test never restarted the deployment")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
        assert proc.returncode == 130, err
        assert remaining(reader, None, MANAGED_SELECTOR) == []
        assert json.loads(out)["bundle"] == str(tmp_path / "b")
        assert (tmp_path / "b" / "collect.json").is_file()


def test_network_policy_bounds_the_load_or_fails_cleanly(api: Served, tmp_path: Path) -> None:
    """--network-policy: the agent's egress is the Service's pods on the ports its
    EndpointSlices name; the lab's API server serves no NetworkPolicies, so the test stops
    with one line before anything is created or restarted."""
    _workload(api, ready=2)
    api.put(
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": "api-x", "namespace": "shop",
                      "labels": {"kubernetes.io/service-name": "api"}},
         "addressType": "IPv4", "ports": [{"port": 8080}],
         "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}}]},
    )  # fmt: skip
    done = _run(api, "--yes", "--network-policy", "--out", str(tmp_path / "b"))
    assert done.exit_code == 2, done.output
    assert len(done.output.strip().splitlines()) == 1
    assert "networkpolicies" in done.output
    reader = connect_active(kubeconfig=str(api.kubeconfig))
    assert remaining(reader, None, MANAGED_SELECTOR) == []
    assert RESTARTED_AT not in str(reader.get("deployments", "shop", "api"))
