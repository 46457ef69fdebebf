"""What load generators print, told by content and read without inventing a time.

End-of-run reports (hey, oha, wrk, k6, vegeta, fortio; a curl loop without dates) become a
:class:`LoadSummary`: counts, outcomes, status histogram, connection counts. Per-request
output with real times (k6 ``--out json`` points, ``vegeta encode`` JSON lines, curl lines
each led by a date) becomes request rows (``loadrows.py``). hey's ``-o csv`` rows carry
offsets from a start hey never prints, so they are counted as a summary. Each shape is
cited where it is read.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polars as pl

from svcdoctor.evidence import lines
from svcdoctor.evidence.loadrows import (
    curl_outcome,
    curl_requests,
    curl_rows,
    curl_share,
    k6_points,
    outcome_of,
    status_outcome,
    vegeta_results,
    when,
)
from svcdoctor.evidence.requests import empty
from svcdoctor.model import LoadError, LoadSummary, Outcome, SourceSummary

# the shapes whose rows are a client's own requests (reader.py: a proxy log of the same
# time is the same requests seen from the other side)
ROW_SHAPES = ("k6-json", "vegeta-json", "curl")

# ---------------------------------------------------------------- detection

_HEY_CSV = re.compile(r"^response-time,DNS\+dialup,DNS,Request-write,Response-delay")
_K6_LINE = re.compile(r'^\{"type":"(?:Metric|Point)".*"metric":"')
_WRK = re.compile(r"^\s*Socket errors: connect \d+|^\s*\d+ requests in [\d.]+\w+, ", re.M)
_VEGETA = re.compile(r"^(?:Requests\s+\[total, rate|Status Codes\s+\[code:count\])", re.M)
_K6 = re.compile(r"^\s*(?:http_reqs|http_req_failed)\.{2,}:", re.M)
_FORTIO = re.compile(
    r"^(?:.*\s)?(?:Sockets used: \d+ \(for perfect keepalive|Code -?\d+ : \d+ \()", re.M
)
_DISTRIBUTION = re.compile(r"^Status code distribution:|^Error distribution:", re.M)
_OHA = re.compile(r"^\s*(?:Success rate:|Size/sec:)|^Response time distribution:", re.M)
_HEY = re.compile(r"^Summary:\s*$", re.M)
# the end-of-run reports one pattern tells, tried in this order
_REPORTS = (("vegeta", _VEGETA), ("wrk", _WRK), ("k6", _K6), ("fortio", _FORTIO))


def detect(text: str) -> str | None:
    """The load generator's shape of ``text`` (a file's start), or ``None``."""
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if _HEY_CSV.match(first):
        return "hey-csv"
    if first.startswith("{"):
        return _json_shape(text, first)
    report = next((name for name, pattern in _REPORTS if pattern.search(text)), None)
    if report is not None:
        return report
    if _DISTRIBUTION.search(text):
        return "oha" if _OHA.search(text) else "hey"
    if _HEY.search(text) and "Requests/sec:" in text:
        return "hey"
    return "curl" if curl_share(text) else None


def _json_shape(text: str, first: str) -> str | None:
    if _K6_LINE.match(first):
        return "k6-json"
    try:
        record = json.loads(first)
    except ValueError:
        try:
            record = json.loads(text)
        except ValueError:
            record = _first_document(text)
    if not isinstance(record, dict):
        return None
    keys = record.keys()
    if {"code", "timestamp", "latency"} <= keys:
        return "vegeta-json"
    if {"latencies", "status_codes", "requests"} <= keys:
        return "vegeta-report-json"
    if {"summary", "statusCodeDistribution"} <= keys:
        return "oha-json"
    if {"RetCodes", "DurationHistogram"} <= keys:
        return "fortio-json"
    return None


def _first_document(text: str) -> Any:
    """The first JSON document of a (possibly truncated) pretty-printed file: enough keys to
    tell the tool, from its top-level keys before the first nested object closes."""
    keys = re.findall(r'^\s{0,4}"([A-Za-z_][\w]*)"\s*:', text[:65536], re.M)
    return dict.fromkeys(keys, None)


# ---------------------------------------------------------------- reading


def read(
    text: str, name: str, shape: str, zone: float | None = None
) -> tuple[list[LoadSummary], pl.DataFrame, list[str]]:
    """The summaries, the request rows and the notes of one file in ``shape``."""
    if shape == "k6-json":
        return [], *k6_points(text, name)
    if shape == "vegeta-json":
        return [], *vegeta_results(text, name)
    if shape == "curl":
        return _curl(text, name, zone)
    readers = {
        "hey": _hey,
        "oha": _hey,
        "wrk": _wrk,
        "k6": _k6,
        "vegeta": _vegeta,
        "fortio": _fortio,
        "hey-csv": _hey_csv,
        "vegeta-report-json": _vegeta_report,
        "oha-json": _oha_json,
        "fortio-json": _fortio_json,
    }
    tool = shape.removesuffix("-json").removesuffix("-report").removesuffix("-csv")
    found = readers[shape](text, name, tool)
    if not found:
        return [], empty(), [f"{shape}: no request counts found"]
    return found, empty(), []


@dataclass(frozen=True, slots=True)
class LoadRead:
    """What one file of a load generator's output gave: summaries, rows, and the lines the
    reader adds to the sources and problems."""

    shape: str
    summaries: tuple[LoadSummary, ...]
    frames: tuple[pl.DataFrame, ...] = ()  # request rows (one frame), when times are real
    note: str = ""
    sources: tuple[SourceSummary, ...] = ()
    problems: tuple[str, ...] = ()
    mixed: bool = False  # the text holds other evidence lines too (a mixed paste)


def read_file(path: Path, head: bytes, name: str, zone: float | None) -> LoadRead | None:
    """The file read as a load generator's output, or ``None`` when it is none."""
    shape = detect(head.decode("utf-8-sig", errors="replace"))
    if shape is None:
        return None
    text = path.read_text("utf-8-sig", errors="replace")
    try:
        summaries, rows, notes = read(text, name, shape, zone)
    except (ValueError, TypeError, AttributeError, pl.exceptions.PolarsError) as exc:
        return LoadRead(shape, (), problems=(f"{name}: {shape}: {str(exc).splitlines()[0]}",))
    note = "; ".join(notes)
    if rows.height:
        return LoadRead(shape, tuple(summaries), (rows,), note)
    if summaries:
        return LoadRead(
            shape,
            tuple(summaries),
            sources=(source(summaries, name, shape),),
            mixed=shape in _TEXT_REPORTS and _other_evidence(text),
        )
    return LoadRead(shape, (), problems=(f"{name}: {shape}: {note or 'no requests read'}",))


