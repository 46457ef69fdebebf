"""Text evidence read line by line: collector prefixes stripped, each line classified by its
own shape (vectorised with polars: no Python loop per line).

A container log as ``kubectl logs`` gives it interleaves a controller's start-up banner, its
klog lines, nginx's access and error lines; a node's journal mixes kernel lines with
everything else. The first line of a file says nothing about the rest, so every line is
classified by itself and each shape goes to its parser.

Collector prefixes (stripped first, their timestamp kept as ``pts``, Unix seconds UTC):
- Docker json-file: ``{"log":"…\\n","stream":"stdout","time":"2025-07-28T23:45:27.9Z"}``
- CRI (containerd/CRI-O files under /var/log/pods): ``2025-07-28T23:45:27.915419813Z stdout F ``
- ``kubectl logs --timestamps``: ``2025-07-28T23:45:27.915419813Z ``
- ``kubectl logs --prefix``: ``[pod/ingress-nginx-controller-abc/controller] `` (the pod's
  name kept as ``pod``: a server-side proxy's log names no backend but its own pod)
- ``docker compose logs [-t]``: ``traefik-traefik-1     | `` then the line or the stamp
  (as pasted in traefik/traefik#8594; v1 wrote ``svc_1  | ``)
- JSON wrappers (fluentd, fluent-bit, filebeat, Cloud Logging, CloudWatch) and multi-line
  records: ``unwrap.py``
- any other label before a line of a known shape: one to three leading fields, such as
  stern's ``pod container [stamp] `` (https://github.com/stern/stern, default template
  ``{{.PodName}} {{.ContainerName}} {{.Message}}``), ``aws logs tail``'s ``stamp stream ``
  (https://docs.aws.amazon.com/cli/latest/reference/logs/tail.html) or ``gcloud logging
  read --format='value(severity,timestamp,textPayload)'``'s tab-separated fields
  (aerospike-community/aerolab#409): tried only on lines no shape knew, the stamp among
  them kept
"""

from __future__ import annotations

import polars as pl

from svcdoctor.evidence import unwrap
from svcdoctor.evidence.requests import text_seconds

# ``[pod/NAME/CONTAINER] `` then an RFC 3339 stamp (kubectl --timestamps, CRI with its
# stream and partial/full tag; journalctl -o short-iso writes +0000 without the colon).
# Removed with one ``replace`` and the stamp taken with one ``extract``: several times
# faster than capturing the rest of the line.
_POD = r"(?:[\w.-]+ +\| )?(?:\[pod/[^/\]\s]+/[^\]\s]+\] )?"  # compose, kubectl --prefix
_STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)"
_PREFIX = rf"^{_POD}(?:{_STAMP} (?:(?:stdout|stderr) [FP] )?)?"
_PREFIX_STAMP = rf"^{_POD}({_STAMP}) "
_POD_NAME = r"^\[pod/([^/\]\s]+)/"
_HAS_PREFIX = r"^(?:\[pod/|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d|[\w.-]+ +\| )"
_PARTIAL = rf"^{_POD}{_STAMP} (?:stdout|stderr) P "  # a CRI piece the next line continues
_DOCKER = '{"log":'
_PTS_FORMAT = "%Y-%m-%dT%H:%M:%S%.f%#z"

