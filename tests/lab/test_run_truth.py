"""A lab run's ground truth and direct probe: typed in the run, rendered as the JSON that
``lab run --format json``, ``lab.json`` and ``lab serve --ground-truth`` have always
written (the same keys and values: other tools and tests read them)."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from svcdoctor.model import Cause, Dist, Outcome
from svcdoctor.model.truth import DirectProbe, LabTruth, PodTimeline
from svcdoctor.report.lab import probe_to_dict, served_truth_to_dict, truth_to_dict

RACED = PodTimeline(
    "api-00", 100.0, 100.5, 100.5, (101.75, 101.2), 101.0, 0
)  # the last node stopped routing 1.25 s after the pod stopped accepting
BEFORE = PodTimeline("api-01", 110.0, 113.0, 113.0, (111.0, 112.0), 113.5, 0)  # no race
STUCK = PodTimeline("api-02", 120.0, None, None, (), None, None)  # never got SIGTERM
TRUTH = LabTruth(
    "kernel",
    ("api-03",),
    Cause.RACE,
    42.5,
    Dist("uniform", 0.5, 1.5),
    1.0,
    0.0,
    30.0,
    (RACED, BEFORE, STUCK),
)


def test_ground_truth_renders_the_pinned_json() -> None:
    assert truth_to_dict(TRUTH) == {
        "bad_pods": ["api-03"],
        "expected_cause": "race",
        "expected_race_failures": 42.5,
        "race_window_seconds": 1.25,
        "propagation": "uniform:0.5,1.5",
        "min_sync_seconds": 1.0,
        "prestop_seconds": 0.0,
        "grace_seconds": 30.0,
        "deleted_pods": {
            "api-00": {
                "deleted": 100.0,
                "sigterm": 100.5,
                "stopped_accepting": 100.5,
                "routing_stopped": [101.75, 101.2],
                "race_window_seconds": 1.25,
                "exited": 101.0,
                "exit_code": 0,
            },
            "api-01": {
                "deleted": 110.0,
                "sigterm": 113.0,
                "stopped_accepting": 113.0,
                "routing_stopped": [111.0, 112.0],
                "race_window_seconds": 0.0,
                "exited": 113.5,
                "exit_code": 0,
            },
            "api-02": {
                "deleted": 120.0,
                "sigterm": None,
                "stopped_accepting": None,
                "routing_stopped": [],
                "race_window_seconds": None,
                "exited": None,
                "exit_code": None,
            },
        },
        "broken_nodes": [],
    }
    assert served_truth_to_dict(TRUTH) == truth_to_dict(TRUTH) | {"datapath": "kernel"}


def test_a_run_without_a_cause_or_a_race() -> None:
    quiet = LabTruth("userspace", (), None, 0.0, Dist("const", 1.0), 0.0, 3.0, 30.0, (BEFORE,))
    got = truth_to_dict(quiet)
    assert (got["expected_cause"], got["race_window_seconds"]) == (None, 0.0)


def test_direct_probe_counts_and_renders() -> None:
    bad = DirectProbe("api-03", {Outcome.HTTP_ERROR: 18, Outcome.OK: 2})
    good = DirectProbe("api-04", {Outcome.OK: 20})
    assert (bad.sent, bad.failed, good.failed) == (20, 18, 0)
    assert probe_to_dict((bad, good)) == {
        "api-03": {"http_error": 18, "ok": 2},
        "api-04": {"ok": 20},
    }


# ---- real runs, through the command line -------------------------------------------------

POD = {
    "deleted": "float",
    "sigterm": "float",
    "stopped_accepting": "float",
    "routing_stopped": ["float"],
    "race_window_seconds": "float",
    "exited": "float",
    "exit_code": "int",
}
TRUTH_KEYS = [
    "bad_pods",
    "expected_cause",
    "expected_race_failures",
    "race_window_seconds",
    "propagation",
    "min_sync_seconds",
    "prestop_seconds",
    "grace_seconds",
    "deleted_pods",
    "broken_nodes",
]
RUN_KEYS = [
    "scenario",
    "datapath",
    "requests",
    "failed",
    "by_outcome",
    "direct_probe",
    "ground_truth",
    "diagnosis",
    "bundle",
]


def _shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    return type(value).__name__


def _lab_run(folder: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    bundle = folder / args[1]
    done = subprocess.run(
        [sys.executable, "-m", "svcdoctor", "lab", "run", "--scenario", *args, "--out",
         str(bundle), "--datapath", "userspace", "--baseline", "2", "--tail", "2"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done, bundle


@pytest.mark.lab
def test_lab_run_json_and_lab_json_keep_their_keys(tmp_path: Path) -> None:
    with ThreadPoolExecutor(2) as pool:
        race = pool.submit(_lab_run, tmp_path, "race", "--replicas", "2", "--format", "json")
        bad = pool.submit(_lab_run, tmp_path, "bad-backend", "--duration", "3")
        (done, bundle), (text, _) = race.result(), bad.result()
    out = json.loads(done.stdout)
    assert list(out) == RUN_KEYS
    truth = out["ground_truth"]
    assert list(truth) == TRUTH_KEYS
    assert truth["expected_cause"] == "race"
    assert truth["propagation"] == "uniform:0.5,1.5"
    pods = truth["deleted_pods"]
    assert len(pods) == 2
    assert all(_shape(p) == POD for p in pods.values())
    assert truth["race_window_seconds"] == max(p["race_window_seconds"] for p in pods.values())
    for p in pods.values():
        late = max(p["routing_stopped"]) - p["stopped_accepting"]
        assert p["race_window_seconds"] == round(max(late, 0.0), 3)
    assert set(out["by_outcome"]) <= {o.value for o in Outcome}
    assert sum(out["by_outcome"].values()) == out["requests"]
    assert {_shape(t) == {"ok": "int"} for t in out["direct_probe"].values()} == {True}
    saved = json.loads((bundle / "lab.json").read_text())
    assert saved["ground_truth"] == truth
    assert saved["direct_probe"] == out["direct_probe"]
    assert saved["by_outcome"] == out["by_outcome"]
    # the bad pod fails every request sent to it directly, and says so in the text output
    assert "direct probe (bypassing the Service): api-7f6d5c4b3-01 failed 20/20" in text.stdout
