"""``svcdoctor lab``: reproduce the failures for real on this machine, and prove the fix."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

DATAPATHS = ("auto", "kernel", "userspace")


# the names of svcdoctor.lab.scenarios.SCENARIOS, spelled out so that starting the CLI does
# not import the lab (and polars); a test keeps the two equal
SCENARIO_NAMES = ("race", "race-fixed", "bad-backend", "keepalive", "keepalive-fixed", "sigkill")


def _datapath(choice: str) -> str:
    from svcdoctor.lab.kernel import available

    reason = available()
    if choice == "kernel" and reason:
        click.echo(f"svcdoctor: error: {reason}", err=True)
        sys.exit(2)
    if choice == "auto":
        return "userspace" if reason else "kernel"
    return choice


def _run_one(name: str, datapath: str, out: Path, seed: int, overrides: dict[str, Any]) -> Any:
    from svcdoctor.lab.run import run
    from svcdoctor.lab.scenarios import SCENARIOS

    scenario = _customised(SCENARIOS[name], overrides)

    async def main() -> Any:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        # SIGTERM cleans up like Ctrl-C: the run's finally blocks remove what it made
        loop.add_signal_handler(signal.SIGTERM, task.cancel)
        return await run(scenario, datapath, out, seed)

    return asyncio.run(main())


def _customised(scenario: Any, o: dict[str, Any]) -> Any:
    pod = scenario.pod
    for key in ("prestop", "grace", "shutdown"):
        if o.get(key) is not None:
            pod = replace(pod, **{key: o[key]})
    load = scenario.load
    for key in ("rate", "clients", "connection", "retries"):
        if o.get(key) is not None:
            load = replace(load, **{key: o[key]})
    if o.get("max_connection_age") is not None:
        load = replace(load, max_connection_age=o["max_connection_age"])
    prop = scenario.propagation
    if o.get("propagation"):
        low, _, high = o["propagation"].partition(":")
        try:
            prop = replace(prop, low=float(low), high=float(high or low))
        except ValueError:
            raise click.BadParameter(
                f"{o['propagation']!r}: expected LOW[:HIGH] seconds", param_hint="--propagation"
            ) from None
        if not 0 <= prop.low <= prop.high <= 60:
            raise click.BadParameter("need 0 <= LOW <= HIGH <= 60", param_hint="--propagation")
    if o.get("min_sync") is not None:
        prop = replace(prop, min_sync=o["min_sync"])
    changes = {
        k: o[k]
        for k in ("replicas", "nodes", "bad", "fault", "max_surge", "max_unavailable")
        if o.get(k) is not None
    }
    if o.get("duration") is not None:
        changes["steady"] = o["duration"]
    custom = replace(scenario, pod=pod, load=load, propagation=prop, **changes)
    if custom.rollout and custom.max_surge == 0 and custom.max_unavailable == 0:
        raise click.UsageError("--max-surge and --max-unavailable cannot both be 0")
    if custom.bad >= custom.replicas:
        raise click.UsageError("--bad must be smaller than --replicas")
    return custom


def _diagnosis(bundle: Path) -> Any:
    from svcdoctor.diagnose import diagnose
    from svcdoctor.evidence import read_evidence

    return diagnose(read_evidence([str(bundle)]))


@click.group()
def lab() -> None:
    """A real Service on this machine: pods as processes, kube-proxy-style routing."""


@lab.command("run")
@click.option(
    "--scenario", "name", type=click.Choice(SCENARIO_NAMES), default="race", show_default=True
)
@click.option(
    "--datapath",
    type=click.Choice(DATAPATHS),
    default="auto",
    show_default=True,
    help="kernel: network namespaces + iptables (root); userspace: loopback proxy.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Evidence bundle directory (default: a new temporary one).",
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
@click.option("--connection", type=click.Choice(["new", "keepalive"]))
@click.option("--max-connection-age", type=click.FloatRange(0.1, 600))
@click.option(
    "--propagation",
    metavar="LOW[:HIGH]",
    help="Seconds each node takes to apply an endpoint change.",
)
@click.option("--min-sync", type=click.FloatRange(0, 30), help="kube-proxy min-sync-period.")
@click.option("--prestop", type=click.FloatRange(0, 60), help="preStop sleep, seconds.")
@click.option("--grace", type=click.FloatRange(0.5, 120), help="Grace period, seconds.")
@click.option("--shutdown", type=click.Choice(["naive", "graceful"]))
@click.option("--bad", type=click.IntRange(0, 32), help="How many pods are bad.")
@click.option(
    "--fault",
    type=click.Choice(["reset", "5xx", "hang"]),
    help="How a bad pod fails real requests (it still passes readiness).",
)
@click.option("--max-surge", type=click.IntRange(0, 32))
@click.option("--max-unavailable", type=click.IntRange(0, 32))
@click.option("--retries", type=click.IntRange(0, 5), help="Client retries of a failed request.")
def run_command(
    name: str, datapath: str, out: Path | None, fmt: str, seed: int, **overrides: Any
) -> None:
    """Run a scenario under load, write the evidence bundle, and diagnose it."""
    chosen = _datapath(datapath)
    bundle = out or Path(tempfile.mkdtemp(prefix=f"svcdoctor-lab-{name}-"))
    from svcdoctor.lab.datapath import LabError

    try:
        result = _run_one(name, chosen, bundle, seed, overrides)
    except LabError as exc:
        click.echo(f"svcdoctor: error: {exc}", err=True)
        sys.exit(1)
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
                    "diagnosis": diagnosis_to_dict(verdict),
                    "bundle": str(bundle),
                },
                indent=2,
                default=str,
            )
        )
        return
    console = Console(highlight=False)
    console.print(
        f"[bold]lab {name}[/] ({result.datapath} datapath): {result.failed} of "
        f"{result.requests} requests failed "
        f"{dict(sorted(result.by_outcome.items()))}"
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
@click.option("--seed", type=int, default=1)
def demo(datapath: str, seed: int) -> None:
    """The race reproduced, then the fix: the same rollout before and after."""
    chosen = _datapath(datapath)
    console = Console(highlight=False)
    rows = []
    for name in ("race", "race-fixed"):
        bundle = Path(tempfile.mkdtemp(prefix=f"svcdoctor-lab-{name}-"))
        console.print(f"running {name} ({chosen} datapath) …")
        result = _run_one(name, chosen, bundle, seed, {})
        verdict = _diagnosis(bundle)
        primary = verdict.primary
        rows.append((name, result, primary.cause.value if primary else "no cause", bundle))
    table = Table("scenario", "requests", "failed", "resets / refusals", "diagnosis", "bundle")
    for name, result, cause, bundle in rows:
        broken = result.by_outcome.get("reset", 0) + result.by_outcome.get("refused", 0)
        table.add_row(
            name, str(result.requests), str(result.failed), str(broken), cause, str(bundle)
        )
    console.print(table)
    before, after = rows[0][1], rows[1][1]
    console.print(
        f"before the fix: {before.failed} failed requests; after (preStop "
        f"{rows[1][1].scenario.pod.prestop:g} s + graceful shutdown): {after.failed}"
    )


@lab.command()
def clean() -> None:
    """Remove what crashed lab runs left behind (namespaces and their processes)."""
    from svcdoctor.lab.kernel import leftovers, remove_namespaces

    found = leftovers()
    with contextlib.suppress(Exception):
        remove_namespaces(found)
    click.echo(f"removed {len(found)} network namespaces" if found else "nothing to clean")
