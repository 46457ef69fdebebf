"""Each hop's leg of the race, measured from the hop's own log: for every deleted pod, the
hop's first routing change after the deletion that can have removed it (a reload, or a
deregistration that names its IP or its name), and the lag between the two.

The observed race window (``race.py``) is what the failures show, summed over the path;
the legs say which hop was slow. A hop that retries elsewhere (nginx's
``proxy_next_upstream``) may hide its leg from the failures, never from its own log.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

import numpy as np
import polars as pl

from svcdoctor.diagnose.context import Context
from svcdoctor.model import RoutingChange
from svcdoctor.model.diagnosis import HopLeg, HopStop

# the lines that mark the start of a change its hop applies later (``routing.py``)
_LOWER_BOUNDS = frozenset({"aws-load-balancer-controller"})


def hop_legs(ctx: Context, tolerance: float) -> tuple[HopLeg, ...]:
    """The legs of every hop with routing changes in the evidence, for the deleted pods
    (``tolerance``: how early a change may be and still follow a deletion, the clocks'),
    with the failures each leg holds: sent to the pod from its deletion until that hop
    stopped routing to it (the race, caught in that hop's leg)."""
    evidence, deletions = ctx.evidence, ctx.deletions
    if not deletions or not evidence.routing:
        return ()
    names = {p.name: p for p in evidence.pods}
    hits = _failures_by_pod(ctx)
    groups: dict[tuple[str, str], list[RoutingChange]] = defaultdict(list)
    for change in evidence.routing:
        groups[(change.hop.value, change.by)].append(change)
    legs = []
    for changes in groups.values():
        stops, unseen = [], []
        for pod, deleted in sorted(deletions.items(), key=lambda kv: kv[1]):
            info = names.get(pod)
            keys = {pod} | ({info.ip} if info is not None and info.ip else set())
            stop = next((c for c in changes if _removes(c, keys, deleted, tolerance)), None)
            if stop is None:
                unseen.append(pod)
            else:
                stops.append(HopStop(pod, deleted, stop.ts))
        if not stops:
            continue
        lags = [max(s.stopped_at - s.deleted_at, 0.0) for s in stops]
        first = changes[0]
        late = max(c.resolution for c in changes)
        held = sum(
            int(((t >= s.deleted_at - tolerance) & (t <= s.stopped_at + late)).sum())
            for s in stops
            for t in (hits.get(s.pod),)
            if t is not None
        )
        legs.append(
            HopLeg(
                first.hop,
                first.by,
                first.what,
                tuple(sorted({c.source for c in changes})),
                late,
                tuple(stops),
                round(statistics.median(lags), 3),
                round(max(lags), 3),
                tuple(unseen),
                first.by in _LOWER_BOUNDS,
                held,
            )
        )
    return tuple(sorted(legs, key=lambda leg: -leg.covers))


def _removes(change: RoutingChange, keys: set[str], deleted: float, tolerance: float) -> bool:
    """Whether ``change`` can be the one that took the pod (``keys``: its name and IP) out:
    a change naming it, within the clocks' ``tolerance`` of its deletion; a change naming
    none (a reload, a push of every endpoint) only from the deletion on (within its own
    clock's resolution), since during a rollout the ones before it were for other pods (a
    new one becoming ready)."""
    if change.removed:
        return bool(keys & set(change.removed)) and change.ts >= deleted - tolerance
    return change.ts >= deleted - change.resolution  # nginx's log: to the second


def _failures_by_pod(ctx: Context) -> dict[str, np.ndarray]:
    """The start times of the failed requests (not the retried attempts) per pod."""
    if not ctx.has_backend:
        return {}
    rows = ctx.frame.filter(
        pl.col("failed") & (pl.col("role") == "request") & pl.col("backend").is_not_null()
    )
    out: dict[str, list[np.ndarray]] = defaultdict(list)
    for (backend,), group in rows.group_by("backend"):  # each backend mapped to its pod once
        pod = ctx.pod_of(str(backend)) if backend else None
        if pod is not None:
            out[pod.name].append(group["ts"].to_numpy())
    return {pod: np.sort(np.concatenate(times)) for pod, times in out.items()}


def leg_text(leg: HopLeg) -> str:
    """One line of evidence for a leg."""
    said = "deregistration began" if leg.lower_bound else f"it {leg.what}"
    fuzz = f"±{leg.resolution_seconds:g} s, " if leg.resolution_seconds >= 0.001 else ""
    text = (
        f"{leg.hop.value} ({leg.by}, its own log): stopped routing to {len(leg.stops)} "
        f"deleted pods {leg.median_seconds:g} s after their deletion (median), at most "
        f"{leg.max_seconds:g} s ({fuzz}when {said})"
    )
    if leg.failures:
        text += (
            f"; {leg.failures} failed requests went to those pods between their deletion and "
            "that moment: the race, in this hop's leg"
        )
    if leg.lower_bound:
        text += "; its load balancer stops later still (deregistration takes seconds to apply)"
    if leg.unseen:
        text += f"; never seen to stop routing to {len(leg.unseen)} ({', '.join(leg.unseen[:3])})"
    return text
