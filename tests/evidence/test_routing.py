# ruff: noqa: E501
"""The hops' own words for when they stopped routing (evidence/routing.py), in the shapes
the real software writes: ingress-nginx's controller (kubernetes/ingress-nginx #4134,
#9679, #1269), nginx's error log at notice, the AWS Load Balancer Controller
(aws-load-balancer-controller #3069, #4324) and haproxy (2.6, ``log stdout format iso``)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from svcdoctor.diagnose.context import Context, Settings, build
from svcdoctor.diagnose.hops import hop_legs, leg_text
from svcdoctor.diagnose.race import assess_race
from svcdoctor.evidence.reader import read_evidence
from svcdoctor.evidence.requests import conform
from svcdoctor.evidence.routing import routing_changes
from svcdoctor.model import EventKind, Evidence, LifecycleEvent, PodInfo, RaceDetails
from svcdoctor.model.hops import HopKind

CONTROLLER = """\
I1205 22:57:15.268610      11 controller.go:169] Changes handled by the dynamic configuration, skipping backend reload.
I1205 22:57:15.278813       7 controller.go:204] Dynamic reconfiguration succeeded.
I1205 22:58:03.205207       8 controller.go:205] "Backend successfully reloaded"
I0906 05:51:10.434336      11 controller.go:478] ingress backend successfully reloaded...
10.0.0.1 - - [05/Dec/2026:22:57:14 +0000] "GET / HTTP/1.1" 200 4 "-" "curl/8" 77 0.001 [default-api-80] [] 10.233.0.5:8080 4 0.001 200 abc
"""
NGINX_ERROR = """\
2026/12/05 22:57:15 [notice] 19782#19782: signal 1 (SIGHUP) received from 19738, reconfiguring
2026/12/05 22:57:15 [notice] 19782#19782: reconfiguring
2026/12/05 22:57:15 [notice] 19782#19782: signal 17 (SIGCHLD) received from 19783
"""
LBC = (
    '{"level":"info","ts":1796511436.2301478,"msg":"deRegistering targets","arn":"arn:aws:'
    'elasticloadbalancing:ap-northeast-2:1:targetgroup/k8s-x/2a","targets":[{"Availability'
    'Zone":"ap-northeast-2a","Id":"10.233.0.5","Port":80}]}\n'
    '{"level":"info","ts":1796511436.2712817,"msg":"deRegistered targets","arn":"arn:aws:'
    'elasticloadbalancing:ap-northeast-2:1:targetgroup/k8s-x/2a"}\n'
    '{"level":"info","ts":"2026-12-05T22:57:20Z","msg":"deRegistering targets","arn":"x",'
    '"targets":[{"Id":"10.233.0.6","AvailabilityZone":"ap-northeast-2a","Port":4000}]}\n'
)
HAPROXY = """\
2026-12-05T22:57:17.443393+00:00 Server targets/api-1 enters drain state. 2 active and 0 backup servers online. 0 sessions requeued, 0 total in queue.
2026-12-05T22:57:18.100000+00:00 Server targets/api-2 is going DOWN for maintenance. 0 active and 0 backup servers left. 0 sessions active, 0 requeued, 0 remaining in queue.
2026-12-05T22:57:18.100020+00:00 backend targets has no server available!
Dec  5 22:57:19 lb1 haproxy[123]: Server be_api/srv3 is DOWN, reason: Layer4 connection problem, info: "Connection refused", check duration: 0ms. 0 active and 0 backup servers left.
"""


def _at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_each_hop_s_words_are_read_with_their_times(tmp_path: Path) -> None:
    (tmp_path / "controller.log").write_text(CONTROLLER)
    (tmp_path / "error.log").write_text(NGINX_ERROR)
    (tmp_path / "lbc.log").write_text(LBC)
    (tmp_path / "haproxy.log").write_text(HAPROXY)
    evidence = read_evidence([str(tmp_path)])
    got = [(c.by, c.what, c.removed, round(c.ts, 3)) for c in evidence.routing]
    assert got == [
        ("ingress-nginx", "reloaded", (), round(_at("2026-09-06T05:51:10.434336"), 3)),
        ("nginx", "reloaded", (), _at("2026-12-05T22:57:15")),
        ("ingress-nginx", "pushed the endpoints", (), round(_at("2026-12-05T22:57:15.278813"), 3)),
        ("aws-load-balancer-controller", "deregistered", ("10.233.0.5",), 1796511436.23),
        ("haproxy", "drained", ("api-1",), round(_at("2026-12-05T22:57:17.443393"), 3)),
        ("haproxy", "took down", ("api-2",), _at("2026-12-05T22:57:18.1")),
        ("haproxy", "took down", ("srv3",), _at("2026-12-05T22:57:19")),
        (
            "aws-load-balancer-controller",
            "deregistered",
            ("10.233.0.6",),
            _at("2026-12-05T22:57:20"),
        ),
        ("ingress-nginx", "reloaded", (), round(_at("2026-12-05T22:58:03.205207"), 3)),
    ]
    assert {c.hop for c in evidence.routing} == {HopKind.INGRESS, HopKind.LOAD_BALANCER}
    # every line is named: the access line read, the hops' read, one klog line left
    assert evidence.problems == (f"{tmp_path / 'controller.log'}: 1 klog line: not evidence",)
    formats = {(Path(s.path).name, s.format) for s in evidence.sources}
    assert {("lbc.log", "routing"), ("haproxy.log", "routing")} <= formats


def test_a_collector_stamp_wins_over_the_line_s_own_time() -> None:
    stamp = _at("2026-12-05T22:57:15.5")
    line = "I1205 22:57:15.278813       7 controller.go:204] Dynamic reconfiguration succeeded."
    changes, zoneless = routing_changes([(line, stamp)], "x", 2026, 3600.0)
    assert [c.ts for c in changes] == [stamp]
    assert zoneless == 0
    changes, zoneless = routing_changes([(line, None)], "x", 2026, 3600.0)  # read at UTC+1
    assert changes[0].ts == pytest.approx(_at("2026-12-05T22:57:15.278813") - 3600)
    assert zoneless == 1


def _context(
    routing_text: str,
    tmp_path: Path,
    deleted: dict[str, float],
    failed: tuple[tuple[float, str], ...] = (),
) -> Context:
    """The diagnosis context of one hop's log, two pods (deleted at ``deleted``), a request
    a second to each, and the ``failed`` (time, backend) requests."""
    (tmp_path / "hop.log").write_text(routing_text)
    read = read_evidence([str(tmp_path / "hop.log")])
    pods = (PodInfo("api-1", ip="10.233.0.5"), PodInfo("api-2", ip="10.233.0.6"))
    start = min(deleted.values(), default=1796511430.0) - 10
    rows = [(start + i, "ok", "10.233.0.5:8080" if i % 2 else "10.233.0.6:8080") for i in range(60)]
    rows += [(ts, "refused", backend) for ts, backend in failed]
    requests = conform(
        pl.DataFrame(rows, schema=["ts", "outcome", "backend"], orient="row").lazy(), "c.csv"
    ).collect()
    events = tuple(
        LifecycleEvent(ts, EventKind.DELETE, pod, "e.json") for pod, ts in deleted.items()
    )
    return build(Evidence(requests.sort("ts"), pods=pods, events=events, routing=read.routing))


def test_a_leg_is_the_first_change_after_each_deletion_that_can_remove_the_pod(
    tmp_path: Path,
) -> None:
    deleted = {"api-1": 1796511435.0, "api-2": _at("2026-12-05T22:57:17")}
    failed = ((1796511436.0, "10.233.0.5:8080"), (1796511437.0, "10.233.0.5:8080"))
    (leg,) = hop_legs(_context(LBC, tmp_path, deleted, failed), 0.5)
    assert leg.by == "aws-load-balancer-controller"
    assert [(s.pod, round(s.stopped_at - s.deleted_at, 3)) for s in leg.stops] == [
        ("api-1", 1.23),  # the deregistration that names its IP
        ("api-2", 3.0),
    ]
    assert leg.max_seconds == 3.0
    assert leg.failures == 1  # the failure at 1 s is in api-1's leg; the one at 2 s after it
    assert leg.lower_bound  # the controller's call: the ELB stops later
    assert "deregistration began" in leg_text(leg)


def test_a_reload_stops_every_pod_deleted_before_it_and_a_pod_never_seen_is_named(
    tmp_path: Path,
) -> None:
    deleted = {"api-1": _at("2026-12-05T22:57:14.2"), "api-2": _at("2026-12-05T22:57:30")}
    (leg,) = hop_legs(_context(NGINX_ERROR, tmp_path, deleted), 0.5)
    assert [s.pod for s in leg.stops] == ["api-1"]
    assert leg.unseen == ("api-2",)
    assert leg.covers == pytest.approx(0.8 + 1.0)  # its lag, plus nginx's one-second clock
    assert "never seen to stop routing to 1 (api-2)" in leg_text(leg)


def test_no_deletion_no_leg(tmp_path: Path) -> None:
    assert hop_legs(_context(HAPROXY, tmp_path, {}), 0.5) == ()


def test_failures_in_a_hop_s_leg_name_the_race_and_plan_over_that_leg(tmp_path: Path) -> None:
    """Two deletions are too few for the placement test; the failures each sent to a pod
    after its deletion and before the load balancer left it name the race all the same,
    and the plan covers that leg."""
    deleted = {"api-1": _at("2026-12-05T22:57:10"), "api-2": _at("2026-12-05T22:57:11")}
    failed = tuple((_at("2026-12-05T22:57:12") + i * 0.5, "10.233.0.5:8080") for i in range(8))
    ctx = _context(HAPROXY, tmp_path, deleted, failed)
    race = assess_race(ctx, Settings(), [], [])
    details = race.details
    assert isinstance(details, RaceDetails)
    (leg,) = details.hops
    assert leg.failures == 8
    assert race.score >= 0.55
    assert details.recommended_prestop_seconds is not None
    assert details.recommended_prestop_seconds >= leg.covers
    assert any("the slowest hop's leg, haproxy" in f.text for f in race.fixes)


def test_a_reload_before_the_deletion_is_not_its_stop(tmp_path: Path) -> None:
    """During a rollout the reload just before a deletion was for another pod (a new one
    becoming ready): a change that names no pod counts only from the deletion on."""
    deleted = {"api-1": _at("2026-12-05T22:57:16.2")}
    assert hop_legs(_context(NGINX_ERROR, tmp_path, deleted), 1.5) == ()
    # nginx's clock is to the second: a reload stamped 22:57:15 can follow a deletion at .4
    deleted = {"api-1": _at("2026-12-05T22:57:15.4")}
    (leg,) = hop_legs(_context(NGINX_ERROR, tmp_path, deleted), 1.5)
    assert leg.max_seconds == 0.0
