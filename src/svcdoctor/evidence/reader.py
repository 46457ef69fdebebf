"""Read evidence files and directories, detecting each format by content."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from svcdoctor.evidence import kernel, proxylogs
from svcdoctor.evidence.kubectl import KubectlEvidence, json_documents, read_kubectl
from svcdoctor.evidence.requests import RequestLogError, empty, read_canonical
from svcdoctor.manifests import build_inventory, load
from svcdoctor.model import Evidence, KernelEvent, LifecycleEvent, SourceSummary

_HEAD = 64 * 1024
_NGINX_ERROR_START = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d \[\w+\]")
_ENVOY_START = re.compile(r"^\[\d{4}-\d\d-\d\dT[^\]]*\] \"")
_CONNTRACK_S = re.compile(r"^cpu=\d+\s.*\b(found|insert_failed)=", re.MULTILINE)
_YAML_OBJECT = re.compile(r"^(apiVersion|kind):", re.MULTILINE)
_EVIDENCE_KINDS = frozenset({"Event", "Pod", "EndpointSlice"})


class EvidenceError(ValueError):
    """Nothing usable in the inputs."""


@dataclass(slots=True)
class _Collected:
    frames: list[pl.DataFrame] = field(default_factory=list)
    kube: KubectlEvidence = field(default_factory=KubectlEvidence)
    kernel_texts: list[tuple[str, str, str]] = field(default_factory=list)  # path, fmt, text
    kernel: list[KernelEvent] = field(default_factory=list)
    manifests: list[str] = field(default_factory=list)
    sources: list[SourceSummary] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


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


def detect(head: bytes) -> str:
    """The format of a file from its first bytes (see DESIGN.md, "Evidence formats")."""
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
            return "json"
        if isinstance(record, dict):
            if {"ts", "outcome"} <= record.keys():
                return "jsonl"
            if "response_code" in record or "upstream_host" in record:
                return "envoy-json"
        return "json"
    if _ENVOY_START.match(stripped):
        return "envoy"
    if stripped.startswith("[") and not re.match(r"^\[\s*\d+\.\d+\]|^\[\w{3} \w{3} ", stripped):
        return "json"
    columns = [c.strip().strip('"') for c in stripped.split(",")]
    if {"ts", "outcome"} <= set(columns):
        return "csv"
    if re.match(proxylogs.NGINX_ACCESS, stripped):
        return "nginx-access"
    if _NGINX_ERROR_START.match(stripped):
        return "nginx-error"
    if _CONNTRACK_S.search(text):
        return "conntrack-stats"
    if kernel.KERNEL_HINT.search(text) or re.match(r"^\[\s*\d+\.\d+\]", stripped):
        return "kernel"
    if _YAML_OBJECT.search(text):
        return "manifest"
    return "unknown"


def read_evidence(paths: Sequence[str], clock_offsets: dict[str, float] | None = None) -> Evidence:
    """Everything usable in ``paths``; ``EvidenceError`` only when nothing is."""
    files, missing = expand(paths)
    got = _Collected(problems=list(missing))
    for path in files:
        _read_one(path, got)
    year = _year(got)
    for name, fmt, text in got.kernel_texts:
        events, _ = kernel.kernel_log(text, name, year)
        got.kernel.extend(events)
        aligned = [e.ts for e in events if e.aligned and e.ts is not None]
        note = (
            ""
            if all(e.aligned for e in events)
            else ("seconds since boot: pass --clock-offset FILE=BOOT_EPOCH to align")
        )
        got.sources.append(
            SourceSummary(
                name, fmt, len(events), min(aligned, default=None), max(aligned, default=None), note
            )
        )
    offsets = clock_offsets or {}
    evidence = _assemble(got, offsets)
    usable = (
        evidence.requests.height
        or evidence.events
        or evidence.pods
        or evidence.kernel
        or evidence.endpoints
    )
    if not usable and evidence.inventory is None:
        reasons = "; ".join(got.problems) or "no evidence files given"
        raise EvidenceError(f"nothing usable in the inputs ({reasons})")
    return evidence


def _read_one(path: Path, got: _Collected) -> None:
    name = str(path)
    try:
        with path.open("rb") as fh:
            head = fh.read(_HEAD)
    except OSError as exc:
        got.problems.append(f"{name}: cannot read ({exc.strerror})")
        return
    fmt = detect(head)
    try:
        if fmt in ("csv", "jsonl", "parquet"):
            frame, problems = read_canonical(path, fmt, name)
            got.problems.extend(f"{name}: {p}" for p in problems)
            _add_frame(got, name, fmt, frame)
        elif fmt in ("binary", "unknown"):
            got.problems.append(
                f"{name}: not a recognised evidence format"
                + (" (binary)" if fmt == "binary" else "")
            )
        elif fmt == "manifest":
            got.manifests.append(name)
        else:
            _read_text(path, name, fmt, got)
    except (RequestLogError, ValueError, pl.exceptions.PolarsError) as exc:
        got.problems.append(f"{name}: {fmt}: {str(exc).splitlines()[0]}")


def _read_text(path: Path, name: str, fmt: str, got: _Collected) -> None:
    text = path.read_text(encoding="utf-8-sig", errors="replace")
    if fmt == "json":
        docs = list(json_documents(text))
        before, seen, seen_ep = got.kube.rows, len(got.kube.events), len(got.kube.endpoints)
        kinds = _kinds(docs)
        if not kinds:
            if len(docs) == 1 and isinstance(docs[0], dict) and "ground_truth" in docs[0]:
                # lab.json / simulate.json: what the run knew, never evidence
                note = "svcdoctor's ground truth of the run, not read as evidence"
                got.sources.append(SourceSummary(name, "ground-truth", 0, note=note))
                return
            if len(docs) == 1 and isinstance(docs[0], dict) and "svcdoctor_collect" in docs[0]:
                note = "svcdoctor collect's record of the bundle, not read as evidence"
                got.sources.append(SourceSummary(name, "collect-manifest", 0, note=note))
                if docs[0].get("complete") is False:
                    got.problems.append(
                        f"{name}: collect did not finish this bundle (interrupted or failed): "
                        "evidence may be missing; run svcdoctor collect again"
                    )
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
        return
    if fmt == "envoy-json":
        records, unparsed = _json_lines(text)
        if unparsed:
            got.problems.append(f"{name}: {unparsed} lines are not JSON objects, skipped")
        _add_frame(got, name, fmt, proxylogs.envoy_json(records, name))
        return
    if fmt in ("kernel",):
        got.kernel_texts.append((name, fmt, text))
        return
    if fmt == "conntrack-stats":
        counters = kernel.conntrack_stats(text, name)
        got.kernel.extend(counters)
        got.sources.append(SourceSummary(name, fmt, sum(1 for _ in text.splitlines())))
        return
    parse = {
        "nginx-access": proxylogs.nginx_access,
        "nginx-error": proxylogs.nginx_error,
        "envoy": proxylogs.envoy_text,
    }[fmt]
    frame, unparsed = parse(text, name)
    if unparsed:
        got.problems.append(f"{name}: {unparsed} lines not in the {fmt} format, skipped")
    _add_frame(got, name, fmt, frame)


def _json_lines(text: str) -> tuple[list[dict[str, object]], int]:
    records, unparsed = [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError:
            value = None
        if isinstance(value, dict):
            records.append(value)
        else:
            unparsed += 1
    return records, unparsed


def _kinds(docs: Iterable[Any]) -> set[str]:
    from svcdoctor.evidence.kubectl import objects

    return {str(o.get("kind")) for d in docs for o in objects(d)}


_RESOLUTION = {"nginx-access": 1.0, "nginx-error": 1.0}


def _add_frame(got: _Collected, name: str, fmt: str, frame: pl.DataFrame) -> None:
    ts = frame.get_column("ts")
    got.frames.append(frame)
    start, end = ts.min(), ts.max()
    got.sources.append(
        SourceSummary(
            name,
            fmt,
            frame.height,
            start if isinstance(start, float) else None,
            end if isinstance(end, float) else None,
            resolution=_RESOLUTION.get(fmt, 0.0),
        )
    )


def _year(got: _Collected) -> int:
    """The year for kernel lines that carry none: the year of the other evidence."""
    stamps = [s.start for s in got.sources if s.start is not None]
    stamps += [e.ts for e in got.kube.events]
    when = min(stamps) if stamps else datetime.now(UTC).timestamp()
    return datetime.fromtimestamp(when, UTC).year


def _offset_for(offsets: dict[str, float], source: str, fmt: str) -> float:
    for key in (source, Path(source).name, fmt):
        if key in offsets:
            return offsets[key]
    return 0.0


_CLIENT_FORMATS = frozenset({"csv", "jsonl", "parquet"})
_PROXY_FORMATS = frozenset({"nginx-access", "nginx-error", "envoy", "envoy-json"})


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
    formats = {s.path: s.format for s in got.sources}
    frames = []
    for frame in got.frames:
        source = frame.get_column("source")[0] if frame.height else ""
        if source in dropped:
            continue
        shift = _offset_for(offsets, source, formats.get(source, ""))
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
        inventory = build_inventory(load(got.manifests))
        got.sources.extend(
            SourceSummary(m, "manifest", 0) for m in got.manifests if m not in formats
        )
    return Evidence(
        requests=requests if requests.get_column("ts").is_sorted() else requests.sort("ts"),
        pods=tuple(got.kube.pods.values()),
        events=events,
        endpoints=tuple(got.kube.endpoints),
        kernel=kernel_events,
        inventory=inventory,
        sources=tuple(got.sources),
        problems=tuple(got.problems),
        replicas_hint=got.kube.replicas,
    )


def _shift_event(e: LifecycleEvent, shift: float) -> LifecycleEvent:
    from dataclasses import replace

    return replace(e, ts=e.ts + shift) if shift else e


def _shift_kernel(e: KernelEvent, shift: float) -> KernelEvent:
    from dataclasses import replace

    if not shift:
        return e
    assert e.ts is not None
    return replace(e, ts=e.ts + shift, aligned=True)
