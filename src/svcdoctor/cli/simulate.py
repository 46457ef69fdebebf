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

F = Callable[..., Any]
Progress = Callable[[], None]


def _dist(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    from svcdoctor.simulate import DistError, parse_dist

    try:
        return parse_dist(value)
    except DistError as exc:
        raise click.BadParameter(str(exc)) from None


def _count(ctx: click.Context, param: click.Parameter, value: str) -> str:
    text = value.strip()
    digits = text[:-1] if text.endswith("%") else text
    if not digits.isdigit():
        raise click.BadParameter(f"{value!r}: give a whole number or a percentage such as 25%")
    return text


class ModelOption(click.Option):
    """An option whose help shows the model's default (read when help is shown, so that
    starting the CLI does not import the model)."""

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        record = super().get_help_record(ctx)
        default = _model_default(self.name or "")
        if record is None or default is None:
            return record
        return record[0], f"{record[1]}  [model default: {default}]".strip()


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
        return None
    if name == "clients" and value == 0:
        return "0, one per node"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _opt(*decls: str, **attrs: Any) -> F:
    return click.option(*decls, cls=ModelOption, **attrs)


MODEL_OPTIONS: list[F] = [
    _opt("--nodes", type=click.IntRange(1, 20_000), help="Nodes (one kube-proxy each)."),
    _opt("--replicas", type=click.IntRange(1, 5_000), help="Pods of the Deployment."),
    click.option(
        "--max-surge", callback=_count, default="25%", show_default=True, help="Integer or %."
    ),
    click.option(
        "--max-unavailable",
        callback=_count,
        default="25%",
        show_default=True,
        help="Integer or %.",
    ),
    _opt("--rate", type=click.FloatRange(0, min_open=True), help="Requests per second."),
    _opt("--duration", type=click.FloatRange(0, min_open=True), help="Seconds."),
    _opt(
        "--rollout-at",
        type=click.FloatRange(0),
        help="Seconds into the window the rollout starts (with a short --duration: a tenth).",
    ),
    _opt("--no-rollout", is_flag=True, help="Steady traffic, no rolling update."),
    _opt("--startup", metavar="DIST", callback=_dist, help="New pod creation → Ready."),
    _opt("--prestop", type=click.FloatRange(0), help="preStop sleep, seconds."),
    _opt("--grace", type=click.FloatRange(0), help="terminationGracePeriodSeconds."),
    _opt("--shutdown", type=click.Choice(["naive", "graceful"])),
    _opt("--latency", metavar="DIST", callback=_dist, help="Request latency."),
    _opt("--clients", type=click.IntRange(0), help="Calling pods (0: one per node)."),
    _opt("--connection", type=click.Choice(["new", "keepalive", "http2"])),
    _opt("--max-connection-age", type=click.FloatRange(0, min_open=True)),
    _opt("--retries", type=click.IntRange(0, 10), help="Retries of failed requests."),
    _opt("--idempotent", type=click.FloatRange(0, 1), help="Share of requests safe to retry."),
    _opt("--timeout", type=click.FloatRange(0, min_open=True), help="Client timeout."),
    _opt("--bad-backends", type=click.IntRange(0), help="Pods that pass readiness but fail."),
    _opt("--fault", type=click.Choice(["5xx", "reset", "hang"])),
    _opt("--conntrack-max", type=click.IntRange(1), help="nf_conntrack_max per node."),
    _opt("--node-conn-rate", type=click.FloatRange(0), help="Other new connections/s per node."),
    _opt("--ingress-share", type=click.FloatRange(0, 1), help="Share via ingress-nginx."),
    _opt("--ingress-replicas", type=click.IntRange(1)),
    _opt("--lb-share", type=click.FloatRange(0, 1), help="Share via a cloud LB to pods."),
    _opt("--lb-delay", metavar="DIST", callback=_dist, help="LB deregistration delay."),
    _opt(
        "--propagation",
        metavar="DIST",
        callback=_dist,
        help="Deletion → proxy stops routing, all included: replaces controller + watch + "
        "apply, and min-sync batching unless --min-sync-period is given (e.g. the window "
        "`svcdoctor diagnose` measured).",
    ),
    _opt("--controller-latency", metavar="DIST", callback=_dist),
    _opt("--watch-latency", metavar="DIST", callback=_dist),
    _opt("--min-sync-period", type=click.FloatRange(0), help="kube-proxy's (1 s by default)."),
    _opt("--services", type=click.IntRange(0), help="Services in the cluster."),
    _opt("--endpoints", type=click.IntRange(0), help="Endpoints of all Services."),
    _opt("--ingress-sync-period", type=click.FloatRange(0), help="ingress-nginx's (3.3 s)."),
    click.option("--runs", type=click.IntRange(1, 100), default=3, show_default=True),
    click.option("--seed", type=click.IntRange(0), default=1, show_default=True),
    click.option(
        "-f",
        "--format",
        "fmt",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
    ),
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
    for option in reversed(MODEL_OPTIONS):
        f = option(f)
    return f


def build_params(o: dict[str, Any]) -> Any:
    """SimParams from the options given (the model's defaults for the rest)."""
    try:
        from svcdoctor.simulate import ParamError, SimParams, resolve_count
    except ImportError as exc:  # pragma: no cover - the extra is missing
        raise click.ClickException(
            f"simulate needs the 'diagnose' extra ({exc.name} is missing): "
            "pip install 'svcdoctor[diagnose]'"
        ) from None

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
@click.option(
    "--plot",
    "plot_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the timeline of the first run (PNG, or SVG by extension).",
)
@click.option(
    "--emit-evidence",
    "emit",
    type=click.Path(file_okay=False, path_type=Path),
    help="Also write the first run as an evidence bundle (the lab's formats) to this directory.",
)
@click.pass_context
def simulate(
    ctx: click.Context, /, plot_out: Path | None, emit: Path | None, **options: Any
) -> None:
    """Simulate a rolling update at cluster scale: failed requests per rollout (mean and
    95 % interval over --runs), by cause, and the timeline.

    Every delay is a distribution (DIST: SECONDS, uniform:LOW,HIGH, exp:MEAN or
    lognormal:MEDIAN,P99). Each option shows the model's default; the public figures behind
    the defaults are cited in the README and in svcdoctor/simulate/params.py. Exit code 0
    whatever the result, 2 for invalid options or an output that cannot be written.
    """
    if ctx.invoked_subcommand is not None:
        # options given before the subcommand apply to it (`simulate --nodes 5000 recommend`)
        if plot_out or emit:
            raise click.UsageError("--plot and --emit-evidence are options of simulate itself")
        ctx.obj = _given(ctx, options)
        return
    p = build_params(options)
    _writable(plot_out, emit)
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
        report.render_text(result, Console(highlight=False), _model_arguments(sys.argv))
    try:
        if plot_out:
            kind = "svg" if plot_out.suffix.lower() == ".svg" else "png"
            report.plot_simulation(result, plot_out, kind)
        if emit:
            _emit(p, options["seed"], emit, options["fmt"])
    except OSError as exc:
        click.echo(f"svcdoctor: error: cannot write {exc.filename or ''}: {exc.strerror}", err=True)
        sys.exit(2)


def _model_arguments(argv: list[str]) -> str:
    """The model options on the command line (what ``recommend`` takes too)."""
    args = argv[argv.index("simulate") + 1 :] if "simulate" in argv else []
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in ("--plot", "--emit-evidence", "--format", "-f", "--target-failures"):
            skip = "=" not in arg
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
        click.echo(f"svcdoctor: error: {problem}", err=True)
        sys.exit(2)


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
    from svcdoctor.report.simulation import params_to_dict
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
        "ground_truth": evidence.truth,
    }
    (out / "simulate.json").write_text(json.dumps(meta, indent=2))
    if evidence.kernel_log:
        (out / "kernel.log").write_text(evidence.kernel_log)
    if fmt != "json":
        click.echo(f"evidence bundle: {out}  (svcdoctor diagnose {out})", err=True)


@simulate.command("recommend")
@model_options
@click.option(
    "--target-failures",
    type=click.FloatRange(0, 1, max_open=True),
    default=0.0001,
    show_default=True,
    help="The largest acceptable share of the requests sent during a rollout that fail.",
)
@click.option(
    "--kubernetes-version",
    metavar="MAJOR.MINOR",
    default="1.30",
    show_default=True,
    help="Below 1.30 the snippet uses an exec sleep instead of the native sleep action.",
)
@click.pass_context
def recommend_command(
    ctx: click.Context, /, target_failures: float, kubernetes_version: str, **options: Any
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
        report.render_recommendation_text(result, Console(highlight=False))
    if not result.met:
        sys.exit(1)


def _version(text: str) -> tuple[int, int]:
    major, _, minor = text.strip().lstrip("v").partition(".")
    if not (major.isdigit() and minor.split(".")[0].isdigit()):
        raise click.BadParameter(
            f"{text!r}: expected MAJOR.MINOR such as 1.30", param_hint="--kubernetes-version"
        )
    return int(major), int(minor.split(".")[0])
