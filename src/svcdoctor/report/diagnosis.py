"""Renderers of a diagnosis: text (verdict first), JSON, a timeline plot, and HTML."""

from __future__ import annotations

import base64
import html
import io
import json
import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from svcdoctor.model import Diagnosis, Verdict

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


def diagnosis_to_dict(d: Diagnosis) -> dict[str, Any]:
    primary = d.primary
    body: dict[str, Any] = _clean(
        {
            "summary": d.summary,
            "primary_cause": primary.cause.value if primary else None,
            "causes": [
                {
                    "cause": a.cause.value,
                    "score": a.score,
                    "verdict": a.verdict.value,
                    "evidence": list(a.evidence),
                    "fixes": list(a.fixes),
                    "details": a.details,
                    "collect": list(a.collect),
                }
                for a in d.causes
            ],
            "next_steps": list(d.next_steps),
            "service": d.service,
            "other_services": [diagnosis_to_dict(o) for o in d.others],
        }
    )
    return body


def render_json(d: Diagnosis) -> str:
    return json.dumps(diagnosis_to_dict(d), indent=2, default=str)


def headline(d: Diagnosis) -> str:
    s = d.summary
    rate = s.get("error_rate")
    ci = s.get("error_rate_ci95")
    logged = s.get("error_log_failures", 0)
    if rate is not None and ci:
        part = (
            f"{s['errors']} of {s['requests']} requests failed ({rate:.2%}, 95% CI "
            f"{ci[0]:.2%}-{ci[1]:.2%})"
        )
        if logged:
            part += f"; {logged} more failures in the error log matched no request"
    elif logged:
        part = f"no request log; {logged} failures in the proxy's error log (no error rate)"
    else:
        part = "no request log"
    if s.get("masked_by_retries"):
        part += (
            f"; {s['masked_by_retries']} failed upstream attempts were retried by the proxy "
            "(hidden from the client where the retry succeeded)"
        )
    return part


def render_text(d: Diagnosis, console: Console) -> None:
    for warning in d.summary.get("warnings", []):
        console.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True, highlight=False)
    _render_one(d, console)
    table = d.summary.get("upstreams")
    if table:
        console.print()
        console.print(f"[bold]Services in the evidence[/] ({len(table)} upstreams):")
        for row in table:
            rate = row["error_rate"]
            cause = row["cause"] or "no cause"
            console.print(
                f"  {escape(str(row['upstream']))}: {row['errors']} of {row['requests']} failed"
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
    if s.get("start"):
        console.print(
            f"[dim]{s['start']} → {s['end']}, {s['deletions']} pod deletions, "
            f"replicas {s.get('replicas') or '?'}[/]",
            soft_wrap=True,
        )
    fraction = s.get("nearest_fraction")
    if fraction and fraction["consistent"]:
        console.print(
            f"the error rate is consistent with {fraction['fraction']} of the "
            f"backends failing (binomial p = {fraction['p_value']:.2g})",
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
    if d.next_steps:
        console.print()
        console.print("[bold]Next:[/]")
        for step in d.next_steps:
            console.print(f"  - {escape(step)}", soft_wrap=True, highlight=False)
    console.print()
    console.print(
        "[dim]read: " + "; ".join(_source_text(src) for src in s["sources"]) + "[/]",
        soft_wrap=True,
        highlight=False,
    )
    for problem in s.get("skipped_inputs", []):
        console.print(f"[yellow]skipped:[/] {escape(problem)}", soft_wrap=True, highlight=False)


def _source_text(src: dict[str, Any]) -> str:
    span = f", {src['start']} → {src['end']}" if src.get("start") else ""
    note = f"; {src['note']}" if src.get("note") else ""
    return f"{src['path']} ({src['format']}, {src['rows']} rows{span}{note})"


def plot_timeline(d: Diagnosis, out: Path | io.BytesIO, fmt: str = "png") -> None:
    """Failures per second overlaid with pod deletions, creations, exits and endpoint changes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = d.timeline
    seconds = t.get("second", [])
    origin = seconds[0] if seconds else min((e[0] for e in t.get("events", [])), default=0.0)
    fig, ax = plt.subplots(figsize=(11, 3.6), dpi=110)
    x = [s - origin for s in seconds]
    ax.bar(x, t.get("failures", []), width=1.0, color="#c0392b", label="failures / s")
    ax.set_xlabel(f"seconds since {d.summary.get('start') or 'start'}")
    ax.set_ylabel("failures per second")
    twin = ax.twinx()
    twin.plot(x, t.get("requests", []), color="#7f8c8d", linewidth=0.8, label="requests / s")
    twin.set_ylabel("requests per second")
    styles = {"delete": ("#2c3e50", "-"), "create": ("#27ae60", "--"), "exit": ("#8e44ad", ":")}
    seen: set[str] = set()
    for ts, kind, _pod in t.get("events", []):
        if kind in styles:
            color, dash = styles[kind]
            ax.axvline(
                ts - origin,
                color=color,
                linestyle=dash,
                linewidth=0.9,
                label=f"pod {kind}" if kind not in seen else None,
            )
            seen.add(kind)
    for i, (ts, _address, state) in enumerate(t.get("endpoints", [])):
        if state != "ready":
            ax.axvline(
                ts - origin,
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
