"""Read evidence files and directories, detecting each format by content.

Whole-file formats (kubectl JSON, the canonical CSV/JSON Lines/Parquet request log,
manifests, ``conntrack -S``) are told by the file's start; any other text is read line by
line, each line by its own shape (``lines.py``), so a controller's ``kubectl logs`` output
with its banner, klog, access and error lines interleaved is read whole.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import tempfile
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

import polars as pl

from svcdoctor.errors import SvcdoctorError
from svcdoctor.evidence import (
    envoy_debug,
    kernel,
    lines,
    loadgen,
    proxylogs,
    routing,
    traefik,
    unwrap,
)
from svcdoctor.evidence.kubectl import KubectlEvidence, json_documents, objects, read_kubectl
from svcdoctor.evidence.nginxjoin import Part, nginx_bundle
from svcdoctor.evidence.requests import RequestLogError, empty, read_canonical
from svcdoctor.evidence.times import offset_text, utc_offset
from svcdoctor.manifests import build_inventory, load
from svcdoctor.model import (
    REQUEST_COLUMNS,
    Evidence,
    KernelEvent,
    LifecycleEvent,
    RoutingChange,
    SourceSummary,
)

cloudlb: ModuleType | None
try:  # AWS ALB and GCP load-balancer request logs (evidence/cloudlb.py)
    from svcdoctor.evidence import cloudlb
except ImportError:  # pragma: no cover - only while that module is being written
    cloudlb = None

_HEAD = 64 * 1024
_CONNTRACK_S = kernel.CONNTRACK_S
_YAML_OBJECT = re.compile(r"^(apiVersion|kind):", re.MULTILINE)
_EVIDENCE_KINDS = frozenset({"Event", "Pod", "EndpointSlice"})
# JSON object lines that are log records (read line by line), not Kubernetes documents
_LINE_JSON_KEYS = frozenset(
    {
        *("log", "response_code", "upstream_host", "response_flags", "start_time"),
        *("httpRequest", "http_request", "client.addr", "upstream_addr", "upstream_status"),
    }
)
# the line shapes of request rows, each read by one parser (of the lines and a source name)
_ROW_PARSERS = {
    "envoy": proxylogs.envoy_text_lines,
    "envoy-json": proxylogs.envoy_json_lines,
    "envoy-debug": envoy_debug.envoy_debug_lines,
    "nginx-json": proxylogs.nginx_json_lines,
    "linkerd": proxylogs.linkerd_apache_lines,
    "linkerd-json": proxylogs.linkerd_json_lines,
    "nginx-stream": proxylogs.nginx_stream_lines,
    "traefik": traefik.clf_lines,
    "traefik-json": traefik.json_lines,
}
# (``[   0.0021s]``: linkerd-proxy's own log lines, which start a linkerd-proxy container log)
_LINE_START = re.compile(r"^(?:\[pod/|\[\s*\d+\.\d+s?\]|\[\w{3} \w{3} |\[\d{4}-\d\d-\d\dT)")
# words for the shapes that are not evidence, in the problems line
_NOT_EVIDENCE = lines.NOT_EVIDENCE
_RESOLUTION = {"nginx-access": 1.0, "nginx-error": 1.0, "nginx-stream": 1.0, "traefik": 1.0}


class EvidenceError(SvcdoctorError, ValueError):
    """Nothing usable in the inputs."""


@dataclass(slots=True)
class _Collected:
    parts: list[Part] = field(default_factory=list)
    kube: KubectlEvidence = field(default_factory=KubectlEvidence)
    kernel_lines: list[tuple[str, str, list[tuple[str, float | None]]]] = field(
        default_factory=list
    )  # path, fmt, (line, collector stamp)
    kernel: list[KernelEvent] = field(default_factory=list)
    manifests: list[str] = field(default_factory=list)
    sources: list[SourceSummary] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    loads: list[loadgen.LoadRead] = field(default_factory=list)  # load generators' output
    # lines where a hop says it stopped routing: read once the year is known
    routing_lines: list[tuple[str, list[tuple[str, float | None]]]] = field(default_factory=list)
    routing: list[RoutingChange] = field(default_factory=list)
    zone: float | None = None  # --tz, for times that name no zone


def expand(paths: Sequence[str]) -> tuple[list[Path], list[str]]:
    """Files to read (directories recursively, hidden entries skipped) and missing paths."""
    found: list[Path] = []
    problems: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for top, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found.extend(Path(top) / f for f in sorted(files) if not f.startswith("."))
        elif path.is_file():
            found.append(path)
        else:
            problems.append(f"{raw}: no such file or directory")
    return found, problems


def _whole_format(head: bytes) -> str:
    """The format of a file read whole, or ``lines`` (read line by line, by shape)."""
    if head.startswith(b"PAR1"):
        return "parquet"
    if b"\0" in head[:8192]:
        return "binary"
    text = head.decode("utf-8-sig", errors="replace")
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    stripped = first.strip()
    if stripped.startswith("{"):
        try:
            record = json.loads(stripped)
        except ValueError:
            return "json"  # a document over several lines
        if isinstance(record, dict):
            if {"ts", "outcome"} <= record.keys():
                return "jsonl"
            if record.keys() & _LINE_JSON_KEYS:
                return "lines"
        return "json"
    if stripped.startswith("[") and not _LINE_START.match(stripped):
        return "json"
    columns = [c.strip().strip('"') for c in stripped.split(",")]
    if {"ts", "outcome"} <= set(columns):
        return "csv"
    if _CONNTRACK_S.search(text):
        return "conntrack-stats"
    return "lines"


def detect(head: bytes) -> str:
    """The format of a file from its first bytes (see DESIGN.md, "Evidence formats"): a
    whole-file format, or the evidence shape most of its lines have (``unknown`` when none
    has one). Many lines are sampled, never only the first."""
    whole = _whole_format(head)
    if whole != "lines":
        return whole
    text = head.decode("utf-8-sig", errors="replace")
    shapes = _shapes(lines.split(text))
    counts = shapes.filter(pl.col("shape").is_in([*lines.EVIDENCE_SHAPES, "kernel"]))
    if counts.height:
        return str(counts.get_column("shape").value_counts(sort=True).row(0)[0])
    if _YAML_OBJECT.search(text):
        return "manifest"
    return "unknown"


def _shapes(frame: pl.DataFrame) -> pl.DataFrame:
    alb = cloudlb.ALB_LINE if cloudlb is not None else None
    frame = lines.classify(frame, alb)
    is_json = pl.col("shape") == "json"
    if frame.height and frame.select(is_json.any()).item():
        sub = lines.json_shape(frame.get_column("line"))
        frame = frame.with_columns(
            pl.when(is_json).then(sub).otherwise(pl.col("shape")).alias("shape")
        )
    return frame


def read_evidence(
    paths: Sequence[str],
    clock_offsets: dict[str, float] | None = None,
    tz: str | None = None,
) -> Evidence:
    """Everything usable in ``paths``; ``EvidenceError`` only when nothing is.

    ``tz``: the UTC offset (``+02:00``) of logs that carry none (the nginx error log);
    default: the offset of the ingress-nginx access log of the same bundle, else UTC."""
    zone = None
    if tz is not None:
        zone = utc_offset(tz)
        if zone is None:
            raise EvidenceError(f"--tz {tz!r} is not a UTC offset such as +02:00")
    files, missing = expand(paths)
    got = _Collected(problems=list(missing), zone=zone)
    for path in files:
        _read_one(path, got)
    year = _year(got)
    for name, fmt, kept in got.kernel_lines:
        events, _ = kernel.kernel_lines(kept, name, year, zone or 0.0)
        if any(e.zoneless for e in events):
            got.warnings.append(
                f"{name}: kernel times carry no UTC offset: "
                + (
                    f"read at {offset_text(zone)} (--tz)"
                    if zone
                    else "read as UTC; pass --tz ±HH:MM if the node's clock is on local time"
                )
            )
        got.kernel.extend(events)
        aligned = [e.ts for e in events if e.aligned and e.ts is not None]
        note = kernel.time_note(events)
        rows = sum(1 for e in events if e.kind == "conntrack_full")
        got.sources.append(
            SourceSummary(
                name, fmt, rows, min(aligned, default=None), max(aligned, default=None), note
            )
        )
    _read_routing(got, year, zone)
    nginx_bundle(got.parts, zone)
    for part in got.parts:
        _add_source(got, part)
    offsets = clock_offsets or {}
    _check_offsets(got, offsets)
    evidence = _assemble(got, offsets)
    usable = (
        evidence.requests.height
        or evidence.events
        or evidence.pods
        or evidence.kernel
        or evidence.endpoints
        or evidence.loads
        or evidence.routing
    )
    if not usable and evidence.inventory is None:
        reasons = "; ".join(got.problems) or "no evidence files given"
        raise EvidenceError(f"nothing usable in the inputs ({reasons})")
    return evidence


def _read_one(path: Path, got: _Collected, name: str | None = None) -> None:
    """Read one file (``name``: how to call it, when ``path`` is its decompressed copy)."""
    name = name or str(path)
    try:
        with path.open("rb") as fh:
            head = fh.read(_HEAD)
    except OSError as exc:
        got.problems.append(f"{name}: cannot read ({exc.strerror})")
        return
    if head.startswith(_GZIP) and name == str(path):
        _read_gzip(path, got)
        return
    fmt = _whole_format(head)
    if fmt in ("lines", "json") and (found := loadgen.read_file(path, head, name, got.zone)):
        got.loads.append(found)
        got.sources.extend(found.sources)
        got.problems.extend(found.problems)
        got.parts += [Part(name, found.shape, r, found.note, read=r.height) for r in found.frames]
        if not found.mixed:  # else the log lines pasted with the report are read as well
            return
    try:
        if fmt in ("csv", "jsonl", "parquet"):
            frame, problems, warnings = read_canonical(path, fmt, name)
            got.problems.extend(f"{name}: {p}" for p in problems)
            got.warnings.extend(f"{name}: {w}" for w in warnings)
            got.parts.append(Part(name, fmt, frame, read=frame.height))
        elif fmt == "binary":
            got.problems.append(f"{name}: not a recognised evidence format (binary)")
        elif fmt == "json":
            _read_json(path.read_text(encoding="utf-8-sig", errors="replace"), name, got)
        elif fmt == "conntrack-stats":
            text = path.read_text(encoding="utf-8-sig", errors="replace")
            counters = kernel.conntrack_stats(text, name)
            got.kernel.extend(counters)
            stamps = [e.ts for e in counters if e.ts is not None]
            snapshots = len(counters) // 2
            note = f"{snapshots} snapshots" if snapshots > 1 else ""
            if snapshots > 1 and not stamps:
                note += ": no timestamp lines, so their times are unknown"
            got.sources.append(
                SourceSummary(
                    name,
                    fmt,
                    sum(1 for _ in text.splitlines()),
                    min(stamps, default=None),
                    max(stamps, default=None),
                    note,
                )
            )
        else:
            _read_lines(path.read_text(encoding="utf-8-sig", errors="replace"), name, got)
    except (RequestLogError, ValueError, pl.exceptions.PolarsError) as exc:
        got.problems.append(f"{name}: {fmt}: {str(exc).splitlines()[0]}")


_GZIP = b"\x1f\x8b"
MAX_GUNZIPPED = 4 << 30  # bytes: a gzip bomb stops here


def _read_gzip(path: Path, got: _Collected) -> None:
    """A gzipped log (ALB writes ``.log.gz``): decompressed, bounded, to a temporary file
    that is read like any other and removed."""
    name = str(path)
    with tempfile.NamedTemporaryFile(prefix="svcdoctor-gunzip-") as out:
        try:
            with gzip.open(path, "rb") as src:
                copied = 0
                while chunk := src.read(1 << 20):
                    copied += len(chunk)
                    if copied > MAX_GUNZIPPED:
                        got.problems.append(
                            f"{name}: more than {MAX_GUNZIPPED >> 30} GiB once decompressed, "
                            "skipped"
                        )
                        return
                    out.write(chunk)
        except (OSError, EOFError, zlib.error) as exc:
            got.problems.append(f"{name}: not a readable gzip file ({exc})")
            return
        out.flush()
        _read_one(Path(out.name), got, name)


def _read_json(text: str, name: str, got: _Collected) -> None:
    try:
        docs = list(json_documents(text))
    except ValueError as exc:
        # not one JSON document or stream: log lines that start with a bracket or brace
        # (an IPv6 client, a truncated first record); named as JSON if no line is evidence
        before = len(got.problems)
        _read_lines(text, name, got)
        if any(p.startswith(f"{name}: not a recognised evidence format") for p in got.problems):
            del got.problems[before:]
            got.problems.append(f"{name}: json: {str(exc).splitlines()[0]}")
        return
    before, seen, seen_ep = got.kube.rows, len(got.kube.events), len(got.kube.endpoints)
    kinds = _kinds(docs)
    if not kinds:
        if len(docs) == 1 and isinstance(docs[0], dict) and "ground_truth" in docs[0]:
            # lab.json / simulate.json: what the run knew, never evidence
            note = "svcdoctor's ground truth of the run, not read as evidence"
            got.sources.append(SourceSummary(name, "ground-truth", 0, note=note))
            return
        one = docs[0] if len(docs) == 1 and isinstance(docs[0], dict) else {}
        if {"schema_version", "causes"} <= one.keys():
            # rollout-test's diagnosis.json (diagnose -o json): a result, never evidence
            note = "svcdoctor's diagnosis of the bundle, not read as evidence"
            got.sources.append(SourceSummary(name, "svcdoctor-diagnosis", 0, note=note))
            return
        if len(docs) == 1 and isinstance(docs[0], dict) and "svcdoctor_collect" in docs[0]:
            note = "svcdoctor collect's record of the bundle, not read as evidence"
            got.sources.append(SourceSummary(name, "collect-manifest", 0, note=note))
            if docs[0].get("complete") is False:
                missing = [str(m) for m in docs[0].get("missing") or ()]
                bundle = Path(name).parent.name or name
                got.incomplete += [f"{bundle}: {m}" for m in missing] or [
                    f"{name}: collect did not finish this bundle (interrupted or failed): "
                    "evidence may be missing; run svcdoctor collect again"
                ]
            return
        if any(isinstance(d, dict) and str(d.get("kind", "")).endswith("List") for d in docs):
            got.sources.append(SourceSummary(name, "kubectl-json", 0, note="an empty list"))
            return
        records = [r for d in docs for r in (d if isinstance(d, list) else [d])]
        if cloudlb is not None:
            gcp = [r for r in records if isinstance(r, dict) and cloudlb.is_gcp_entry(r)]
            if gcp:
                frame = cloudlb.gcp_requests(gcp, name)
                got.parts.append(Part(name, "gcp", frame, read=frame.height))
                return
        if changes := [c for r in records if (c := routing.lbc_change(r, name))]:
            got.routing.extend(changes)  # a controller's JSON log: its deregistrations
            return
        if (logged := unwrap.document_lines(records)) is not None:
            _read_lines(logged, name, got)  # log records: pretty-printed, in an array, wrapped
            return
        got.problems.append(f"{name}: JSON without Kubernetes objects, skipped")
        return
    read_kubectl(docs, name, got.kube)
    if kinds - _EVIDENCE_KINDS:
        got.manifests.append(name)
    stamps = [e.ts for e in got.kube.events[seen:]]
    stamps += [c.ts for c in got.kube.endpoints[seen_ep:] if c.ts is not None]
    got.sources.append(
        SourceSummary(
            name,
            "kubectl-json",
            got.kube.rows - before,
            min(stamps, default=None),
            max(stamps, default=None),
        )
    )


def _read_lines(text: str, name: str, got: _Collected) -> None:
    """Each line by its own shape; one part per shape that gave rows."""
    frame = _shapes(lines.split(text))
    counts = dict(frame.group_by("shape").len().iter_rows())
    hops = frame.filter(pl.col("line").str.contains(routing.HINT))
    if hops.height:
        got.routing_lines.append((name, list(hops.select("line", "pts").iter_rows())))
    found = [s for s in counts if s in lines.EVIDENCE_SHAPES or s == "kernel"]
    if not found and hops.height:
        return
    if not found:
        if _YAML_OBJECT.search(text):
            got.manifests.append(name)
            return
        got.problems.append(f"{name}: not a recognised evidence format" + _counted(counts))
        return
    by_shape = {s: frame.filter(pl.col("shape") == s) for s in found}
    skipped: dict[str, int] = {}
    for shape, sub in by_shape.items():
        if shape == "kernel":
            # only lines that can hold a drop go through the per-line parser
            wanted = sub.filter(pl.col("line").str.contains(r"table full|callbacks suppressed"))
            got.kernel_lines.append(
                (name, "kernel", list(wanted.select("line", "pts").iter_rows()))
            )
        elif shape == "nginx-access":
            access, bad, offset = proxylogs.nginx_access_lines(sub, name)
            skipped["nginx-access"] = bad
            got.parts.append(Part(name, shape, access, offset=offset, read=sub.height - bad))
        elif shape == "nginx-error":
            errors, quiet = proxylogs.nginx_error_lines(sub, name)
            note = f"{quiet} lines without an upstream failure" if quiet else ""
            got.parts.append(Part(name, shape, errors, note=note, read=errors.height))
        elif shape in _ROW_PARSERS:
            rows, bad = _ROW_PARSERS[shape](sub, name)
            skipped[shape] = bad
            got.parts.append(Part(name, shape, rows, read=rows.height))
        elif shape == "alb" and cloudlb is not None:
            rows, bad = cloudlb.alb_access(sub.get_column("line").to_list(), name)
            skipped["alb"] = bad
            got.parts.append(Part(name, shape, rows, read=rows.height))
        elif shape == "gcp" and cloudlb is not None:
            records = _json_records(sub.get_column("line").to_list())
            gcp = [r for r in records if cloudlb.is_gcp_entry(r)]
            skipped["gcp"] = sub.height - len(gcp)
            got.parts.append(Part(name, shape, cloudlb.gcp_requests(gcp, name), read=len(gcp)))
    for shape, bad in skipped.items():
        if bad:
            got.problems.append(
                f"{name}: {bad} lines look like {shape} but do not parse in full, skipped"
            )
    read = {p.fmt for p in got.parts if p.path == name and p.frame.height}
    hop_lines = dict(hops.group_by("shape").len().iter_rows()) if hops.height else {}
    rest = {
        k: left
        for k, v in counts.items()
        if k in _NOT_EVIDENCE and k not in read and (left := v - hop_lines.get(k, 0))
    }
    if rest:
        got.problems.append(f"{name}: {_counted(rest).strip(' ()')}: not evidence")


def _read_routing(got: _Collected, year: int, zone: float | None) -> None:
    """The hops' routing changes of the lines kept for them, their times read in ``zone``
    (``--tz``), else the zone of the bundle's nginx access log, else UTC; a source each."""
    offsets = [p.offset for p in got.parts if p.fmt == "nginx-access" and p.offset]
    common = utc_offset(max(set(offsets), key=offsets.count)) if offsets else None
    shift = zone if zone is not None else common
    for name, kept in got.routing_lines:
        changes, zoneless = routing.routing_changes(kept, name, year, shift or 0.0)
        got.routing.extend(changes)
        if zoneless and shift is None:
            got.warnings.append(
                f"{name}: {zoneless} routing-change times carry no UTC offset: read as UTC; "
                "pass --tz ±HH:MM if that hop's clock is on local time"
            )
    by_source: dict[str, list[float]] = {}
    for c in got.routing:
        by_source.setdefault(c.source, []).append(c.ts)
    for name, stamps in by_source.items():
        note = "moments a hop stopped or changed routing (its reloads, deregistrations)"
        got.sources.append(
            SourceSummary(name, "routing", len(stamps), min(stamps), max(stamps), note)
        )


