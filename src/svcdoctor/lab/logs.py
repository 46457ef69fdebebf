"""What the lab's clients and node proxies log: canonical request rows as JSON Lines and
ingress-nginx ``upstreaminfo`` access-log lines, with the kubelet's timestamps."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from svcdoctor.lab.names import UPSTREAM

REQUEST = b"GET / HTTP/1.1\r\nHost: svc\r\nConnection: close\r\n\r\n"
BODY_BYTES = {200: len(b"hello"), 503: len(b"unavailable")}


def log_time(ts: float) -> str:
    """The time the kubelet puts before a log line (RFC 3339, nanoseconds)."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def _done(row: dict[str, Any]) -> float:
    """When a request ended (when its client or proxy logged it)."""
    return float(row["ts"]) + (row["latency_ms"] or 0.0) / 1000


def request_log(rows: Sequence[dict[str, Any]], timestamps: bool = False) -> str:
    """Canonical request rows (``run.request_row``) as JSON Lines, as a client logs them
    (``timestamps``: each line after the time it was written, as the kubelet keeps it)."""
    return "".join(
        (f"{log_time(_done(r))} " if timestamps else "")
        + json.dumps(r, separators=(",", ":"))
        + "\n"
        for r in rows
    )


def nginx_line(row: dict[str, Any], address: str | None, remote: str) -> str:
    """One ingress-nginx ``upstreaminfo`` access-log line for a request the node's proxy
    passed: ``address`` is the backend's ip:port (``None``: no backend, 503); a connection
    the backend refused, reset or closed is a 502, a request the client gave up on a 499."""
    latency = (row["latency_ms"] or 0.0) / 1000
    outcome = row["outcome"]
    if address is None:
        status, upstream_status, upstream_time = 503, "-", "-"
    elif outcome in ("ok", "http_error"):
        status = int(row["status"] or 502)
        upstream_status, upstream_time = str(status), f"{latency:.3f}"
    elif outcome == "timeout":
        status, upstream_status, upstream_time = 499, "-", f"{latency:.3f}"
    else:
        status, upstream_status, upstream_time = 502, "502", f"{latency:.3f}"
    body = BODY_BYTES.get(status, 0) if upstream_status != "-" else 0
    when = datetime.fromtimestamp(_done(row), UTC).strftime("%d/%b/%Y:%H:%M:%S +0000")
    req_id = hashlib.md5(f"{row['ts']}:{row['conn']}".encode(), usedforsecurity=False).hexdigest()
    return (
        f'{remote} - - [{when}] "GET / HTTP/1.1" {status} {body} "-" "svcdoctor-lab-load/0.1" '
        f"{len(REQUEST)} {latency:.3f} [{UPSTREAM}] [] {address or '-'} {body} "
        f"{upstream_time} {upstream_status} {req_id}"
    )


def nginx_log(
    rows: Sequence[dict[str, Any]],
    addresses: dict[str, str],
    remote: str = "127.0.0.1",
    timestamps: bool = False,
) -> str:
    """A node proxy's access log: one line per request through it, in completion order
    (``addresses``: pod name → ip:port; ``timestamps`` as in ``request_log``)."""
    return "".join(
        (f"{log_time(_done(r))} " if timestamps else "")
        + nginx_line(r, addresses.get(r["backend"]) if r["backend"] else None, remote)
        + "\n"
        for r in sorted(rows, key=_done)
    )
