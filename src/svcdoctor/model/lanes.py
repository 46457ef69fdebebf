"""Per-pod lanes: each pod's lifecycle moments and the failed requests that hit it, on one
time axis with the traffic per second and the diagnosed race window after each deletion.

Pure records (no plotting): ``svcdoctor.diagnose.lanes`` fills them with the analyses (a
``Diagnosis`` carries them as ``lanes``), ``svcdoctor.report.lanes`` draws them. Times are
Unix seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from svcdoctor.model.evidence import Outcome

OTHER_PODS = "other pods"
"""The lane of the pods collapsed past the limit (no failures, or the fewest)."""
UNKNOWN_BACKEND = "unknown backend"
"""The lane of failed requests whose row names no backend (and that no single pod's race
window holds)."""


class Moment(StrEnum):
    """A moment in a pod's life, in the order the kubelet and controllers live them."""

    CREATED = "created"
    READY = "ready"
    DELETION = "deletion requested"
    PRESTOP = "preStop"
    SIGTERM = "SIGTERM"
    ENDPOINT_NOT_READY = "endpoint not ready"
    INGRESS_STOPPED = "ingress stopped routing"  # its own log's moment (a reload)
    LB_STOPPED = "load balancer stopped routing"  # its own log's (a deregistration, a drain)
    EXITED = "exited"


@dataclass(frozen=True, slots=True)
class Stamp:
    """One sourced moment of a pod (``exit_code`` for ``EXITED`` when known)."""

    kind: Moment
    ts: float
    exit_code: int | None = None


@dataclass(frozen=True, slots=True)
class FailedRequest:
    """A failed request (or a failed attempt a proxy retried) at its start, on ``backend``
    as the request log names it (``""`` when it names none). ``inferred``: the log names no
    backend and the request is on the lane of the one pod whose diagnosed race window after
    its deletion held it (a refused connection through a ClusterIP shows the client no pod
    address)."""

    ts: float
    outcome: Outcome
    backend: str
    inferred: bool = False


@dataclass(frozen=True, slots=True)
class Lane:
    """One pod (or ``OTHER_PODS`` / ``UNKNOWN_BACKEND``, or a backend address no pod is
    known for): its moments, sorted by time, and the failures that hit it, in time order.
    ``OTHER_PODS`` holds the lanes it collapses as ``members`` (and their failures)."""

    pod: str
    stamps: tuple[Stamp, ...] = ()
    failures: tuple[FailedRequest, ...] = ()
    members: tuple[Lane, ...] = ()

    def stamp(self, kind: Moment) -> Stamp | None:
        """The first stamp of a kind, if the evidence gave it."""
        return next((s for s in self.stamps if s.kind is kind), None)

    @property
    def leaves(self) -> tuple[Lane, ...]:
        """The pods' own lanes: the members of a collapsed lane, else this one."""
        return self.members or (self,)


@dataclass(frozen=True, slots=True)
class Shade:
    """The diagnosed race window after one pod's deletion."""

    pod: str
    start: float
    seconds: float

    @property
    def end(self) -> float:
        return self.start + self.seconds


@dataclass(frozen=True, slots=True)
class Lanes:
    """Everything the lanes picture shows. ``second``/``requests``: requests per second
    from ``start`` (whole seconds); ``start``/``end``: the span of the requests."""

    lanes: tuple[Lane, ...]
    second: tuple[float, ...]
    requests: tuple[int, ...]
    shades: tuple[Shade, ...]
    start: float
    end: float
    title: str

    @property
    def failed(self) -> int:
        """Failed requests marked on the lanes."""
        return sum(len(lane.failures) for lane in self.lanes)

    @property
    def duration(self) -> float:
        return self.end - self.start

    def lane(self, pod: str) -> Lane | None:
        return next((lane for lane in self.lanes if lane.pod == pod), None)
