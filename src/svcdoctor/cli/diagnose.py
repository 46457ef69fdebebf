"""``svcdoctor diagnose``: which of the four causes explains the failures, from evidence."""

from __future__ import annotations

import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from svcdoctor.cli._errors import extras_needed
from svcdoctor.cli._output import stdout_console
from svcdoctor.cli._params import (
    Duration,
    ParamBase,
    Share,
    filename_option,
    option,
    output_option,
)
from svcdoctor.cli._report import html_option, plot_option, write_page, write_plot
from svcdoctor.model.duration import SPAN as SPAN_UNITS

if TYPE_CHECKING:
    from svcdoctor.diagnose import Settings
    from svcdoctor.model import Diagnosis, Evidence

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


MAX_SPAN = 400 * 86_400.0  # seconds: more than a year of history in one diagnosis is a typo
MAX_STEPS = 25_000  # --step: query steps over the range (the default step keeps to it too)


class Span(Duration):
    """A range to look back: ``7d``, ``36h``, ``1d12h``, ``90m``, ``2w`` or seconds."""

    name = "span"
    units = SPAN_UNITS

    def what(self) -> str:
        return "a span (seconds, or 90m, 36h, 7d, 2w)"


class Instant(ParamBase):
    """A point in time: RFC 3339 (``2026-12-01T10:00:00Z``, an offset; none means UTC) or
    Unix seconds. Converted to Unix seconds."""

    name = "time"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from svcdoctor.evidence.times import rfc3339

        if isinstance(value, float):
            return value
        text = str(value).strip()
        try:
            seconds: float | None = float(text)
        except ValueError:
            seconds = rfc3339(text) if "T" in text or " " in text else None
        if seconds is None or not (0 <= seconds <= MAX_OFFSET):
            self.fail(
                f"{value!r} is not a time: give RFC 3339 (2026-12-01T10:00:00Z) or Unix "
                "seconds, from 1970 to 2100",
                param,
                ctx,
            )
        return seconds

    def get_metavar(self, param: click.Parameter, *args: Any, **kwargs: Any) -> str | None:
        return "TIME"


_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def _headers(values: tuple[str, ...]) -> dict[str, str]:
    """``'Name: value'`` options → headers; the value is never echoed (it may be a secret)."""
    headers: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition(":")
        name, value = name.strip(), value.strip()
        if not sep or not _TOKEN.fullmatch(name) or not value or any(c in value for c in "\r\n\0"):
            shown = name if _TOKEN.fullmatch(name) else "…"
            raise click.BadParameter(
                f"expected 'Name: value' (e.g. 'Authorization: Bearer TOKEN'), got {shown!r}"
                f"{': …' if sep else ' without a colon'}",
                param_hint="--header",
            )
        headers[name] = value
    return headers


_PROMETHEUS_ONLY = ("since", "start", "end", "headers", "timeout", "step")
_FILES_ONLY = ("clock_offset", "tz")


def _prometheus_range(
    since: float | None, start: float | None, end: float | None, now: float
) -> tuple[float, float]:
    """The range asked for: ``--since`` back from now, or ``--start`` to ``--end`` (now by
    default); 7 days back when neither is given."""
    if since is not None and (start is not None or end is not None):
        raise click.UsageError("give --since or --start/--end, not both")
    if end is not None and start is None:
        raise click.UsageError("--end needs --start (or give --since)")
    if start is None:
        return now - (since if since is not None else DEFAULT_SINCE), now
    stop = now if end is None else end
    if stop <= start:
        raise click.UsageError("--end must be after --start")
    if stop - start > MAX_SPAN:
        raise click.UsageError(f"the range is longer than {MAX_SPAN / 86_400:g} days")
    return start, stop


def _service_ref(service: str | None) -> str | None:
    if service is None:
        return None
    namespace, sep, name = service.partition("/")
    label = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
    if not sep or not label.fullmatch(namespace) or not label.fullmatch(name):
        raise click.BadParameter(
            f"{service!r}: with --prometheus give the Service as NAMESPACE/NAME",
            param_hint="--service",
        )
    return service