_TEXT_REPORTS = frozenset({"hey", "oha", "wrk", "k6", "vegeta", "fortio"})


def _other_evidence(text: str) -> bool:
    """Whether a text report was pasted with log lines of an evidence shape (lines.py)."""
    shapes = lines.classify(lines.split(text)).get_column("shape")
    return bool(shapes.is_in([*lines.EVIDENCE_SHAPES, "kernel"]).any())


def source(summaries: list[LoadSummary], name: str, shape: str) -> SourceSummary:
    """What a file of load generators' summaries contributed: requests counted, no rows."""
    starts = [s.start for s in summaries if s.start is not None]
    ends = [s.end for s in summaries if s.end is not None]
    runs = f"{len(summaries)} runs; " if len(summaries) > 1 else ""
    return SourceSummary(
        name,
        shape,
        sum(s.requests for s in summaries),
        min(starts, default=None),
        max(ends, default=None),
        note=f"{runs}a summary: counts without request times",
    )


def _summary(
    tool: str,
    name: str,
    statuses: dict[int, int],
    errors: Iterable[LoadError],
    requests: int | None = None,
    extra: dict[Outcome, int] | None = None,
    **kw: Any,
) -> LoadSummary:
    """A summary from the status histogram and the error counts: 5xx and every error but
    an abort are failures; the requests are the responses and the errors unless the tool
    states them."""
    errs = tuple(errors)
    failures: Counter[Outcome] = Counter()
    for status, count in statuses.items():
        if (outcome := status_outcome(status)) is not None:
            failures[outcome] += count
    aborted = 0
    for e in errs:
        if e.outcome is Outcome.ABORTED:
            aborted += e.count
        else:
            failures[e.outcome] += e.count
    for outcome, count in (extra or {}).items():
        failures[outcome] += count
    if requests is None:
        requests = sum(n for s, n in statuses.items() if s > 0) + sum(
            e.count for e in errs if e.outcome is not Outcome.ABORTED
        )
    note = kw.pop("note", "")
    if aborted:
        note = "; ".join(
            x for x in (note, f"{aborted} requests cut by the run's deadline: not counted") if x
        )
    return LoadSummary(
        tool=tool,
        source=name,
        requests=requests,
        failures=tuple(sorted(((o, n) for o, n in failures.items() if n), key=lambda x: x[0])),
        statuses=tuple(sorted((s, n) for s, n in statuses.items() if n)),
        errors=errs,
        note=note,
        **kw,
    )


