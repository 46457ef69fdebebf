"""ingress-nginx access/error logs and Envoy/Istio access logs → request rows.

Lines are parsed with polars regular expressions (no Python loop per line). A proxy that
retried a failed upstream attempt leaves that attempt in its log; it becomes a ``masked``
row: invisible to the client, but exactly the evidence about that backend.

Shapes (each with where it was seen):
- ingress-nginx ``upstreaminfo`` (controller ≥ 0.2x), with the alternative-upstream
  bracket: ``client - user [time] "req" status bytes "ref" "ua" reqlen reqtime
  [ns-svc-port] [alt] addrs lens times statuses req_id``
  (kubernetes/ingress-nginx#9443, #9877);
- the older one with the real IP in brackets and no alternative upstream:
  ``client - [client] - user [time] … reqtime [ns-svc-port] addrs lens times statuses``
  (kubernetes/ingress-nginx#334, #4312; docs/user-guide/log-format.md before 0.2x);
- nginx's own ``combined`` and NGINX Inc's ``main`` formats (no upstream fields; also with
  the spacing of hand-written formats and pastes): ``$remote_addr - $remote_user
  [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"
  ["$http_x_forwarded_for"]`` (https://nginx.org/en/docs/http/ngx_http_log_module.html,
  the ``main`` of the nginx image's /etc/nginx/nginx.conf): a row per request, no backend,
  its time the end of the request (the format has no duration);
- ingress-nginx's stream (TCP/UDP services) log, ``log-format-stream`` ``[$remote_addr]
  [$time_local] $protocol $status $bytes_sent $bytes_received $session_time``
  (https://kubernetes.github.io/ingress-nginx/user-guide/nginx-configuration/configmap/#log-format-stream;
  older controllers wrote the fields without spaces, kubernetes/ingress-nginx#4541, #3612):
  ``$status`` 502 when the upstream could not be reached
  (https://nginx.org/en/docs/stream/ngx_stream_core_module.html#var_status);
- nginx error lines of http upstreams (``upstream: "http://10.0.0.1:8080/path"``) and of
  TCP/UDP stream upstreams (``upstream: "172.26.144.225:9009"``, no scheme);
- Envoy's default text format, Istio's (1.1 to 1.8: ``"%DYNAMIC_METADATA(istio.mixer:status)%"
  "%UPSTREAM_TRANSPORT_FAILURE_REASON%"`` after the flags) and Istio's newer default
  (``%RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS%
  "%UPSTREAM_TRANSPORT_FAILURE_REASON%"``, istio/istio#45802), and Envoy JSON;
- Linkerd's proxy access log (pod or namespace annotation ``config.linkerd.io/access-log``:
  ``apache`` or ``json``), in the two shapes of https://linkerd.io/2-edge/features/access-logging/
  (linkerd/website ``linkerd.io/content/2-edge/features/access-logging.md``):
  ``10.42.0.63:51160 traffic.booksapp.serviceaccount.identity.linkerd.cluster.local -
  [2022-08-23T20:28:20.071809491Z] "GET http://webapp:7000/ HTTP/2.0" 200`` and
  ``{"client.addr":"10.42.0.70:32996","client.id":"…","host":"webapp:7000","method":"GET",
  "processing_ns":"39826",…,"status":200,"timestamp":"2022-08-23T20:33:42.321746212Z",
  "total_ns":"14441135",…,"uri":"http://webapp:7000/",…}``. The proxy writes it on the
  server's side (the inbound proxy of the pod that answered), to the container's stderr.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import polars as pl

from svcdoctor.evidence.requests import conform, text_seconds

# ingress-nginx's log-format-upstream ("upstreaminfo"), current and older (no
# alternative-upstream bracket; the real IP in brackets after the client).
NGINX_ACCESS = (
    r"^(?:(?P<client>\S+) )?- (?:\[(?P<real_ip>[^\]]*)\] - )?\S+ \[(?P<time>[^\]]+)\] "
    r"\"(?P<request>[^\"]*)\" "
    r"(?P<status>\d{3}) \S+ \"[^\"]*\" \"[^\"]*\" \S+ (?P<request_time>\S+) "
    r"\[(?P<upstream_name>[^\]]*)\] (?:\[[^\]]*\] )?"
    # list items never hold a comma: "502, 200" is one list, never "502," and a request id
    r"(?P<addrs>[^\s,]+(?:(?:, | : )[^\s,]+)*) (?P<lengths>[^\s,]+(?:(?:, | : )[^\s,]+)*) "
    r"(?P<times>[^\s,]+(?:(?:, | : )[^\s,]+)*) "
    r"(?P<statuses>[^\s,]+(?:(?:, | : )[^\s,]+)*)(?: (?P<req_id>\S+))?\s*$"
)
# nginx "combined" / NGINX Inc "main" (see the module docstring); any fields after them
# (a custom format's additions) are ignored.
NGINX_COMBINED = (
    r"^(?P<client>\S+)\s+-\s+\S+\s+\[(?P<time>[^\]]+)\]\s+\"(?P<request>[^\"]*)\"\s+"
    r"(?P<status>\d{3})\s+\S+(?:\s+\"[^\"]*\"\s+\"[^\"]*\"(?:\s+\"(?P<xff>[^\"]*)\")?)?"
    r"(?:\s+\S.*)?$"
)
NGINX_STREAM = (
    r"^(?:\[(?P<client>[^\]]*)\] ?)?\[(?P<time>\d\d/\w{3}/\d{4}:[^\]]+)\] ?(?P<proto>TCP|UDP) ?"
    r"(?P<status>\d{3})(?: (?P<sent>\d+) (?P<received>\d+) (?P<session>\d+(?:\.\d+)?)|[\d.]*)\s*$"
)
# Upstream failures in the nginx error log (http and stream); ``detail`` is nginx's phrase.
NGINX_ERROR = (
    r"^(?P<time>\d{4}/\d\d/\d\d \d\d:\d\d:\d\d) \[(?:error|crit)\] \d+#\d+: (?:\*(?P<cid>\d+) )?"
    r"(?P<detail>(?P<what>connect\(\) failed|upstream prematurely closed|upstream timed out"
    r"|\w+\(\) failed|no live upstreams|upstream sent)[^,]*), client: (?P<client>[^,]+),.*?"
    r"upstream: \"(?:\w+://)?(?P<addr>[^/\"]+)"
)
# Envoy's default text format and Istio's two (see the module docstring).
ENVOY_TEXT = (
    r"^\[(?P<time>[^\]]+)\] \"(?P<request>[^\"]*)\" (?P<status>\d{1,3}) (?P<flags>\S+) "
    r"(?:(?P<details>[^\s\"]+) (?P<term>[^\s\"]+) \"(?P<tfr1>[^\"]*)\" "
    r"|\"(?P<mixer>[^\"]*)\" \"(?P<tfr2>[^\"]*)\" )?"
    r"(?P<received>\d+|-) (?P<sent>\d+|-) (?P<duration>\d+|-) (?P<service_time>\S+) "
    r"\"(?P<xff>[^\"]*)\" \"(?P<ua>[^\"]*)\" \"(?P<request_id>[^\"]*)\" "
    r"\"(?P<authority>[^\"]*)\" \"(?P<upstream_host>[^\"]*)\""
    r"(?: (?P<cluster>\S+) (?P<upstream_local>\S+) (?P<downstream_local>\S+)"
    r" (?P<downstream_remote>\S+)(?: .*)?)?\s*$"
)

# Linkerd's "apache" access log (see the module docstring): client address, client identity
# ("-" when not meshed), "-", [RFC 3339 time], "request", status
LINKERD_APACHE = (
    r"^(?P<client_addr>\S+) (?P<client_id>\S+) - \[(?P<time>\d{4}-\d\d-\d\dT[^\]]+)\] "
    r"\"(?P<method>\S+) (?P<uri>\S+)(?: (?P<version>[^\"]*))?\" (?P<status>\d{3})\s*$"
)
LINKERD_JSON_FIELDS = ("client.addr", "client.id", "host", "status", "timestamp", "total_ns", "uri")
_IP_PORT = r"^(?:\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-fA-F:.]+\]):\d+$"

_FLAG_OUTCOMES = [  # first matching flag wins
    ("UF", "refused"),
    ("UH", "http_error"),
    ("UT", "timeout"),
    ("UC", "eof"),
    ("UR", "reset"),
    ("URX", "error"),
    ("UO", "http_error"),
    ("NR", "http_error"),
    ("DC", "aborted"),  # the downstream (client) closed the connection
]


def _lines(text: str) -> pl.DataFrame:
    return pl.DataFrame({"line": text.splitlines()}, schema={"line": pl.Utf8})


def _null_dash(expr: pl.Expr) -> pl.Expr:
    return pl.when(expr.is_in(["-", ""])).then(None).otherwise(expr)


def _status_outcome(status: pl.Expr) -> pl.Expr:
    return (
        pl.when(status.is_null())
        .then(pl.lit("error"))
        .when(status == 499)
        .then(pl.lit("aborted"))  # nginx: the client closed the connection first
        .when(status == 504)
        .then(pl.lit("timeout"))
        .when(status >= 500)
        .then(pl.lit("http_error"))
        .otherwise(pl.lit("ok"))
    )


def nginx_access(text: str, source: str) -> tuple[pl.DataFrame, int]:
    """Rows for an ingress-nginx access log, and the count of lines that did not parse."""
    frame, unparsed, _ = nginx_access_lines(_lines(text), source)
    return frame.drop("__end"), unparsed


def nginx_access_lines(lines: pl.DataFrame, source: str) -> tuple[pl.DataFrame, int, str | None]:
    """Rows (with ``__end``, when the request completed) for access-log ``lines`` (column
    ``line``), the count that did not parse, and the UTC offset most lines carry."""
    parsed = lines.select(pl.col("line").str.extract_groups(NGINX_ACCESS).alias("m")).unnest("m")
    missing = parsed.get_column("time").is_null()
    combined, unparsed = _combined(lines.filter(missing), source)
    parsed = parsed.filter(pl.col("time").is_not_null()).with_row_index("req")
    times = pl.concat([parsed.get_column("time"), combined.get_column("__time")])
    offsets = times.str.slice(-5).value_counts(sort=True)
    offset = str(offsets.row(0)[0]) if offsets.height else None
    end = text_seconds(pl.col("time"), "%d/%b/%Y:%H:%M:%S %z")
    # $time_local is when the request completed; the canonical ts is when it started.
    ts = end - pl.col("request_time").cast(pl.Float64, strict=False).fill_null(0.0)
    # " : " separates upstream groups (internal redirects); treat it like ", ".
    split = [
        pl.col(c).str.replace_all(" : ", ", ").str.split(", ")
        for c in ("addrs", "statuses", "times")
    ]
    parsed = parsed.with_columns(
        ts.alias("ts"), end.alias("__end"), pl.col("status").cast(pl.Int64), *split
    )
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
        _null_dash(pl.col("backend")).alias("backend"),
        _null_dash(pl.col("upstream_name")).alias("upstream"),
        # the older format logs "-" first when the real IP is only in the brackets
        pl.coalesce(
            _null_dash(pl.col("client")),
            _null_dash(pl.col("real_ip").str.split(",").list.first().str.strip_chars()),
        ).alias("client"),
    )
    frame = conform(rows.lazy(), source, keep=("__end",)).collect()
    if combined.height:
        frame = pl.concat([frame, combined.drop("__time")])
    return frame, unparsed, offset


def _combined(lines: pl.DataFrame, source: str) -> tuple[pl.DataFrame, int]:
    """Rows (with ``__end`` and the raw ``__time``) for access lines in nginx's ``combined``
    or ``main`` format, and the count of lines that are neither. Timing fields appended as
    ``key=value`` (``_TAIL``) give the request's duration, its upstream and whether its
    upstream connection was reused (``_reuse_conn``)."""
    parsed = lines.select(
        pl.col("line").str.extract_groups(NGINX_COMBINED).alias("m"),
        *(pl.col("line").str.extract(rx, 1).alias(f"__{k}") for k, rx in _TAIL.items()),
    ).unnest("m")
    kept = parsed.filter(pl.col("time").is_not_null())
    end = text_seconds(pl.col("time"), "%d/%b/%Y:%H:%M:%S %z")
    status = pl.col("status").cast(pl.Int64)
    took = pl.col("__rt").cast(pl.Float64, strict=False)
    upstream = _null_dash(pl.col("__ua").str.split(", ").list.last())
    rows = kept.with_columns(
        (end - took.fill_null(0.0)).alias("ts"),
        end.alias("__end"),
        pl.col("time").alias("__time"),
        status.alias("status"),
        _status_outcome(status).alias("outcome"),
        (took * 1000).alias("latency_ms"),
        upstream.alias("backend"),
        pl.coalesce(
            _null_dash(pl.col("xff")).str.split(",").list.first().str.strip_chars(),
            _null_dash(pl.col("client")),
        ).alias("client"),
    ).with_columns(_reuse_conn(pl.col("__uct"), pl.col("backend")).alias("conn"))
    frame = conform(rows.lazy(), source, keep=("__end", "__time")).collect()
    return frame, parsed.height - kept.height


# Timing fields that hand-written formats append to "combined" as key=value (quoted or
# not): NGINX's ``upstream_time`` format (``rt=$request_time uct="$upstream_connect_time"
# uht="$upstream_header_time" urt="$upstream_response_time"``,
# https://docs.nginx.com/nginx/admin-guide/monitoring/logging/), its ``apm`` format's
# long names (``upstream_addr=… request_time=… upstream_connect_time=…``,
# https://blog.nginx.org/blog/using-nginx-logging-for-application-performance-monitoring)
# and unquoted variants (decompme/decomp.me ``nginx/production.conf``: ``rt=… urt=… uht=…
# uct=…``). Several tries are listed like ``$upstream_addr``: ``0.000, 0.001``.
_TAIL = {
    "rt": r'\s(?:rt|request_time)="?(\d+(?:\.\d+)?)"?(?:\s|$)',
    "uct": r'\s(?:uct|upstream_connect_time)="?([-\d.]+(?:(?:, | : )[-\d.]+)*)"?(?:\s|$)',
    "ua": r'\s(?:ua|upstream_addr)="?([^\s"]+(?:(?:, | : )[^\s"]+)*)"?(?:\s|$)',
}


def _reuse_conn(connect_times: pl.Expr, backend: pl.Expr) -> pl.Expr:
    """The upstream connection of a request, from ``$upstream_connect_time`` (of its last
    try): nginx computes it when the request is first sent, as the time since the upstream
    connect began (src/http/ngx_http_upstream.c, ``ngx_http_upstream_send_request``:
    ``connect_time = ngx_current_msec - u->start_time``); a connection taken from the
    keepalive cache is ready at once, so a reused connection logs exactly ``0.000``
    (https://nginx.org/en/docs/http/ngx_http_upstream_module.html#var_upstream_connect_time:
    "time spent on establishing a connection"), and a new one more (or also 0.000 when the
    connect took under a millisecond: a reuse count is then an upper bound); ``-``: no
    connection was made. The pooled connection itself is not named: a new connection
    starts a group of the upstream (the address, else the one upstream of the log), and
    the requests that reused a connection after it join that group, so ``reused`` is true
    of every 0.000 after the first new connection seen."""
    last = connect_times.str.split(", ").list.last().str.split(" : ").list.last()
    seconds = pl.when(last == "-").then(None).otherwise(last.cast(pl.Float64, strict=False))
    key = backend.cast(pl.Utf8).fill_null("upstream")
    opened = (seconds > 0).fill_null(False).cast(pl.Int64).cum_sum().over(key)
    return (
        pl.when(seconds.is_null())
        .then(None)
        .otherwise(pl.concat_str([key, pl.lit("#"), opened.cast(pl.Utf8)]))
    )


def nginx_stream_lines(lines: pl.DataFrame, source: str) -> tuple[pl.DataFrame, int]:
    """Rows for ingress-nginx stream (TCP/UDP) log ``lines``, and the count that did not
    parse; the request started ``$session_time`` before its logged end."""
    parsed = lines.select(pl.col("line").str.extract_groups(NGINX_STREAM).alias("m")).unnest("m")
    unparsed = parsed.filter(pl.col("time").is_null()).height
    end = text_seconds(pl.col("time"), "%d/%b/%Y:%H:%M:%S %z")
    session = pl.col("session").cast(pl.Float64, strict=False)
    status = pl.col("status").cast(pl.Int64)
    outcome = _status_outcome(status)
    rows = parsed.filter(pl.col("time").is_not_null()).with_columns(
        (end - session.fill_null(0.0)).alias("ts"),
        status.alias("status"),
        outcome.alias("outcome"),
        _null_dash(pl.col("client")).alias("client"),
        (session * 1000).alias("latency_ms"),
        pl.when(status == 502)
        .then(pl.lit("stream 502: the upstream could not be reached"))
        .alias("detail"),
    )
    return conform(rows.lazy(), source).collect(), unparsed


def nginx_error(text: str, source: str) -> tuple[pl.DataFrame, int]:
    """Failure rows from an ingress-nginx error log (``connect() failed``…), times as UTC."""
    frame, _ = nginx_error_lines(_lines(text), source)
    return frame.drop("__pts"), 0


def _errno_outcome() -> pl.Expr:
    errno, what = pl.col("detail").str.extract(r"\((\d+): ", 1), pl.col("what")
    return (
        pl.when(errno == "111")
        .then(pl.lit("refused"))
        .when(errno == "104")
        .then(pl.lit("reset"))
        .when(what.str.starts_with("upstream prematurely"))
        .then(pl.lit("eof"))
        .when(what.str.starts_with("upstream timed out") | (errno == "110"))
        .then(pl.lit("timeout"))
        .otherwise(pl.lit("error"))
    )


def nginx_error_lines(lines: pl.DataFrame, source: str) -> tuple[pl.DataFrame, int]:
    """Failure rows (``error_log``) for error-log ``lines``, their times read as UTC (the log
    carries no offset: the reader shifts them), with the collector's stamp as ``__pts``; and
    the count of lines that were no upstream failure (notices, reloads, lua warnings)."""
    if "pts" not in lines.columns:
        lines = lines.with_columns(pl.lit(None, dtype=pl.Float64).alias("pts"))
    parsed = lines.select(
        pl.col("line").str.extract_groups(NGINX_ERROR).alias("m"),
        pl.col("pts").alias("__pts"),
        pl.col("line").str.extract(r'request: "([^"]*)"', 1).alias("__request"),
    ).unnest("m")
    other = parsed.filter(pl.col("what").is_null()).height
    parsed = parsed.filter(pl.col("what").is_not_null())
    rows = parsed.with_columns(
        text_seconds(pl.col("time"), "%Y/%m/%d %H:%M:%S").alias("ts"),
        _errno_outcome().alias("outcome"),
        pl.col("addr").alias("backend"),
        pl.col("client").str.strip_chars(),
        pl.col("detail").str.strip_chars(),
        pl.lit("error_log").alias("role"),
        # nginx's connection number and the request: the lines of one request's tries
        # (diagnose.context counts them once)
        pl.when(pl.col("cid").is_not_null())
        .then(pl.concat_str([pl.lit("*"), "cid", pl.lit(" "), "__request"], ignore_nulls=True))
        .alias("conn"),
    )
    return conform(rows.lazy(), source, keep=("__pts",)).collect(), other


def _flag_outcome(flags: pl.Expr, status: pl.Expr) -> pl.Expr:
    expr = _status_outcome(status)
    for flag, outcome in reversed(_FLAG_OUTCOMES):
        expr = (
            pl.when(flags.str.contains(rf"(^|,){flag}(,|$)")).then(pl.lit(outcome)).otherwise(expr)
        )
    return expr


def _detail(outcome: pl.Expr, *parts: pl.Expr) -> pl.Expr:
    """The proxy's words for a failure: the non-empty ``parts`` joined, null for ok rows
    (Envoy: the response flags first, ``UC; upstream_reset_before_response_started{…}``, so
    ``diagnose.signatures`` can read them)."""
    cleaned = [pl.when(p.is_in(["-", "", "via_upstream"])).then(None).otherwise(p) for p in parts]
    text = pl.concat_str(cleaned, separator="; ", ignore_nulls=True)
    return pl.when(outcome.is_in(["ok"]) | (text == "")).then(None).otherwise(text)


def _no_endpoints(flags: pl.Expr, details: pl.Expr) -> pl.Expr:
    """Envoy's ``UH`` (``no_healthy_upstream``: the cluster had no healthy host, for a
    Kubernetes Service no ready endpoint; https://www.envoyproxy.io/docs/envoy/latest/configuration/observability/access_log/usage#config-access-log-format-response-flags)
    said in words: the outcome model has no "no endpoints" outcome, so the row stays an
    ``http_error`` (the 503 the client saw) and the detail names it."""
    uh = flags.str.contains(r"(^|,)UH(,|$)").fill_null(False)
    words = "no_healthy_upstream: no ready endpoints"
    named = details.fill_null("").str.contains("no_healthy_upstream")
    return pl.when(uh & ~named).then(pl.lit(words)).otherwise(details)


def _upstream(cluster: pl.Expr, authority: pl.Expr) -> pl.Expr:
    """The Envoy cluster; Istio's inbound clusters (``inbound|9080||``) name no Service, so
    the request's ``:authority`` host tells the Services of one sidecar log apart."""
    host = _null_dash(authority).str.replace(r":\d+$", "")
    bare = cluster.str.contains(r"^inbound\|\d+\|[^|]*\|$")
    named = pl.when(bare & host.is_not_null()).then(cluster + host).otherwise(cluster)
    return _null_dash(named)


