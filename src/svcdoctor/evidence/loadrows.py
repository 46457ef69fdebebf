"""Load generators' per-request output with real times (k6 ``--out json`` points,
``vegeta encode`` JSON lines, curl loops whose every line carries a date) as request rows,
and the words of the errors they print (shared with ``loadgen.py``'s summaries)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import polars as pl

from svcdoctor.evidence.requests import conform, empty, text_seconds
from svcdoctor.evidence.times import offset_text
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


def words_outcome(text: pl.Expr) -> pl.Expr:
    """:func:`outcome_of` over a column (polars regex, vectorised); ``error`` for null."""
    expr: Any = pl
    for pattern, outcome in _WORDS:
        expr = expr.when(text.str.contains("(?i)" + pattern.pattern)).then(pl.lit(outcome.value))
    result: pl.Expr = expr.otherwise(pl.lit(Outcome.ERROR.value))
    return result


def _answer_outcome(status: pl.Expr, otherwise: pl.Expr) -> pl.Expr:
    """5xx → ``http_error``, another status → ``ok``, no status (0) → ``otherwise``."""
    return (
        pl.when(status.is_between(500, 599))
        .then(pl.lit(Outcome.HTTP_ERROR.value))
        .when(status > 0)
        .then(pl.lit(Outcome.OK.value))
        .otherwise(otherwise)
    )


def _json_lines(text: str) -> pl.DataFrame:
    return pl.Series("line", text.splitlines(), dtype=pl.Utf8).to_frame()


def _field(key: str, value: str = r'"((?:[^"\\]|\\.)*)"') -> pl.Expr:
    """A key's value in machine-written JSON lines, by regex: polars' JSON path costs ten
    times as much, and these writers never nest the keys read here (a string by default)."""
    return pl.col("line").str.extract(f'"{key}":{value}', 1)


_NUMBER = r"(-?[\d.]+(?:[eE][-+]?\d+)?)"


def k6_points(text: str, name: str) -> tuple[pl.DataFrame, list[str]]:
    """One row per ``http_req_duration`` point (one per request; ``http_reqs`` points when
    the output holds no durations), vectorised: k6 writes millions of lines."""
    lines = _json_lines(text).filter(pl.col("line").str.contains('"type":"Point"', literal=True))
    metric = "http_req_duration"
    chosen = lines.filter(pl.col("line").str.contains(f'"metric":"{metric}"', literal=True))
    if not chosen.height:
        metric = "http_reqs"
        chosen = lines.filter(pl.col("line").str.contains(f'"metric":"{metric}"', literal=True))
    code = _field("error_code").cast(pl.Int64, strict=False)
    error = _field("error")
    by_code: Any = pl
    for number, outcome in _K6_CODES.items():
        by_code = by_code.when(code == number).then(pl.lit(outcome.value))
    status = _field("status").cast(pl.Int64, strict=False).fill_null(0)
    value = _field("value", _NUMBER).cast(pl.Float64, strict=False)
    frame = chosen.select(
        _field("time").alias("__t"),
        _answer_outcome(status, by_code.otherwise(words_outcome(error))).alias("outcome"),
        pl.when(status > 0).then(status).alias("status"),
        (value if metric == "http_req_duration" else pl.lit(None, pl.Float64)).alias("latency_ms"),
        pl.coalesce(error, pl.lit("k6 error_code ") + code.cast(pl.Utf8)).alias("detail"),
    )
    return _frame(frame, name), []


def vegeta_results(text: str, name: str) -> tuple[pl.DataFrame, list[str]]:
    """`vegeta encode` JSON lines (tsenart/vegeta README, "encode"): timestamp (RFC 3339),
    code (0: no response), latency (ns), error; vectorised."""
    lines = _json_lines(text).filter(pl.col("line").str.strip_chars() != "")
    status = _field("code", _NUMBER).cast(pl.Int64, strict=False).fill_null(0)
    error = _field("error").replace("", None).str.replace_all(r'\\"', '"')
    frame = lines.select(
        _field("timestamp").alias("__t"),
        _answer_outcome(status, words_outcome(error)).alias("outcome"),
        pl.when(status > 0).then(status).alias("status"),
        (_field("latency", _NUMBER).cast(pl.Float64, strict=False) / 1e6).alias("latency_ms"),
        error.alias("detail"),
    )
    bad = int(frame.get_column("__t").is_null().sum())
    return _frame(frame, name), [f"{bad} lines are not vegeta results, skipped"] if bad else []


def _frame(frame: pl.DataFrame, name: str) -> pl.DataFrame:
    if not frame.height:
        return empty()
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
        [
            "times carry no UTC offset: "
            + (f"read at {offset_text(zone)} (--tz)" if zone else "read as UTC (pass --tz ±HH:MM)")
        ]
        if zoneless
        else []
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
