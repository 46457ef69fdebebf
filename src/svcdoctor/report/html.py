"""One self-contained HTML page for every command: the verdict first, the pictures (inline,
each with alt text stating the finding), the evidence per cause, the fix as copyable YAML,
the next steps, the sources read and their time spans.

Offline (no CDN, no external fonts), prints well (``@media print``), readable in a
dark-mode browser. The only script is a small inline copy button that degrades to a
selectable ``<pre>`` when scripts are off. The page is a pure function of a :class:`Page`;
the ``*_page`` functions build one from each command's typed result.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

from svcdoctor.errors import SvcdoctorError
from svcdoctor.model import Cause, Diagnosis, SourceSummary, Verdict, iso_utc
from svcdoctor.model.diagnosis import FixStep
from svcdoctor.model.hops import Hop, HopKind
from svcdoctor.model.path import Path as RoutePath
from svcdoctor.model.pathreport import WorkloadPaths
from svcdoctor.report.backends import backends_alt, plot_backends
from svcdoctor.report.diagnosis import (
    COMPARED,
    cause_name,
    fraction_line,
    headline,
    plot_timeline,
    rollout_line,
    upstream_line,
)
from svcdoctor.report.diagnosis import render_json as diagnosis_json
from svcdoctor.report.fixes import patch_text
from svcdoctor.report.lanes import lanes_alt, plot_before_after, plot_lanes
from svcdoctor.report.simulation import (
    describe,
    recommendation_yaml,
    render_recommendation_json,
    warnings,
)
from svcdoctor.report.simulation import render_json as simulation_json
from svcdoctor.report.text import COVERS
from svcdoctor.simulate.engine import CAUSE_OF

if TYPE_CHECKING:
    from svcdoctor.simulate import Recommendation, Simulation


class ImageType(StrEnum):
    """How a picture is encoded (its MIME subtype follows)."""

    SVG = "svg"
    PNG = "png"

    @property
    def mime(self) -> str:
        return "image/svg+xml" if self is ImageType.SVG else "image/png"


class Tone(StrEnum):
    """How the verdict reads: a failure found, a doubt, all clear, or nothing to say."""

    BAD = "bad"
    WARN = "warn"
    GOOD = "good"
    NONE = "none"


class PlotTypeError(SvcdoctorError):
    """A picture asked for in a file type other than PNG or SVG."""


def image_type(path: Path) -> ImageType:
    """The picture's type from its file name: ``.svg`` or ``.png`` (any case), else an error."""
    suffix = path.suffix.lower()
    if suffix == ".svg":
        return ImageType.SVG
    if suffix == ".png":
        return ImageType.PNG
    raise PlotTypeError(
        f"{path}: a picture is written as PNG or SVG: give a name ending in .png or .svg"
    )


@dataclass(frozen=True, slots=True)
class Picture:
    """One image of the page: its bytes, its type and the alt text that states the finding."""

    data: bytes
    alt: str
    kind: ImageType = ImageType.SVG
    caption: str = ""


@dataclass(frozen=True, slots=True)
class Fix:
    """A fix: a sentence, with the YAML to apply when there is one (shown copyable)."""

    title: str
    yaml: str | None = None


@dataclass(frozen=True, slots=True)
class Section:
    """One cause (or one part of a result) with the lines that support it."""

    title: str
    tone: Tone
    summary: str = ""
    evidence: tuple[str, ...] = ()
    fixes: tuple[Fix, ...] = ()


@dataclass(frozen=True, slots=True)
class Input:
    """Something read (or simulated) for the page, with its time span already formatted."""

    path: str
    what: str
    rows: int | None = None
    span: str = ""
    note: str = ""


@dataclass(frozen=True, slots=True)
class Page:
    """What a report says, in the order it is shown."""

    title: str  # the command: "svcdoctor diagnose"
    verdict: str
    tone: Tone
    headline: str = ""
    facts: tuple[str, ...] = ()
    pictures: tuple[Picture, ...] = ()
    findings: tuple[Section, ...] = ()
    steps: tuple[str, ...] = ()
    inputs: tuple[Input, ...] = ()
    notes: tuple[str, ...] = ()
    raw: str | None = None  # the command's JSON, folded at the end
    paths: tuple[WorkloadPaths, ...] = ()  # drawn as rows of hops, the covered leg marked
    covers: str = COVERS  # what the covered leg is: "the preStop advice covers"


