"""Everything read from the inputs, and the Service → workload relation."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePath

from svcdoctor.model.finding import Finding, ObjectRef
from svcdoctor.model.live import LiveFacts
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
    # Live clusters: the workloads whose pods are in a Service's endpoints (by Service ref;
    # a Service absent here is matched by its selector) and what only a cluster knows.
    backends: dict[ObjectRef, tuple[ObjectRef, ...]] = field(default_factory=dict)
    live: LiveFacts | None = None
    _targets: dict[int, tuple[Workload, ...]] = field(default_factory=dict, compare=False)
    _backing: dict[int, tuple[Service, ...]] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        by_namespace: dict[str, list[Workload]] = {}
        by_ref: dict[ObjectRef, list[Workload]] = {}
        for w in self.workloads:
            by_namespace.setdefault(w.ref.namespace, []).append(w)
            by_ref.setdefault(w.ref, []).append(w)
        for svc in self.services:
            explicit = self.backends.get(svc.ref)
            if explicit:
                found = tuple(w for ref in explicit for w in by_ref.get(ref, ()))
            else:
                candidates = by_namespace.get(svc.ref.namespace, ())
                found = _nearest_definitions(svc, [w for w in candidates if targets(svc, w)])
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


def _nearest_definitions(service: Service, found: list[Workload]) -> tuple[Workload, ...]:
    """The matching workloads defined nearest the Service: same file first, then the longest
    common directory; one definition per workload identity.

    A repository often holds the same object several times (base and overlay, per-file and
    bundled release manifests) and unrelated apps that share a namespace name; a Service
    belongs with the objects beside it, not with look-alikes elsewhere in the tree.
    """
    home = PurePath(service.location.file).parts
    best: dict[ObjectRef, tuple[int, Workload]] = {}
    for w in found:
        parts = PurePath(w.location.file).parts
        shared = next(
            (i for i, (a, b) in enumerate(zip(home, parts, strict=False)) if a != b),
            min(len(home), len(parts)),
        )
        score = shared + (1000 if w.location.file == service.location.file else 0)
        if w.ref not in best or score > best[w.ref][0]:
            best[w.ref] = (score, w)
    nearest = max((score for score, _ in best.values()), default=0)
    return tuple(w for score, w in best.values() if score == nearest)


def targets(service: Service, workload: Workload) -> bool:
    """A Service targets a workload when its selector matches the pod template's labels
    in the same namespace (an unset namespace only matches an unset one)."""
    return (
        service.selector is not None
        and workload.serving
        and service.ref.namespace == workload.ref.namespace
        and selector_matches(service.selector, workload.template.labels)
    )
