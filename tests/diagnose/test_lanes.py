"""Per-pod lanes from real-format bundles: the marks on each lane are the failed requests
per backend, the shades are the diagnosed windows after the deletions, the axis covers the
requests, and each moment comes from an input (never guessed)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest

from svcdoctor.diagnose import diagnose
from svcdoctor.diagnose.lanes import build_lanes
from svcdoctor.diagnose.race import TOLERANCE
from svcdoctor.evidence import read_evidence
from svcdoctor.model import (
    FAILURES,
    Cause,
    Diagnosis,
    EventKind,
    Evidence,
    LifecycleEvent,
    PodInfo,
    RaceDetails,
)
from svcdoctor.model.lanes import OTHER_PODS, UNKNOWN_BACKEND, Lanes, Moment
from tests.factory import T0, Scenario, generate, write_bundle

DEPLOYMENT = """\
apiVersion: v1
kind: Service
metadata: {{name: api, namespace: default}}
spec:
  selector: {{app: api}}
  ports: [{{port: 80, targetPort: 8080}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: api, namespace: default}}
spec:
  replicas: 8
  selector: {{matchLabels: {{app: api}}}}
  template:
    metadata: {{labels: {{app: api}}}}
    spec:
      terminationGracePeriodSeconds: 30
      containers:
        - name: app
          image: example/api:2.0
          ports: [{{containerPort: 8080}}]
{lifecycle}"""
PRESTOP = """\
          lifecycle:
            preStop: {exec: {command: ["sleep", "5"]}}
"""
SIM = ("--nodes", "50", "--replicas", "8", "--rate", "100", "--duration", "120", "--runs", "1")


def bundle(folder: Path, scenario: Scenario, fmt: str = "csv", manifest: str | None = None) -> Path:
    """A factory bundle in a real format, with a manifest beside it when given."""
    write_bundle(generate(scenario), folder, fmt, events_api="events.k8s.io/v1")
    if manifest is not None:
        (folder / "deployment.yaml").write_text(manifest)
    return folder


def simulated(folder: Path, *options: str) -> Path:
    """``svcdoctor simulate --emit-evidence``: the bundle a user gets."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "svcdoctor",
            "simulate",
            *SIM,
            *options,
            "--emit-evidence",
            str(folder),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return folder


def diagnosed(folder: Path) -> tuple[Evidence, Diagnosis]:
    evidence = read_evidence([str(folder)])
    return evidence, diagnose(evidence)


def failed_per_pod(evidence: Evidence) -> Counter[str]:
    """Failed requests and failed retried attempts per pod, straight from the request rows:
    the backend's IP (or name) → the pod with that IP (or name) in pods.json."""
    by_ip = {p.ip: p.name for p in evidence.pods if p.ip}
    names = {p.name for p in evidence.pods}
    rows = evidence.requests.filter(
        pl.col("outcome").is_in(FAILURES) & pl.col("role").is_in(["request", "masked"])
    )
    out: Counter[str] = Counter()
    for backend in rows.get_column("backend").to_list():
        if backend is None:
            out[UNKNOWN_BACKEND] += 1
        elif backend in names:
            out[backend] += 1
        else:
            out[by_ip.get(backend.rsplit(":", 1)[0], backend)] += 1
    return out


def stamped_pods(evidence: Evidence) -> set[str]:
    return {p.name for p in evidence.pods}


def marks(lanes: Lanes) -> Counter[str]:
    return Counter({lane.pod: len(lane.failures) for lane in lanes.lanes if lane.failures})


def window_of(d: Diagnosis) -> float:
    details = d.cause(Cause.RACE).details
    assert isinstance(details, RaceDetails)
    assert details.window is not None
    return details.window.seconds


