"""Durations: the one grammar for every duration the tool reads or writes.

A duration is a bare number of seconds (``90``, ``2.5``, read as Python's ``float`` reads
it) or one or more ``NUMBER UNIT`` parts (``90s``, ``1m30s``, ``1.5m``, ``1h2m3.5s``,
``500ms``, ``7d``, ``2w``). Callers differ only in parameters, never in grammar: which units
they take (:data:`CLI`, :data:`SPAN`, :data:`GO`, :data:`PROMQL`), whether parts may come in
any order (Go's ``time.ParseDuration`` allows it; everyone else writes the largest unit
first, each once) and whether a bare number is allowed. Bounds (positive, at most a week)
are the caller's, checked on the number this returns."""

from __future__ import annotations

import math
import re
from typing import Final

#: Seconds per unit (PromQL's year is 365 days).
UNIT_SECONDS: Final[dict[str, float]] = {
    "y": 365 * 86_400.0,
    "w": 7 * 86_400.0,
    "d": 86_400.0,
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "ns": 1e-9,
}
_ORDER: Final = ("y", "w", "d", "h", "m", "s", "ms", "us", "ns")  # largest first
_RANK: Final = {unit: rank for rank, unit in enumerate(_ORDER)} | {"µs": _ORDER.index("us")}

CLI: Final = ("h", "m", "s", "ms")  # the command line's durations, in kubectl's style
SPAN: Final = ("w", "d", "h", "m", "s")  # a range to look back (diagnose --since)
GO: Final = ("h", "m", "s", "ms", "us", "µs", "ns")  # Go's time.Duration (kube-proxy config)
PROMQL: Final = ("y", "w", "d", "h", "m", "s", "ms")  # PromQL's range and step durations
SLEEP: Final = ("h", "m", "s")  # `sleep N[smh]` in a preStop command (coreutils, busybox)
ALL: Final = tuple(UNIT_SECONDS)

_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h|d|w|y)")


class DurationError(ValueError):
    """Text that is not a duration; the message names the text and the units taken."""


def parse_duration(
    text: str, units: tuple[str, ...] = ALL, *, any_order: bool = False, bare: bool = True
) -> float:
    """Seconds of ``text`` (surrounding blanks ignored); :class:`DurationError` otherwise.

    ``units``: the units taken; ``any_order``: parts may repeat and come in any order (as
    Go reads them), else the largest unit comes first, each at most once; ``bare``: a number
    without a unit is seconds (NaN, infinities and negatives included: bounds are the
    caller's)."""
    text = text.strip()
    if bare:
        try:
            return float(text)
        except ValueError:
            pass
    total, end, last = 0.0, 0, -1
    for part in _PART.finditer(text):
        number, unit = part.groups()
        rank = _RANK[unit]
        if part.start() != end or unit not in units or (not any_order and rank <= last):
            break
        total += float(number) * UNIT_SECONDS[unit]
        end, last = part.end(), rank
    else:
        if end and end == len(text):
            return total
    raise DurationError(f"{text!r} is not a duration: {describe(units, bare=bare)}")


def describe(units: tuple[str, ...], *, bare: bool = True) -> str:
    """What a duration with these units looks like, for an error message."""
    plain = "seconds, or " if bare else ""
    return f"give {plain}numbers with units ({', '.join(units)}), such as 90s or 1m30s"


def go_duration(value: object) -> float:
    """Seconds of a Go ``time.Duration`` as Kubernetes configs hold it: text (``1s``,
    ``500ms``, ``1m0s``, ``0``) or a bare number of nanoseconds; ``ValueError`` otherwise."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) / 1e9  # a bare number is nanoseconds in Go's encoding
    text = str(value).strip()
    if text in ("0", ""):
        return 0.0
    try:
        return parse_duration(text, GO, any_order=True, bare=False)
    except DurationError:
        raise DurationError(f"{value!r} is not a duration") from None


def format_duration(seconds: float) -> str:
    """``seconds`` (finite, ≥ 0) written largest unit first, as Go and kubectl write them
    (``1h2m3.5s``, ``1m30s``, ``45s``, ``500ms``, ``0s``); :func:`parse_duration` reads it
    back."""
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{seconds!r} is not a duration: give finite seconds, 0 or more")
    if seconds == 0:
        return "0s"
    if seconds < 1:
        return f"{_number(seconds * 1000)}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, rest = divmod(rest, 60)
    parts = [(hours, "h"), (minutes, "m"), (rest, "s")]
    return "".join(f"{_number(n)}{u}" for n, u in parts if n)


def promql_duration(seconds: float) -> str:
    """A PromQL duration: whole seconds, else milliseconds (``%g`` would turn 1,209,600 s
    into an exponent PromQL does not read)."""
    ms = round(seconds * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def _number(x: float) -> str:
    return f"{x:.9f}".rstrip("0").rstrip(".")