def _blocks(text: str, start: re.Pattern[str]) -> list[str]:
    """The text split before each line ``start`` matches (several runs pasted together)."""
    cuts = [m.start() for m in start.finditer(text)]
    if len(cuts) < 2:
        return [text]
    return [text[a:b] for a, b in zip(cuts, [*cuts[1:], len(text)], strict=True)]


# hey and oha print the same two sections (rakyll/hey requester/print.go, hatoo/oha
# src/printer.rs): "  [200]\t250 responses" and "  [8989]\terror sending request …"
_STATUS_ROW = re.compile(r"^\s*\[(\d+)\]\s+(\d+) responses?\s*$")
_ERROR_ROW = re.compile(r"^\s*\[(\d+)\]\s+(.+?)\s*$")
_TOTAL = re.compile(r"^\s*Total:\s+([\d.]+) secs?", re.M)


def _hey(text: str, name: str, tool: str) -> list[LoadSummary]:
    out = []
    for block in _blocks(text, _HEY):
        statuses: dict[int, int] = {}
        errors: list[LoadError] = []
        section = ""
        for line in block.splitlines():
            if line.startswith("Status code distribution"):
                section = "status"
            elif line.startswith("Error distribution"):
                section = "error"
            elif section == "status" and (m := _STATUS_ROW.match(line)):
                statuses[int(m[1])] = statuses.get(int(m[1]), 0) + int(m[2])
            elif section == "error" and (m := _ERROR_ROW.match(line)):
                errors.append(LoadError(m[2], int(m[1]), outcome_of(m[2])))
            elif line.strip() and not line.startswith((" ", "\t")):
                section = ""
        if not statuses and not errors:
            continue
        total = _TOTAL.search(block)
        out.append(
            _summary(
                tool,
                name,
                statuses,
                errors,
                duration_seconds=float(total[1]) if total else None,
                # hey and oha keep connections alive unless -disable-keepalive /
                # --disable-keepalive (their READMEs' usage)
                keepalive=True,
                note="connections kept alive unless the run disabled keep-alive",
            )
        )
    return out


# wrk's own lines (wg/wrk src/wrk.c print_stats_header/main): "  2606 requests in 10.07s,
# 2.96MB read", "  Socket errors: connect 0, read 3268, write 0, timeout 48",
# "  Non-2xx or 3xx responses: 735", "  4 threads and 5000 connections"
_WRK_DONE = re.compile(r"^\s*(\d+) requests in ([\d.]+)(us|ms|s|m|h),", re.M)
_WRK_SOCKET = re.compile(
    r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", re.M
)
_WRK_NON2XX = re.compile(r"Non-2xx or 3xx responses: (\d+)")
_WRK_CONNS = re.compile(r"(\d+) threads and (\d+) connections")
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def _wrk(text: str, name: str, tool: str) -> list[LoadSummary]:
    out = []
    for block in _blocks(text, re.compile(r"^Running ", re.M)):
        done = _WRK_DONE.search(block)
        if done is None:
            continue
        completed = int(done[1])
        connect = read_ = write = timeout = 0
        if sock := _WRK_SOCKET.search(block):
            connect, read_, write, timeout = (int(x) for x in sock.groups())
        non2xx = int(m[1]) if (m := _WRK_NON2XX.search(block)) else 0
        conns = _WRK_CONNS.search(block)
        # a connect error is a failed connect() (refused, mostly); read and write errors
        # end a request on an open connection (reset or closed); a timeout is a request
        # unanswered after --timeout (2 s by default: wg/wrk#177, the author's answer)
        errors = [
            LoadError("socket errors: connect", connect, Outcome.REFUSED),
            LoadError("socket errors: read", read_, Outcome.RESET),
            LoadError("socket errors: write", write, Outcome.RESET),
            LoadError("socket errors: timeout", timeout, Outcome.TIMEOUT),
            LoadError("non-2xx or 3xx responses (4xx or 5xx)", non2xx, Outcome.HTTP_ERROR),
        ]
        out.append(
            _summary(
                tool,
                name,
                {},
                [e for e in errors if e.count],
                requests=completed + connect + read_ + write + timeout,
                duration_seconds=float(done[2]) * _UNITS[done[3]],
                connections=int(conns[2]) if conns else None,
                keepalive=True,  # wrk sends HTTP/1.1 requests on persistent connections
                note="wrk counts 4xx with 5xx as non-2xx or 3xx; connect errors read as refused",
            )
        )
    return out


