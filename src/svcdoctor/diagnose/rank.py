"""Run every analysis and rank the four causes."""

from __future__ import annotations

from dataclasses import replace

from svcdoctor.checks import run_checks
from svcdoctor.checks.registry import lookup
from svcdoctor.diagnose import loadgen, signatures, upstreams
from svcdoctor.diagnose.backend import assess_backend
from svcdoctor.diagnose.breakdown import breakdown_of
from svcdoctor.diagnose.context import Context, Settings, build
from svcdoctor.diagnose.infra import assess_infra
from svcdoctor.diagnose.lanes import lanes_of
from svcdoctor.diagnose.paths import window_lines
from svcdoctor.diagnose.quantify import quantify, timeline
from svcdoctor.diagnose.race import assess_race
from svcdoctor.diagnose.reuse import aligned_with_exits, assess_reuse
from svcdoctor.model import Assessment, Cause, Diagnosis, EventKind, Evidence, Verdict, iso_utc
from svcdoctor.model.diagnosis import BackendDetails, RaceDetails, Summary, UpstreamRow
from svcdoctor.model.pathreport import WorkloadPaths


def _manifest_notes(
    evidence: Evidence, s: Settings
) -> tuple[dict[Cause, list[str]], tuple[WorkloadPaths, ...]]:
    """What the manifests given with the evidence say, per cause (lint findings, with the
    rules' settings of ``s.checks``), and the paths in front of their workloads."""
    notes: dict[Cause, list[str]] = {c: [] for c in Cause}
    if evidence.inventory is None:
        return notes, ()
    checked = run_checks(evidence.inventory, s.checks)
    for f in checked.findings:
        if evidence.incomplete and lookup(f.rule).absence:
            continue  # the object may be missing only because it was not collected
        if f.cause is not None and f.object is not None:
            notes[f.cause].append(f"manifest {f.rule} {f.name} on {f.object}: {f.message}")
    return notes, checked.paths


def diagnose(
    evidence: Evidence, settings: Settings | None = None, service: str | None = None
) -> Diagnosis:
    """The differential diagnosis of the evidence: every cause assessed, best first.

    Request rows of several upstreams (one ingress log serves many Services) are diagnosed
    per upstream, so one Service's failures are neither diluted by nor blamed on the
    others' traffic; ``service`` picks one (see ``upstreams.select``)."""
    s = settings or Settings()
    names = upstreams.names(evidence.requests)
    if service is not None:
        chosen = upstreams.select(names, service)
        return _diagnose_one(upstreams.restrict(evidence, chosen), s, service)
    if len(names) < 2:
        return _diagnose_one(evidence, s, names[0] if names else None)
    each = [_diagnose_one(upstreams.restrict(evidence, (name,)), s, name) for name in names]
    return strongest(each)


def strongest(each: list[Diagnosis]) -> Diagnosis:
    """One diagnosis of several Services: the one with the strongest cause (then the most
    failures), with every Service's row in ``summary.upstreams`` and the others that have a
    cause as ``others``."""
    ranked = sorted(each, key=lambda d: (-(d.primary.score if d.primary else 0.0), -_failed(d)))
    table = tuple(
        UpstreamRow(
            upstream=d.service,
            requests=d.summary.requests,
            errors=d.summary.errors,
            error_rate=d.summary.error_rate,
            cause=d.primary.cause if d.primary else None,
            score=d.primary.score if d.primary else None,
        )
        for d in ranked
    )
    top = ranked[0]
    return replace(
        top,
        summary=replace(top.summary, upstreams=table),
        others=tuple(d for d in ranked[1:] if d.primary is not None),
    )


def _failed(d: Diagnosis) -> int:
    return failed_requests(d.summary)


def failed_requests(s: Summary) -> int:
    """Requests that met a failure, each once: those that failed, and those a retry saved
    (a retried attempt of a request that failed anyway is that request's failure)."""
    return s.errors + s.masked_by_retries - s.masked_unrecovered


def _diagnose_one(evidence: Evidence, s: Settings, service: str | None) -> Diagnosis:
    ctx = build(evidence)
    summary = quantify(ctx)
    notes, paths = _manifest_notes(evidence, s)
    backend = assess_backend(ctx, s)
    found = backend.details.suspects if isinstance(backend.details, BackendDetails) else ()
    race = assess_race(ctx, s, notes[Cause.RACE], [x.backend for x in found])
    if notes[Cause.BACKEND]:
        backend = replace(backend, evidence=(*backend.evidence, *notes[Cause.BACKEND]))
    measured = race.details if isinstance(race.details, RaceDetails) else None
    if compared := window_lines(measured, paths):
        race = replace(race, evidence=(*race.evidence, *compared))
    explained = measured.explained_fraction if measured and race.score >= 0.3 else 0.0
    reuse = assess_reuse(ctx, s, notes[Cause.REUSE], explained)
    infra = assess_infra(ctx, s, notes[Cause.INFRA])
    loads = loadgen.read_loads(evidence, summary.replicas)
    summary = replace(summary, loads=loads)
    reading = signatures.read(ctx)
    signed = tuple(signatures.weigh(a, reading) for a in (race, backend, reuse, infra))
    causes = ranked(
        loadgen.weigh(signed, loads, s.floor_rate),
        summary.requests,
        failed_requests(summary),
        none_failed=ctx.failure_ts.size == 0 and ctx.attempt_ts.size > 0,
        s=s,
    )
    steps = next_steps(causes, summary, s)
    summary = replace(
        summary,
        sources=evidence.sources,
        skipped_inputs=tuple(evidence.problems),
        incomplete=evidence.incomplete,
        warnings=(*evidence.warnings, *_misaligned(evidence, s), *reading.notes()),
        floor_rate=s.floor_rate,
    )
    d = Diagnosis(summary, tuple(causes), steps, timeline(ctx), service, paths=paths)
    return _pictured(ctx, d) if s.pictures else d