# Shapes, on the line without its prefixes. Order matters: first match wins.
NGINX_ACCESS_HINT = (  # any run of spaces between the fields: pasted and hand-made formats
    r"^(?:\S+\s+)?-\s+(?:\[[^\]]*\]\s+-\s+)?\S+\s+"
    r"\[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\]\s+\""
)
NGINX_ERROR_HINT = r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[\w+\] "
ENVOY_HINT = r"^\[\d{4}-\d\d-\d\dT[^\]]*\] \""
LINKERD_HINT = r"^\S+:\d+ \S+ - \[\d{4}-\d\d-\d\dT[^\]]*\] \""  # its "apache" access log
JSON_HINT = r"^\{"
ALB_HINT = r"^(?:http|https|h2|grpcs|ws|wss) \d{4}-\d\d-\d\dT\S+ \S+ \S+:\d+ "
KERNEL_HINT = (
    r"^(?:\[\s*\d+\.\d+\]|\[\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\]"
    r"|\w{3} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)? \S+ kernel: |(?:\S+ )?kernel: |nf_conntrack: )"
)
KLOG_HINT = r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\] "
_CLF_TIME = r"\[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\]"
# Traefik's CLF: nginx's first fields, then request count, "router", "server URL", Nms
TRAEFIK_HINT = rf'^\S+ - \S+ {_CLF_TIME} "[^"]*" .* \d+ (?:"[^"]*"|-) (?:"[^"]*"|-) \d+ms\s*$'
# ingress-nginx's stream (TCP/UDP) log: "[$remote_addr] [$time_local] $protocol $status …"
NGINX_STREAM_HINT = rf"^(?:\[[^\]]*\] ?)?{_CLF_TIME} ?(?:TCP|UDP) ?\d{{3}}"
# Envoy's debug output, its own format and istio-proxy's (``envoy_debug``): read for its
# upstream resets, and named in what the report counts
ENVOY_DEBUG_HINT = (
    r"^(?:\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+\]\[\d+\]\[\w+\]\[[\w.]+\] "
    r"|(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z[\t ]+)?"
    r"(?:trace|debug|info|warn|warning|error|critical)[\t ]+envoy [\w.]+[\t ])"
)
# not evidence, but named in what the report counts (and in the answer to a paste of them)
GO_PANIC_HINT = r"^(?:panic: |goroutine \d+ \[|fatal error: |\s+/\S+\.go:\d+)"
TRACE_HINT = (
    r"^(?:Traceback \(most recent|\s+at [\w$.<>]+\(|Exception in thread "
    r'|\s+File "[^"]+", line \d)'
)
CURL_HINT = r"^curl: \(\d+\) "
# kubectl's tables: get pods (NAME READY STATUS …) and describe's Events (Type Reason …)
KUBECTL_HINT = (
    r"^(?:NAME\s+READY\s+STATUS|\S+\s+\d+/\d+\s+(?:Running|Terminating|Pending|Completed|Error"
    r"|CrashLoopBackOff|ContainerCreating)\s|\s*(?:Normal|Warning)\s+[A-Z]\w+\s+\S+\s+\S+\s+)"
)

SHAPES = (
    ("traefik", TRAEFIK_HINT),
    ("nginx-access", NGINX_ACCESS_HINT),
    ("nginx-error", NGINX_ERROR_HINT),
    ("nginx-stream", NGINX_STREAM_HINT),
    ("envoy", ENVOY_HINT),
    ("linkerd", LINKERD_HINT),
    ("json", JSON_HINT),
    ("alb", ALB_HINT),
    ("kernel", KERNEL_HINT),
    ("klog", KLOG_HINT),
    ("envoy-debug", ENVOY_DEBUG_HINT),
    ("go-panic", GO_PANIC_HINT),
    ("traceback", TRACE_HINT),
    ("curl", CURL_HINT),
    ("kubectl", KUBECTL_HINT),
)
EVIDENCE_SHAPES = frozenset(
    {
        *("nginx-access", "nginx-error", "nginx-stream", "envoy", "envoy-json", "linkerd"),
        *("linkerd-json", "alb", "gcp", "traefik", "traefik-json", "envoy-debug"),
        "nginx-json",
    }
)
# the shapes that are not evidence, as the report names them (Envoy debug lines are read
# for their resets, and named when they hold none)
NOT_EVIDENCE = {
    "klog": "klog",
    "envoy-debug": "Envoy debug",
    "go-panic": "Go panic",
    "traceback": "stack trace",
    "curl": "curl error",
    "kubectl": "kubectl table",
    "other": "other",
}
_LEAD = 3  # leading fields (labels, stamps) tried away on lines no shape knew
_GREP = r"^\d+[-:](?:\d+[-:])?"  # grep's line number (and byte offset), then the line


def split(text: str) -> pl.DataFrame:
    """``idx`` (line number from 1), ``line`` (without collector prefixes) and ``pts`` (the
    prefix's timestamp, or null) for every non-blank line; a record pasted over several
    lines is one line (``unwrap.records``), numbered where it starts."""
    frame = pl.DataFrame({"line": text.splitlines()}, schema={"line": pl.Utf8}).with_row_index(
        "idx", offset=1
    )
    if frame.height and frame.select(unwrap.spans_lines(pl.col("line")).any()).item():
        raw, starts = unwrap.records(frame.get_column("line").to_list())
        frame = pl.DataFrame(
            {"line": raw, "idx": starts}, schema={"line": pl.Utf8, "idx": pl.UInt32}
        ).select("idx", "line")
    frame = frame.filter(pl.col("line").str.strip_chars() != "")
    frame = unwrap.partial_lines(frame, _PARTIAL, _PREFIX)
    return strip_prefixes(frame)


