"""``svcdoctor lab``: reproduce the failures for real on this machine, and prove the fix."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click
from rich.console import Console
from rich.table import Table

from svcdoctor.cli._output import stdout_console
from svcdoctor.cli._params import (
    Distribution,
    Duration,
    IntOrPercent,
    Number,
    OutputDir,
    OutputFile,
    option,
    output_option,
    resolve_count,
)
from svcdoctor.cli._report import html_option, read_bundle, write_page
from svcdoctor.errors import CommandError

if TYPE_CHECKING:
    from svcdoctor.lab.run import RunResult
    from svcdoctor.model import Diagnosis, Evidence

DATAPATHS = ("auto", "kernel", "userspace")
BUNDLE_FILES = ("requests.csv", "events.json", "pods.json", "endpointslices.jsonl", "lab.json")
MAX_DELAY = 60.0  # seconds: the largest propagation delay or request latency a run takes
MAX_SERVE = 3600.0  # seconds: the longest a lab serves (svcdoctor.lab.serve.MAX_SERVE_SECONDS)
TEMP_PREFIX = "svcdoctor-lab-"  # bundles of runs without --out, in the temporary directory

# the names of svcdoctor.lab.scenarios.SCENARIOS, spelled out so that starting the CLI does
# not import the lab (and polars); a test keeps the two equal
SCENARIO_NAMES = (
    "race",
    "race-fixed",
    "bad-backend",
    "keepalive",
    "keepalive-fixed",
    "sigkill",
    "broken-node",
)

Progress = Callable[[str, int, int], None]


def _fail(message: str, code: int) -> NoReturn:
    """One line on stderr and exit ``code`` (see ``_errors``)."""
    raise CommandError(message, code)


def _datapath(choice: str) -> str:
    """The datapath to use: ``auto`` is the kernel's where it can run, else userspace with
    a one-line note; ``kernel`` where it cannot is a usage error (exit 2)."""
    from svcdoctor.lab.kernel import KernelUnavailable, available

    reason = available()
    if choice == "kernel" and reason:
        raise KernelUnavailable(f"{reason}; --datapath userspace runs without privileges")
    if choice == "auto":
        if reason:
            _note_fallback(reason)
            return "userspace"
        return "kernel"
    return choice


def _note_fallback(reason: str) -> None:
    click.echo(f"note: using the userspace datapath: {reason}", err=True)


_DELAY = Distribution(MAX_DELAY, low_high=True, what="the lab takes")


def _dist(ctx: click.Context | None, param: click.Parameter | None, value: str | None) -> Any:
    """A delay distribution (see ``svcdoctor.model.dist``); ``LOW:HIGH`` is uniform."""
    return None if value is None else _DELAY.convert(value, param, ctx)


def _slow(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    from svcdoctor.lab.pod import parse_slow

    try:
        return parse_slow(value, MAX_DELAY)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _customised(scenario: Any, o: dict[str, Any]) -> Any:
    """The scenario with the options the user gave (the others keep its values)."""
    pod = scenario.pod
    for key in ("prestop", "grace", "shutdown", "shutdown_delay", "latency"):
        if o.get(key) is not None:
            pod = replace(pod, **{key: o[key]})
    if o.get("prestop_fails"):
        pod = replace(pod, prestop_fails=True)
    if o.get("slow") is not None:
        pod = replace(pod, slow_share=o["slow"][0], slow_seconds=o["slow"][1])
    load = scenario.load
    for key in ("rate", "clients", "connection", "retries", "max_connection_age"):
        if o.get(key) is not None:
            load = replace(load, **{key: o[key]})
    prop = scenario.propagation
    if o.get("propagation") is not None:
        prop = replace(prop, override=o["propagation"])
    if o.get("min_sync_period") is not None:
        prop = replace(prop, min_sync=o["min_sync_period"])
    changes = {
        k: o[k] for k in ("replicas", "nodes", "fault", "baseline", "tail") if o.get(k) is not None
    }
    if o.get("bad_backends") is not None:
        changes["bad"] = o["bad_backends"]
    replicas = changes.get("replicas", scenario.replicas)
    for key, round_up in (("max_surge", True), ("max_unavailable", False)):
        if o.get(key) is not None:
            changes[key] = resolve_count(o[key], replicas, round_up)
    if o.get("duration") is not None:
        changes["steady"] = o["duration"]
    custom = replace(scenario, pod=pod, load=load, propagation=prop, **changes)
    if custom.rollout and custom.max_surge == 0 and custom.max_unavailable == 0:
        raise click.UsageError("--max-surge and --max-unavailable cannot both be 0")
    if custom.bad >= custom.replicas:
        raise click.UsageError("--bad-backends must be smaller than --replicas")
    if custom.pod.prestop_fails and not custom.pod.prestop:
        raise click.UsageError("--prestop-fails needs a preStop hook (--prestop SECONDS)")
    from svcdoctor.lab.scenarios import MAX_RUN_SECONDS

    planned = custom.planned_seconds
    if planned > MAX_RUN_SECONDS:
        raise click.UsageError(
            f"this run would take about {planned:.0f} s; a lab run takes at most "
            f"{MAX_RUN_SECONDS:g} s: shorten --baseline, --tail, --duration or --grace, or "
            "lower --replicas"
        )
    return custom


def _bundle_dir(out: Path | None, name: str) -> Path:
    """``--out``, new or empty or an earlier lab bundle (overwritten); else a new temporary
    directory. Anything else is refused: the run must not mix its evidence with other files."""
    if out is None:
        return Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{name}-"))
    if out.exists() and not out.is_dir():
        _fail(f"--out {out}: exists and is not a directory", 2)
    if out.is_dir():
        others = sorted(p.name for p in out.iterdir() if p.name not in BUNDLE_FILES)
        if others:
            _fail(
                f"--out {out}: holds other files ({', '.join(others[:3])}); give a new or "
                "empty directory, or an earlier lab bundle",
                2,
            )
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / ".svcdoctor-write-test").touch()
        (out / ".svcdoctor-write-test").unlink()
    except OSError as exc:
        _fail(f"--out {out}: cannot write there ({exc.strerror})", 2)
    return out


@contextmanager
def _progress(show: bool) -> Iterator[Callable[[str], Progress]]:
    """Progress bars on a terminal (stderr); silent when piped or with --format json.
    Yields a factory: one bar per run."""
    if not show:
        yield lambda label: lambda what, done, total: None
        return
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bars

    columns = (TextColumn("{task.fields[label]:<11}"), BarColumn(), TimeElapsedColumn())
    with Bars(*columns, TextColumn("{task.description}"), console=Console(stderr=True)) as bars:

        def bar(label: str) -> Progress:
            task = bars.add_task("", label=label, total=None)

            def update(what: str, done: int, total: int) -> None:
                bars.update(task, description=what, completed=done, total=total)

            return update

        yield bar


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
        _fail(interrupted, 128 + signal.SIGINT)
    except asyncio.CancelledError:  # SIGTERM
        _fail(interrupted, 128 + signal.SIGTERM)


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
    from svcdoctor.lab.kernel import KernelUnavailable

    bundle = _bundle_dir(out, scenario.name)
    try:
        try:
            result = _run_one(scenario, datapath, bundle, seed, progress)
        except KernelUnavailable as exc:
            if requested != "auto":
                raise KernelUnavailable(
                    f"{exc}; --datapath userspace runs without privileges"
                ) from None
            _note_fallback(str(exc))
            result = _run_one(scenario, "userspace", bundle, seed, progress)
    except BaseException:
        if out is None:
            shutil.rmtree(bundle, ignore_errors=True)
        raise
    return result, bundle


def _diagnosis(bundle: Path) -> tuple[Evidence, Diagnosis]:
    """The bundle's evidence and its diagnosis."""
    return read_bundle(bundle)