def _conn(
    downstream: pl.Expr, flags: pl.Expr, upstream_local: pl.Expr, upstream_host: pl.Expr
) -> pl.Expr:
    """The pooled upstream connection (proxy → pod), keyed on its local address and the
    host (``UPSTREAM_LOCAL_ADDRESS``→``UPSTREAM_HOST``): that is the connection a proxy
    reuses, whatever connection the client came in on (an Istio sidecar's app → sidecar
    connection says nothing of the sidecar → pod one). Without the upstream local address
    (Envoy's default format), the client's connection. Requests that never had an upstream
    connection (no healthy upstream, connect failure: UH/UF, or the address ``-``) were new
    connection attempts: null."""
    no_upstream = flags.str.contains(r"(^|,)(UF|UH)(,|$)") | (upstream_local == "-")
    local = _null_dash(upstream_local)
    pooled = pl.when(local.is_not_null()).then(
        pl.concat_str([local, pl.lit("→"), upstream_host.fill_null("-")])
    )
    return (
        pl.when(no_upstream.fill_null(False)).then(None).otherwise(pl.coalesce(pooled, downstream))
    )


def envoy_text(text: str, source: str) -> tuple[pl.DataFrame, int]:
    """Rows for Envoy/Istio text access logs (default formats)."""
    return envoy_text_lines(_lines(text), source)


