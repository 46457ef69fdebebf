"""Renderers of a diagnosis: text (verdict first), JSON, a timeline plot, and HTML."""

from __future__ import annotations

import base64
import html
import io
import json
import math
from dataclasses import fields, is_dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from svcdoctor.model import Diagnosis, EventKind, SourceSummary, Verdict, iso_utc
from svcdoctor.model.diagnosis import (
    BackendDetails,
    CauseDetails,
    ClientFailures,
    CounterValue,
    EndpointState,
    InfraDetails,
    NearestFraction,
    RaceDetails,
    ReuseDetails,
    Rollout,
    Summary,
)

_STYLE = {Verdict.LIKELY: "bold red", Verdict.POSSIBLE: "yellow", Verdict.UNLIKELY: "dim"}
_NAMES = {
    "race": "endpoint-removal race (pods stop serving before routing stops)",
    "backend": "one unhealthy backend",
    "reuse": "connection reuse defeats load balancing",
    "infra": "infrastructure (conntrack, SNAT, node)",
}


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
            "median_lag_seconds": w.median_lag_seconds,
            "baseline_failures_per_second": w.baseline_failures_per_second,
            "latency_p999_seconds": r.latency_p999_seconds,
            "recommended_prestop_seconds": r.recommended_prestop_seconds,
        }
    if r.recommended_grace_seconds is not None:
        out["recommended_grace_seconds"] = r.recommended_grace_seconds
    if w is not None:
        out["remedy"] = _plain(r.remedy)
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


def details_to_dict(details: CauseDetails | None) -> dict[str, Any]:
    """The ``details`` object of one cause in the JSON report (``{}`` when none)."""
    if isinstance(details, RaceDetails):
        return _race(details)
    if isinstance(details, BackendDetails):
        return _backend(details)
    if isinstance(details, InfraDetails):
        return _infra(details)
    if isinstance(details, ReuseDetails):
        plain: dict[str, Any] = _plain(details)
        return plain
    return {}


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
        "warnings": list(s.warnings),
        "floor_rate": s.floor_rate,
    }
    if s.upstreams is not None:
        out["upstreams"] = _plain(s.upstreams)
    return out


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
    """The JSON document; ``rollouts`` only when the diagnosis has them (from metrics)."""
    primary = d.primary
    rollouts = {"rollouts": [_rollout(r) for r in d.rollouts]} if d.rollouts else {}
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
                    "fixes": list(a.fixes),
                    "details": details_to_dict(a.details),
                    "collect": list(a.collect),
                }
                for a in d.causes
            ],
            "next_steps": list(d.next_steps),
            "service": d.service,
            "other_services": [diagnosis_to_dict(o) for o in d.others],
            **rollouts,
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
    else:
        part = "no request log"
    if s.masked_by_retries:
        part += (
            f"; {s.masked_by_retries} failed upstream attempts were retried by the proxy "
            "(hidden from the client where the retry succeeded)"
        )
    return part


def render_text(d: Diagnosis, console: Console) -> None:
    for warning in d.summary.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True, highlight=False)
    _render_one(d, console)
    table = d.summary.upstreams
    if table:
        console.print()
        console.print(f"[bold]Services in the evidence[/] ({len(table)} upstreams):")
        for row in table:
            rate = row.error_rate
            cause = row.cause.value if row.cause else "no cause"
            console.print(
                f"  {escape(str(row.upstream))}: {row.errors} of {row.requests} failed"
                + (f" ({rate:.2%})" if rate is not None else "")
                + f", {cause}",
                soft_wrap=True,
                highlight=False,
            )
    for other in d.others:
        console.print()
        console.rule(escape(f"also: {other.service}"))
        _render_one(other, console)


def _render_one(d: Diagnosis, console: Console) -> None:
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
        console.print(
            f"the error rate is consistent with {fraction.text} of the "
            f"backends failing (binomial p = {fraction.p_value:.2g})",
            soft_wrap=True,
        )
    for a in d.causes:
        console.print()
        console.print(
            f"[{_STYLE[a.verdict]}]{a.cause.value:<8} {a.verdict.value:<9} "
            f"{a.score:.2f}[/]  {_NAMES[a.cause.value]}",
            soft_wrap=True,
        )
        for line in a.evidence:
            console.print(f"  • {escape(line)}", soft_wrap=True, highlight=False)
        if a.verdict is not Verdict.UNLIKELY:
            for fix in a.fixes:
                console.print(f"  [green]fix:[/] {escape(fix)}", soft_wrap=True, highlight=False)
    _render_rollouts(d, console)
    if d.next_steps:
        console.print()
        console.print("[bold]Next:[/]")
        for step in d.next_steps:
            console.print(f"  - {escape(step)}", soft_wrap=True, highlight=False)
    console.print()
    console.print(
        "[dim]read: " + "; ".join(_source_text(src) for src in s.sources) + "[/]",
        soft_wrap=True,
        highlight=False,
    )
    for problem in s.skipped_inputs:
        console.print(f"[yellow]skipped:[/] {escape(problem)}", soft_wrap=True, highlight=False)


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
            f"  {iso_utc(r.start)} {', '.join(r.workloads) or '?'}: {r.deletions} deletions, "
            f"{r.failures} of {r.requests} requests failed (baseline predicts "
            f"{r.expected_failures:g})"
            + (f", window {r.window_seconds:g} s" if r.window_seconds is not None else ""),
            soft_wrap=True,
            highlight=False,
        )


