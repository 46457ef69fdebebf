"""``svcdoctor simulate``: how many requests a rollout drops at cluster scale, and the
preStop/grace period that make it drop none."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from rich.console import Console

from svcdoctor.cli._errors import extras_needed
from svcdoctor.cli._output import stdout_console
from svcdoctor.cli._params import (
    Distribution,
    Duration,
    IntOrPercent,
    Number,
    Option,
    OutputDir,
    OutputFile,
    Share,
    option,
    output_option,
)
from svcdoctor.cli._report import html_option, plot_option, read_bundle, write_page, write_plot
from svcdoctor.cli.config import ConfigError, kube_version
from svcdoctor.errors import CommandError

F = Callable[..., Any]
Progress = Callable[[], None]


class ModelOption(Option):
    """An option whose help shows the model's default (read when help is shown, so that
    starting the CLI does not import the model)."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        record = super().get_help_record(ctx)
        default = _model_default(self.name or "")
        if record is None or default is None:
            return record
        return record[0], f"{record[1]}  [model default: {default}]".strip()


_UNSET = {
    "propagation": "none: controller + watch latency, the min-sync wait and the apply time",
    "max_connection_age": "none, connections live as long as the client",
}


def _model_default(name: str) -> str | None:
    from svcdoctor.simulate import SimParams

    p = SimParams()
    if name in _FIELDS:
        value = getattr(p, name)
    elif name in _PROPAGATION:
        value = getattr(p.propagation, _PROPAGATION[name])
    else:
        return None
    if value is None:
        return _UNSET.get(name, "none")
    if name == "clients" and value == 0:
        return "0, one per node"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _opt(*decls: str, **attrs: Any) -> F:
    return click.option(*decls, cls=ModelOption, **attrs)


DAY = 86_400.0
_DELAY = Distribution(DAY)

