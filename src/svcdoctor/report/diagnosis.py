"""Renderers of a diagnosis: text (verdict first), JSON and a timeline plot (its HTML page:
``svcdoctor.report.html``)."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from svcdoctor.model import Diagnosis, EventKind, SourceSummary, Verdict, iso_utc
from svcdoctor.model.diagnosis import (
    SCHEMA_VERSION,
    BackendDetails,
    CauseDetails,
    ClientFailures,
    CounterValue,
    EndpointState,
    InfraDetails,
    LoadReading,
    NearestFraction,
    RaceDetails,
    ReuseDetails,
    Rollout,
    Summary,
    UpstreamRow,
)
from svcdoctor.model.remedy import plan_data
from svcdoctor.report.fixes import patch_text as fix_yaml
from svcdoctor.report.fixes import step_text
from svcdoctor.report.jsonout import paths_data
from svcdoctor.report.text import path_lines, print_lines

COMPARED = "the measured window is compared with"

_STYLE = {Verdict.LIKELY: "bold red", Verdict.POSSIBLE: "yellow", Verdict.UNLIKELY: "dim"}
_NAMES = {
    "race": "endpoint-removal race (pods stop serving before routing stops)",
    "backend": "one unhealthy backend",
    "reuse": "connection reuse defeats load balancing",
    "infra": "infrastructure (conntrack, SNAT, node)",
}


def cause_name(cause: str) -> str:
    """The cause's name in words (``race`` → what the race is)."""
    return _NAMES[cause]


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    """A record whose field names are its JSON keys, as JSON values: records → objects
    (in field order), tuples → arrays, enums → their values."""
    if isinstance(value, ClientFailures):  # a row: [client, requests, failures]
        return [value.client, value.requests, value.failures]
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Enum):
        return value.value
    return value


def _counters(values: tuple[CounterValue, ...]) -> dict[str, int]:
    return {v.counter.value: v.count for v in values}


def _race(r: RaceDetails) -> dict[str, Any]:
    """The race details; with a measured window, its excess over the lag histogram is the
    ``excess_failures`` shown (the test window's otherwise)."""
    w = r.window
    out: dict[str, Any] = {
        "deletions": r.deletions,
        "p_value": r.p_value,
        "excess_failures": w.excess_failures if w else r.excess_failures,
        "explained_fraction": r.explained_fraction,
        "clock_resolution_seconds": r.clock_resolution_seconds,
        "sigkilled": _plain(r.shutdown.sigkilled),
        "failures_at_sigkill": r.shutdown.failures_at_sigkill,
        "failed_prestop_hooks": r.shutdown.failed_prestop_hooks,
        "failed_prestop_pods": list(r.shutdown.failed_prestop_pods),
        "prestop_past_grace_pods": list(r.shutdown.prestop_past_grace_pods),
    }
    if w is not None:
        out |= {
            "window_seconds": w.seconds,
            "window_ci95": list(w.ci95),
            "window_definition": w.definition,
            "window_clock_seconds": w.clock_seconds,
            "window_plan_seconds": w.plan_seconds,
            "median_lag_seconds": w.median_lag_seconds,
            "baseline_failures_per_second": w.baseline_failures_per_second,
            "latency_p999_seconds": r.latency_p999_seconds,
            "recommended_prestop_seconds": r.recommended_prestop_seconds,
        }
    elif r.recommended_prestop_seconds is not None:  # planned from a hop's leg alone
        out |= {
            "latency_p999_seconds": r.latency_p999_seconds,
            "recommended_prestop_seconds": r.recommended_prestop_seconds,
        }
    if r.recommended_grace_seconds is not None:
        out["recommended_grace_seconds"] = r.recommended_grace_seconds
    if w is not None or r.remedy:
        out["remedy"] = [
            {**_plain(p), "patch": fix_yaml(p.patch), "plan": _plain(p.patch)} for p in r.remedy
        ]
    if r.plan is not None:
        out["plan"] = plan_data(r.plan)
    if r.hops:
        out["hops"] = [{**_plain(leg), "covers_seconds": round(leg.covers, 3)} for leg in r.hops]
    return out


def _backend(b: BackendDetails) -> dict[str, Any]:
    out: dict[str, Any] = {"backends": b.backends, "suspects": _plain(b.suspects)}
    if b.explained_fraction is not None:
        out["explained_fraction"] = b.explained_fraction
    return out


