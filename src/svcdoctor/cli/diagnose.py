"""``svcdoctor diagnose``: which of the four causes explains the failures, from evidence."""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

import click

from svcdoctor.cli._output import stdout_console
from svcdoctor.cli._params import (
    Duration,
    OutputFile,
    Share,
    filename_option,
    option,
    output_option,
)

if TYPE_CHECKING:
    from svcdoctor.model import Evidence

# seconds: a skewed clock, or the boot time of a node whose dmesg counts seconds since boot
# (a Unix time: up to the year 2100)
MAX_OFFSET = 4_102_444_800.0
_OFFSET = Duration(-MAX_OFFSET, MAX_OFFSET)


def _offsets(values: tuple[str, ...]) -> dict[str, float]:
    offsets = {}
    for item in values:
        source, sep, seconds = item.rpartition("=")
        if not sep or not source:
            raise click.BadParameter(
                f"{item!r}: expected SOURCE=SECONDS (SOURCE: a file, its "
                "name, or a format such as nginx-access)",
                param_hint="--clock-offset",
            )
        negative = seconds.strip().startswith("-")
        try:
            value = _OFFSET.convert(seconds.strip().lstrip("-"), None, None)
            value = -value if negative else value
            if not _OFFSET.within(value):
                raise click.BadParameter("")
        except click.BadParameter:
            raise click.BadParameter(
                f"{item!r}: SECONDS must be a finite number from {-MAX_OFFSET:g} to "
                f"{MAX_OFFSET:g} (or 90s, 2m, 1h)",
                param_hint="--clock-offset",
            ) from None
        offsets[source] = value
    return offsets


@contextmanager
def _stdin_as_file(paths: list[str]) -> Iterator[list[str]]:
    """``-`` among the paths: standard input written to a temporary file (readers detect
    formats by content and may read twice), removed afterwards."""
    if "-" not in paths:
        yield paths
        return
    with tempfile.TemporaryDirectory(prefix="svcdoctor-stdin-") as folder:
        target = Path(folder) / "stdin"
        with target.open("wb") as out:
            if sys.stdin is not None:
                shutil.copyfileobj(sys.stdin.buffer, out)
        yield [str(target) if p == "-" else p for p in paths]


def _named_stdin(found: Evidence, temporary: str) -> Evidence:
    def name(text: str) -> str:
        return text.replace(temporary, "-")

    return replace(
        found,
        sources=tuple(replace(src, path=name(src.path)) for src in found.sources),
        problems=tuple(map(name, found.problems)),
        warnings=tuple(map(name, found.warnings)),
    )


def _tz(value: str | None) -> str | None:
    if value is None:
        return None
    m = re.fullmatch(r"([+-])(\d\d):?(\d\d)|Z|UTC", value.strip())
    if not m or (m.group(2) and (int(m.group(2)) > 14 or int(m.group(3)) > 59)):
        raise click.BadParameter(
            f"{value!r}: expected a UTC offset such as +02:00", param_hint="--tz"
        )
    return "+00:00" if not m.group(1) else f"{m.group(1)}{m.group(2)}:{m.group(3)}"


EXAMPLE = "rollout-race"


@click.command()
@click.argument("evidence", nargs=-1)
@filename_option("An evidence file, directory or - (stdin), added to EVIDENCE")
@click.option(
    "--example",
    is_flag=True,
    help="Diagnose the example evidence shipped with svcdoctor (a rollout).",
)
@output_option(("text", "json"))
@option(
    "--clock-offset",
    multiple=True,
    metavar="SOURCE=SECONDS",
    help="Add SECONDS to every timestamp of SOURCE (file, file name or format).",
    default_text="none",
)
@option(
    "--html",
    "html_out",
    type=OutputFile((".html", ".htm"), "the report"),
    help="Also write a self-contained HTML report.",
    default_text="not written",
)
@option(
    "--plot",
    "plot_out",
    type=OutputFile((".png", ".svg"), "the plot"),
    help="Also write the timeline plot (PNG or SVG, by extension).",
    default_text="not written",
)
@click.option(
    "--service",
    metavar="NAMESPACE/NAME|UPSTREAM",
    help="Diagnose one Service of a proxy log that holds many (default: each, worst first).",
)
@option(
    "--failure-floor",
    type=Share(0.0, 0.5),
    default="0.05%",
    show_default=True,
    help="Failure rate a healthy Service shows anyway (a 99.95 % availability objective): "
    "below it only a likely cause is named.",
)
@click.option(
    "--tz",
    metavar="±HH:MM",
    callback=lambda _c, _p, v: _tz(v),
    help="UTC offset of logs that carry none (nginx error log); default: the access log's.",
)
def diagnose(
    evidence: tuple[str, ...],
    filenames: tuple[str, ...],
    example: bool,
    fmt: str,
    clock_offset: tuple[str, ...],
    service: str | None,
    tz: str | None,
    failure_floor: float,
    html_out: Path | None,
    plot_out: Path | None,
) -> None:
    """Diagnose intermittent Service failures from EVIDENCE files or directories.

    EVIDENCE may be - for stdin. Formats are detected by content: kubectl get
    events/pods/endpointslices -o json, ingress-nginx access and error logs, Envoy/Istio
    access logs, dmesg/journalctl -k, conntrack -S, canonical request logs (CSV, JSON
    Lines, Parquet) and manifests.
    Exit codes: 0 diagnosed (whatever the verdict), 2 when nothing usable was given.
    """
    evidence = (*evidence, *filenames)
    if not evidence and not example:
        raise click.UsageError("give EVIDENCE files or directories (or --example)")
    offsets = _offsets(clock_offset)
    try:
        from svcdoctor.diagnose import Settings
        from svcdoctor.diagnose import diagnose as run
        from svcdoctor.diagnose.stats import preload
        from svcdoctor.evidence import read_evidence
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
    preload()
    # unusable evidence and an unknown --service are SvcdoctorErrors: one line, exit 2
    with _stdin_as_file(paths) as readable:
        found = read_evidence(readable, offsets, tz=tz)
        if readable != paths:  # the report names standard input as the user gave it: -
            found = _named_stdin(found, readable[paths.index("-")])
    result = run(found, Settings(floor_rate=failure_floor), service=service)
    if fmt == "json":
        click.echo(report.render_json(result))
    else:
        report.render_text(result, stdout_console())
    if plot_out:
        report.plot_timeline(
            result, plot_out, "svg" if plot_out.suffix.lower() == ".svg" else "png"
        )
    if html_out:
        html_out.write_text(report.render_html(result))
