"""Kernel evidence: conntrack drops in dmesg / journalctl -k / syslog, and ``conntrack -S``
counters.

Line shapes (each seen in public reports):
- ``dmesg``: ``[ 9001.000123] nf_conntrack: table full, dropping packet`` (seconds since
  boot; kubernetes/kubernetes#18604);
- ``dmesg -T``: ``[Tue Nov 20 22:30:22 2018] nf_conntrack: …`` (kubernetes/kubernetes#71261);
- journalctl / syslog: ``Feb 23 16:44:36 jobs kernel: [38775494.393661] nf_conntrack: …``
  (wballard/starphleet#352), ``-o short-iso``: ``2026-12-02T10:00:03+0000 node-7 kernel: …``;
- a bare ``kernel: [1694413.644132] nf_conntrack: nf_conntrack: table full, dropping
  packet`` with no syslog date (canonical/hotsos#101): dated by a collector prefix when
  there is one; and the message alone, its prefix doubled or not, as people paste it
  (``nf_conntrack: nf_conntrack: table full, dropping packet``): dated by a prefix or not
  at all.

``conntrack -S`` layouts: ``cpu=0 found=0 invalid=… insert_failed=… drop=…`` per CPU
(conntrack-tools ≥ 1.4 over ctnetlink, ``nfct_stats_cb`` in src/conntrack.c), and the
older one key a line read from /proc/net/stat/nf_conntrack, ``printf("%-10s\t\t%-8u\n")``
(``display_proc_conntrack_stats`` in conntrack-tools src/conntrack.c, git.netfilter.org):
``insert_failed\t\t0``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from svcdoctor.evidence.times import rfc3339, stamp_line, syslog
from svcdoctor.model import KernelEvent

_CONNTRACK = re.compile(
    r"nf_conntrack(?:: nf_conntrack)?:? table full, dropping packet\.?(?: in netns (\S+))?"
)
# the kernel rate-limits the message and later counts what it left out: "net_ratelimit: N
# callbacks suppressed" (older kernels "__ratelimit:", some "nf_conntrack:"). N counts
# suppressed *messages* of any kind, not conntrack drops.
_SUPPRESSED = re.compile(r"(?:net_ratelimit|__ratelimit|nf_conntrack): (\d+) callbacks suppressed")
_DMESG = re.compile(r"^\[\s*(\d+\.\d+)\]\s*(.*)$")
_DMESG_T = re.compile(r"^\[(\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4})\]\s*(.*)$")
_JOURNAL = re.compile(r"^(\w{3} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)?) (\S+) kernel: (.*)$")
_JOURNAL_ISO = re.compile(r"^(\d{4}-\d\d-\d\dT\S+) (\S+) kernel: (.*)$")
_BARE = re.compile(r"^(?:(\S+) )?kernel: (.*)$")
_MESSAGE = re.compile(r"^(nf_conntrack: .*)$")  # the message alone
_BOOT = re.compile(r"^\[\s*(\d+\.\d+)\]\s*")
_COUNTER = re.compile(r"\b(insert_failed|drop)=(\d+)")
_CPU = re.compile(r"^\s*cpu=(\d+)\s")
# the older layout: one key a line, tab-separated; ``entries`` opens a snapshot
_KEY_LINE = re.compile(r"^\s*(entries|insert_failed|drop)\s+(\d+)\s*$")
CONNTRACK_S = re.compile(
    r"^\s*cpu=\d+\s.*\b(?:found|insert_failed)=|^insert_failed[ \t]+\d+\s*$", re.MULTILINE
)

KERNEL_HINT = re.compile(r"nf_conntrack|kernel:")


def kernel_log(text: str, source: str, year: int) -> tuple[list[KernelEvent], int]:
    """Conntrack drop events of a whole kernel log (see ``kernel_lines``)."""
    return kernel_lines(((line, None) for line in text.splitlines()), source, year)


def kernel_lines(
    lines: Iterable[tuple[str, float | None]], source: str, year: int, zone: float = 0.0
) -> tuple[list[KernelEvent], int]:
    """Conntrack drops (``conntrack_full``, one per message) and the kernel's counts of
    rate-limited messages (``suppressed``, count N, only in a log that has table-full
    lines); and how many lines had nothing for us (not an error: kernels are chatty).
    ``lines``: (text, collector timestamp or None); the collector's stamp dates a line
    that carries none of its own, or only seconds since boot. ``zone``: the UTC offset in
    seconds of the times that carry none (dmesg -T, syslog); the events of such lines have
    ``zoneless`` set."""
    events: list[KernelEvent] = []
    suppressed: list[KernelEvent] = []
    other = 0
    for line, pts in lines:
        ts: float | None
        node = None
        aligned = True
        zoneless = False
        if m := _DMESG_T.match(line):
            ts, body, zoneless = syslog(m.group(1), year), m.group(2), True
        elif m := _DMESG.match(line):
            ts, body = (pts, m.group(2)) if pts is not None else (float(m.group(1)), m.group(2))
            aligned = pts is not None  # else seconds since boot
        elif m := _JOURNAL_ISO.match(line):
            ts, node, body = rfc3339(_colon_offset(m.group(1))), m.group(2), m.group(3)
        elif m := _JOURNAL.match(line):
            ts, node, body = syslog(m.group(1), year), m.group(2), m.group(3)
            zoneless = True
        elif m := _BARE.match(line):
            node, body, ts = m.group(1), m.group(2), pts
            if ts is None and (b := _BOOT.match(body)):
                ts, aligned = float(b.group(1)), False
            aligned = aligned and ts is not None
        elif m := _MESSAGE.match(line):
            body, ts, aligned = m.group(1), pts, pts is not None
        else:
            other += 1
            continue
        body = _BOOT.sub("", body, count=1)
        if zoneless and ts is not None:
            ts -= zone
        if c := _CONNTRACK.search(body):
            events.append(
                KernelEvent(ts, "conntrack_full", 1, source, c.group(1), node, aligned, zoneless)
            )
        elif s := _SUPPRESSED.search(body):
            suppressed.append(
                KernelEvent(
                    ts, "suppressed", int(s.group(1)), source, None, node, aligned, zoneless
                )
            )
        else:
            other += 1
    if events:
        events = sorted(events + suppressed, key=lambda e: (e.ts is None, e.ts or 0.0))
    else:
        other += len(suppressed)
    return events, other


def time_note(events: list[KernelEvent]) -> str:
    """What a kernel source's times are, when they are not UTC instants."""
    if all(e.aligned for e in events):
        return ""
    if all(e.ts is None for e in events):
        return "no times: the lines carry none"
    return "seconds since boot: pass --clock-offset FILE=BOOT_EPOCH to align"


