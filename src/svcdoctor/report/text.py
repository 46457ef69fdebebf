"""Human-readable lint report, grouped by object; coloured only on a terminal.

On a terminal the report is laid out with rich (colour, wrapping at the terminal's width).
Anywhere else (a pipe, a file, CI logs) the same lines are written as plain text: no
styling, no wrapping at 80 columns (commands in messages and fixes stay copy-pasteable),
and none of rich's per-line layout cost, which made the text report of a large repository
several times slower than its JSON.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import groupby

from rich.console import Console
from rich.control import strip_control_codes
from rich.markup import escape

from svcdoctor.checks import LintResult
from svcdoctor.model import Finding, Location, Severity, is_live
from svcdoctor.model.pathreport import WorkloadPaths
from svcdoctor.report.fixes import fix_text

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def _group(f: Finding) -> tuple[str, str]:
    return (f.location.file, str(f.object) if f.object else "")


Group = tuple[list[Finding], WorkloadPaths | None]


def _groups(result: LintResult) -> list[Group]:
    """Findings grouped by file and object, each with its workload's paths when they hold
    more than the datapath; a workload without findings has a group of its own only when a
    hop slower than the cluster's propagation sets its advice (a clean workload behind an
    ingress controller is nothing to act on). Groups in file and line order."""
    ordered = sorted(result.findings, key=lambda f: (*_group(f), f.location.line, f.rule))
    shown = {(p.location.file, str(p.workload)): p for p in result.paths if p.beyond_datapath}
    groups: list[Group] = [
        (items, shown.pop(key, None))
        for key, grouped in groupby(ordered, key=_group)
        for items in [list(grouped)]
    ]
    groups += [([], p) for p in shown.values() if p.hop is not None]
    groups.sort(key=lambda g: (_head(g)[0], _head(g)[2].line))
    return groups


def _head(group: Group) -> tuple[str, str, Location]:
    """A group's file, object and first line."""
    items, paths = group
    if items:
        file, obj = _group(items[0])
        return file, obj, min((f.location for f in items), key=lambda loc: loc.line)
    if paths is None:  # never built: a group has findings or paths
        return "", "", Location("", 0)
    return paths.location.file, str(paths.workload), paths.location


COVERS = "the preStop advice covers"


def path_lines(shown: WorkloadPaths, covers: str = COVERS) -> list[str]:
    """``path: AWS ALB (ip, 30 s) → pod — the preStop advice covers …``: one line per path,
    the covered leg named (after ``covers``) once, on the first path that holds it."""
    marked = next((p for p in shown.paths if shown.holds_cover(p)), None)
    lines = [
        f"path: {p.text()}" + (f" — {covers} {shown.cover_text()}" if p is marked else "")
        for p in shown.paths
    ]
    notes = dict.fromkeys(
        f"  note: {h.name}: {n}" for p in shown.paths for h in p.hops for n in h.notes
    )
    return lines + list(notes)


def _where(f: Finding, live: bool) -> str:
    return ", ".join(
        ([] if live else [f"line {f.location.line}"])
        + ([f"container {f.container}"] if f.container else [])
    )


def print_lines(console: Console, lead: str, lines: Iterable[str]) -> None:
    """Each line as plain text (escaped) after the markup ``lead``: not wrapped (a command
    stays copy-pasteable), not highlighted."""
    for line in lines:
        console.print(f"{lead}{escape(line)}", soft_wrap=True, highlight=False)


def render_text(result: LintResult, console: Console, *, show_fixes: bool = True) -> None:
    """Print findings grouped by file and object, then a one-line summary."""
    if not console.is_terminal:
        console.file.write("".join(_plain(result, show_fixes)))
        console.file.flush()
        return
    for items, paths in _groups(result):
        file, obj, first = _head((items, paths))
        line = first.line
        live = is_live(first)
        console.print(
            (f"[bold]{escape(obj)}[/]" if live else f"[bold]{escape(file)}:{line}[/]")
            + (f"  [bold]{escape(obj)}[/]" if obj and not live else ""),
            soft_wrap=True,
        )
        for f in items:
            cause = f"[{f.cause.value}]" if f.cause else "[input]"
            where = _where(f, live)
            console.print(
                f"  [{_STYLE[f.severity]}]{f.severity.value:<7}[/] [bold]{f.rule}[/] {f.name} "
                f"{escape(cause)}" + (f"  [dim]{escape(where)}[/]" if where else "")
            )
            console.print(f"    {escape(f.message)}", soft_wrap=True)
            fix = fix_text(f.fix) if show_fixes else None
            if fix:
                console.print("    [green]fix:[/]")
                print_lines(console, "      ", fix.splitlines())
        for text in path_lines(paths) if paths else ():
            console.print(f"  [blue]{escape(text)}[/]", soft_wrap=True, highlight=False)
        console.print()
    console.print(summary_line(result), highlight=False, soft_wrap=True)


def _plain(result: LintResult, show_fixes: bool) -> Iterator[str]:
    """The report's lines as a terminal shows them, without styles or wrapping; control
    characters dropped and tabs expanded as on the terminal."""
    for items, paths in _groups(result):
        file, obj, first = _head((items, paths))
        live = is_live(first)
        if live:
            yield _clean(obj)
        else:
            line = first.line
            yield _clean(f"{file}:{line}" + (f"  {obj}" if obj else ""))
        for f in items:
            cause = f"[{f.cause.value}]" if f.cause else "[input]"
            where = _where(f, live)
            yield _clean(
                f"  {f.severity.value:<7} {f.rule} {f.name} {cause}"
                + (f"  {where}" if where else "")
            )
            yield _clean(f"    {f.message}")
            fix = fix_text(f.fix) if show_fixes else None
            if fix:
                yield "    fix:\n"
                for fix_line in fix.splitlines():
                    yield _clean(f"      {fix_line}")
        for text in path_lines(paths) if paths else ():
            yield _clean(f"  {text}")
        yield "\n"
    yield _clean(summary_line(result))


def _clean(text: str) -> str:
    """One or more output lines, as rich would print them with soft wrapping."""
    return "".join(strip_control_codes(part).expandtabs(8) + "\n" for part in text.split("\n"))


def summary_line(result: LintResult) -> str:
    counts = result.counts()
    parts = [f"{n} {s}" for s, n in counts.items() if n]
    found = _plural(len(result.findings), "finding")
    extra = [f"{result.skipped} non-Kubernetes documents skipped"] if result.skipped else []
    if result.suppressed:
        extra.append(f"{result.suppressed} suppressed")
    if result.test_inputs:
        extra.append(f"{result.test_inputs} on tests' inputs not shown (--test-inputs)")
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
