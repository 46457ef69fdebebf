"""The checklist of ``svcdoctor investigate``: the five steps of ``problem.md`` read off what
the parts measured (the scan's findings and inventory, the bundle's diagnosis and its
per-pod breakdown, the metrics, the direct probe, the rollout under load), then the verdict,
the fix and the next command. Pure: every number is the one its part computed."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from svcdoctor.cluster.probe import ProbeOutcome
from svcdoctor.cluster.probing import Tally, probe_breakdown
from svcdoctor.cluster.rollout import RolloutTest
from svcdoctor.cluster.scan import ScanReport
from svcdoctor.diagnose.context import Settings
from svcdoctor.model import Cause, Diagnosis, Evidence, Inventory, RaceDetails, Verdict
from svcdoctor.model.breakdown import Breakdown
from svcdoctor.model.diagnosis import (
    Assessment,
    BackendDetails,
    FixStep,
    InfraDetails,
    ReuseDetails,
)
from svcdoctor.model.investigation import (
    Investigation,
    Measure,
    Skipped,
    Step,
    StepId,
    StepStatus,
)
from svcdoctor.report.diagnosis import fraction_line, headline, retry_outcome, rollout_line
from svcdoctor.report.text import path_lines

SIGKILL = 137  # 128 + SIGKILL(9): the kubelet killed the container at the grace period's end
DEFAULT_GRACE = 30  # terminationGracePeriodSeconds when unset (see _grace)
RACE = Settings()  # the race analysis' thresholds, as investigate diagnoses with them
SHOWN = 8  # per-pod rows shown in a step's sentences (all are in its measures)


@dataclass(frozen=True, slots=True)
class Parts:
    """What the parts returned (``None``: not run; ``errors`` by part: why it failed)."""

    service: str
    context: str
    server_version: str
    scan: ScanReport | None = None
    inventory: Inventory | None = None
    bundle: Mapping[str, Any] = field(default_factory=dict)  # collect's manifest
    evidence: Evidence | None = None
    diagnosis: Diagnosis | None = None
    breakdown: Breakdown | None = None
    metrics: Diagnosis | None = None
    probe: ProbeOutcome | None = None
    rollout: RolloutTest | None = None
    errors: Mapping[str, str] = field(default_factory=dict)
    skipped: tuple[Skipped, ...] = ()
    watch: float | None = None
    out: str = ""
    rerun: str = ""  # the investigation with every step
    fix_command: str = ""  # ``svcdoctor fix YOUR-MANIFESTS --from-diagnosis`` (file follows)


def _pct(x: float) -> str:
    return f"{x:.2%}"


def _ci(ci: tuple[float, float] | None) -> str:
    return f" (95 % CI {_pct(ci[0])}-{_pct(ci[1])})" if ci else ""


def _strong(a: Assessment | None) -> bool:
    return a is not None and a.verdict is not Verdict.UNLIKELY


def _skips(parts: Parts, step: StepId) -> list[Skipped]:
    return [s for s in parts.skipped if s.step is step]


def _step(
    step: StepId,
    status: StepStatus,
    checked: Iterable[str],
    found: Iterable[str],
    measures: Iterable[Measure],
    causes: Iterable[Cause] = (),
    missing: Iterable[str] = (),
    would_decide: str = "",
) -> Step:
    """A step from what it gathered in lists (its causes once each, in order)."""
    return Step(
        step,
        status,
        checked=tuple(checked),
        found=tuple(found),
        measures=tuple(measures),
        missing=tuple(missing),
        would_decide=would_decide,
        causes=tuple(dict.fromkeys(causes)),
    )


# ---------------------------------------------------------------- step 1


def quantify(parts: Parts) -> Step:
    """The failure rate with its interval, the round fraction of the replicas it fits, and
    whether it tracks the deletions (the race test) or the rollouts (the metrics)."""
    d, m = parts.diagnosis, parts.metrics
    checked = []
    if parts.bundle:
        files = parts.bundle.get("files") or []
        span = parts.bundle.get("span") or {}
        checked.append(
            f"the request rows and lifecycle objects of the last --since in the bundle "
            f"({len(files)} files, {span.get('start') or '?'} to {span.get('end') or '?'})"
        )
    if m is not None:
        checked.append("the metrics store's request counters and pod deletions")
    found: list[str] = []
    measures: list[Measure] = []
    causes: list[Cause] = []
    counted = [x for x in (d, m) if x is not None and (x.summary.requests or x.summary.loads)]
    for x in counted:
        s = x.summary
        found.append(("metrics: " if x is m else "") + headline(x))
        prefix = "metrics_" if x is m else ""
        measures += [
            Measure(f"{prefix}requests", s.requests),
            Measure(f"{prefix}failures", s.errors),
            Measure(f"{prefix}failure_rate", s.error_rate, s.error_rate_ci95),
        ]
        f = s.nearest_fraction
        if s.replicas:
            measures.append(Measure(f"{prefix}replicas", s.replicas))
        if f is not None:
            measures += [
                Measure(f"{prefix}nearest_fraction", f.text),
                Measure(f"{prefix}round_fraction", f.consistent),
            ]
            if f.consistent and s.errors:
                found.append(fraction_line(f))
                if _strong(x.cause(Cause.BACKEND)):
                    causes.append(Cause.BACKEND)
            elif s.errors:
                found.append(
                    f"not a round fraction of the {s.replicas or '?'} replicas (nearest "
                    f"{f.text}, binomial p = {f.p_value:.2g})"
                )
        for r in x.rollouts:
            found.append("rollout " + rollout_line(r))
    race = _race(d)
    if race is not None and d is not None and d.summary.errors:
        # as the race analysis decides it (diagnose/race.py, the settings investigate uses)
        tracks = race.p_value < RACE.permutation_alpha and race.excess_failures >= RACE.min_failures
        found.append(
            f"{race.deletions} pod deletions in the evidence; the failures "
            + ("track them" if tracks else "do not track them beyond chance")
            + f" (permutation p = {race.p_value:.2g}; {race.explained_fraction:.0%} of the "
            "failures after a deletion)"
        )
        measures += [
            Measure("deletions", race.deletions),
            Measure("tracks_deployments", tracks),
            Measure("deployment_p_value", race.p_value),
            Measure("explained_fraction", race.explained_fraction),
        ]
        if tracks:
            causes.append(Cause.RACE)
    elif d is not None:
        measures.append(Measure("deletions", d.summary.deletions))
        if not d.summary.deletions and d.summary.errors:
            found.append("no pod was deleted in the evidence: nothing to track")
    if not counted:
        return _step(
            StepId.QUANTIFY,
            StepStatus.NOT_RUN,
            checked,
            found,
            measures,
            missing=(
                "no request log in the bundle (no ingress-nginx, sidecar, gateway or client "
                "logs about the Service) and no --prometheus",
                *_errors(parts, "diagnosis", "metrics"),
            ),
            would_decide="the failure rate, whether it is a round fraction of the replicas "
            "(one bad backend) and whether it tracks deployments (the race): give "
            "--client-logs SELECTOR (the callers' pods) or --prometheus URL",
        )
    failed = any(x.summary.errors for x in counted)
    status = StepStatus.FOUND if failed else StepStatus.CLEAR
    return _step(
        StepId.QUANTIFY, status, checked, found, measures, causes, _errors(parts, "metrics")
    )


def _race(d: Diagnosis | None) -> RaceDetails | None:
    details = d.cause(Cause.RACE).details if d is not None else None
    return details if isinstance(details, RaceDetails) else None


def _errors(parts: Parts, *names: str) -> list[str]:
    return [f"{n} failed: {parts.errors[n]}" for n in names if n in parts.errors]


# ---------------------------------------------------------------- step 2


def lifecycle(parts: Parts) -> Step:
    """The failures overlaid on the deletions: the race window with its interval, each
    path's hops and their legs against it, and what the rollout under load measured."""
    d, t = parts.diagnosis, parts.rollout
    ev = parts.evidence
    checked = []
    if ev is not None:
        deleted = sum(1 for p in ev.pods if p.deleted_at is not None)
        checked.append(
            f"{len(ev.events)} lifecycle events, {len(ev.endpoints)} endpoint changes and "
            f"{deleted} deleted pods in the bundle"
            + (f" (watched {parts.watch:g} s)" if parts.watch else "")
        )
    if t is not None:
        checked.append(f"rollout-test: {t.plan.workload} restarted under load")
    found: list[str] = []
    measures: list[Measure] = []
    causes: list[Cause] = []
    shown = [x for x in (d, t.diagnosis if t is not None and t.failed else None) if x]
    for x in shown:
        race = x.cause(Cause.RACE)
        details = _race(x)
        prefix = "rollout_" if t is not None and x is t.diagnosis else ""
        if details is not None and details.window is not None:
            w = details.window
            if not _strong(race):  # a named race says it in its own evidence, below
                found.append(
                    ("rollout-test: " if prefix else "")
                    + f"race window {w.seconds:g} s after each deletion (95 % CI {w.ci95[0]:g}-"
                    f"{w.ci95[1]:g} s"
                    + (f", median lag {w.median_lag_seconds:g} s" if w.median_lag_seconds else "")
                    + f"): {w.excess_failures:g} failures above the baseline "
                    f"{w.baseline_failures_per_second:.3g}/s"
                )
            measures += [
                Measure(f"{prefix}race_window_seconds", w.seconds, w.ci95),
                Measure(f"{prefix}median_lag_seconds", w.median_lag_seconds),
            ]
        if _strong(race):
            causes.append(Cause.RACE)
            found += [f"{'rollout-test: ' if prefix else ''}{e}" for e in race.evidence[:3]]
    if t is not None:
        found.append(
            f"rollout-test: {t.failed} of {t.requests} requests failed while "
            f"{t.plan.workload} rolled out"
        )
        for delay in t.delays:
            parts_ = [f"rollout-test: pod {delay.pod} deleted"]
            if delay.update_seconds is not None:
                parts_.append(f"out of the ready endpoints {delay.update_seconds:.2f} s later")
            if delay.window_seconds is not None:
                parts_.append(f"last failure {delay.window_seconds:.2f} s after")
            found.append(", ".join(parts_))
        measures.append(Measure("rollout_failures", t.failed))
        if t.endpoint_update_seconds is not None:
            measures.append(Measure("endpoint_update_seconds", t.endpoint_update_seconds))
    found += _hops(parts)
    deletions = d.summary.deletions if d is not None else 0
    missing = [*_errors(parts, "rollout")]
    skips = _skips(parts, StepId.LIFECYCLE)
    missing += [f"skipped without {s.needs}: {s.what}; run: {s.command}" for s in skips]
    if not deletions and t is None:
        return _step(
            StepId.LIFECYCLE,
            StepStatus.NOT_RUN,
            checked,
            found,
            measures,
            missing=(
                "no pod was deleted within --since"
                + ("" if parts.watch else " and nothing was watched")
                + ": there is no deletion to overlay the failures on",
                *missing,
            ),
            would_decide="whether failures cluster in the seconds after pod deletions (the "
            "race, and its window per hop) or spread evenly (a bad backend, infrastructure): "
            "add --watch-rollout 2m and start a rollout, or --yes --rollout",
        )
    if d is not None and (d.summary.requests == 0) and t is None:
        status = StepStatus.NOT_RUN
        missing.insert(0, f"{deletions} deletions but no request log to overlay them on")
    else:
        status = StepStatus.FOUND if causes else StepStatus.CLEAR
    decide = "whether the failures cluster after the deletions (the race)"
    decide = decide if status is StepStatus.NOT_RUN else ""
    return _step(StepId.LIFECYCLE, status, checked, found, measures, causes, missing, decide)


