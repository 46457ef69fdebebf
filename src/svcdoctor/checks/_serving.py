"""Shared facts for the serving checks: which containers serve, and fix snippets."""

from __future__ import annotations

import math
from typing import Any

import yaml

from svcdoctor.checks.settings import Settings
from svcdoctor.model import Container, Inventory, Workload


def serves(container: Container, target: int | str) -> bool:
    """Whether the container declares the port a Service targets (by number or name)."""
    if isinstance(target, int):
        return any(p.number == target for p in container.ports)
    return any(p.name == target for p in container.ports)


def serving_containers(inventory: Inventory, workload: Workload) -> tuple[Container, ...]:
    """Containers behind the workload's Services: those exposing a targeted port, else the
    first container (the app, by convention, when ports are not declared)."""
    services = inventory.services_of(workload)
    if not services or not workload.template.containers:
        return ()
    wanted = [p.target for s in services for p in s.ports]
    matched = tuple(c for c in workload.template.containers if any(serves(c, t) for t in wanted))
    return matched or workload.template.containers[:1]


def backed(inventory: Inventory) -> list[tuple[Workload, Container]]:
    """Every (workload, serving container) pair behind some Service."""
    return [(w, c) for w in inventory.workloads for c in serving_containers(inventory, w)]


def service_names(inventory: Inventory, workload: Workload) -> str:
    return ", ".join(s.ref.name for s in inventory.services_of(workload))


def seconds(value: float) -> int:
    """Whole seconds, rounded up (the API takes integers)."""
    return math.ceil(value - 1e-9)


def needed_grace(prestop_seconds: float, settings: Settings) -> int:
    """Grace period covering the preStop, the longest request and a margin."""
    return seconds(prestop_seconds + settings.max_request_seconds + settings.margin_seconds)


def sleep_hook(sleep: float, settings: Settings) -> dict[str, Any]:
    """The preStop hook that sleeps, native where the cluster allows it."""
    if settings.native_sleep() is False:
        return {"exec": {"command": ["sh", "-c", f"sleep {seconds(sleep)}"]}}
    return {"sleep": {"seconds": seconds(sleep)}}


def sleep_note(settings: Settings) -> str:
    if settings.native_sleep() is None:
        return (
            "\n# lifecycle.preStop.sleep needs Kubernetes >= 1.30 (GA in 1.34); on older "
            "clusters use\n#   exec: {command: [sh, -c, 'sleep N']}  (pass --kube-version)"
        )
    return ""


def pod_patch(
    workload: Workload,
    container: str | None = None,
    container_fields: dict[str, Any] | None = None,
    pod_fields: dict[str, Any] | None = None,
) -> str:
    """A strategic-merge-patch style YAML snippet for the workload's pod spec."""
    pod: dict[str, Any] = dict(pod_fields or {})
    if container is not None:
        pod["containers"] = [{"name": container, **(container_fields or {})}]
    body: dict[str, Any] = (
        {"spec": pod} if workload.ref.kind == "Pod" else {"spec": {"template": {"spec": pod}}}
    )
    return dump(body)


def dump(body: dict[str, Any]) -> str:
    text: str = yaml.dump(body, Dumper=yaml.CSafeDumper, sort_keys=False, default_flow_style=False)
    return text.rstrip()