def _infra(i: InfraDetails) -> dict[str, Any]:
    out: dict[str, Any] = {
        "conntrack_full_lines": i.conntrack_full_lines,
        "suppressed_messages": i.suppressed_messages,
        "lines_far_from_requests": i.lines_far_from_requests,
        "conntrack_counters": _counters(i.conntrack_counters),
    }
    if i.kernel_alignment is not None:
        out["kernel_alignment"] = _plain(i.kernel_alignment)
    if i.counter_growth is not None:
        out["counter_growth"] = {
            **_plain(i.counter_growth),
            "growth": _counters(i.counter_growth.growth),
        }
    if i.node_concentration is not None:
        out["node_concentration"] = _plain(i.node_concentration)
    return out


_DETAILS: dict[type, Callable[[Any], dict[str, Any]]] = {
    RaceDetails: _race,
    BackendDetails: _backend,
    InfraDetails: _infra,
    ReuseDetails: _plain,
}


def details_to_dict(details: CauseDetails | None) -> dict[str, Any]:
    """The ``details`` object of one cause in the JSON report (``{}`` when none)."""
    render = _DETAILS.get(type(details))
    return render(details) if render is not None else {}


def _fraction(f: NearestFraction | None) -> dict[str, Any] | None:
    if f is None:
        return None
    return {
        "fraction": f.text,
        "value": f.value,
        "p_value": f.p_value,
        "consistent": f.consistent,
        "simplified": f.simplified,
    }


def _source(src: SourceSummary) -> dict[str, Any]:
    return {
        "path": src.path,
        "format": src.format,
        "rows": src.rows,
        "start": iso_utc(src.start),
        "end": iso_utc(src.end),
        **({"note": src.note} if src.note else {}),
    }


def summary_to_dict(s: Summary) -> dict[str, Any]:
    """The ``summary`` object of the JSON report."""
    out: dict[str, Any] = {
        "requests": s.requests,
        "errors": s.errors,
        "error_rate": s.error_rate,
        "error_rate_ci95": list(s.error_rate_ci95) if s.error_rate_ci95 else None,
        "by_outcome": {c.outcome.value: c.count for c in s.by_outcome},
        "masked_by_retries": s.masked_by_retries,
        "masked_by_outcome": {c.outcome.value: c.count for c in s.masked_by_outcome},
        "error_log_failures": s.error_log_failures,
        "error_log_hosts": [[h.host, h.failures] for h in s.error_log_hosts],
        "start": iso_utc(s.start),
        "end": iso_utc(s.end),
        "duration_seconds": s.duration_seconds,
        "replicas": s.replicas,
        "nearest_fraction": _fraction(s.nearest_fraction),
        "deletions": s.deletions,
        "sources": [_source(src) for src in s.sources],
        "skipped_inputs": list(s.skipped_inputs),
        "incomplete": list(s.incomplete),
        "warnings": list(s.warnings),
        "floor_rate": s.floor_rate,
    }
    if s.upstreams is not None:
        out["upstreams"] = _plain(s.upstreams)
    out["masked_recovered"] = s.masked_recovered
    out["masked_unrecovered"] = s.masked_unrecovered
    out["round_timeouts"] = [[x.seconds, x.failures] for x in s.round_timeouts]
    if s.loads:
        out["load_summaries"] = [_load(r) for r in s.loads]
    return out


def _load(r: LoadReading) -> dict[str, Any]:
    """One load generator's report (``summary.load_summaries[]``, docs/schemas.md)."""
    s = r.load
    return {
        "tool": s.tool,
        "source": s.source,
        "requests": s.requests,
        "failures": s.failed,
        "failure_rate": r.rate,
        "failure_rate_ci95": list(r.rate_ci95) if r.rate_ci95 else None,
        "by_outcome": {o.value: c for o, c in s.failures},
        "status_codes": {str(code): c for code, c in s.statuses},
        "errors": [[e.text, e.count, e.outcome.value] for e in s.errors],
        "sockets_used": s.sockets,
        "connections": s.connections,
        "keepalive": s.keepalive,
        "start": iso_utc(s.start),
        "end": iso_utc(s.end),
        "duration_seconds": s.duration_seconds,
        "nearest_fraction": _fraction(r.nearest_fraction),
        "hints": list(r.hints),
        "note": s.note,
    }


def _rollout(r: Rollout) -> dict[str, Any]:
    return {
        "time": iso_utc(r.start),
        "end": iso_utc(r.end),
        "workloads": list(r.workloads),
        "deletions": r.deletions,
        "requests": r.requests,
        "failures": r.failures,
        "expected_failures": r.expected_failures,
        "failure_rate": r.failure_rate,
        "failure_rate_ci95": list(r.failure_rate_ci95),
        "window_seconds": r.window_seconds,
    }