def _hops(parts: Parts) -> list[str]:
    """Each path in front of the Service's workloads, hop by hop with its leg, and the leg
    the preStop advice covers (the scan's paths)."""
    if parts.scan is None:
        return []
    lines: list[str] = []
    for shown in parts.scan.result.paths:
        lines += [line.strip() for line in path_lines(shown)]
    return list(dict.fromkeys(lines))


# ---------------------------------------------------------------- step 3


def bypass(parts: Parts) -> Step:
    """The failures per pod from the request log (with intervals), the suspects, and the
    direct probe of each endpoint (and of the Service from each node)."""
    d, b, p = parts.diagnosis, parts.breakdown, parts.probe
    checked = []
    found: list[str] = []
    measures: list[Measure] = []
    causes: list[Cause] = []
    if b is not None and b.backends:
        checked.append(f"the failures of each of the {len(b.backends)} backends in the request log")
        for rate in b.backends[:SHOWN]:
            found.append(
                f"{rate.name}: {rate.failures} of {rate.requests} failed "
                f"({_pct(rate.rate)}, 95 % CI {_pct(rate.ci95[0])}-{_pct(rate.ci95[1])})"
                + (" SUSPECT" if rate.suspect else "")
            )
        measures += [Measure(f"failure_rate:pod/{r.name}", r.rate, r.ci95) for r in b.backends]
    backend = d.cause(Cause.BACKEND) if d is not None else None
    if backend is not None and isinstance(backend.details, BackendDetails):
        for s in backend.details.suspects:
            found.append(
                f"singled out: {s.pod or s.backend} fails {_pct(s.failure_rate)}"
                f"{_ci(s.failure_rate_ci95)} while the others fail "
                f"{_pct(s.others_failure_rate)} (p = {s.p_value:.2g})"
            )
    if _strong(backend):
        causes.append(Cause.BACKEND)
    infra = d.cause(Cause.INFRA) if d is not None else None
    if infra is not None and isinstance(infra.details, InfraDetails):
        node = infra.details.node_concentration
        if node is not None:
            found.append(
                f"node {node.node} carries {node.failure_share:.0%} of the failures and "
                f"{node.traffic_share:.0%} of the traffic (p = {node.p_value:.2g})"
            )
    if p is not None:
        r = p.result
        checked.append(
            f"the direct probe: {len(r.backends)} endpoints reached without the Service"
            + (f", the Service from {len(r.nodes)} nodes" if r.nodes else "")
        )
        for from_node, tallies in ((False, r.backends), (True, r.nodes)):
            for tally in tallies:
                sentence, measure = _probed(tally, from_node)
                found.append(sentence)
                measures.append(measure)
        if r.bad_backends:
            causes.append(Cause.BACKEND)
        if r.bad_nodes:
            causes.append(Cause.INFRA)
        found += [f"probe note: {n}" for n in p.notes]
    skips = _skips(parts, StepId.BYPASS)
    missing = [f"skipped without {s.needs}: {s.what}; run: {s.command}" for s in skips]
    missing += _errors(parts, "probe")
    if not checked:
        return Step(
            StepId.BYPASS,
            StepStatus.NOT_RUN,
            missing=("no request row names a backend", *missing),
            would_decide="whether one pod (or node) fails more than the others when reached "
            "directly (one bad backend) or all fail alike (the routing is racy)",
        )
    status = StepStatus.FOUND if causes else StepStatus.CLEAR
    if p is None and not causes:
        status = StepStatus.PARTIAL
    decide = "whether a pod fails when reached directly (the probe bypasses the Service's routing)"
    decide = decide if p is None else ""
    return _step(StepId.BYPASS, status, checked, found, measures, causes, missing, decide)


