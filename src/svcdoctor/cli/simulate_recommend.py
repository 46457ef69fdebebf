"""``svcdoctor simulate recommend``: the smallest preStop sleep and grace period that keep
a rollout's failures under a target, checked by simulation."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from svcdoctor.cli._output import stdout_console
from svcdoctor.cli._params import Duration, Share, option
from svcdoctor.cli._report import html_option, plot_option, write_page, write_plot
from svcdoctor.cli._simulate import (
    build_params,
    given_options,
    model_options,
    parse_version,
    with_progress,
)
from svcdoctor.errors import CommandError


@click.command("recommend")
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
    options = {**options, **inherited, **given_options(ctx, options)}
    version = parse_version(kubernetes_version)
    if options.get("no_rollout"):
        raise click.UsageError("recommend needs a rollout: without one the race does not happen")
    p = build_params(options)
    from svcdoctor.report import simulation as report
    from svcdoctor.simulate import recommend

    result = with_progress(
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
