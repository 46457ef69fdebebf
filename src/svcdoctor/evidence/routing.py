"""The moments a hop stopped routing to removed endpoints, from the hop's own log lines.

Each hop in front of the pods has its own leg of the endpoint-removal race (``problem.md``):
the pod left the EndpointSlice at one moment, and each hop stopped sending to it at its own.
The lines read here are those hops' words for that moment:

* ingress-nginx's controller (klog): ``Dynamic reconfiguration succeeded.`` (endpoint
  changes are pushed to the Lua balancer without a reload) and ``Backend successfully
  reloaded`` (older: ``ingress backend successfully reloaded...``), shapes as in
  kubernetes/ingress-nginx #4134, #9679 and #1269. The workers pick the pushed backends up
  on their next sync, at most ``BACKENDS_SYNC_INTERVAL`` = 1 s later
  (ingress-nginx rootfs/etc/nginx/lua/balancer.lua), hence a 1 s resolution;
* nginx's own error log at ``notice``: ``signal 1 (SIGHUP) received from N, reconfiguring``,
  a reload (nginx's controllers that reload on endpoint changes, and the lab's nginx);
* the AWS Load Balancer Controller (JSON): ``"msg":"deRegistering targets"`` with the
  targets' ``Id`` (a pod IP in IP mode), as in aws-load-balancer-controller #3069, #2044 and
  #4324. It marks when deregistration *started*: the load balancer's data plane stops
  seconds later (the providers' docs), so it is a lower bound on that hop's leg;
* HAProxy: ``Server BACKEND/SERVER is going DOWN for maintenance`` / ``enters drain state``
  / ``is DOWN``, prefixed by a timestamp (``log … format iso``, or a syslog line).

Pure: lines in, ``RoutingChange`` records out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime

from svcdoctor.model import RoutingChange
from svcdoctor.model.hops import HopKind

# one pre-filter for all the shapes, so a large log costs one scan
HINT = (
    r"Dynamic reconfiguration succeeded|[Bb]ackend successfully reloaded"
    r"|\(SIGHUP\) received from \d+, reconfiguring|deRegistering targets"
    r"|Server \S+/\S+ (?:is going DOWN for maintenance|enters drain state|is DOWN)"
)
_KLOG = re.compile(r"^[IWEF](\d\d)(\d\d) (\d\d:\d\d:\d\d\.\d+)\s+\d+ \S+:\d+\] ")
_INGRESS_NGINX = re.compile(
    r"(Dynamic reconfiguration succeeded)|([Bb]ackend successfully reloaded)"
)
_NGINX_RELOAD = re.compile(
    r"^(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d) \[notice\] .*\(SIGHUP\) received from \d+, reconfiguring"
)
_HAPROXY = re.compile(
    r"Server (\S+)/(\S+) (is going DOWN for maintenance|enters drain state|is DOWN)"
)
_SYSLOG = re.compile(r"^(\w{3}) +(\d{1,2}) (\d\d:\d\d:\d\d(?:\.\d+)?) ")
_ISO = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d))\s")
_MONTHS = {
    m: i
    for i, m in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}

RELOAD_RESOLUTION = 1.0  # nginx's error-log clock, and the Lua balancer's sync interval
KLOG_RESOLUTION = 1e-6
LBC_RESOLUTION = 1e-3


def routing_changes(
    found: Iterable[tuple[str, float | None]], source: str, year: int, zone: float
) -> tuple[list[RoutingChange], int]:
    """The routing changes in ``found`` (line, collector stamp): a line's own time read in
    ``zone`` (seconds east of UTC) when it names none, the collector's stamp when there is
    one (``kubectl logs --timestamps``: UTC, exact); and the count of zoneless times read."""
    changes: list[RoutingChange] = []
    zoneless = 0
    for line, stamp in found:
        change = _one(line, stamp, source, year, zone)
        if change is None:
            continue
        own, zoned = change
        if stamp is not None:
            own = replace(own, ts=stamp)
        elif not zoned:
            zoneless += 1
        changes.append(own)
    return changes, zoneless


def _one(
    line: str, stamp: float | None, source: str, year: int, zone: float
) -> tuple[RoutingChange, bool] | None:
    """One line's change, and whether its time carried its zone (``stamp``: the
    collector's, for a line whose own time was taken away as a prefix)."""
    if line.startswith("{"):
        return _lbc(line, source)
    if (m := _KLOG.match(line)) and (said := _INGRESS_NGINX.search(line, m.end())):
        kind = "pushed the endpoints" if said[1] else "reloaded"
        at = _naive(f"{year}-{m[1]}-{m[2]}T{m[3]}", zone)
        return RoutingChange(
            at, HopKind.INGRESS, kind, (), source, RELOAD_RESOLUTION, "ingress-nginx"
        ), False
    if m := _NGINX_RELOAD.match(line):
        ts = _naive(m[1].replace("/", "-").replace(" ", "T"), zone)
        return RoutingChange(
            ts, HopKind.INGRESS, "reloaded", (), source, RELOAD_RESOLUTION, "nginx"
        ), False
    if h := _HAPROXY.search(line):
        own, zoned = _prefix_time(line[: h.start()], year, zone)
        when = own if own is not None else stamp
        if when is None:
            return None
        what = "drained" if "drain" in h[3] else "took down"
        return RoutingChange(
            when, HopKind.LOAD_BALANCER, what, (h[2],), source, 1e-6, "haproxy"
        ), zoned or own is None
    return None


def _lbc(line: str, source: str) -> tuple[RoutingChange, bool] | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    change = lbc_change(record, source)
    return None if change is None else (change, True)


def lbc_change(record: object, source: str) -> RoutingChange | None:
    """An AWS Load Balancer Controller record that deregisters targets, as a change."""
    if not isinstance(record, dict) or record.get("msg") != "deRegistering targets":
        return None
    raw = record.get("ts")
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        ts = float(raw)
    elif isinstance(raw, str) and (m := _ISO.match(raw + " ")):
        ts = _aware(m[1])
    else:
        return None
    targets = record.get("targets")
    ids = tuple(
        str(t["Id"])
        for t in (targets if isinstance(targets, list) else [])
        if isinstance(t, dict) and t.get("Id")
    )
    return RoutingChange(
        ts,
        HopKind.LOAD_BALANCER,
        "deregistered",
        ids,
        source,
        LBC_RESOLUTION,
        "aws-load-balancer-controller",
    )


def _prefix_time(prefix: str, year: int, zone: float) -> tuple[float | None, bool]:
    """The time at the start of a line's prefix: ISO 8601 with its zone, or syslog's."""
    if m := _ISO.match(prefix + " "):
        return _aware(m[1]), True
    if (m := _SYSLOG.match(prefix)) and m[1] in _MONTHS:
        return _naive(f"{year}-{_MONTHS[m[1]]:02d}-{int(m[2]):02d}T{m[3]}", zone), False
    return None, False


def _aware(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _naive(text: str, zone: float) -> float:
    """A time without a zone, read in ``zone`` (seconds east of UTC)."""
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() - zone
