"""``svcdoctor cleanup``: delete what svcdoctor's active commands left in a cluster."""

from __future__ import annotations

import json
from typing import Any

import click

from svcdoctor.cli._cluster import cluster_options, fail
from svcdoctor.cli._params import option, output_option


@click.command()
@cluster_options(all_namespaces=False)
@option("--run", "run_id", metavar="ID", help="Only this run's objects.", default_text="every run")
@click.option("--dry-run", is_flag=True, help="List what would be deleted; delete nothing.")
@output_option(("text", "json"))
def cleanup(cluster: dict[str, Any], run_id: str | None, dry_run: bool, fmt: str) -> None:
    """Delete the Jobs, Pods and ConfigMaps labelled app.kubernetes.io/managed-by=svcdoctor.

    probe and rollout-test delete their objects themselves (after Ctrl-C and errors too);
    this removes what a killed run left. Exit codes: 0 nothing left (with --dry-run: nothing
    to delete), 1 objects remain after the wait (with --dry-run: there is something to
    delete, so a script can test for leftovers), 2 on a cluster problem (including when what
    is there cannot be listed: an empty answer is never guessed).
    """
    from svcdoctor.cluster import ClusterError
    from svcdoctor.cluster.agentjob import MANAGED_SELECTOR, RUN_LABEL, cleanup, remaining
    from svcdoctor.cluster.api import connect_active

    selector = MANAGED_SELECTOR + (f",{RUN_LABEL}={run_id}" if run_id else "")
    try:
        api = connect_active(**cluster)
        found = remaining(api, api.namespace, selector)
        if dry_run or not found:
            left, errors = found, []
        else:
            done = cleanup(api, api.namespace, selector)
            left, errors = list(done.left or ()), list(done.errors)
    except ClusterError as exc:
        fail(str(exc))
    if errors:
        fail("; ".join(errors))
    if fmt == "json":
        body = {"namespace": api.namespace, "found": found, "left": left, "dry_run": dry_run}
        click.echo(json.dumps(body, indent=2))
    elif not found:
        click.echo(f"nothing of svcdoctor's in namespace {api.namespace}")
    else:
        verb = "would delete" if dry_run else "deleted"
        for name in found:
            click.echo(f"{verb} {name}" if name not in left or dry_run else f"still there: {name}")
    raise SystemExit(1 if left else 0)  # with --dry-run, left is everything found
