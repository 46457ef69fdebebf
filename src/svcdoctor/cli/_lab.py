"""What the ``lab`` commands share: the datapath choice, the scenario's options and
defaults, the bundle directory and the progress bars."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console

from svcdoctor.cli._params import (
    Distribution,
    Duration,
    IntOrPercent,
    Number,
    option,
    resolve_count,
)
from svcdoctor.cli._scenario_options import FAULTS, LAB_CONNECTIONS, SHUTDOWNS, scenario_options
from svcdoctor.errors import CommandError

DATAPATHS = ("auto", "kernel", "userspace")
BUNDLE_FILES = (
    *("requests.csv", "events.json", "pods.json", "endpointslices.jsonl", "lab.json"),
    *("ingress-nginx", ".lab"),  # lab.run: the nginx ingress's logs, the clients' own
)
MAX_DELAY = 60.0  # seconds: the largest propagation delay or request latency a run takes
MAX_SERVE = 3600.0  # seconds: the longest a lab serves (svcdoctor.lab.serve.MAX_SERVE_SECONDS)
TEMP_PREFIX = "svcdoctor-lab-"  # bundles of runs without --out, in the temporary directory

# the names of svcdoctor.lab.scenarios.SCENARIOS, spelled out so that starting the CLI does
# not import the lab; a test keeps the two equal
SCENARIO_NAMES = (
    "race",
    "race-fixed",
    "bad-backend",
    "keepalive-exit",
    "keepalive-exit-fixed",
    "keepalive",
    "keepalive-fixed",
    "sigkill",
    "broken-node",
    "drain",
    "drain-fixed",
    "lb-ip",
    "lb-ip-fixed",
)

Progress = Callable[[str, int, int], None]
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def fail(message: str, code: int) -> NoReturn:
    """One line on stderr and exit ``code`` (see ``_errors``)."""
    raise CommandError(message, code)


def choose_datapath(choice: str) -> str:
    """The datapath to use: ``auto`` is the kernel's where it can run, else userspace with
    a one-line note; ``kernel`` where it cannot is a usage error (exit 2)."""
    from svcdoctor.lab import kernel

    reason = kernel.available()
    if choice == "kernel" and reason:
        raise kernel.KernelUnavailable(f"{reason}; --datapath userspace runs without privileges")
    if choice == "auto":
        if reason:
            note_fallback(reason)
            return "userspace"
        return "kernel"
    return choice


def note_fallback(reason: str) -> None:
    click.echo(f"note: using the userspace datapath: {reason}", err=True)


def on_datapath(chosen: str, requested: str, attempt: Callable[[str], T]) -> T:
    """``attempt(chosen)``. A kernel datapath refused at start (a container without the
    capabilities) falls back to userspace, with a note, in ``--datapath auto``; else it is
    a usage error (exit 2)."""
    from svcdoctor.lab.kernel import KernelUnavailable

    try:
        return attempt(chosen)
    except KernelUnavailable as exc:
        if requested != "auto":
            raise KernelUnavailable(
                f"{exc}; --datapath userspace runs without privileges"
            ) from None
        note_fallback(str(exc))
        return attempt("userspace")


DELAY = Distribution(MAX_DELAY, low_high=True, what="the lab takes")


def dist(ctx: click.Context | None, param: click.Parameter | None, value: str | None) -> Any:
    """A delay distribution (see ``svcdoctor.model.dist``); ``LOW:HIGH`` is uniform."""
    return None if value is None else DELAY.convert(value, param, ctx)


def slow(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    if value is None:
        return None
    from svcdoctor.lab.pod import parse_slow

    try:
        return parse_slow(value, MAX_DELAY)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _given(o: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: o[k] for k in keys if o.get(k) is not None}


def customised(scenario: Any, o: dict[str, Any]) -> Any:
    """The scenario with the options the user gave (the others keep its values)."""
    pod = replace(scenario.pod, **_given(o, "prestop", "grace", "shutdown", "shutdown_delay"))
    pod = replace(pod, **_given(o, "latency", "prestop_fails"))
    if o.get("slow") is not None:
        pod = replace(pod, slow_share=o["slow"][0], slow_seconds=o["slow"][1])
    load = replace(
        scenario.load, **_given(o, "rate", "clients", "connection", "retries", "max_connection_age")
    )
    prop = scenario.propagation
    if o.get("propagation") is not None:
        prop = replace(prop, override=o["propagation"])
    if o.get("min_sync_period") is not None:
        prop = replace(prop, min_sync=o["min_sync_period"])
    changes = _given(o, "replicas", "nodes", "fault", "baseline", "tail")
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


def bundle_dir(out: Path | None, name: str) -> Path:
    """``--out``, new or empty or an earlier lab bundle (overwritten); else a new temporary
    directory. Anything else is refused: the run must not mix its evidence with other files."""
    if out is None:
        return Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{name}-"))
    if out.exists() and not out.is_dir():
        fail(f"--out {out}: exists and is not a directory", 2)
    if out.is_dir():
        others = sorted(p.name for p in out.iterdir() if p.name not in BUNDLE_FILES)
        if others:
            fail(
                f"--out {out}: holds other files ({', '.join(others[:3])}); give a new or "
                "empty directory, or an earlier lab bundle",
                2,
            )
    try:
        out.mkdir(parents=True, exist_ok=True)
        (out / ".svcdoctor-write-test").touch()
        (out / ".svcdoctor-write-test").unlink()
    except OSError as exc:
        fail(f"--out {out}: cannot write there ({exc.strerror})", 2)
    return out


@contextmanager
def progress_bars(show: bool) -> Iterator[Callable[[str], Progress]]:
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


def scenario_default(path: str, unit: str = "") -> Callable[[], str]:
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


def scenario_value(decl: str, kind: click.ParamType[Any], text: str, path: str) -> Callable[[F], F]:
    """An option of a scenario's number of seconds (its default: the scenario's)."""
    return option(decl, type=kind, help=text, default_text=scenario_default(path, " s"))


scenario_option = option(
    "--scenario",
    "name",
    type=click.Choice(SCENARIO_NAMES),
    default="race",
    help=f"What to reproduce: {', '.join(SCENARIO_NAMES)}.",
)
datapath_option = option(
    "--datapath",
    type=click.Choice(DATAPATHS),
    default="auto",
    help="kernel: network namespaces + iptables (root with CAP_NET_ADMIN); userspace: "
    "loopback proxy; auto: kernel where it can run, else userspace (with a note).",
)
seed_option = option(
    "--seed", type=Number(0, 2**32 - 1, integer=True), default=1, help="Random seed of the run."
)


def _default(path: str, unit: str = "") -> dict[str, Any]:
    return {"default_text": scenario_default(path, unit)}


_PROPAGATION = f"Each node's, per change: LOW:HIGH (uniform) or a DIST, at most {MAX_DELAY:g} s."
run_scenario_options = scenario_options(
    {
        "replicas": Number(1, 32, integer=True),
        "nodes": Number(1, 8, integer=True),
        "rate": Number(1, 2000, unit="requests/s"),
        "clients": Number(1, 64, integer=True),
        "connection": LAB_CONNECTIONS,
        "max_connection_age": Duration(0.1, 600),
        "retries": Number(0, 5, integer=True),
        "propagation": DELAY,
        "min_sync_period": Duration(0, 30),
        "prestop": Duration(0, 60),
        "grace": Duration(0.5, 120),
        "shutdown": SHUTDOWNS,
        "latency": DELAY,
        "bad_backends": Number(0, 32, integer=True),
        "fault": FAULTS,
        "max_surge": IntOrPercent(32),
        "max_unavailable": IntOrPercent(32),
    },
    {
        "replicas": _default("replicas"),
        "nodes": _default("nodes"),
        "rate": _default("load.rate"),
        "clients": _default("load.clients"),
        "connection": _default("load.connection"),
        "max_connection_age": {"default_text": "none"},
        "retries": _default("load.retries"),
        "propagation": _default("delay") | {"help": _PROPAGATION},
        "min_sync_period": _default("propagation.min_sync", " s"),
        "prestop": _default("pod.prestop", " s"),
        "grace": _default("pod.grace", " s"),
        "shutdown": _default("pod.shutdown"),
        "latency": _default("pod.latency") | {"help": "DIST, seconds (exp:0.005)."},
        "bad_backends": _default("bad") | {"aliases": ("--bad",)},
        "fault": _default("fault"),
        "max_surge": _default("max_surge"),
        "max_unavailable": _default("max_unavailable"),
    },
)