def _counted(counts: dict[str, int]) -> str:
    """`` (412 klog lines and 3 other lines)`` for the shapes that are not evidence."""
    parts = [
        f"{counts[k]} {word} line{'s' if counts[k] != 1 else ''}"
        for k, word in _NOT_EVIDENCE.items()
        if counts.get(k)
    ]
    if not parts:
        return ""
    text = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f" ({text})"


def _json_records(texts: list[str]) -> list[dict[str, Any]]:
    records = []
    for text in texts:
        try:
            value = json.loads(text)
        except ValueError:
            continue
        if isinstance(value, dict):
            records.append(value)
    return records


def _kinds(docs: Iterable[Any]) -> set[str]:
    return {str(o.get("kind")) for d in docs for o in objects(d)}


# ---------------------------------------------------------------- nginx: zone and join


def _add_source(got: _Collected, part: Part) -> None:
    ts = part.frame.get_column("ts")
    first, last = ts.min(), ts.max()
    start = first if isinstance(first, float) else None
    end = last if isinstance(last, float) else None
    if part.span is not None:
        start, end = part.span
    got.sources.append(
        SourceSummary(
            part.path,
            part.fmt,
            part.read if part.fmt == "nginx-error" else part.frame.height,
            start,
            end,
            note=part.note,
            resolution=_RESOLUTION.get(part.fmt, 0.0),
        )
    )