def envoy_text_lines(lines: pl.DataFrame, source: str) -> tuple[pl.DataFrame, int]:
    """Rows for Envoy/Istio access-log ``lines``: the backend is the ``UPSTREAM_HOST``
    field by position (``:authority`` may be an IP:port too), ``upstream`` the cluster."""
    parsed = lines.select(pl.col("line").str.extract_groups(ENVOY_TEXT).alias("m")).unnest("m")
    unparsed = parsed.filter(pl.col("time").is_null()).height
    parsed = parsed.filter(pl.col("time").is_not_null())
    status = pl.col("status").cast(pl.Int64)
    outcome = _flag_outcome(pl.col("flags"), status)
    remote = _null_dash(pl.col("downstream_remote"))
    rows = parsed.with_columns(
        text_seconds(pl.col("time")).alias("ts"),
        status.alias("status"),
        outcome.alias("outcome"),
        _null_dash(pl.col("upstream_host")).alias("backend"),
        _upstream(pl.col("cluster"), pl.col("authority")).alias("upstream"),
        _client(remote, pl.col("xff")).alias("client"),
        _conn(remote, pl.col("flags"), pl.col("upstream_local"), pl.col("upstream_host")).alias(
            "conn"
        ),
        pl.col("duration").cast(pl.Float64, strict=False).alias("latency_ms"),
        _detail(
            outcome,
            pl.col("flags"),
            _no_endpoints(pl.col("flags"), pl.col("details")),
            pl.coalesce(pl.col("tfr1"), pl.col("tfr2")),
        ).alias("detail"),
    )
    return conform(rows.lazy(), source).collect(), unparsed


