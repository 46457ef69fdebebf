"""``diagnose --prometheus``'s queries evaluated client-side from raw samples: the baseline
the pushed-down queries are measured against (``benchmarks/prometheus_scale.py``), and a
check of them (the same :class:`~svcdoctor.diagnose.metrics_history.Query` gives the same
series either way).

:class:`RawSource` has the shape of ``MetricsSource``. For each query it pulls every raw
sample of the query's selectors that the evaluation times can see (range-vector instant
queries of at most ``chunk`` seconds each, through :class:`PromClient`, so bytes are
counted alike), then evaluates with numpy as Prometheus 2.x does: an instant selector sees
the last sample at most 5 min old, a range ``[w]`` at ``t`` holds the samples in
``[t - w, t]`` (both ends), ``timestamp`` gives the sample's time, aggregations group by
the ``by`` labels, and ``histogram_quantile`` interpolates linearly in the bucket found.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from svcdoctor.diagnose.metrics_history import LOOKBACK, Agg, Fn, Query, Selector
from svcdoctor.evidence.prometheus import PromClient, PrometheusError
from svcdoctor.model.series import Series

CHUNK = 3_600.0  # seconds of samples per raw request
Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Key = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class _Raw:
    """One raw series: labels without ``__name__``, sample times (ms) and values."""

    labels: Mapping[str, str]
    t: Ints
    v: Floats


@dataclass(frozen=True, slots=True)
class _Values:
    """One series' value at each evaluation time, and where it has one."""

    v: Floats
    ok: npt.NDArray[np.bool_]


