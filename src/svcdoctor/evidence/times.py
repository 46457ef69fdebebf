"""Timestamps of every source, normalised to Unix seconds (UTC)."""

from __future__ import annotations

from datetime import UTC, datetime

_MONTHS = {
    m: i
    for i, m in enumerate(
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"], 1
    )
}


def rfc3339(text: object) -> float | None:
    """``2026-12-02T10:00:00.123Z`` / ``…+01:00`` → seconds; ``None`` if absent or invalid.

    A timestamp without an offset is taken as UTC.
    """
    if not isinstance(text, str) or not text:
        return None
    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    # Python 3.11 accepts at most 6 fractional digits (Kubernetes writes up to 9).
    if "." in value:
        head, _, tail = value.partition(".")
        digits = len(tail) - len(tail.lstrip("0123456789"))
        value = f"{head}.{tail[: min(digits, 6)]}{tail[digits:]}"
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def nginx_local(text: str) -> float | None:
    """``02/Dec/2026:10:00:00 +0000`` (nginx ``$time_local``) → seconds."""
    try:
        return datetime.strptime(text, "%d/%b/%Y:%H:%M:%S %z").timestamp()
    except ValueError:
        return None


def syslog(text: str, year: int) -> float | None:
    """``Dec  2 10:00:00`` (journalctl/dmesg -T, no zone: UTC) → seconds in ``year``."""
    parts = text.split()
    try:
        if len(parts) == 5:  # dmesg -T: "Wed Dec  2 10:00:00 2026"
            _, month, day, clock, year_text = parts
            year = int(year_text)
        else:
            month, day, clock = parts
        hour, minute, second = (float(x) for x in clock.split(":"))
        stamp = datetime(year, _MONTHS[month], int(day), int(hour), int(minute), tzinfo=UTC)
    except (ValueError, KeyError):
        return None
    return stamp.timestamp() + second