def strip_prefixes(frame: pl.DataFrame) -> pl.DataFrame:
    """Collector prefixes removed from ``line``; their timestamps in ``pts``."""
    pts: pl.Expr = pl.lit(None, dtype=pl.Float64)
    docker = pl.col("line").str.starts_with(_DOCKER)
    if frame.height and frame.select(docker.any()).item():
        frame = _docker(frame, docker)
        pts = pl.col("pts")
    elif "pts" not in frame.columns:
        frame = frame.with_columns(pts.alias("pts"))
    frame = unwrap.wrapped(frame)
    if frame.height and frame.select(pl.col("line").str.contains(_HAS_PREFIX).any()).item():
        frame = frame.with_columns(
            pl.col("line").str.replace(_PREFIX, ""),
            pl.col("line").str.extract(_POD_NAME, 1).alias("pod"),
            pl.coalesce(
                _seconds(pl.col("line").str.extract(_PREFIX_STAMP, 1)), pl.col("pts")
            ).alias("pts"),
        )
    return frame


def _docker(frame: pl.DataFrame, docker: pl.Expr) -> pl.DataFrame:
    """Docker json-file lines decoded to their ``log`` text and ``time``."""
    wrapped = frame.filter(docker)
    rest = frame.filter(~docker).with_columns(pl.lit(None, dtype=pl.Float64).alias("pts"))
    dtype = pl.Struct({"log": pl.Utf8, "time": pl.Utf8})
    try:
        decoded = wrapped.with_columns(pl.col("line").str.json_decode(dtype).alias("__d"))
    except pl.exceptions.PolarsError:  # one broken line: decode them one by one
        decoded = wrapped.with_columns(
            pl.Series("__d", [_docker_record(t) for t in wrapped.get_column("line")], dtype)
        )
    decoded = decoded.with_columns(
        pl.coalesce(
            pl.col("__d").struct.field("log").str.strip_chars_end("\r\n"), pl.col("line")
        ).alias("line"),
        _seconds(pl.col("__d").struct.field("time")).alias("pts"),
    ).drop("__d")
    return pl.concat([decoded, rest]).sort("idx")


def _docker_record(text: str) -> dict[str, str | None]:
    import json

    try:
        value = json.loads(text)
    except ValueError:
        return {"log": None, "time": None}
    if not isinstance(value, dict):
        return {"log": None, "time": None}
    log, time = value.get("log"), value.get("time")
    return {
        "log": log if isinstance(log, str) else None,
        "time": time if isinstance(time, str) else None,
    }


def _seconds(text: pl.Expr) -> pl.Expr:
    return text_seconds(text.str.replace(",", ".", literal=True), _PTS_FORMAT)