def _merge(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping or touching ``[lo, hi]`` spans (ms) as disjoint ones, in order."""
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _needs(query: Query, times: Ints) -> list[tuple[int, int]]:
    """The sample times (ms spans) the evaluations at ``times`` can see."""
    window, back = round(query.window * 1000), round(LOOKBACK * 1000)
    if query.fn is Fn.GROWTH:
        ends = np.concatenate([times, times - window])
        return _merge((int(t) - back, int(t)) for t in np.unique(ends))
    if query.fn in (Fn.SEEN, Fn.MAX):
        return _merge((int(t) - window, int(t)) for t in times)
    return _merge((int(t) - back, int(t)) for t in times)


def _lookup(raw: _Raw, times: Ints) -> tuple[_Values, Ints]:
    """What an instant selector sees at ``times``: values, and the samples' times."""
    idx = np.searchsorted(raw.t, times, side="right") - 1
    safe = np.maximum(idx, 0)
    ok = (idx >= 0) & (raw.t[safe] >= times - round(LOOKBACK * 1000)) if raw.t.size else idx >= 0
    if not raw.t.size:
        return _Values(np.zeros(times.size), ok), np.zeros(times.size, dtype=np.int64)
    return _Values(raw.v[safe], ok), raw.t[safe]


def _windows(raw: _Raw, times: Ints, window: int, fn: Fn) -> _Values:
    """``count_over_time`` or ``max_over_time`` of ``[window]`` at ``times`` (a regular
    grid): each sample goes to every window ``[t - window, t]`` that holds it."""
    n = times.size
    count = np.zeros(n, dtype=np.int64)
    top = np.full(n, -np.inf)
    if not raw.t.size or not n:
        return _Values(count.astype(np.float64), count > 0)
    step = int(times[1] - times[0]) if n > 1 else window + 1
    rel = raw.t - times[0]
    first = np.ceil(rel / step).astype(np.int64)  # the first time at or after the sample
    last = np.floor((rel + window) / step).astype(np.int64)  # the last whose window has it
    for k in range(int((last - first).max(initial=-1)) + 1):
        at = first + k
        keep = (at <= last) & (at >= 0) & (at < n)
        np.add.at(count, at[keep], 1)
        if fn is Fn.MAX:
            np.maximum.at(top, at[keep], raw.v[keep])
    values = count.astype(np.float64) if fn is Fn.SEEN else top
    return _Values(values, count > 0)


def _apply(query: Query, raw: _Raw, times: Ints) -> _Values:
    """``query.fn`` of one series at ``times``."""
    if query.fn is Fn.GROWTH:
        now, _ = _lookup(raw, times)
        before, _ = _lookup(raw, times - round(query.window * 1000))
        diff = now.v - before.v
        grown = before.ok & (diff >= 0)
        return _Values(np.where(grown, diff, now.v), now.ok)
    if query.fn in (Fn.SEEN, Fn.MAX):
        return _windows(raw, times, round(query.window * 1000), query.fn)
    seen, at = _lookup(raw, times)
    return _Values(at / 1000.0, seen.ok)


def _key(labels: Mapping[str, str]) -> Key:
    return tuple(sorted(labels.items()))


def _quantile(q: float, bounds: Floats, counts: Floats) -> float:
    """Prometheus' ``histogram_quantile`` of cumulative ``counts`` at upper ``bounds``."""
    order = np.argsort(bounds, kind="stable")
    bounds, counts = bounds[order], counts[order]
    if bounds.size < 2 or not math.isinf(bounds[-1]) or bounds[-1] < 0:
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    counts = np.maximum.accumulate(counts)  # Prometheus makes them monotonic
    rank = q * counts[-1]
    b = int(np.searchsorted(counts[:-1], rank, side="left"))
    if b == bounds.size - 1:
        return float(bounds[-2])
    if b == 0 and bounds[0] <= 0:
        return float(bounds[0])
    start, end, count = 0.0, float(bounds[b]), float(counts[b])
    if b > 0:
        start = float(bounds[b - 1])
        count -= float(counts[b - 1])
        rank -= float(counts[b - 1])
    return start + (end - start) * (rank / count) if count else math.nan


class RawSource:
    """A ``MetricsSource`` that pulls raw samples through ``client`` and evaluates each
    :class:`Query` itself; ``chunk`` bounds the seconds of samples per request."""

    def __init__(self, client: PromClient, chunk: float = CHUNK) -> None:
        if not (math.isfinite(chunk) and chunk >= 1):
            raise PrometheusError(f"chunk must be at least 1 s, not {chunk!r}")
        self.client = client
        self.chunk = chunk
        self._kept: dict[str, tuple[list[tuple[int, int]], dict[Key, _Raw]]] = {}

    @property
    def bytes_pulled(self) -> int:
        return self.client.bytes_pulled

    @property
    def requests(self) -> int:
        return self.client.requests

    def series_names(self, start: float, end: float) -> set[str]:
        return self.client.series_names(start, end)

    def raw(self, selector: Selector, spans: list[tuple[int, int]]) -> dict[Key, _Raw]:
        """Every sample of ``selector`` in the ``[lo, hi]`` spans (ms), per series (maybe
        more: the last pull of a selector is kept, and reused when it covers the spans;
        samples outside the spans change no evaluation)."""
        kept = self._kept.get(selector.promql)
        if kept is not None and all(
            any(a <= lo and hi <= b for a, b in kept[0]) for lo, hi in spans
        ):
            return kept[1]
        got = self._pull(selector, spans)
        self._kept[selector.promql] = (spans, got)
        return got

    def _pull(self, selector: Selector, spans: Iterable[tuple[int, int]]) -> dict[Key, _Raw]:
        parts: dict[Key, list[tuple[Mapping[str, str], Floats, Floats]]] = {}
        step = round(self.chunk * 1000)
        for lo, hi in spans:
            at = hi
            while True:
                reach = min(step, at - lo)
                text = f"{selector.promql}[{max(reach, 1)}ms]"
                for s in self.client.query(text, at / 1000.0):
                    labels = {k: v for k, v in s.labels.items() if k != "__name__"}
                    parts.setdefault(_key(labels), []).append((labels, s.t, s.v))
                if at - reach <= lo:
                    break
                at -= reach
        out = {}
        for key, pieces in parts.items():
            t = np.rint(np.concatenate([p[1] for p in pieces]) * 1000).astype(np.int64)
            v = np.concatenate([p[2] for p in pieces])
            t, first = np.unique(t, return_index=True)  # windows share their edges
            out[key] = _Raw(pieces[0][0], t, v[first])
        return out

    def query_range(self, query: Query, start: float, end: float, step: float) -> list[Series]:
        """``query`` at ``start``, ``start + step``, … ``end``, from raw samples."""
        start_ms, end_ms, step_ms = round(start * 1000), round(end * 1000), round(step * 1000)
        if step_ms <= 0 or end_ms < start_ms:
            raise PrometheusError(f"bad range: {start!r} to {end!r} every {step!r} s")
        times = start_ms + step_ms * np.arange((end_ms - start_ms) // step_ms + 1, dtype=np.int64)
        spans = _needs(query, times)
        each = {k: _apply(query, r, times) for k, r in self.raw(query.selector, spans).items()}
        labels = {k: dict(k) for k in each}
        if query.per is not None:
            per = {k: _apply(query, r, times) for k, r in self.raw(query.per, spans).items()}
            each = {
                k: _Values(x.v / np.where(per[k].ok, per[k].v, np.nan), x.ok & per[k].ok)
                for k, x in each.items()
                if k in per
            }
        by = query.by
        groups: dict[tuple[str, ...], list[_Values]] = {}
        for k, x in each.items():
            groups.setdefault(tuple(labels[k].get(b, "") for b in by), []).append(x)
        agg: dict[Key, _Values] = {}
        for g, members in groups.items():
            ok = np.logical_or.reduce([m.ok for m in members])
            if query.agg is Agg.COUNT:
                v = np.sum([m.ok for m in members], axis=0).astype(np.float64)
            elif query.agg is Agg.SUM:
                v = np.sum([np.where(m.ok, m.v, 0.0) for m in members], axis=0)
            else:
                v = np.max([np.where(m.ok, m.v, -np.inf) for m in members], axis=0)
            agg[_key({b: x for b, x in zip(by, g, strict=True) if x})] = _Values(v, ok)
        if query.quantile is not None:
            agg = self._quantiles(query.quantile, agg, times.size)
        out = [
            Series(dict(k), times[x.ok] / 1000.0, x.v[x.ok])
            for k, x in sorted(agg.items())
            if x.ok.any()
        ]
        return out

    @staticmethod
    def _quantiles(q: float, buckets: Mapping[Key, _Values], n: int) -> dict[Key, _Values]:
        """``histogram_quantile(q, …)`` of bucket series (``le`` labelled), per label set."""
        groups: dict[Key, list[tuple[float, _Values]]] = {}
        for key, x in buckets.items():
            labels = dict(key)
            le = labels.pop("le", None)
            if le is not None:
                groups.setdefault(_key(labels), []).append((float(le), x))
        out = {}
        for key, members in groups.items():
            bounds = np.array([b for b, _ in members])
            v = np.full(n, np.nan)
            ok = np.logical_or.reduce([x.ok for _, x in members])
            for i in np.flatnonzero(ok).tolist():
                have = [j for j, (_, x) in enumerate(members) if x.ok[i]]
                counts = np.array([members[j][1].v[i] for j in have])
                v[i] = _quantile(q, bounds[have], counts)
            out[key] = _Values(v, ok)
        return out


__all__ = ["CHUNK", "RawSource"]