# k6's end-of-test summary (grafana.com/docs/k6/latest/results-output/end-of-test/):
# "http_req_failed................: 0.00%  0 out of 45" (v1) or "0.00% ✓ 0 ✗ 180" (legacy:
# ✓ counts the failed requests, grafana/k6-docs#1185), "http_reqs......: 45 6.56/s",
# checks likewise; and k6's warnings "Request Failed  error=\"Get …: connection reset …\""
_K6_REQS = re.compile(r"^\s*http_reqs\.*:\s*(\d+)", re.M)
_K6_FAILED = re.compile(
    r"^\s*http_req_failed\.*:\s*[\d.]+%\s+(?:(\d+) out of (\d+)|✓\s*(\d+)\s+✗\s*(\d+))", re.M
)
_K6_CHECKS = re.compile(
    r"^\s*checks(?:_succeeded)?\.*:\s*[\d.]+%\s+(?:(\d+) out of (\d+)|✓\s*(\d+)\s+✗\s*(\d+))",
    re.M,
)
_K6_WARN = re.compile(r'Request Failed.*?error="((?:[^"\\]|\\.)*)"')


def _k6(text: str, name: str, tool: str) -> list[LoadSummary]:
    reqs = _K6_REQS.search(text)
    failed = _K6_FAILED.search(text)
    if reqs is None and failed is None:
        return []
    if failed is not None and failed[1] is not None:
        k, total = int(failed[1]), int(failed[2])
    elif failed is not None:
        k, total = int(failed[3]), int(failed[3]) + int(failed[4])
    else:
        k, total = 0, 0
    requests = int(reqs[1]) if reqs else total
    warned = Counter(outcome_of(m[1].replace('\\"', '"')) for m in _K6_WARN.finditer(text))
    texts = Counter(m[1].replace('\\"', '"') for m in _K6_WARN.finditer(text))
    errors = [LoadError(t, n, outcome_of(t)) for t, n in texts.most_common(10)]
    named = sum(warned.values())
    extra: dict[Outcome, int] = {}
    if named <= k:
        extra = dict(warned)
        if k - named:
            extra[Outcome.ERROR] = k - named  # status >= 400 or an error k6 did not log here
    else:
        extra = {Outcome.ERROR: k}
    checks = _K6_CHECKS.search(text)
    note = "k6 fails a request on a network error or status >= 400 by default"
    if checks is not None:
        ok, all_ = (
            (int(checks[1]), int(checks[2]))
            if checks[1] is not None
            else (int(checks[3]), int(checks[3]) + int(checks[4]))
        )
        note += f"; checks: {ok} of {all_} passed"
    return [
        LoadSummary(
            tool=tool,
            source=name,
            requests=requests,
            failures=tuple(sorted(((o, n) for o, n in extra.items() if n), key=lambda x: x[0])),
            errors=tuple(errors),
            keepalive=True,  # k6 reuses connections unless noConnectionReuse is set
            note=note,
        )
    ]


# `vegeta report` text (tsenart/vegeta README, "report -type=text"): "Requests [total,
# rate] 1200, 120.00", "Status Codes [code:count] 0:535 200:665", "Error Set:" then one
# distinct error a line, without counts; code 0 is a request that got no response
# (tsenart/vegeta#283, the author's answer)
_VEG_REQ = re.compile(r"^Requests\s+\[total[^\]]*\]\s+(\d+)", re.M)
_VEG_CODES = re.compile(r"^Status Codes\s+\[code:count\]\s+(.*)$", re.M)
_VEG_START = re.compile(r"^Requests\s+\[total", re.M)


def _vegeta(text: str, name: str, tool: str) -> list[LoadSummary]:
    out = []
    for block in _blocks(text, _VEG_START):
        req = _VEG_REQ.search(block)
        codes = _VEG_CODES.search(block)
        if req is None and codes is None:
            continue
        statuses = (
            {int(c): int(n) for c, n in re.findall(r"(\d+):(\d+)", codes[1])} if codes else {}
        )
        texts = _error_set(block)
        out.append(_vegeta_summary(tool, name, statuses, texts, int(req[1]) if req else None))
    return out


