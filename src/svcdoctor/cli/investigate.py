"""``svcdoctor investigate``: the five steps of problem.md against a live cluster, as one
checklist, one verdict, one fix and the next command (``cluster.investigate`` composes
scan, collect, diagnose, the metrics, probe and rollout-test through their Python APIs)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from svcdoctor.cli._checking import check_settings, config_prometheus, remedy_options
from svcdoctor.cli._cluster import (
    client_logs_option,
    duration_option,
    fail,
    no_redact_option,
    rate_option,
    service_command,
)
from svcdoctor.cli._errors import extras_needed
from svcdoctor.cli._output import stdout_console
from svcdoctor.cli._params import OutputDir, option, output_option
from svcdoctor.cli._progress import terminal_progress
from svcdoctor.cli._prometheus import from_prometheus, header_option, parse_headers
from svcdoctor.cli._report import write_page
from svcdoctor.cli.collect import INCOMPLETE

if TYPE_CHECKING:
    from svcdoctor.model import Diagnosis
    from svcdoctor.model.investigation import Investigation


@service_command
@option(
    "--out",
    type=OutputDir(),
    help="Directory for the evidence (redacted), diagnosis.json, investigation.json and "
    "report.html: new, empty or an earlier investigation's.",
    default_text="./investigate-SERVICE",
)
@duration_option("--since", default="1h", show_default=True, help="How far back to read.")
@duration_option(
    "--watch-rollout",
    "watch",
    help="Also watch the Service's pods and EndpointSlices this long, for a rollout you "
    "start meanwhile (as collect --watch; Ctrl-C ends it early).",
    default_text="no watch",
)
@client_logs_option("read")
@option(
    "--prometheus",
    metavar="URL",
    help="Also diagnose the metrics of a Prometheus-compatible query API over --since "
    "(default: the config file's prometheus URL).",
    default_text="config's or none",
)
@header_option
@click.option(
    "--yes",
    is_flag=True,
    help="Run the active steps: the direct probe (a Job in the namespace); with --rollout "
    "also a real rollout under load. Without it nothing is created and they are listed.",
)
@click.option("--per-node", is_flag=True, help="With --yes: also probe from each node.")
@click.option(
    "--rollout", is_flag=True, help="With --yes: restart the workload under load (rollout-test)."
)
@rate_option("With --rollout: requests/s of the load.")
@duration_option(
    "--duration",
    default="120s",
    show_default=True,
    help="With --rollout: bound on the load (the rollout must fit in it).",
)
@no_redact_option
@remedy_options()
@output_option(("text", "json"))
def investigate(
    service: str,
    cluster: dict[str, Any],
    out: Path | None,
    since: float,
    watch: float | None,
    client_logs: str | None,
    prometheus: str | None,
    headers: tuple[str, ...],
    yes: bool,
    per_node: bool,
    rollout: bool,
    rate: float,
    duration: float,
    no_redact: bool,
    fmt: str,
    config_path: Path | None,
    **opts: Any,
) -> None:
    """Investigate intermittent failures of SERVICE: the five steps of a systematic
    investigation as one checklist, then the verdict, the fix and the next command.

    1 quantify (failure rate with its interval, round fraction of the replicas, tracking
    deployments), 2 correlate with the pod lifecycle (race window, per hop), 3 bypass the
    Service (per-pod and per-node failure rates), 4 check the shutdown path (preStop,
    grace, SIGTERM, exit codes, hooks), 5 look at the client (reuse, retries). It runs the
    live checks (as scan), gathers the evidence of --since (as collect, redacted), reads
    --prometheus when given, and diagnoses all of it. Read-only unless --yes: then it
    also probes every endpoint directly (as probe; --per-node) and, with --rollout,
    restarts the workload under load (as rollout-test). Without --yes each skipped step is
    listed with the command that runs it. The remedy's settings are lint's (--config or
    the nearest config file, then the flags). --out holds the evidence, diagnosis.json (for
    `svcdoctor fix --from-diagnosis`), investigation.json and report.html.
    Exit codes: 0 no cause found, 1 a cause found, 2 a usage or cluster problem (an
    unknown Service), 3 no cause found and the investigation is incomplete (evidence
    missing: see "incomplete"), 130 interrupted.
    """
    if (per_node or rollout) and not yes:
        flag = "--per-node" if per_node else "--rollout"
        raise click.UsageError(f"{flag} is an active step: it needs --yes")
    prometheus = prometheus or config_prometheus(config_path)
    if headers and prometheus is None:
        raise click.UsageError("--header applies only with --prometheus URL")
    with extras_needed("investigate", "live", "diagnose"):
        from svcdoctor.cluster import ClusterError
        from svcdoctor.cluster.agentjob import AgentArgsError, Interrupted
        from svcdoctor.cluster.api import connect_active
        from svcdoctor.cluster.collect import BundleError
        from svcdoctor.cluster.investigate import REPORT_FILE, Request
        from svcdoctor.cluster.investigate import investigate as run
        from svcdoctor.cluster.rollout import Plan, Refused, check_plan
        from svcdoctor.diagnose import Settings
        from svcdoctor.evidence.prometheus import PrometheusURLError, check_url
    checks = check_settings(config_path, opts)
    # what the user gave is checked before anything is read (as diagnose and rollout-test do)
    if rollout:
        try:
            check_plan(Plan("", "deployments", "", Path(), service, float(rate), duration))
        except Refused as exc:
            raise click.UsageError(str(exc)) from None
    query = None
    if prometheus is not None:
        try:
            check_url(prometheus)
        except PrometheusURLError as exc:
            raise click.UsageError(str(exc)) from None
        sent = parse_headers(headers)
        now = time.time()

        def query() -> Diagnosis:
            span = (now - since, now)
            return from_prometheus(prometheus, sent, 60.0, ref, span, Settings(checks=checks), None)

    root = click.get_current_context().find_root().info_name
    root = root if root in ("svcdoctor", "kubectl svcdoctor") else "svcdoctor"
    connection = [
        arg
        for flag in ("kubeconfig", "context")
        if cluster[flag]
        for arg in (f"--{flag}", str(cluster[flag]))
    ]
    out = out or Path(f"investigate-{service}")
    try:
        api = connect_active(**cluster)
        ref = f"{api.namespace}/{service}"
        request = Request(
            api.namespace, service, out, since, watch,
            client_logs, yes, per_node, rollout, float(rate), duration, not no_redact,
            tuple(root.split()), tuple(connection),
        )  # fmt: skip
        with terminal_progress(fmt == "text" and sys.stderr.isatty(), watch) as display:
            result = run(display.wrap(api), api, request, checks, display.step, query)
    except (BundleError, ClusterError, Refused, AgentArgsError) as exc:
        fail(str(exc))
    except OSError as exc:  # --out's, or another file's or connection's: say which
        where = Path(exc.filename) if isinstance(exc.filename, str) else None
        mine = where is not None and (where == out or out in where.parents)
        fail(f"--out {out}: {exc.strerror or exc}" if mine else str(exc))
    except Interrupted as exc:
        left = exc.cleanup.describe_left()
        click.echo(
            f"svcdoctor: interrupted; {left or 'the objects created were deleted'}", err=True
        )
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("svcdoctor: interrupted; the investigation is incomplete", err=True)
        sys.exit(130)
    _report(result, out / REPORT_FILE)
    _render(result, fmt)
    if result.cause is not None:
        sys.exit(1)
    if result.incomplete:
        sys.exit(INCOMPLETE)


def _report(result: Investigation, path: Path) -> None:
    """``report.html``: the checklist and verdict first, then the diagnosis' pictures and
    the direct probe's (with --yes)."""
    from svcdoctor.report.backends import backends_alt, plot_backends
    from svcdoctor.report.html import diagnosis_pictures, figure
    from svcdoctor.report.investigation import investigation_page

    pictures = diagnosis_pictures(result.diagnosis) if result.diagnosis is not None else ()
    probe = result.probe
    if probe is not None and probe.backends:
        drawn = figure(lambda out, fmt: plot_backends(probe, out, fmt), backends_alt(probe))
        pictures = (*pictures, drawn)
    write_page(path, investigation_page(result, pictures))


def _render(result: Investigation, fmt: str) -> None:
    from svcdoctor.report.investigation import render_json, render_text

    if fmt == "json":
        click.echo(render_json(result))
    else:
        render_text(result, stdout_console())
