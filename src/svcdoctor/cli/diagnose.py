"""``svcdoctor diagnose``: which of the four causes explains the failures, from evidence."""

from __future__ import annotations

import os
import re
import sys
import time
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from svcdoctor.cli._checking import check_settings, remedy_options
from svcdoctor.cli._errors import extras_needed
from svcdoctor.cli._output import stdout_console
from svcdoctor.cli._params import Duration, Share, filename_option, option, output_option
from svcdoctor.cli._prometheus import (
    LATEST,
    check_sources,
    check_step,
    from_prometheus,
    parse_headers,
    prometheus_only_options,
    prometheus_range,
    service_ref,
)
from svcdoctor.cli._report import html_option, plot_option, write_page, write_plot

if TYPE_CHECKING:
    from svcdoctor.model import Diagnosis

# seconds: a skewed clock, or the boot time of a node whose dmesg counts seconds since boot
# (a Unix time: up to the year 2100)
MAX_OFFSET = LATEST
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
@html_option
@plot_option("the per-pod lanes (the timeline from --prometheus)")
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
@option(
    "--prometheus",
    metavar="URL",
    help="Diagnose from a Prometheus-compatible query API (Prometheus, Thanos, Mimir, "
    "VictoriaMetrics) instead of files: PromQL aggregates, pushed down to the server.",
    default_text="files",
)
@prometheus_only_options
@remedy_options()
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
    prometheus: str | None,
    since: float | None,
    start: float | None,
    end: float | None,
    headers: tuple[str, ...],
    timeout: float | None,
    step: float | None,
    config_path: Path | None,
    **opts: Any,
) -> None:
    """Diagnose intermittent Service failures from EVIDENCE files or directories.

    EVIDENCE may be - for stdin. Formats are detected by content: kubectl get
    events/pods/endpointslices -o json, ingress-nginx access and error logs, Envoy/Istio
    access logs, dmesg/journalctl -k, conntrack -S, canonical request logs (CSV, JSON
    Lines, Parquet) and manifests.

    With --prometheus URL, the evidence is the metrics the cluster's exporters keep
    (ingress-nginx or Istio request counters, kube-state-metrics, kube-proxy,
    node-exporter), queried over --since or --start/--end; without --service every
    Service with request series is diagnosed and the strongest cause leads.
    The remedy's settings (and the notes on manifests given) are lint's: --config or the
    nearest config file, then the flags.
    Exit codes: 0 diagnosed (whatever the verdict), 2 when nothing usable was given.
    """
    evidence = (*evidence, *filenames)
    given = {
        "since": since is not None,
        "start": start is not None,
        "end": end is not None,
        "headers": bool(headers),
        "timeout": timeout is not None,
        "step": step is not None,
        "clock_offset": bool(clock_offset),
        "tz": tz is not None,
    }
    check_sources(prometheus is not None, bool(evidence or example), given)
    checks = check_settings(config_path, opts)
    if prometheus is not None:
        span = prometheus_range(since, start, end, time.time())
        check_step(step, *span)
        with extras_needed("diagnose", "diagnose"):
            from svcdoctor.diagnose import Settings
        query = (parse_headers(headers), 60.0 if timeout is None else timeout)
        result = from_prometheus(
            prometheus,
            *query,
            service_ref(service),
            span,
            Settings(floor_rate=failure_floor, checks=checks),
            step,
        )
        _render(result, fmt, html_out, plot_out)
        return
    offsets = _offsets(clock_offset)
    with extras_needed("diagnose", "diagnose"):
        from svcdoctor.diagnose import Settings
        from svcdoctor.diagnose import diagnose as run
        from svcdoctor.diagnose.stats import preload
        from svcdoctor.evidence.stdin import read_with_stdin
    paths = list(evidence)
    if example:
        bundled = Path(str(files("svcdoctor.examples") / EXAMPLE))
        paths.append(
            os.path.relpath(bundled) if bundled.is_relative_to(Path.cwd()) else str(bundled)
        )
    preload()
    # unusable evidence and an unknown --service are SvcdoctorErrors: one line, exit 2
    stdin = sys.stdin.buffer if "-" in paths and sys.stdin is not None else None
    found = read_with_stdin(paths, stdin, offsets, tz=tz)
    pictures = bool(html_out or plot_out)
    settings = Settings(floor_rate=failure_floor, pictures=pictures, checks=checks)
    _render(run(found, settings, service=service), fmt, html_out, plot_out)


def _render(result: Diagnosis, fmt: str, html_out: Path | None, plot_out: Path | None) -> None:
    """The report on stdout; the pictures and the HTML page when asked for (the lanes of
    the evidence's requests, or the timeline of a diagnosis without them)."""
    from svcdoctor.report import diagnosis as report

    if fmt == "json":
        click.echo(report.render_json(result))
    else:
        report.render_text(result, stdout_console())
    if plot_out or html_out:
        from svcdoctor.report.html import diagnosis_page, diagnosis_pictures, diagnosis_plot

        if plot_out:
            write_plot(plot_out, diagnosis_plot(result))
        if html_out:
            write_page(html_out, diagnosis_page(result, diagnosis_pictures(result)))
