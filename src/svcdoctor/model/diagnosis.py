"""A diagnosis: the four causes ranked, each with its evidence, fixes and typed details.

A record per fact the analyses establish (kopf ``causes.py`` style); only the renderers in
``svcdoctor.report.diagnosis`` turn them into dictionaries."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction

from svcdoctor.model.breakdown import Breakdown
from svcdoctor.model.evidence import EventKind, LoadSummary, Outcome, SourceSummary
from svcdoctor.model.finding import Cause
from svcdoctor.model.hops import HopKind
from svcdoctor.model.lanes import Lanes
from svcdoctor.model.patch import Patch, PodPatch
from svcdoctor.model.pathreport import WorkloadPaths
from svcdoctor.model.remedy import ShutdownPlan

# The shape of ``diagnose -o json``: 2 adds the race details' typed "plan" (and each
# remedy's own); 1 had no ``schema_version`` key.
SCHEMA_VERSION = 2

LIKELY_AT = 0.6
POSSIBLE_AT = 0.3


class Verdict(StrEnum):
    """How well the evidence supports a cause, from its score."""

    LIKELY = "likely"
    POSSIBLE = "possible"
    UNLIKELY = "unlikely"

    @classmethod
    def of(cls, score: float) -> Verdict:
        if score >= LIKELY_AT:
            return cls.LIKELY
        return cls.POSSIBLE if score >= POSSIBLE_AT else cls.UNLIKELY


# --- race: the endpoint-removal race and the shutdown path ---------------------------------


@dataclass(frozen=True, slots=True)
class SigKill:
    """A container of a deleted pod that exited 137 (SIGKILL, not OOM)."""

    pod: str
    container: str | None
    seconds_after_deletion: float | None
    grace_seconds: int | None
    at: float | None


@dataclass(frozen=True, slots=True)
class ShutdownPath:
    """SIGKILLs of deleted pods, failed preStop hooks, and the failures at the kills."""

    sigkilled: tuple[SigKill, ...] = ()
    failures_at_sigkill: int = 0
    kill_moments: tuple[float, ...] = ()  # sorted exit times of the SIGKILLs
    failed_prestop_hooks: int = 0
    failed_prestop_pods: tuple[str, ...] = ()
    prestop_past_grace_pods: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RaceWindow:
    """The observed race window: the lag after deletion by which 99 % of the excess
    failures happened (plus the request clock's resolution: the longest the true lag can
    be), with its 95 % bootstrap interval. Coarse clocks (whole-second request or event
    times) widen the interval by their resolution (``clock_seconds``, both together) but not
    the preStop: ``plan_seconds``, what the plan covers, is the bootstrap's upper bound
    centred within what the clocks allow."""

    seconds: float
    ci95: tuple[float, float]
    definition: str
    median_lag_seconds: float | None
    excess_failures: float  # over the lag histogram, above the baseline
    baseline_failures_per_second: float
    clock_seconds: float = 0.0
    plan_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class RemedyPatch:
    """The shutdown plan for one container, as a strategic-merge patch."""

    object: str
    container: str
    rules: tuple[str, ...]
    prestop_seconds: int
    grace_seconds: int
    patch: PodPatch


@dataclass(frozen=True, slots=True)
class HopStop:
    """One deleted pod, and when one hop stopped routing to it (its first change after)."""

    pod: str
    deleted_at: float
    stopped_at: float


@dataclass(frozen=True, slots=True)
class HopLeg:
    """One hop's leg of the race, measured from its own log (``evidence/routing.py``):
    how long after each deletion it stopped routing to the pod. ``resolution_seconds``: how late
    the hop may apply what its line says (nginx's second clock, the Lua balancer's 1 s
    sync); ``lower_bound``: the line marks a start (a cloud load balancer's data plane
    stops later than its controller's deregistration call)."""

    hop: HopKind
    by: str
    what: str
    sources: tuple[str, ...]
    resolution_seconds: float
    stops: tuple[HopStop, ...]
    median_seconds: float
    max_seconds: float
    unseen: tuple[str, ...] = ()  # deleted pods that hop was never seen to stop routing to
    lower_bound: bool = False
    failures: int = 0  # failed requests sent to a deleted pod before this hop left it

    @property
    def covers(self) -> float:
        """The longest this leg can have lasted: its largest lag plus its resolution."""
        return self.max_seconds + self.resolution_seconds


@dataclass(frozen=True, slots=True)
class RaceDetails:
    """What the race analysis measured. ``excess_failures``: within the test window after
    deletions (the permutation test's statistic); the window, when measured, carries the
    remedy planned from its upper bound."""

    deletions: int
    p_value: float
    excess_failures: float
    explained_fraction: float
    clock_resolution_seconds: float
    shutdown: ShutdownPath
    window: RaceWindow | None = None
    latency_p999_seconds: float | None = None
    recommended_prestop_seconds: int | None = None
    recommended_grace_seconds: int | None = None
    remedy: tuple[RemedyPatch, ...] = ()
    plan: ShutdownPlan | None = None  # the recommendation: largest preStop and grace of remedy
    hops: tuple[HopLeg, ...] = ()  # each hop's leg, where its own log shows when it stopped


# --- backend: one unhealthy backend --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Suspect:
    """A backend that fails more than the others by more than chance."""

    backend: str
    pod: str | None
    ip: str
    node: str | None
    requests: int
    failures: int
    failure_rate: float
    failure_rate_ci95: tuple[float, float]
    others_failure_rate: float
    rate_ratio_ci95: tuple[float, float]
    p_value: float
    ready: bool | None
    readiness_probe: str | None


@dataclass(frozen=True, slots=True)
class BackendDetails:
    """``explained_fraction`` is ``None`` when too few failures were there to test."""

    backends: int
    suspects: tuple[Suspect, ...] = ()
    explained_fraction: float | None = None


# --- reuse: connection reuse and keep-alive ------------------------------------------------


class Caller(StrEnum):
    """Who holds the kept-alive connections: the proxy writing the log, or the client."""

    SOURCE = "source"
    CLIENT = "client"


@dataclass(frozen=True, slots=True)
class ClientFailures:
    """One client's requests and failures (a row of the worst clients)."""

    client: str
    requests: int
    failures: int


@dataclass(frozen=True, slots=True)
class ClientConcentration:
    """How few clients carry most failures, against their share of traffic."""

    clients: int
    clients_with_80pct_of_failures: int
    their_traffic_share: float
    p_value: float
    worst_clients: tuple[ClientFailures, ...]


@dataclass(frozen=True, slots=True)
class ReusedConnections:
    """The traffic's share of reused connections, and the test of failures against it."""

    traffic_share: float
    p_value: float


@dataclass(frozen=True, slots=True)
class ExitFailures:
    """Failures on reused connections at a container exit (of their own backend when
    ``own_backend``), against the traffic's share of such moments."""

    failures: int
    own_backend: bool
    traffic_share: float
    p_value: float


@dataclass(frozen=True, slots=True)
class SkewedBackend:
    """A pod created during the evidence that got far less than a fair share."""

    pod: str
    share: float
    fair_share: float


@dataclass(frozen=True, slots=True)
class ClosedByUpstream:
    """Failures where the upstream closed the connection before a response."""

    closed_failures: int
    share_of_failures: float
    near_deletions: int
    backends: int
    backends_serving: int
    spread: bool
    away_from_deletions: bool


@dataclass(frozen=True, slots=True)
class IdleGaps:
    """Failures after idle gaps of ``gap_seconds`` or more on one caller→backend pair."""

    caller: Caller
    gap_seconds: float
    server_idle_seconds: float
    failures_after_gap: int
    failures: int
    traffic_share_after_gap: float
    rate_after_gap: float
    rate_otherwise: float
    p_value: float


@dataclass(frozen=True, slots=True)
class StaleConnection:
    """A failure where the upstream closed a kept-alive connection that the caller reused
    after it sat idle ``idle_seconds``, longer than any idle gap it survived before."""

    conn: str  # the connection, or the proxy → backend pair when no connection id is known
    backend: str | None
    at: float  # the failed request's start
    idle_seconds: float
    longest_survived_seconds: float | None  # None: unknown (a pair, not a connection)
    requests_before: int | None


@dataclass(frozen=True, slots=True)
class StaleConnections:
    """Closed-before-response failures on reused connections after an idle gap (at least
    ``min_idle_seconds``, longer than any the connection survived): an idle timeout between
    the two closed them (a keep-alive mismatch). ``examples``: the first few."""

    failures: int
    of_failures: int
    min_idle_seconds: float
    examples: tuple[StaleConnection, ...]


@dataclass(frozen=True, slots=True)
class ReuseDetails:
    """What the reuse analysis measured (each test ``None`` when it could not run)."""

    reused_failure_share: float
    client_concentration: ClientConcentration | None = None
    reused_connections: ReusedConnections | None = None
    failures_at_exit_on_reused: ExitFailures | None = None
    skewed_new_backends: tuple[SkewedBackend, ...] = ()
    closed_by_upstream: ClosedByUpstream | None = None
    idle_gaps: IdleGaps | None = None
    stale_connections: StaleConnections | None = None


# --- infra: conntrack, SNAT, node ----------------------------------------------------------


class ConntrackCounter(StrEnum):
    """The ``conntrack -S`` counters that count dropped connections."""

    INSERT_FAILED = "insert_failed"
    DROP = "drop"


@dataclass(frozen=True, slots=True)
class CounterValue:
    """One ``conntrack -S`` counter's count."""

    counter: ConntrackCounter
    count: int


@dataclass(frozen=True, slots=True)
class KernelAlignment:
    """How the failures line up with bursts of conntrack 'table full' lines."""

    covers_traffic: bool
    bursts: int
    failures_in_bursts: int
    traffic_share_of_bursts: float
    binomial_p: float
    placement_p: float
    explained_fraction: float
    aligned: bool


@dataclass(frozen=True, slots=True)
class CounterGrowth:
    """``conntrack -S`` counters over the requests: their growth, and the failures while
    they grew against those intervals' share of traffic."""

    growth: tuple[CounterValue, ...]  # every counter, in ``ConntrackCounter`` order
    failures_while_growing: int
    failures_covered: int
    growing_traffic_share: float
    p_value: float
    aligned: bool
    co_occurs: bool

    def of(self, counter: ConntrackCounter) -> int:
        return sum(v.count for v in self.growth if v.counter is counter)


@dataclass(frozen=True, slots=True)
class NodeConcentration:
    """The node that carries more of the failures than of the traffic."""

    node: str
    failure_share: float
    traffic_share: float
    p_value: float


@dataclass(frozen=True, slots=True)
class InfraDetails:
    """``conntrack_counters``: one snapshot since boot (no time), as the evidence gave it."""

    conntrack_full_lines: int
    suppressed_messages: int
    lines_far_from_requests: int
    conntrack_counters: tuple[CounterValue, ...] = ()
    kernel_alignment: KernelAlignment | None = None
    counter_growth: CounterGrowth | None = None
    node_concentration: NodeConcentration | None = None


CauseDetails = RaceDetails | BackendDetails | ReuseDetails | InfraDetails


@dataclass(frozen=True, slots=True)
class FixStep:
    """One step of a cause's fix: the sentence, and the patch that carries it out on
    ``target`` (the object it applies to, named in the sentence) or none: prose."""

    text: str
    patch: Patch | None = None
    target: str | None = None


def steps(texts: Iterable[str]) -> tuple[FixStep, ...]:
    """Fix steps that are prose only."""
    return tuple(FixStep(t) for t in texts)


@dataclass(frozen=True, slots=True)
class Assessment:
    """How well the evidence supports one cause. ``details``: what its analysis measured
    (``None`` when it could not run); ``collect`` says what evidence would settle it when
    this evidence cannot."""

    cause: Cause
    score: float
    evidence: tuple[str, ...] = ()
    fixes: tuple[FixStep, ...] = ()
    details: CauseDetails | None = None
    collect: tuple[str, ...] = ()

    @property
    def verdict(self) -> Verdict:
        return Verdict.of(self.score)


# --- the summary numbers and the timeline --------------------------------------------------


@dataclass(frozen=True, slots=True)
class NearestFraction:
    """The ``failing/replicas`` nearest to the error rate, and whether it fits (binomial)."""

    failing: int
    replicas: int
    p_value: float
    consistent: bool

    @property
    def text(self) -> str:
        return f"{self.failing}/{self.replicas}"

    @property
    def value(self) -> float:
        return self.failing / self.replicas

    @property
    def simplified(self) -> str:
        return str(Fraction(self.failing, self.replicas))


@dataclass(frozen=True, slots=True)
class OutcomeCount:
    """How many requests ended with one outcome."""

    outcome: Outcome
    count: int


@dataclass(frozen=True, slots=True)
class HostCount:
    """The failures of one backend host in the proxy's error log."""

    host: str
    failures: int


@dataclass(frozen=True, slots=True)
class RoundTimeout:
    """Failures that lasted a round number of seconds (just over it): a timer fired."""

    seconds: float
    failures: int


@dataclass(frozen=True, slots=True)
class UpstreamRow:
    """One Service (upstream) of a proxy log that holds many, with its strongest cause."""

    upstream: str | None
    requests: int
    errors: int
    error_rate: float | None
    cause: Cause | None
    score: float | None


@dataclass(frozen=True, slots=True)
class LoadReading:
    """A load generator's report as diagnose reads it: its failure rate with the exact
    interval, the round fraction of replicas that rate fits, and what its outcome mix and
    connection counts hint at (never more than "possible": a summary has no times)."""

    load: LoadSummary
    rate: float | None
    rate_ci95: tuple[float, float] | None
    nearest_fraction: NearestFraction | None
    hints: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Summary:
    """How many requests failed and how, over which time and inputs."""

    requests: int
    errors: int
    error_rate: float | None
    error_rate_ci95: tuple[float, float] | None
    by_outcome: tuple[OutcomeCount, ...]
    masked_by_retries: int
    masked_by_outcome: tuple[OutcomeCount, ...]
    error_log_failures: int
    error_log_hosts: tuple[HostCount, ...]
    start: float | None
    end: float | None
    duration_seconds: float
    replicas: int | None
    nearest_fraction: NearestFraction | None
    deletions: int
    sources: tuple[SourceSummary, ...] = ()
    skipped_inputs: tuple[str, ...] = ()
    incomplete: tuple[str, ...] = ()  # evidence a bundle says it lacks: read this first
    warnings: tuple[str, ...] = ()
    floor_rate: float = 0.0
    upstreams: tuple[UpstreamRow, ...] | None = None  # set when the evidence holds several
    loads: tuple[LoadReading, ...] = ()  # load generators' reports (no request times)
    # the masked attempts whose request succeeded on a retry, and those whose every try
    # failed (the rest: the evidence does not say, e.g. an error log alone)
    masked_recovered: int = 0
    masked_unrecovered: int = 0
    round_timeouts: tuple[RoundTimeout, ...] = ()

    def outcome_count(self, outcome: Outcome) -> int:
        return sum(c.count for c in self.by_outcome if c.outcome is outcome)


class EndpointState(StrEnum):
    """An endpoint's state as an EndpointSlice change leaves it."""

    READY = "ready"
    NOT_READY = "not-ready"
    REMOVED = "removed"


@dataclass(frozen=True, slots=True)
class TimelineEvent:
    """A pod's lifecycle moment on the timeline."""

    ts: float
    kind: EventKind
    pod: str


@dataclass(frozen=True, slots=True)
class EndpointMark:
    """An endpoint's change of state on the timeline."""

    ts: float
    address: str
    state: EndpointState


@dataclass(frozen=True, slots=True)
class Timeline:
    """Requests and failures per bin (``second``: each bin's start; ``step``: its width, 1 s
    for evidence files, the query step for metrics), and the lifecycle moments, for the
    plots."""

    second: tuple[float, ...] = ()
    requests: tuple[int, ...] = ()
    failures: tuple[int, ...] = ()
    events: tuple[TimelineEvent, ...] = ()
    endpoints: tuple[EndpointMark, ...] = ()
    step: float = 1.0


@dataclass(frozen=True, slots=True)
class Rollout:
    """One rollout of the workloads behind a Service, as metrics show it: pod deletions no
    further apart than a few minutes, and the requests and failures from its first deletion
    to the race's longest lag after its last. ``expected_failures``: what the failure rate
    away from every deletion predicts for its requests; ``window_seconds``: the race window
    fitted to its own excess failures (``None`` when it has too few)."""

    start: float
    end: float
    workloads: tuple[str, ...]
    deletions: int
    requests: int
    failures: int
    expected_failures: float
    failure_rate: float | None
    failure_rate_ci95: tuple[float, float]
    window_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """The ranked assessments (best first), the summary numbers and the timeline series.

    Evidence that holds several Services (one ingress log) is diagnosed per Service
    (``service``: its upstream name); the one with the strongest cause is this diagnosis
    and the other Services with a cause are ``others``. ``rollouts``: each rollout a
    metrics store shows (empty for evidence files).

    What the pictures draw, computed with the analyses (not part of the JSON): ``lanes``,
    the per-pod lanes (``None`` without request rows); ``breakdown``, the failures per
    backend, when a bad backend or connection reuse is suspected and the rows name
    backends. ``paths``: the paths in front of the workloads of the manifests given with
    the evidence (empty without manifests)."""

    summary: Summary
    causes: tuple[Assessment, ...]
    next_steps: tuple[str, ...] = ()
    timeline: Timeline = field(default_factory=Timeline)
    service: str | None = None
    others: tuple[Diagnosis, ...] = ()
    rollouts: tuple[Rollout, ...] = ()
    lanes: Lanes | None = None
    breakdown: Breakdown | None = None
    paths: tuple[WorkloadPaths, ...] = ()

    @property
    def primary(self) -> Assessment | None:
        top = self.causes[0] if self.causes else None
        return top if top is not None and top.verdict is not Verdict.UNLIKELY else None

    def cause(self, cause: Cause) -> Assessment:
        """The assessment of one cause (every diagnosis assesses all four)."""
        return next(a for a in self.causes if a.cause is cause)