def _client(remote: pl.Expr, xff: pl.Expr) -> pl.Expr:
    """The client: the downstream address without its port, else X-Forwarded-For's first."""
    first = _null_dash(xff).str.split(",").list.first().str.strip_chars()
    return pl.coalesce(remote.str.replace(r":\d+$", "").str.strip_chars("[]"), first)


ENVOY_JSON_FIELDS = (
    "start_time",
    "timestamp",
    "response_code",
    "status",
    "response_flags",
    "response_code_details",
    "upstream_transport_failure_reason",
    "upstream_host",
    "upstream_cluster",
    "downstream_remote_address",
    "upstream_local_address",
    "x_forwarded_for",
    "duration",
)


def envoy_json(records: list[dict[str, object]], source: str) -> pl.DataFrame:
    """Rows for Envoy/Istio JSON access logs (the usual field names)."""
    columns = {
        name: [None if r.get(name) is None else str(r.get(name)) for r in records]
        for name in ENVOY_JSON_FIELDS
    }
    frame = pl.DataFrame(columns, schema=dict.fromkeys(ENVOY_JSON_FIELDS, pl.Utf8))
    return _envoy_json_rows(frame, source)


def _json_fields(lines: pl.DataFrame, names: Sequence[str]) -> tuple[pl.DataFrame, int]:
    """The named fields of JSON ``lines`` as text columns, and how many lines are no JSON
    objects: decoded by polars as a batch (counted as 0 then), one line at a time only if
    a line breaks the batch."""
    dtype = pl.Struct(dict.fromkeys(names, pl.Utf8))
    try:
        return lines.select(pl.col("line").str.json_decode(dtype).alias("m")).unnest("m"), 0
    except pl.exceptions.PolarsError:
        pass
    records = []
    for line in lines.get_column("line").to_list():
        try:
            value = json.loads(line)
        except ValueError:
            value = None
        if isinstance(value, dict):
            records.append(value)
    columns = {n: [None if r.get(n) is None else str(r.get(n)) for r in records] for n in names}
    frame = pl.DataFrame(columns, schema=dict.fromkeys(names, pl.Utf8))
    return frame, lines.height - len(records)


