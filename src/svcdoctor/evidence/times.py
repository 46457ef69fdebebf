"""Timestamps of every source, normalised to Unix seconds (UTC)."""

from __future__ import annotations

import re
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


def utc_offset(text: str) -> float | None:
    """``+02:00`` / ``+0200`` / ``-05`` / ``Z`` / ``UTC`` → seconds east of UTC (None if not
    an offset)."""
    value = text.strip()
    if value.upper() in ("Z", "UTC", "GMT"):
        return 0.0
    m = re.fullmatch(r"(?:UTC|GMT)?([+-])(\d\d):?(\d\d)?", value, flags=re.IGNORECASE)
    if m is None:
        return None
    seconds = int(m.group(2)) * 3600 + int(m.group(3) or 0) * 60
    return float(seconds if m.group(1) == "+" else -seconds)


def offset_text(seconds: float) -> str:
    """Seconds east of UTC → ``+02:00``."""
    sign = "-" if seconds < 0 else "+"
    minutes = round(abs(seconds) / 60)
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"


_DATE_U = re.compile(
    r"^(?:\w{3},? )?(\w{3}) +(\d{1,2}) (\d\d:\d\d:\d\d) (UTC|GMT|[+-]\d{4}) (\d{4})$"
)


def stamp_line(text: str) -> float | None:
    """A line that is only a timestamp, as scripts write one before each ``conntrack -S``
    snapshot: ``date -u`` (``Fri Dec  4 21:39:28 UTC 2026``), ``date -Is`` / ``date -u
    +%FT%TZ`` (RFC 3339), ``date -R`` (``Fri, 04 Dec 2026 21:39:28 +0000``), optionally
    after ``# ``. None for anything else (a local zone name is ambiguous: not read)."""
    value = text.strip().lstrip("#").strip()
    if not value or "=" in value:
        return None
    if re.fullmatch(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)", value):
        value = value.replace(",", ".").replace(" ", "T", 1)
        return rfc3339(re.sub(r"([+-]\d\d)(\d\d)$", r"\1:\2", value))
    if m := _DATE_U.match(value):
        month, day, clock, zone, year = m.groups()
        base = syslog(f"{month} {day} {clock}", int(year))
        offset = utc_offset(zone)
        return None if base is None or offset is None else base - offset
    if re.fullmatch(r"\w{3}, \d{1,2} \w{3} \d{4} \d\d:\d\d:\d\d [+-]\d{4}", value):
        from email.utils import parsedate_to_datetime

        try:
            return parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError):
            return None
    return None
