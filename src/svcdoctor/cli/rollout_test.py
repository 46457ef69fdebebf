"""``svcdoctor rollout-test``: restart a workload under load and measure what it drops."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from svcdoctor.cli._cluster import (
    agent_run,
    agent_run_options,
    cluster_options,
    duration_option,
    fail,
    image_option,
    network_policy_option,
    path_option,
    port_option,
    print_notes,
)
from svcdoctor.cli._output import stdout_console
from svcdoctor.cli._params import Number, OutputDir, option
from svcdoctor.cli._report import delay_sentence, rollout_page, write_page

if TYPE_CHECKING:
    from svcdoctor.cluster.rollout import RolloutTest

DIAGNOSIS_FILE = "diagnosis.json"  # beside the bundle's evidence; diagnose skips it


@click.command("rollout-test")
@click.argument("workload")
@cluster_options(all_namespaces=False)
@option("--service", metavar="NAME", help="Service to load.", default_text="the one selecting it")
@port_option
@option("--rate", type=Number(0, 5000, low_open=True), default=50, help="Requests/s of the load.")
@duration_option(
    "--duration",
    default="120s",
    show_default=True,
    help="Bound on the load (the rollout and --tail must fit in it).",
)
@duration_option(
    "--tail", default="5s", show_default=True, help="Load kept on after the rollout finished."
)
@option(
    "--max-failures",
    type=Number(0, None, integer=True),
    default=0,
    help="Failures allowed before the exit code is 1 (a CI gate).",
)
@path_option
@option(
    "--through",
    metavar="EDGE",
    help="Send the load through an edge: http://HOST[:PORT]/PATH, ingress/NAME or gateway/NAME.",
    default_text="the Service's ClusterIP",
)
@click.option("--keepalive", is_flag=True, help="Reuse connections (default: one per request).")
@image_option("Image of the agent (python 3.9+).")
@option(
    "--out",
    type=OutputDir(),
    help="Evidence bundle directory (svcdoctor diagnose reads it).",
    default_text="./rollout-test-WORKLOAD",
)
@option(
    "--mode",
    type=click.Choice(["rollout", "drain", "scale-down"]),
    default="rollout",
    show_default=True,
    help="The disruption: a rollout restart, or --node drained as kubectl drain does "
    "(scale-down: the same steps, as an autoscaler removing the node takes them), then "
    "uncordoned.",
)
@option(
    "--node",
    metavar="NAME",
    help="The node --mode drain|scale-down empties.",
    default_text="none (a rollout)",
)
@click.option("--allow-outage", is_flag=True, help="Test a workload with fewer than 2 ready pods.")
@click.option("--no-redact", is_flag=True, help="Keep secrets (env values, tokens) in the bundle.")
@network_policy_option
@agent_run_options("Restart the workload (required).")
def rollout_test(
    workload: str,
    cluster: dict[str, Any],
    service: str | None,
    port: str | None,
    rate: float,
    duration: float,
    tail: float,
    max_failures: float,
    path: str,
    through: str | None,
    keepalive: bool,
    image: str | None,
    out: Path | None,
    mode: str,
    node: str | None,
    allow_outage: bool,
    no_redact: bool,
    network_policy: bool,
    yes: bool,
    fmt: str,
    html_out: Path | None,
) -> None:
    """Restart WORKLOAD (deployment/NAME) under load and report what the rollout dropped;
    with --mode drain --node NAME, drain that node instead (cordon, evictions honouring
    PodDisruptionBudgets, as kubectl drain), uncordoning it at the end, also after Ctrl-C.

    Starts svcdoctor's agent as a Job sending --rate requests/s through the Service (or
    --through an edge in front of it: a URL, ingress/NAME or gateway/NAME),
    restarts the workload as `kubectl rollout restart` does, watches pods and
    EndpointSlices until the rollout has finished plus --tail, stops the load, writes the
    evidence bundle (--out) and diagnoses it: failures by kind and phase, the race window,
    the deletion → endpoint-update delay, the cause and the preStop/grace fix. Ctrl-C stops
    the load and lets the rollout finish. Everything created is labelled
    app.kubernetes.io/managed-by=svcdoctor and deleted at the end. Exit codes: 0 failures
    ≤ --max-failures, 1 more, 2 refused (no --yes, < 2 ready replicas, --duration not
    above the 3 s warm-up plus --tail), a cluster problem, or an incomplete test (the
    rollout did not finish within --duration, the load agent ended without its done
    line: the report is printed, the reason is the one-line error), 130 interrupted.
    """
    from svcdoctor.cluster.api import connect_active
    from svcdoctor.cluster.rollout import Mode, Plan, Refused, parse_workload, run

    with agent_run("the load Job", "was"):
        kind, name = parse_workload(workload)
        what = (
            f"restarts {workload} (a real rollout)"
            if mode == "rollout"
            else f"cordons {node or 'the --node'}, evicts its pods (uncordoned at the end)"
        )
        if not yes:
            raise Refused(f"rollout-test {what} and runs a load Job: pass --yes to go ahead")
        api = connect_active(**cluster)
        plan = Plan(
            api.namespace, kind, name, out or Path(f"rollout-test-{name}"), service,
            float(rate), duration, tail=tail, keepalive=keepalive, path=path, port=port,
            image=image, allow_outage=allow_outage, redact=not no_redact,
            network_policy=network_policy, through=through, mode=Mode(mode), node=node,
        )  # fmt: skip
        show = fmt == "text" and sys.stderr.isatty()
        outcome = run(api, plan, (lambda m: click.echo(m, err=True)) if show else (lambda _: None))
        _write_diagnosis(outcome)
    if fmt == "json":
        click.echo(json.dumps(to_dict(outcome), indent=2))
    else:
        _text(outcome)
    if html_out is not None:
        write_page(
            html_out,
            rollout_page(outcome, json.dumps(to_dict(outcome), indent=2)),
        )
    if outcome.interrupted:
        sys.exit(130)
    if outcome.incomplete:
        fail(f"rollout-test incomplete: {'; '.join(outcome.incomplete)}")
    sys.exit(1 if outcome.failed > max_failures else 0)


def to_dict(t: RolloutTest) -> dict[str, Any]:
    """``--format json``: the keys ``lab run --format json`` uses where they overlap."""
    prestop, grace = t.remedy
    primary = t.primary
    return {
        "workload": t.plan.workload,
        "mode": t.plan.mode.value,
        "node": t.plan.node,
        "through": t.plan.through,
        "path": t.edge.route(f"{t.plan.namespace}/{t.service}") if t.edge else None,
        "requests": t.requests,
        "failed": t.failed,
        "by_outcome": t.by_outcome,
        "primary_cause": primary.cause.value if primary else None,
        "dropped_at": t.dropped_at,
        "window_seconds": t.window_seconds,
        "endpoint_update_seconds": t.endpoint_update_seconds,
        "remedy": {"prestop_seconds": prestop, "grace_seconds": grace},
        "bundle": str(t.bundle),
        "diagnosis_file": str(diagnosis_file(t)) if t.diagnosis is not None else None,
    }


def diagnosis_file(t: RolloutTest) -> Path:
    """Where the bundle's diagnosis is: what ``svcdoctor diagnose --format json BUNDLE``
    prints, and ``svcdoctor fix --from-diagnosis`` reads."""
    return t.bundle / DIAGNOSIS_FILE


def _write_diagnosis(t: RolloutTest) -> None:
    if t.diagnosis is None:
        return
    from svcdoctor.cluster.collect import write_atomic
    from svcdoctor.report.diagnosis import diagnosis_to_dict

    document = diagnosis_to_dict(t.diagnosis)
    if t.edge is not None:  # the hop the load entered by, edge first
        document["load_path"] = t.edge.route(f"{t.plan.namespace}/{t.service}")
    try:
        write_atomic(diagnosis_file(t), json.dumps(document, indent=2, default=str) + "\n")
    except OSError as exc:
        fail(f"--out {t.bundle}: writing {DIAGNOSIS_FILE}: {exc.strerror or exc}")


def _event(o: RolloutTest) -> str:
    return "rollout" if o.plan.node is None else f"{o.plan.mode} of {o.plan.node}"


def _done_to(o: RolloutTest) -> str:
    return "restarted" if o.plan.node is None else f"disrupted by the {_event(o)}"


def _text(o: RolloutTest) -> None:
    console = stdout_console(markup=False)  # the analyses' sentences, as they are
    kinds = ", ".join(f"{k} {n}" for k, n in o.by_outcome.items() if k != "ok")
    where = o.edge.route(f"{o.plan.namespace}/{o.service}") if o.edge else f"Service {o.service}"
    console.print(
        f"{o.plan.workload} in {o.plan.namespace} {_done_to(o)} under load through {where}: "
        f"{o.failed} of {o.requests} requests failed" + (f" ({kinds})" if o.failed else ""),
        soft_wrap=True,
    )
    for phase, counts in o.by_phase.items():
        failed = ", ".join(f"{k} {n}" for k, n in counts.items() if k != "requests")
        line = f"  {phase} the {_event(o)}: {counts['requests']} requests"
        console.print(line + (f", failed: {failed}" if failed else ""))
    for delay in o.delays:
        console.print("  " + delay_sentence(delay))
    if o.endpoint_update_seconds is not None:
        console.print(
            f"deletion → endpoint update seen in the API: up to "
            f"{o.endpoint_update_seconds:.2f} s (kube-proxy on each node follows later)"
        )
    if o.diagnosis_error:
        console.print(f"note: the bundle could not be diagnosed: {o.diagnosis_error}")
    if o.failed:
        primary = o.primary
        console.print(f"cause: {primary.cause.value if primary else 'none named'}")
        for line in primary.evidence if primary else ():
            console.print(f"  - {line}", soft_wrap=True)
        if o.dropped_at:
            console.print(f"dropped at: {o.dropped_at}", soft_wrap=True)
        race = o.race
        if race is not None and race.window is not None:
            low, high = race.window.ci95
            console.print(f"race window: {race.window.seconds:g} s (95 % CI {low:g} to {high:g} s)")
        elif o.window_seconds is not None:
            console.print(f"race window: {o.window_seconds:g} s (deletion → last failure)")
        prestop, grace = o.remedy
        if prestop is not None:
            console.print(
                f"fix: preStop sleep {prestop} s, terminationGracePeriodSeconds {grace}; "
                f"to apply it: svcdoctor fix YOUR-MANIFESTS --from-diagnosis "
                f"{shlex.quote(str(diagnosis_file(o)))} --write",
                soft_wrap=True,
            )
        for fix in primary.fixes if primary else ():
            if fix.patch is None:  # the remedy's patch is in the bundle's diagnosis
                console.print(f"  - {fix.text}", soft_wrap=True)
    elif o.incomplete:
        console.print(f"no request failed, but the test is INCOMPLETE: {'; '.join(o.incomplete)}")
    elif o.interrupted:
        console.print("no request failed before the interrupt (the test did not finish)")
    else:
        console.print(f"no request failed: the {_event(o)} is zero-downtime at this rate")
    print_notes(console, o.notes, o.cleanup)
    diagnosed = f"; its diagnosis: {diagnosis_file(o)}" if o.diagnosis is not None else ""
    console.print(f"bundle: {o.bundle} (svcdoctor diagnose {o.bundle}{diagnosed})", soft_wrap=True)