def envoy_json_lines(lines: pl.DataFrame, source: str) -> tuple[pl.DataFrame, int]:
    """Rows for Envoy JSON ``lines`` decoded by polars; lines that are not JSON objects are
    counted (and the batch decoded one line at a time only if one of them breaks it)."""
    fields, unparsed = _json_fields(lines, ENVOY_JSON_FIELDS)
    return _envoy_json_rows(fields, source), unparsed


def _envoy_json_rows(frame: pl.DataFrame, source: str) -> pl.DataFrame:
    status = pl.coalesce(pl.col("response_code"), pl.col("status")).cast(pl.Int64, strict=False)
    outcome = _flag_outcome(pl.col("response_flags").fill_null("-"), status)
    downstream = _null_dash(pl.col("downstream_remote_address"))
    start = pl.coalesce(pl.col("start_time"), pl.col("timestamp"))
    rows = frame.lazy().with_columns(
        text_seconds(start).alias("ts"),
        status.alias("status"),
        outcome.alias("outcome"),
        _null_dash(pl.col("upstream_host")).alias("backend"),
        _null_dash(pl.col("upstream_cluster")).alias("upstream"),
        _client(downstream, pl.col("x_forwarded_for")).alias("client"),
        _conn(
            downstream,
            pl.col("response_flags").fill_null("-"),
            pl.col("upstream_local_address"),
            pl.col("upstream_host"),
        ).alias("conn"),
        pl.col("duration").cast(pl.Float64, strict=False).alias("latency_ms"),
        _detail(
            outcome,
            pl.col("response_flags"),
            _no_endpoints(pl.col("response_flags").fill_null("-"), pl.col("response_code_details")),
            pl.col("upstream_transport_failure_reason"),
        ).alias("detail"),
    )
    return conform(
        rows.select(
            [
                *("ts", "status", "outcome", "backend", "upstream", "client", "conn"),
                *("latency_ms", "detail"),
            ]
        ),
        source,
    ).collect()


