"""Everything read from the inputs, and the Service → workload relation."""

from __future__ import annotations

from dataclasses import dataclass, field

from svcdoctor.model.finding import Finding
from svcdoctor.model.service import Autoscaler, Service
from svcdoctor.model.workload import Workload


def selector_matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    """A non-empty equality selector matches labels that contain every pair of it."""
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


@dataclass(frozen=True, slots=True)
class Inventory:
    """The model objects of one lint run, plus the problems met while reading them."""

    workloads: tuple[Workload, ...] = ()
    services: tuple[Service, ...] = ()
    autoscalers: tuple[Autoscaler, ...] = ()
    problems: tuple[Finding, ...] = ()
    files: int = 0
    objects: int = 0
    skipped: int = 0  # documents that are not Kubernetes objects
    _targets: dict[int, tuple[Workload, ...]] = field(default_factory=dict, compare=False)
    _backing: dict[int, tuple[Service, ...]] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        by_namespace: dict[str, list[Workload]] = {}
        for w in self.workloads:
            by_namespace.setdefault(w.ref.namespace, []).append(w)
        for svc in self.services:
            candidates = by_namespace.get(svc.ref.namespace, ())
            found = tuple(w for w in candidates if targets(svc, w))
            self._targets[id(svc)] = found
            for w in found:
                self._backing[id(w)] = (*self._backing.get(id(w), ()), svc)

    def targeted(self, service: Service) -> tuple[Workload, ...]:
        """The workloads whose pods the Service selects."""
        return self._targets.get(id(service), ())

    def services_of(self, workload: Workload) -> tuple[Service, ...]:
        """The Services that select the workload's pods."""
        return self._backing.get(id(workload), ())

    def replicas(self, workload: Workload) -> int | None:
        """Replica count, taking an autoscaler's minimum into account; ``None`` if unknown."""
        for hpa in self.autoscalers:
            if (
                hpa.target.kind == workload.ref.kind
                and hpa.target.name == workload.ref.name
                and (hpa.target.namespace == workload.ref.namespace)
            ):
                return hpa.min_replicas
        if workload.ref.kind == "DaemonSet":
            return None
        if workload.ref.kind == "Pod":
            return 1
        return 1 if workload.replicas is None else workload.replicas


def targets(service: Service, workload: Workload) -> bool:
    """A Service targets a workload when its selector matches the pod template's labels
    in the same namespace (an unset namespace only matches an unset one)."""
    return (
        service.selector is not None
        and workload.serving
        and service.ref.namespace == workload.ref.namespace
        and selector_matches(service.selector, workload.template.labels)
    )
