"""Human-readable lint report, grouped by object; coloured only on a terminal."""

from __future__ import annotations

from itertools import groupby

from rich.console import Console
from rich.markup import escape

from svcdoctor.checks import LintResult
from svcdoctor.model import Finding, Severity, is_live

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def _group(f: Finding) -> tuple[str, str]:
    return (f.location.file, str(f.object) if f.object else "")


def render_text(result: LintResult, console: Console, *, show_fixes: bool = True) -> None:
    """Print findings grouped by file and object, then a one-line summary."""
    ordered = sorted(result.findings, key=lambda f: (*_group(f), f.location.line, f.rule))
    groups = [list(g) for _, g in groupby(ordered, key=_group)]
    groups.sort(key=lambda g: (g[0].location.file, min(f.location.line for f in g)))
    for items in groups:
        file, obj = _group(items[0])
        line = min(f.location.line for f in items)
        live = is_live(items[0].location)
        console.print(
            (f"[bold]{escape(obj)}[/]" if live else f"[bold]{escape(file)}:{line}[/]")
            + (f"  [bold]{escape(obj)}[/]" if obj and not live else ""),
            soft_wrap=True,
        )
        for f in items:
            cause = f"[{f.cause.value}]" if f.cause else "[input]"
            where = ", ".join(
                ([] if live else [f"line {f.location.line}"])
                + ([f"container {f.container}"] if f.container else [])
            )
            console.print(
                f"  [{_STYLE[f.severity]}]{f.severity.value:<7}[/] [bold]{f.rule}[/] {f.name} "
                f"{escape(cause)}" + (f"  [dim]{escape(where)}[/]" if where else "")
            )
            console.print(f"    {escape(f.message)}", soft_wrap=True)
            if show_fixes and f.fix:
                console.print("    [green]fix:[/]")
                for fix_line in f.fix.splitlines():
                    console.print(f"      {escape(fix_line)}", soft_wrap=True, highlight=False)
        console.print()
    console.print(summary_line(result), highlight=False, soft_wrap=True)


def summary_line(result: LintResult) -> str:
    counts = result.counts()
    parts = [f"{n} {s}" for s, n in counts.items() if n]
    found = _plural(len(result.findings), "finding")
    extra = [f"{result.skipped} non-Kubernetes documents skipped"] if result.skipped else []
    if result.suppressed:
        extra.append(f"{result.suppressed} suppressed")
    if result.input_errors:
        extra.append(f"{result.input_errors} input errors")
    files = f"{_plural(result.files, 'file')}, " if result.files else ""  # 0: a live scan
    return (
        f"{files}{_plural(result.objects, 'object')} "
        f"({_plural(result.workloads, 'workload')}, {_plural(result.services, 'service')}): "
        f"{found}"
        + (f" ({', '.join(parts)})" if parts else "")
        + (f"; {', '.join(extra)}" if extra else "")
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