def linkerd_apache_lines(lines: pl.DataFrame, source: str) -> tuple[pl.DataFrame, int]:
    """Rows for Linkerd ``apache`` access-log ``lines``, and the count that did not parse."""
    parsed = lines.select(
        pl.col("line").str.extract_groups(LINKERD_APACHE).alias("m"), _pod(lines)
    ).unnest("m")
    unparsed = parsed.filter(pl.col("time").is_null()).height
    parsed = parsed.filter(pl.col("time").is_not_null())
    # the authority of an absolute URI (HTTP/2, proxied HTTP/1); "/ping" names none
    host = pl.col("uri").str.extract(r"^\w+://([^/]+)", 1)
    frame = parsed.select(
        pl.col("client_addr").alias("client.addr"),
        host.alias("host"),
        pl.col("status"),
        pl.col("time").alias("timestamp"),
        pl.lit(None, dtype=pl.Utf8).alias("total_ns"),
        pl.col("pod"),
    )
    return _linkerd_rows(frame, source), unparsed


def linkerd_json_lines(lines: pl.DataFrame, source: str) -> tuple[pl.DataFrame, int]:
    """Rows for Linkerd ``json`` access-log ``lines``, and the count that are no records
    (decoded by polars; one line at a time only when a broken line breaks the batch)."""
    dtype = pl.Struct(dict.fromkeys(LINKERD_JSON_FIELDS, pl.Utf8))
    try:
        fields = lines.select(pl.col("line").str.json_decode(dtype).alias("m"), _pod(lines))
    except pl.exceptions.PolarsError:
        pass
    else:
        kept = fields.unnest("m").filter(pl.col("timestamp").is_not_null())
        return _linkerd_rows(kept, source), fields.height - kept.height
    import json

    records = []
    pods = lines.with_columns(_pod(lines)).get_column("pod").to_list()
    for line, pod in zip(lines.get_column("line").to_list(), pods, strict=True):
        try:
            value = json.loads(line)
        except ValueError:
            value = None
        if isinstance(value, dict) and value.get("timestamp") is not None:
            records.append({**value, "pod": pod})
    names = (*LINKERD_JSON_FIELDS, "pod")
    columns = {n: [None if r.get(n) is None else str(r.get(n)) for r in records] for n in names}
    frame = pl.DataFrame(columns, schema=dict.fromkeys(names, pl.Utf8))
    return _linkerd_rows(frame, source), lines.height - len(records)


