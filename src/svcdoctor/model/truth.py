"""What really happened in a lab run (its ground truth), to check a diagnosis against: the
bad pods, and each deleted pod's shutdown timeline as the nodes lived it.

A simulated run's ground truth is a different record (counts per failure mechanism of the
model, no measured timelines): ``svcdoctor.simulate.bundle.SimTruth``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from svcdoctor.model.dist import Dist
from svcdoctor.model.evidence import Outcome
from svcdoctor.model.finding import Cause


@dataclass(frozen=True, slots=True)
class PodTimeline:
    """One deleted pod, in Unix seconds (None: it did not happen)."""

    pod: str
    deleted: float
    sigterm: float | None
    stopped_accepting: float | None  # SIGTERM (after the preStop), plus a graceful delay
    routing_stopped: tuple[float, ...]  # when each node applied a view without the pod
    exited: float | None
    exit_code: int | None

    @property
    def race_window(self) -> float | None:
        """Seconds the last node kept routing to the pod after it stopped accepting, to the
        millisecond (None unless both are known)."""
        if not self.stopped_accepting or not self.routing_stopped:
            return None
        return round(max(max(self.routing_stopped) - self.stopped_accepting, 0.0), 3)


@dataclass(frozen=True, slots=True)
class LabTruth:
    """A lab run's ground truth: its settings, the bad pods and the deleted pods."""

    datapath: str
    bad_pods: tuple[str, ...]  # sorted
    expected_cause: Cause | None  # the cause diagnose must find (None: no cause)
    expected_race_failures: float  # the model's count, to one decimal
    propagation: Dist  # each node's delay to apply an endpoint change
    min_sync_seconds: float
    prestop_seconds: float
    grace_seconds: float
    deleted_pods: tuple[PodTimeline, ...]  # in creation order
    broken_nodes: tuple[str, ...] = ()  # nodes whose route to the Service is broken

    @property
    def race_window(self) -> float:
        """The largest race window of a deleted pod (0 without one)."""
        return max((w for p in self.deleted_pods if (w := p.race_window)), default=0.0)


@dataclass(frozen=True, slots=True)
class DirectProbe:
    """Requests sent to one pod directly, bypassing the Service, counted by outcome."""

    pod: str
    outcomes: Mapping[Outcome, int]  # in the order first seen

    @property
    def sent(self) -> int:
        return sum(self.outcomes.values())

    @property
    def failed(self) -> int:
        return self.sent - self.outcomes.get(Outcome.OK, 0)
