"""Pasted text put back into one log line per record before the shapes are read.

What collectors and terminals do to log lines, each undone here:
- records over several lines: pretty-printed JSON (``jq .``, Traefik's access log as
  pasted in traefik/traefik#7681, ``aws logs tail --format json``) and Envoy debug dumps,
  whose header lines (``':status', '503'``) follow the line that announced them
  (envoyproxy/envoy#14981 and most Envoy debug pastes);
- JSON wrappers of log shippers, the payload in ``log`` (Docker json-file, fluentd,
  fluent-bit: https://docs.fluentbit.io/manual/pipeline/parsers/docker), ``message``
  (filebeat: https://www.elastic.co/guide/en/beats/filebeat/current/exported-fields-log.html;
  CloudWatch ``filter-log-events``:
  https://docs.aws.amazon.com/cli/latest/reference/logs/filter-log-events.html, ``timestamp``
  in milliseconds), ``textPayload`` or ``jsonPayload`` (Google Cloud Logging's LogEntry:
  https://cloud.google.com/logging/docs/reference/v2/rest/v2/LogEntry);
- ``gcloud logging read``'s default YAML (``---`` between LogEntries): each entry one line;
- ``aws logs tail --format json``: a ``stamp stream`` line before the pretty-printed record;
- CRI partial lines: the runtime splits a line longer than 16 KiB into ``P`` pieces ended by
  an ``F`` piece (https://github.com/kubernetes/design-proposals-archive/blob/main/node/kubelet-cri-logging.md);
- terminal colours (stern colours pod and container names: https://github.com/stern/stern).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import date
from typing import Any

import polars as pl
import yaml

from svcdoctor.evidence.times import rfc3339

_BLOCK_START = re.compile(r"^\s*[{\[]\s*$", re.MULTILINE)
# gcloud logging read's default output: YAML LogEntries (textPayload or jsonPayload)
_YAML_PAYLOAD = re.compile(r"^(?:textPayload|jsonPayload):", re.MULTILINE)
_LABEL_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\S+\s+\S+\s*$")  # stamp and stream, alone
_HEADER_LINE = re.compile(r"^\s*'[^']*', '", re.MULTILINE)  # an Envoy debug header dump
_MAX_BLOCK = 2000  # lines: a brace that never closes stops joining here
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# JSON lines that wrap a log line (the payload's keys) and are no record of their own
_WRAPPER = r'^\{.*"(?:log|message|textPayload|jsonPayload|MESSAGE)"\s*:'
_RECORD = r'"(?:httpRequest|http_request|response_code|DownstreamStatus|client\.addr)"'
_PAYLOAD_KEYS = ("log", "message", "textPayload", "MESSAGE")
# the keys of a log record (wrapper payloads, Envoy, Linkerd, Traefik): other JSON is no log
_LOG_KEYS = frozenset(
    {
        *("log", "message", "textPayload", "jsonPayload", "MESSAGE", "response_code"),
        *("start_time", "response_flags", "client.addr", "DownstreamStatus", "StartUTC"),
        *("upstream_addr", "upstream_status"),  # nginx's JSON access log
    }
)
_TIME_KEYS = ("time", "timestamp", "@timestamp", "receiveTimestamp", "date", "ts")


def spans_lines(line: pl.Expr) -> pl.Expr:
    """Lines that ``records`` would change: a JSON value opened alone on its line, an Envoy
    header line, a terminal colour (vectorised: the common case costs one scan)."""
    return (
        line.str.contains(r"^\s*[{\[]\s*$")
        | line.str.contains(r"^\s*'[^']*', '")
        | line.str.contains("\x1b[", literal=True)
        | line.str.contains(r"^(?:textPayload|jsonPayload):")
    )


def records(raw: list[str]) -> tuple[list[str], list[int]]:
    """``raw`` lines with the multi-line records joined into one line each; and the line
    number (from 1) where each starts. Lines are left as they are when nothing spans
    several lines (the common case costs two regular-expression scans)."""
    text = "\n".join(raw)
    if "\x1b[" in text:
        raw = [_ANSI.sub("", line) for line in raw]
        text = "\n".join(raw)
    blocks = _BLOCK_START.search(text) is not None
    headers = _HEADER_LINE.search(text) is not None
    entries = _YAML_PAYLOAD.search(text) is not None
    if not blocks and not headers and not entries:
        return raw, list(range(1, len(raw) + 1))
    out: list[str] = []
    starts: list[int] = []
    i = 0
    while i < len(raw):
        line = raw[i]
        if entries and (i == 0 or line.strip() == "---"):
            first = i + 1 if line.strip() == "---" else i
            after, entry = _yaml_entry(raw, first)
            if entry is not None:
                out.append(entry)
                starts.append(first + 1)
                i = after
                continue
        if blocks and line.strip() in ("{", "["):
            close = _block_end(raw, i)
            if close is not None:
                joined = _compact(raw[i : close + 1])
                if out and starts[-1] == i and _LABEL_LINE.match(out[-1]):
                    out[-1] = f"{out[-1].rstrip()} {joined}"  # aws logs tail --format json
                else:
                    out.append(joined)
                    starts.append(i + 1)
                i = close + 1
                continue
        if headers and out and _HEADER_LINE.match(line):
            out[-1] = f"{out[-1]} {line.strip()}"
            i += 1
            continue
        out.append(line)
        starts.append(i + 1)
        i += 1
    return out, starts


def _yaml_entry(raw: list[str], first: int) -> tuple[int, str | None]:
    """A LogEntry as ``gcloud logging read`` prints it by default (YAML documents split by
    ``---``) from line ``first``: (the line after it, the entry as one JSON line), or
    (first, None) when the lines there are no such entry."""
    end = first
    while end < len(raw) and raw[end].strip() != "---":
        end += 1
    block = raw[first:end]
    if not any(_YAML_PAYLOAD.match(line) for line in block):
        return first, None
    try:
        value = yaml.safe_load("\n".join(block))
    except yaml.YAMLError:
        return first, None
    if not isinstance(value, dict):
        return first, None
    return end, json.dumps(value, separators=(",", ":"), default=_iso)


def _iso(value: object) -> str:
    """YAML's own timestamps (unquoted) as RFC 3339 text."""
    return value.isoformat() if isinstance(value, date) else str(value)