MODEL_OPTIONS: list[F] = [
    _opt("--nodes", type=Number(1, 20_000, integer=True), help="Nodes (one kube-proxy each)."),
    _opt("--replicas", type=Number(1, 5_000, integer=True), help="Pods of the Deployment."),
    option(
        "--max-surge",
        type=IntOrPercent(5_000),
        default="25%",
        help="Pods created above the replicas during the rollout: a number or a percentage.",
    ),
    option(
        "--max-unavailable",
        type=IntOrPercent(5_000),
        default="25%",
        help="Pods below the replicas during the rollout: a number or a percentage.",
    ),
    _opt("--rate", type=Number(0, 1e6, low_open=True), help="Requests per second."),
    _opt("--duration", type=Duration(0, DAY, low_open=True), help="Seconds of traffic."),
    _opt(
        "--rollout-at",
        type=Duration(0, DAY),
        help="Seconds into the window the rollout starts (with a short --duration: a tenth).",
    ),
    _opt("--no-rollout", is_flag=True, help="Steady traffic, no rolling update."),
    _opt("--startup", type=_DELAY, help="New pod creation → Ready."),
    _opt("--prestop", type=Duration(0, 3600), help="preStop sleep, seconds."),
    _opt("--grace", type=Duration(0, DAY), help="terminationGracePeriodSeconds."),
    _opt(
        "--shutdown",
        type=click.Choice(["naive", "graceful"]),
        help="At SIGTERM: naive exits at once, graceful drains in-flight requests first.",
    ),
    _opt("--latency", type=_DELAY, help="Request latency."),
    _opt(
        "--clients",
        type=Number(0, 1_000_000, integer=True),
        help="Calling pods (0: one per node).",
    ),
    _opt(
        "--connection",
        type=click.Choice(["new", "keepalive", "http2"]),
        help="How clients connect: a new connection per request, keep-alive, or HTTP/2 "
        "(one long-lived connection each).",
    ),
    _opt(
        "--max-connection-age",
        type=Duration(0, 7 * DAY, low_open=True),
        help="keepalive/http2: clients reconnect after this long.",
    ),
    _opt("--retries", type=Number(0, 10, integer=True), help="Retries of failed requests."),
    _opt("--idempotent", type=Share(), help="Share of requests safe to retry (0.9 or 90%)."),
    _opt("--timeout", type=Duration(0, 3600, low_open=True), help="Client timeout."),
    _opt(
        "--bad-backends",
        type=Number(0, 5_000, integer=True),
        help="Pods that pass readiness but fail real requests.",
    ),
    _opt(
        "--fault",
        type=click.Choice(["5xx", "reset", "hang"]),
        help="How a bad backend fails real requests.",
    ),
    _opt(
        "--conntrack-max",
        type=Number(1, 2**31 - 1, integer=True),
        help="nf_conntrack_max per node.",
    ),
    _opt(
        "--node-conn-rate",
        type=Number(0, 1e6),
        help="Other new connections/s per node.",
    ),
    _opt("--ingress-share", type=Share(), help="Share via ingress-nginx (0.5 or 50%)."),
    _opt(
        "--ingress-replicas",
        type=Number(1, 1_000, integer=True),
        help="ingress-nginx controller replicas.",
    ),
    _opt("--lb-share", type=Share(), help="Share via a cloud LB to pods (0.5 or 50%)."),
    _opt("--lb-delay", type=_DELAY, help="LB deregistration delay."),
    _opt(
        "--propagation",
        type=_DELAY,
        help="Deletion → proxy stops routing, all included: replaces controller + watch + "
        "apply, and min-sync batching unless --min-sync-period is given (e.g. the window "
        "`svcdoctor diagnose` measured).",
    ),
    _opt(
        "--controller-latency",
        type=_DELAY,
        help="Pod deletion → the EndpointSlice controller's update.",
    ),
    _opt(
        "--watch-latency",
        type=_DELAY,
        help="The API server's delivery of the update to each kube-proxy's watch.",
    ),
    _opt(
        "--min-sync-period",
        aliases=("--min-sync",),
        type=Duration(0, 3600),
        help="kube-proxy's --iptables-min-sync-period.",
    ),
    _opt(
        "--services",
        type=Number(0, 1_000_000, integer=True),
        help="Services in the cluster.",
    ),
    _opt(
        "--endpoints",
        type=Number(0, 10_000_000, integer=True),
        help="Endpoints of all Services.",
    ),
    _opt(
        "--ingress-sync-period",
        type=Duration(0, 3600),
        help="ingress-nginx's minimum time between reconfigurations.",
    ),
    option(
        "--runs",
        type=Number(1, 100, integer=True),
        default=3,
        help="Simulated windows (the mean and a 95 % interval over them).",
    ),
    option(
        "--seed",
        type=Number(0, 2**32 - 1, integer=True),
        default=1,
        help="Random seed of the first window.",
    ),
    output_option(("text", "json")),
]
_FIELDS = (
    "nodes",
    "replicas",
    "rate",
    "duration",
    "rollout_at",
    "startup",
    "prestop",
    "grace",
    "shutdown",
    "latency",
    "clients",
    "connection",
    "max_connection_age",
    "retries",
    "idempotent",
    "timeout",
    "bad_backends",
    "fault",
    "conntrack_max",
    "node_conn_rate",
    "ingress_share",
    "ingress_replicas",
    "lb_share",
)
_PROPAGATION = {
    "lb_delay": "lb",
    "propagation": "override",
    "controller_latency": "controller",
    "watch_latency": "watch",
    "min_sync_period": "min_sync",
    "services": "services",
    "endpoints": "endpoints",
    "ingress_sync_period": "ingress_sync",
}


def model_options(f: F) -> F:
    for decorator in reversed(MODEL_OPTIONS):
        f = decorator(f)
    return f


def build_params(o: dict[str, Any]) -> Any:
    """SimParams from the options given (the model's defaults for the rest)."""
    with extras_needed("simulate", "diagnose"):
        from svcdoctor.simulate import ParamError, SimParams, resolve_count

    p = SimParams()
    changes = {k: o[k] for k in _FIELDS if o.get(k) is not None}
    if "duration" in changes and "rollout_at" not in changes:
        # a short window: start the rollout a tenth of the way in (30 s for 300 s)
        changes["rollout_at"] = min(p.rollout_at, changes["duration"] / 10)
    prop = replace(
        p.propagation, **{f: o[k] for k, f in _PROPAGATION.items() if o.get(k) is not None}
    )
    if o.get("propagation") is not None and o.get("min_sync_period") is None:
        prop = replace(prop, min_sync=0.0)  # a measured delay already holds the sync wait
    replicas = changes.get("replicas", p.replicas)
    try:
        surge = resolve_count(o["max_surge"], replicas, True, "max-surge")
        unavailable = resolve_count(o["max_unavailable"], replicas, False, "max-unavailable")
        return replace(
            p,
            **changes,
            max_surge=surge,
            max_unavailable=unavailable,
            rollout=not o.get("no_rollout"),
            propagation=prop,
        ).validate()
    except ParamError as exc:
        raise click.UsageError(str(exc)) from None