def _colon_offset(text: str) -> str:
    """``+0000`` → ``+00:00`` (journalctl short-iso)."""
    return re.sub(r"([+-]\d\d)(\d\d)$", r"\1:\2", text)


def conntrack_stats(text: str, source: str) -> list[KernelEvent]:
    """``conntrack -S``: per-CPU counters summed into ``insert_failed`` and ``drop``, one
    pair per snapshot. A file may hold several snapshots, each after a timestamp line
    (``date -u``, ``date -Is``…; see ``times.stamp_line``): their events carry that time.
    Without timestamps ``ts`` is None (a new snapshot starts where ``cpu=0`` repeats)."""
    snapshots: list[tuple[float | None, dict[str, int]]] = []
    stamp: float | None = None
    current: dict[str, int] | None = None
    for line in text.splitlines():
        if (when := stamp_line(line)) is not None:
            stamp, current = when, None
            continue
        counters = _COUNTER.findall(line)
        if key := _KEY_LINE.match(line):
            if key.group(1) == "entries" or current is None:
                current = {"insert_failed": 0, "drop": 0, "__cpus": 1}
                snapshots.append((stamp, current))
                stamp = None
            if key.group(1) != "entries":
                current[key.group(1)] += int(key.group(2))
            continue
        if not counters:
            continue
        cpu = _CPU.match(line)
        if current is None or (cpu is not None and cpu.group(1) == "0" and current["__cpus"]):
            current = {"insert_failed": 0, "drop": 0, "__cpus": 0}
            snapshots.append((stamp, current))
            stamp = None
        current["__cpus"] += 1
        for name, value in counters:
            current[name] += int(value)
    if not snapshots:
        snapshots = [(None, {"insert_failed": 0, "drop": 0})]
    return [
        KernelEvent(ts, name, totals[name], source)
        for ts, totals in snapshots
        for name in ("insert_failed", "drop")
    ]