def _block_end(raw: list[str], start: int) -> int | None:
    """The line where the JSON value opened at ``start`` closes (strings skipped)."""
    depth = 0
    quoted = escaped = False
    for j in range(start, min(len(raw), start + _MAX_BLOCK)):
        for ch in raw[j]:
            if quoted:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    quoted = False
            elif ch == '"':
                quoted = True
            elif ch in "{[":
                depth += 1
            elif ch in "}]":
                depth -= 1
                if depth == 0:
                    return j
    return None


def _compact(block: list[str]) -> str:
    text = "\n".join(block)
    try:
        return json.dumps(json.loads(text), separators=(",", ":"))
    except ValueError:
        return " ".join(part.strip() for part in block)


def wrapped(frame: pl.DataFrame) -> pl.DataFrame:
    """JSON wrapper lines (not Docker's, which ``lines`` decodes in bulk) replaced by their
    payload, their time as ``pts``; a wrapper inside a wrapper is opened too."""
    line = pl.col("line")
    if not frame.height or not frame.select(line.str.starts_with("{").any()).item():
        return frame  # the common case: one cheap scan
    mask = line.str.contains(_WRAPPER) & ~line.str.contains(_RECORD)
    if not frame.select(mask.any()).item():
        return frame
    if "pts" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, dtype=pl.Float64).alias("pts"))
    hits = frame.filter(mask)
    opened = [_open(text) for text in hits.get_column("line").to_list()]
    decoded = hits.with_columns(
        pl.Series("__l", [o[0] for o in opened], pl.Utf8),
        pl.Series("__t", [o[1] for o in opened], pl.Float64),
    ).with_columns(pl.coalesce("__l", "line").alias("line"), pl.coalesce("__t", "pts").alias("pts"))
    rest = frame.filter(~mask)
    return pl.concat([decoded.drop("__l", "__t"), rest], how="diagonal_relaxed").sort("idx")


def _open(text: str) -> tuple[str | None, float | None]:
    """(payload, time) of one wrapper line; (None, None) when it is none."""
    try:
        value: Any = json.loads(text)
    except ValueError:
        return None, None
    when: float | None = None
    for _ in range(3):  # a shipper's record around a runtime's record around the line
        if not isinstance(value, dict):
            break
        when = when if when is not None else _time(value)
        payload = next((value[k] for k in _PAYLOAD_KEYS if isinstance(value.get(k), str)), None)
        if payload is None and isinstance(value.get("jsonPayload"), dict):
            inner = value["jsonPayload"]
            payload = next((inner[k] for k in _PAYLOAD_KEYS if isinstance(inner.get(k), str)), None)
            if payload is None:
                return json.dumps(inner, separators=(",", ":")), when
        if payload is None:
            return None, None
        text = payload.rstrip("\r\n")
        if not text.lstrip().startswith("{"):
            return text, when
        try:
            value = json.loads(text)
        except ValueError:
            return text, when
        if (
            not isinstance(value, dict)
            or not value.keys() & {*_PAYLOAD_KEYS, "jsonPayload"}
            or re.search(_RECORD, text)
        ):
            return text, when
    return None, None


def _time(record: dict[str, Any]) -> float | None:
    for key in _TIME_KEYS:
        value = record.get(key)
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, int | float):
            # Unix seconds (fluent-bit ``date``) or milliseconds (CloudWatch ``timestamp``)
            return float(value) / 1000.0 if value > 1e11 else float(value)
        if isinstance(value, str) and (seconds := rfc3339(value)) is not None:
            return seconds
    return None


def document_lines(docs: Iterable[Any]) -> str | None:
    """Log records held in JSON documents (a pretty-printed record, an array of records,
    CloudWatch's ``{"events": […]}``) as one compact JSON line each, for the line reader;
    None when no document holds a record."""
    found: list[str] = []
    for doc in docs:
        items = doc.get("events") if isinstance(doc, dict) and "events" in doc else doc
        for item in items if isinstance(items, list) else [items]:
            if isinstance(item, dict) and item.keys() & _LOG_KEYS:
                found.append(json.dumps(item, separators=(",", ":")))
    return "\n".join(found) if found else None


def partial_lines(frame: pl.DataFrame, pattern: str, prefix: str) -> pl.DataFrame:
    """CRI ``P`` pieces (lines matching ``pattern``) joined with the pieces that follow
    up to the ``F`` one; the joined line keeps the first piece's prefix."""
    line = pl.col("line")
    piece = line.str.contains(pattern)
    if not frame.height or not frame.select(piece.any()).item():
        return frame
    start = ~piece.shift(1).fill_null(False)
    return (
        frame.with_columns(start.alias("__s"))
        .with_columns(
            pl.col("__s").cum_sum().alias("__g"),
            pl.when(pl.col("__s")).then(line).otherwise(line.str.replace(prefix, "")),
        )
        .group_by("__g", maintain_order=True)
        .agg(pl.col("idx").first(), pl.col("line").str.join(""))
        .drop("__g")
    )
