"""The diagnosis renderer turns the typed records into the documented JSON: records with
their keys, enums as their values, optional facts present only when measured."""

from __future__ import annotations

import json
import math

from svcdoctor.model import Cause, Diagnosis, Outcome
from svcdoctor.model.diagnosis import (
    Assessment,
    BackendDetails,
    Caller,
    ConntrackCounter,
    CounterGrowth,
    CounterValue,
    FixStep,
    IdleGaps,
    InfraDetails,
    NearestFraction,
    OutcomeCount,
    RaceDetails,
    RaceWindow,
    ReuseDetails,
    ShutdownPath,
    SigKill,
    Summary,
    Suspect,
)
from svcdoctor.report.diagnosis import details_to_dict, diagnosis_to_dict, render_json

SUMMARY = Summary(
    requests=1000,
    errors=10,
    error_rate=0.01,
    error_rate_ci95=(0.005, 0.018),
    by_outcome=(OutcomeCount(Outcome.OK, 990), OutcomeCount(Outcome.RESET, 10)),
    masked_by_retries=0,
    masked_by_outcome=(),
    error_log_failures=0,
    error_log_hosts=(),
    start=0.0,
    end=60.0,
    duration_seconds=60.0,
    replicas=8,
    nearest_fraction=NearestFraction(1, 8, 0.2, True),
    deletions=2,
)
KILL = SigKill("api-1", "app", 10.0, 10, 70.0)
SHUTDOWN = ShutdownPath(sigkilled=(KILL,), failures_at_sigkill=7, kill_moments=(70.0,))


def test_race_without_a_window_has_no_window_keys_but_the_raised_grace() -> None:
    race = RaceDetails(2, 0.2, 1.0, 0.5, 1.0, SHUTDOWN, recommended_grace_seconds=30)
    out = details_to_dict(race)
    assert list(out)[:5] == [
        "deletions",
        "p_value",
        "excess_failures",
        "explained_fraction",
        "clock_resolution_seconds",
    ]
    assert "window_seconds" not in out
    assert "remedy" not in out
    assert "kill_moments" not in out  # an analysis detail, not reported
    assert out["recommended_grace_seconds"] == 30
    assert out["sigkilled"] == [
        {
            "pod": "api-1",
            "container": "app",
            "seconds_after_deletion": 10.0,
            "grace_seconds": 10,
            "at": 70.0,
        }
    ]


def test_a_measured_window_reports_its_excess_and_interval() -> None:
    window = RaceWindow(4.0, (3.5, 4.5), "lag…", 1.6, 82.0, 0.0)
    race = RaceDetails(2, 0.002, 80.0, 1.0, 1.0, ShutdownPath(), window, 0.1, 6, 30)
    out = details_to_dict(race)
    assert out["excess_failures"] == 82.0  # the window's, over the lag histogram
    assert out["window_ci95"] == [3.5, 4.5]
    assert list(out)[-4:] == [
        "latency_p999_seconds",
        "recommended_prestop_seconds",
        "recommended_grace_seconds",
        "remedy",
    ]


def test_enums_and_rows_are_plain_json() -> None:
    gaps = IdleGaps(Caller.CLIENT, 5.0, 5.1, 40, 50, 0.1, 0.2, 0.001, 1e-9)
    reuse = details_to_dict(ReuseDetails(0.8, idle_gaps=gaps))
    assert reuse["idle_gaps"]["caller"] == "client"
    assert reuse["skewed_new_backends"] == []
    growth = CounterGrowth(
        (CounterValue(ConntrackCounter.INSERT_FAILED, 890), CounterValue(ConntrackCounter.DROP, 0)),
        30,
        40,
        0.1,
        1e-6,
        True,
        True,
    )
    infra = details_to_dict(InfraDetails(0, 0, 0, counter_growth=growth))
    assert infra["counter_growth"]["growth"] == {"insert_failed": 890, "drop": 0}
    assert "kernel_alignment" not in infra
    assert details_to_dict(None) == {}
    assert details_to_dict(BackendDetails(3)) == {"backends": 3, "suspects": []}


def test_the_document_cleans_infinities_and_names_the_primary_cause() -> None:
    suspect = Suspect(
        "10.0.0.1:80", None, "10.0.0.1", None, 100, 50, 0.5, (0.4, 0.6), 0.0,
        (math.inf, 1e9), 0.0, None, None,
    )  # fmt: skip
    backend = Assessment(
        Cause.BACKEND, 0.9, ("e",), (FixStep("f"),), BackendDetails(8, (suspect,), 1.0)
    )
    d = Diagnosis(SUMMARY, (backend,))
    body = diagnosis_to_dict(d)
    assert body["primary_cause"] == "backend"
    assert body["causes"][0]["details"]["suspects"][0]["rate_ratio_ci95"] == [None, 1e9]
    assert body["summary"]["by_outcome"] == {"ok": 990, "reset": 10}
    assert body["summary"]["nearest_fraction"] == {
        "fraction": "1/8",
        "value": 0.125,
        "p_value": 0.2,
        "consistent": True,
        "simplified": "1/8",
    }
    assert body["summary"]["start"] == "1970-01-01T00:00:00.000Z"
    assert "upstreams" not in body["summary"]
    assert json.loads(render_json(d)) == body