def classify(frame: pl.DataFrame, alb_line: str | None = None) -> pl.DataFrame:
    """``shape`` for every line: one of the ``SHAPES`` names (``json`` still to be told
    apart by its fields), or ``other``. A line no shape knew is tried again without one to
    three leading fields (stern's pod and container, a stream name, tab-separated export
    fields): when the rest has an evidence shape, the line is that rest, a stamp among the
    fields dates it, and a first field of two or more that reads as a pod name is its
    ``pod`` (as ``kubectl logs --prefix`` names it)."""
    frame = frame.with_columns(_shape(pl.col("line"), alb_line).alias("shape"))
    other = pl.col("shape") == "other"
    if not frame.height or not frame.select(other.any()).item():
        return frame
    if "pts" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, dtype=pl.Float64).alias("pts"))
    if "pod" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, dtype=pl.Utf8).alias("pod"))
    known = [*EVIDENCE_SHAPES, "kernel", "json", *NOT_EVIDENCE.keys() - {"other"}]
    # ``grep -n``/``-C`` line numbers (``3236824-[2019-10-14 10:56:06.963][285][debug]…``,
    # as pasted in envoyproxy/envoy#8639): the rest is the line
    numbered = pl.col("line").str.replace(_GREP, "")
    tried = _shape(numbered, alb_line)
    found = other & pl.col("line").str.contains(_GREP) & tried.is_in(known)
    frame = frame.with_columns(
        pl.when(found).then(numbered).otherwise(pl.col("line")).alias("line"),
        pl.when(found).then(tried).otherwise(pl.col("shape")).alias("shape"),
    )
    other = pl.col("shape") == "other"
    # stern's first field is the pod (a DNS-1123 name with a dash, as ReplicaSets name pods)
    first = pl.col("line").str.extract(r"^(\S+)[ \t]", 1)
    pod_like = first.str.contains(r"^[a-z0-9][-a-z0-9.]*-[a-z0-9]+$")
    for lead in range(1, _LEAD + 1):
        head = rf"^((?:(?:\[[^\]]*\]|\S+)[ \t]+){{{lead}}})"  # a [labels] group is one field
        rest = pl.col("line").str.replace(head, "")
        tried = _shape(rest, alb_line)
        found = other & pl.col("line").str.contains(head) & tried.is_in(known)
        stamp = pl.col("line").str.extract(head, 1).str.extract(rf"({_STAMP})", 1)
        frame = frame.with_columns(
            pl.when(found).then(rest).otherwise(pl.col("line")).alias("line"),
            pl.when(found).then(tried).otherwise(pl.col("shape")).alias("shape"),
            pl.when(found)
            .then(pl.coalesce(_seconds(stamp), pl.col("pts")))
            .otherwise(pl.col("pts"))
            .alias("pts"),
            pl.when(found & pod_like & (lead >= 2))
            .then(first)
            .otherwise(pl.col("pod"))
            .alias("pod"),
        )
    return frame


def _shape(line: pl.Expr, alb_line: str | None) -> pl.Expr:
    expr: pl.Expr = pl.lit("other")
    for name, pattern in reversed(SHAPES):
        if name == "alb" and alb_line is None:
            continue
        expr = pl.when(line.str.contains(pattern)).then(pl.lit(name)).otherwise(expr)
    return expr


def describe(counts: dict[str, int]) -> str:
    """What a text held when nothing in it was evidence, and what to collect instead, in
    one sentence: ``12 lines: 0 request lines, 0 kernel lines, 3 Go panic lines, 9 other
    lines; collect …``."""
    counts = dict(counts)
    counts["other"] = counts.get("other", 0) + counts.pop("json", 0)  # JSON of no known kind
    total = sum(counts.values())
    requests = sum(v for k, v in counts.items() if k in EVIDENCE_SHAPES - NOT_EVIDENCE.keys())
    named = [_lines(counts[k], word) for k, word in NOT_EVIDENCE.items() if counts.get(k)]
    seen = ", ".join(
        [_lines(requests, "request"), _lines(counts.get("kernel", 0), "kernel"), *named]
    )
    return (
        f"{total} line{'s' if total != 1 else ''}: {seen}; collect next: the proxy's "
        "access log with its timestamps (kubectl logs --timestamps on the ingress or the "
        "sidecar), kubectl get events -o json and dmesg -T from the node, or run "
        "svcdoctor collect"
    )


def _lines(count: int, word: str) -> str:
    return f"{count} {word} line{'s' if count != 1 else ''}"


def json_shape(lines: pl.Series) -> pl.Series:
    """``envoy-json``, ``linkerd-json``, ``gcp``, ``traefik-json``, ``nginx-json`` or
    ``other`` for JSON object lines, by the fields they name."""
    envoy = lines.str.contains(r'"(?:response_code|upstream_host|response_flags|start_time)"')
    gcp = lines.str.contains(r'"(?:httpRequest|http_request)"')
    linkerd = lines.str.contains('"client.addr"', literal=True)
    # https://doc.traefik.io/traefik/observability/access-logs/ (JSON format fields)
    traefik = lines.str.contains(r'"(?:DownstreamStatus|OriginStatus)"')
    # nginx's JSON access log (proxylogs.NGINX_JSON_FIELDS): its upstream variables
    nginx = lines.str.contains(r'"(?:upstream_addr|upstream_status|upstream_connect_time)"')
    return (
        pl.select(
            pl.when(gcp)
            .then(pl.lit("gcp"))
            .when(linkerd)
            .then(pl.lit("linkerd-json"))
            .when(traefik)
            .then(pl.lit("traefik-json"))
            .when(envoy)
            .then(pl.lit("envoy-json"))
            .when(nginx)
            .then(pl.lit("nginx-json"))
            .otherwise(pl.lit("other"))
        )
        .to_series()
        .alias("shape")
    )
