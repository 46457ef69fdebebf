"""``svcdoctor collect``: gather one Service's evidence bundle from a live cluster."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import click
from rich.table import Table

from svcdoctor.cli._cluster import (
    client_logs_option,
    duration_option,
    fail,
    no_redact_option,
    service_command,
)
from svcdoctor.cli._errors import extras_needed
from svcdoctor.cli._output import stdout_console
from svcdoctor.cli._params import OutputDir, output_option
from svcdoctor.cli._progress import terminal_progress

INCOMPLETE = 3  # the exit code of a bundle written with evidence missing


@service_command
@click.option(
    "--out",
    required=True,
    type=OutputDir(),
    help="Bundle directory: new, empty or an earlier collect bundle (replaced).",
)
@duration_option("--since", default="1h", show_default=True, help="How far back to read logs.")
@duration_option(
    "--watch",
    help="Also record every change of the EndpointSlices and pods for this long.",
    default_text="no watch",
)
@client_logs_option("keep")
@no_redact_option
@output_option(("text", "json"))
def collect(
    service: str,
    cluster: dict[str, Any],
    out: Path,
    since: float,
    watch: float | None,
    client_logs: str | None,
    no_redact: bool,
    fmt: str,
) -> None:
    """Write SERVICE's evidence bundle for `svcdoctor diagnose`.

    The bundle holds the Service, its EndpointSlices, its pods (termination states
    included), their owners, the namespace's events, and the logs about it of the
    ingress-nginx controllers and Istio sidecars over --since. --watch records a rollout
    that happens meanwhile as a timeline (Ctrl-C ends it early; the bundle is still
    complete). Secrets are redacted (counts in collect.json) unless --no-redact.
    Read-only. Exit codes: 0 written and complete, 3 written but incomplete
    (collect.json's "missing" says what: a lost server, a watch that could not be resumed,
    a capped log, a forbidden read), 2 on a cluster or --out problem (nothing written).
    """
    with extras_needed("collect", "live", "diagnose"):
        from svcdoctor.cluster import ClusterError
        from svcdoctor.cluster.api import connect
        from svcdoctor.cluster.collect import BundleError, Request, check_out
        from svcdoctor.cluster.collect import collect as run
        from svcdoctor.evidence.redact import Redactor
    try:
        check_out(out)
        reader = connect(**cluster)
        request = Request(reader.namespace, service, out, since, watch, client_logs)
        with terminal_progress(fmt == "text" and sys.stderr.isatty(), watch) as display:
            result = run(display.wrap(reader), request, display.step, Redactor(not no_redact))
    except (BundleError, ClusterError) as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"--out {out}: {exc.strerror or exc}")
    except KeyboardInterrupt:
        click.echo(f"svcdoctor: interrupted; the bundle in {out} is incomplete", err=True)
        sys.exit(130)
    if fmt == "json":
        click.echo(json.dumps(result, indent=2))
    else:
        _summary(result, out)
    if not result.get("complete"):
        sys.exit(INCOMPLETE)


def _summary(result: dict[str, Any], out: Path) -> None:
    from svcdoctor.evidence.redact import redaction_note

    console = stdout_console()
    missing = result.get("missing") or []
    if missing:
        console.print(f"INCOMPLETE bundle: {len(missing)} piece(s) of evidence missing")
        for text in missing:
            console.print(f"missing: {text}", soft_wrap=True)
    span = result["span"]
    watched = result.get("watch_seconds")
    console.print(
        f"Collected {result['service']} from context {result['context']} "
        f"(Kubernetes {result['server_version']})"
        + (f", watched {watched:.1f} s" if watched else ""),
        soft_wrap=True,
    )
    table = Table("file", "format", "rows", "from", "to", box=None, pad_edge=False)
    for f in result["files"]:
        table.add_row(f["file"], f["format"], str(f["rows"]), _clock(f["start"]), _clock(f["end"]))
    table.columns[0].overflow = "fold"
    console.print(table)
    if span["start"]:
        console.print(f"evidence from {span['start']} to {span['end']}")
    for note in result["notes"]:
        if note not in missing:  # printed once, as missing, above
            console.print(f"note: {note}", soft_wrap=True)
    console.print(redaction_note(result["redacted"]), soft_wrap=True)
    console.print(f"next: svcdoctor diagnose {shlex.quote(str(out))}", soft_wrap=True)


def _clock(stamp: str | None) -> str:
    """``HH:MM:SS.mmm`` of an ISO time (the date is on the span line)."""
    return stamp[11:23] if stamp else ""