def _probed(tally: Tally, node: bool) -> tuple[str, Measure]:
    """A probe's tally as a sentence and a measure: an endpoint reached directly, or (with
    ``node``) the Service reached from a node."""
    share, (low, high) = tally.failure_share, tally.failure_ci95
    name = tally.key if node else tally.label or tally.key
    sentence = (
        f"probe {'from node ' if node else ''}{name}: {tally.failures} of {tally.requests} "
        f"failed{'' if node else ' directly'} ({_pct(share)}, 95 % CI {_pct(low)}-{_pct(high)})"
    )
    if tally.outlier:
        sentence += " ROUTE FAILS MORE" if node else " FAILS MORE"
    measure = Measure(f"probe_failure_rate:{'node' if node else 'pod'}/{name}", share, (low, high))
    return sentence, measure


# ---------------------------------------------------------------- step 4


def shutdown(parts: Parts) -> Step:
    """The workloads' preStop and grace period, the scan's shutdown findings (SIGTERM
    handling, hooks, SIGKILLs), and how the deleted pods' containers exited."""
    checked: list[str] = []
    found: list[str] = []
    measures: list[Measure] = []
    causes: list[Cause] = []
    inv = parts.inventory
    if inv is not None:
        for w in inv.workloads:
            if w.ref.kind not in ("Deployment", "StatefulSet"):
                continue
            checked.append(f"{w.ref.kind} {w.ref.name}'s pod template")
            grace = w.template.grace_seconds
            for c in w.template.containers:
                pre = c.prestop
                delay = (
                    "none"
                    if pre is None
                    else f"{pre.handler}"
                    + (f" {pre.sleep_seconds:g} s" if pre.sleep_seconds is not None else "")
                )
                found.append(
                    f"{w.ref.kind} {w.ref.name} container {c.name}: preStop {delay}, "
                    f"terminationGracePeriodSeconds {_grace(grace)}"
                )
                sleep = None if pre is None else pre.sleep_seconds
                measures += [
                    Measure(f"prestop_seconds:{w.ref.name}/{c.name}", sleep),
                    Measure(
                        f"grace_seconds:{w.ref.name}", DEFAULT_GRACE if grace is None else grace
                    ),
                ]
    if parts.scan is not None:
        checked.append("the scan's shutdown rules (preStop, grace, SIGTERM, hooks, SIGKILLs)")
        for f in parts.scan.result.findings:
            if f.cause is Cause.RACE:
                found.append(f"{f.rule} {f.name}: {f.message}")
                causes.append(Cause.RACE)
    ev = parts.evidence
    if ev is not None:
        deleted = [pod for pod in ev.pods if pod.deleted_at is not None]
        exits = [x for pod in deleted for x in pod.exits]
        if deleted:
            checked.append(f"the exit codes of the {len(deleted)} deleted pods' containers")
            tally: dict[tuple[int, str], int] = {}
            for x in exits:
                tally[(x.exit_code, x.reason)] = tally.get((x.exit_code, x.reason), 0) + 1
            if tally:
                found.append(
                    "exits: "
                    + ", ".join(
                        f"{code} {reason} x{n}" for (code, reason), n in sorted(tally.items())
                    )
                )
            else:
                found.append("no exit recorded for the deleted pods (gone before they were read)")
            killed = sum(n for (code, _), n in tally.items() if code == SIGKILL)
            measures += [Measure("exits", len(exits)), Measure("sigkilled", killed)]
    race = _race(parts.diagnosis)
    if race is not None:
        sd = race.shutdown
        if sd.sigkilled:
            found.append(
                f"{len(sd.sigkilled)} containers SIGKILLed at the grace period's end; "
                f"{sd.failures_at_sigkill} failures at those moments"
            )
            causes.append(Cause.RACE)
        if sd.failed_prestop_hooks:
            found.append(
                f"{sd.failed_prestop_hooks} failed preStop hooks "
                f"({', '.join(sd.failed_prestop_pods)})"
            )
            causes.append(Cause.RACE)
        measures.append(Measure("failed_prestop_hooks", sd.failed_prestop_hooks))
    if not checked:
        return Step(
            StepId.SHUTDOWN,
            StepStatus.NOT_RUN,
            missing=tuple(_errors(parts, "scan", "diagnosis")),
            would_decide="whether the pods keep serving after SIGTERM long enough (preStop, "
            "grace period, SIGTERM handling) and how they exited",
        )
    status = StepStatus.FOUND if causes else StepStatus.CLEAR
    found = list(dict.fromkeys(found))  # each sentence once
    return _step(StepId.SHUTDOWN, status, checked, found, measures, causes, _errors(parts, "scan"))