def _error_set(block: str) -> list[str]:
    lines = block.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Error Set:"):
            rest = []
            for ln in lines[i + 1 :]:
                if not ln.strip() or re.match(r"^(Requests|Duration|Latencies)\s+\[", ln):
                    break
                rest.append(ln.strip())
            return rest
    return []


def _vegeta_summary(
    tool: str,
    name: str,
    statuses: dict[int, int],
    texts: list[str],
    requests: int | None,
    **kw: Any,
) -> LoadSummary:
    """Code 0 requests failed without a response; the Error Set names their kinds but not how
    many each, so they take the one outcome the set names, else ``error`` (mixed)."""
    unanswered = statuses.pop(0, 0)
    kinds = {outcome_of(t) for t in texts} - {Outcome.ABORTED}
    outcome = kinds.pop() if len(kinds) == 1 else Outcome.ERROR
    errors = [LoadError(t, 0, outcome_of(t)) for t in texts[:10]]
    note = "vegeta's Error Set lists distinct errors without counts"
    if len({e.outcome for e in errors}) > 1:
        note += ": the requests without a response are split among " + ", ".join(
            sorted({e.outcome.value for e in errors})
        )
    summary = _summary(
        tool,
        name,
        statuses,
        [],
        requests=requests,
        extra={outcome: unanswered} if unanswered else {},
        keepalive=True,  # vegeta attack -keepalive defaults to true (README, attack flags)
        note=note,
        **kw,
    )
    return replace(
        summary,
        errors=tuple(errors),
        requests=requests if requests is not None else summary.requests + unanswered,
    )


def _vegeta_report(text: str, name: str, tool: str) -> list[LoadSummary]:
    """`vegeta report -type=json` (README): requests, status_codes, errors, and the
    earliest and latest request times, which are real."""
    doc = _json(text)
    if not isinstance(doc, dict):
        return []
    statuses = {int(k): int(v) for k, v in (doc.get("status_codes") or {}).items()}
    texts = [str(e) for e in doc.get("errors") or ()]
    start, end = when(doc.get("earliest")), when(doc.get("latest"))
    return [
        _vegeta_summary(
            tool,
            name,
            statuses,
            texts,
            int(doc.get("requests") or 0),
            start=start,
            end=end,
            duration_seconds=(end - start) if start is not None and end is not None else None,
        )
    ]


# fortio's text (fortio/fortio README; istio.io circuit-breaking task): "Code 200 : 17
# (85.0 %)", "Code -1 : 3 (…)" for requests that got no response (socket errors),
# "Sockets used: 4 (for perfect keepalive, would be 2)", "All done 20 calls (plus 0 warmup)"
_FORTIO_CODE = re.compile(r"Code (-?\d+) : (\d+) \(")
_FORTIO_SOCKETS = re.compile(r"Sockets used: (\d+) \(for perfect keepalive, would be (\d+)\)")
_FORTIO_DONE = re.compile(r"All done (\d+) calls")
_FORTIO_ERROR = re.compile(r"(?:Unable to connect|Read error|Error reading|read error).*$", re.I)


def _fortio(text: str, name: str, tool: str) -> list[LoadSummary]:
    statuses: dict[int, int] = {}
    for code, count in _FORTIO_CODE.findall(text):
        statuses[int(code)] = statuses.get(int(code), 0) + int(count)
    sockets = _FORTIO_SOCKETS.search(text)
    done = _FORTIO_DONE.search(text)
    if not statuses and done is None:
        return []
    logged = Counter(outcome_of(m[0]) for m in _FORTIO_ERROR.finditer(text))
    return [_fortio_summary(tool, name, statuses, logged, done, sockets)]


def _fortio_summary(
    tool: str,
    name: str,
    statuses: dict[int, int],
    logged: Counter[Outcome],
    done: re.Match[str] | int | None,
    sockets: re.Match[str] | tuple[int, int] | None,
    **kw: Any,
) -> LoadSummary:
    errors = statuses.pop(-1, 0)
    outcome = next(iter(logged)) if len(logged) == 1 else Outcome.ERROR
    pair = (int(sockets[1]), int(sockets[2])) if isinstance(sockets, re.Match) else sockets
    requests = int(done[1]) if isinstance(done, re.Match) else done
    return _summary(
        tool,
        name,
        statuses,
        [],
        requests=requests if requests else None,
        extra={outcome: errors} if errors else {},
        sockets=pair[0] if pair else None,
        connections=pair[1] if pair else None,
        keepalive=True,  # fortio keeps connections alive unless -keepalive=false
        note="code -1: no response (a socket error)" if errors else "",
        **kw,
    )


