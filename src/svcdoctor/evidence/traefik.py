"""Traefik access logs → request rows, in both formats of
https://doc.traefik.io/traefik/observability/access-logs/.

- CLF (the default): ``<remote_IP_address> - <client_user_name_if_available> [<timestamp>]
  "<request_method> <request_path> <request_protocol>" <HTTP_status> <content-length>
  "<request_referrer>" "<request_user_agent>" <number_of_requests_received_since_Traefik_started>
  "<Traefik_router_name>" "<Traefik_server_URL>" <request_duration_in_ms>ms``; v1 wrote an
  absent referrer as a bare ``-`` and ``-`` for a status it did not have (traefik/traefik#2565,
  #2112). The timestamp is the request's start (Traefik's ``StartLocal``).
- JSON: one object per request with ``StartUTC``, ``DownstreamStatus``, ``OriginStatus``,
  ``Duration`` (nanoseconds), ``ClientAddr``/``ClientHost``, ``RouterName``,
  ``ServiceName``, ``ServiceAddr``, ``ServiceURL`` (a string, or an object with ``Host``
  in v1/v2 as pasted in traefik/traefik#7681), ``RetryAttempts``; Traefik 1.x named the
  backend ``BackendAddr``/``BackendURL``/``BackendName`` (traefik/traefik#4452).

Outcomes follow the status Traefik sent: 499 is the client giving up (``aborted``), 504 a
timeout, other 5xx ``http_error`` (Traefik answers 502 itself when the backend closed or
refused the connection; its access log does not say which).
"""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from svcdoctor.evidence.requests import conform, text_seconds

_Q = r'(?:"(?P<{0}>[^"]*)"|-)'
TRAEFIK_CLF = (
    r"^(?P<client>\S+) - \S+ \[(?P<time>[^\]]+)\] \"(?P<request>[^\"]*)\" "
    r"(?P<status>\d{3}|-) (?P<size>\S+) (?:\"[^\"]*\"|-) (?:\"[^\"]*\"|-) "
    r"(?P<count>\d+) " + _Q.format("router") + " " + _Q.format("url") + r" (?P<ms>\d+)ms\s*$"
)
_FIELDS = (
    *("StartUTC", "StartLocal", "DownstreamStatus", "OriginStatus", "Duration"),
    *("ClientAddr", "ClientHost", "RouterName", "ServiceName", "ServiceAddr", "ServiceURL"),
    # Traefik 1.x names (https://doc.traefik.io/traefik/v1.7/configuration/logs/)
    *("BackendAddr", "BackendURL", "BackendName", "FrontendName"),
)


def _outcome(status: pl.Expr) -> pl.Expr:
    return (
        pl.when(status.is_null())
        .then(pl.lit("error"))
        .when(status == 499)
        .then(pl.lit("aborted"))
        .when(status == 504)
        .then(pl.lit("timeout"))
        .when(status >= 500)
        .then(pl.lit("http_error"))
        .otherwise(pl.lit("ok"))
    )


def _host(url: pl.Expr) -> pl.Expr:
    """``http://10.42.0.7:80`` → ``10.42.0.7:80``; null for ``-`` or empty."""
    host = url.str.replace(r"^\w+://", "").str.replace(r"/.*$", "")
    return pl.when(host.is_in(["", "-"])).then(None).otherwise(host)


def clf_lines(lines: pl.DataFrame, source: str) -> tuple[pl.DataFrame, int]:
    """Rows for Traefik CLF ``lines``, and the count that did not parse."""
    parsed = lines.select(pl.col("line").str.extract_groups(TRAEFIK_CLF).alias("m")).unnest("m")
    unparsed = parsed.filter(pl.col("time").is_null()).height
    status = pl.col("status").cast(pl.Int64, strict=False)
    rows = parsed.filter(pl.col("time").is_not_null()).with_columns(
        text_seconds(pl.col("time"), "%d/%b/%Y:%H:%M:%S %z").alias("ts"),
        status.alias("status"),
        _outcome(status).alias("outcome"),
        _host(pl.col("url").fill_null("")).alias("backend"),
        pl.col("router").alias("upstream"),
        pl.col("ms").cast(pl.Float64).alias("latency_ms"),
    )
    return conform(rows.lazy(), source).collect(), unparsed


def json_lines(lines: pl.DataFrame, source: str) -> tuple[pl.DataFrame, int]:
    """Rows for Traefik JSON ``lines``, and the count that are no access records."""
    records = []
    for text in lines.get_column("line").to_list():
        try:
            value: Any = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, dict) and ("StartUTC" in value or "StartLocal" in value):
            records.append(value)
    columns = {name: [_text(r.get(name)) for r in records] for name in _FIELDS}
    frame = pl.DataFrame(columns, schema=dict.fromkeys(_FIELDS, pl.Utf8))
    status = pl.coalesce("DownstreamStatus", "OriginStatus").cast(pl.Int64, strict=False)
    addr = pl.coalesce("ServiceAddr", "BackendAddr")
    rows = frame.lazy().with_columns(
        pl.coalesce(text_seconds(pl.col("StartUTC")), text_seconds(pl.col("StartLocal"))).alias(
            "ts"
        ),
        status.alias("status"),
        _outcome(status).alias("outcome"),
        pl.coalesce(
            pl.when(addr.str.contains(r":\d+$")).then(addr),
            _host(pl.coalesce("ServiceURL", "BackendURL")),
            addr,
        ).alias("backend"),
        pl.coalesce("ServiceName", "RouterName", "BackendName", "FrontendName").alias("upstream"),
        pl.coalesce("ClientHost", pl.col("ClientAddr").str.replace(r":\d+$", "")).alias("client"),
        pl.col("ClientAddr").alias("conn"),
        (pl.col("Duration").cast(pl.Float64, strict=False) / 1e6).alias("latency_ms"),
    )
    columns_out = ("ts", "status", "outcome", "backend", "upstream", "client", "conn")
    return (
        conform(rows.select(*columns_out, "latency_ms"), source).collect(),
        lines.height - len(records),
    )


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, dict):  # ServiceURL as Go's url.URL: {"Scheme": …, "Host": …}
        host = value.get("Host")
        scheme = value.get("Scheme") or "http"
        return f"{scheme}://{host}" if host else None
    return str(value)
