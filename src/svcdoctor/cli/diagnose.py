"""``svcdoctor diagnose``: which of the four causes explains the failures, from evidence."""

from __future__ import annotations

import os
import sys
from importlib.resources import files
from pathlib import Path

import click
from rich.console import Console


def _offsets(values: tuple[str, ...]) -> dict[str, float]:
    offsets = {}
    for item in values:
        source, sep, seconds = item.rpartition("=")
        try:
            offsets[source] = float(seconds)
        except ValueError:
            source = ""
        if not sep or not source:
            raise click.BadParameter(
                f"{item!r}: expected SOURCE=SECONDS (SOURCE: a file, its "
                "name, or a format such as nginx-access)",
                param_hint="--clock-offset",
            )
    return offsets


EXAMPLE = "rollout-race"


@click.command()
@click.argument("evidence", nargs=-1)
@click.option(
    "--example",
    is_flag=True,
    help="Diagnose the example evidence shipped with svcdoctor (a rollout).",
)
@click.option(
    "-f", "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option(
    "--clock-offset",
    multiple=True,
    metavar="SOURCE=SECONDS",
    help="Add SECONDS to every timestamp of SOURCE (file, file name or format).",
)
@click.option(
    "--html",
    "html_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write a self-contained HTML report.",
)
@click.option(
    "--plot",
    "plot_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the timeline plot (PNG, or SVG by extension).",
)
def diagnose(
    evidence: tuple[str, ...],
    example: bool,
    fmt: str,
    clock_offset: tuple[str, ...],
    html_out: Path | None,
    plot_out: Path | None,
) -> None:
    """Diagnose intermittent Service failures from EVIDENCE files or directories.

    Formats are detected by content: kubectl get events/pods/endpointslices -o json,
    ingress-nginx access and error logs, Envoy/Istio access logs, dmesg/journalctl -k,
    conntrack -S, canonical request logs (CSV, JSON Lines, Parquet) and manifests.
    Exit codes: 0 diagnosed (whatever the verdict), 2 when nothing usable was given.
    """
    if not evidence and not example:
        raise click.UsageError("give EVIDENCE files or directories (or --example)")
    offsets = _offsets(clock_offset)
    try:
        from svcdoctor.diagnose import diagnose as run
        from svcdoctor.evidence import EvidenceError, read_evidence
        from svcdoctor.report import diagnosis as report
    except ImportError as exc:  # pragma: no cover - the extra is missing
        raise click.ClickException(
            f"diagnose needs the 'diagnose' extra ({exc.name} is "
            "missing): pip install 'svcdoctor[diagnose]'"
        ) from None
    paths = list(evidence)
    if example:
        bundled = Path(str(files("svcdoctor.examples") / EXAMPLE))
        paths.append(
            os.path.relpath(bundled) if bundled.is_relative_to(Path.cwd()) else str(bundled)
        )
    try:
        found = read_evidence(paths, offsets)
    except EvidenceError as exc:
        click.echo(f"svcdoctor: error: {exc}", err=True)
        sys.exit(2)
    result = run(found)
    if fmt == "json":
        click.echo(report.render_json(result))
    else:
        report.render_text(result, Console(highlight=False))
    if plot_out:
        report.plot_timeline(
            result, plot_out, "svg" if plot_out.suffix.lower() == ".svg" else "png"
        )
    if html_out:
        html_out.write_text(report.render_html(result))