def _from_prometheus(
    url: str,
    headers: dict[str, str],
    timeout: float,
    service: str | None,
    start: float,
    end: float,
    settings: Settings,
    step: float | None,
) -> Diagnosis:
    """The diagnosis from a Prometheus-compatible query API (aggregates pushed down)."""
    with extras_needed("diagnose --prometheus", "diagnose", "live"):
        from svcdoctor.evidence.prometheus import PromClient
    # the URL is checked (one line, exit 2) before anything else is loaded
    with PromClient(url, headers, timeout) as client:
        from svcdoctor.diagnose.metrics import diagnose_prometheus

        try:
            return diagnose_prometheus(client, service, start, end, settings, step)
        finally:  # the server's warnings (Thanos' partial responses) explain gaps: always
            for warning in client.warnings:
                click.echo(f"warning: Prometheus: {' '.join(warning.split())}", err=True)


DEFAULT_SINCE = 7 * 86_400.0
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
@option(
    "--since",
    type=Span(0, MAX_SPAN, low_open=True),
    help="With --prometheus: diagnose this far back from now (7d, 36h, 90m).",
    default_text="7d",
)
@option(
    "--start",
    type=Instant(),
    help="With --prometheus: start of the range (RFC 3339 or Unix seconds).",
    default_text="--since",
)
@option("--end", type=Instant(), help="With --prometheus: end of the range.", default_text="now")
@option(
    "--header",
    "headers",
    multiple=True,
    metavar="'NAME: VALUE'",
    help="With --prometheus: an HTTP header for every request (e.g. 'Authorization: Bearer "
    "TOKEN', 'X-Scope-OrgID: tenant'); repeatable.",
    default_text="none",
)
@option(
    "--timeout",
    type=Duration(0, 600, low_open=True),
    help="With --prometheus: the longest wait for one answer from the server.",
    default_text="60s",
)
@option(
    "--step",
    type=Duration(0, 86_400, low_open=True),
    help="With --prometheus: the query step (no finer than the scrape interval helps; a "
    "finer step sees a short race window in a short range).",
    default_text="15s or coarser, from the range",
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
    prometheus: str | None,
    since: float | None,
    start: float | None,
    end: float | None,
    headers: tuple[str, ...],
    timeout: float | None,
    step: float | None,
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
    if prometheus is not None:
        if evidence or example:
            raise click.UsageError(
                "--prometheus reads a metrics store: give no EVIDENCE or --example"
            )
        for name in _FILES_ONLY:
            if given[name]:
                raise click.UsageError(
                    f"--{name.replace('_', '-')} applies to evidence files, not --prometheus"
                )
        first, last = _prometheus_range(since, start, end, time.time())
        if step is not None and (last - first) / step > MAX_STEPS:
            raise click.BadParameter(
                f"{step:g} s over {last - first:,.0f} s is more than {MAX_STEPS:,} steps: "
                f"give at least {math.ceil((last - first) / MAX_STEPS)}s",
                param_hint="--step",
            )
        with extras_needed("diagnose", "diagnose"):
            from svcdoctor.diagnose import Settings
        result = _from_prometheus(
            prometheus,
            _headers(headers),
            60.0 if timeout is None else timeout,
            _service_ref(service),
            first,
            last,
            Settings(floor_rate=failure_floor),
            step,
        )
        _render(result, fmt, html_out, plot_out)
        return
    for name in _PROMETHEUS_ONLY:
        if given[name]:
            option_name = "header" if name == "headers" else name
            raise click.UsageError(f"--{option_name} applies only with --prometheus URL")
    if not evidence and not example:
        raise click.UsageError("give EVIDENCE files or directories (or --example)")
    offsets = _offsets(clock_offset)
    with extras_needed("diagnose", "diagnose"):
        from svcdoctor.diagnose import Settings
        from svcdoctor.diagnose import diagnose as run
        from svcdoctor.diagnose.stats import preload
        from svcdoctor.evidence import read_evidence
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
    _render(result, fmt, html_out, plot_out, found)


def _render(
    result: Diagnosis,
    fmt: str,
    html_out: Path | None,
    plot_out: Path | None,
    evidence: Evidence | None = None,
) -> None:
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
            write_plot(plot_out, diagnosis_plot(evidence, result))
        if html_out:
            write_page(html_out, diagnosis_page(result, diagnosis_pictures(evidence, result)))