def deletions(evidence: Evidence) -> dict[str, float]:
    """Each pod's deletion: its earliest precise report (events.k8s.io eventTime), else
    its earliest report (whole seconds)."""
    out: dict[str, tuple[bool, float]] = {}
    for e in evidence.events:
        if e.kind is EventKind.DELETE and e.pod:
            out[e.pod] = min(out.get(e.pod, (True, e.ts)), (e.resolution > 0, e.ts))
    return {pod: ts for pod, (_, ts) in out.items()}


@pytest.fixture(scope="module")
def race(tmp_path_factory: pytest.TempPathFactory) -> tuple[Evidence, Diagnosis]:
    """ingress-nginx log with retried attempts (masked failures), events, pods, slices."""
    folder = tmp_path_factory.mktemp("race")
    write_bundle(generate(Scenario("race", window=3.0)), folder, "nginx-retries")
    return diagnosed(folder)


@pytest.fixture(scope="module")
def race_csv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Evidence, Diagnosis]:
    return diagnosed(bundle(tmp_path_factory.mktemp("csv"), Scenario("race", window=3.0)))


def test_marks_per_lane_are_the_failed_requests_per_backend(
    race: tuple[Evidence, Diagnosis],
) -> None:
    evidence, d = race
    lanes = build_lanes(evidence, d, limit=100)
    expected = failed_per_pod(evidence)
    assert sum(expected.values()) == d.summary.errors + d.summary.masked_by_retries > 100
    assert marks(lanes) == expected
    assert lanes.failed == sum(expected.values())
    for lane in lanes.lanes:  # each mark is on the lane of the backend it names
        deleted = lane.stamp(Moment.DELETION)
        assert all(f.backend for f in lane.failures)
        assert all(deleted is not None and f.ts >= deleted.ts - 1.0 for f in lane.failures)


def test_shades_are_the_diagnosed_window_after_each_deletion(
    race: tuple[Evidence, Diagnosis],
) -> None:
    evidence, d = race
    lanes = build_lanes(evidence, d)
    window = window_of(d)
    assert 3.0 <= window <= 5.0
    expected = {(pod, ts, window) for pod, ts in deletions(evidence).items()}
    assert len(expected) == 8
    assert {(s.pod, s.start, s.seconds) for s in lanes.shades} == expected


def test_axis_covers_the_requests_not_the_object_history(
    race_csv: tuple[Evidence, Diagnosis],
) -> None:
    evidence, d = race_csv
    lanes = build_lanes(evidence, d)
    ts = evidence.requests.get_column("ts")
    assert (lanes.start, lanes.end) == (ts.min(), ts.max())
    created = [s.ts for lane in lanes.lanes for s in lane.stamps if s.kind is Moment.CREATED]
    assert min(created) == T0 - 100 < lanes.start  # pods are older than the requests
    assert lanes.second[0] <= lanes.start < lanes.second[0] + 1
    assert lanes.second[-1] <= lanes.end < lanes.second[-1] + 1
    assert sum(lanes.requests) == evidence.requests.height
    assert lanes.title == "api"


def test_pods_without_failures_collapse_past_the_limit(
    race_csv: tuple[Evidence, Diagnosis],
) -> None:
    evidence, d = race_csv
    lanes = build_lanes(evidence, d)  # 16 pods, 8 of them failing, limit 12
    pods = [lane.pod for lane in lanes.lanes]
    assert len(pods) == 13
    assert pods[-1] == OTHER_PODS
    assert not lanes.lanes[-1].failures
    assert len(lanes.lanes[-1].members) == 4  # the replacements created last
    assert all(m.stamp(Moment.DELETION) is None for m in lanes.lanes[-1].members)
    assert marks(lanes) == failed_per_pod(evidence)
    assert {lane.pod for lane in lanes.lanes if lane.stamp(Moment.DELETION)} == set(
        deletions(evidence)
    )
    # the old pods first (created first), their replacements after
    assert pods[:8] == sorted(deletions(evidence), key=deletions(evidence).__getitem__)


