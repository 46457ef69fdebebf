"""ingress-nginx access/error logs and Envoy/Istio access logs → request rows.

Lines are parsed with polars regular expressions (no Python loop per line). A proxy that
retried a failed upstream attempt leaves that attempt in its log; it becomes a ``masked``
row: invisible to the client, but exactly the evidence about that backend.
"""

from __future__ import annotations

import polars as pl

from svcdoctor.evidence.requests import conform

# ingress-nginx's default log-format-upstream ("upstreaminfo").
NGINX_ACCESS = (
    r"^(?P<client>\S+) - \S+ \[(?P<time>[^\]]+)\] \"(?P<request>[^\"]*)\" (?P<status>\d{3}) "
    r"\S+ \"[^\"]*\" \"[^\"]*\" \S+ (?P<request_time>\S+) \[(?P<upstream_name>[^\]]*)\] "
    r"\[[^\]]*\] (?P<addrs>\S+(?:(?:, | : )\S+)*) (?P<lengths>\S+(?:(?:, | : )\S+)*) "
    r"(?P<times>\S+(?:(?:, | : )\S+)*) (?P<statuses>\S+(?:(?:, | : )\S+)*)(?: (?P<req_id>\S+))?\s*$"
)
NGINX_ERROR = (
    r"^(?P<time>\d{4}/\d\d/\d\d \d\d:\d\d:\d\d) \[(?:error|warn|crit)\] .*?"
    r"(?P<what>connect\(\) failed \((?P<errno>\d+): [^)]*\)|upstream prematurely closed"
    r"|upstream timed out|recv\(\) failed \((?P<errno2>\d+): [^)]*\)|no live upstreams)"
    r".*?client: (?P<client>[^,]+),.*?upstream: \"\w+://(?P<upstream>[^/\"]+)"
)
# Envoy's default text format and Istio's, which appends more fields after UPSTREAM_HOST.
ENVOY_TEXT = (
    r"^\[(?P<time>[^\]]+)\] \"(?P<request>[^\"]*)\" (?P<status>\d{1,3}) (?P<flags>\S+) "
    r"(?:\S+ \S+ \"[^\"]*\" )?(?P<rest>.*)$"
)
_IP_PORT = r"(?:\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-fA-F:]+\]):\d+"

_FLAG_OUTCOMES = [  # first matching flag wins
    ("UF", "refused"),
    ("UH", "http_error"),
    ("UT", "timeout"),
    ("UC", "eof"),
    ("UR", "reset"),
    ("URX", "error"),
    ("UO", "http_error"),
    ("NR", "http_error"),
    ("DC", "error"),
]


def _lines(text: str) -> pl.DataFrame:
    return pl.DataFrame({"line": text.splitlines()}, schema={"line": pl.Utf8})


def _status_outcome(status: pl.Expr) -> pl.Expr:
    return (
        pl.when(status.is_null())
        .then(pl.lit("error"))
        .when(status == 504)
        .then(pl.lit("timeout"))
        .when(status >= 500)
        .then(pl.lit("http_error"))
        .otherwise(pl.lit("ok"))
    )


def nginx_access(text: str, source: str) -> tuple[pl.DataFrame, int]:
    """Rows for an ingress-nginx access log, and the count of lines that did not parse."""
    lines = _lines(text)
    parsed = lines.select(pl.col("line").str.extract_groups(NGINX_ACCESS).alias("m")).unnest("m")
    unparsed = parsed.filter(pl.col("client").is_null()).height
    parsed = parsed.filter(pl.col("client").is_not_null()).with_row_index("req")
    # $time_local is when the request completed; the canonical ts is when it started.
    ts = (
        pl.col("time")
        .str.to_datetime("%d/%b/%Y:%H:%M:%S %z", time_zone="UTC", strict=False)
        .dt.epoch("us")
        .cast(pl.Float64)
        / 1e6
    ) - pl.col("request_time").cast(pl.Float64, strict=False).fill_null(0.0)
    # " : " separates upstream groups (internal redirects); treat it like ", ".
    split = [
        pl.col(c).str.replace_all(" : ", ", ").str.split(", ")
        for c in ("addrs", "statuses", "times")
    ]
    parsed = parsed.with_columns(ts.alias("ts"), pl.col("status").cast(pl.Int64), *split)
    n = pl.col("addrs").list.len()
    consistent = (pl.col("statuses").list.len() == n) & (pl.col("times").list.len() == n)
    unparsed += parsed.filter(~consistent).height
    attempts = (
        parsed.filter(consistent)
        .with_columns(n.alias("n"))
        .explode(["addrs", "statuses", "times"])
        .with_columns(pl.int_range(pl.len()).over("req").alias("attempt"))
    )
    upstream_status = pl.col("statuses").cast(pl.Int64, strict=False)
    last = pl.col("attempt") == pl.col("n") - 1
    rows = attempts.with_columns(
        pl.when(last).then(pl.col("status")).otherwise(upstream_status).alias("status"),
        pl.when(last).then(pl.lit("request")).otherwise(pl.lit("masked")).alias("role"),
        pl.col("addrs").alias("backend"),
        (pl.col("times").cast(pl.Float64, strict=False) * 1000).alias("latency_ms"),
    ).filter(last | (upstream_status.is_null() | (upstream_status >= 500)))
    rows = rows.with_columns(
        _status_outcome(pl.col("status")).alias("outcome"),
        pl.when(pl.col("backend") == "-").then(None).otherwise(pl.col("backend")).alias("backend"),
    )
    return conform(rows.lazy(), source).collect(), unparsed