def _scenario_default(path: str, unit: str = "") -> Callable[[], str]:
    """The help's default of an option the scenario sets: the scenario's value, with the
    race scenario's (read when help is shown: starting the CLI does not import the lab)."""

    def text() -> str:
        from svcdoctor.lab.scenarios import SCENARIOS

        value: Any = SCENARIOS["race"]
        for part in path.split("."):
            value = getattr(value, part)
        shown = f"{value:g}" if isinstance(value, float) else str(value)
        return f"the scenario's; race: {shown}{unit}"

    return text


_scenario_option = option(
    "--scenario",
    "name",
    type=click.Choice(SCENARIO_NAMES),
    default="race",
    help="What to reproduce: race, race-fixed, bad-backend, keepalive, keepalive-fixed, sigkill, "
    "broken-node.",
)
_datapath_option = option(
    "--datapath",
    type=click.Choice(DATAPATHS),
    default="auto",
    help="kernel: network namespaces + iptables (root with CAP_NET_ADMIN); userspace: "
    "loopback proxy; auto: kernel where it can run, else userspace (with a note).",
)
_seed_option = option(
    "--seed", type=Number(0, 2**32 - 1, integer=True), default=1, help="Random seed of the run."
)


@click.group()
def lab() -> None:
    """A real Service on this machine: pods as processes, kube-proxy-style routing."""