def diagnosis_to_dict(d: Diagnosis) -> dict[str, Any]:
    """The JSON document (``schema_version`` first); ``rollouts`` only when the diagnosis
    has them (from metrics)."""
    return {"schema_version": SCHEMA_VERSION, **_document(d)}


def _document(d: Diagnosis) -> dict[str, Any]:
    primary = d.primary
    rollouts = {"rollouts": [_rollout(r) for r in d.rollouts]} if d.rollouts else {}
    paths = {"paths": [paths_data(p) for p in d.paths]} if d.paths else {}
    body: dict[str, Any] = _clean(
        {
            "summary": summary_to_dict(d.summary),
            "primary_cause": primary.cause.value if primary else None,
            "causes": [
                {
                    "cause": a.cause.value,
                    "score": a.score,
                    "verdict": a.verdict.value,
                    "evidence": list(a.evidence),
                    "fixes": [step_text(f) for f in a.fixes],
                    "details": details_to_dict(a.details),
                    "collect": list(a.collect),
                }
                for a in d.causes
            ],
            "next_steps": list(d.next_steps),
            "service": d.service,
            "other_services": [_document(o) for o in d.others],
            **rollouts,
            **paths,
        }
    )
    return body


def render_json(d: Diagnosis) -> str:
    return json.dumps(diagnosis_to_dict(d), indent=2, default=str)


def headline(d: Diagnosis) -> str:
    s = d.summary
    rate = s.error_rate
    ci = s.error_rate_ci95
    logged = s.error_log_failures
    if rate is not None and ci:
        part = (
            f"{s.errors} of {s.requests} requests failed ({rate:.2%}, 95% CI "
            f"{ci[0]:.2%}-{ci[1]:.2%})"
        )
        if logged:
            part += f"; {logged} more failures in the error log matched no request"
    elif logged:
        part = f"no request log; {logged} failures in the proxy's error log (no error rate)"
    elif s.loads:
        part = "no per-request log: the load generators' counts follow"
    else:
        part = "no request log"
    if s.masked_by_retries:
        part += f"; {s.masked_by_retries} failed upstream attempts were retried by the proxy " + (
            retry_outcome(s)
        )
    for x in s.round_timeouts:
        part += (
            f"; {x.failures} {'failure' if x.failures == 1 else 'failures'} lasted {x.seconds:g} "
            f"s or just over: a {x.seconds:g} s timeout fired (the proxy's, the client's or a "
            "load balancer's: compare with the configured ones)"
        )
    return part


def retry_outcome(s: Summary) -> str:
    """What became of the requests whose attempts a proxy retried, as the evidence says."""
    saved, lost = s.masked_recovered, s.masked_unrecovered
    unknown = s.masked_by_retries - saved - lost
    if saved == s.masked_by_retries:
        return "(hidden from the client: the retry succeeded)"
    if lost == s.masked_by_retries:
        return "and every retry failed too (the client got the error: counted once, there)"
    parts = [
        f"{saved} hidden from the client where the retry succeeded" if saved else "",
        f"{lost} where every try failed (counted once, with the request)" if lost else "",
        f"{unknown} whose final outcome the log does not show" if unknown else "",
    ]
    return "(" + "; ".join(p for p in parts if p) + ")"


def fraction_line(f: NearestFraction) -> str:
    """The round fraction of failing backends the error rate is consistent with."""
    return (
        f"the error rate is consistent with {f.text} of the backends failing "
        f"(binomial p = {f.p_value:.2g})"
    )


def load_line(r: LoadReading) -> str:
    """One report as the summary shows it: the numbers as the tool gave them."""
    s = r.load
    head = f"{s.tool} ({s.source}): {s.failed} of {s.requests} requests failed"
    if r.rate is not None and r.rate_ci95 is not None:
        low, high = r.rate_ci95
        head += f" ({r.rate:.2%}, 95 % CI {low:.2%}-{high:.2%})"
    if s.failures:
        head += ": " + ", ".join(f"{o.value} {c}" for o, c in s.failures)
    if s.statuses:
        head += "; status " + " ".join(f"{code}:{c}" for code, c in s.statuses)
    if s.sockets is not None:
        head += f"; sockets used {s.sockets}" + (
            f" (perfect keep-alive: {s.connections})" if s.connections else ""
        )
    if s.note:
        head += f"; {s.note}"
    return head + "".join(f"; {h}" for h in r.hints)


