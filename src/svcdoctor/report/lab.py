"""Renderers of lab results: a run's ground truth as JSON (``lab run --format json``,
``lab.json`` in its bundle, ``lab serve --ground-truth``) and the direct probe of its pods;
a run, the demo's two runs and a serving lab's addresses as text."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console
from rich.table import Table

from svcdoctor.model import Diagnosis
from svcdoctor.model.evidence import Outcome
from svcdoctor.model.truth import DirectProbe, LabTruth, PodTimeline
from svcdoctor.report.diagnosis import diagnosis_to_dict, render_text
from svcdoctor.report.html import DemoRun


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


def render_run_json(name: str, r: LabResult, verdict: Diagnosis, bundle: Path) -> str:
    """``lab run --format json``: the run, its diagnosis and where its bundle is."""
    shown = {"scenario": name, **run_to_dict(r), "diagnosis": diagnosis_to_dict(verdict)}
    return json.dumps(shown | {"bundle": str(bundle)}, indent=2, default=str)


def render_run_text(
    name: str, r: LabResult, verdict: Diagnosis, bundle: Path, html: Path | None, out: Console
) -> None:
    """``lab run``: the failed requests by outcome, the pods the direct probe found
    failing, where the bundle (and report) are, then the diagnosis."""
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(r.by_outcome.items()) if k is not Outcome.OK)
    out.print(
        f"[bold]lab {name}[/] ({r.datapath} datapath): {r.failed} of "
        f"{r.requests} requests failed" + (f" ({outcomes})" if outcomes else "")
    )
    bad = [p for p in r.probe if p.failed]
    if bad:
        out.print(
            "direct probe (bypassing the Service): "
            + "; ".join(f"{p.pod} failed {p.failed}/{p.sent}" for p in bad)
        )
    out.print(f"bundle: {bundle}  (svcdoctor diagnose {bundle})")
    if html is not None:
        out.print(f"report: {html}")
    out.print()
    render_text(verdict, out)


def broken(r: LabResult) -> int:
    """Requests whose connection broke: resets and refusals."""
    return sum(r.by_outcome.get(o, 0) for o in (Outcome.RESET, Outcome.REFUSED))


def render_demo(runs: Sequence[tuple[DemoRun, int]], fix: str, out: Console) -> None:
    """``lab demo``: the runs before and after the fix (with their broken connections)
    side by side, and where their evidence is."""
    table = Table("scenario", "requests", "failed", "resets / refusals", "diagnosis")
    for run, broke in runs:
        primary = run.diagnosis.primary
        cause = primary.cause.value if primary else "no cause"
        table.add_row(run.scenario, str(run.requests), str(run.failed), str(broke), cause)
    out.print(table)
    (before, _), (after, _) = runs
    out.print(f"before the fix: {before.failed} failed requests; after ({fix}): {after.failed}")
    for run, _ in runs:
        out.print(f"{run.scenario} evidence: svcdoctor diagnose {run.bundle}")


def serving_json(info: Any) -> str:
    """``lab serve --format json``: one line with the addresses (``info``: a
    ``svcdoctor.lab.serve.ServeInfo``)."""
    return json.dumps(
        {
            "url": info.url,
            "kubeconfig": str(info.kubeconfig),
            "context": info.context,
            "namespace": info.namespace,
            "datapath": info.datapath,
            "metrics": [{"job": t.job, "url": t.url, "node": t.node} for t in info.metrics],
        }
    )


def serving_lines(name: str, info: Any) -> list[str]:
    """``lab serve``: where it serves, how to reach it with kubectl, its exporters."""
    return [
        f"lab {name} ({info.datapath} datapath) serving at {info.url}",
        f"kubeconfig: {info.kubeconfig} (context {info.context})",
        f"try: KUBECONFIG={info.kubeconfig} kubectl get pods -n {info.namespace}",
        *(f"metrics: {t.url} ({t.job}{', ' + t.node if t.node else ''})" for t in info.metrics),
    ]