def _pod(lines: pl.DataFrame) -> pl.Expr:
    """The pod a line's ``kubectl logs --prefix`` named (``lines.split``), else null."""
    found = pl.col("pod") if "pod" in lines.columns else pl.lit(None, dtype=pl.Utf8)
    return found.alias("pod")


def _linkerd_rows(frame: pl.DataFrame, source: str) -> pl.DataFrame:
    """The canonical rows of Linkerd access-log fields. The log is the answering pod's own
    (its inbound proxy): ``backend`` is that pod, named by the line's ``kubectl logs
    --prefix`` (as collect writes it), else by ``host`` when the client addressed the pod
    (an IP:port); ``upstream`` is the authority the client asked for (the
    Service, ``webapp:7000``); ``conn`` the client's address with its port (one a
    connection); ``timestamp`` is read as the request's start, ``total_ns`` as its
    duration (the apache shape has none)."""
    status = pl.col("status").cast(pl.Int64, strict=False)
    client = _null_dash(pl.col("client.addr"))
    host = _null_dash(pl.col("host"))
    rows = frame.lazy().with_columns(
        text_seconds(pl.col("timestamp")).alias("ts"),
        status.alias("status"),
        _status_outcome(status).alias("outcome"),
        pl.coalesce(
            pl.col("pod"), pl.when(host.str.contains(_IP_PORT)).then(host).otherwise(None)
        ).alias("backend"),
        host.alias("upstream"),
        client.str.replace(r":\d+$", "").str.strip_chars("[]").alias("client"),
        client.alias("conn"),
        (pl.col("total_ns").cast(pl.Float64, strict=False) / 1e6).alias("latency_ms"),
    )
    columns = ("ts", "status", "outcome", "backend", "upstream", "client", "conn", "latency_ms")
    return conform(rows.select(columns), source).collect()


