"""nginx access lines with ``$upstream_connect_time`` (issue 29, connection identity per
hop): a request whose upstream connection was taken from the keepalive cache logs exactly
``0.000`` (nginx sets it when the request is first sent, src/http/ngx_http_upstream.c
``ngx_http_upstream_send_request``), a new connection more; that is the reused-connection
indicator of the reuse tests, as Envoy's upstream local address is.

The lines are NGINX's ``upstream_time`` format
(https://docs.nginx.com/nginx/admin-guide/monitoring/logging/):
``'$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent
"$http_referer" "$http_user_agent" rt=$request_time uct="$upstream_connect_time"
uht="$upstream_header_time" urt="$upstream_response_time"'``, with, where a test says so,
``upstream_addr=$upstream_addr`` appended as NGINX's ``apm`` format names it
(https://blog.nginx.org/blog/using-nginx-logging-for-application-performance-monitoring)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl

from svcdoctor.diagnose import diagnose
from svcdoctor.evidence import read_evidence
from svcdoctor.model import Cause, Verdict

LINES = """\
10.2.0.7 - - [05/Dec/2026:10:00:00 +0000] "GET /api HTTP/1.1" 200 512 "-" "curl/8.5.0" rt=0.012 uct="0.001" uht="0.011" urt="0.011"
10.2.0.7 - - [05/Dec/2026:10:00:01 +0000] "GET /api HTTP/1.1" 200 512 "-" "curl/8.5.0" rt=0.010 uct="0.000" uht="0.010" urt="0.010"
10.2.0.7 - - [05/Dec/2026:10:00:09 +0000] "GET /api HTTP/1.1" 502 150 "-" "curl/8.5.0" rt=0.003 uct="0.000, 0.002" uht="-, 0.001" urt="0.001, 0.001"
10.2.0.7 - - [05/Dec/2026:10:00:10 +0000] "GET /api HTTP/1.1" 502 150 "-" "curl/8.5.0" rt=0.001 uct="-" uht="-" urt="-"
"""  # noqa: E501 - log lines as nginx writes them


def test_connect_time_tells_reused_connections_from_new_ones(tmp_path: Path) -> None:
    path = tmp_path / "access.log"
    path.write_text(LINES)
    rows = read_evidence([str(path)]).requests.sort("ts")
    assert rows.get_column("latency_ms").to_list() == [12.0, 10.0, 3.0, 1.0]
    # the request time is the duration: the request started that long before the stamp
    end = datetime(2026, 12, 5, 10, 0, 0, tzinfo=UTC).timestamp()
    assert abs(rows.item(0, "ts") - (end - 0.012)) < 1e-6
    conn = rows.get_column("conn").to_list()
    assert conn[0] == conn[1]  # the second reused the connection the first opened
    assert conn[2] != conn[1]  # its last try opened a new connection (0.002)
    assert conn[3] is None  # no connection was made at all


def _log(seed: int, *, fault: bool, backends: bool) -> str:
    """An hour of traffic through nginx to four pods whose keep-alive idle timeout (5 s) is
    shorter than nginx's (60 s): with ``fault``, half the requests that reuse a connection
    idle for longer fail at once with 502."""
    rng = np.random.default_rng(seed)
    pods = [f"10.244.{i}.{10 + i}:8080" for i in range(4)]
    last: dict[str, float] = {}
    out, t = [], 0.0
    t0 = datetime(2026, 12, 5, 10, 0, 0, tzinfo=UTC).timestamp()
    while t < 3600:
        t += float(
            rng.choice([0.2, 0.5, 1, 2, 8, 15]) if rng.random() < 0.2 else rng.uniform(0.05, 0.5)
        )
        pod = pods[int(rng.integers(0, 4))]
        idle = t - last[pod] if pod in last else None
        new = idle is None or idle > 60 or rng.random() < 0.02
        uct = f"{rng.uniform(0.001, 0.004):.3f}" if new else "0.000"
        status, took = 200, float(rng.uniform(0.005, 0.05))
        if fault and idle is not None and not new and idle > 5 and rng.random() < 0.5:
            status, took = 502, 0.001
        last[pod] = t
        stamp = datetime.fromtimestamp(t0 + t, UTC).strftime("%d/%b/%Y:%H:%M:%S +0000")
        line = (
            f'10.2.0.{int(rng.integers(2, 10))} - - [{stamp}] "GET /api/v1/items HTTP/1.1" '
            f'{status} {512 if status == 200 else 150} "-" "okhttp/4.12.0" rt={took:.3f} '
            f'uct="{uct}" uht="{took:.3f}" urt="{took:.3f}"'
        )
        out.append(line + (f" upstream_addr={pod}" if backends else ""))
    return "\n".join(out) + "\n"


def _as_json(text: str) -> str:
    """The same requests as nginx writes them with a JSON log format: the keys of
    ingress-nginx's example (kubernetes/ingress-nginx#1664: ``time_iso8601``, ``status``,
    ``request_time``, ``upstream_addr``, ``upstream_status``, ``upstream_response_time``)
    and ``upstream_connect_time``."""
    out = []
    for line in text.splitlines():
        m = re.match(
            r'(\S+) - - \[([^\]]+)\] "([^"]*)" (\d+) \d+ "[^"]*" "[^"]*" rt=(\S+) uct="([^"]*)" '
            r'uht="[^"]*" urt="([^"]*)" upstream_addr=(\S+)',
            line,
        )
        assert m is not None, line
        ip, t, request, status, took, uct, urt, addr = m.groups()
        stamp = datetime.strptime(t, "%d/%b/%Y:%H:%M:%S %z").isoformat()
        record = {
            "proxy_add_x_forwarded_for": ip,
            "time_iso8601": stamp,
            "request": request,
            "status": status,
            "request_time": took,
            "upstream_addr": addr,
            "upstream_response_time": urt,
            "upstream_status": status,
            "upstream_connect_time": uct,
        }
        out.append(json.dumps(record))
    return "\n".join(out) + "\n"


def run(
    tmp_path: Path, as_json: bool = False, **kw: bool
) -> tuple[Cause | None, Verdict | None, tuple[str, ...]]:
    path = tmp_path / "access.log"
    text = _log(7, **kw)
    path.write_text(_as_json(text) if as_json else text)
    d = diagnose(read_evidence([str(path)]))
    if d.primary is None:
        return None, None, ()
    return d.primary.cause, d.primary.verdict, d.primary.evidence


def test_failures_on_reused_upstream_connections_are_reuse(tmp_path: Path) -> None:
    cause, verdict, evidence = run(tmp_path, fault=True, backends=True)
    assert cause is Cause.REUSE
    assert verdict is Verdict.LIKELY
    assert any("idle gap" in e for e in evidence), evidence


def test_json_access_logs_give_the_same_connections(tmp_path: Path) -> None:
    cause, verdict, evidence = run(tmp_path, as_json=True, fault=True, backends=True)
    assert cause is Cause.REUSE
    assert verdict is Verdict.LIKELY
    assert any("idle gap" in e for e in evidence), evidence
    assert run(tmp_path, as_json=True, fault=False, backends=True)[0] is None


def test_without_the_upstream_address_the_reused_share_still_tells(tmp_path: Path) -> None:
    cause, _, evidence = run(tmp_path, fault=True, backends=False)
    assert cause is Cause.REUSE
    assert any("reused (keep-alive) connections" in e for e in evidence), evidence


def test_the_same_traffic_without_failures_has_no_cause(tmp_path: Path) -> None:
    assert run(tmp_path, fault=False, backends=True)[0] is None


def test_lines_without_timing_fields_are_read_as_before(tmp_path: Path) -> None:
    path = tmp_path / "access.log"
    path.write_text(
        '10.2.0.7 - - [05/Dec/2026:10:00:00 +0000] "GET / HTTP/1.1" 200 612 "-" "curl/8.5.0"\n'
    )
    rows = read_evidence([str(path)]).requests
    assert rows.select(pl.col("conn").is_null().all(), pl.col("latency_ms").is_null().all()).row(
        0
    ) == (True, True)
