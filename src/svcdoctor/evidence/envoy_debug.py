"""Envoy debug-level output → one failure row per upstream reset (issue 29: "multi-line
Envoy debug dumps", as people paste them into ``diagnose -``).

A debug dump is no request log: it says nothing of the requests that succeeded, so its rows
are ``error_log`` rows (a failure without a rate, as nginx's error log), read for their
signatures. The router's line names the reset; the pool's lines before it, on the same
worker thread, say whether the stream was sent on a connection taken from the pool (the
connection a kept-alive upstream may have closed) or on a new one, and the connection's
``connecting to ADDR`` line names the upstream address.

Shapes (each with where it was seen):
- Envoy's own log format, ``[%Y-%m-%d %T.%e][%t][%l][%n] [%g:%#] %v``
  (https://www.envoyproxy.io/docs/envoy/latest/operations/cli#cmdoption-log-format):
  ``[2019-10-14 10:56:06.963][285][debug][pool] [external/envoy/source/common/http/http1/
  conn_pool.cc:97] [C304210] using existing connection`` then ``[…][285][debug][router] […]
  [C523430][S7230925655636222372] upstream reset: reset reason connection termination``
  (envoyproxy/envoy#8639; ``reset reason: connection termination, transport failure
  reason:`` in newer versions, envoyproxy/envoy#14981; ``Sending local reply with details
  upstream_reset_before_response_started{connection termination}``, envoyproxy/envoy#7925),
  and with ``[Tags: "ConnectionId":"17","StreamId":"…"]`` in place of ``[C17][S…]`` since
  Envoy 1.29 (envoyproxy/envoy#38697);
- istio-proxy's (``%Y-%m-%dT%T.%fZ\\t%l\\tenvoy %n[ %g:%#]\\t%v[\\tthread=%t]``), tabs often
  pasted as spaces: ``2023-02-04T18:37:09.389129Z	debug	envoy router	[C5639][S72…]
  upstream reset: reset reason: connection termination, transport failure reason:``
  (jinsu.me, "When your istio proxy containers terminate before your application
  containers", 2023) and ``2025-07-16T21:25:18.290486Z	debug	envoy router external/envoy/
  source/common/router/router.cc:1445	[Tags: "ConnectionId":"0","StreamId":"108…"] upstream
  reset: …	thread=19`` (llm-d-incubation/llm-d-infra#26).
"""

from __future__ import annotations

import re

import polars as pl

from svcdoctor.evidence.requests import conform, text_seconds

_NATIVE = (
    r"^\[(?P<stamp>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\]\[(?P<thread>\d+)\]"
    r"\[\w+\]\[[\w.]+\] "
)
_ISTIO = (
    r"^(?P<stamp>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)[\t ]+\w+[\t ]+envoy [\w.]+"
    r"(?:.*?[\t ]thread=(?P<thread>\d+)\s*$)?"
)
_RESET = re.compile(
    r"upstream reset: reset reason:? (?P<reason>[a-z][a-z _]*?)(?:,|\s*$)"
    r"|Sending local reply with details (?P<details>upstream_reset_\w+\{[^}]*\})"
)
_STREAM = re.compile(r'\[S(\d+)\]|"StreamId":"(\d+)"')
_CONN = re.compile(r'\[C(\d+)\]|"ConnectionId":"(\d+)"')
_CONNECTING = re.compile(r"connecting to (\S+)")
# Envoy's stream reset reasons as its debug line words them, and as its response code
# details name them (https://www.envoyproxy.io/docs/envoy/latest/configuration/http/
# http_conn_man/response_code_details: upstream_reset_before_response_started{…}); the
# outcome is what the access log's flag for it reads as (proxylogs._FLAG_OUTCOMES)
_REASONS = {
    "connection termination": ("connection_termination", "eof"),  # UC
    "remote reset": ("remote_reset", "reset"),  # UR
    "local reset": ("local_reset", "reset"),  # LR
    "connection failure": ("connection_failure", "refused"),  # UF
    "connection timeout": ("connection_timeout", "timeout"),  # UF
    "overflow": ("overflow", "http_error"),  # UO
    "protocol error": ("protocol_error", "error"),  # UPE
    "remote refused stream reset": ("remote_refused_stream_reset", "reset"),
}
_WANTED = (
    r"upstream reset: |Sending local reply with details upstream_reset_|using existing "
    r"connection|creating a new connection|connecting to |\] pool ready"
)