def test_failing_pods_past_the_limit_keep_their_marks_on_other_pods(
    race_csv: tuple[Evidence, Diagnosis],
) -> None:
    evidence, d = race_csv
    lanes = build_lanes(evidence, d, limit=3)
    expected = failed_per_pod(evidence)
    kept = [lane for lane in lanes.lanes if lane.pod != OTHER_PODS]
    assert len(kept) == 3
    assert {lane.pod for lane in kept} == {p for p, _ in expected.most_common(3)}
    assert lanes.failed == sum(expected.values())
    other = lanes.lane(OTHER_PODS)
    assert other is not None
    assert len(other.failures) == sum(n for p, n in expected.items() if p not in {*marks(lanes)})
    shown = {lane.pod for lane in kept}
    assert {m.pod for m in other.members} == stamped_pods(evidence) - shown
    assert {m.pod: len(m.failures) for m in other.members if m.failures} == {
        p: n for p, n in expected.items() if p not in shown
    }
    shaded = {s.pod for s in lanes.shades}
    assert shaded - {lane.pod for lane in kept}  # drawn on the other pods' lane


def test_moments_come_from_the_inputs_and_are_never_guessed(
    race_csv: tuple[Evidence, Diagnosis],
) -> None:
    evidence, d = race_csv
    lanes = build_lanes(evidence, d, limit=100)
    gone = deletions(evidence)
    for lane in lanes.lanes:
        kinds = [s.kind for s in lane.stamps]
        # no manifests, no FailedPreStopHook: whether there is a hook is unknown
        assert Moment.PRESTOP not in kinds
        assert Moment.SIGTERM not in kinds
        if lane.pod in gone:
            deleted = lane.stamp(Moment.DELETION)
            exited = lane.stamp(Moment.EXITED)
            not_ready = lane.stamp(Moment.ENDPOINT_NOT_READY)
            assert deleted is not None
            assert exited is not None
            assert not_ready is not None
            assert deleted.ts == gone[lane.pod]
            assert exited.exit_code == 0
            assert deleted.ts <= exited.ts <= deleted.ts + 0.3  # finishedAt: whole seconds
            assert not_ready.ts == pytest.approx(deleted.ts + 3.0, abs=1e-3)  # the slice
        else:
            created = lane.stamp(Moment.CREATED)
            ready = lane.stamp(Moment.READY)
            assert created is not None
            assert ready is not None
            assert ready.ts == pytest.approx(created.ts + 1.0, abs=1e-3)
            assert Moment.EXITED not in kinds
        assert [s.ts for s in lane.stamps] == sorted(s.ts for s in lane.stamps)


def test_prestop_and_sigterm_from_the_manifest(tmp_path: Path) -> None:
    with_hook = bundle(
        tmp_path / "hook", Scenario("race"), manifest=DEPLOYMENT.format(lifecycle=PRESTOP)
    )
    without = bundle(tmp_path / "none", Scenario("race"), manifest=DEPLOYMENT.format(lifecycle=""))
    for folder, hook in ((with_hook, 5.0), (without, None)):
        evidence, d = diagnosed(folder)
        lanes = build_lanes(evidence, d, limit=100)
        deleted = [lane for lane in lanes.lanes if lane.stamp(Moment.DELETION)]
        assert len(deleted) == 8
        for lane in deleted:
            start = lane.stamp(Moment.DELETION)
            prestop = lane.stamp(Moment.PRESTOP)
            sigterm = lane.stamp(Moment.SIGTERM)
            assert start is not None
            assert sigterm is not None
            if hook is None:  # no hook: the kubelet sends SIGTERM as it starts killing
                assert prestop is None
                assert sigterm.ts == start.ts
            else:  # the kubelet runs the hook at deletion, SIGTERM when its sleep ends
                assert prestop is not None
                assert prestop.ts == start.ts
                assert sigterm.ts == pytest.approx(start.ts + hook)


