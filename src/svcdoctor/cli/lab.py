"""``svcdoctor lab``: reproduce the failures for real on this machine, and prove the fix."""

from __future__ import annotations

import asyncio
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from svcdoctor.cli._lab import (
    Progress,
    bundle_dir,
    choose_datapath,
    customised,
    datapath_option,
    fail,
    on_datapath,
    progress_bars,
    run_scenario_options,
    scenario_option,
    scenario_value,
    seed_option,
    slow,
)
from svcdoctor.cli._output import stdout_console
from svcdoctor.cli._params import (
    Duration,
    OutputDir,
    OutputFile,
    option,
    output_option,
)
from svcdoctor.cli._report import html_option, read_bundle, write_page
from svcdoctor.cli.lab_serve import serve_command

if TYPE_CHECKING:
    from svcdoctor.lab.run import RunResult


@click.group()
def lab() -> None:
    """A real Service on this machine: pods as processes, kube-proxy-style routing."""


lab.add_command(serve_command)


@lab.command("run")
@scenario_option
@datapath_option
@option(
    "--out",
    type=OutputDir(),
    default=None,
    help="Evidence bundle directory: new, empty or an earlier lab bundle.",
    default_text="a new temporary directory",
)
@output_option(("text", "json"))
@seed_option
@scenario_value(
    "--duration",
    Duration(1, 120),
    "Seconds of steady load (scenarios without a rollout).",
    "steady",
)
@scenario_value("--baseline", Duration(1, 120), "Seconds of load before the rollout.", "baseline")
@scenario_value(
    "--tail",
    Duration(0, 120),
    "Seconds of load after the last deleted pod exited and left every node's rules.",
    "tail",
)
@run_scenario_options
@option(
    "--prestop-fails",
    is_flag=True,
    default=None,
    help="The preStop hook fails at once (an image without sleep): FailedPreStopHook.",
)
@scenario_value(
    "--shutdown-delay",
    Duration(0, 60),
    "graceful: seconds the app keeps accepting after SIGTERM (failing readiness).",
    "pod.shutdown_delay",
)
@option(
    "--slow",
    metavar="SHARE,SECONDS",
    callback=slow,
    help="A share of requests that take SECONDS instead (the latency tail).",
    default_text="none",
)
@html_option
def run_command(
    name: str,
    datapath: str,
    out: Path | None,
    fmt: str,
    seed: int,
    html_out: Path | None,
    **overrides: Any,
) -> None:
    """Run a scenario under load, write the evidence bundle, and diagnose it.

    A run checks its own ground truth: when the rollout did not happen as planned (no
    SIGTERM, no requests, no endpoint change) it is invalid: exit 1, no verdict.
    """
    from svcdoctor.lab.scenarios import SCENARIOS
    from svcdoctor.report.lab import render_run_json, render_run_text

    scenario = customised(SCENARIOS[name], overrides)
    chosen = choose_datapath(datapath)
    with progress_bars(fmt == "text" and sys.stderr.isatty()) as bar:
        result, bundle = _run_bundle(scenario, chosen, datapath, out, seed, bar(name))
    verdict = read_bundle(bundle)
    if html_out is not None:
        from svcdoctor.report.html import diagnosis_pictures, lab_page

        expected = result.truth.expected_cause
        page = lab_page(
            name,
            result.datapath,
            result.requests,
            result.failed,
            expected.value if expected else None,
            verdict,
            diagnosis_pictures(verdict),
            str(bundle),
        )
        write_page(html_out, page)
    if fmt == "json":
        click.echo(render_run_json(name, result, verdict, bundle))
    else:
        render_run_text(name, result, verdict, bundle, html_out, stdout_console())


@lab.command()
@datapath_option
@seed_option
@option(
    "--html",
    "html_out",
    type=OutputFile((".html", ".htm"), "the report"),
    help="Where to write the before/after report (always written; its path is printed last).",
    default_text="svcdoctor-demo.html in a new temporary directory",
)
def demo(datapath: str, seed: int, html_out: Path | None) -> None:
    """The race reproduced, then the fix: the same rollout before and after, and an HTML
    report with both runs' per-pod lanes side by side."""
    from svcdoctor.lab.scenarios import SCENARIOS
    from svcdoctor.report.html import DemoRun, demo_page
    from svcdoctor.report.lab import broken, render_demo

    chosen = choose_datapath(datapath)
    console = stdout_console()
    console.print(
        f"The same rolling update under load, twice, on the {chosen} datapath: first with a "
        "naive shutdown and no preStop, then with the fix."
    )
    runs = []
    with progress_bars(sys.stderr.isatty()) as bar:
        for name in ("race", "race-fixed"):
            result, bundle = _run_bundle(SCENARIOS[name], chosen, datapath, None, seed, bar(name))
            chosen = result.datapath
            verdict = read_bundle(bundle)
            run = DemoRun(name, result.requests, result.failed, verdict, bundle)
            runs.append((run, broken(result)))
    pod = SCENARIOS["race-fixed"].pod
    fix = f"preStop {pod.prestop:g} s, graceful shutdown, grace {pod.grace:g} s"
    render_demo(runs, fix, console)
    report = html_out or Path(tempfile.mkdtemp(prefix="svcdoctor-demo-")) / "svcdoctor-demo.html"
    (before, _), (after, _) = runs
    write_page(report, demo_page(before, after, fix, chosen))
    console.print(f"before/after report: {report}")


def _run_one(
    scenario: Any, datapath: str, out: Path, seed: int, progress: Progress | None = None
) -> RunResult:
    from svcdoctor.lab.run import run

    async def main() -> RunResult:
        task = asyncio.current_task()
        assert task is not None
        # SIGTERM cleans up like Ctrl-C: the run's finally blocks remove what it made
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        return await run(scenario, datapath, out, seed, progress)

    interrupted = "interrupted; the run's namespaces, rules and processes were removed"
    try:
        return asyncio.run(main())
    except KeyboardInterrupt:  # Ctrl-C: cleaned up; another Ctrl-C must not cut the exit
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        fail(interrupted, 128 + signal.SIGINT)
    except asyncio.CancelledError:  # SIGTERM
        fail(interrupted, 128 + signal.SIGTERM)


def _run_bundle(
    scenario: Any,
    datapath: str,
    requested: str,
    out: Path | None,
    seed: int,
    progress: Progress | None,
) -> tuple[RunResult, Path]:
    """One run into ``out`` (or a new temporary bundle, removed again when the run fails
    or is interrupted). In ``--datapath auto``, a kernel datapath that turns out not to be
    allowed here (a container without the capabilities) falls back to userspace."""
    bundle = bundle_dir(out, scenario.name)
    try:
        result = on_datapath(
            datapath, requested, lambda on: _run_one(scenario, on, bundle, seed, progress)
        )
    except BaseException:
        if out is None:
            shutil.rmtree(bundle, ignore_errors=True)
        raise
    return result, bundle


@lab.command()
def clean() -> None:
    """Remove what killed lab runs left behind (namespaces and pod processes); runs still
    going are left alone."""
    from svcdoctor.lab.cleanup import leftovers, remove

    found = leftovers()
    remove(found)
    if not found:
        click.echo("nothing to clean")
        return
    left = leftovers()
    if left:
        fail(
            f"could not remove {', '.join(left.namespaces) or 'no namespace'} (namespaces), "
            f"{', '.join(map(str, left.processes)) or 'no process'} (pod processes)",
            1,
        )
    click.echo(
        f"removed {len(found.namespaces)} network namespaces, {len(found.processes)} pod "
        f"processes and {len(found.locks)} stale lock files"
    )