def _source_text(src: SourceSummary) -> str:
    span = f", {iso_utc(src.start)} → {iso_utc(src.end)}" if src.start is not None else ""
    note = f"; {src.note}" if src.note else ""
    return f"{src.path} ({src.format}, {src.rows} rows{span}{note})"


def plot_timeline(d: Diagnosis, out: Path | io.BytesIO, fmt: str = "png") -> None:
    """Failures per second overlaid with pod deletions, creations, exits and endpoint changes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = d.timeline
    seconds = t.second
    origin = seconds[0] if seconds else min((e.ts for e in t.events), default=0.0)
    fig, ax = plt.subplots(figsize=(11, 3.6), dpi=110)
    x = [s - origin for s in seconds]
    ax.bar(x, t.failures, width=1.0, color="#c0392b", label="failures / s")
    ax.set_xlabel(f"seconds since {iso_utc(d.summary.start) or 'start'}")
    ax.set_ylabel("failures per second")
    twin = ax.twinx()
    twin.plot(x, t.requests, color="#7f8c8d", linewidth=0.8, label="requests / s")
    twin.set_ylabel("requests per second")
    styles = {
        EventKind.DELETE: ("#2c3e50", "-"),
        EventKind.CREATE: ("#27ae60", "--"),
        EventKind.EXIT: ("#8e44ad", ":"),
    }
    seen: set[EventKind] = set()
    for event in t.events:
        if event.kind in styles:
            color, dash = styles[event.kind]
            ax.axvline(
                event.ts - origin,
                color=color,
                linestyle=dash,
                linewidth=0.9,
                label=f"pod {event.kind.value}" if event.kind not in seen else None,
            )
            seen.add(event.kind)
    for i, mark in enumerate(t.endpoints):
        if mark.state is not EndpointState.READY:
            ax.axvline(
                mark.ts - origin,
                color="#e67e22",
                linewidth=0.6,
                alpha=0.6,
                label="endpoint not ready/removed" if i == 0 else None,
            )
    handles = ax.get_legend_handles_labels()
    twin_handles = twin.get_legend_handles_labels()
    ax.legend(
        handles[0] + twin_handles[0], handles[1] + twin_handles[1], loc="upper right", fontsize=8
    )
    primary = d.primary
    ax.set_title("svcdoctor timeline — " + (primary.cause.value if primary else "no cause"))
    fig.tight_layout()
    fig.savefig(out, format=fmt)
    plt.close(fig)


def render_html(d: Diagnosis) -> str:
    """One self-contained page: verdict, evidence, fixes and the timeline (inline SVG)."""
    buffer = io.BytesIO()
    plot_timeline(d, buffer, "svg")
    svg = base64.b64encode(buffer.getvalue()).decode()
    primary = d.primary
    rows = []
    for a in d.causes:
        items = "".join(f"<li>{html.escape(e)}</li>" for e in a.evidence)
        fixes = "".join(f"<li><pre>{html.escape(f)}</pre></li>" for f in a.fixes)
        rows.append(
            f"<section class='{a.verdict.value}'><h2>{a.cause.value} — {a.verdict.value} "
            f"({a.score:.2f})</h2><p>{html.escape(_NAMES[a.cause.value])}</p><ul>{items}</ul>"
            + (
                f"<h3>Fix</h3><ul>{fixes}</ul>"
                if fixes and a.verdict is not Verdict.UNLIKELY
                else ""
            )
            + "</section>"
        )
    steps = "".join(f"<li>{html.escape(s)}</li>" for s in d.next_steps)
    verdict = f"{primary.cause.value} ({primary.verdict.value})" if primary else "no cause found"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>svcdoctor diagnosis</title>
<style>body{{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;color:#222}}
section{{border-left:4px solid #ccc;padding:0 1rem;margin:1rem 0}} .likely{{border-color:#c0392b}}
.possible{{border-color:#e67e22}} pre{{white-space:pre-wrap;margin:0}} img{{width:100%}}</style>
</head><body><h1>Verdict: {html.escape(verdict)}</h1>
<p>{html.escape(headline(d))}</p>
<img alt="timeline" src="data:image/svg+xml;base64,{svg}">
{"".join(rows)}
<h2>Next steps</h2><ul>{steps}</ul>
<details><summary>Summary (JSON)</summary><pre>{html.escape(render_json(d))}</pre></details>
</body></html>
"""
