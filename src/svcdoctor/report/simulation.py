"""Renderers of a simulation and of a recommendation: text (rich), JSON and a timeline plot."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from svcdoctor.model import Cause, remedy
from svcdoctor.simulate import (
    SLEEP_ACTION,
    Dist,
    Propagation,
    Recommendation,
    SimParams,
    Simulation,
)
from svcdoctor.simulate.bundle import SimTruth
from svcdoctor.simulate.engine import CAUSE_OF, FAILURES, Mechanism
from svcdoctor.simulate.summary import Quantiles, Router

BLOCKS = " ▁▂▃▄▅▆▇█"
SPARK_WIDTH = 60
_CAUSE_COLOUR = {
    Cause.RACE: "#c0392b",
    Cause.REUSE: "#8e44ad",
    Cause.BACKEND: "#d35400",
    Cause.INFRA: "#2c3e50",
}


def params_to_dict(p: SimParams | Propagation) -> dict[str, Any]:
    """Parameters as JSON: distributions as their spec (``lognormal:0.05,0.5``)."""
    out: dict[str, Any] = {}
    for f in fields(p):
        value = getattr(p, f.name)
        if isinstance(value, Dist):
            value = str(value)
        elif isinstance(value, Propagation):
            value = {
                **params_to_dict(value),
                "apply_seconds": round(value.apply, 4),
                "sync_period_seconds": round(value.sync_period, 4),
            }
        out[f.name] = value
    return out


def _rounded(means: Mapping[Cause, float] | Mapping[Mechanism, float]) -> dict[str, float]:
    return {k.value: round(v, 2) for k, v in means.items()}


def _counts(counts: Mapping[Cause, int] | Mapping[Mechanism, int]) -> dict[str, int]:
    return {k.value: v for k, v in counts.items()}


def quantiles_to_dict(q: Quantiles) -> dict[str, float]:
    return {"p50": q.p50, "p99": q.p99, "max": q.max}


def simulation_to_dict(s: Simulation) -> dict[str, Any]:
    interval = s.interval()
    t = s.timeline
    return {
        "requests": round(s.requests, 1),
        "failed": round(s.failed, 2),
        "failure_rate": s.failure_rate,
        "rollout_failure_rate": s.rollout_failure_rate,
        "interval": [round(v, 2) for v in interval] if interval else None,
        "by_cause": _rounded(s.mean_by_cause()),
        "by_mechanism": _rounded(s.mean_by_mechanism()),
        "expected_race": round(sum(r.expected_race for r in s.runs) / len(s.runs), 2),
        "runs": [
            {
                "seed": r.seed,
                "requests": r.requests,
                "failed": r.failed,
                "attempts": r.attempts,
                "by_cause": _counts(r.by_cause),
                "by_mechanism": _counts(r.by_mechanism),
                "deletions": r.deletions,
                "sigkilled": r.sigkilled,
                "expected_race": r.expected_race,
                "programming_seconds": {
                    kind.value: quantiles_to_dict(q) for kind, q in r.programming.items()
                },
                "race_window_seconds": quantiles_to_dict(r.window),
                "rollout_seconds": list(r.rollout) if r.rollout else None,
                "rollout_requests": r.rollout_requests,
                "rollout_failed": r.rollout_failed,
                "clients": r.clients,
                "clients_failed": r.clients_failed,
            }
            for r in s.runs
        ],
        "warnings": warnings(s.params),
        "parameters": params_to_dict(s.params),
        "timeline": {
            "bin_seconds": t.bin_seconds,
            "requests": list(t.requests),
            "failed": {k.value: list(v) for k, v in t.failed.items()},
            "deletions": list(t.deletions),
        },
    }


def render_json(s: Simulation) -> str:
    return json.dumps(simulation_to_dict(s), indent=2)


def sim_truth_to_dict(t: SimTruth) -> dict[str, Any]:
    """The ground truth of a simulated run (``simulate.json`` of ``--emit-evidence``)."""
    return {
        "seed": t.seed,
        "epoch": t.epoch,
        "bad_pods": list(t.bad_pods),
        "deleted_pods": list(t.deleted_pods),
        "sigkilled_pods": list(t.sigkilled_pods),
        "by_mechanism": _counts(t.by_mechanism),
        "outcome_of_mechanism": {m.value: o.value for m, o in t.outcome_of_mechanism.items()},
    }


def emitted_to_json(p: SimParams, requests: int, failed: int, truth: SimTruth) -> str:
    """``simulate.json`` of ``--emit-evidence``: the parameters, counts and ground truth."""
    meta = {
        "source": "svcdoctor simulate",
        "parameters": params_to_dict(p),
        "requests": requests,
        "failed": failed,
        "ground_truth": sim_truth_to_dict(truth),
    }
    return json.dumps(meta, indent=2)


def describe(p: SimParams) -> str:
    """The scenario in one line."""
    conn = {"new": "a new connection per request", "keepalive": "keep-alive", "http2": "HTTP/2"}
    parts = [
        f"{p.nodes:,} nodes",
        f"{p.replicas} replicas",
        p.event_text if p.rollout else "no rollout",
        f"{p.rate:g} req/s for {p.duration:g} s",
        conn[p.connection]
        + (f" (max age {p.max_connection_age:g} s)" if p.max_connection_age else ""),
        f"{p.shutdown} shutdown",
        f"preStop {p.prestop:g} s",
        f"grace {p.grace:g} s",
    ]
    if p.retries:
        parts.append(f"{p.retries} retries")
    if p.bad_backends:
        parts.append(f"{p.bad_backends} bad backend(s) ({p.fault})")
    return ", ".join(parts)


def _percent(rate: float) -> str:
    return f"{rate * 100:.3g} %"


def warnings(p: SimParams) -> list[str]:
    """Settings that do not do what they may seem to."""
    out = []
    if p.rollout and p.prestop >= p.grace:
        out.append(
            f"preStop {p.prestop:g} s is not shorter than the grace period {p.grace:g} s: the "
            "kubelet cuts the hook at the grace period and leaves 2 s before SIGKILL"
        )
    if p.max_connection_age is not None and p.connection == "new":
        out.append("--max-connection-age has no effect with a new connection per request")
    if p.idempotent < 1 and not p.retries:
        out.append("--idempotent has no effect without --retries")
    if p.ingress_replicas != SimParams().ingress_replicas and not p.ingress_share:
        out.append("--ingress-replicas has no effect without --ingress-share")
    return out


def sparkline(values: list[int], width: int = SPARK_WIDTH) -> str:
    """Values squeezed into ``width`` characters (sums per character), scaled to the max."""
    if not values:
        return ""
    step = max(1, -(-len(values) // width))
    sums = [sum(values[i : i + step]) for i in range(0, len(values), step)]
    top = max(sums)
    if top == 0:
        return BLOCKS[0] * len(sums)
    return "".join(BLOCKS[0 if v == 0 else max(1, round(v / top * 8))] for v in sums)


def render_text(s: Simulation, console: Console, arguments: str = "…") -> None:
    """``arguments``: the user's model options, repeated in the hint to ``recommend``."""
    p = s.params
    console.print(f"[bold]Simulated[/] {len(s.runs)} window(s): {describe(p)}", soft_wrap=True)
    interval = s.interval()
    span = f" (95 % interval {interval[0]:,.1f}-{interval[1]:,.1f})" if interval else ""
    style = "bold red" if s.failed else "bold green"
    console.print(
        f"[{style}]Failed requests per window: {s.failed:,.1f}[/]{span} of {s.requests:,.0f}"
        f" — {_percent(s.failure_rate)}",
        soft_wrap=True,
    )
    by_mech = s.mean_by_mechanism()
    table = Table(box=None, pad_edge=False)
    for name in ("cause", "failed", "share", "mechanisms"):
        table.add_column(name, justify="right" if name in ("failed", "share") else "left")
    for cause, count in sorted(s.mean_by_cause().items(), key=lambda kv: -kv[1]):
        if count <= 0:
            continue
        mechs = " · ".join(
            f"{m} {by_mech[m]:,.1f}" for m in FAILURES if CAUSE_OF[m] is cause and by_mech[m] > 0
        )
        table.add_row(cause, f"{count:,.1f}", f"{count / s.failed:.0%}", mechs)
    if s.failed:
        console.print(table)
    first = s.runs[0]
    prop = p.propagation
    if p.rollout and first.deletions < p.replicas:
        console.print(
            f"[yellow]the rollout did not finish in the window: {first.deletions} of "
            f"{p.replicas} old pods deleted (run 1); lengthen --duration[/]",
            soft_wrap=True,
        )
    if p.connection != "new" and first.clients_failed:
        console.print(
            f"Clients hit: {first.clients_failed:,} of {first.clients:,} (run 1): held "
            "connections pin each client to one pod",
            soft_wrap=True,
        )
    if first.deletions:
        for kind, g in first.programming.items():
            how = {
                Router.KUBE_PROXY: f"--propagation {prop.override} + min-sync {prop.min_sync:g} s"
                if prop.override
                else f"controller {prop.controller} + watch {prop.watch} + min-sync "
                f"{prop.min_sync:g} s + apply {prop.apply:.3g} s",
                Router.INGRESS: f"controller + watch + resync every {prop.ingress_sync:.3g} s",
                Router.LOAD_BALANCER: f"controller + deregistration {prop.lb}",
            }[kind]
            console.print(
                f"{kind} stopped routing to a deleted pod after p50 {g.p50:.2f} s · p99 "
                f"{g.p99:.2f} s · max {g.max:.2f} s ({how})",
                soft_wrap=True,
            )
        w = first.window
        console.print(
            f"Race window (routed to a pod that stopped accepting): p50 {w.p50:.2f} s · "
            f"p99 {w.p99:.2f} s · max {w.max:.2f} s; closed form "
            f"{first.expected_race:,.1f} failed new connections (run 1)",
            soft_wrap=True,
        )
        rate = s.rollout_failure_rate
        if rate is not None and first.rollout:
            console.print(
                f"During the rollout ({first.rollout[1] - first.rollout[0]:,.0f} s, run 1): "
                f"{_percent(rate)} of requests failed",
                soft_wrap=True,
            )
    for warning in warnings(p):
        console.print(f"[yellow]! {warning}[/]", soft_wrap=True)
    t = s.timeline
    failed = [sum(v) for v in zip(*t.failed.values(), strict=True)]
    if any(failed):
        prefix = f"Failures over time (run 1, {p.duration:g} s): "
        line = sparkline(failed)
        console.print(prefix + line, markup=False, highlight=False)
        if t.deletions:
            step = max(1, -(-len(failed) // SPARK_WIDTH))
            marks = [" "] * len(line)
            for d in t.deletions:
                marks[min(len(line) - 1, int(d / t.bin_seconds) // step)] = "^"
            label = f"{'pod deletions: ':>{len(prefix)}}"
            console.print(label + "".join(marks).rstrip(), markup=False, highlight=False)
    if s.failed and p.rollout:
        console.print(
            f"[dim]Next: svcdoctor simulate recommend {escape(arguments)} --target-failures "
            "0.0001 (the preStop and grace period that close the race)[/]".replace("  ", " "),
            soft_wrap=True,
        )


def plot_simulation(s: Simulation, out: Path | io.BytesIO, fmt: str = "png") -> None:
    """Requests and failures (by cause) per bin of the first run, with the deletions."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = s.timeline
    x = [i * t.bin_seconds for i in range(len(t.requests))]
    fig, ax = plt.subplots(figsize=(11, 3.6), dpi=110)
    bottom = [0.0] * len(x)
    for cause in Cause:
        values = t.failed[cause]
        if any(values):
            ax.bar(
                x,
                values,
                width=t.bin_seconds,
                bottom=bottom,
                align="edge",
                color=_CAUSE_COLOUR[cause],
                label=f"failed: {cause.value}",
            )
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    ax.set_xlabel("seconds into the window")
    ax.set_ylabel(f"failed per {t.bin_seconds:g} s")
    twin = ax.twinx()
    twin.plot(x, t.requests, color="#7f8c8d", linewidth=0.8, label="requests")
    twin.set_ylabel(f"requests per {t.bin_seconds:g} s")
    twin.set_ylim(bottom=0)
    for i, d in enumerate(t.deletions):
        ax.axvline(d, color="#2c3e50", linewidth=0.7, alpha=0.7, label="pod deleted" * (i == 0))
    handles = ax.get_legend_handles_labels()
    twin_handles = twin.get_legend_handles_labels()
    ax.legend(
        handles[0] + twin_handles[0], handles[1] + twin_handles[1], loc="upper right", fontsize=8
    )
    ax.set_title(
        f"{s.failed:,.1f} failed of {s.requests:,.0f} per window ({_percent(s.failure_rate)})"
    )
    fig.tight_layout()
    fig.savefig(out, format=fmt)
    plt.close(fig)


def recommendation_to_dict(r: Recommendation) -> dict[str, Any]:
    return {
        "prestop_seconds": r.prestop_seconds,
        "grace_seconds": r.grace_seconds,
        "grace_seconds_to_set": r.grace_to_set,
        "target_failures": r.target,
        "rollout_requests": round(r.rollout_requests, 1),
        "predicted_failure_rate": r.predicted_failure_rate,
        "simulated_failure_rate": r.checked.rollout_failure_rate,
        "met": r.met,
        "reasons": list(r.reasons),
        "yaml": recommendation_yaml(r),
        "current": _brief(r.current),
        "checked": _brief(r.checked),
        "parameters": params_to_dict(r.current.params),
        **(
            {"sidecar_drain_seconds": r.sidecar_drain_seconds}
            if r.sidecar_drain_seconds is not None
            else {}
        ),
        **(
            {"lb_deregistration_seconds": r.lb_deregistration_seconds}
            if r.lb_deregistration_seconds is not None
            else {}
        ),
        "curve": [
            {
                "prestop_seconds": c.prestop_seconds,
                "grace_seconds": c.grace_seconds,
                "failed_per_rollout": round(c.failed_per_rollout, 4),
            }
            for c in r.curve
        ],
    }


def _brief(s: Simulation) -> dict[str, Any]:
    return {
        "prestop_seconds": s.params.prestop,
        "grace_seconds": s.params.grace,
        "failed": round(s.failed, 2),
        "failure_rate": s.failure_rate,
        "rollout_failure_rate": s.rollout_failure_rate,
        "by_cause": _rounded(s.mean_by_cause()),
        "runs": len(s.runs),
    }


def render_recommendation_json(r: Recommendation) -> str:
    return json.dumps(recommendation_to_dict(r), indent=2)


def render_recommendation_text(r: Recommendation, console: Console) -> None:
    p = r.current.params
    allowed = r.target * r.rollout_requests
    console.print(f"[bold]For[/] {describe(p)}", soft_wrap=True)
    console.print(
        f"target: at most {_percent(r.target)} of the requests sent during a rollout fail "
        f"(≈{allowed:,.1f} of {r.rollout_requests:,.0f})",
        soft_wrap=True,
    )
    style = "bold green" if r.met else "bold red"
    verdict = "meets the target" if r.met else "does NOT meet the target"
    console.print(
        f"[{style}]preStop sleep {r.prestop_seconds} s, terminationGracePeriodSeconds "
        f"≥ {r.grace_seconds} s {verdict}[/]",
        soft_wrap=True,
    )
    if r.grace_to_set > r.grace_seconds:
        console.print(
            f"(your grace period, {p.grace:g} s, already covers it: keep it)", soft_wrap=True
        )
    table = Table(box=None, pad_edge=False)
    for name in ("", "preStop", "grace", "failed / rollout", "of its requests"):
        table.add_column(name, justify="left" if not name else "right")
    for label, s in (("now", r.current), ("recommended", r.checked)):
        rate = s.rollout_failure_rate
        table.add_row(
            label,
            f"{s.params.prestop:g} s",
            f"{s.params.grace:g} s",
            f"{np.mean([x.rollout_failed for x in s.runs]):,.1f}",
            _percent(rate) if rate is not None else "-",
        )
    console.print(table)
    simulated = r.checked.rollout_failure_rate
    console.print(
        f"predicted {_percent(r.predicted_failure_rate)} (closed form); simulated "
        f"{_percent(simulated or 0.0)} over {len(r.checked.runs)} other rollout(s)",
        soft_wrap=True,
    )
    for reason in r.reasons:
        console.print(f"  [yellow]![/] {reason}", soft_wrap=True)
    if r.sidecar_drain_seconds is not None:
        console.print(
            f"the pod's mesh sidecar must take connections ≥ {r.sidecar_drain_seconds} s after "
            "the deletion (Istio terminationDrainDuration, Linkerd "
            "proxy-wait-before-exit-seconds), or use a native sidecar",
            soft_wrap=True,
        )
    if r.lb_deregistration_seconds is not None:
        console.print(
            f"the load balancer's deregistration delay must be ≥ {r.lb_deregistration_seconds}"
            " s: it cuts the requests still in flight when it ends",
            soft_wrap=True,
        )
    for warning in warnings(p):
        console.print(f"  [yellow]![/] {warning}", soft_wrap=True)
    console.print("\n[bold]Deployment fields[/] (merge into your manifest):")
    console.print(recommendation_yaml(r), end="", markup=False, highlight=False)


def snippet(prestop: int, grace: int, version: tuple[int, int] = SLEEP_ACTION) -> str:
    """The Deployment fields (a strategic-merge patch), with the hook the remedy model picks
    for the version (native ``sleep`` from 1.30, ``sh -c sleep`` before)."""
    lines = [
        "# answers SVD101/SVD102 (svcdoctor lint)",
        "spec:",
        "  template:",
        "    spec:",
        f"      terminationGracePeriodSeconds: {grace}",
        "      containers:",
        "        - name: app  # your container",
    ]
    kind = remedy.hook_kind(version, None)
    if prestop > 0:
        lines += ["          lifecycle:", "            preStop:"]
        if kind is remedy.HookKind.SLEEP:
            lines += ["              sleep:", f"                seconds: {prestop}"]
        else:
            lines += [
                "              exec:  # needs a shell in the image (no native sleep before 1.30)",
                f'                command: ["sh", "-c", "sleep {prestop}"]',
            ]
    return "\n".join(lines) + "\n"


def recommendation_yaml(r: Recommendation) -> str:
    """The Deployment fields that apply the recommendation."""
    return snippet(r.prestop_seconds, r.grace_to_set, r.kubernetes_version)
