"""Which workloads back a Service: those defined near it whose pods serve, grouped so
that alternatives (one component's variants in other folders) are not added up."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from svcdoctor.checks._carrying import carries_requests
from svcdoctor.checks._serving import serving_containers
from svcdoctor.model import Inventory, Service, Workload
from svcdoctor.model.inventory import components, related


def fewest_pods(
    inventory: Inventory, workloads: Sequence[Workload], count: Callable[[Workload], int | None]
) -> list[tuple[Workload, int | None]]:
    """One ``(workload, pods)`` per component (``model.inventory.components``): of a
    component's alternatives (its variants in other folders, whose pods do not add up), the
    one that keeps the fewest known pods; ``None`` pods when none is known (a DaemonSet)."""
    found: list[tuple[Workload, int | None]] = []
    for group in components(workloads, inventory.namespace):
        counts = [(w, count(w)) for w in group]
        known = [(w, c) for w, c in counts if c is not None]
        found.append(min(known, key=lambda wc: wc[1] or 0) if known else counts[0])
    return found


def related_targets(inventory: Inventory, svc: Service) -> tuple[Workload, ...]:
    """The targeted workloads defined near the Service: same folder, a folder above or
    below it, or a sibling folder (a kustomize base beside its overlay). A look-alike in an
    unrelated part of a repository (docs next to test fixtures) is not its backend."""
    return tuple(w for w in inventory.targeted(svc) if related(svc.location.file, w.location.file))


def serving_targets(inventory: Inventory, svc: Service) -> list[Workload]:
    """The Service's ``related_targets`` whose pods serve something (``serving_containers``)."""
    return [w for w in related_targets(inventory, svc) if serving_containers(inventory, w)]


def only_backend(inventory: Inventory, workload: Workload) -> bool:
    """Whether the workload is the only backend of every Service carrying requests to it: no
    other workload's pods (a second Deployment, more bare Pods) would take over while its
    own are replaced. Its variants in other folders are alternatives, not other backends."""
    for svc in inventory.services_of(workload):
        if not carries_requests(inventory, svc):
            continue
        others = [w for w in serving_targets(inventory, svc) if w is not workload]
        for group in components([workload, *others], inventory.namespace):
            if workload not in group and any(inventory.replicas(w) != 0 for w in group):
                return False
    return True


def service_names(inventory: Inventory, workload: Workload) -> str:
    """The names of the Services that select the workload and carry requests (all of them
    when none does), each once: not a scrape-only metrics Service beside its webhook's
    (kube-green's controller-manager-metrics-service; judge208)."""
    services = inventory.services_of(workload)
    carrying = [s for s in services if carries_requests(inventory, s)] or services
    return ", ".join(dict.fromkeys(s.ref.name for s in carrying))
