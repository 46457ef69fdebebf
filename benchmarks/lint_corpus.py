"""Lint-speed benchmark: svcdoctor against a plain YAML parse and against checkov.

What is measured, on one corpus (default ``../shared/corpus/manifests``), in one run:

* ``load_all``: the floor. Every ``*.yaml``/``*.yml``/``*.json`` file is read as bytes and
  parsed with ``list(yaml.load_all(data, Loader=yaml.CSafeLoader))``; a file that fails to
  parse is counted and skipped. Wall time, best of ``--repeat`` runs.
* ``svcdoctor``: the whole lint in this process, ``run_checks(build_inventory(load([corpus])),
  Settings())``: finding and reading the files, building the inventory, running every rule.
  Wall time, best of ``--repeat`` runs.
* ``checkov``: ``checkov -d CORPUS --framework kubernetes --quiet --soft-fail --skip-download``
  run once as a subprocess (stdout discarded), from a venv cached in
  ``~/.cache/svcdoctor-bench/checkov-venv`` and built on first use. Skipped with
  ``--no-checkov`` or, with a one-line reason, when it cannot be installed or run.

objects/s divides the number of Kubernetes objects svcdoctor counts in the corpus by each
tool's seconds, so the rows compare throughput over the same input. Peak RSS is
``ru_maxrss`` of the checkov process alone (taken from ``os.wait4``, so the pip install
done earlier by this script does not count) and, for the in-process rows, this process's
high-water mark after the step. Goals: svcdoctor at most 0.75x of ``load_all`` (issue 30);
checkov at least 20x slower than svcdoctor. The benchmark reports and never gates: it exits
0 unless the corpus is missing (exit 2).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from svcdoctor.checks import LintResult, Settings, run_checks
from svcdoctor.manifests import build_inventory, load

DEFAULT_CORPUS = Path(__file__).resolve().parents[1].parent / "shared/corpus/manifests"
SUFFIXES = (".yaml", ".yml", ".json")
CACHE_DIR = Path.home() / ".cache" / "svcdoctor-bench"
CHECKOV_VENV = CACHE_DIR / "checkov-venv"
CHECKOV_STDERR = CACHE_DIR / "checkov-last-stderr.log"
CHECKOV_TIMEOUT_S = 900
INSTALL_TIMEOUT_S = 1800
SVCDOCTOR_GOAL = 0.75  # svcdoctor / load_all must be at most this (issue 30)
CHECKOV_GOAL = 20.0  # checkov / svcdoctor must be at least this

T = TypeVar("T")


@dataclass
class Row:
    """One tool's figures."""

    tool: str
    seconds: float | None
    objects_per_s: float | None = None
    ratio_to_load_all: float | None = None
    peak_rss_mib: float | None = None
    note: str = ""


@dataclass
class Report:
    """Everything the benchmark prints, in either format."""

    corpus: str
    files: int
    objects: int
    findings: int | None
    repeat: int
    rows: list[Row] = field(default_factory=list)
    goals: dict[str, dict[str, Any]] = field(default_factory=dict)


class CheckovUnavailable(Exception):
    """checkov could not be installed or run; the message says why, on one line."""


# --- measuring -------------------------------------------------------------------------


def collect_files(corpus: Path) -> list[Path]:
    """Every manifest file under the corpus, sorted."""
    return sorted(p for p in corpus.rglob("*") if p.suffix in SUFFIXES and p.is_file())


def best_of(repeat: int, label: str, fn: Callable[[], T]) -> tuple[float, T]:
    """Best wall time of ``repeat`` calls (garbage collected before each) and the last result."""
    best = float("inf")
    result: T | None = None
    for i in range(repeat):
        result = None  # drop the previous run's objects before the next one
        gc.collect()
        start = time.perf_counter()
        result = fn()
        elapsed = time.perf_counter() - start
        best = min(best, elapsed)
        progress(f"{label}: run {i + 1}/{repeat} {elapsed:.2f} s")
    assert result is not None
    return best, result


def parse_all(files: Sequence[Path]) -> tuple[int, int]:
    """The baseline: (documents parsed, files that failed to parse)."""
    documents = failed = 0
    for path in files:
        data = path.read_bytes()
        try:
            documents += len(list(yaml.load_all(data, Loader=yaml.CSafeLoader)))
        except Exception:
            failed += 1
    return documents, failed


def lint(corpus: Path) -> LintResult:
    """The whole svcdoctor lint, as ``svcdoctor lint CORPUS`` does it."""
    return run_checks(build_inventory(load([str(corpus)])), Settings())


