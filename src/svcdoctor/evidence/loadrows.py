"""Load generators' per-request output with real times (k6 ``--out json`` points,
``vegeta encode`` JSON lines, curl loops whose every line carries a date) as request rows,
and the words of the errors they print (shared with ``loadgen.py``'s summaries)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import polars as pl

from svcdoctor.evidence.requests import conform, empty, text_seconds
from svcdoctor.model import Outcome

# ---------------------------------------------------------------- the words of an error

# Go's net errors as hey, vegeta, k6 and fortio print them ("dial tcp …: connect: connection
# refused", "read: connection reset by peer", "EOF"), curl's (`man curl`, EXIT CODES: 7 could
# not connect, 28 timeout, 52 empty reply, 56 failure receiving) and Rust hyper's (oha).
_WORDS = (
    (re.compile(r"aborted due to deadline", re.I), Outcome.ABORTED),  # oha -z: cut at the end
    (re.compile(r"connection refused|ECONNREFUSED|actively refused", re.I), Outcome.REFUSED),
    (
        re.compile(r"connection reset|ECONNRESET|reset by peer|broken pipe|EPIPE", re.I),
        Outcome.RESET,
    ),
    (re.compile(r"timed? ?out|timeout|deadline exceeded|ETIMEDOUT", re.I), Outcome.TIMEOUT),
    (
        re.compile(
            r"\bEOF\b|empty reply|closed before|server closed|transport closed|"
            r"connection closed|closed connection|broken connection|unexpected end",
            re.I,
        ),
        Outcome.EOF,
    ),
)


def outcome_of(text: str) -> Outcome:
    """The outcome an error text names; ``error`` when it names none of them."""
    for pattern, outcome in _WORDS:
        if pattern.search(text):
            return outcome
    return Outcome.ERROR


def status_outcome(status: int) -> Outcome | None:
    """5xx is a failure of the Service (``http_error``); other answers are not."""
    return Outcome.HTTP_ERROR if 500 <= status <= 599 else None


# ---------------------------------------------------------------- per-request shapes

# k6 `--out json` (grafana.com/docs/k6/latest/results-output/real-time/json/): Point lines
# with data.time (RFC 3339 with offset), data.value (ms for http_req_duration) and tags
# status, error, error_code; k6's codes (grafana/k6 lib/netext/httpext/error_codes.go)
_K6_CODES = {
    1050: Outcome.TIMEOUT,  # requestTimeoutErrorCode
    1201: Outcome.RESET,  # tcpBrokenPipeErrorCode
    1211: Outcome.TIMEOUT,  # tcpDialTimeoutErrorCode
    1212: Outcome.REFUSED,  # tcpDialRefusedErrorCode
    1220: Outcome.RESET,  # tcpResetByPeerErrorCode
}


def k6_points(text: str, name: str) -> tuple[pl.DataFrame, list[str]]:
    rows: dict[str, list[dict[str, Any]]] = {"http_req_duration": [], "http_reqs": []}
    bad = 0
    for line in text.splitlines():
        if '"type":"Point"' not in line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            bad += 1
            continue
        metric = rec.get("metric")
        if metric not in rows:
            continue
        data = rec.get("data") or {}
        tags = data.get("tags") or {}
        status = _int(tags.get("status"))
        code = _int(tags.get("error_code"))
        error = str(tags.get("error") or "")
        if status:
            outcome = status_outcome(status) or Outcome.OK
        elif code in _K6_CODES:
            outcome = _K6_CODES[code]
        else:
            outcome = outcome_of(error) if error else Outcome.ERROR
        rows[metric].append(
            {
                "__t": str(data.get("time") or ""),
                "outcome": outcome.value,
                "status": status or None,
                "latency_ms": float(data.get("value") or 0.0)
                if metric == "http_req_duration"
                else None,
                "upstream": None,
                "detail": error or (f"k6 error_code {code}" if code else None),
            }
        )
    chosen = rows["http_req_duration"] or rows["http_reqs"]  # one point per request
    notes = [f"{bad} lines are not JSON, skipped"] if bad else []
    return _frame(chosen, name), notes


def vegeta_results(text: str, name: str) -> tuple[pl.DataFrame, list[str]]:
    """`vegeta encode` JSON lines (tsenart/vegeta README, "encode"): timestamp (RFC 3339),
    code (0: no response), latency (ns), error."""
    rows = []
    bad = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if not isinstance(rec, dict) or "timestamp" not in rec:
            bad += 1
            continue
        code = _int(rec.get("code")) or 0
        error = str(rec.get("error") or "")
        if code:
            outcome = status_outcome(code) or Outcome.OK
        else:
            outcome = outcome_of(error) if error else Outcome.ERROR
        latency = rec.get("latency")
        rows.append(
            {
                "__t": str(rec["timestamp"]),
                "outcome": outcome.value,
                "status": code or None,
                "latency_ms": float(latency) / 1e6 if isinstance(latency, int | float) else None,
                "upstream": None,
                "detail": error or None,
            }
        )
    notes = [f"{bad} lines are not vegeta results, skipped"] if bad else []
    return _frame(rows, name), notes


def _frame(rows: list[dict[str, Any]], name: str) -> pl.DataFrame:
    if not rows:
        return empty()
    frame = pl.DataFrame(
        rows,
        schema={
            "__t": pl.Utf8,
            "outcome": pl.Utf8,
            "status": pl.Int64,
            "latency_ms": pl.Float64,
            "upstream": pl.Utf8,
            "detail": pl.Utf8,
        },
    )
    frame = frame.with_columns(text_seconds(pl.col("__t")).alias("ts")).filter(
        pl.col("ts").is_not_null()
    )
    return conform(frame.drop("__t").lazy(), name).collect()


# ---------------------------------------------------------------- curl loops

# a curl loop's lines: `curl -s -o /dev/null -w "%{http_code}\n"` prints the status (000 when
# no response came), `-w "HTTP %{http_code}"` likewise, -S adds curl's error on stderr first
# ("curl: (7) Failed to connect … Connection refused", "curl: (56) Recv failure: Connection
# reset by peer", "curl: (52) Empty reply from server": `man curl`, EXIT CODES); a leading
# date when the loop prints one (`date -u +%FT%TZ`, `date`).
_CURL_DATE = (
    r"(?P<ts>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d| ?UTC)?"
    r"|\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d (?:UTC|GMT) \d{4}"
    r"|\d\d:\d\d:\d\d(?:\.\d+)?)"
)
_CURL_LINE = re.compile(
    rf"^\s*(?:\[?{_CURL_DATE}\]?[\s,:|-]+)?"
    r"(?:HTTP(?:/[\d.]+)?[\s:=]*(?P<code>\d{3})\b.*|(?P<bare>\d{3})(?:\s+[\d.]+s?)*"
    r"|curl: \((?P<exit>\d+)\) (?P<msg>.*))\s*$"
)


def curl_share(text: str) -> bool:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    hits = sum(1 for ln in lines if _CURL_LINE.match(ln))
    errors = sum(1 for ln in lines if "curl: (" in ln)
    return bool(lines) and hits >= 0.6 * len(lines) and (hits >= 3 or errors >= 1)


def curl_requests(text: str) -> list[tuple[str | None, int | None, str]]:
    """A curl loop's requests: (the line's date text, status, curl's error); an error line
    followed by its ``000`` is one request."""
    requests: list[tuple[str | None, int | None, str]] = []
    pending: tuple[str | None, str] | None = None  # an error line waiting for its 000
    for line in text.splitlines():
        m = _CURL_LINE.match(line)
        if m is None:
            continue
        code = m["code"] or m["bare"]
        if m["exit"]:
            if pending is not None:
                requests.append((pending[0], None, pending[1]))
            pending = (m["ts"], f"curl: ({m['exit']}) {m['msg']}")
            continue
        status = int(code) if code else None
        if pending is not None and status == 0:
            requests.append((m["ts"] or pending[0], 0, pending[1]))  # one request, two lines
        else:
            if pending is not None:
                requests.append((pending[0], None, pending[1]))
            requests.append((m["ts"], status, ""))
        pending = None
    if pending is not None:
        requests.append((pending[0], None, pending[1]))
    return requests


def curl_rows(
    requests: list[tuple[str | None, int | None, str]], name: str, zone: float | None
) -> tuple[pl.DataFrame | None, list[str], int]:
    """Request rows when every request carries a date (``None`` otherwise), the notes, and
    how many carry one."""
    stamps = [_curl_time(ts, zone) for ts, _, _ in requests]
    timed = sum(1 for s in stamps if s is not None)
    if timed < len(requests):
        return None, [], timed
    rows = [
        {
            "ts": s,
            "outcome": curl_outcome(status, err).value,
            "status": status or None,
            "detail": err or None,
        }
        for s, (_, status, err) in zip(stamps, requests, strict=True)
    ]
    frame = pl.DataFrame(
        rows,
        schema={"ts": pl.Float64, "outcome": pl.Utf8, "status": pl.Int64, "detail": pl.Utf8},
    )
    zoneless = any(ts and not re.search(r"Z|[+-]\d\d:?\d\d$|UTC|GMT", ts) for ts, _, _ in requests)
    notes = (
        ["times carry no UTC offset: read as UTC" + (" (--tz)" if zone else "")] if zoneless else []
    )
    return conform(frame.lazy(), name).collect(), notes, timed


def curl_outcome(status: int | None, error: str) -> Outcome:
    if status:
        return status_outcome(status) or Outcome.OK
    if error.startswith("curl: (52)"):
        return Outcome.EOF  # CURLE_GOT_NOTHING: the server closed without a reply
    return outcome_of(error) if error else Outcome.ERROR


def _curl_time(ts: str | None, zone: float | None) -> float | None:
    """Unix seconds of a curl line's date; ``None`` without one or with a time of day only."""
    if not ts or re.fullmatch(r"\d\d:\d\d:\d\d(?:\.\d+)?", ts):
        return None
    text = ts.replace(",", ".").replace(" UTC", "Z")
    for fmt in ("%a %b %d %H:%M:%S %Z %Y",):
        try:
            return datetime.strptime(" ".join(ts.split()), fmt).replace(tzinfo=UTC).timestamp()
        except ValueError:
            pass
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        return when.replace(tzinfo=UTC).timestamp() - (zone or 0.0)
    return when.timestamp()


# ---------------------------------------------------------------- helpers


def when(value: Any) -> float | None:
    """RFC 3339 text (nanoseconds allowed) → Unix seconds."""
    if not isinstance(value, str) or not value:
        return None
    m = re.match(r"^(.*?T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", value)
    if m is None:
        return None
    base = datetime.fromisoformat(m[1] + m[3].replace("Z", "+00:00"))
    return base.timestamp() + (float("0." + m[2]) if m[2] else 0.0)


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