def _given(ctx: click.Context, values: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v
        for k, v in values.items()
        if ctx.get_parameter_source(k) not in (ParameterSource.DEFAULT, None)
    }


@click.group(invoke_without_command=True)
@model_options
@plot_option("the timeline of the first run")
@html_option
@option(
    "--emit-evidence",
    "emit",
    type=OutputDir(),
    help="Also write the first run as an evidence bundle (the lab's formats) to this "
    "directory (new or empty).",
    default_text="not written",
)
@option(
    "--emit-metrics",
    "metrics_out",
    type=OutputFile(),
    help="Also write the simulated history as OpenMetrics text with timestamps (for "
    "`promtool tsdb create-blocks-from openmetrics`): request counters, kube-state-metrics, "
    "kube-proxy and node-exporter series in the exporters' names.",
    default_text="not written",
)
@option(
    "--rollouts",
    type=Number(1, 10_000, integer=True),
    default=1,
    help="--emit-metrics: rollouts in the history, one simulated window each.",
)
@option(
    "--every",
    type=Duration(0, 365 * DAY, low_open=True),
    help="--emit-metrics: time from one rollout window's start to the next's, with steady "
    "traffic between (e.g. 6h).",
    default_text="back to back",
)
@option(
    "--metrics-source",
    type=click.Choice(["nginx", "istio"]),
    default="nginx",
    help="--emit-metrics: the request counters' exporter (ingress-nginx or Istio).",
)
@option(
    "--metrics-pod-label",
    is_flag=True,
    help="--emit-metrics with istio: add destination_pod (not a default Istio label: it "
    "needs a custom tag).",
)
@option(
    "--scrape-interval",
    type=Duration(1, DAY),
    default=15.0,
    help="--emit-metrics: seconds between samples.",
)
@option(
    "--upstream-idle-timeout",
    type=Duration(0, DAY, low_open=True),
    help="--emit-metrics, keepalive/http2: the server's keep-alive timeout, shorter than the "
    "client's: a request on a connection idle that long fails (Istio flag UC).",
    default_text="no mismatch",
)
@click.pass_context
def simulate(
    ctx: click.Context,
    /,
    plot_out: Path | None,
    html_out: Path | None,
    emit: Path | None,
    metrics_out: Path | None,
    rollouts: int,
    every: float | None,
    metrics_source: str,
    metrics_pod_label: bool,
    scrape_interval: float,
    upstream_idle_timeout: float | None,
    **options: Any,
) -> None:
    """Simulate a rolling update at cluster scale: failed requests per rollout (mean and
    95 % interval over --runs), by cause, and the timeline. --html writes a report with
    the timeline and, with --emit-evidence, the per-pod lanes of the emitted bundle.

    Every delay is a distribution (DIST: SECONDS, uniform:LOW,HIGH, exp:MEAN or
    lognormal:MEDIAN,P99). Each option shows the model's default; the public figures behind
    the defaults are cited in the README and in svcdoctor/simulate/params.py. Exit code 0
    whatever the result, 2 for invalid options or an output that cannot be written.
    """
    if ctx.invoked_subcommand is not None:
        # options given before the subcommand apply to it (`simulate --nodes 5000 recommend`)
        if plot_out or html_out or emit or metrics_out:
            raise click.UsageError(
                "--plot, --html, --emit-evidence and --emit-metrics are options of simulate "
                "itself (recommend takes its own --plot and --html)"
            )
        ctx.obj = _given(ctx, options)
        return
    p = build_params(options)
    _writable(plot_out, emit)
    metrics_names = (
        "rollouts",
        "every",
        "metrics_source",
        "metrics_pod_label",
        "scrape_interval",
        "upstream_idle_timeout",
    )
    given = [n for n in metrics_names if ctx.get_parameter_source(n) != ParameterSource.DEFAULT]
    if given and metrics_out is None:
        flag = "--" + given[0].replace("_", "-")
        raise click.UsageError(f"{flag} shapes --emit-metrics: give --emit-metrics FILE")
    plan = None
    if metrics_out is not None:
        from svcdoctor.simulate import ParamError
        from svcdoctor.simulate.metrics import MetricsPlan, Source

        try:
            plan = MetricsPlan(
                rollouts,
                every,
                Source(metrics_source),
                metrics_pod_label,
                scrape_interval,
                upstream_idle_timeout,
            ).validate(p)
        except ParamError as exc:
            raise click.UsageError(str(exc)) from None
    from svcdoctor.report import simulation as report
    from svcdoctor.simulate import simulate as run

    result = _with_progress(
        options["fmt"],
        f"simulating {options['runs']} window(s)",
        options["runs"],
        lambda tick: run(p, options["runs"], options["seed"], tick),
    )
    if options["fmt"] == "json":
        click.echo(report.render_json(result))
    else:
        report.render_text(result, stdout_console(), _model_arguments(sys.argv))
    try:
        if plot_out:
            write_plot(plot_out, lambda out, fmt: report.plot_simulation(result, out, fmt))
        if emit:
            _emit(p, options["seed"], emit, options["fmt"])
        if metrics_out is not None and plan is not None:
            _emit_metrics(p, options["seed"], plan, metrics_out, options["fmt"])
        if html_out:
            write_page(html_out, _simulation_page(result, emit))
    except OSError as exc:
        raise CommandError(f"cannot write {exc.filename or ''}: {exc.strerror}") from None


