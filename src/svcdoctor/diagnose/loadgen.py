"""Load generators' reports in the diagnosis: counts without times, so they never make a
cause "likely"; a clear outcome mix makes one "possible", with the quoted numbers."""

from __future__ import annotations

from dataclasses import replace

from svcdoctor.diagnose.quantify import nearest_fraction
from svcdoctor.diagnose.stats import proportion_ci
from svcdoctor.model import Assessment, Cause, Evidence, LoadSummary, Outcome
from svcdoctor.model.diagnosis import LIKELY_AT, POSSIBLE_AT, LoadReading

# what each outcome points to (docs/formats.md, problem.md): a refused connect is a
# connection to an endpoint that no longer listens (the removal race, or no endpoint);
# a reset or a close before the answer on a kept-alive connection is a stale pooled
# connection (keep-alive mismatch) or a shutdown that closes it; 5xx is the backend
# answering badly; timeouts are what dropped packets (conntrack, the node) look like.
_POINTS_TO = {
    Outcome.REFUSED: Cause.RACE,
    Outcome.RESET: Cause.REUSE,
    Outcome.EOF: Cause.REUSE,
    Outcome.HTTP_ERROR: Cause.BACKEND,
    Outcome.TIMEOUT: Cause.INFRA,
}
_WHY = {
    Cause.RACE: "connections refused point to requests sent to endpoints that no longer "
    "listen (the endpoint-removal race, or no ready endpoint)",
    Cause.REUSE: "resets and closes before the answer on kept-alive connections point to "
    "stale pooled connections (keep-alive mismatch) or connections closed at shutdown",
    Cause.BACKEND: "5xx answers point to a backend answering badly",
    Cause.INFRA: "timeouts without answers point to dropped packets (conntrack, the node)",
}
_SHARE = 0.5  # an outcome names a cause when it is at least half of the failures
_SCORE = 0.4  # "possible", whatever the counts: a summary has no times to test
_COLLECT = (
    "per-request times of the same run (k6 --out json, vegeta encode, a curl loop with "
    "`date -u +%FT%TZ`) with the pod events (kubectl get events -o json) to test the cause"
)


def read_loads(evidence: Evidence, replicas: int | None) -> tuple[LoadReading, ...]:
    """Each load generator's report with its failure rate, interval, round fraction and
    what its outcome mix and connection counts hint at."""
    return tuple(_reading(s, replicas) for s in evidence.loads)


def _reading(s: LoadSummary, replicas: int | None) -> LoadReading:
    n, k = s.requests, min(s.failed, s.requests)
    hints = []
    if s.sockets is not None and s.connections and s.sockets > s.connections:
        hints.append(
            f"{s.sockets} sockets opened where perfect keep-alive needs {s.connections}: "
            f"{s.sockets - s.connections} connections were closed and opened again "
            "(by the server, a proxy, or after errors)"
        )
    elif s.keepalive and k and _share(s, Outcome.RESET, Outcome.EOF) >= _SHARE:
        hints.append(
            f"{s.tool} keeps connections alive by default: the resets and closes fell on "
            "reused connections unless the run disabled keep-alive"
        )
    return LoadReading(
        load=s,
        rate=k / n if n else None,
        rate_ci95=proportion_ci(k, n) if n else None,
        nearest_fraction=nearest_fraction(k, n, replicas),
        hints=tuple(hints),
    )


def _share(s: LoadSummary, *outcomes: Outcome) -> float:
    failed = s.failed
    return sum(c for o, c in s.failures if o in outcomes) / failed if failed else 0.0


def weigh(
    causes: tuple[Assessment, ...], readings: tuple[LoadReading, ...], floor_rate: float
) -> tuple[Assessment, ...]:
    """The assessments with each report's evidence: the cause its dominant outcome names
    becomes "possible" (never more) when the report's failures rise above the floor; its
    numbers are quoted either way."""
    out = {a.cause: a for a in causes}
    for r in readings:
        s = r.load
        if not s.failed or r.rate is None:
            continue
        for outcome, count in s.failures:
            cause = _POINTS_TO.get(outcome)
            if cause is None or count / s.failed < _SHARE:
                continue
            a = out[cause]
            text = (
                f"{s.tool}: {count} of {s.requests} requests {outcome.value} "
                f"({count / s.requests:.2%}; {count} of {s.failed} failures): {_WHY[cause]}"
            )
            if r.nearest_fraction and r.nearest_fraction.consistent:
                text += (
                    f"; the failure rate fits {r.nearest_fraction.text} of the replicas "
                    f"(binomial p = {r.nearest_fraction.p_value:.2g})"
                )
            if cause is Cause.REUSE:
                text += "".join(f"; {h}" for h in r.hints)
            score = a.score
            if r.rate >= floor_rate and score < POSSIBLE_AT:
                score = _SCORE
            out[cause] = replace(
                a,
                score=min(score, LIKELY_AT - 0.01) if a.score < LIKELY_AT else score,
                evidence=(*a.evidence, text),
                collect=a.collect if _COLLECT in a.collect else (*a.collect, _COLLECT),
            )
    return tuple(out[a.cause] for a in causes)


def no_cause(readings: tuple[LoadReading, ...]) -> str:
    """The "no cause" line when the only request evidence is load generators' reports."""
    parts = []
    for r in readings:
        s = r.load
        if r.rate is None or r.rate_ci95 is None:
            continue
        parts.append(
            f"{s.tool}: {s.failed} of {s.requests} failed ({r.rate:.2%}, 95 % CI "
            f"{r.rate_ci95[0]:.2%}-{r.rate_ci95[1]:.2%})"
        )
    return (
        "no cause: "
        + ("; ".join(parts) or "the load generators' reports hold no requests")
        + ", and a report's counts alone point to no cause; collect "
        + _COLLECT
    )