@lab.command("run")
@_scenario_option
@_datapath_option
@option(
    "--out",
    type=OutputDir(),
    default=None,
    help="Evidence bundle directory: new, empty or an earlier lab bundle.",
    default_text="a new temporary directory",
)
@output_option(("text", "json"))
@_seed_option
@option(
    "--replicas",
    type=Number(1, 32, integer=True),
    help="Pods of the Deployment.",
    default_text=_scenario_default("replicas"),
)
@option(
    "--nodes",
    type=Number(1, 8, integer=True),
    help="Nodes (one proxy each).",
    default_text=_scenario_default("nodes"),
)
@option(
    "--rate",
    type=Number(1, 2000, unit="requests/s"),
    help="Requests per second, all clients together.",
    default_text=_scenario_default("load.rate"),
)
@option(
    "--clients",
    type=Number(1, 64, integer=True),
    help="Client processes sending the load.",
    default_text=_scenario_default("load.clients"),
)
@option(
    "--duration",
    type=Duration(1, 120),
    help="Seconds of steady load (scenarios without a rollout).",
    default_text=_scenario_default("steady", " s"),
)
@option(
    "--baseline",
    type=Duration(1, 120),
    help="Seconds of load before the rollout.",
    default_text=_scenario_default("baseline", " s"),
)
@option(
    "--tail",
    type=Duration(0, 120),
    help="Seconds of load after the last deleted pod exited and left every node's rules.",
    default_text=_scenario_default("tail", " s"),
)
@option(
    "--connection",
    type=click.Choice(["new", "keepalive"]),
    help="A new connection per request, or keep-alive clients.",
    default_text=_scenario_default("load.connection"),
)
@option(
    "--max-connection-age",
    type=Duration(0.1, 600),
    help="Keep-alive clients reconnect after this many seconds.",
    default_text="none",
)
@option(
    "--retries",
    type=Number(0, 5, integer=True),
    help="Client retries of a failed request.",
    default_text=_scenario_default("load.retries"),
)
@option(
    "--propagation",
    type=_DELAY,
    help="Seconds each node takes to apply an endpoint change: LOW:HIGH (uniform), "
    "SECONDS, uniform:LOW,HIGH, exp:MEAN or lognormal:MEDIAN,P99.",
    default_text=_scenario_default("delay"),
)
@option(
    "--min-sync-period",
    aliases=("--min-sync",),
    type=Duration(0, 30),
    help="kube-proxy's --iptables-min-sync-period: nodes apply changes no more often.",
    default_text=_scenario_default("propagation.min_sync", " s"),
)
@option(
    "--prestop",
    type=Duration(0, 60),
    help="preStop sleep, seconds.",
    default_text=_scenario_default("pod.prestop", " s"),
)
@option(
    "--prestop-fails",
    is_flag=True,
    default=None,
    help="The preStop hook fails at once (an image without sleep): FailedPreStopHook.",
)
@option(
    "--grace",
    type=Duration(0.5, 120),
    help="terminationGracePeriodSeconds.",
    default_text=_scenario_default("pod.grace", " s"),
)
@option(
    "--shutdown",
    type=click.Choice(["naive", "graceful"]),
    help="At SIGTERM: naive exits at once, graceful drains in-flight requests first.",
    default_text=_scenario_default("pod.shutdown"),
)
@option(
    "--shutdown-delay",
    type=Duration(0, 60),
    help="graceful: seconds the app keeps accepting after SIGTERM (failing readiness).",
    default_text=_scenario_default("pod.shutdown_delay", " s"),
)
@option(
    "--latency",
    type=_DELAY,
    help="Request latency, seconds (exp:0.005).",
    default_text=_scenario_default("pod.latency"),
)
@option(
    "--slow",
    metavar="SHARE,SECONDS",
    callback=_slow,
    help="A share of requests that take SECONDS instead (the latency tail).",
    default_text="none",
)
@option(
    "--bad-backends",
    aliases=("--bad",),
    type=Number(0, 32, integer=True),
    help="Pods that pass readiness but fail real requests.",
    default_text=_scenario_default("bad"),
)
@option(
    "--fault",
    type=click.Choice(["reset", "5xx", "hang"]),
    help="How a bad pod fails real requests (it still passes readiness).",
    default_text=_scenario_default("fault"),
)
@option(
    "--max-surge",
    type=IntOrPercent(32),
    help="Pods created above the replicas during the rollout: a number or a percentage.",
    default_text=_scenario_default("max_surge"),
)
@option(
    "--max-unavailable",
    type=IntOrPercent(32),
    help="Pods below the replicas during the rollout: a number or a percentage.",
    default_text=_scenario_default("max_unavailable"),
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

    scenario = _customised(SCENARIOS[name], overrides)
    chosen = _datapath(datapath)
    with _progress(fmt == "text" and sys.stderr.isatty()) as bar:
        result, bundle = _run_bundle(scenario, chosen, datapath, out, seed, bar(name))
    evidence, verdict = _diagnosis(bundle)
    from svcdoctor.model.evidence import Outcome
    from svcdoctor.report.diagnosis import diagnosis_to_dict, render_text
    from svcdoctor.report.lab import run_to_dict

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
            diagnosis_pictures(evidence, verdict),
            str(bundle),
        )
        write_page(html_out, page)
    if fmt == "json":
        shown = {"scenario": name, **run_to_dict(result), "diagnosis": diagnosis_to_dict(verdict)}
        click.echo(json.dumps(shown | {"bundle": str(bundle)}, indent=2, default=str))
        return
    console = stdout_console()
    outcomes = ", ".join(
        f"{k} {v}" for k, v in sorted(result.by_outcome.items()) if k is not Outcome.OK
    )
    console.print(
        f"[bold]lab {name}[/] ({result.datapath} datapath): {result.failed} of "
        f"{result.requests} requests failed" + (f" ({outcomes})" if outcomes else "")
    )
    bad = [p for p in result.probe if p.failed]
    if bad:
        console.print(
            "direct probe (bypassing the Service): "
            + "; ".join(f"{p.pod} failed {p.failed}/{p.sent}" for p in bad)
        )
    console.print(f"bundle: {bundle}  (svcdoctor diagnose {bundle})")
    if html_out is not None:
        console.print(f"report: {html_out}")
    console.print()
    render_text(verdict, console)


