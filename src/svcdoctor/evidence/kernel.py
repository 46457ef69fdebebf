"""Kernel evidence: conntrack drops in dmesg / journalctl -k, and ``conntrack -S`` counters."""

from __future__ import annotations

import re

from svcdoctor.evidence.times import rfc3339, syslog
from svcdoctor.model import KernelEvent

_CONNTRACK = re.compile(
    r"nf_conntrack(?:: nf_conntrack)?:? table full, dropping packet\.?(?: in netns (\S+))?"
)
# the kernel rate-limits the message and later counts what it left out: "net_ratelimit: N
# callbacks suppressed" (older kernels "__ratelimit:", some "nf_conntrack:")
_SUPPRESSED = re.compile(r"(?:net_ratelimit|__ratelimit|nf_conntrack): (\d+) callbacks suppressed")
_DMESG = re.compile(r"^\[\s*(\d+\.\d+)\]\s*(.*)$")
_DMESG_T = re.compile(r"^\[(\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})\]\s*(.*)$")
_JOURNAL = re.compile(r"^(\w{3} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)?) (\S+) kernel: (.*)$")
_JOURNAL_ISO = re.compile(r"^(\d{4}-\d\d-\d\dT\S+) (\S+) kernel: (.*)$")
_COUNTER = re.compile(r"\b(insert_failed|drop)=(\d+)")

KERNEL_HINT = re.compile(r"nf_conntrack|kernel:")


def kernel_log(text: str, source: str, year: int) -> tuple[list[KernelEvent], int]:
    """Conntrack drop events (with the count of dropped-packet messages), and how many lines
    were kernel lines without anything for us (not an error: kernels are chatty)."""
    events: list[KernelEvent] = []
    suppressed: list[KernelEvent] = []  # counted only in a log that has table-full lines
    other = 0
    for line in text.splitlines():
        ts: float | None
        node = None
        aligned = True
        if m := _DMESG_T.match(line):
            ts, body = syslog(m.group(1), year), m.group(2)
        elif m := _DMESG.match(line):
            ts, body, aligned = float(m.group(1)), m.group(2), False  # seconds since boot
        elif m := _JOURNAL_ISO.match(line):
            ts, node, body = rfc3339(_colon_offset(m.group(1))), m.group(2), m.group(3)
        elif m := _JOURNAL.match(line):
            ts, node, body = syslog(m.group(1), year), m.group(2), m.group(3)
        else:
            other += 1
            continue
        if c := _CONNTRACK.search(body):
            events.append(KernelEvent(ts, "conntrack_full", 1, source, c.group(1), node, aligned))
        elif s := _SUPPRESSED.search(body):
            suppressed.append(
                KernelEvent(ts, "conntrack_full", int(s.group(1)), source, None, node, aligned)
            )
        else:
            other += 1
    if events:
        events = sorted(events + suppressed, key=lambda e: (e.ts is None, e.ts or 0.0))
    else:
        other += len(suppressed)
    return events, other


def _colon_offset(text: str) -> str:
    """``+0000`` → ``+00:00`` (journalctl short-iso)."""
    return re.sub(r"([+-]\d\d)(\d\d)$", r"\1:\2", text)


def conntrack_stats(text: str, source: str) -> list[KernelEvent]:
    """``conntrack -S``: per-CPU counters summed into ``insert_failed`` and ``drop``."""
    totals = {"insert_failed": 0, "drop": 0}
    for name, value in _COUNTER.findall(text):
        totals[name] += int(value)
    return [KernelEvent(None, name, count, source) for name, count in totals.items()]
