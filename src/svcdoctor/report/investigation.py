"""Renderers of an investigation (``svcdoctor investigate``): the five-step checklist first,
then the verdict, the fix as a patch and the next command; as text, as JSON
(docs/schemas.md, "investigate") and as the HTML page (the diagnosis' page with the
checklist in its first screen)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from rich.console import Console
from rich.markup import escape

from svcdoctor.model.investigation import (
    INVESTIGATION_SCHEMA,
    Investigation,
    Measure,
    Step,
    StepStatus,
)
from svcdoctor.report.diagnosis import cause_name
from svcdoctor.report.fixes import patch_text, step_text
from svcdoctor.report.html import (
    Page,
    Picture,
    Section,
    Tone,
    diagnosis_page,
    split_fix,
)
from svcdoctor.report.text import print_lines

_MARK = {
    StepStatus.FOUND: "[bold red]FOUND[/]",
    StepStatus.CLEAR: "[green]clear[/]",
    StepStatus.PARTIAL: "[yellow]partial[/]",
    StepStatus.NOT_RUN: "[dim]not run[/]",
}
_TONE = {
    StepStatus.FOUND: Tone.BAD,
    StepStatus.CLEAR: Tone.GOOD,
    StepStatus.PARTIAL: Tone.WARN,
    StepStatus.NOT_RUN: Tone.NONE,
}


def verdict_text(i: Investigation) -> str:
    """``Verdict: race (likely)``, or why no cause is named."""
    if i.cause is not None:
        strength = f" ({i.strength.value})" if i.strength is not None else ""
        return f"Verdict: {i.cause.value}{strength}: {cause_name(i.cause.value)}"
    if i.incomplete:
        return "Verdict: no cause found, and the investigation is INCOMPLETE"
    return "Verdict: no cause found"


def step_line(s: Step) -> str:
    """The step in one line: its number, title, status and its first finding."""
    first = s.found[0] if s.found else (s.missing[0] if s.missing else "")
    return f"{int(s.id)}. {s.id.title}: {s.status.value}" + (f" — {first}" if first else "")


# ---------------------------------------------------------------- text


def render_text(i: Investigation, console: Console) -> None:
    """The checklist, then the verdict, the fix, the skipped active steps, the next command."""
    console.print(
        f"[bold]Investigation of Service {escape(i.service)}[/] (context {escape(i.context)}, "
        f"Kubernetes {escape(i.server_version or '?')})",
        soft_wrap=True,
    )
    if i.incomplete:
        console.print("[bold red]INCOMPLETE:[/] evidence is missing:", highlight=False)
        print_lines(console, "  missing: ", i.incomplete)
    for s in i.steps:
        console.print()
        console.print(
            f"[bold]{int(s.id)}. {s.id.title}[/] {_MARK[s.status]}  "
            f"[dim]{escape(s.id.question)}[/]",
            soft_wrap=True,
            highlight=False,
        )
        print_lines(console, "   checked: ", s.checked)
        print_lines(console, "   • ", s.found)
        print_lines(console, "   [yellow]not done:[/] ", s.missing)
        if s.would_decide:
            console.print(
                f"   would decide: {escape(s.would_decide)}", soft_wrap=True, highlight=False
            )
    console.print()
    style = "bold red" if i.cause is not None else "bold"
    console.print(f"[{style}]{escape(verdict_text(i))}[/]", soft_wrap=True, highlight=False)
    console.print(escape(i.headline), soft_wrap=True, highlight=False)
    if i.decided_by:
        console.print(
            "named by step " + ", ".join(str(int(x)) for x in i.decided_by), highlight=False
        )
    print_lines(console, "  • ", i.evidence)
    print_lines(console, "fix: ", (step_text(fix) for fix in i.fixes))
    print_lines(console, "note: ", i.notes)
    if i.skipped:
        console.print()
        console.print("Skipped active steps (nothing was created in the cluster):")
        for sk in i.skipped:
            console.print(
                f"  step {int(sk.step)} (needs {sk.needs}): {escape(sk.what)}", soft_wrap=True
            )
            console.print(f"    {escape(sk.command)}", soft_wrap=True, highlight=False)
    if i.bundle:
        console.print(f"evidence: {escape(i.bundle)}", soft_wrap=True, highlight=False)
    if i.next_command:
        console.print(f"next: {escape(i.next_command)}", soft_wrap=True, highlight=False)


# ---------------------------------------------------------------- JSON


def _measure(m: Measure) -> dict[str, Any]:
    return {"key": m.key, "value": m.value, "ci95": list(m.ci95) if m.ci95 else None}


def step_data(s: Step) -> dict[str, Any]:
    return {
        "step": int(s.id),
        "title": s.id.title,
        "question": s.id.question,
        "status": s.status.value,
        "checked": list(s.checked),
        "found": list(s.found),
        "measures": [_measure(m) for m in s.measures],
        "missing": list(s.missing),
        "would_decide": s.would_decide or None,
        "causes": [c.value for c in s.causes],
    }


def investigation_json(i: Investigation) -> dict[str, Any]:
    """The checklist and the verdict as data (docs/schemas.md, "investigate")."""
    return {
        "svcdoctor_investigation": INVESTIGATION_SCHEMA,
        "service": i.service,
        "context": i.context,
        "server_version": i.server_version,
        "complete": not i.incomplete,
        "steps": [step_data(s) for s in i.steps],
        "verdict": {
            "cause": i.cause.value if i.cause else None,
            "strength": i.strength.value if i.strength else None,
            "headline": i.headline,
            "decided_by": [int(x) for x in i.decided_by],
            "evidence": list(i.evidence),
            "fixes": [
                {
                    "text": f.text,
                    "target": f.target,
                    "patch": patch_text(f.patch) if f.patch is not None else None,
                }
                for f in i.fixes
            ],
            "next_command": i.next_command,
        },
        "skipped": [
            {"step": int(s.step), "what": s.what, "needs": s.needs, "command": s.command}
            for s in i.skipped
        ],
        "incomplete": list(i.incomplete),
        "notes": list(i.notes),
        "bundle": i.bundle,
        "diagnosis_file": i.diagnosis_file,
    }


def render_json(i: Investigation) -> str:
    return json.dumps(investigation_json(i), indent=2, default=str)


# ---------------------------------------------------------------- HTML


def investigation_page(i: Investigation, pictures: tuple[Picture, ...] = ()) -> Page:
    """The diagnosis' page (pictures, causes, sources) with the verdict and the checklist
    first: one line per step in the header, then each step as a section before the causes."""
    tone = Tone.BAD if i.cause is not None else (Tone.WARN if i.incomplete else Tone.GOOD)
    steps = tuple(
        Section(
            f"{int(s.id)}. {s.id.title}: {s.status.value}",
            _TONE[s.status],
            s.id.question,
            (
                *(f"checked: {c}" for c in s.checked),
                *s.found,
                *(f"not done: {m}" for m in s.missing),
                *((f"would decide: {s.would_decide}",) if s.would_decide else ()),
            ),
        )
        for s in i.steps
    )
    verdict = Section(
        verdict_text(i),
        tone,
        i.headline,
        i.evidence,
        tuple(split_fix(f) for f in i.fixes),
    )
    skipped = tuple(
        f"step {int(s.step)} skipped (needs {s.needs}: {s.what}): {s.command}" for s in i.skipped
    )
    steps_next = (*((i.next_command,) if i.next_command else ()), *skipped)
    facts = tuple(step_line(s) for s in i.steps)
    raw = render_json(i)
    if i.diagnosis is None:
        return Page(
            "svcdoctor investigate", verdict_text(i), tone, i.headline, facts,
            findings=(verdict, *steps), steps=steps_next, notes=(*i.incomplete, *i.notes),
            raw=raw,
        )  # fmt: skip
    page = diagnosis_page(i.diagnosis, pictures, "svcdoctor investigate")
    return replace(
        page,
        verdict=verdict_text(i),
        tone=tone,
        headline=f"Service {i.service}: {i.headline}",
        facts=facts,
        findings=(verdict, *steps, *page.findings),
        steps=(*steps_next, *page.steps),
        notes=(*(f"INCOMPLETE: {m}" for m in i.incomplete), *i.notes, *page.notes),
        raw=raw,
    )


__all__ = ["investigation_json", "investigation_page", "render_json", "render_text"]