def envoy_debug_lines(lines: pl.DataFrame, source: str) -> tuple[pl.DataFrame, int]:
    """Failure rows (``error_log``) for Envoy debug ``lines``: one per stream that an
    upstream reset failed; and 0 (a debug line that is no reset is no unread line)."""
    wanted = lines.filter(pl.col("line").str.contains(_WANTED))
    stamps = wanted.select(
        pl.coalesce(
            pl.col("line").str.extract(_NATIVE, 1), pl.col("line").str.extract(_ISTIO, 1)
        ).alias("stamp"),
        pl.coalesce(
            pl.col("line").str.extract(_NATIVE, 2), pl.col("line").str.extract(_ISTIO, 2)
        ).alias("thread"),
        pl.col("line"),
        (pl.col("pts") if "pts" in lines.columns else pl.lit(None, dtype=pl.Float64)).alias("pts"),
    )
    pool: dict[str | None, tuple[str, str]] = {}  # thread → (connection, how it was had)
    bound: dict[str, tuple[str, str]] = {}  # stream → the same, at its "pool ready"
    where: dict[str, str] = {}  # connection → upstream address
    rows: dict[str, dict[str, object]] = {}
    for stamp, thread, line, pts in stamps.iter_rows():
        conn = _first(_CONN.search(line))
        stream = _first(_STREAM.search(line))
        if "connecting to " in line and conn:
            found = _CONNECTING.search(line)
            if found:
                where[conn] = found.group(1)
        elif "using existing connection" in line or "creating a new connection" in line:
            reused = "using existing" in line
            pool[thread] = (conn or "", "reused" if reused else "new")
        elif "] pool ready" in line and stream and thread in pool:
            bound[stream] = pool[thread]
        elif (reset := _RESET.search(line)) is not None and (stamp or pts) is not None:
            key = stream or f"line{len(rows)}"
            if key in rows and reset.group("details"):
                continue  # the local reply of a reset already read
            had = bound.get(key) or pool.get(thread)
            rows[key] = {**_row(reset, had, where, key), "stamp": stamp, "pts": pts}
    frame = pl.DataFrame(
        list(rows.values()),
        schema={
            "stamp": pl.Utf8,
            "pts": pl.Float64,
            "outcome": pl.Utf8,
            "detail": pl.Utf8,
            "backend": pl.Utf8,
            "conn": pl.Utf8,
        },
    )
    # Envoy's own stamps name no zone: read as UTC, as the nginx error log's are; an
    # istio-proxy stamp pasted with a space after it was taken as the line's prefix (pts)
    out = frame.lazy().with_columns(
        pl.when(pl.col("stamp").str.contains("T"))
        .then(text_seconds(pl.col("stamp")))
        .otherwise(text_seconds(pl.col("stamp"), "%Y-%m-%d %H:%M:%S%.f"))
        .fill_null(pl.col("pts"))
        .alias("ts"),
        pl.lit("error_log").alias("role"),
    )
    return conform(out, source).collect(), 0


def _first(match: re.Match[str] | None) -> str | None:
    if match is None:
        return None
    return next((g for g in match.groups() if g), None)


def _row(
    reset: re.Match[str],
    pooled: tuple[str, str] | None,
    where: dict[str, str],
    stream: str,
) -> dict[str, object]:
    """One failure: the reset's reason in the words of Envoy's response code details (so
    ``diagnose.signatures`` reads it as it reads an access log's), and how the stream's
    upstream connection was had, when the pool said so."""
    if reset.group("details"):
        details = reset.group("details").replace(" ", "_")
        reason = details[details.index("{") + 1 : -1]
        outcome = next((o for k, o in _REASONS.values() if k == reason), "error")
    else:
        words = reset.group("reason").strip()
        reason, outcome = _REASONS.get(words, (words.replace(" ", "_"), "error"))
        details = f"upstream_reset_before_response_started{{{reason}}}"
    conn, how = pooled if pooled else ("", "")
    said = {
        "reused": f"; on a reused pooled connection (using existing connection C{conn})",
        "new": f"; on a new connection (C{conn})",
    }.get(how, "")
    return {
        "outcome": outcome,
        "detail": f"{details}{said}",
        "backend": where.get(conn),
        "conn": f"S{stream}",
    }
