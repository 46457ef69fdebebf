"""What ``svcdoctor rollout-test`` is asked to do (pure): the workload, the load, the
disruption (``Mode``: a rollout restart, a node drain or a node's scale-down), and the
checks made before anything is read or created."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from svcdoctor.cluster import edge as edges
from svcdoctor.cluster.edge import EdgeKind

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
KINDS = {"deployment": "deployments", "statefulset": "statefulsets"}
ALIASES = {"deploy": "deployment", "deployments": "deployment", "sts": "statefulset",
           "statefulsets": "statefulset"}  # fmt: skip
Refused = edges.Refused  # defined beside the edge's refusals; importers name it here


class Mode(enum.StrEnum):
    """The disruption the load is measured through."""

    ROLLOUT = "rollout"  # kubectl rollout restart
    DRAIN = "drain"  # kubectl drain --ignore-daemonsets --delete-emptydir-data, then uncordon
    # an autoscaler's removal, exercised with the drain's steps (cordon, evict); the node is
    # not deleted, and is uncordoned at the end like a drained one
    SCALE_DOWN = "scale-down"


@dataclass(frozen=True, slots=True)
class Plan:
    """What to test and how."""

    namespace: str
    kind: str  # deployments | statefulsets
    name: str
    out: Path
    service: str | None = None
    rate: float = 50.0
    duration: float = 120.0  # bound on the whole test, start of the load to its end
    warmup: float = 3.0
    tail: float = 5.0
    keepalive: bool = False
    path: str = "/"
    port: str | None = None
    image: str | None = None
    allow_outage: bool = False
    timeout: float = 2.0
    redact: bool = True  # the bundle's secrets (evidence.redact); --no-redact keeps them
    network_policy: bool = False  # bound the agent's traffic to the Service's pods and DNS
    through: str | None = None  # --through: an edge (URL, ingress/NAME, gateway/NAME)
    mode: Mode = Mode.ROLLOUT  # the disruption measured
    node: str | None = None  # the node drain and scale-down empty

    @property
    def workload(self) -> str:
        return f"{self.kind[:-1]}/{self.name}"


@dataclass(frozen=True, slots=True)
class Timing:
    """When the test did what (Unix seconds; None: it did not get there)."""

    load_started: float | None = None
    restarted: float | None = None
    rolled_out: float | None = None
    load_stopped: float | None = None


def parse_workload(text: str) -> tuple[str, str]:
    """``deployment/NAME`` (kubectl's spellings: deploy, deployments, sts …) → (plural,
    name); a bare NAME is a Deployment."""
    kind, sep, name = text.partition("/")
    if not sep:
        kind, name = "deployment", text
    kind = ALIASES.get(kind.lower(), kind.lower())
    if kind not in KINDS or not name:
        raise Refused(f"{text!r}: expected deployment/NAME or statefulset/NAME")
    return KINDS[kind], name


def restart_patch(now: float) -> dict[str, Any]:
    """The patch ``kubectl rollout restart`` sends (strategic merge)."""
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: stamp}}}}}


def check_plan(plan: Plan) -> None:
    """``Refused`` when the load's ``duration`` cannot hold the warm-up, a rollout and the
    tail, ``--through`` is not an edge, or a drain names no node, a rollout one (pure;
    before anything is read or created)."""
    if (plan.mode is Mode.ROLLOUT) != (plan.node is None):
        raise Refused(
            f"--mode {plan.mode} needs --node NAME"
            if plan.node is None
            else "--node is for --mode drain or scale-down"
        )
    if plan.through is not None and edges.parse_through(plan.through)[0] is EdgeKind.URL:
        edges.url_edge(plan.through)
    if plan.duration <= plan.warmup + plan.tail:
        raise Refused(
            f"--duration {plan.duration:g}s leaves no time for the rollout: it must exceed "
            f"the {plan.warmup:g}s warm-up plus --tail {plan.tail:g}s"
        )
