"""Failures per backend pod and per client-backend pair: who failed, and who is pinned to
the pod that fails.

Pure records (no plotting): ``svcdoctor.diagnose.breakdown`` fills them with the analyses (a
``Diagnosis`` carries them as ``breakdown``), ``svcdoctor.report.backends`` draws them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BackendRate:
    """One backend as the request log names it (``pod``: the pod behind it when known):
    the requests it received (failed attempts a proxy retried included), how many failed,
    the rate with its exact 95 % interval, and whether the diagnosis singled it out."""

    backend: str
    pod: str | None
    requests: int
    failures: int
    rate: float
    ci95: tuple[float, float]
    suspect: bool

    @property
    def name(self) -> str:
        """The pod's name when known, else the backend as logged."""
        return self.pod or self.backend


@dataclass(frozen=True, slots=True)
class PairRate:
    """The requests one client sent one backend, and how many failed."""

    client: str
    backend: str
    requests: int
    failures: int
    rate: float


@dataclass(frozen=True, slots=True)
class Breakdown:
    """Every backend (suspects first, then by name) and every client-backend pair with
    traffic (empty without a client column); ``service``: the Service (proxy upstream) of
    the diagnosis when the evidence holds several."""

    backends: tuple[BackendRate, ...]
    pairs: tuple[PairRate, ...] = ()
    service: str | None = None

    @property
    def requests(self) -> int:
        return sum(b.requests for b in self.backends)

    @property
    def failures(self) -> int:
        return sum(b.failures for b in self.backends)

    @property
    def suspects(self) -> tuple[BackendRate, ...]:
        return tuple(b for b in self.backends if b.suspect)

    @property
    def others_rate(self) -> float | None:
        """The failure rate of the backends the diagnosis did not single out, together."""
        n = sum(b.requests for b in self.backends if not b.suspect)
        return sum(b.failures for b in self.backends if not b.suspect) / n if n else None

    @property
    def clients(self) -> tuple[str, ...]:
        """The clients of the pairs, in first-seen order (pairs are sorted by client)."""
        return tuple(dict.fromkeys(p.client for p in self.pairs))

    def clients_of(self, backend: str) -> tuple[PairRate, ...]:
        """The pairs of the clients that sent ``backend`` requests."""
        return tuple(p for p in self.pairs if p.backend == backend)