def test_sigterm_at_a_failed_prestop_hook(tmp_path: Path) -> None:
    b = generate(Scenario("race"))
    gone = {e.pod: e.ts for e in b.events if e.kind is EventKind.DELETE}
    b.events.extend(
        LifecycleEvent(
            ts + 1.25,
            EventKind.PRESTOP_FAILED,
            pod,
            "",
            "default",
            "FailedPreStopHook",
            "PreStopHook failed",
        )
        for pod, ts in gone.items()
    )
    folder = write_bundle(b, tmp_path, "csv", events_api="events.k8s.io/v1")
    evidence, d = diagnosed(folder)
    lanes = build_lanes(evidence, d, limit=100)
    for pod, ts in gone.items():
        lane = lanes.lane(pod or "")
        assert lane is not None
        prestop, sigterm = lane.stamp(Moment.PRESTOP), lane.stamp(Moment.SIGTERM)
        assert prestop is not None
        assert sigterm is not None
        assert prestop.ts == pytest.approx(ts, abs=1e-3)
        assert sigterm.ts == pytest.approx(ts + 1.25, abs=1e-3)


def test_sigkilled_pods_exit_137(tmp_path: Path) -> None:
    evidence, d = diagnosed(bundle(tmp_path, Scenario("sigkill")))
    lanes = build_lanes(evidence, d, limit=100)
    codes = {
        lane.pod: (s.exit_code, s.ts - deleted.ts)
        for lane in lanes.lanes
        if (s := lane.stamp(Moment.EXITED)) and (deleted := lane.stamp(Moment.DELETION))
    }
    assert len(codes) == 8
    assert all(
        code == 137 and took == pytest.approx(10.0, abs=1e-3) for code, took in codes.values()
    )
    assert marks(lanes) == failed_per_pod(evidence)


def test_failures_without_a_known_pod(race_csv: tuple[Evidence, Diagnosis]) -> None:
    evidence, _ = race_csv
    failed = pl.col("outcome").is_in(FAILURES)
    index = pl.int_range(pl.len()).over(failed)
    requests = evidence.requests.with_columns(
        pl.when(failed & (index < 5))
        .then(None)
        .when(failed & (index < 12))
        .then(pl.lit("10.9.9.9:8080"))
        .otherwise(pl.col("backend"))
        .alias("backend")
    )
    changed = replace(evidence, requests=requests)
    lanes = build_lanes(changed, diagnose(changed), limit=100)
    unknown, stray = lanes.lane(UNKNOWN_BACKEND), lanes.lane("10.9.9.9:8080")
    assert stray is not None
    assert len(stray.failures) == 7
    # the 5 without a backend: on the one pod whose race window holds each, else unknown
    placed = [(lane.pod, f) for lane in lanes.lanes for f in lane.failures if f.inferred]
    tol = 1.0 + TOLERANCE  # the deletions' whole-second resolution and the clocks' skew
    for pod, f in placed:
        assert pod in {s.pod for s in lanes.shades if s.start - tol <= f.ts <= s.end + tol}
        assert f.backend == ""
    left = unknown.failures if unknown is not None else ()
    assert len(left) + len(placed) == 5
    assert placed
    if unknown is not None:
        assert lanes.lanes[-1] is unknown
        assert all(f.backend == "" and not f.inferred for f in left)
    measured = Counter(
        {lane.pod: sum(not f.inferred for f in lane.failures) for lane in lanes.lanes}
    )
    expected = failed_per_pod(changed)
    assert +measured == expected - Counter({UNKNOWN_BACKEND: len(placed)})


def test_simulated_bundle(tmp_path: Path) -> None:
    evidence, d = diagnosed(simulated(tmp_path))
    lanes = build_lanes(evidence, d, limit=100)
    assert marks(lanes) == failed_per_pod(evidence)  # backends are pod names here
    assert lanes.failed > 20
    window = window_of(d)
    expected = {(pod, ts, window) for pod, ts in deletions(evidence).items()}
    assert {(s.pod, s.start, s.seconds) for s in lanes.shades} == expected
    for lane in lanes.lanes:  # whole-second exits never before the deletion they follow
        deleted, exited = lane.stamp(Moment.DELETION), lane.stamp(Moment.EXITED)
        if deleted and exited:
            assert exited.ts >= deleted.ts