def figure(
    plot: Callable[[io.BytesIO, str], object], alt: str, kind: ImageType = ImageType.SVG
) -> Picture:
    """A picture drawn by a ``plot_*(out, fmt)`` function into memory."""
    buffer = io.BytesIO()
    plot(buffer, kind.value)
    return Picture(buffer.getvalue(), alt, kind)


# ---------------------------------------------------------------- the page

_CSS = """
:root{color-scheme:light dark;--bg:#fff;--fg:#1d1f23;--muted:#5d6470;--line:#d8dce3;
--card:#f5f6f8;--bad:#b42318;--warn:#b54708;--good:#067647;--none:#5d6470;--code:#f0f2f5}
@media (prefers-color-scheme:dark){:root{--bg:#15171b;--fg:#e7e9ee;--muted:#a3aab6;
--line:#353a44;--card:#1e2127;--bad:#f97066;--warn:#fdb022;--good:#47cd89;--none:#a3aab6;
--code:#23272f}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:16px/1.5 system-ui,-apple-system,
"Segoe UI",Roboto,sans-serif}
main{max-width:72rem;margin:0 auto;padding:1.25rem 1.5rem 3rem}
header.verdict{border-left:6px solid var(--none);padding:.25rem 0 .25rem 1rem;margin:0 0 1.25rem}
header.bad{border-color:var(--bad)} header.warn{border-color:var(--warn)}
header.good{border-color:var(--good)}
.kicker{margin:0;color:var(--muted);font-size:.85rem;letter-spacing:.02em}
h1{margin:.1rem 0 .35rem;font-size:1.7rem;line-height:1.25}
.bad h1{color:var(--bad)} .warn h1{color:var(--warn)} .good h1{color:var(--good)}
.headline{margin:.2rem 0;font-size:1.05rem}
ul.facts{margin:.3rem 0 0;padding-left:1.1rem;color:var(--muted)}
h2{font-size:1.2rem;margin:1.75rem 0 .5rem;border-bottom:1px solid var(--line);padding-bottom:.2rem}
h3{font-size:1rem;margin:.9rem 0 .3rem}
figure{margin:0 0 1.25rem}
figure img{display:block;width:100%;height:auto;background:#fff;border:1px solid var(--line);
border-radius:6px;padding:.4rem}
figcaption{color:var(--muted);font-size:.9rem;margin-top:.3rem}
section.finding{border-left:4px solid var(--line);padding:.1rem 0 .1rem 1rem;margin:1rem 0}
section.bad{border-color:var(--bad)} section.warn{border-color:var(--warn)}
section.good{border-color:var(--good)}
section.finding p.summary{margin:.1rem 0;color:var(--muted)}
.fix{margin:.5rem 0}
.yaml{position:relative;background:var(--code);border:1px solid var(--line);border-radius:6px}
.yaml pre{margin:0;padding:.7rem .9rem;overflow-x:auto;font:.85rem/1.45 ui-monospace,
"SFMono-Regular",Menlo,Consolas,monospace;user-select:all;-webkit-user-select:all}
button.copy{position:absolute;top:.4rem;right:.4rem;font:inherit;font-size:.8rem;
padding:.15rem .6rem;border:1px solid var(--line);border-radius:4px;background:var(--bg);
color:var(--fg);cursor:pointer}
table{border-collapse:collapse;width:100%;font-size:.9rem}
th,td{text-align:left;padding:.3rem .5rem;border-bottom:1px solid var(--line);vertical-align:top}
td.num{text-align:right;font-variant-numeric:tabular-nums}
code,.path{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.85rem;word-break:break-all}
details pre{white-space:pre-wrap;font-size:.8rem}
.notes li{color:var(--warn)}
ol.hops{display:flex;flex-wrap:wrap;align-items:stretch;gap:.3rem 0;list-style:none;margin:.4rem 0;
padding:0}
ol.hops li{display:flex;align-items:center}
ol.hops li+li::before{content:"→";padding:0 .45rem;color:var(--muted)}
.hop{border:1px solid var(--line);border-radius:6px;background:var(--card);padding:.25rem .6rem;
min-width:6.5rem}
.hop b{display:block;font-size:.9rem}
.hop span{display:block;color:var(--muted);font-size:.8rem;font-variant-numeric:tabular-nums}
.hop.covered{border:2px solid var(--warn);background:color-mix(in srgb,var(--warn) 12%,var(--card))}
.hop.covered span{color:var(--fg)}
.hop.pod{min-width:0;font-weight:600}
p.covers{margin:.2rem 0 .8rem;color:var(--muted);font-size:.9rem}
@media print{body{background:#fff;color:#000;font-size:11pt}main{max-width:none;padding:0}
button.copy{display:none}figure,section.finding,.yaml,ol.hops{break-inside:avoid}
figure img{border:none;padding:0}details{display:none}
:root{--fg:#000;--muted:#333;--line:#999;--code:#fff;--bg:#fff}}
"""