# ---------------------------------------------------------------- step 5


def client(parts: Parts) -> Step:
    """Connection reuse (the reuse analysis) and the retries that mask failures."""
    d = parts.diagnosis
    checked: list[str] = []
    found: list[str] = []
    measures: list[Measure] = []
    causes: list[Cause] = []
    if d is not None and d.summary.requests:
        checked.append("connection reuse and retries in the request rows")
        reuse = d.cause(Cause.REUSE)
        found += list(reuse.evidence[:4])
        if isinstance(reuse.details, ReuseDetails):
            measures.append(Measure("reused_failure_share", reuse.details.reused_failure_share))
        if _strong(reuse):
            causes.append(Cause.REUSE)
        s = d.summary
        if s.masked_by_retries:
            found.append(
                f"{s.masked_by_retries} failed attempts were retried {retry_outcome(s)}: "
                "retries mask the failures (also a legitimate mitigation)"
            )
        else:
            found.append("no retried attempt in the evidence: nothing masks the failures")
        measures += [
            Measure("masked_by_retries", s.masked_by_retries),
            Measure("masked_recovered", s.masked_recovered),
        ]
    if parts.scan is not None:
        checked.append("the scan's connection-reuse rules")
        for f in parts.scan.result.findings:
            if f.cause is Cause.REUSE:
                found.append(f"{f.rule} {f.name}: {f.message}")
    if d is None or not d.summary.requests:
        collect = d.cause(Cause.REUSE).collect if d is not None else ()
        return _step(
            StepId.CLIENT,
            StepStatus.NOT_RUN if not checked else StepStatus.PARTIAL,
            checked,
            found,
            measures,
            missing=("no request rows: reuse and retries cannot be read", *collect),
            would_decide="whether kept-alive connections pin clients to pods (reuse) and "
            "whether retries hide failures: give --client-logs SELECTOR",
        )
    status = StepStatus.FOUND if causes or d.summary.masked_by_retries else StepStatus.CLEAR
    return _step(StepId.CLIENT, status, checked, found, measures, causes)