def upstream_line(row: UpstreamRow) -> str:
    """One Service of the evidence: its failures and its strongest cause."""
    rate = row.error_rate
    return (
        f"{row.upstream}: {row.errors} of {row.requests} failed"
        + (f" ({rate:.2%})" if rate is not None else "")
        + f", {row.cause.value if row.cause else 'no cause'}"
    )


def rollout_line(r: Rollout) -> str:
    """One rollout: when, what, and its failures against the baseline's prediction."""
    return (
        f"{iso_utc(r.start)} {', '.join(r.workloads) or '?'}: {r.deletions} deletions, "
        f"{r.failures} of {r.requests} requests failed (baseline predicts "
        f"{r.expected_failures:g})"
    )


def render_text(d: Diagnosis, console: Console) -> None:
    if d.summary.incomplete:
        console.print(
            "[bold red]INCOMPLETE evidence:[/] the bundle says it lacks what follows; "
            "a cause it would show may be missing, and no finding is drawn from an "
            "object's absence",
            soft_wrap=True,
            highlight=False,
        )
        print_lines(console, "  missing: ", d.summary.incomplete)
    print_lines(console, "[yellow]warning:[/] ", d.summary.warnings)
    _render_one(d, console, paths=True)
    table = d.summary.upstreams
    if table:
        console.print()
        console.print(f"[bold]Services in the evidence[/] ({len(table)} upstreams):")
        print_lines(console, "  ", (upstream_line(row) for row in table))
    for other in d.others:
        console.print()
        console.rule(escape(f"also: {other.service}"))
        _render_one(other, console)


def _render_one(d: Diagnosis, console: Console, *, paths: bool = False) -> None:
    """One Service's diagnosis (``paths``: with the manifests' paths, shown once)."""
    if d.service:
        console.print(f"[bold]Service:[/] {escape(d.service)}", soft_wrap=True, highlight=False)
    primary = d.primary
    if primary:
        console.print(
            f"[bold]Verdict:[/] [{_STYLE[primary.verdict]}]{primary.cause.value}[/] "
            f"({primary.verdict.value}, score {primary.score:.2f}): "
            f"{_NAMES[primary.cause.value]}",
            soft_wrap=True,
        )
    else:
        console.print("[bold]Verdict:[/] no cause found", soft_wrap=True)
    console.print(escape(headline(d)), soft_wrap=True)
    s = d.summary
    if s.start is not None:
        console.print(
            f"[dim]{iso_utc(s.start)} → {iso_utc(s.end)}, {s.deletions} pod deletions, "
            f"replicas {s.replicas or '?'}[/]",
            soft_wrap=True,
        )
    fraction = s.nearest_fraction
    if fraction and fraction.consistent:
        console.print(fraction_line(fraction), soft_wrap=True)
    for reading in s.loads:
        console.print(
            f"load generator: {escape(load_line(reading))}", soft_wrap=True, highlight=False
        )
    for a in d.causes:
        console.print()
        console.print(
            f"[{_STYLE[a.verdict]}]{a.cause.value:<8} {a.verdict.value:<9} "
            f"{a.score:.2f}[/]  {_NAMES[a.cause.value]}",
            soft_wrap=True,
        )
        print_lines(console, "  • ", a.evidence)
        if a.verdict is not Verdict.UNLIKELY:
            print_lines(console, "  [green]fix:[/] ", (step_text(fix) for fix in a.fixes))
    if paths:
        _render_paths(d, console)
    _render_rollouts(d, console)
    if d.next_steps:
        console.print()
        console.print("[bold]Next:[/]")
        print_lines(console, "  - ", d.next_steps)
    console.print()
    console.print(
        "[dim]read: " + "; ".join(_source_text(src) for src in s.sources) + "[/]",
        soft_wrap=True,
        highlight=False,
    )
    print_lines(console, "[yellow]skipped:[/] ", s.skipped_inputs)


def _render_paths(d: Diagnosis, console: Console) -> None:
    """The paths of the manifests' workloads that hold more than the datapath, the leg the
    measured window is compared with named on its path."""
    shown = [w for w in d.paths if w.beyond_datapath]
    if not shown:
        return
    console.print()
    console.print("[bold]Path[/] (edge → pod, from the manifests):")
    for w in shown:
        console.print(f"  {escape(str(w.workload))}", soft_wrap=True, highlight=False)
        print_lines(console, "    ", path_lines(w, COMPARED))


ROLLOUTS_SHOWN = 10