def _year(got: _Collected) -> int:
    """The year for kernel lines that carry none: the year of the other evidence."""
    stamps: list[float] = []
    for part in got.parts:
        start = part.frame.get_column("ts").min() if part.frame.height else None
        if isinstance(start, float):
            stamps.append(start)
    stamps += [s.start for s in got.sources if s.start is not None]
    stamps += [e.ts for e in got.kube.events]
    when = min(stamps) if stamps else datetime.now(UTC).timestamp()
    return datetime.fromtimestamp(when, UTC).year


def _check_offsets(got: _Collected, offsets: dict[str, float]) -> None:
    """Every ``--clock-offset`` names something read (a typo must not pass silently), and
    the sources it shifts say so instead of still asking for one."""
    names = {key for s in got.sources for key in (s.path, Path(s.path).name, s.format)}
    unknown = [key for key in offsets if key not in names]
    if unknown:
        read = ", ".join(sorted({Path(s.path).name for s in got.sources})[:8]) or "nothing"
        raise EvidenceError(
            f"--clock-offset {unknown[0]}=…: no file, file name or format read is called "
            f"that (read: {read})"
        )
    for i, src in enumerate(got.sources):
        shift = _offset_for(offsets, src.path, src.format)
        if shift:
            note = f"shifted {shift:+g} s by --clock-offset"
            if src.note and "pass --clock-offset" not in src.note:
                note = f"{src.note}; {note}"
            got.sources[i] = replace(
                src,
                note=note,
                start=None if src.start is None else src.start + shift,
                end=None if src.end is None else src.end + shift,
            )