# ---------------------------------------------------------------- the verdict


def _chosen(parts: Parts) -> tuple[Diagnosis | None, Assessment | None]:
    """The diagnosis with the strongest named cause (the bundle's, the rollout's, the
    metrics'); the bundle's when none names one."""
    t = parts.rollout
    candidates = [
        x
        for x in (
            parts.diagnosis,
            t.diagnosis if t is not None and t.failed else None,
            parts.metrics,
        )
        if x is not None
    ]
    named = [(x, x.primary) for x in candidates if x.primary is not None]
    if named:
        return max(named, key=lambda pair: pair[1].score if pair[1] else 0.0)
    return (parts.diagnosis or (candidates[0] if candidates else None)), None


def investigation(parts: Parts) -> Investigation:
    """The checklist and its conclusion (see ``Investigation``)."""
    steps = (quantify(parts), lifecycle(parts), bypass(parts), shutdown(parts), client(parts))
    d, primary = _chosen(parts)
    cause = primary.cause if primary is not None else None
    strength = primary.verdict if primary is not None else None
    evidence: tuple[str, ...] = primary.evidence if primary is not None else ()
    fixes: tuple[FixStep, ...] = primary.fixes if primary is not None else ()
    probe = parts.probe
    if cause is None and probe is not None and probe.result.singled_out:
        bad = probe.result.bad_backends
        cause = Cause.BACKEND if bad else Cause.INFRA
        strength = Verdict.LIKELY
        evidence = tuple(s for s in steps[StepId.BYPASS - 1].found if "FAILS MORE" in s)
        fixes = (
            FixStep(
                f"take {', '.join(t.label or t.key for t in bad)} out of the Service and find "
                "why its readiness probe passes"
                if bad
                else "check the singled-out node's conntrack table, kube-proxy and datapath"
            ),
        )
    decided = tuple(s.id for s in steps if cause is not None and cause in s.causes)
    incomplete = [*(parts.bundle.get("missing") or ())]
    # a part the user asked for (--yes, --rollout, --prometheus) that failed leaves it incomplete
    incomplete += [f"{k} failed: {v}" for k, v in parts.errors.items()]
    notes: list[str] = []
    return Investigation(
        service=parts.service,
        context=parts.context,
        server_version=parts.server_version,
        steps=steps,
        cause=cause,
        strength=strength,
        headline=headline(d) if d is not None else "no diagnosis",
        decided_by=decided,
        evidence=evidence,
        fixes=fixes,
        next_command=_next(parts, d, cause),
        skipped=parts.skipped,
        incomplete=tuple(incomplete),
        notes=tuple(notes),
        bundle=f"{parts.out}/evidence" if parts.out else None,
        diagnosis=d,
        probe=probe_breakdown(parts.probe.result) if parts.probe is not None else None,
    )


def _next(parts: Parts, d: Diagnosis | None, cause: Cause | None) -> str | None:
    """The fix command for a race with a measured plan; the full investigation when steps
    were skipped; else what the diagnosis asks for next."""
    race = _race(d)
    if cause is Cause.RACE and race is not None and (race.plan or race.window):
        path = f"{parts.out}/diagnosis.json" if parts.out else "DIR/diagnosis.json"
        return f"{parts.fix_command} {shlex.quote(path)} --write"
    if cause is Cause.BACKEND and parts.probe is not None and parts.probe.result.bad_backends:
        pod = parts.probe.result.bad_backends[0]
        ns = parts.service.split("/", 1)[0]
        return f"kubectl -n {ns} describe pod {pod.label or pod.key}"
    if cause is None and parts.skipped:
        return parts.rerun
    return d.next_steps[0] if d is not None and d.next_steps else None


def _grace(seconds: int | None) -> str:
    """The grace period as the pod has it (Kubernetes' default 30 s when unset:
    https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination)."""
    return f"{DEFAULT_GRACE} (default)" if seconds is None else str(seconds)
