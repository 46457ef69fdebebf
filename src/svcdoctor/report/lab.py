"""Renderers of lab results as JSON: a run's ground truth (``lab run --format json``,
``lab.json`` in its bundle, ``lab serve --ground-truth``) and the direct probe of its pods."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from svcdoctor.model.evidence import Outcome
from svcdoctor.model.truth import DirectProbe, LabTruth, PodTimeline


class LabResult(Protocol):
    """What a finished lab run reports (``svcdoctor.lab.run.RunResult``)."""

    @property
    def datapath(self) -> str: ...
    @property
    def requests(self) -> int: ...
    @property
    def failed(self) -> int: ...
    @property
    def by_outcome(self) -> Mapping[Outcome, int]: ...
    @property
    def probe(self) -> tuple[DirectProbe, ...]: ...
    @property
    def truth(self) -> LabTruth: ...


def timeline_to_dict(p: PodTimeline) -> dict[str, Any]:
    return {
        "deleted": p.deleted,
        "sigterm": p.sigterm,
        "stopped_accepting": p.stopped_accepting,
        "routing_stopped": list(p.routing_stopped),
        "race_window_seconds": p.race_window,
        "exited": p.exited,
        "exit_code": p.exit_code,
    }


def truth_to_dict(t: LabTruth) -> dict[str, Any]:
    """The ground truth of a run, beside which its datapath is reported."""
    return {
        "bad_pods": list(t.bad_pods),
        "expected_cause": t.expected_cause.value if t.expected_cause else None,
        "expected_race_failures": t.expected_race_failures,
        "race_window_seconds": t.race_window,
        "propagation": str(t.propagation),
        "min_sync_seconds": t.min_sync_seconds,
        "prestop_seconds": t.prestop_seconds,
        "grace_seconds": t.grace_seconds,
        "deleted_pods": {p.pod: timeline_to_dict(p) for p in t.deleted_pods},
        "broken_nodes": list(t.broken_nodes),
    }


def served_truth_to_dict(t: LabTruth) -> dict[str, Any]:
    """``lab serve --ground-truth``: the ground truth with its datapath."""
    return truth_to_dict(t) | {"datapath": t.datapath}


def outcomes_to_dict(counts: Mapping[Outcome, int]) -> dict[str, int]:
    return {o.value: n for o, n in counts.items()}


def probe_to_dict(probe: tuple[DirectProbe, ...]) -> dict[str, dict[str, int]]:
    return {p.pod: outcomes_to_dict(p.outcomes) for p in probe}


def run_to_dict(r: LabResult) -> dict[str, Any]:
    """The counts, the direct probe and the ground truth of a run (``lab.json`` adds the
    scenario's parameters, ``lab run --format json`` the diagnosis)."""
    return {
        "datapath": r.datapath,
        "requests": r.requests,
        "failed": r.failed,
        "by_outcome": outcomes_to_dict(r.by_outcome),
        "direct_probe": probe_to_dict(r.probe),
        "ground_truth": truth_to_dict(r.truth),
    }
