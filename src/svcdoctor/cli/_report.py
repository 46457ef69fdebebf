"""The HTML report and ``--plot`` picture options every command shares, and the pages of
the live commands (probe, rollout-test), whose results the report layer cannot import."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from svcdoctor.cli._params import F, OutputFile, option

if TYPE_CHECKING:
    import io

    from svcdoctor.cluster.probing import ProbeResult
    from svcdoctor.cluster.rollout import PodDelay, RolloutTest
    from svcdoctor.model import Diagnosis
    from svcdoctor.report.html import Page

    Plot = Callable[[Path | io.BytesIO, str], object]


def delay_sentence(delay: PodDelay) -> str:
    """One deleted pod's line in rollout-test's reports (text and HTML)."""
    parts = [f"pod {delay.pod} deleted"]
    if delay.update_seconds is not None:
        parts.append(f"out of the ready endpoints {delay.update_seconds:.2f} s later")
    if delay.window_seconds is not None:
        parts.append(f"last failure {delay.window_seconds:.2f} s after its deletion")
    return ", ".join(parts)


def written_option(flag: str, dest: str, kind: click.ParamType[Any], text: str) -> Callable[[F], F]:
    """An extra output the command writes only when given a path (``--html``, ``--plot``,
    ``--emit-metrics``...): no default, shown as "not written"."""
    return option(flag, dest, type=kind, help=text, default_text="not written")


def html_option(f: F) -> F:
    return written_option(
        "--html",
        "html_out",
        OutputFile((".html", ".htm"), "the report"),
        "Also write a self-contained HTML report (pictures inline, works offline).",
    )(f)


def plot_option(what: str) -> Callable[[F], F]:
    return written_option(
        "--plot",
        "plot_out",
        OutputFile((".png", ".svg"), "the plot"),
        f"Also write {what} (PNG or SVG, by extension).",
    )


def write_page(path: Path, page: Page) -> None:
    from svcdoctor.report.html import render_page

    path.write_text(render_page(page), encoding="utf-8")


def write_plot(path: Path, plot: Plot) -> None:
    """The picture in the type its name asks for (``.png`` or ``.svg``; others: exit 2)."""
    from svcdoctor.report.html import image_type

    plot(path, image_type(path).value)


def read_bundle(bundle: Path) -> Diagnosis:
    """A bundle's diagnosis (with its lanes and breakdown for the pictures)."""
    from svcdoctor.diagnose import diagnose
    from svcdoctor.evidence import read_evidence

    return diagnose(read_evidence([str(bundle)]))


# ---------------------------------------------------------------- probe


def probe_page(
    result: ProbeResult, service: str, run: str, notes: tuple[str, ...], raw: str
) -> Page:
    """``probe --html``: the direct probe's rates per backend, who is singled out, the
    Service as a whole and each node's route (``run``: the agent's run id)."""
    from svcdoctor.cluster.probing import probe_breakdown
    from svcdoctor.report.backends import backends_alt, plot_backends
    from svcdoctor.report.html import Input, Page, Section, Tone, figure

    breakdown = probe_breakdown(result)
    pictures = (
        (figure(lambda out, fmt: plot_backends(breakdown, out, fmt), backends_alt(breakdown)),)
        if breakdown.backends
        else ()
    )
    singled = [
        f"{t.label or t.key} ({t.key}) fails {t.failures} of {t.requests} requests while the "
        f"others fail {t.outlier.others_failure_rate:.2%} (p = {t.outlier.p_value:.2g})"
        for t in result.bad_backends
        if t.outlier is not None
    ]
    nodes = [
        f"node {t.key}'s route fails {t.failures} of {t.requests} connections while the "
        f"other nodes fail {t.outlier.others_failure_rate:.2%}"
        for t in result.bad_nodes
        if t.outlier is not None
    ]
    names = [t.label or t.key for t in result.bad_backends]
    names += [f"node {t.key}" for t in result.bad_nodes]
    if names:
        verdict, tone = f"Singled out: {', '.join(names)}", Tone.BAD
    elif result.failing:
        verdict, tone = "The Service fails as a whole", Tone.BAD
    else:
        verdict, tone = "No endpoint or node fails more than the others", Tone.GOOD
    rows = [
        f"{t.label or '-'} {t.key}: {t.requests - t.failures} of {t.requests} ok "
        f"({1 - t.failures / t.requests if t.requests else 0:.1%})"
        + (": " + ", ".join(f"{k} {n}" for k, n in t.by_outcome) if t.by_outcome else "")
        for t in result.backends
    ]
    findings = [
        Section(
            "Direct probe of each endpoint (bypassing the Service)",
            Tone.BAD if singled else Tone.NONE,
            "take a singled-out pod out of the Service and find why its readiness probe passes"
            if singled
            else "",
            (*singled, *rows),
        )
    ]
    s = result.service
    if s is not None:
        findings.append(
            Section(
                "Through the Service",
                Tone.BAD if result.failing else Tone.GOOD,
                f"{s.requests - s.failures} of {s.requests} ok (95 % CI "
                f"{s.success_ci95[0]:.1%}-{s.success_ci95[1]:.1%})",
                tuple(f"{k}: {n}" for k, n in s.by_outcome),
            )
        )
    if result.nodes:
        findings.append(
            Section(
                "From each node",
                Tone.BAD if nodes else Tone.NONE,
                "check a singled-out node's conntrack table, kube-proxy and datapath"
                if nodes
                else "",
                (
                    *nodes,
                    *(
                        f"node {t.key}: {t.requests - t.failures} of {t.requests} ok"
                        for t in result.nodes
                    ),
                ),
            )
        )
    sent = sum(t.requests for t in result.backends)
    return Page(
        title="svcdoctor probe",
        verdict=verdict,
        tone=tone,
        headline=f"Service {service}: {len(result.backends)} endpoints probed directly, "
        f"{sent} requests",
        pictures=pictures,
        findings=tuple(findings),
        inputs=(Input(f"agent Job {run}", "probe rows", sent, ""),),
        notes=notes,
        raw=raw,
    )


