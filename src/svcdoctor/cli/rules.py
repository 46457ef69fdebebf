"""``svcdoctor rules``: list the rules, explain one, export their docs."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table

from svcdoctor.checks import RULES, Rule, all_rules, lookup
from svcdoctor.cli._params import OutputDir


def rule_markdown(r: Rule) -> str:
    """The generated ``docs/rules/ID.md`` page of a rule."""
    cause = r.cause.value if r.cause else "input"
    return (
        f"# {r.id} {r.name}\n\n"
        f"*Cause:* `{cause}` · *Default severity:* `{r.severity.value}`\n\n"
        f"{r.doc}\n\n"
        f"Suppress on one object with the annotation "
        f'`ignore.svcdoctor.io/{r.id}: "<reason>"`.\n'
        if r.cause
        else f"# {r.id} {r.name}\n\n*Input problem* · *Severity:* `{r.severity.value}`\n\n{r.doc}\n"
    )


@click.group(invoke_without_command=True)
@click.pass_context
def rules(ctx: click.Context) -> None:
    """List the rules (ids are stable; use them in suppressions)."""
    if ctx.invoked_subcommand:
        return
    rows = [
        (r.id, r.name, r.cause.value if r.cause else "input", r.severity.value, r.summary)
        for r in all_rules()
    ]
    console = Console(highlight=False)
    if console.is_terminal:
        table = Table("id", "name", "cause", "severity", "summary", box=None, pad_edge=False)
        for row in rows:
            table.add_row(*row)
        console.print(table)
        return
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=False)) + "  " + row[4])


@rules.command()
@click.argument("rule")
def explain(rule: str) -> None:
    """Print the documentation of RULE (id or name)."""
    try:
        found = lookup(rule)
    except KeyError:
        raise click.BadParameter(
            f"no rule {rule!r} (see svcdoctor rules)", param_hint="RULE"
        ) from None
    console = Console()
    if console.is_terminal:
        console.print(Markdown(rule_markdown(found)))
    else:
        click.echo(rule_markdown(found), nl=False)


@rules.command()
@click.argument("directory", type=OutputDir())
def export(directory: Path) -> None:
    """Write docs/rules/ID.md for every rule (what `make docs` runs)."""
    directory.mkdir(parents=True, exist_ok=True)
    for r in all_rules():
        (directory / f"{r.id}.md").write_text(rule_markdown(r))
    click.echo(f"wrote {len(RULES)} rule pages to {directory}")
