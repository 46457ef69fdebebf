"""Parameters of the checks, with the defaults the rules document."""

from __future__ import annotations

from dataclasses import dataclass, field

from svcdoctor.model import Severity


@dataclass(frozen=True, slots=True)
class Settings:
    """What the user tells us about their cluster and traffic.

    ``propagation_seconds``: how long endpoint removal takes to reach every node and load
    balancer. ``max_request_seconds``: the longest legitimate request. ``margin_seconds``:
    slack added to computed grace periods. ``kube_version``: ``(major, minor)`` of the
    target cluster, or ``None`` when unknown.
    """

    propagation_seconds: float = 5.0
    max_request_seconds: float = 10.0
    margin_seconds: float = 5.0
    kube_version: tuple[int, int] | None = None
    disabled: frozenset[str] = frozenset()
    enabled: frozenset[str] | None = None  # None: every rule
    severities: dict[str, Severity] = field(default_factory=dict)

    def native_sleep(self) -> bool | None:
        """Whether ``lifecycle.preStop.sleep`` is available (beta 1.30, GA 1.34)."""
        if self.kube_version is None:
            return None
        return self.kube_version >= (1, 30)

    @property
    def kube_version_text(self) -> str:
        if self.kube_version is None:
            return "unknown"
        major, minor = self.kube_version
        return f"{major}.{minor}"