def _pictured(ctx: Context, d: Diagnosis) -> Diagnosis:
    """The diagnosis with what its pictures draw: the per-pod lanes when there are request
    rows, and the failures per backend when a bad backend or connection reuse is suspected
    (``None`` when no row names a backend)."""
    suspected = any(
        d.cause(c).verdict is not Verdict.UNLIKELY for c in (Cause.BACKEND, Cause.REUSE)
    )
    return replace(
        d,
        lanes=lanes_of(ctx, d) if ctx.frame.height else None,
        breakdown=breakdown_of(ctx, d) if suspected and ctx.frame.height else None,
    )


def ranked(
    assessments: tuple[Assessment, ...],
    requests: int,
    failed: int,
    *,
    none_failed: bool,
    s: Settings,
) -> list[Assessment]:
    """The assessments, strongest first, held down where the traffic says so: when
    requests came and not one failed, nothing is a cause whatever else the evidence shows;
    at the background rate of a healthy Service (below ``s.floor_rate``), only strong
    structure is, or a pattern aligned with the pods' lifecycle (failures on kept-alive
    connections at pod exits), which background failures do not show."""
    causes = sorted(assessments, key=lambda a: -a.score)
    if none_failed:
        return [replace(a, score=min(a.score, 0.05)) for a in causes]
    if requests and failed / requests < s.floor_rate:
        return [
            a
            if a.verdict is Verdict.LIKELY or aligned_with_exits(a, s)
            else replace(a, score=min(a.score, 0.25))
            for a in causes
        ]
    return causes


def next_steps(causes: list[Assessment], summary: Summary, s: Settings) -> tuple[str, ...]:
    """What to do next: the no-cause line or the tie between the two strongest causes,
    then the evidence each cause asks for (once each)."""
    steps: list[str] = []
    top = causes[0]
    if top.verdict is Verdict.UNLIKELY:
        steps.append(no_cause(summary, s))
    elif len(causes) > 1 and causes[1].verdict is top.verdict and causes[1].score > 0.8 * top.score:
        steps.append(
            f"{top.cause.value} and {causes[1].cause.value} both fit; fix "
            f"{top.cause.value} first and compare the next rollout"
        )
    for a in causes:
        steps.extend(x for x in a.collect if x not in steps)
    return tuple(steps)


def _misaligned(evidence: Evidence, s: Settings) -> list[str]:
    """Pod deletions that fall outside the request logs' time: clocks or zones that differ
    make every correlation with the lifecycle wrong, so it is said before any verdict."""
    dels = [e.ts for e in evidence.events if e.kind is EventKind.DELETE]
    stamps = evidence.requests.get_column("ts")
    if not dels or stamps.len() == 0:
        return []
    start, end = float(stamps.min()), float(stamps.max())  # type: ignore[arg-type]
    inside = sum(1 for t in dels if start - s.max_lag <= t <= end + s.max_lag)
    if inside >= 0.5 * len(dels):
        return []
    return [
        f"{len(dels) - inside} of {len(dels)} pod deletions ({iso_utc(min(dels))} → "
        f"{iso_utc(max(dels))}) fall outside the requests ({iso_utc(start)} → {iso_utc(end)}): "
        "if the clocks or time zones of the sources differ, align them with --clock-offset "
        "SOURCE=SECONDS or --tz ±HH:MM; the correlation with deletions below assumes they "
        "are right"
    ]


def no_cause(summary: Summary, s: Settings) -> str:
    """The "no cause" line: the background failures with their rate and interval."""
    n, k = summary.requests, summary.errors
    logged = summary.error_log_failures
    if not n and logged:
        hosts = ", ".join(f"{h.host} ({h.failures})" for h in summary.error_log_hosts)
        return (
            f"no cause can be tested: {logged} failures in the proxy's error log"
            + (f" (backends: {hosts})" if hosts else "")
            + " but no request log to compare them with: add the access log of the same time"
        )
    if not n and summary.loads:
        return loadgen.no_cause(summary.loads)
    if not n:
        return "no cause: no request evidence to diagnose"
    low, high = summary.error_rate_ci95 or (0.0, 1.0)
    background = "below" if k / n < s.floor_rate else "above"
    return (
        f"no cause: {k} background failures in {n} requests (rate {k / n:.3%}, 95 % CI "
        f"{low:.3%}-{high:.3%}, {background} the {s.floor_rate:.2%} a healthy Service "
        "shows), no pattern in lifecycle, backend, connection, client or node"
        + (
            f"; {logged} more failures in the proxy's error log match no request of the "
            "access log: give the access log covering their time"
            if logged
            else ""
        )
    )