def _offset_for(offsets: dict[str, float], source: str, fmt: str) -> float:
    for key in (source, Path(source).name, fmt):
        if key in offsets:
            return offsets[key]
    return 0.0


_CLIENT_FORMATS = frozenset({"csv", "jsonl", "parquet", *loadgen.ROW_SHAPES})
_PROXY_FORMATS = lines.EVIDENCE_SHAPES


def _one_vantage_point(got: _Collected) -> set[str]:
    """Proxy logs that cover the time of the client request rows: the same requests seen
    from the proxy's side (the lab's clients go through its proxy; clients that call through
    an ingress do too). Counting both would double every request and blur the race window
    with the proxy's 1 s clock, so the clients' rows are used and those logs are noted."""
    client = [s for s in got.sources if s.format in _CLIENT_FORMATS and s.start is not None]
    if not client:
        return set()
    start = min(s.start for s in client if s.start is not None)
    end = max(s.end if s.end is not None else s.start or 0.0 for s in client)
    dropped = set()
    for i, src in enumerate(got.sources):
        if src.format not in _PROXY_FORMATS or src.start is None or not src.rows:
            continue
        if src.start <= end and (src.end if src.end is not None else src.start) >= start:
            dropped.add(src.path)
            got.sources[i] = replace(
                src,
                note="not counted: the client request rows cover the same time "
                "(diagnose this log alone for the proxy's view)",
            )
    return dropped