# nginx access logs written as JSON (ingress-nginx ``log-format-escape-json`` with a JSON
# ``log-format-upstream``; nginx ``log_format … escape=json``): the keys are the user's, so
# the usual ones are read, by the variable they name. The example of ingress-nginx's docs
# (kubernetes/ingress-nginx#1664, docs/user-guide/nginx-configuration/configmap.md
# log-format-escape-json): ``{"proxy_protocol_addr": …, "proxy_add_x_forwarded_for": …,
# "time_iso8601": "$time_iso8601", "request": …, "status": "$status", …, "request_time":
# "$request_time", "proxy_upstream_name": …, "upstream_addr": "$upstream_addr", …,
# "upstream_response_time": …, "upstream_status": "$upstream_status"}``; also ``time``
# (kubernetes/ingress-nginx#9819), ``time_local`` (apache/apisix#2266) and
# ``upstream_connect_time`` where the user logs it.
NGINX_JSON_FIELDS = (
    *("time_iso8601", "time", "timestamp", "time_local", "status", "request_time"),
    *("upstream_addr", "upstream_status", "upstream_connect_time", "upstream_response_time"),
    *("remote_addr", "x_forwarded_for", "proxy_add_x_forwarded_for", "proxy_upstream_name"),
)


def nginx_json_lines(lines: pl.DataFrame, source: str) -> tuple[pl.DataFrame, int]:
    """Rows for nginx JSON access-log ``lines`` (one row a request, its last upstream try:
    the status the client got, the address that gave it), and the count that are no
    records. ``$upstream_connect_time`` keys the upstream connection (``_reuse_conn``)."""
    fields, _ = _json_fields(lines, NGINX_JSON_FIELDS)
    end = pl.coalesce(
        text_seconds(pl.coalesce("time_iso8601", "time", "timestamp")),
        text_seconds(pl.col("time_local"), "%d/%b/%Y:%H:%M:%S %z"),
    )
    took = pl.col("request_time").cast(pl.Float64, strict=False)
    status = pl.col("status").cast(pl.Int64, strict=False)
    last = _null_dash(pl.col("upstream_addr").str.split(", ").list.last())
    forwarded = pl.coalesce(
        _null_dash(pl.col("x_forwarded_for")), _null_dash(pl.col("proxy_add_x_forwarded_for"))
    )
    rows = (
        fields.with_columns(end.alias("__end"))
        .filter(pl.col("__end").is_not_null())
        .with_columns(
            (pl.col("__end") - took.fill_null(0.0)).alias("ts"),
            status.alias("status"),
            _status_outcome(status).alias("outcome"),
            (took * 1000).alias("latency_ms"),
            last.str.split(" : ").list.last().alias("backend"),
            _null_dash(pl.col("proxy_upstream_name")).alias("upstream"),
            pl.coalesce(
                forwarded.str.split(",").list.first().str.strip_chars(),
                _null_dash(pl.col("remote_addr")),
            ).alias("client"),
        )
        .with_columns(
            _reuse_conn(
                pl.col("upstream_connect_time").str.replace_all(" : ", ", "), pl.col("backend")
            ).alias("conn")
        )
    )
    return conform(rows.lazy(), source).collect(), lines.height - rows.height