@lab.command()
@_datapath_option
@_seed_option
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
    from svcdoctor.model.evidence import Outcome

    chosen = _datapath(datapath)
    console = stdout_console()
    console.print(
        f"The same rolling update under load, twice, on the {chosen} datapath: first with a "
        "naive shutdown and no preStop, then with the fix."
    )
    from svcdoctor.report.html import DemoRun, demo_page

    runs = []
    with _progress(sys.stderr.isatty()) as bar:
        for name in ("race", "race-fixed"):
            result, bundle = _run_bundle(SCENARIOS[name], chosen, datapath, None, seed, bar(name))
            chosen = result.datapath
            evidence, verdict = _diagnosis(bundle)
            broken = sum(result.by_outcome.get(o, 0) for o in (Outcome.RESET, Outcome.REFUSED))
            runs.append(
                (DemoRun(name, result.requests, result.failed, evidence, verdict, bundle), broken)
            )
    table = Table("scenario", "requests", "failed", "resets / refusals", "diagnosis")
    for run, broken in runs:
        primary = run.diagnosis.primary
        cause = primary.cause.value if primary else "no cause"
        table.add_row(run.scenario, str(run.requests), str(run.failed), str(broken), cause)
    console.print(table)
    (before, _), (after, _) = runs
    pod = SCENARIOS["race-fixed"].pod
    fix = f"preStop {pod.prestop:g} s, graceful shutdown, grace {pod.grace:g} s"
    console.print(f"before the fix: {before.failed} failed requests; after ({fix}): {after.failed}")
    for run, _ in runs:
        console.print(f"{run.scenario} evidence: svcdoctor diagnose {run.bundle}")
    report = html_out or Path(tempfile.mkdtemp(prefix="svcdoctor-demo-")) / "svcdoctor-demo.html"
    write_page(report, demo_page(before, after, fix, chosen))
    console.print(f"before/after report: {report}")


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
        _fail(
            f"could not remove {', '.join(left.namespaces) or 'no namespace'} (namespaces), "
            f"{', '.join(map(str, left.processes)) or 'no process'} (pod processes)",
            1,
        )
    click.echo(
        f"removed {len(found.namespaces)} network namespaces, {len(found.processes)} pod "
        f"processes and {len(found.locks)} stale lock files"
    )


