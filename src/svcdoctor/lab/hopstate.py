"""What ``lab serve`` shows of a real hop in front of the pods (pure data): the nginx
ingress's or the haproxy load balancer's address, and the load balancer's targets as
haproxy's runtime API reports them (``show stat``), mapped to a cloud target group's
target health."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class HopKind(StrEnum):
    INGRESS = "ingress"  # nginx (lab/nginx.py)
    LOAD_BALANCER = "load-balancer"  # haproxy in IP mode (lab/haproxy.py)


class TargetHealth(StrEnum):
    """An ELB target's state (TargetHealth.State, https://docs.aws.amazon.com/
    elasticloadbalancing/latest/APIReference/API_TargetHealth.html)."""

    INITIAL = "initial"
    HEALTHY = "healthy"
    DRAINING = "draining"
    UNUSED = "unused"


# TargetHealth.Reason and Description of the states above (same page)
REASONS = {
    TargetHealth.INITIAL: ("Elb.RegistrationInProgress", "Target registration is in progress"),
    TargetHealth.HEALTHY: ("", ""),
    TargetHealth.DRAINING: (
        "Target.DeregistrationInProgress",
        "Target deregistration is in progress",
    ),
    TargetHealth.UNUSED: ("Target.NotRegistered", "Target is not registered to the target group"),
}


@dataclass(frozen=True, slots=True)
class Target:
    """One server of haproxy's backend, as ``show stat`` reports it: its status (``no
    check``/``UP``: in rotation; ``DRAIN``; ``MAINT``), and whether it ever left
    maintenance (haproxy acknowledged ``state ready`` for it)."""

    pod: str
    ip: str
    port: int
    status: str
    enabled_once: bool

    @property
    def health(self) -> TargetHealth:
        """The target's health as the cloud load balancer's API would give it: in
        maintenance before its first enable, registration in progress; in maintenance
        after it, deregistered (its deregistration delay ended)."""
        status = self.status.upper()
        if status.startswith("DRAIN"):
            return TargetHealth.DRAINING
        if status.startswith("MAINT"):
            return TargetHealth.UNUSED if self.enabled_once else TargetHealth.INITIAL
        return TargetHealth.HEALTHY


@dataclass(frozen=True, slots=True)
class HopView:
    """The real hop of a served lab: where it listens (``ip``, ``port``: what its
    clients connect to), and for a load balancer its targets, its deregistration delay
    and whether the pods carry its readiness gate."""

    kind: HopKind
    ip: str
    port: int
    targets: tuple[Target, ...] = ()
    deregistration: float = 0.0
    readiness_gate: bool = False
