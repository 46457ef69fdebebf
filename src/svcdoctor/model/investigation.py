"""An investigation: the five steps of ``problem.md`` ("How to investigate systematically")
as a checklist over what the parts measured, then the verdict, the fix and the next command.

``svcdoctor.cluster.investigate`` builds it from the live checks, the evidence bundle, the
diagnosis, the metrics and the active steps; ``svcdoctor.report.investigation`` renders it.
No number here is computed anew: each is the one its part measured."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, StrEnum

from svcdoctor.model.breakdown import Breakdown
from svcdoctor.model.diagnosis import Diagnosis, FixStep, Verdict
from svcdoctor.model.finding import Cause

# The shape of ``investigate -o json`` and of ``investigation.json`` (docs/schemas.md).
INVESTIGATION_SCHEMA = 1


class StepId(IntEnum):
    """The five steps, numbered as ``problem.md`` numbers them."""

    QUANTIFY = 1
    LIFECYCLE = 2
    BYPASS = 3
    SHUTDOWN = 4
    CLIENT = 5

    @property
    def title(self) -> str:
        return _TITLES[self]

    @property
    def question(self) -> str:
        return _QUESTIONS[self]


# problem.md, "How to investigate systematically"
_TITLES = {
    StepId.QUANTIFY: "Quantify",
    StepId.LIFECYCLE: "Correlate with the pod lifecycle",
    StepId.BYPASS: "Bypass the Service",
    StepId.SHUTDOWN: "Check the shutdown path",
    StepId.CLIENT: "Look at the client",
}
_QUESTIONS = {
    StepId.QUANTIFY: "What percentage fails, is it a round fraction of the replicas, does it "
    "track deployments?",
    StepId.LIFECYCLE: "Do the failures cluster in the seconds after pod deletions (the race) "
    "or spread evenly (a bad backend, infrastructure)?",
    StepId.BYPASS: "Does one pod (or node) fail more than the others when reached directly?",
    StepId.SHUTDOWN: "Is there a preStop delay, a long enough grace period, SIGTERM handling; "
    "how did the old pods exit?",
    StepId.CLIENT: "Do reused connections or retries shape (or mask) the failures?",
}


class StepStatus(StrEnum):
    """What a step came to: evidence of a cause, checked and clear, run on part of what it
    needs, or not run at all (``Step.missing`` says why)."""

    FOUND = "found"
    CLEAR = "clear"
    PARTIAL = "partial"
    NOT_RUN = "not-run"


@dataclass(frozen=True, slots=True)
class Measure:
    """One number a step found, under a stable key (docs/schemas.md lists the keys), with
    its 95 % interval when it has one."""

    key: str
    value: float | int | str | bool | None
    ci95: tuple[float, float] | None = None


@dataclass(frozen=True, slots=True)
class Skipped:
    """An active step not run, the flags of investigate that would run it (``needs``) and
    the exact command that runs it alone."""

    step: StepId
    what: str
    command: str
    needs: str = "--yes"


@dataclass(frozen=True, slots=True)
class Step:
    """One step of the checklist: what was checked, what was found (sentences with their
    numbers, and the numbers as ``measures``), what could not be done and why, and what the
    missing part would have decided."""

    id: StepId
    status: StepStatus
    checked: tuple[str, ...] = ()
    found: tuple[str, ...] = ()
    measures: tuple[Measure, ...] = ()
    missing: tuple[str, ...] = ()
    would_decide: str = ""
    causes: tuple[Cause, ...] = ()  # the causes this step's evidence points to


@dataclass(frozen=True, slots=True)
class Investigation:
    """The checklist and its conclusion. ``diagnosis``: the one the verdict comes from (the
    one written as ``diagnosis.json``); ``cause``/``strength``: the verdict (``None``: no
    cause); ``decided_by``: the steps whose evidence named it; ``fixes``: the cause's fix
    steps (the race's carry the typed patch); ``next_command``: what to run next;
    ``incomplete``: evidence the run lacks (the exit code says so when no cause is named)."""

    service: str  # NAMESPACE/NAME
    context: str
    server_version: str
    steps: tuple[Step, ...]
    cause: Cause | None
    strength: Verdict | None
    headline: str
    decided_by: tuple[StepId, ...] = ()
    evidence: tuple[str, ...] = ()
    fixes: tuple[FixStep, ...] = ()
    next_command: str | None = None
    skipped: tuple[Skipped, ...] = ()
    incomplete: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    bundle: str | None = None
    diagnosis_file: str | None = None
    diagnosis: Diagnosis | None = None
    probe: Breakdown | None = None  # the direct probe's failure rate per backend (--yes)

    def step(self, step: StepId) -> Step:
        return next(s for s in self.steps if s.id is step)