def _serve_kubeconfig(path: Path | None) -> Path:
    path = path or Path("svcdoctor-lab.kubeconfig")
    if path.exists() and not path.is_file():
        _fail(f"--kubeconfig-out {path}: exists and is not a file", 2)
    return path.absolute()


@lab.command("serve")
@_scenario_option
@_datapath_option
@option(
    "--kubeconfig-out",
    "kubeconfig",
    type=OutputFile(),
    default=None,
    help="Where to write the kubeconfig.",
    default_text="./svcdoctor-lab.kubeconfig",
)
@option(
    "--for",
    "duration",
    type=Duration(0, MAX_SERVE, low_open=True),
    help="Stop after this long (90, 90s, 2m; at most 1h).",
    default_text="1h",
)
@option(
    "--rollout-at",
    "rollout_at",
    type=Duration(0, MAX_SERVE, low_open=True),
    help="Roll the Deployment under load this long after the pods are ready.",
    default_text="no rollout",
)
@output_option(("text", "json"))
@_seed_option
@option(
    "--ground-truth",
    "truth",
    type=OutputFile((".json",), "the ground truth"),
    help="When the serve ends (Ctrl-C too), write what really happened there as JSON: each "
    "deleted pod's timeline and race window, the bad pods.",
    default_text="not written",
)
@option(
    "--load/--no-load",
    "load_on",
    default=True,
    help="Run the lab's own clients; --no-load leaves the traffic to the Jobs clients create.",
)
@option(
    "--prometheus-config",
    "prometheus_config",
    type=OutputFile((".yml", ".yaml"), "a Prometheus configuration"),
    help="Write a prometheus.yml that scrapes the lab's /metrics endpoints (every "
    "--scrape-interval) once they serve.",
    default_text="not written",
)
@option(
    "--scrape-interval",
    type=Duration(0, 300, low_open=True),
    default=15.0,
    help="The scrape interval of --prometheus-config.",
    default_text="15s",
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
) -> None:
    """Serve a lab cluster as a Kubernetes API (for kubectl, scan and collect) until
    Ctrl-C or --for; its objects follow the lab's real pods, endpoints and events. Its
    exporters serve /metrics (ingress-nginx request counters per node, kube-state-metrics,
    kube-proxy, node conntrack) for a Prometheus to scrape: diagnose --prometheus reads them."""
    from svcdoctor.lab.kernel import KernelUnavailable
    from svcdoctor.lab.scenarios import SCENARIOS
    from svcdoctor.lab.serve import ServeInfo, serve

    if rollout_at is not None and duration is not None and rollout_at >= duration:
        raise click.BadParameter("must come before the end (--for)", param_hint="--rollout-at")
    scenario = SCENARIOS[name]
    chosen = _datapath(datapath)
    path = _serve_kubeconfig(kubeconfig)

    def announce(info: ServeInfo) -> None:
        if fmt == "json":
            click.echo(
                json.dumps(
                    {
                        "url": info.url,
                        "kubeconfig": str(info.kubeconfig),
                        "context": info.context,
                        "namespace": info.namespace,
                        "datapath": info.datapath,
                        "metrics": [
                            {"job": t.job, "url": t.url, "node": t.node} for t in info.metrics
                        ],
                    }
                ),
            )
        else:
            click.echo(f"lab {name} ({info.datapath} datapath) serving at {info.url}")
            click.echo(f"kubeconfig: {info.kubeconfig} (context {info.context})")
            click.echo(f"try: KUBECONFIG={info.kubeconfig} kubectl get pods -n {info.namespace}")
            for t in info.metrics:
                click.echo(f"metrics: {t.url} ({t.job}{', ' + t.node if t.node else ''})")
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
            scenario, on, path, duration, rollout_at, seed, announce, truth, load_on=load_on
        )

    interrupted = "stopped; the lab's namespaces, rules and processes were removed"
    try:
        try:
            result = asyncio.run(main(chosen))
        except KernelUnavailable as exc:  # refused at start: auto falls back, kernel is exit 2
            if datapath != "auto":
                raise KernelUnavailable(
                    f"{exc}; --datapath userspace runs without privileges"
                ) from None
            _note_fallback(str(exc))
            result = asyncio.run(main("userspace"))
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