# the copy buttons appear only when scripts run; without them the <pre> stays selectable
_SCRIPT = """
for (const button of document.querySelectorAll("button.copy")) {
  const pre = button.parentElement.querySelector("pre");
  button.hidden = false;
  const selectIt = () => {
    const range = document.createRange();
    range.selectNodeContents(pre);
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
  };
  button.addEventListener("click", () => {
    selectIt();  // selected first: Ctrl+C works whatever the clipboard allows
    let copied = false;
    try { copied = document.execCommand("copy"); } catch (e) { copied = false; }
    button.textContent = copied ? "Copied" : "Selected: press Ctrl+C";
    if (!copied && navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(pre.textContent)
        .then(() => { button.textContent = "Copied"; }, () => {});
    }
  });
}
"""


def _items(lines: Iterable[str], cls: str = "") -> str:
    body = "".join(f"<li>{escape(line)}</li>" for line in lines)
    return f"<ul{f' class={cls!r}' if cls else ''}>{body}</ul>" if body else ""


def _fix(f: Fix) -> str:
    if f.yaml is None:
        return f"<div class='fix'><p>{escape(f.title)}</p></div>"
    return (
        f"<div class='fix'><p>{escape(f.title)}</p><div class='yaml'>"
        "<button type='button' class='copy' hidden>Copy</button>"
        f"<pre>{escape(f.yaml.rstrip())}</pre></div></div>"
    )


def _picture(p: Picture) -> str:
    data = base64.b64encode(p.data).decode()
    caption = f"<figcaption>{escape(p.caption or p.alt)}</figcaption>"
    return (
        f"<figure><img alt='{escape(p.alt, quote=True)}' src='data:{p.kind.mime};base64,{data}'>"
        f"{caption}</figure>"
    )


def _section(f: Section) -> str:
    fixes = "".join(_fix(x) for x in f.fixes)
    return (
        f"<section class='finding {f.tone.value}'><h3>{escape(f.title)}</h3>"
        + (f"<p class='summary'>{escape(f.summary)}</p>" if f.summary else "")
        + _items(f.evidence)
        + (f"<h3>Fix</h3>{fixes}" if fixes else "")
        + "</section>"
    )


