"""``svcdoctor simulate``: how many requests a rollout drops at cluster scale, and the
preStop/grace period that make it drop none."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from svcdoctor.cli._output import stdout_console
from svcdoctor.cli._params import Duration, Number, OutputDir, OutputFile, option
from svcdoctor.cli._report import (
    html_option,
    plot_option,
    read_bundle,
    write_page,
    write_plot,
    written_option,
)
from svcdoctor.cli._scenario_options import DAY
from svcdoctor.cli._simulate import (
    build_params,
    given_options,
    model_options,
    with_progress,
)
from svcdoctor.cli.simulate_recommend import recommend_command
from svcdoctor.errors import CommandError


@click.group(invoke_without_command=True)
@model_options
@plot_option("the timeline of the first run")
@html_option
@written_option(
    "--emit-evidence",
    "emit",
    OutputDir(),
    "Also write the first run as an evidence bundle (the lab's formats) to this "
    "directory (new or empty).",
)
@written_option(
    "--emit-metrics",
    "metrics_out",
    OutputFile(),
    "Also write the simulated history as OpenMetrics text with timestamps (for "
    "`promtool tsdb create-blocks-from openmetrics`): request counters, kube-state-metrics, "
    "kube-proxy and node-exporter series in the exporters' names.",
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
    the defaults are cited in docs/commands/simulate.md, svcdoctor/simulate/params.py and
    svcdoctor/model/scenario.py. Exit code 0 whatever the result, 2 for invalid options or
    an output that cannot be written.
    """
    if ctx.invoked_subcommand is not None:
        # options given before the subcommand apply to it (`simulate --nodes 5000 recommend`)
        if plot_out or html_out or emit or metrics_out:
            raise click.UsageError(
                "--plot, --html, --emit-evidence and --emit-metrics are options of simulate "
                "itself (recommend takes its own --plot and --html)"
            )
        ctx.obj = given_options(ctx, options)
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

    result = with_progress(
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


def _emit(p: Any, seed: int, out: Path, fmt: str) -> None:
    from svcdoctor.evidence.write import write_bundle
    from svcdoctor.report.simulation import emitted_to_json
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
    failed = int((run.traffic.mechanism != 0).sum())
    meta = emitted_to_json(p, evidence.requests.height, failed, evidence.truth)
    (out / "simulate.json").write_text(meta)
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


simulate.add_command(recommend_command)
