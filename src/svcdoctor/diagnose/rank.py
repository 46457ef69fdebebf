"""Run every analysis and rank the four causes."""

from __future__ import annotations

from dataclasses import replace

from svcdoctor.checks import Settings as LintSettings
from svcdoctor.checks import run_checks
from svcdoctor.diagnose.backend import assess_backend
from svcdoctor.diagnose.context import Settings, build
from svcdoctor.diagnose.infra import assess_infra
from svcdoctor.diagnose.quantify import quantify, timeline
from svcdoctor.diagnose.race import assess_race
from svcdoctor.diagnose.reuse import assess_reuse
from svcdoctor.model import Cause, Diagnosis, Evidence, Verdict, iso_utc


def _manifest_notes(evidence: Evidence) -> dict[Cause, list[str]]:
    """What the manifests given with the evidence say, per cause (lint findings)."""
    notes: dict[Cause, list[str]] = {c: [] for c in Cause}
    if evidence.inventory is None:
        return notes
    for f in run_checks(evidence.inventory, LintSettings()).findings:
        if f.cause is not None and f.object is not None:
            notes[f.cause].append(f"manifest {f.rule} {f.name} on {f.object}: {f.message}")
    return notes


def diagnose(evidence: Evidence, settings: Settings | None = None) -> Diagnosis:
    """The differential diagnosis of the evidence: every cause assessed, best first."""
    s = settings or Settings()
    ctx = build(evidence)
    summary = quantify(ctx)
    notes = _manifest_notes(evidence)
    backend = assess_backend(ctx, s)
    suspects = [x["backend"] for x in backend.details.get("suspects", [])]
    race = assess_race(ctx, s, notes[Cause.RACE], suspects)
    if notes[Cause.BACKEND]:
        backend = replace(backend, evidence=(*backend.evidence, *notes[Cause.BACKEND]))
    reuse = assess_reuse(ctx, s, notes[Cause.REUSE])
    infra = assess_infra(ctx, s, notes[Cause.INFRA], [race.score, backend.score, reuse.score])
    causes = sorted((race, backend, reuse, infra), key=lambda a: -a.score)
    if ctx.failure_ts.size == 0 and ctx.attempt_ts.size:
        # requests and not one failure: whatever else the evidence shows, nothing failed
        causes = [replace(a, score=min(a.score, 0.05)) for a in causes]
    steps: list[str] = []
    top = causes[0]
    if top.verdict is Verdict.UNLIKELY:
        errors = summary["errors"]
        steps.append(
            f"no cause: {errors} failures in {summary['requests']} requests show no "
            "pattern (lifecycle, backend, client or node)"
            if summary["requests"]
            else "no cause: no request evidence to diagnose"
        )
    elif len(causes) > 1 and causes[1].verdict is top.verdict and causes[1].score > 0.8 * top.score:
        steps.append(
            f"{top.cause.value} and {causes[1].cause.value} both fit; fix "
            f"{top.cause.value} first and compare the next rollout"
        )
    for a in causes:
        steps.extend(x for x in a.collect if x not in steps)
    summary["sources"] = [
        {
            "path": src.path,
            "format": src.format,
            "rows": src.rows,
            "start": iso_utc(src.start),
            "end": iso_utc(src.end),
            **({"note": src.note} if src.note else {}),
        }
        for src in evidence.sources
    ]
    summary["skipped_inputs"] = list(evidence.problems)
    return Diagnosis(summary, tuple(causes), tuple(steps), timeline(ctx))