def own_peak_rss_mib() -> float:
    """This process's peak RSS so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --- checkov ---------------------------------------------------------------------------


def ensure_checkov(venv: Path, spec: str) -> tuple[Path, str]:
    """checkov's executable and version, installing into ``venv`` unless already there."""
    exe = venv / "bin" / "checkov"
    stamp = venv / ".svcdoctor-bench-installed"
    if not (exe.is_file() and stamp.is_file() and stamp.read_text().strip() == spec):
        progress(f"checkov: installing {spec!r} into {venv} (first run only, takes minutes)")
        shutil.rmtree(venv, ignore_errors=True)
        venv.parent.mkdir(parents=True, exist_ok=True)
        checked([sys.executable, "-m", "venv", str(venv)], "venv creation", 300)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        checked([*pip, "--disable-pip-version-check", spec], "pip install", INSTALL_TIMEOUT_S)
        stamp.write_text(spec + "\n")  # only a complete install is reused
    version = checked(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m; print(m.version('checkov'))",
        ],
        "version lookup",
        60,
    )
    return exe, version.strip()


def checked(cmd: list[str], what: str, timeout: int) -> str:
    """Run a setup command; any failure becomes ``CheckovUnavailable`` with a one-line reason."""
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CheckovUnavailable(f"{what} failed: {one_line(str(exc))}") from exc
    if done.returncode != 0:
        raise CheckovUnavailable(
            f"{what} failed (exit {done.returncode}): {last_line(done.stderr or done.stdout)}"
        )
    return done.stdout


def run_checkov(exe: Path, corpus: Path) -> tuple[float, float, int]:
    """One timed checkov run: (seconds, peak RSS MiB, stderr lines). Stderr goes to a log."""
    cmd = [str(exe), "-d", str(corpus), "--framework", "kubernetes", "--quiet", "--soft-fail"]
    cmd.append("--skip-download")
    killed = threading.Event()
    CHECKOV_STDERR.parent.mkdir(parents=True, exist_ok=True)
    with CHECKOV_STDERR.open("wb") as log:
        start = time.perf_counter()
        try:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log
            )
        except OSError as exc:
            raise CheckovUnavailable(f"could not start checkov: {one_line(str(exc))}") from exc

        def kill() -> None:
            killed.set()
            proc.kill()

        timer = threading.Timer(CHECKOV_TIMEOUT_S, kill)
        timer.start()
        try:
            # wait4 rather than RUSAGE_CHILDREN: the latter would also hold pip's peak
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        elapsed = time.perf_counter() - start
    proc.returncode = code = os.waitstatus_to_exitcode(status)
    stderr = CHECKOV_STDERR.read_text(errors="replace")
    if killed.is_set():
        raise CheckovUnavailable(f"checkov timed out after {CHECKOV_TIMEOUT_S} s")
    if code != 0:
        raise CheckovUnavailable(
            f"checkov exited {code} after {elapsed:.1f} s: {last_line(stderr)} "
            f"(log: {CHECKOV_STDERR})"
        )
    return elapsed, usage.ru_maxrss / 1024, len(stderr.splitlines())


def checkov_row(corpus: Path, spec: str) -> Row:
    """The checkov row: measured, or skipped with the reason in the note."""
    try:
        exe, version = ensure_checkov(CHECKOV_VENV, spec)
        progress(f"checkov {version}: running once (timeout {CHECKOV_TIMEOUT_S} s)")
        seconds, rss, stderr_lines = run_checkov(exe, corpus)
    except CheckovUnavailable as exc:
        progress(f"checkov column skipped: {exc}")
        return Row("checkov", None, note=f"skipped: {exc}")
    note = f"checkov {version}, run once"
    if stderr_lines:
        note += f"; {stderr_lines} stderr lines in {CHECKOV_STDERR}"
    return Row("checkov", seconds, peak_rss_mib=rss, note=note)


# --- reporting -------------------------------------------------------------------------


def svcdoctor_row(corpus: Path, repeat: int) -> tuple[Row, int, int | None]:
    """The svcdoctor row, the corpus's object count and the number of findings.

    A crash in svcdoctor is reported in the row, not raised: the object count then comes
    from the loader alone so that the other rows still get objects/s.
    """
    try:
        seconds, result = best_of(repeat, "svcdoctor", lambda: lint(corpus))
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        reason = f"{type(exc).__name__}: {one_line(str(exc))} ({where.filename}:{where.lineno})"
        progress(f"svcdoctor failed: {reason}")
        return Row("svcdoctor lint", None, note=f"failed: {reason}"), load_objects(corpus), None
    row = Row("svcdoctor lint", seconds, peak_rss_mib=own_peak_rss_mib())
    counts = ", ".join(f"{n} {s}" for s, n in result.counts().items())
    row.note = f"{result.files} files, {len(result.findings)} findings ({counts})"
    return row, result.objects, len(result.findings)


