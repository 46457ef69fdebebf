"""Cloud load balancer request logs → request rows: AWS ALB access logs, GCP Cloud Load
Balancing request logs.

Both name the failure that matters for connection reuse — the target closed a kept-alive
connection the load balancer was about to reuse — in their own words: ALB logs
``elb_status_code`` 502 with ``target_status_code`` ``-``; GCP logs ``statusDetails``
``backend_connection_closed_before_data_sent_to_client``. Both become outcome ``eof``.

Sources (the meaning of every field and code below):
- ALB entry syntax, error reasons, examples:
  https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-access-logs.html
- ALB 460/463/502/503/504 meanings:
  https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-troubleshooting.html
- ALB 502 signatures in the processing times (all three -1: a TCP RST on connect, or a
  target that closed the connection, which AWS lists both, so the entry stays open between
  refused and closed-idle; target closed with a request outstanding:
  ``response_processing_time`` -1):
  https://repost.aws/knowledge-center/elb-alb-troubleshoot-502-errors; real keep-alive 502s
  read ``0.003 0.0 -1 502 -`` (github.com/kartikk221/hyper-express/issues/179)
- GCP record format, ``timestamp`` (when the first-layer GFE received the request) and the
  ``statusDetails`` tables:
  https://cloud.google.com/load-balancing/docs/https/https-logging-monitoring
- ``httpRequest`` (``latency`` "0.123s"; ``remoteIp``/``serverIp`` may carry a port):
  https://cloud.google.com/logging/docs/reference/v2/rest/v2/LogEntry#HttpRequest
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from svcdoctor.evidence.requests import conform, epoch_micros, text_seconds

# One ALB access log entry, fields in documented order. Fields were appended over the years
# (trace_id 2017; domain/cert, rule, request_creation_time, actions, redirect 2018;
# error_reason; target lists, classification; conn_trace_id, transformed_* …): every group
# after target_group_arn is optional, and whatever follows error_reason is ignored, as AWS
# asks parsers to do.
_Q = r'"(?:[^"\\]|\\.)*"'  # a double-quoted field; ALB escapes quotes inside with \
_T = r"-?\d+(?:\.\d+)?|-"  # a processing time: seconds, -1, or -
ALB_LINE: str = (
    r"^(?P<type>\S+) (?P<time>\S+) (?P<elb>\S+) "
    r"(?P<client>\S+):(?P<client_port>\d+) (?P<target>-|\S+:\d+) "
    rf"(?P<request_processing_time>{_T}) (?P<target_processing_time>{_T}) "
    rf"(?P<response_processing_time>{_T}) "
    r"(?P<elb_status_code>\d{3}|-) (?P<target_status_code>\d{3}|-) "
    r"(?P<received_bytes>-?\d+|-) (?P<sent_bytes>-?\d+|-) "
    rf"(?P<request>{_Q}) (?P<user_agent>{_Q}) (?P<ssl_cipher>\S+) (?P<ssl_protocol>\S+) "
    r"(?P<target_group_arn>\S+)"
    r'(?: "(?P<trace_id>[^"]*)"'
    r'(?: "(?P<domain_name>[^"]*)" "(?P<chosen_cert_arn>[^"]*)"'
    r"(?: (?P<matched_rule_priority>\S+) (?P<request_creation_time>\S+) "
    r'"(?P<actions_executed>[^"]*)" "(?P<redirect_url>[^"]*)"'
    r'(?: "(?P<error_reason>[^"]*)"(?: .*)?)?)?)?)?\s*$'
)


# the -1 -1 -1 502 - entry, in words that keep both of AWS's causes open
# (https://docs.aws.amazon.com/elasticloadbalancing/latest/application/
# load-balancer-troubleshooting.html#http-502-issues)
UNDISPATCHED = (
    "not dispatched: the target refused the connection or closed a kept-alive one "
    "(502, times -1, target status -)"
)


def _alb_outcome() -> pl.Expr:
    elb = pl.col("status")
    target_status = pl.col("target_status")
    dispatched = pl.col("rpt") >= 0
    no_answer = (pl.col("tpt") < 0) | (pl.col("rspt") < 0)
    has_target = pl.col("backend").is_not_null()
    return (
        pl.when(elb == 460)
        .then(pl.lit("aborted"))  # the client closed its connection first
        .when(elb.is_null())
        .then(pl.lit("error"))  # "000": no response at all
        .when(elb < 500)
        .then(pl.lit("ok"))  # 2xx-4xx, 463 included: not a failure of the Service
        .when(target_status.is_not_null())
        .then(pl.lit("http_error"))  # the target answered the 5xx itself
        .when(elb == 504)
        .then(pl.lit("timeout"))  # no connection within 10 s, or no answer within idle timeout
        .when((elb == 502) & has_target & dispatched & no_answer)
        .then(pl.lit("eof"))  # the target closed the connection with a request outstanding
        # not dispatched (request_processing_time -1): AWS gives two causes, a TCP RST when
        # connecting (refused) and a target that closed the connection (a kept-alive one
        # the ALB was about to reuse); the shape does not say which: "error", left to the
        # rest of the evidence (timing against deletions, idle gaps)
        .when((elb == 502) & has_target & ~dispatched)
        .then(pl.lit("error"))
        .otherwise(pl.lit("error"))  # 503 no targets, 500 auth/WAF, Lambda, malformed…
    )


def _alb_detail() -> pl.Expr:
    elb = pl.col("status")
    phrase = (
        pl.when(pl.col("outcome") == "aborted")
        .then(pl.lit("client closed the connection before the response (460)"))
        .when(pl.col("outcome") == "eof")
        .then(pl.lit("target closed the connection before responding (502, target status -)"))
        .when(pl.col("outcome") == "refused")
        .then(pl.lit("could not connect to the target (502, target status -)"))
        .when((elb == 502) & (pl.col("rpt") < 0) & pl.col("backend").is_not_null())
        .then(pl.lit(UNDISPATCHED))
        .when(pl.col("outcome") == "timeout")
        .then(pl.lit("target did not respond before the timeout (504)"))
        .when(pl.col("outcome") == "http_error")
        .then(pl.lit("target responded ") + pl.col("target_status").cast(pl.Utf8))
        .when(elb == 503)
        .then(pl.lit("no registered targets (503)"))
        .when(elb == 502)
        .then(pl.lit("invalid response from the target (502)"))
        .when(elb.is_null())
        .then(pl.lit("no response sent (000)"))
        .otherwise(pl.lit("load balancer error ") + elb.cast(pl.Utf8))
    )
    reason = pl.col("error_reason")
    return (
        pl.when(pl.col("outcome") == "ok")
        .then(None)
        .when(reason.is_not_null() & (reason != "-") & (reason != ""))
        .then(reason)
        .otherwise(phrase)
    )


def alb_access(lines: list[str], source: str) -> tuple[pl.DataFrame, int]:
    """Rows for AWS Application Load Balancer access log lines, and the count of non-blank
    lines that did not parse."""
    frame = pl.DataFrame({"line": lines}, schema={"line": pl.Utf8}).filter(
        pl.col("line").str.strip_chars() != ""
    )
    parsed = frame.select(pl.col("line").str.extract_groups(ALB_LINE).alias("m")).unnest("m")
    unparsed = parsed.filter(pl.col("time").is_null()).height
    times = {
        "rpt": "request_processing_time",
        "tpt": "target_processing_time",
        "rspt": "response_processing_time",
    }
    rows = (
        parsed.lazy()
        .filter(pl.col("time").is_not_null())
        .with_columns(
            *(pl.col(src).cast(pl.Float64, strict=False).alias(dst) for dst, src in times.items()),
            pl.col("elb_status_code").cast(pl.Int64, strict=False).alias("status"),
            pl.col("target_status_code").cast(pl.Int64, strict=False).alias("target_status"),
            epoch_micros(pl.col("time")).alias("end"),
            epoch_micros(pl.col("request_creation_time")).alias("start"),
        )
        .with_columns(
            (pl.col("rpt") + pl.col("tpt") + pl.col("rspt")).alias("total"),
            pl.min_horizontal("rpt", "tpt", "rspt").alias("least"),
            pl.when(pl.col("target") != "-").then(pl.col("target")).alias("backend"),
        )
        .with_columns(
            # All three times known: their sum. A -1 among them: the wall time from the
            # request's arrival to the response, or (older format, no arrival time) the
            # sum of the known ones.
            pl.when(pl.col("least") >= 0)
            .then(pl.col("total") * 1000)
            .when(pl.col("start").is_not_null())
            .then((pl.col("end") - pl.col("start")) / 1000)
            .otherwise(pl.sum_horizontal(*(pl.col(c).clip(lower_bound=0) for c in times)) * 1000)
            .alias("latency_ms"),
        )
        .with_columns(
            (
                pl.coalesce(
                    pl.col("start").cast(pl.Float64),
                    pl.col("end") - pl.col("latency_ms").fill_null(0.0) * 1000,
                )
                / 1e6
            ).alias("ts"),
            pl.col("target_group_arn")
            .str.extract(r"(targetgroup/[^/\s]+/[0-9A-Za-z]+)", 1)
            .alias("upstream"),
            _alb_outcome().alias("outcome"),
        )
        .with_columns(_alb_detail().alias("detail"))
    )
    return conform(rows, source).collect(), unparsed


# ---------------------------------------------------------------------------------- GCP

LB_ENTRY_TYPE = "type.googleapis.com/google.cloud.loadbalancing.type.LoadBalancerLogEntry"
LB_RESOURCE_TYPES = frozenset(
    {"http_load_balancer", "internal_http_lb_rule", "http_external_regional_lb_rule"}
)

# statusDetails → outcome. ``response_sent_by_backend`` and the cache successes take the
# outcome from the status; every other documented failure with a 5xx is the load balancer's
# own ``error``; 4xx details (client or policy errors) are ``ok`` for the Service.
GCP_DETAILS: dict[str, str] = {
    "backend_connection_closed_before_data_sent_to_client": "eof",
    "backend_connection_closed_after_partial_response_sent": "reset",
    "backend_timeout": "timeout",
    "failed_to_connect_to_backend": "refused",  # includes timeouts while connecting
    "failed_to_pick_backend": "error",  # no healthy backend
    "client_disconnected_before_any_response": "aborted",
    "client_disconnected_after_partial_response": "aborted",
    "client_timed_out": "aborted",  # the GFE idled out a client that made no progress
    "byte_range_caching_retrieval_abandoned": "aborted",
}
_FROM_STATUS = (
    "response_sent_by_backend",
    "response_from_cache",
    "response_from_cache_validated",
    "byte_range_caching",
)


def _get(record: Mapping[str, Any], *keys: str) -> Any:
    """The first present key of ``record`` (camelCase as Logging writes it, snake_case as
    BigQuery and some client libraries do)."""
    for key in keys:
        if key in record:
            return record[key]
    return None


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def is_gcp_entry(record: Mapping[str, Any]) -> bool:
    """Whether ``record`` is a Cloud Load Balancing request log entry (an HTTP(S) LB's
    ``requests`` log, as ``gcloud logging read --format=json`` or a log sink writes it)."""
    if not isinstance(record, Mapping):
        return False
    if not isinstance(_get(record, "httpRequest", "http_request"), Mapping):
        return False
    payload = _map(_get(record, "jsonPayload", "json_payload"))
    resource = _map(record.get("resource"))
    return payload.get("@type") == LB_ENTRY_TYPE or resource.get("type") in LB_RESOURCE_TYPES


def _latency_text(value: Any) -> str | None:
    """``"0.123456s"`` as Logging writes a Duration; ``{"seconds": …, "nanos": …}`` as some
    exports do."""
    if isinstance(value, Mapping):
        seconds = float(value.get("seconds") or 0) + float(value.get("nanos") or 0) / 1e9
        return f"{seconds}s"
    return None if value is None else str(value)


GCP_FIELDS = ("timestamp", "status", "latency", "remote_ip", "server_ip", "details", "service")


def _gcp_fields(record: Mapping[str, Any]) -> tuple[Any, ...]:
    http = _map(_get(record, "httpRequest", "http_request"))
    payload = _map(_get(record, "jsonPayload", "json_payload"))
    labels = _map(_map(record.get("resource")).get("labels"))
    status = http.get("status")
    # external LBs label backend_service_name; regional and internal ones backend_target_name
    service = labels.get("backend_service_name") or labels.get("backend_target_name") or None
    return (
        None if record.get("timestamp") is None else str(record["timestamp"]),
        None if status is None else str(status),
        _latency_text(http.get("latency")),
        _get(http, "remoteIp", "remote_ip"),
        _get(http, "serverIp", "server_ip"),
        _get(payload, "statusDetails", "status_details"),
        service,
    )


def _gcp_outcome() -> pl.Expr:
    details = pl.col("detail_raw")
    status = pl.col("status")
    from_status = (
        pl.when(status >= 500).then(pl.lit("http_error")).otherwise(pl.lit("ok"))
    )  # the backend's own answer
    mapped = details.replace_strict(GCP_DETAILS, default=None, return_dtype=pl.Utf8)
    return (
        pl.when(status == 101)
        .then(pl.lit("ok"))  # a websocket that ended; its close is not a request failure
        .when(details.is_null() | details.is_in(_FROM_STATUS))
        .then(from_status)
        .when(mapped.is_not_null())
        .then(mapped)
        .when(details.str.starts_with("client_disconnected"))
        .then(pl.lit("aborted"))
        .when(status >= 500)
        .then(pl.lit("error"))  # the load balancer's own 5xx (corrupt response, TLS, config…)
        .otherwise(pl.lit("ok"))  # 4xx/2xx it generated: client or policy, not the Service
    )


def _strip_port(address: pl.Expr) -> pl.Expr:
    """``1.2.3.4:5`` → ``1.2.3.4``, ``[::1]:5`` → ``::1``; a bare IPv6 address stays."""
    return pl.coalesce(
        address.str.extract(r"^\[([^\]]+)\]:\d+$", 1),
        address.str.extract(r"^(\d{1,3}(?:\.\d{1,3}){3}):\d+$", 1),
        address,
    )


def gcp_requests(records: list[dict[str, Any]], source: str) -> pl.DataFrame:
    """Rows for GCP Cloud Load Balancing request log entries (records that are not such
    entries are skipped; see :func:`is_gcp_entry`)."""
    fields = [_gcp_fields(r) for r in records if is_gcp_entry(r)]
    frame = pl.DataFrame(fields, schema=dict.fromkeys(GCP_FIELDS, pl.Utf8), orient="row").lazy()
    rows = (
        frame.with_columns(
            # timestamp: when the first-layer GFE received the request, i.e. its start
            text_seconds(pl.col("timestamp")).alias("ts"),
            pl.col("status").cast(pl.Int64, strict=False),
            (pl.col("latency").str.strip_suffix("s").cast(pl.Float64, strict=False) * 1000).alias(
                "latency_ms"
            ),
            _strip_port(pl.col("remote_ip")).alias("client"),
            pl.col("server_ip").alias("backend"),
            pl.col("service").alias("upstream"),
            pl.col("details").alias("detail_raw"),
        )
        .with_columns(_gcp_outcome().alias("outcome"))
        .with_columns(pl.when(pl.col("outcome") != "ok").then(pl.col("detail_raw")).alias("detail"))
    )
    return conform(rows, source).collect()
