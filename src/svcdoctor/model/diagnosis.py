"""A diagnosis: the four causes ranked, each with its evidence, fixes and details."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from svcdoctor.model.finding import Cause

LIKELY_AT = 0.6
POSSIBLE_AT = 0.3


class Verdict(StrEnum):
    LIKELY = "likely"
    POSSIBLE = "possible"
    UNLIKELY = "unlikely"

    @classmethod
    def of(cls, score: float) -> Verdict:
        if score >= LIKELY_AT:
            return cls.LIKELY
        return cls.POSSIBLE if score >= POSSIBLE_AT else cls.UNLIKELY


@dataclass(frozen=True, slots=True)
class Assessment:
    """How well the evidence supports one cause. ``collect`` says what evidence would
    settle it when this evidence cannot."""

    cause: Cause
    score: float
    evidence: tuple[str, ...] = ()
    fixes: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    collect: tuple[str, ...] = ()

    @property
    def verdict(self) -> Verdict:
        return Verdict.of(self.score)


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """The ranked assessments (best first), the summary numbers and the timeline series.

    Evidence that holds several Services (one ingress log) is diagnosed per Service
    (``service``: its upstream name); the one with the strongest cause is this diagnosis
    and the other Services with a cause are ``others``."""

    summary: dict[str, Any]
    causes: tuple[Assessment, ...]
    next_steps: tuple[str, ...] = ()
    timeline: dict[str, Any] = field(default_factory=dict)
    service: str | None = None
    others: tuple[Diagnosis, ...] = ()

    @property
    def primary(self) -> Assessment | None:
        top = self.causes[0] if self.causes else None
        return top if top is not None and top.verdict is not Verdict.UNLIKELY else None
