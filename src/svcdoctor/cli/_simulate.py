"""What ``simulate`` and ``simulate recommend`` share: the model's options (the scenario's,
shared with ``lab run``, and the simulation's own), the parameters they build, the progress
bar and the checks of outputs before the work."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import click
from click.core import ParameterSource
from rich.console import Console

from svcdoctor.cli._errors import extras_needed
from svcdoctor.cli._params import (
    Distribution,
    Duration,
    IntOrPercent,
    Number,
    Option,
    Share,
    option,
    output_option,
    resolve_count,
)
from svcdoctor.cli._scenario_options import CONNECTIONS, DAY, FAULTS, SHUTDOWNS, scenario_options
from svcdoctor.cli.config import ConfigError, kube_version

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
    "sidecar_drain": "none: no sidecar, or a native one",
    "pdb_max_unavailable": "none: no PodDisruptionBudget",
    "scale_to": "none: half the replicas",
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


_DELAY = Distribution(DAY)
_PERCENT = {"default": "25%"}

_SCENARIO = scenario_options(
    {
        "nodes": Number(1, 20_000, integer=True),
        "replicas": Number(1, 5_000, integer=True),
        "max_surge": IntOrPercent(5_000),
        "max_unavailable": IntOrPercent(5_000),
        "rate": Number(0, 1e6, low_open=True),
        "prestop": Duration(0, 3600),
        "grace": Duration(0, DAY),
        "shutdown": SHUTDOWNS,
        "latency": _DELAY,
        "clients": Number(0, 1_000_000, integer=True),
        "connection": CONNECTIONS,
        "max_connection_age": Duration(0, 7 * DAY, low_open=True),
        "retries": Number(0, 10, integer=True),
        "bad_backends": Number(0, 5_000, integer=True),
        "fault": FAULTS,
        "propagation": _DELAY,
        "min_sync_period": Duration(0, 3600),
    },
    {
        "max_surge": _PERCENT | {"cls": Option},
        "max_unavailable": _PERCENT | {"cls": Option},
        "clients": {"help": "0: one per node."},
        "propagation": {
            "help": "Replaces controller + watch + apply, and min-sync batching unless "
            "--min-sync-period is given."
        },
    },
    cls=ModelOption,
)
MODEL_OPTIONS: list[F] = [
    _SCENARIO,
    _opt("--duration", type=Duration(0, DAY, low_open=True), help="Seconds of traffic."),
    _opt(
        "--rollout-at",
        type=Duration(0, DAY),
        help="Seconds into the window the rollout starts (with a short --duration: a tenth).",
    ),
    _opt("--no-rollout", is_flag=True, help="Steady traffic, no rolling update."),
    _opt(
        "--event",
        type=click.Choice(["rollout", "drain", "scale-down"]),
        help="What takes pods away at --rollout-at: a rolling update, a drain of node 0 "
        "(evictions, PodDisruptionBudget honoured, replacements elsewhere), a scale-down.",
    ),
    _opt(
        "--pdb-max-unavailable",
        type=Number(1, 5_000, integer=True),
        help="drain: the PDB's maxUnavailable.",
    ),
    _opt("--scale-to", type=Number(0, 5_000, integer=True), help="scale-down: replicas left."),
    _opt("--startup", type=_DELAY, help="New pod creation → Ready."),
    _opt("--idempotent", type=Share(), help="Share of requests safe to retry (0.9 or 90%)."),
    _opt("--timeout", type=Duration(0, 3600, low_open=True), help="Client timeout."),
    _opt(
        "--conntrack-max",
        type=Number(1, 2**31 - 1, integer=True),
        help="nf_conntrack_max per node.",
    ),
    _opt("--node-conn-rate", type=Number(0, 1e6), help="Other new connections/s per node."),
    _opt("--ingress-share", type=Share(), help="Share via ingress-nginx (0.5 or 50%)."),
    _opt(
        "--ingress-replicas",
        type=Number(1, 1_000, integer=True),
        help="ingress-nginx controller replicas.",
    ),
    _opt("--lb-share", type=Share(), help="Share via a cloud LB to pods (0.5 or 50%)."),
    _opt("--lb-delay", type=_DELAY, help="LB's leg: deletion → it stops sending new requests."),
    _opt(
        "--lb-deregistration",
        type=Duration(0, 3600),
        help="The LB target group's deregistration delay: in-flight requests cut after it.",
    ),
    _opt("--lb-readiness-gate", is_flag=True, help="Pods Ready once the LB registered them."),
    _opt(
        "--sidecar-drain",
        type=Duration(0, DAY),
        help="The pod's mesh sidecar takes connections this long after the deletion.",
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
    _opt("--services", type=Number(0, 1_000_000, integer=True), help="Services in the cluster."),
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
    "lb_deregistration",
    "sidecar_drain",
    "lb_readiness_gate",
    "event",
    "pdb_max_unavailable",
    "scale_to",
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
        from svcdoctor.simulate import ParamError, SimParams

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
        surge = resolve_count(o["max_surge"], replicas, True)
        unavailable = resolve_count(o["max_unavailable"], replicas, False)
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


def given_options(ctx: click.Context, values: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v
        for k, v in values.items()
        if ctx.get_parameter_source(k) not in (ParameterSource.DEFAULT, None)
    }


def with_progress(fmt: str, label: str, steps: int, work: Callable[[Progress], Any]) -> Any:
    """A progress bar on a terminal (stderr); nothing when piped or with --format json."""
    if fmt == "json" or not sys.stderr.isatty():
        return work(lambda: None)
    from rich.progress import Progress as Bar

    with Bar(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=steps)
        return work(lambda: bar.advance(task))


def parse_version(text: str) -> tuple[int, int]:
    try:
        return kube_version(text, "--kubernetes-version")
    except ConfigError as exc:
        raise click.BadParameter(
            f"{text!r}: expected MAJOR.MINOR such as 1.30", param_hint="--kubernetes-version"
        ) from exc