def _simulation_page(result: Any, emit: Path | None) -> Any:
    """The report: the emitted bundle's per-pod lanes (diagnosed as ``diagnose`` would),
    then the simulated timeline."""
    from svcdoctor.report.html import diagnosis_pictures, figure, simulation_alt, simulation_page
    from svcdoctor.report.simulation import plot_simulation

    pictures = [figure(lambda out, fmt: plot_simulation(result, out, fmt), simulation_alt(result))]
    if emit is not None:
        pictures[:0] = diagnosis_pictures(read_bundle(emit))
    return simulation_page(result, pictures)


_NOT_MODEL = (
    "--plot",
    "--html",
    "--emit-evidence",
    "--emit-metrics",
    "--rollouts",
    "--every",
    "--metrics-source",
    "--scrape-interval",
    "--upstream-idle-timeout",
    "--format",
    "-o",
    "--output",
    "--target-failures",
)


def _model_arguments(argv: list[str]) -> str:
    """The model options on the command line (what ``recommend`` takes too)."""
    args = argv[argv.index("simulate") + 1 :] if "simulate" in argv else []
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in _NOT_MODEL:
            skip = "=" not in arg
            continue
        if name == "--metrics-pod-label":  # a flag: no value follows
            continue
        kept.append(shlex.quote(arg))
    return " ".join(kept)


def _writable(plot_out: Path | None, emit: Path | None) -> None:
    """Refuse outputs that cannot be written before the work, not after it (one line,
    exit 2)."""
    problem = None
    if plot_out is not None:
        folder = plot_out.parent
        if plot_out.suffix.lower() not in (".png", ".svg"):
            problem = f"--plot {plot_out}: the plot is written as PNG or SVG (.png, .svg)"
        elif not folder.is_dir() or not os.access(folder, os.W_OK):
            problem = f"cannot write {plot_out}: {folder} is not a writable directory"
    if emit is not None and problem is None:
        parent = next((d for d in (emit, *emit.parents) if d.exists()), Path("."))
        if emit.exists() and (not emit.is_dir() or any(emit.iterdir())):
            problem = f"--emit-evidence {emit}: exists and is not an empty directory"
        elif not parent.is_dir() or not os.access(parent, os.W_OK):
            problem = f"cannot write {emit}: {parent} is not a writable directory"
    if problem:
        raise CommandError(problem)


def _with_progress(fmt: str, label: str, steps: int, work: Callable[[Progress], Any]) -> Any:
    """A progress bar on a terminal (stderr); nothing when piped or with --format json."""
    if fmt == "json" or not sys.stderr.isatty():
        return work(lambda: None)
    from rich.progress import Progress as Bar

    with Bar(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=steps)
        return work(lambda: bar.advance(task))


def _emit(p: Any, seed: int, out: Path, fmt: str) -> None:
    from svcdoctor.evidence.write import write_bundle
    from svcdoctor.report.simulation import params_to_dict, sim_truth_to_dict
    from svcdoctor.simulate import simulate_run
    from svcdoctor.simulate.bundle import NAMESPACE, SERVICE, sim_evidence

    run = simulate_run(p, seed)
    evidence = sim_evidence(run)
    write_bundle(
        out,
        evidence.requests,
        evidence.events,
        evidence.pods,
        evidence.endpoints,
        NAMESPACE,
        SERVICE,
    )
    meta = {
        "source": "svcdoctor simulate",
        "parameters": params_to_dict(p),
        "requests": evidence.requests.height,
        "failed": int((run.traffic.mechanism != 0).sum()),
        "ground_truth": sim_truth_to_dict(evidence.truth),
    }
    (out / "simulate.json").write_text(json.dumps(meta, indent=2))
    if evidence.kernel_log:
        (out / "kernel.log").write_text(evidence.kernel_log)
    if fmt != "json":
        click.echo(f"evidence bundle: {out}  (svcdoctor diagnose {out})", err=True)