def _fortio_json(text: str, name: str, tool: str) -> list[LoadSummary]:
    """`fortio load -json` (fortio README): RetCodes, DurationHistogram.Count, SocketCount,
    NumThreads, StartTime and ActualDuration (nanoseconds)."""
    doc = _json(text)
    if not isinstance(doc, dict):
        return []
    statuses = {int(k): int(v) for k, v in (doc.get("RetCodes") or {}).items()}
    count = (doc.get("DurationHistogram") or {}).get("Count")
    sockets = doc.get("SocketCount")
    threads = doc.get("NumThreads")
    start = when(doc.get("StartTime"))
    took = doc.get("ActualDuration")
    seconds = float(took) / 1e9 if isinstance(took, int | float) else None
    return [
        _fortio_summary(
            tool,
            name,
            statuses,
            Counter(),
            int(count) if count else None,
            (int(sockets), int(threads)) if sockets and threads else None,
            start=start,
            end=start + seconds if start is not None and seconds is not None else None,
            duration_seconds=seconds,
        )
    ]


def _oha_json(text: str, name: str, tool: str) -> list[LoadSummary]:
    """`oha -j` (hatoo/oha schema.json): statusCodeDistribution, errorDistribution
    (error text → count), summary.total (seconds)."""
    doc = _json(text)
    if not isinstance(doc, dict):
        return []
    statuses = {int(k): int(v) for k, v in (doc.get("statusCodeDistribution") or {}).items()}
    errors = [
        LoadError(str(t), int(n), outcome_of(str(t)))
        for t, n in (doc.get("errorDistribution") or {}).items()
    ]
    total = (doc.get("summary") or {}).get("total")
    return [
        _summary(
            tool,
            name,
            statuses,
            errors,
            duration_seconds=float(total) if isinstance(total, int | float) else None,
            keepalive=True,
            note="connections kept alive unless the run disabled keep-alive",
        )
    ]


def _hey_csv(text: str, name: str, tool: str) -> list[LoadSummary]:
    """`hey -o csv` (rakyll/hey README): one row per answered request; ``offset`` counts from
    a start hey does not print, so no row gets a time, and requests that failed without a
    response are not in it at all."""
    statuses: Counter[int] = Counter()
    longest = 0.0
    for line in text.splitlines()[1:]:
        cells = line.strip().split(",")
        if len(cells) < 8:
            continue
        try:
            statuses[int(cells[6])] += 1
            longest = max(longest, float(cells[7]) + float(cells[0]))
        except ValueError:
            continue
    if not statuses:
        return []
    return [
        _summary(
            "hey",
            name,
            dict(statuses),
            [],
            duration_seconds=round(longest, 3) or None,
            keepalive=True,
            note="hey's CSV: offsets from an unprinted start (no times), and only requests "
            "that got a response (errors are in hey's text summary only)",
        )
    ]


def _curl(
    text: str, name: str, zone: float | None
) -> tuple[list[LoadSummary], pl.DataFrame, list[str]]:
    """A curl loop: rows when every request carries a date, else a summary."""
    requests = curl_requests(text)
    if not requests:
        return [], empty(), []
    rows, notes, timed = curl_rows(requests, name, zone)
    if rows is not None:
        return [], rows, notes
    statuses: Counter[int] = Counter(s for _, s, _ in requests if s)
    errors = Counter(err for _, _, err in requests if err)
    silent = sum(1 for _, s, err in requests if s == 0 and not err)
    items = [LoadError(t, n, curl_outcome(0, t)) for t, n in errors.most_common(10)]
    if silent:
        items.append(LoadError("000 (no response, curl's error not shown)", silent, Outcome.ERROR))
    note = "curl loop without a date on every line: counted, not timed"
    if timed:
        note += f" ({timed} of {len(requests)} lines carry one)"
    summary = _summary("curl", name, dict(statuses), items, requests=len(requests), note=note)
    return [summary], empty(), []


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