def _assemble(got: _Collected, offsets: dict[str, float]) -> Evidence:
    dropped = _one_vantage_point(got)
    known = {s.path for s in got.sources}
    frames = []
    for part in got.parts:
        if part.path in dropped or not part.frame.height:
            continue
        shift = _offset_for(offsets, part.path, part.fmt)
        frame = part.frame.select(REQUEST_COLUMNS)
        frames.append(frame.with_columns(pl.col("ts") + shift) if shift else frame)
    requests = pl.concat(frames, how="vertical") if frames else empty()
    events = tuple(
        sorted(
            (
                _shift_event(e, _offset_for(offsets, e.source, "kubectl-json"))
                for e in got.kube.events
            ),
            key=lambda e: e.ts,
        )
    )
    kernel_events = tuple(
        e if e.ts is None else _shift_kernel(e, _offset_for(offsets, e.source, "kernel"))
        for e in got.kernel
    )
    inventory = None
    if got.manifests:
        loaded = load(got.manifests)
        got.problems.extend(
            f"{f.location.file}:{f.location.line}: {f.message}" for f in loaded.problems
        )
        inventory = build_inventory(loaded)
        got.sources.extend(SourceSummary(m, "manifest", 0) for m in got.manifests if m not in known)
    routed = sorted(
        (replace(c, ts=c.ts + _offset_for(offsets, c.source, "routing")) for c in got.routing),
        key=lambda c: c.ts,
    )
    return Evidence(
        routing=tuple(routed),
        requests=requests if requests.get_column("ts").is_sorted() else requests.sort("ts"),
        pods=tuple(got.kube.pods.values()),
        events=events,
        endpoints=tuple(got.kube.endpoints),
        kernel=kernel_events,
        inventory=inventory,
        sources=tuple(got.sources),
        problems=tuple(got.problems),
        incomplete=tuple(got.incomplete),
        warnings=tuple(got.warnings),
        replicas_hint=got.kube.replicas,
        loads=tuple(s for found in got.loads for s in found.summaries),
    )


def _shift_event(e: LifecycleEvent, shift: float) -> LifecycleEvent:
    return replace(e, ts=e.ts + shift) if shift else e


def _shift_kernel(e: KernelEvent, shift: float) -> KernelEvent:
    if not shift:
        return e
    assert e.ts is not None
    return replace(e, ts=e.ts + shift, aligned=True)