def load_objects(corpus: Path) -> int:
    """Kubernetes objects in the corpus as svcdoctor's loader counts them (0 if it fails)."""
    try:
        return load([str(corpus)]).documents
    except Exception:
        return 0


def build_report(corpus: Path, repeat: int, with_checkov: bool, checkov_spec: str) -> Report:
    """Run every measurement and put the figures together."""
    files = collect_files(corpus)
    progress(f"corpus: {corpus} ({len(files)} files)")
    base_s, (documents, failed) = best_of(repeat, "load_all", lambda: parse_all(files))
    base = Row("load_all (CSafeLoader)", base_s, peak_rss_mib=own_peak_rss_mib())
    base.note = f"{documents} YAML documents, {failed} files failed to parse"
    ours, objects, findings = svcdoctor_row(corpus, repeat)
    if with_checkov:
        checkov = checkov_row(corpus, checkov_spec)
    else:
        checkov = Row("checkov", None, note="skipped: --no-checkov")
    rows = [base, ours, checkov]
    for row in rows:
        if row.seconds:
            row.objects_per_s = objects / row.seconds if objects else None
            row.ratio_to_load_all = row.seconds / base_s
    report = Report(str(corpus), len(files), objects, findings, repeat, rows)
    report.goals = goals(base_s, ours.seconds, checkov.seconds)
    return report


def goals(
    base_s: float, ours_s: float | None, checkov_s: float | None
) -> dict[str, dict[str, Any]]:
    """The two speed goals, each with its ratio and PASS / FAIL / skipped."""
    ours_ratio = ours_s / base_s if ours_s else None
    checkov_ratio = checkov_s / ours_s if checkov_s and ours_s else None
    return {
        "svcdoctor_vs_load_all": {
            "label": f"svcdoctor / load_all ratio <= {SVCDOCTOR_GOAL:g}",
            "ratio": ours_ratio,
            "status": verdict(ours_ratio, lambda r: r <= SVCDOCTOR_GOAL),
        },
        "checkov_vs_svcdoctor": {
            "label": f"checkov / svcdoctor >= {CHECKOV_GOAL:g}x",
            "ratio": checkov_ratio,
            "status": verdict(checkov_ratio, lambda r: r >= CHECKOV_GOAL),
        },
    }


def verdict(ratio: float | None, ok: Callable[[float], bool]) -> str:
    if ratio is None:
        return "skipped"
    return "PASS" if ok(ratio) else "FAIL"


def fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def render_table(report: Report) -> str:
    """Aligned plain-text table, then the goal lines."""
    header = ["tool", "seconds", "objects/s", "x load_all", "peak RSS MiB", "note"]
    body = [
        [
            r.tool,
            fmt(r.seconds, ".2f"),
            fmt(r.objects_per_s, ",.0f"),
            fmt(r.ratio_to_load_all, ".2f", "x"),
            fmt(r.peak_rss_mib, ",.0f"),
            r.note,
        ]
        for r in report.rows
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header) - 1)]
    lines = [
        f"corpus: {report.corpus}",
        f"{report.files} files, {report.objects} objects; in-process rows: best of "
        f"{report.repeat}; RSS of in-process rows is this process's peak after the step",
        "",
    ]
    for line in [header, *body]:
        cells = [
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(line, widths, strict=False))
        ]
        lines.append("  ".join([*cells, line[-1]]).rstrip())
    lines.append("")
    for goal in report.goals.values():
        ratio = "" if goal["ratio"] is None else f" (measured {goal['ratio']:.2f}x)"
        lines.append(f"{goal['label']}: {goal['status']}{ratio}")
    return "\n".join(lines)


def render_json(report: Report) -> str:
    return json.dumps(asdict(report), indent=2)


# --- plumbing --------------------------------------------------------------------------


def progress(message: str) -> None:
    """Progress goes to stderr so that stdout holds only the report."""
    print(message, file=sys.stderr, flush=True)


def one_line(text: str) -> str:
    return " ".join(text.split())


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="manifest directory")
    parser.add_argument("--repeat", type=int, default=3, help="runs per in-process tool (best)")
    parser.add_argument("--no-checkov", action="store_true", help="skip the checkov column")
    parser.add_argument(
        "--checkov-spec", default="checkov", help="pip requirement for checkov (default: latest)"
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    corpus: Path = args.corpus.resolve()
    if not corpus.is_dir():
        print(f"lint_corpus: corpus not found: {corpus} (use --corpus PATH)", file=sys.stderr)
        return 2
    report = build_report(corpus, args.repeat, not args.no_checkov, args.checkov_spec)
    print(render_json(report) if args.format == "json" else render_table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
