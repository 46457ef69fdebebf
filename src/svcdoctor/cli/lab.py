"""``svcdoctor lab``: reproduce the failures for real on this machine, and prove the fix."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from svcdoctor.cli._cluster import duration_option

DATAPATHS = ("auto", "kernel", "userspace")
BUNDLE_FILES = ("requests.csv", "events.json", "pods.json", "endpointslices.jsonl", "lab.json")
MAX_DELAY = 60.0  # seconds: the largest propagation delay or request latency a run takes

# the names of svcdoctor.lab.scenarios.SCENARIOS, spelled out so that starting the CLI does
# not import the lab (and polars); a test keeps the two equal
SCENARIO_NAMES = ("race", "race-fixed", "bad-backend", "keepalive", "keepalive-fixed", "sigkill")

Progress = Callable[[str, int, int], None]


def _fail(message: str, code: int) -> None:
    click.echo(f"svcdoctor: error: {message}", err=True)
    sys.exit(code)


def _datapath(choice: str) -> str:
    from svcdoctor.lab.kernel import available

    reason = available()
    if choice == "kernel" and reason:
        _fail(reason, 2)
    if choice == "auto":
        return "userspace" if reason else "kernel"
    return choice


def _dist(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """A delay distribution (see ``svcdoctor.model.dist``); ``LOW:HIGH`` is uniform."""
    if value is None:
        return None
    from svcdoctor.model import DistError, parse_dist

    low, sep, high = value.partition(":")
    text = value
    if sep and _is_number(low):
        text = f"uniform:{low},{high}"
    try:
        dist = parse_dist(text)
    except DistError as exc:
        raise click.BadParameter(str(exc)) from None
    if dist.high > MAX_DELAY:
        raise click.BadParameter(
            f"{value!r} reaches {dist.high:.3g} s; the lab takes at most {MAX_DELAY:g} s"
        )
    return dist


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


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
        prop = replace(prop, delay=o["propagation"])
    if o.get("min_sync") is not None:
        prop = replace(prop, min_sync=o["min_sync"])
    changes = {
        k: o[k]
        for k in (
            "replicas",
            "nodes",
            "bad",
            "fault",
            "max_surge",
            "max_unavailable",
            "baseline",
            "tail",
        )
        if o.get(k) is not None
    }
    if o.get("duration") is not None:
        changes["steady"] = o["duration"]
    custom = replace(scenario, pod=pod, load=load, propagation=prop, **changes)
    if custom.rollout and custom.max_surge == 0 and custom.max_unavailable == 0:
        raise click.UsageError("--max-surge and --max-unavailable cannot both be 0")
    if custom.bad >= custom.replicas:
        raise click.UsageError("--bad must be smaller than --replicas")
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
        return Path(tempfile.mkdtemp(prefix=f"svcdoctor-lab-{name}-"))
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
) -> Any:
    from svcdoctor.lab.datapath import LabError
    from svcdoctor.lab.run import run

    async def main() -> Any:
        task = asyncio.current_task()
        assert task is not None
        # SIGTERM cleans up like Ctrl-C: the run's finally blocks remove what it made
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        return await run(scenario, datapath, out, seed, progress)

    interrupted = "interrupted; the run's namespaces, rules and processes were removed"
    try:
        return asyncio.run(main())
    except LabError as exc:
        _fail(str(exc), 1)
    except KeyboardInterrupt:  # Ctrl-C: cleaned up; another Ctrl-C must not cut the exit
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        _fail(interrupted, 128 + signal.SIGINT)
    except asyncio.CancelledError:  # SIGTERM
        _fail(interrupted, 128 + signal.SIGTERM)


def _diagnosis(bundle: Path) -> Any:
    from svcdoctor.diagnose import diagnose
    from svcdoctor.evidence import read_evidence

    return diagnose(read_evidence([str(bundle)]))


_scenario_option = click.option(
    "--scenario", "name", type=click.Choice(SCENARIO_NAMES), default="race", show_default=True
)
_datapath_option = click.option(
    "--datapath",
    type=click.Choice(DATAPATHS),
    default="auto",
    show_default=True,
    help="kernel: network namespaces + iptables (root); userspace: loopback proxy.",
)


@click.group()
def lab() -> None:
    """A real Service on this machine: pods as processes, kube-proxy-style routing."""


@lab.command("run")
@_scenario_option
@_datapath_option
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="Evidence bundle directory: new, empty or an earlier lab bundle "
    "(default: a new temporary one).",
)
@click.option("-f", "--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--replicas", type=click.IntRange(1, 32))
@click.option("--nodes", type=click.IntRange(1, 8))
@click.option("--rate", type=click.FloatRange(1, 2000), help="Requests per second.")
@click.option("--clients", type=click.IntRange(1, 64))
@click.option(
    "--duration",
    type=click.FloatRange(1, 120),
    help="Seconds of steady load (scenarios without a rollout).",
)
@click.option(
    "--baseline", type=click.FloatRange(1, 120), help="Seconds of load before the rollout."
)
@click.option(
    "--tail",
    type=click.FloatRange(0, 120),
    help="Seconds of load after the last deleted pod exited and left every node's rules.",
)
@click.option("--connection", type=click.Choice(["new", "keepalive"]))
@click.option(
    "--max-connection-age", type=click.FloatRange(0.1, 600), help="Keep-alive clients, seconds."
)
@click.option("--retries", type=click.IntRange(0, 5), help="Client retries of a failed request.")
@click.option(
    "--propagation",
    metavar="DIST",
    callback=_dist,
    help="Seconds each node takes to apply an endpoint change: LOW:HIGH (uniform), "
    "SECONDS, uniform:LOW,HIGH, exp:MEAN or lognormal:MEDIAN,P99.",
)
@click.option("--min-sync", type=click.FloatRange(0, 30), help="kube-proxy min-sync-period, s.")
@click.option("--prestop", type=click.FloatRange(0, 60), help="preStop sleep, seconds.")
@click.option(
    "--prestop-fails",
    is_flag=True,
    default=None,
    help="The preStop hook fails at once (an image without sleep): FailedPreStopHook.",
)
@click.option("--grace", type=click.FloatRange(0.5, 120), help="Grace period, seconds.")
@click.option("--shutdown", type=click.Choice(["naive", "graceful"]), help="At SIGTERM.")
@click.option(
    "--shutdown-delay",
    type=click.FloatRange(0, 60),
    help="graceful: seconds the app keeps accepting after SIGTERM (failing readiness).",
)
@click.option(
    "--latency", metavar="DIST", callback=_dist, help="Request latency, seconds (exp:0.005)."
)
@click.option(
    "--slow",
    metavar="SHARE,SECONDS",
    callback=_slow,
    help="A share of requests that take SECONDS instead (the latency tail).",
)
@click.option("--bad", type=click.IntRange(0, 32), help="How many pods are bad.")
@click.option(
    "--fault",
    type=click.Choice(["reset", "5xx", "hang"]),
    help="How a bad pod fails real requests (it still passes readiness).",
)
@click.option("--max-surge", type=click.IntRange(0, 32))
@click.option("--max-unavailable", type=click.IntRange(0, 32))
def run_command(
    name: str, datapath: str, out: Path | None, fmt: str, seed: int, **overrides: Any
) -> None:
    """Run a scenario under load, write the evidence bundle, and diagnose it."""
    from svcdoctor.lab.scenarios import SCENARIOS

    scenario = _customised(SCENARIOS[name], overrides)
    chosen = _datapath(datapath)
    bundle = _bundle_dir(out, name)
    with _progress(fmt == "text" and sys.stderr.isatty()) as bar:
        result = _run_one(scenario, chosen, bundle, seed, bar(name))
    verdict = _diagnosis(bundle)
    from svcdoctor.report.diagnosis import diagnosis_to_dict, render_text

    if fmt == "json":
        click.echo(
            json.dumps(
                {
                    "scenario": name,
                    "datapath": result.datapath,
                    "requests": result.requests,
                    "failed": result.failed,
                    "by_outcome": result.by_outcome,
                    "direct_probe": result.probe,
                    "ground_truth": result.truth,
                    "diagnosis": diagnosis_to_dict(verdict),
                    "bundle": str(bundle),
                },
                indent=2,
                default=str,
            )
        )
        return
    console = Console(highlight=False)
    outcomes = ", ".join(f"{k} {v}" for k, v in sorted(result.by_outcome.items()) if k != "ok")
    console.print(
        f"[bold]lab {name}[/] ({result.datapath} datapath): {result.failed} of "
        f"{result.requests} requests failed" + (f" ({outcomes})" if outcomes else "")
    )
    bad = {p: t for p, t in result.probe.items() if t.get("ok", 0) < sum(t.values())}
    if bad:
        console.print(
            "direct probe (bypassing the Service): "
            + "; ".join(
                f"{p} failed {sum(t.values()) - t.get('ok', 0)}/{sum(t.values())}"
                for p, t in bad.items()
            )
        )
    console.print(f"bundle: {bundle}  (svcdoctor diagnose {bundle})")
    console.print()
    render_text(verdict, console)


@lab.command()
@click.option("--datapath", type=click.Choice(DATAPATHS), default="auto", show_default=True)
@click.option("--seed", type=int, default=1, show_default=True)
def demo(datapath: str, seed: int) -> None:
    """The race reproduced, then the fix: the same rollout before and after."""
    from svcdoctor.lab.scenarios import SCENARIOS

    chosen = _datapath(datapath)
    console = Console(highlight=False)
    console.print(
        f"The same rolling update under load, twice, on the {chosen} datapath: first with a "
        "naive shutdown and no preStop, then with the fix."
    )
    rows = []
    with _progress(sys.stderr.isatty()) as bar:
        for name in ("race", "race-fixed"):
            bundle = _bundle_dir(None, name)
            result = _run_one(SCENARIOS[name], chosen, bundle, seed, bar(name))
            verdict = _diagnosis(bundle)
            primary = verdict.primary
            rows.append((name, result, primary.cause.value if primary else "no cause", bundle))
    table = Table("scenario", "requests", "failed", "resets / refusals", "diagnosis")
    for name, result, cause, _ in rows:
        broken = result.by_outcome.get("reset", 0) + result.by_outcome.get("refused", 0)
        table.add_row(name, str(result.requests), str(result.failed), str(broken), cause)
    console.print(table)
    before, after = rows[0][1], rows[1][1]
    fix = after.scenario.pod
    console.print(
        f"before the fix: {before.failed} failed requests; after (preStop {fix.prestop:g} s, "
        f"graceful shutdown, grace {fix.grace:g} s): {after.failed}"
    )
    for name, _, _, bundle in rows:
        console.print(f"{name} evidence: svcdoctor diagnose {bundle}")


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
@click.option(
    "--kubeconfig-out",
    "kubeconfig",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Where to write the kubeconfig (default: ./svcdoctor-lab.kubeconfig).",
)
@duration_option(
    "--for", "duration", help="Stop after this long (90, 90s, 2m; at most 1h; default: 1h)."
)
@duration_option(
    "--rollout-at",
    "rollout_at",
    help="Roll the Deployment under load this long after the pods are ready.",
)
@click.option("-f", "--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option(
    "--ground-truth",
    "truth",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    help="When the serve ends (Ctrl-C too), write what really happened there as JSON: each "
    "deleted pod's timeline and race window, the bad pods.",
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
) -> None:
    """Serve a lab cluster as a Kubernetes API (for kubectl, scan and collect) until
    Ctrl-C or --for; its objects follow the lab's real pods, endpoints and events."""
    from svcdoctor.lab.datapath import LabError
    from svcdoctor.lab.scenarios import SCENARIOS
    from svcdoctor.lab.serve import MAX_SERVE_SECONDS, ServeInfo, serve

    if duration is not None and duration > MAX_SERVE_SECONDS:
        raise click.BadParameter(
            f"{duration:g} s is longer than a lab serves ({MAX_SERVE_SECONDS:g} s)",
            param_hint="--for",
        )
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
                    }
                ),
            )
        else:
            click.echo(f"lab {name} ({info.datapath} datapath) serving at {info.url}")
            click.echo(f"kubeconfig: {info.kubeconfig} (context {info.context})")
            click.echo(f"try: KUBECONFIG={info.kubeconfig} kubectl get pods -n {info.namespace}")
        sys.stdout.flush()

    async def main() -> Any:
        task = asyncio.current_task()
        assert task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
        return await serve(scenario, chosen, path, duration, rollout_at, seed, announce, truth)

    interrupted = "stopped; the lab's namespaces, rules and processes were removed"
    try:
        result = asyncio.run(main())
    except LabError as exc:
        _fail(str(exc), 1)
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