def _render_rollouts(d: Diagnosis, console: Console) -> None:
    """The rollouts (from metrics): all of a few, else the ten with the most excess."""
    if not d.rollouts:
        return
    rows = d.rollouts
    if len(rows) > ROLLOUTS_SHOWN:
        rows = tuple(sorted(rows, key=lambda r: r.expected_failures - r.failures)[:ROLLOUTS_SHOWN])
    failed = sum(r.failures for r in d.rollouts)
    expected = sum(r.expected_failures for r in d.rollouts)
    console.print()
    console.print(
        f"[bold]Rollouts[/] ({len(d.rollouts)}; {failed} failures where the baseline "
        f"predicts {expected:.0f})"
        + (f", the {len(rows)} with the most excess:" if len(rows) < len(d.rollouts) else ":"),
        soft_wrap=True,
    )
    for r in rows:
        console.print(
            f"  {rollout_line(r)}"
            + (f", window {r.window_seconds:g} s" if r.window_seconds is not None else ""),
            soft_wrap=True,
            highlight=False,
        )


def _source_text(src: SourceSummary) -> str:
    span = f", {iso_utc(src.start)} → {iso_utc(src.end)}" if src.start is not None else ""
    note = f"; {src.note}" if src.note else ""
    return f"{src.path} ({src.format}, {src.rows} rows{span}{note})"


# the time axis' unit: the first whose count over the span reaches the last number
_TIME_UNITS = (
    ("days", 86400.0, 2),
    ("hours", 3600.0, 2),
    ("minutes", 60.0, 30),
    ("seconds", 1.0, 0),
)


def plot_timeline(d: Diagnosis, out: Path | io.BytesIO, fmt: str = "png") -> None:
    """Failures per second overlaid with pod deletions, creations, exits and endpoint
    changes; the time axis covers the requests (events outside them are left out) and the
    legend sits below the axes, off the data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = d.timeline
    seconds = t.second
    times = [e.ts for e in t.events] + [m.ts for m in t.endpoints]
    origin = seconds[0] if seconds else min(times, default=0.0)
    last = seconds[-1] + t.step if seconds else max(times, default=origin + 1.0)
    unit, scale = next(
        (name, size) for name, size, least in _TIME_UNITS if (last - origin) / size >= least
    )
    per = "second" if t.step == 1 else f"{t.step:g} s"
    fig, ax = plt.subplots(figsize=(11, 4.2), dpi=110)
    x = [(s - origin) / scale for s in seconds]
    if t.step == 1:
        ax.bar(x, t.failures, width=1.0, align="edge", color="#c0392b", label=f"failures / {per}")
    else:  # a metrics grid: contiguous steps, often thousands of them
        edges = [*x, (seconds[-1] + t.step - origin) / scale] if x else [0.0]
        ax.stairs(t.failures, edges, fill=True, color="#c0392b", label=f"failures / {per}")
    ax.set_xlabel(f"{unit} since {iso_utc(origin)}")
    ax.set_ylabel(f"failures per {per}")
    ax.set_xlim(0.0, max((last - origin) / scale, 1.0 / scale))
    twin = ax.twinx()
    twin.plot(x, t.requests, color="#7f8c8d", linewidth=0.8, label=f"requests / {per}")
    twin.set_ylabel(f"requests per {per}")
    twin.set_ylim(bottom=0)
    styles = {
        EventKind.DELETE: ("#2c3e50", "-"),
        EventKind.CREATE: ("#27ae60", "--"),
        EventKind.EXIT: ("#8e44ad", ":"),
    }
    seen: set[object] = set()

    def line(ts: float, key: object, label: str, **style: Any) -> None:
        if origin <= ts <= last:
            ax.axvline((ts - origin) / scale, label=None if key in seen else label, **style)
            seen.add(key)

    for event in t.events:
        if event.kind in styles:
            color, dash = styles[event.kind]
            line(event.ts, event.kind, f"pod {event.kind.value}", color=color, linestyle=dash,
                 linewidth=0.9)  # fmt: skip
    for mark in t.endpoints:
        if mark.state is not EndpointState.READY:
            line(mark.ts, EndpointState, "endpoint not ready / removed", color="#e67e22",
                 linewidth=0.6, alpha=0.6)  # fmt: skip
    handles, labels = ax.get_legend_handles_labels()
    twin_handles, twin_labels = twin.get_legend_handles_labels()
    fig.legend(
        handles + twin_handles,
        labels + twin_labels,
        loc="lower center",
        ncol=min(6, len(labels) + len(twin_labels)),
        fontsize=8,
        frameon=False,
    )
    primary = d.primary
    ax.set_title(
        f"{d.summary.errors} of {d.summary.requests} requests failed; "
        + (f"verdict: {primary.cause.value}" if primary else "no cause found")
    )
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(out, format=fmt)
    plt.close(fig)
