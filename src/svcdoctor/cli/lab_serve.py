"""``svcdoctor lab serve``: a lab cluster served as a Kubernetes API, with exporters."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from svcdoctor.cli._lab import (
    MAX_SERVE,
    choose_datapath,
    datapath_option,
    fail,
    on_datapath,
    scenario_option,
    seed_option,
)
from svcdoctor.cli._params import Duration, F, OutputFile, option, output_option
from svcdoctor.cli._paths import ParamBase
from svcdoctor.cli._report import written_option


class _ApiFault(ParamBase):
    """A fault of the lab's API server, ``KIND[:VALUE]`` (``lab.apiserver.faults``)."""

    name = "fault"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from svcdoctor.lab.apiserver.faults import Fault, FaultError, parse_fault

        if isinstance(value, Fault):
            return value
        try:
            return parse_fault(str(value))
        except FaultError as exc:
            self.fail(str(exc), param, ctx)


def _within_serve(flag: str, dest: str, text: str, default_text: str) -> Callable[[F], F]:
    """A time into the serve, which lasts at most ``MAX_SERVE``."""
    kind = Duration(0, MAX_SERVE, low_open=True)
    return option(flag, dest, type=kind, help=text, default_text=default_text)


def _serve_kubeconfig(path: Path | None) -> Path:
    path = path or Path("svcdoctor-lab.kubeconfig")
    if path.exists() and not path.is_file():
        fail(f"--kubeconfig-out {path}: exists and is not a file", 2)
    return path.absolute()


@click.command("serve")
@scenario_option
@datapath_option
@option(
    "--kubeconfig-out",
    "kubeconfig",
    type=OutputFile(),
    default=None,
    help="Where to write the kubeconfig.",
    default_text="./svcdoctor-lab.kubeconfig",
)
@_within_serve("--for", "duration", "Stop after this long (90, 90s, 2m; at most 1h).", "1h")
@_within_serve(
    "--rollout-at",
    "rollout_at",
    "Roll the Deployment under load this long after the pods are ready.",
    "no rollout",
)
@output_option(("text", "json"))
@seed_option
@written_option(
    "--ground-truth",
    "truth",
    OutputFile((".json",), "the ground truth"),
    "When the serve ends (Ctrl-C too), write what really happened there as JSON: each "
    "deleted pod's timeline and race window, the bad pods.",
)
@option(
    "--load/--no-load",
    "load_on",
    default=True,
    help="Run the lab's own clients; --no-load leaves the traffic to the Jobs clients create.",
)
@written_option(
    "--prometheus-config",
    "prometheus_config",
    OutputFile((".yml", ".yaml"), "a Prometheus configuration"),
    "Write a prometheus.yml that scrapes the lab's /metrics endpoints (every "
    "--scrape-interval) once they serve.",
)
@option(
    "--scrape-interval",
    type=Duration(0, 300, low_open=True),
    default=15.0,
    help="The scrape interval of --prometheus-config.",
    default_text="15s",
)
@option(
    "--api-fault",
    "api_faults",
    type=_ApiFault(),
    multiple=True,
    metavar="KIND[:VALUE]",
    help="Make the API server misbehave, repeatable: 429:SHARE, 500:SHARE, 503:SHARE, "
    "504:SHARE (that share of requests refused, deterministically: 429:0.5 refuses the 1st, "
    "3rd, 5th…), slow-body:BYTES_PER_S, cut-watch:SECONDS, gone-watch[:KEPT], "
    "loss-after:SECONDS (see docs/commands/lab-serve.md).",
    default_text="none",
)
def serve_command(
    name: str,
    datapath: str,
    kubeconfig: Path | None,
    duration: float | None,
    rollout_at: float | None,
    fmt: str,
    seed: int,
    truth: Path | None,
    load_on: bool,
    prometheus_config: Path | None,
    scrape_interval: float,
    api_faults: tuple[Any, ...],
) -> None:
    """Serve a lab cluster as a Kubernetes API (for kubectl, scan and collect) until
    Ctrl-C or --for; its objects follow the lab's real pods, endpoints and events. Its
    exporters serve /metrics (ingress-nginx request counters per node, kube-state-metrics,
    kube-proxy, node conntrack) for a Prometheus to scrape: diagnose --prometheus reads them."""
    from svcdoctor.lab.apiserver.faults import FaultError, unique
    from svcdoctor.lab.scenarios import SCENARIOS
    from svcdoctor.lab.serve import ServeInfo, serve
    from svcdoctor.report.lab import serving_json, serving_lines

    if rollout_at is not None and duration is not None and rollout_at >= duration:
        raise click.BadParameter("must come before the end (--for)", param_hint="--rollout-at")
    try:
        faults = unique(api_faults)
    except FaultError as exc:
        raise click.BadParameter(str(exc), param_hint="--api-fault") from None
    scenario = SCENARIOS[name]
    chosen = choose_datapath(datapath)
    path = _serve_kubeconfig(kubeconfig)

    def announce(info: ServeInfo) -> None:
        if fmt == "json":
            click.echo(serving_json(info))
        else:
            click.echo("\n".join(serving_lines(name, info)))
            if faults:
                click.echo("api faults: " + ", ".join(f.spec for f in faults))
        if prometheus_config is not None:
            from svcdoctor.lab.metrics import scrape_config

            prometheus_config.write_text(scrape_config(info.metrics, scrape_interval))
            if fmt != "json":
                click.echo(f"prometheus config: {prometheus_config}")
        sys.stdout.flush()

    async def main(on: str) -> Any:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        return await serve(
            scenario,
            on,
            path,
            duration,
            rollout_at,
            seed,
            announce,
            truth,
            load_on=load_on,
            api_faults=faults,
        )

    # a shell without job control starts `lab serve &` with SIGINT ignored (bash manual,
    # "Signals": asynchronous commands ignore SIGINT and SIGQUIT); kill -INT must still stop
    # and clean up the lab, as Ctrl-C does in the foreground
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    interrupted = "stopped; the lab's namespaces, rules and processes were removed"
    try:
        result = on_datapath(chosen, datapath, lambda on: asyncio.run(main(on)))
    except KeyboardInterrupt:  # Ctrl-C: cleaned up; another Ctrl-C must not cut the exit
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        click.echo(interrupted, err=True)
        sys.exit(0)
    except asyncio.CancelledError:  # SIGTERM
        click.echo(interrupted, err=True)
        sys.exit(0)
    if fmt == "text":
        click.echo(
            f"done after {result.seconds:.0f} s: {result.failed} of {result.requests} "
            "requests failed" + (" (with a rollout)" if result.rolled_out else "")
        )
