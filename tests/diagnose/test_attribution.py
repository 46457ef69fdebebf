"""Attribution that respects the evidence's resolution (issue 29): a failure belongs to the
deletion of the pod it was sent to, within what the clocks allow; coarse clocks widen the
window's interval but never the advised preStop; a node drain's other pods are no
deletions of the Service."""

from __future__ import annotations

from pathlib import Path

import pytest

from svcdoctor.diagnose import diagnose
from svcdoctor.evidence import read_evidence
from svcdoctor.model import Cause, Diagnosis
from svcdoctor.model.diagnosis import RaceDetails
from tests.diagnose.coarse_race import coarse_race
from tests.factory import write_bundle


def run(tmp_path: Path, fmt: str, api: str, *, pods: bool = True, **kw: object) -> Diagnosis:
    folder = write_bundle(coarse_race(**kw), tmp_path / f"{fmt}-{api[:2]}", fmt, api)  # type: ignore[arg-type]
    if not pods:
        (folder / "pods.json").unlink()
    return diagnose(read_evidence([str(folder)]))


def race(d: Diagnosis) -> RaceDetails:
    details = d.cause(Cause.RACE).details
    assert isinstance(details, RaceDetails)
    return details


def test_late_deletion_stamps_never_move_failures_to_the_previous_pods_deletion(
    tmp_path: Path,
) -> None:
    # whole-second nginx times, deletions 12 s apart, each Killing event stamped 3.5 s late:
    # the failures (0.9-2.3 s after the real deletion) come before their pod's deletion
    d = run(tmp_path, "nginx", "v1", pods=False, event_delay=3.5)
    details = race(d)
    assert details.window is not None
    assert details.window.seconds < 4.0  # was 11 s: the previous pod's deletion
    assert (details.recommended_prestop_seconds or 0) <= 6  # was 17 s
    assert any(
        "before the deletion of the pod they were sent to" in e
        for e in d.cause(Cause.RACE).evidence
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("offset", [0.05, 0.55, 0.95])
def test_coarse_clocks_widen_the_interval_not_the_prestop(
    tmp_path: Path, seed: int, offset: float
) -> None:
    fine = race(run(tmp_path, "csv", "events.k8s.io/v1", seed=seed, offset=offset))
    coarse_d = run(tmp_path, "nginx", "v1", seed=seed, offset=offset)
    coarse = race(coarse_d)
    truth = float(coarse_race(seed, offset=offset).truth["window"])  # type: ignore[arg-type]
    assert fine.window is not None
    assert coarse.window is not None
    assert coarse.clock_resolution_seconds == 1.0
    assert coarse.window.clock_seconds == 2.0  # nginx $time_local and core/v1 events
    low, high = coarse.window.ci95
    assert low <= truth <= high  # the interval says what the clocks allow
    assert high - low >= coarse.window.clock_seconds
    assert coarse.recommended_prestop_seconds is not None
    assert fine.recommended_prestop_seconds is not None
    assert coarse.recommended_prestop_seconds <= fine.recommended_prestop_seconds
    fix = coarse_d.cause(Cause.RACE).fixes[0].text
    assert "2 s of clock resolution aside" in fix


def test_a_node_drain_counts_only_the_services_pods(tmp_path: Path) -> None:
    # each node drained: 3 pods of another workload deleted beside each of the Service's
    d = run(tmp_path, "nginx", "v1", node_pods=3)
    assert d.summary.deletions == 8  # was 32
    details = race(d)
    assert details.deletions == 8
    assert details.window is not None
    assert details.window.median_lag_seconds is not None
    assert details.window.median_lag_seconds > 0  # was -0.12: the next pod's deletion