def _emit_metrics(p: Any, seed: int, plan: Any, out: Path, fmt: str) -> None:
    from svcdoctor.simulate import ParamError
    from svcdoctor.simulate.metrics import write_openmetrics

    try:
        truth = write_openmetrics(out, p, seed, plan)
    except ParamError as exc:  # a rollout that does not finish inside its window
        out.unlink(missing_ok=True)
        raise click.UsageError(str(exc)) from None
    if fmt != "json":
        click.echo(
            f"metrics: {out}  ({len(truth.windows)} window(s), {truth.requests:,} requests, "
            f"{truth.failed:,} failed, {truth.samples:,} samples; promtool tsdb "
            f"create-blocks-from openmetrics {out} DIR)",
            err=True,
        )


@simulate.command("recommend")
@model_options
@option(
    "--target-failures",
    type=Share(0, 1, high_open=True),
    default=0.0001,
    help="The largest acceptable share of the requests sent during a rollout that fail "
    "(0.0001 or 0.01%).",
)
@option(
    "--kubernetes-version",
    aliases=("--kube-version",),
    metavar="X.Y",
    default="1.30",
    help="Below 1.30 the snippet uses an exec sleep instead of the native sleep action.",
)
@option(
    "--observed-window",
    type=Duration(0, 3600, low_open=True),
    help="The race window a diagnosis measured (diagnose -o json: the race's "
    "details.window_seconds), drawn on the preStop curve of --plot/--html.",
    default_text="none",
)
@plot_option("the preStop curve: failed requests per rollout against preStop seconds")
@html_option
@click.pass_context
def recommend_command(
    ctx: click.Context,
    /,
    target_failures: float,
    kubernetes_version: str,
    observed_window: float | None,
    plot_out: Path | None,
    html_out: Path | None,
    **options: Any,
) -> None:
    """The smallest preStop sleep and grace period that keep a rollout's failures under
    --target-failures (the latency tail included: a request in flight at SIGKILL fails),
    checked by simulation, with the YAML to apply.

    Exit code 0 when the target is met, 1 when preStop and grace alone cannot meet it (the
    reasons say what else to change), 2 for invalid options.
    """
    inherited = ctx.parent.obj if ctx.parent and ctx.parent.obj else {}
    options = {**options, **inherited, **_given(ctx, options)}
    version = _version(kubernetes_version)
    if options.get("no_rollout"):
        raise click.UsageError("recommend needs a rollout: without one the race does not happen")
    p = build_params(options)
    from svcdoctor.report import simulation as report
    from svcdoctor.simulate import recommend

    result = _with_progress(
        options["fmt"],
        "searching preStop and grace period",
        3 * options["runs"],
        lambda tick: recommend(p, target_failures, options["runs"], options["seed"], version, tick),
    )
    if options["fmt"] == "json":
        click.echo(report.render_recommendation_json(result))
    else:
        report.render_recommendation_text(result, stdout_console())
    if plot_out or html_out:
        from svcdoctor.report.curves import curve_alt, plot_prestop_curve
        from svcdoctor.report.html import figure, recommendation_page

        def plot(out: Any, fmt: str) -> None:
            plot_prestop_curve(result, out, fmt, observed_window)

        try:
            if plot_out:
                write_plot(plot_out, plot)
            if html_out:
                picture = figure(plot, curve_alt(result, observed_window))
                write_page(html_out, recommendation_page(result, (picture,)))
        except OSError as exc:
            raise CommandError(f"cannot write {exc.filename or ''}: {exc.strerror}") from None
    if not result.met:
        sys.exit(1)


def _version(text: str) -> tuple[int, int]:
    try:
        return kube_version(text, "--kubernetes-version")
    except ConfigError as exc:
        raise click.BadParameter(
            f"{text!r}: expected MAJOR.MINOR such as 1.30", param_hint="--kubernetes-version"
        ) from exc