def _inputs(inputs: Sequence[Input]) -> str:
    rows = "".join(
        f"<tr><td class='path'>{escape(i.path)}</td><td>{escape(i.what)}</td>"
        f"<td class='num'>{'' if i.rows is None else f'{i.rows:,}'}</td>"
        f"<td>{escape(i.span)}</td><td>{escape(i.note)}</td></tr>"
        for i in inputs
    )
    return (
        "<table><thead><tr><th>input</th><th>format</th><th>rows</th><th>time span</th>"
        f"<th>note</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _hop(hop: Hop, covered: bool) -> str:
    if hop.kind is HopKind.SIDECAR:
        leg = f"drains {hop.drain.seconds:g} s" if hop.drain else "drain unknown"
        source = hop.drain.source if hop.drain else ""
    else:
        leg = f"leg {hop.leg.seconds:g} s"
        source = hop.leg.source
        if hop.kind is HopKind.LOAD_BALANCER:
            leg = f"{'ip' if hop.ip_targets else 'instance'} · {leg}"
    via = f" ({hop.via})" if hop.via else ""
    return (
        f"<li><div class='hop {hop.kind.value}{' covered' if covered else ''}' "
        f"title='{escape(hop.label + via + ': ' + source, quote=True)}'>"
        f"<b>{escape(hop.label)}</b><span>{escape(leg)}</span></div></li>"
    )


def _path_row(shown: WorkloadPaths, path: RoutePath) -> str:
    hops = "".join(_hop(h, shown.hop is not None and h == shown.hop) for h in path.hops)
    alt = escape(f"path to {path.service}: {path.text()}", quote=True)
    return f"<ol class='hops' aria-label='{alt}'>{hops}<li><div class='hop pod'>pod</div></li></ol>"


def _paths(page: Page) -> str:
    """Each workload's paths as rows of hops (edge first), the covered leg highlighted."""
    out = []
    for shown in page.paths:
        rows = "".join(_path_row(shown, p) for p in shown.paths)
        out.append(
            f"<section class='path'><h3>{escape(str(shown.workload))}</h3>{rows}"
            f"<p class='covers'>{escape(page.covers[:1].upper() + page.covers[1:])} "
            f"{escape(shown.cover_text())}.</p></section>"
        )
    return "<h2>Path</h2>" + "".join(out) if out else ""


def render_page(page: Page) -> str:
    """The page as one HTML document (no external resources)."""
    parts = [
        f"<header class='verdict {page.tone.value}' id='verdict'>"
        f"<p class='kicker'>{escape(page.title)}</p><h1>{escape(page.verdict)}</h1>"
        + (f"<p class='headline'>{escape(page.headline)}</p>" if page.headline else "")
        + _items(page.facts, "facts")
        + "</header>"
    ]
    if page.notes:
        parts.append(_items(page.notes, "notes"))
    parts.extend(_picture(p) for p in page.pictures)
    if page.findings:
        parts.append("<h2>Evidence</h2>" + "".join(_section(f) for f in page.findings))
    if page.paths:
        parts.append(_paths(page))
    if page.steps:
        parts.append("<h2>Next steps</h2>" + _items(page.steps))
    if page.inputs:
        parts.append("<h2>Sources read</h2>" + _inputs(page.inputs))
    if page.raw is not None:
        parts.append(
            f"<details><summary>The full result (JSON)</summary><pre>{escape(page.raw)}</pre>"
            "</details>"
        )
    copyable = any(f.yaml is not None for section in page.findings for f in section.fixes)
    script = f"<script>{_SCRIPT}</script>" if copyable else ""
    return (
        "<!doctype html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        "<meta name='color-scheme' content='light dark'>"
        f"<title>{escape(page.title)}: {escape(page.verdict)}</title><style>{_CSS}</style>"
        f"</head><body><main>{''.join(parts)}</main>{script}</body></html>\n"
    )


# ---------------------------------------------------------------- diagnosis

_TONE = {Verdict.LIKELY: Tone.BAD, Verdict.POSSIBLE: Tone.WARN, Verdict.UNLIKELY: Tone.NONE}


def split_fix(step: FixStep) -> Fix:
    """A diagnosis' fix step: its sentence as the title, its patch (if any) as YAML."""
    if step.patch is None:
        return Fix(step.text)
    return Fix(step.text + ":", patch_text(step.patch))


def span_text(start: float | None, end: float | None) -> str:
    """``start → end (N s)`` in UTC, or empty when unknown."""
    if start is None or end is None:
        return ""
    return f"{iso_utc(start)} → {iso_utc(end)} ({end - start:,.1f} s)"


def source_input(src: SourceSummary) -> Input:
    return Input(src.path, src.format, src.rows, span_text(src.start, src.end), src.note)


def diagnosis_verdict(d: Diagnosis) -> tuple[str, Tone]:
    """``Verdict: race (likely)`` and its tone; all clear when nothing failed."""
    primary = d.primary
    if primary is not None:
        return f"Verdict: {primary.cause.value} ({primary.verdict.value})", _TONE[primary.verdict]
    if d.summary.errors == 0 and not d.summary.error_log_failures and d.summary.requests:
        return "Verdict: no request failed", Tone.GOOD
    return "Verdict: no cause found", Tone.NONE


def _diagnosis_findings(d: Diagnosis) -> list[Section]:
    found = []
    for a in d.causes:
        fixes = () if a.verdict is Verdict.UNLIKELY else tuple(split_fix(f) for f in a.fixes)
        found.append(
            Section(
                f"{a.cause.value}: {a.verdict.value} (score {a.score:.2f})",
                _TONE[a.verdict],
                cause_name(a.cause.value),
                a.evidence,
                fixes,
            )
        )
    if d.rollouts:
        lines = tuple(rollout_line(r) for r in d.rollouts)
        found.append(Section(f"Rollouts ({len(d.rollouts)})", Tone.NONE, "", lines))
    table = d.summary.upstreams
    if table:
        lines = tuple(upstream_line(row) for row in table)
        found.append(Section("Services in the evidence", Tone.NONE, "", lines))
    for other in d.others:
        verdict, tone = diagnosis_verdict(other)
        primary = other.primary
        found.append(
            Section(
                f"Also: {other.service}: {verdict}",
                tone,
                headline(other),
                primary.evidence if primary else (),
                tuple(split_fix(f) for f in primary.fixes) if primary else (),
            )
        )
    return found


def diagnosis_page(
    d: Diagnosis, pictures: Sequence[Picture] = (), title: str = "svcdoctor diagnose"
) -> Page:
    """The report of a diagnosis (``diagnose``, and the base of lab and rollout-test pages)."""
    verdict, tone = diagnosis_verdict(d)
    s = d.summary
    primary = d.primary
    facts = []
    if primary is not None:
        facts.append(f"{cause_name(primary.cause.value)} (score {primary.score:.2f})")
    if d.service:
        facts.append(f"Service: {d.service}")
    if s.start is not None:
        facts.append(
            f"{span_text(s.start, s.end)}; {s.deletions} pod deletions; replicas "
            f"{s.replicas or '?'}"
        )
    fraction = s.nearest_fraction
    if fraction and fraction.consistent:
        facts.append(fraction_line(fraction))
    return Page(
        title=title,
        verdict=verdict,
        tone=tone,
        headline=headline(d),
        facts=tuple(facts),
        pictures=tuple(pictures),
        findings=tuple(_diagnosis_findings(d)),
        steps=d.next_steps,
        inputs=tuple(source_input(src) for src in s.sources),
        notes=(
            *(f"INCOMPLETE evidence, missing: {m}" for m in s.incomplete),
            *s.warnings,
            *(f"skipped: {p}" for p in s.skipped_inputs),
        ),
        raw=diagnosis_json(d),
        paths=tuple(w for w in d.paths if w.beyond_datapath),
        covers=COMPARED,
    )


def diagnosis_pictures(d: Diagnosis) -> tuple[Picture, ...]:
    """The pictures of a diagnosis: per-pod lanes, and the failure rate per backend (and per
    client-backend pair) when the diagnosis carries them (a bad backend or connection reuse
    suspected, the evidence naming backends); the aggregated timeline when it has no lanes
    (no request rows: metrics, error logs only)."""
    lanes = d.lanes
    if lanes is None:
        return (timeline_picture(d),)
    pictures = [figure(lambda out, fmt: plot_lanes(lanes, out, fmt), lanes_alt(lanes))]
    breakdown = d.breakdown
    if breakdown is not None:
        drawn = figure(lambda out, fmt: plot_backends(breakdown, out, fmt), backends_alt(breakdown))
        primary = d.primary
        # the picture of the leading cause comes first
        first = primary is not None and primary.cause in (Cause.BACKEND, Cause.REUSE)
        pictures.insert(0 if first else 1, drawn)
    return tuple(pictures)


def diagnosis_plot(d: Diagnosis) -> Callable[[Path | io.BytesIO, str], None]:
    """What ``--plot`` draws for a diagnosis: the lanes, or the timeline without them."""
    lanes = d.lanes
    if lanes is None:
        return lambda out, fmt: plot_timeline(d, out, fmt)
    return lambda out, fmt: plot_lanes(lanes, out, fmt)


def render_html(d: Diagnosis, pictures: Sequence[Picture] | None = None) -> str:
    """One self-contained page of a diagnosis: the verdict, the pictures (the aggregated
    timeline when none are given), the evidence per cause with the fixes as copyable YAML,
    the next steps and the sources read."""
    shown = (timeline_picture(d),) if pictures is None else tuple(pictures)
    return render_page(diagnosis_page(d, shown))


def timeline_picture(d: Diagnosis) -> Picture:
    """The aggregated timeline (failures per second and pod events): what a diagnosis
    without per-request evidence (metrics) can draw."""
    s = d.summary
    primary = d.primary
    found = f"{primary.cause.value} ({primary.verdict.value})" if primary else "no cause found"
    deletions = f"{s.deletions} pod deletion{'' if s.deletions == 1 else 's'}"
    per = "second" if d.timeline.step == 1 else f"{d.timeline.step:g} s"
    alt = (
        f"Failures per {per} with pod deletions: {s.errors} of {s.requests} requests failed "
        f"around {deletions}; verdict {found}."
        if s.requests
        else f"No request log: {deletions} and no requests to line up with them; verdict {found}."
    )
    return figure(lambda out, fmt: plot_timeline(d, out, fmt), alt)


# ---------------------------------------------------------------- simulate


def simulation_alt(s: Simulation) -> str:
    """The simulated timeline's finding in words."""
    causes = sorted(s.mean_by_cause().items(), key=lambda kv: -kv[1])
    top = f"; most failures: {causes[0][0].value}" if causes and causes[0][1] > 0 else ""
    return (
        f"Simulated requests and failures over the window (run 1): {s.failed:,.1f} of "
        f"{s.requests:,.0f} requests per window failed ({s.failure_rate:.3%}) around "
        f"{len(s.timeline.deletions)} pod deletions{top}."
    )


def simulation_page(s: Simulation, pictures: Sequence[Picture] = ()) -> Page:
    """``simulate --html``: failed requests per window, by cause, and the scenario."""
    interval = s.interval()
    verdict = f"Simulated: {s.failed:,.1f} failed requests per window ({s.failure_rate:.3%})"
    facts = [
        f"of {s.requests:,.0f} requests per window, over {len(s.runs)} run(s)"
        + (f"; 95 % interval {interval[0]:,.1f}-{interval[1]:,.1f}" if interval else "")
    ]
    if s.rollout_failure_rate is not None:
        facts.append(f"during the rollout: {s.rollout_failure_rate:.3%} of requests failed")
    by_mech = s.mean_by_mechanism()
    findings = [
        Section(
            f"{cause.value}: {count:,.1f} failed per window",
            Tone.BAD,
            f"{count / s.failed:.0%} of the failures" if s.failed else "",
            tuple(
                f"{m.value}: {n:,.1f}" for m, n in by_mech.items() if n > 0 and CAUSE_OF[m] is cause
            ),
        )
        for cause, count in sorted(s.mean_by_cause().items(), key=lambda kv: -kv[1])
        if count > 0
    ]
    first = s.runs[0]
    if first.deletions:
        w = first.window
        findings.append(
            Section(
                "Race window (run 1)",
                Tone.NONE,
                "routed to a pod that had stopped accepting",
                (
                    f"p50 {w.p50:.2f} s · p99 {w.p99:.2f} s · max {w.max:.2f} s",
                    f"closed form: {first.expected_race:,.1f} failed new connections",
                ),
            )
        )
    p = s.params
    steps = (
        ("svcdoctor simulate recommend (same model options): the preStop and grace period "
         "that close the race",)
        if s.failed and p.rollout
        else ()
    )  # fmt: skip
    return Page(
        title="svcdoctor simulate",
        verdict=verdict,
        tone=Tone.BAD if s.failed else Tone.GOOD,
        headline=describe(p),
        facts=tuple(facts),
        pictures=tuple(pictures),
        findings=tuple(findings),
        steps=steps,
        inputs=(Input("model", "simulation", None, f"{p.duration:g} s window per run"),),
        notes=tuple(warnings(p)),
        raw=simulation_json(s),
    )


def recommendation_page(r: Recommendation, pictures: Sequence[Picture] = ()) -> Page:
    """``simulate recommend --html``: the preStop and grace to set, checked by simulation."""
    p = r.current.params
    met = "meets the target" if r.met else "does NOT meet the target"
    rows = []
    for label, s in (("now", r.current), ("recommended", r.checked)):
        rate = s.rollout_failure_rate
        failed = sum(x.rollout_failed for x in s.runs) / len(s.runs)
        rows.append(
            f"{label}: preStop {s.params.prestop:g} s, grace {s.params.grace:g} s: "
            f"{failed:,.1f} failed per rollout"
            + (f" ({rate:.3%} of its requests)" if rate is not None else "")
        )
    return Page(
        title="svcdoctor simulate recommend",
        verdict=f"preStop sleep {r.prestop_seconds} s, terminationGracePeriodSeconds "
        f"≥ {r.grace_seconds} s {met}",
        tone=Tone.GOOD if r.met else Tone.BAD,
        headline=f"target: at most {r.target:.3%} of the requests sent during a rollout fail "
        f"(≈{r.target * r.rollout_requests:,.1f} of {r.rollout_requests:,.0f})",
        facts=(
            f"for {describe(p)}",
            *(
                (f"your grace period, {p.grace:g} s, already covers it: keep it",)
                if r.grace_to_set > r.grace_seconds
                else ()
            ),
        ),
        pictures=tuple(pictures),
        findings=(
            Section(
                "Simulated rollouts",
                Tone.GOOD if r.met else Tone.BAD,
                f"predicted {r.predicted_failure_rate:.3%} (closed form)",
                tuple(rows),
                (Fix("Deployment fields (merge into your manifest):", recommendation_yaml(r)),),
            ),
        ),
        inputs=(Input("model", "simulation", None, f"{p.duration:g} s window per run"),),
        notes=(*r.reasons, *warnings(p)),
        raw=render_recommendation_json(r),
    )


# ---------------------------------------------------------------- lab


def lab_page(
    scenario: str,
    datapath: str,
    requests: int,
    failed: int,
    expected: str | None,
    d: Diagnosis,
    pictures: Sequence[Picture] = (),
    bundle: str = "",
) -> Page:
    """``lab run --html``: the run's counts and ground truth above its bundle's diagnosis."""
    page = diagnosis_page(d, pictures, f"svcdoctor lab run {scenario}")
    found = d.primary.cause.value if d.primary else None
    truth = f"ground truth: {expected or 'no cause'}; diagnosed: {found or 'no cause'}"
    return replace(
        page,
        headline=f"lab {scenario} ({datapath} datapath): {failed} of {requests} requests "
        f"failed. {page.headline}",
        facts=(truth, *page.facts, *((f"bundle: {bundle}",) if bundle else ())),
    )


@dataclass(frozen=True, slots=True)
class DemoRun:
    """One side of the demo: a lab run and its bundle's diagnosis."""

    scenario: str
    requests: int
    failed: int
    diagnosis: Diagnosis
    bundle: Path


def before_after_picture(before: DemoRun, after: DemoRun) -> Picture:
    """Both runs' per-pod lanes side by side, on the same scales."""
    first, second = before.diagnosis.lanes, after.diagnosis.lanes
    if first is None or second is None:  # a lab run always logs its requests
        raise ValueError("a demo run's bundle holds no request rows: no lanes to draw")
    alt = (
        f"Before the fix ({before.scenario}): {lanes_alt(first)} "
        f"After the fix ({after.scenario}): {lanes_alt(second)}"
    )
    return figure(lambda out, fmt: plot_before_after(first, second, out, fmt), alt)


def demo_page(before: DemoRun, after: DemoRun, fix: str, datapath: str = "") -> Page:
    """``lab demo``: the same rollout before and after the fix, side by side."""
    better = after.failed < before.failed or (after.failed == 0 == before.failed)
    findings = []
    for run, label in ((before, "before the fix"), (after, "after the fix")):
        verdict, tone = diagnosis_verdict(run.diagnosis)
        primary = run.diagnosis.primary
        fixes = tuple(split_fix(f) for f in primary.fixes) if primary and run is before else ()
        findings.append(
            Section(
                f"{run.scenario} ({label}): {run.failed} of {run.requests} failed; {verdict}",
                tone if run.failed else Tone.GOOD,
                "",
                primary.evidence if primary else (),
                fixes,
            )
        )
    inputs = [
        replace(source_input(src), note=f"{run.scenario}" + (f"; {src.note}" if src.note else ""))
        for run in (before, after)
        for src in run.diagnosis.summary.sources
    ]
    return Page(
        title="svcdoctor lab demo",
        verdict=f"Before the fix: {before.failed} failed requests; after: {after.failed}",
        tone=Tone.GOOD if better else Tone.BAD,
        headline="The same rolling update under load, twice"
        + (f" on the {datapath} datapath" if datapath else "")
        + f": first with a naive shutdown and no preStop, then with the fix ({fix}).",
        facts=(
            f"{before.scenario}: {before.failed} of {before.requests} requests failed",
            f"{after.scenario}: {after.failed} of {after.requests} requests failed",
        ),
        pictures=(before_after_picture(before, after),),
        findings=tuple(findings),
        steps=tuple(f"svcdoctor diagnose {run.bundle}" for run in (before, after)),
        inputs=tuple(inputs),
    )