def nginx_error(text: str, source: str) -> tuple[pl.DataFrame, int]:
    """Failure rows from an ingress-nginx error log (``connect() failed``…)."""
    lines = _lines(text).filter(pl.col("line").str.contains(r"upstream"))
    parsed = lines.select(pl.col("line").str.extract_groups(NGINX_ERROR).alias("m")).unnest("m")
    parsed = parsed.filter(pl.col("what").is_not_null())
    errno = pl.coalesce(pl.col("errno"), pl.col("errno2"))
    outcome = (
        pl.when(errno == "111")
        .then(pl.lit("refused"))
        .when(errno == "104")
        .then(pl.lit("reset"))
        .when(pl.col("what").str.starts_with("upstream prematurely"))
        .then(pl.lit("eof"))
        .when(pl.col("what").str.starts_with("upstream timed out") | (errno == "110"))
        .then(pl.lit("timeout"))
        .otherwise(pl.lit("error"))
    )
    rows = parsed.with_columns(
        (
            pl.col("time")
            .str.to_datetime("%Y/%m/%d %H:%M:%S", time_zone="UTC", strict=False)
            .dt.epoch("us")
            .cast(pl.Float64)
            / 1e6
        ).alias("ts"),
        outcome.alias("outcome"),
        pl.col("upstream").alias("backend"),
        pl.lit("error_log").alias("role"),
    )
    return conform(rows.lazy(), source).collect(), 0


def _flag_outcome(flags: pl.Expr, status: pl.Expr) -> pl.Expr:
    expr = _status_outcome(status)
    for flag, outcome in reversed(_FLAG_OUTCOMES):
        expr = (
            pl.when(flags.str.contains(rf"(^|,){flag}(,|$)")).then(pl.lit(outcome)).otherwise(expr)
        )
    return expr


def envoy_text(text: str, source: str) -> tuple[pl.DataFrame, int]:
    """Rows for Envoy/Istio text access logs (default formats)."""
    lines = _lines(text)
    parsed = lines.select(pl.col("line").str.extract_groups(ENVOY_TEXT).alias("m")).unnest("m")
    unparsed = parsed.filter(pl.col("time").is_null()).height
    parsed = parsed.filter(pl.col("time").is_not_null())
    rest = pl.col("rest")
    upstream = rest.str.extract(rf"\"({_IP_PORT})\"", 1)
    # Istio: … "UPSTREAM_HOST" CLUSTER UPSTREAM_LOCAL DOWNSTREAM_LOCAL DOWNSTREAM_REMOTE …
    downstream = rest.str.extract(
        rf"\"{_IP_PORT}\" \S+ (?:{_IP_PORT}|-) (?:{_IP_PORT}|-) ({_IP_PORT})", 1
    )
    forwarded = rest.str.extract(r"^\S+ \S+ \S+ \S+ \"([^\"]*)\"", 1)
    status = pl.col("status").cast(pl.Int64)
    rows = parsed.with_columns(
        (
            pl.col("time")
            .str.to_datetime(time_unit="us", time_zone="UTC", strict=False)
            .dt.epoch("us")
            .cast(pl.Float64)
            / 1e6
        ).alias("ts"),
        status.alias("status"),
        _flag_outcome(pl.col("flags"), status).alias("outcome"),
        upstream.alias("backend"),
        pl.coalesce(
            downstream.str.replace(r":\d+$", ""), pl.when(forwarded != "-").then(forwarded)
        ).alias("client"),
        downstream.alias("conn"),
        rest.str.extract(r"^\S+ \S+ (\d+)", 1).cast(pl.Float64, strict=False).alias("latency_ms"),
    )
    return conform(rows.lazy(), source).collect(), unparsed


ENVOY_JSON_FIELDS = (
    "start_time",
    "timestamp",
    "response_code",
    "status",
    "response_flags",
    "upstream_host",
    "downstream_remote_address",
    "x_forwarded_for",
    "duration",
)


def envoy_json(records: list[dict[str, object]], source: str) -> pl.DataFrame:
    """Rows for Envoy/Istio JSON access logs (the usual field names)."""
    columns = {
        name: [None if r.get(name) is None else str(r.get(name)) for r in records]
        for name in ENVOY_JSON_FIELDS
    }
    frame = pl.DataFrame(columns, schema=dict.fromkeys(ENVOY_JSON_FIELDS, pl.Utf8)).lazy()
    status = pl.coalesce(pl.col("response_code"), pl.col("status")).cast(pl.Int64, strict=False)
    downstream = pl.col("downstream_remote_address")
    start = pl.coalesce(pl.col("start_time"), pl.col("timestamp"))
    rows = frame.with_columns(
        (
            start.str.to_datetime(time_unit="us", time_zone="UTC", strict=False)
            .dt.epoch("us")
            .cast(pl.Float64)
            / 1e6
        ).alias("ts"),
        status.alias("status"),
        _flag_outcome(pl.col("response_flags").fill_null("-"), status).alias("outcome"),
        pl.col("upstream_host").alias("backend"),
        pl.coalesce(downstream.str.replace(r":\d+$", ""), pl.col("x_forwarded_for")).alias(
            "client"
        ),
        downstream.alias("conn"),
        pl.col("duration").cast(pl.Float64, strict=False).alias("latency_ms"),
    )
    return conform(
        rows.select(["ts", "status", "outcome", "backend", "client", "conn", "latency_ms"]), source
    ).collect()