# ---------------------------------------------------------------- rollout-test


def rollout_page(t: RolloutTest, raw: str) -> Page:
    """``rollout-test --html``: what the rollout dropped, the lanes of its bundle and the
    diagnosis (preStop/grace fix) above the bundle's sources."""
    from svcdoctor.report.html import (
        Page,
        Section,
        Tone,
        diagnosis_page,
        diagnosis_pictures,
        span_text,
    )

    kinds = ", ".join(f"{k} {n}" for k, n in t.by_outcome.items() if k != "ok")
    where = t.edge.route(f"{t.plan.namespace}/{t.service}") if t.edge else f"Service {t.service}"
    headline = (
        f"{t.plan.workload} in {t.plan.namespace} restarted under load through {where}: "
        f"{t.failed} of {t.requests} requests failed" + (f" ({kinds})" if kinds else "")
    )
    if t.incomplete:
        verdict, tone = f"Incomplete: {'; '.join(t.incomplete)}", Tone.WARN
    elif t.failed:
        primary = t.primary
        verdict = f"{t.failed} requests failed during the rollout" + (
            f": {primary.cause.value} ({primary.verdict.value})" if primary else ""
        )
        tone = Tone.BAD
    else:
        verdict, tone = "No request failed: the rollout is zero-downtime at this rate", Tone.GOOD
    lines = [
        f"{phase} the rollout: {counts['requests']} requests"
        + (
            ", failed: " + ", ".join(f"{k} {n}" for k, n in counts.items() if k != "requests")
            if len(counts) > 1
            else ""
        )
        for phase, counts in t.by_phase.items()
    ]
    lines += [delay_sentence(delay) for delay in t.delays]
    measured = Section(
        "The rollout", tone, span_text(t.timing.restarted, t.timing.rolled_out), tuple(lines)
    )
    notes = (
        *t.notes,
        *(
            (f"the bundle could not be diagnosed: {t.diagnosis_error}",)
            if t.diagnosis_error
            else ()
        ),
    )
    if t.diagnosis is None:
        return Page(
            "svcdoctor rollout-test", verdict, tone, headline, findings=(measured,), notes=notes,
            raw=raw, steps=(f"svcdoctor diagnose {t.bundle}",),
        )  # fmt: skip
    page = diagnosis_page(t.diagnosis, diagnosis_pictures(t.diagnosis), "svcdoctor rollout-test")
    return replace(
        page,
        verdict=verdict,
        tone=tone,
        headline=headline,
        findings=(measured, *(page.findings if t.failed else ())),
        notes=(*notes, *page.notes),
        steps=(*page.steps, f"svcdoctor diagnose {t.bundle}"),
        raw=raw,
    )
