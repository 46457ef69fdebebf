"""``diagnose --prometheus``: the checks of its options and the query of the metrics store."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

import click

from svcdoctor.cli._errors import extras_needed
from svcdoctor.cli._params import Duration, F, ParamBase, option
from svcdoctor.model.duration import SPAN as SPAN_UNITS

if TYPE_CHECKING:
    from svcdoctor.diagnose import Settings
    from svcdoctor.model import Diagnosis

LATEST = 4_102_444_800.0  # Unix seconds of 2100-01-01: the latest time an option takes
DEFAULT_SINCE = 7 * 86_400.0
MAX_SPAN = 400 * 86_400.0  # seconds: more than a year of history in one diagnosis is a typo
MAX_STEPS = 25_000  # --step: query steps over the range (the default step keeps to it too)
PROMETHEUS_ONLY = ("since", "start", "end", "headers", "timeout", "step")
FILES_ONLY = ("clock_offset", "tz")


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
        if seconds is None or not (0 <= seconds <= LATEST):
            self.fail(
                f"{value!r} is not a time: give RFC 3339 (2026-12-01T10:00:00Z) or Unix "
                "seconds, from 1970 to 2100",
                param,
                ctx,
            )
        return seconds

    def get_metavar(self, param: click.Parameter, *args: Any, **kwargs: Any) -> str | None:
        return "TIME"


class Span(Duration):
    """A range to look back: ``7d``, ``36h``, ``1d12h``, ``90m``, ``2w`` or seconds."""

    name = "span"
    units = SPAN_UNITS

    def what(self) -> str:
        return "a span (seconds, or 90m, 36h, 7d, 2w)"


def check_sources(prometheus: bool, files: bool, given: dict[str, bool]) -> None:
    """Either a metrics store or evidence files, each with its own options."""
    if prometheus:
        if files:
            raise click.UsageError(
                "--prometheus reads a metrics store: give no EVIDENCE or --example"
            )
        for name in FILES_ONLY:
            if given[name]:
                raise click.UsageError(
                    f"--{name.replace('_', '-')} applies to evidence files, not --prometheus"
                )
        return
    for name in PROMETHEUS_ONLY:
        if given[name]:
            option_name = "header" if name == "headers" else name
            raise click.UsageError(f"--{option_name} applies only with --prometheus URL")
    if not files:
        raise click.UsageError("give EVIDENCE files or directories (or --example)")


_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


header_option = option(
    "--header",
    "headers",
    multiple=True,
    metavar="'NAME: VALUE'",
    help="With --prometheus: an HTTP header for every request (e.g. 'Authorization: Bearer "
    "TOKEN', 'X-Scope-OrgID: tenant'); repeatable.",
    default_text="none",
)


# the options of PROMETHEUS_ONLY but --header: (flag, type, help after "With --prometheus: ",
# default shown); --header stands after --end
_RANGE = (
    (
        "--since",
        Span(0, MAX_SPAN, low_open=True),
        "diagnose this far back from now (7d, 36h, 90m).",
        "7d",
    ),
    ("--start", Instant(), "start of the range (RFC 3339 or Unix seconds).", "--since"),
    ("--end", Instant(), "end of the range.", "now"),
)
_QUERY = (
    (
        "--timeout",
        Duration(0, 600, low_open=True),
        "the longest wait for one answer from the server.",
        "60s",
    ),
    (
        "--step",
        Duration(0, 86_400, low_open=True),
        "the query step (no finer than the scrape interval helps; a finer step sees a short "
        "race window in a short range).",
        "15s or coarser, from the range",
    ),
)


def prometheus_only_options(command: F) -> F:
    """The options that apply only with ``--prometheus`` (``PROMETHEUS_ONLY``): the range
    (``--since`` or ``--start``/``--end``), ``--header``, ``--timeout`` and ``--step``."""
    declared = [
        option(flag, type=kind, help=f"With --prometheus: {text}", default_text=shown)
        for flag, kind, text, shown in (*_RANGE, *_QUERY)
    ]
    decorators = [*declared[: len(_RANGE)], header_option, *declared[len(_RANGE) :]]
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


def parse_headers(values: tuple[str, ...]) -> dict[str, str]:
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


def prometheus_range(
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


def check_step(step: float | None, first: float, last: float) -> None:
    """``--step`` no finer than ``MAX_STEPS`` steps over the range."""
    if step is not None and (last - first) / step > MAX_STEPS:
        raise click.BadParameter(
            f"{step:g} s over {last - first:,.0f} s is more than {MAX_STEPS:,} steps: "
            f"give at least {math.ceil((last - first) / MAX_STEPS)}s",
            param_hint="--step",
        )


def service_ref(service: str | None) -> str | None:
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


def from_prometheus(
    url: str,
    headers: dict[str, str],
    timeout: float,
    service: str | None,
    span: tuple[float, float],
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
            return diagnose_prometheus(client, service, *span, settings, step)
        finally:  # the server's warnings (Thanos' partial responses) explain gaps: always
            for warning in client.warnings:
                click.echo(f"warning: Prometheus: {' '.join(warning.split())}", err=True)
