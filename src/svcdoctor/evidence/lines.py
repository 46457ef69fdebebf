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
"""

from __future__ import annotations

import polars as pl

from svcdoctor.evidence.requests import text_seconds

# ``[pod/NAME/CONTAINER] `` then an RFC 3339 stamp (kubectl --timestamps, CRI with its
# stream and partial/full tag; journalctl -o short-iso writes +0000 without the colon).
# Removed with one ``replace`` and the stamp taken with one ``extract``: several times
# faster than capturing the rest of the line.
_POD = r"(?:\[pod/[^/\]\s]+/[^\]\s]+\] )?"
_STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)"
_PREFIX = rf"^{_POD}(?:{_STAMP} (?:(?:stdout|stderr) [FP] )?)?"
_PREFIX_STAMP = rf"^{_POD}({_STAMP}) "
_POD_NAME = r"^\[pod/([^/\]\s]+)/"
_HAS_PREFIX = r"^(?:\[pod/|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)"
_DOCKER = '{"log":'
_PTS_FORMAT = "%Y-%m-%dT%H:%M:%S%.f%#z"

# Shapes, on the line without its prefixes. Order matters: first match wins.
NGINX_ACCESS_HINT = (
    r"^(?:\S+ )?- (?:\[[^\]]*\] - )?\S+ \[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\] \""
)
NGINX_ERROR_HINT = r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[\w+\] "
ENVOY_HINT = r"^\[\d{4}-\d\d-\d\dT[^\]]*\] \""
LINKERD_HINT = r"^\S+:\d+ \S+ - \[\d{4}-\d\d-\d\dT[^\]]*\] \""  # its "apache" access log
JSON_HINT = r"^\{"
ALB_HINT = r"^(?:http|https|h2|grpcs|ws|wss) \d{4}-\d\d-\d\dT\S+ \S+ \S+:\d+ "
KERNEL_HINT = (
    r"^(?:\[\s*\d+\.\d+\]|\[\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}\]"
    r"|\w{3} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)? \S+ kernel: |(?:\S+ )?kernel: )"
)
KLOG_HINT = r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ \S+:\d+\] "

SHAPES = (
    ("nginx-access", NGINX_ACCESS_HINT),
    ("nginx-error", NGINX_ERROR_HINT),
    ("envoy", ENVOY_HINT),
    ("linkerd", LINKERD_HINT),
    ("json", JSON_HINT),
    ("alb", ALB_HINT),
    ("kernel", KERNEL_HINT),
    ("klog", KLOG_HINT),
)
EVIDENCE_SHAPES = frozenset(
    {"nginx-access", "nginx-error", "envoy", "envoy-json", "linkerd", "linkerd-json", "alb", "gcp"}
)


def split(text: str) -> pl.DataFrame:
    """``idx`` (line number from 1), ``line`` (without collector prefixes) and ``pts`` (the
    prefix's timestamp, or null) for every non-blank line."""
    frame = pl.DataFrame({"line": text.splitlines()}, schema={"line": pl.Utf8}).with_row_index(
        "idx", offset=1
    )
    frame = frame.filter(pl.col("line").str.strip_chars() != "")
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
    apart by its fields), or ``other``."""
    line = pl.col("line")
    expr: pl.Expr = pl.lit("other")
    for name, pattern in reversed(SHAPES):
        if name == "alb" and alb_line is None:
            continue
        expr = pl.when(line.str.contains(pattern)).then(pl.lit(name)).otherwise(expr)
    return frame.with_columns(expr.alias("shape"))


def json_shape(lines: pl.Series) -> pl.Series:
    """``envoy-json``, ``linkerd-json``, ``gcp`` or ``other`` for JSON object lines, by the
    fields they name."""
    envoy = lines.str.contains(r'"(?:response_code|upstream_host|response_flags|start_time)"')
    gcp = lines.str.contains(r'"(?:httpRequest|http_request)"')
    linkerd = lines.str.contains('"client.addr"', literal=True)
    return (
        pl.select(
            pl.when(gcp)
            .then(pl.lit("gcp"))
            .when(linkerd)
            .then(pl.lit("linkerd-json"))
            .when(envoy)
            .then(pl.lit("envoy-json"))
            .otherwise(pl.lit("other"))
        )
        .to_series()
        .alias("shape")
    )
