"""``svcdoctor probe``: hit every endpoint of a Service directly (and the Service itself)
from inside the cluster, and name the pod or node that fails more than the others."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table

from svcdoctor.cli._cluster import (
    agent_run,
    agent_run_options,
    duration_option,
    image_option,
    network_policy_option,
    path_option,
    port_option,
    print_notes,
    rate_option,
    service_command,
)
from svcdoctor.cli._output import stdout_console
from svcdoctor.cli._params import Number, option
from svcdoctor.cli._probe_plan import plan_dict, plan_lines
from svcdoctor.cli._report import probe_page, write_page

if TYPE_CHECKING:
    from svcdoctor.cluster.probe import ProbeOutcome


@service_command
@option(
    "--count",
    type=Number(1, 10_000, integer=True),
    default=50,
    help="Requests to each endpoint, directly (and as many per endpoint through the Service).",
)
@path_option
@option(
    "--protocol",
    type=click.Choice(["http", "tcp", "grpc"]),
    default="http",
    help="HTTP GET, a TCP connect, or a gRPC health check (the image needs grpcio).",
)
@port_option
@rate_option("Requests/s through the Service.")
@duration_option("--timeout", default="2s", show_default=True, help="Bound on each request.")
@click.option("--per-node", is_flag=True, help="Also probe the Service from one pod on each node.")
@option(
    "--max-nodes",
    type=Number(1, 1000, integer=True),
    default=20,
    help="Nodes --per-node probes from.",
)
@image_option("Image of the agent (any with python 3.9+).")
@network_policy_option
@click.option(
    "--show-agent",
    is_flag=True,
    help="Print the objects --yes would create in full (YAML with the agent's source); "
    "create nothing.",
)
@agent_run_options("Create the agent's Job; without it, print a short plan and exit.")
def probe(
    service: str,
    cluster: dict[str, Any],
    count: float,
    path: str,
    protocol: str,
    port: str | None,
    rate: float,
    timeout: float,
    per_node: bool,
    max_nodes: float,
    image: str | None,
    network_policy: bool,
    show_agent: bool,
    yes: bool,
    fmt: str,
    html_out: Path | None,
) -> None:
    """Probe every endpoint of SERVICE directly and through the Service, from inside.

    Runs svcdoctor's agent (standard-library Python, shipped in a ConfigMap) as a Job in
    the Service's namespace; everything it creates is labelled
    app.kubernetes.io/managed-by=svcdoctor and deleted at the end. Without --yes it
    prints a short plan of what it would create (objects, image, targets, bounds) and exits
    0; --show-agent prints those objects in full instead. With one endpoint, or when every endpoint
    fails alike, there is nothing to compare: a note says so. Exit codes: 0 no endpoint or
    node stands out and the Service passes, 1 one stands out (its failure rate is above
    the others' beyond chance) or the Service fails as a whole (the upper end of the 95 %
    interval of its success rate is below 99 %), 2 on a cluster or input problem (an
    argument the agent would refuse, no node for --per-node), 130 interrupted.
    """
    from svcdoctor.cluster.agentjob import agent_source, manifests, to_yaml
    from svcdoctor.cluster.api import connect_active
    from svcdoctor.cluster.probe import Options, plan, run

    with agent_run("the probe's objects"):
        api = connect_active(**cluster)
        options = Options(
            api.namespace, service, int(count), path, protocol, port, float(rate), timeout,
            per_node, int(max_nodes), image, network_policy,
        )  # fmt: skip
        chosen = plan(api, options)
        if show_agent:
            click.echo(to_yaml(manifests(chosen.spec, agent_source())), nl=False)
            click.echo(
                f"# svcdoctor probe: nothing created; run with --yes to create the above in "
                f"namespace {api.namespace} (deleted at the end)",
                err=True,
            )
            return
        if not yes:
            body = plan_dict(chosen, agent_source())
            click.echo(json.dumps(body, indent=2) if fmt == "json" else "\n".join(plan_lines(body)))
            return
        progress = _progress(fmt == "text" and sys.stderr.isatty())
        outcome = run(api, chosen, progress)
    result = outcome.result
    body = {
        "service": f"{api.namespace}/{service}",
        "run": chosen.spec.run_id,
        **result.to_dict(),
        "cleaned_up": outcome.cleanup is not None and outcome.cleanup.clean,
        "notes": list(outcome.notes),
    }
    if fmt == "json":
        click.echo(json.dumps(body, indent=2))
    else:
        _text(outcome, f"{api.namespace}/{service}")
    if html_out is not None:
        raw = json.dumps(body, indent=2)
        page = probe_page(
            result, f"{api.namespace}/{service}", chosen.spec.run_id, outcome.notes, raw
        )
        write_page(html_out, page)
    sys.exit(1 if result.failing else 0)


def _progress(show: bool) -> Any:
    if not show:
        return lambda _: None
    return lambda message: click.echo(message, err=True)


def _pct(x: float) -> str:
    return f"{x:.1%}"


def _text(outcome: ProbeOutcome, service: str) -> None:
    console = stdout_console(markup=False)  # the analyses' sentences, as they are
    result = outcome.result
    table = Table("pod", "endpoint", "requests", "success (95% CI)", "p50/p99 ms", "failures",
                  "verdict", box=None, pad_edge=False)  # fmt: skip
    for t in result.backends:
        lat = dict(t.latency_ms)
        table.add_row(
            t.label or "-",
            t.key,
            str(t.requests),
            f"{_pct(t.success_rate)} ({_pct(t.success_ci95[0])}-{_pct(t.success_ci95[1])})",
            f"{lat[50]:.1f}/{lat[99]:.1f}" if lat else "-",
            ", ".join(f"{k} {n}" for k, n in t.by_outcome) or "-",
            f"FAILS MORE (p={t.outlier.p_value:.2g})" if t.outlier else "ok",
        )
    console.print(f"Direct probe of the endpoints of {service}:")
    console.print(table)
    if result.service:
        s = result.service
        console.print(
            f"Through the Service: {s.requests - s.failures} of {s.requests} ok "
            f"({_pct(s.success_rate)}, 95% CI {_pct(s.success_ci95[0])}-{_pct(s.success_ci95[1])})"
            + (": " + ", ".join(f"{k} {n}" for k, n in s.by_outcome) if s.by_outcome else "")
        )
    for t in result.nodes:
        verdict = f"route FAILS MORE (p={t.outlier.p_value:.2g})" if t.outlier else "ok"
        console.print(
            f"from node {t.key}: {t.requests - t.failures} of {t.requests} ok "
            f"({_pct(t.success_rate)}) {verdict}"
        )
    for t in result.bad_backends:
        assert t.outlier is not None
        console.print(
            f"singled out: {t.label or t.key} ({t.key}) fails {t.failures} of {t.requests} "
            f"requests while the others fail {t.outlier.others_failure_rate:.2%}: take it out "
            "of the Service and find why its readiness probe passes (cause: backend)",
            soft_wrap=True,
        )
    for t in result.bad_nodes:
        assert t.outlier is not None
        console.print(
            f"singled out: node {t.key}'s route to the Service fails {t.failures} of "
            f"{t.requests} connections while the other nodes fail "
            f"{t.outlier.others_failure_rate:.2%}: check its conntrack table, kube-proxy "
            "and datapath (cause: infra)",
            soft_wrap=True,
        )
    if not result.singled_out and len(result.backends) > 1:
        console.print("no endpoint or node fails more than the others")
    print_notes(console, outcome.notes, outcome.cleanup, "after clean-up, ")