def test_one_service_of_a_proxy_log_with_many(tmp_path: Path) -> None:
    """The lanes of the Service the diagnosis is about, not the others of the same log."""
    evidence, _ = diagnosed(bundle(tmp_path, Scenario("race"), "nginx"))
    other = evidence.requests.with_columns(
        pl.lit("default-web-80").alias("upstream"),
        pl.lit("10.250.0.1:80").alias("backend"),
        pl.lit("reset").alias("outcome"),
    ).head(50)
    other = other.cast(dict(evidence.requests.schema))
    both = replace(evidence, requests=pl.concat([evidence.requests, other]).sort("ts"))
    d = diagnose(both, service="default-api-80")
    lanes = build_lanes(both, d, limit=100)
    assert lanes.title == "default-api-80"
    assert lanes.lane("10.250.0.1:80") is None
    assert marks(lanes) == failed_per_pod(evidence)


def test_a_request_log_alone_gives_a_lane_per_backend(tmp_path: Path) -> None:
    folder = bundle(tmp_path, Scenario("backend"))
    evidence, d = diagnosed(folder / "requests.csv")
    assert not evidence.pods
    lanes = build_lanes(evidence, d, limit=100)
    backends = set(evidence.requests.get_column("backend").drop_nulls().cast(str).to_list())
    assert {lane.pod for lane in lanes.lanes} == backends  # the healthy ones too
    assert marks(lanes) == failed_per_pod(evidence)
    assert all(not lane.stamps for lane in lanes.lanes)
    assert not lanes.shades


def test_only_the_pods_the_service_selects(tmp_path: Path) -> None:
    b = generate(Scenario("race"))
    b.pods.append(
        PodInfo("db-0", "default", "10.244.9.9", "node-1", True, T0 - 100, labels={"app": "db"})
    )
    # with the manifests: what the Service selects; without: the pods that carry the
    # labels shared by every pod the requests went to (db-0 took no request of the Service)
    for name, manifest in (("none", None), ("manifest", DEPLOYMENT.format(lifecycle=""))):
        folder = write_bundle(b, tmp_path / name, "csv")
        if manifest:
            (folder / "deployment.yaml").write_text(manifest)
        lanes = build_lanes(*diagnosed(folder), limit=100)
        assert lanes.lane("db-0") is None
        assert len(lanes.lanes) == 16


def test_pods_json_taken_after_the_rollout_keeps_the_deleted_pods(tmp_path: Path) -> None:
    """``kubectl get pods`` after a rollout lists only the new pods: the deleted ones are
    known from events and EndpointSlices, and keep their lanes and deletion stamps; a
    client pod in the same pods.json gets none."""
    b = generate(Scenario("race"))
    deleted = {p.name for p in b.pods if p.deleted_at is not None}
    assert deleted
    b.pods = [p for p in b.pods if p.deleted_at is None]
    labels = dict(b.pods[0].labels)
    b.pods.append(
        PodInfo("load-5f6d7c8b9a-00000", "default", "10.244.9.9", "node-1", True, T0 - 100,
                labels={"app": "load"})
    )  # fmt: skip
    lanes = build_lanes(*diagnosed(write_bundle(b, tmp_path / "b", "csv")), limit=100)
    names = {lane.pod for lane in lanes.lanes}
    assert deleted <= names
    assert all(lanes.lane(n).stamp(Moment.DELETION) is not None for n in deleted)
    assert "load-5f6d7c8b9a-00000" not in names
    assert labels  # the new pods carry labels: the label test, not the name test, kept them
