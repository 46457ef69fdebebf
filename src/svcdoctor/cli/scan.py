"""``svcdoctor scan``: lint's rules and the live-only ones against a running cluster."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.markup import escape

from svcdoctor.cli._checking import check_options, exit_for, load_settings, render
from svcdoctor.cli._cluster import cluster_options, duration_option, fail
from svcdoctor.cli._output import stdout_console
from svcdoctor.cli._params import option
from svcdoctor.cluster import ClusterError

if TYPE_CHECKING:
    from svcdoctor.cluster.scan import ScanReport


@contextmanager
def _reading(show: bool) -> Iterator[Callable[[str], None]]:
    """A spinner naming what is being read or watched, on stderr when it is a terminal."""
    if not show:
        yield lambda _: None
        return
    console = Console(stderr=True)
    with console.status("reading the cluster…") as status:
        yield status.update


@click.command()
@click.argument("services", nargs=-1, metavar="[SERVICE]...")
@cluster_options()
@option(
    "-l",
    "--selector",
    metavar="SELECTOR",
    help="Only Services, workloads and pods with these labels (as kubectl get -l).",
    default_text="all",
)
@duration_option(
    "--watch",
    help="First watch the pods for this long (e.g. during a rollout you start): the "
    "terminations of pods deleted meanwhile are checked too. Ctrl-C ends it early.",
    default_text="no watch",
)
@check_options(("text", "json", "sarif"))
def scan(
    services: tuple[str, ...],
    cluster: dict[str, Any],
    selector: str | None,
    watch: float | None,
    fmt: str,
    exit_zero: bool,
    config_path: Path | None,
    no_fixes: bool,
    **opts: Any,
) -> None:
    """Check the Services of a live cluster for what causes intermittent failures.

    Runs lint's rules on the live objects (backends from the EndpointSlices, replicas from
    status, the server's version for the preStop advice) and the live-only rules (SIGKILLs
    at the grace period, failing preStop hooks, flapping readiness, stale endpoints,
    kube-proxy's sync period and conntrack). SERVICE (NAME or NAMESPACE/NAME) limits the
    scan to those Services and the workloads behind them. Pods a rollout deletes vanish
    with their exit codes: --watch 2m while you roll out keeps them. Read-only. Exit codes
    as lint's; 2 when the cluster cannot be read.
    """
    # imported here: reading timestamps pulls in the evidence readers (polars)
    from svcdoctor.cluster.api import connect
    from svcdoctor.cluster.scan import scan_snapshot
    from svcdoctor.cluster.snapshot import read_snapshot, watch_deleted_pods, with_deleted_pods

    settings, fail_on, _ = load_settings(config_path, opts)
    try:
        reader = connect(**cluster)
        namespace = None if cluster["all_namespaces"] else reader.namespace
        with _reading(sys.stderr.isatty()) as step:
            watched = (
                watch_deleted_pods(reader, namespace, selector, watch, step) if watch else None
            )
            snapshot = read_snapshot(reader, namespace, selector, services, step)
        if watched:
            snapshot = with_deleted_pods(snapshot, *watched)
    except ClusterError as exc:
        fail(str(exc))
    if not (snapshot.services or snapshot.pods or snapshot.deployments):
        where = f"namespace {namespace}" if namespace else "any namespace"
        fail(
            f"no Services or workloads in {where} of context {snapshot.context}"
            f"{' matching -l ' + selector if selector else ''}: nothing to scan "
            "(a typo in -n? -A scans every namespace)"
        )
    report = scan_snapshot(snapshot, settings, server_decides=not opts["kube_version"])
    _render(report, fmt, no_fixes)
    exit_for(report.result, fail_on, exit_zero)


def _render(report: ScanReport, fmt: str, no_fixes: bool) -> None:
    if fmt == "json":
        click.echo(report.to_json())
        return
    if fmt == "text":
        console = stdout_console()
        console.print(f"[bold]{escape(report.header)}[/]", soft_wrap=True)
        for note in report.notes:
            console.print(f"[dim]note: {escape(note)}[/]", soft_wrap=True)
        console.print()
    else:
        for note in report.notes:
            click.echo(f"svcdoctor: note: {note}", err=True)
    render(report.result, fmt, no_fixes)
