"""The paths of a run as the reports show them: per workload, its paths (edge first) and the
leg the preStop advice covers.

``model.path`` traces the hops; this module says, for the renderers of lint, scan and
diagnose, which leg the advice was planned for: the slowest sending hop's when it is longer
than the cluster's propagation (the rule ``checks._serving`` applies to the plan), else the
propagation itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from svcdoctor.model.finding import Location, ObjectRef
from svcdoctor.model.hops import Hop, HopKind, Leg
from svcdoctor.model.inventory import Inventory
from svcdoctor.model.path import Path, Paths

PROPAGATION_SOURCE = "propagation-seconds"


@dataclass(frozen=True, slots=True)
class WorkloadPaths:
    """One workload's paths and the leg its preStop advice covers: ``covered`` is the leg,
    ``hop`` the sending hop it belongs to (``None``: the cluster's endpoint propagation)."""

    workload: ObjectRef
    location: Location
    paths: tuple[Path, ...]
    covered: Leg
    hop: Hop | None = None

    @property
    def beyond_datapath(self) -> bool:
        """Whether a path holds more than the datapath: a hop with its own leg or drain
        (a load balancer whose targets are nodes hands every request to kube-proxy, and
        adds nothing to the race)."""
        return any(_own(h) for p in self.paths for h in p.hops)

    def holds_cover(self, path: Path) -> bool:
        """Whether the covered leg is this path's (every path's, when it is the
        propagation)."""
        return self.hop is None or self.hop in path.hops

    def cover_text(self) -> str:
        """``the 30 s leg of AWS ALB (Ingress shop/web) (aws-load-balancer-controller
        #2366)``, or the cluster's propagation."""
        secs = f"{self.covered.seconds:g} s"
        if self.hop is None:
            return f"the cluster's {secs} endpoint propagation (--{PROPAGATION_SOURCE})"
        return f"the {secs} leg of {self.hop.name} ({self.covered.source})"


def _own(hop: Hop) -> bool:
    if hop.kind is HopKind.DATAPATH:
        return False
    return not (hop.kind is HopKind.LOAD_BALANCER and not hop.ip_targets and not hop.leg.seconds)


def workload_paths(
    inventory: Inventory, paths: Paths, propagation_seconds: float
) -> tuple[WorkloadPaths, ...]:
    """Every workload of ``inventory`` with a path, in the inventory's order (pure)."""
    out = []
    for workload in inventory.workloads:
        found = paths.of(workload)
        if not found:
            continue
        hop = paths.slower_than(workload, propagation_seconds)
        covered = hop.leg if hop else Leg(propagation_seconds, PROPAGATION_SOURCE)
        out.append(WorkloadPaths(workload.ref, workload.location, found, covered, hop))
    return tuple(out)
