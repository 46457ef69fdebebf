"""Benchmark: ``svcdoctor diagnose`` on a 10-million-row request log with a rollout in it.

Generates a canonical request log (CSV, or Parquet with ``--format parquet``): ``--rows``
requests over 20 minutes from 200 clients to 16 pods, with a rolling update that deletes
8 pods and a 3 s endpoint-removal race after each deletion, plus the kubectl events and
pods of that rollout. Then, each in its own process so peak memory is measured alone:

* read: ``polars.read_csv`` (or ``read_parquet``) of the same file, the cost of just
  reading it with the library diagnose uses;
* diagnose: ``read_evidence`` + ``diagnose`` on the bundle, as ``svcdoctor diagnose`` runs.

Prints both times, their ratio (goal: ≤ 1.9) and each process's peak RSS (goal: < 2 GB).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

T0 = 1_796_205_600.0
PODS = 16
GOAL = 1.9  # diagnose / polars read (issues 26 and 29)


def generate(folder: Path, rows: int, fmt: str, seed: int = 7) -> Path:
    """Write the bundle; returns the request log's path."""
    from svcdoctor.evidence.write import events_json, pods_json
    from svcdoctor.model import EventKind, LifecycleEvent, PodInfo

    rng = np.random.default_rng(seed)
    duration = 1200.0
    ts = np.sort(rng.uniform(0, duration, rows))
    pod = rng.integers(0, PODS, rows)
    deleted = np.full(PODS, np.inf)
    deleted[:8] = 300.0 + 15.0 * np.arange(8)
    lag = ts - deleted[pod]
    racing = (lag >= 0) & (lag < 3.0)
    moved = lag >= 3.0
    index = np.where(moved, pod + PODS, pod)
    outcome = np.where(racing, "refused", np.where(rng.random(rows) < 1e-4, "reset", "ok"))
    addresses = np.array([f"10.244.{i // 200}.{i % 200 + 2}:8080" for i in range(2 * PODS)])
    frame = pl.DataFrame(
        {
            "ts": np.round(T0 + ts, 6),
            "outcome": outcome,
            "status": np.where(outcome == "ok", 200, 0),
            "latency_ms": np.round(rng.gamma(2.0, 10.0, rows), 2),
            "client": np.char.add("client-", rng.integers(0, 200, rows).astype(str)),
            "backend": addresses[index],
        }
    ).with_columns(
        pl.when(pl.col("status") == 0).then(None).otherwise(pl.col("status")).alias("status")
    )
    path = folder / f"requests.{fmt}"
    if fmt == "csv":
        frame.write_csv(path)
    else:
        frame.write_parquet(path)
    names = [f"api-6f7c8d9e0-{i:03d}" for i in range(2 * PODS)]
    events = [
        LifecycleEvent(T0 + float(deleted[i]), EventKind.DELETE, names[i], "", "default", "Killing")
        for i in range(8)
    ]
    (folder / "events.json").write_text(json.dumps(events_json(events)))
    pods = [
        PodInfo(
            names[i],
            "default",
            addresses[i].split(":")[0],
            f"node-{i % 4}",
            i >= 8,
            T0 - 600,
            T0 + float(deleted[i]) if i < 8 else None,
            30,
        )
        for i in range(2 * PODS)
    ]
    (folder / "pods.json").write_text(json.dumps(pods_json(pods)))
    return path


def _child(code: str) -> tuple[float, int, str]:
    """Run ``code`` in a fresh interpreter; its wall time, its own peak RSS (bytes, from
    wait4) and its output."""
    before = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"benchmark step failed (exit {child.returncode})")
    return time.perf_counter() - before, usage.ru_maxrss * 1024, out.strip()


READ = """
import time, polars as pl
t = time.perf_counter()
frame = pl.read_{fmt}({path!r})
print(time.perf_counter() - t, frame.height)
"""
DIAGNOSE = """
import time
from svcdoctor.evidence import read_evidence
from svcdoctor.diagnose import Settings, diagnose
from svcdoctor.diagnose.stats import preload
t = time.perf_counter()
preload()  # as svcdoctor diagnose does
d = diagnose(read_evidence([{folder!r}]), Settings(pictures=False))  # no --html, as the CLI
window = getattr(getattr(d.primary, "details", None), "window", None)
print(time.perf_counter() - t, d.summary.requests, d.primary.cause.value if d.primary else None,
      window.seconds if window else None)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--format", choices=["csv", "parquet"], default="csv")
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs of each step")
    parser.add_argument("--dir", type=Path, default=None, help="keep the bundle here")
    parser.add_argument("--generate-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    folder = args.dir or Path(tempfile.mkdtemp(prefix="svcdoctor-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    if args.generate_only:
        generate(folder, args.rows, args.format)
        return
    print(f"generating {args.rows:,} rows ({args.format}) in {folder} …", file=sys.stderr)
    # generated in a child: a forked child counts its parent's pages in its peak RSS
    subprocess.run(
        [
            sys.executable,
            __file__,
            "--generate-only",
            "--rows",
            str(args.rows),
            "--format",
            args.format,
            "--dir",
            str(folder),
        ],
        check=True,
    )
    path = folder / f"requests.{args.format}"
    size = path.stat().st_size / 1e6
    reads = [_child(READ.format(fmt=args.format, path=str(path))) for _ in range(args.repeat)]
    runs = [_child(DIAGNOSE.format(folder=str(folder))) for _ in range(args.repeat)]
    read_s = min(float(out.split()[0]) for _, _, out in reads)
    read_peak = max(peak for _, peak, _ in reads)
    diag_s = min(float(out.split()[0]) for _, _, out in runs)
    diag_peak = max(peak for _, peak, _ in runs)
    _, requests, cause, window = runs[0][2].split()
    ratio = diag_s / read_s
    print(f"request log: {path.name}, {size:,.0f} MB, {args.rows:,} rows; best of {args.repeat}")
    print(f"{'step':<28}{'seconds':>9}{'peak RSS MB':>13}")
    print(f"{'polars read_' + args.format:<28}{read_s:>9.2f}{read_peak / 1e6:>13,.0f}")
    print(f"{'svcdoctor diagnose':<28}{diag_s:>9.2f}{diag_peak / 1e6:>13,.0f}")
    print(f"diagnosis: {cause}, window {window} s, {int(requests):,} requests")
    print(f"diagnose / read ratio <= {GOAL}: {'PASS' if ratio <= GOAL else 'FAIL'} ({ratio:.2f}x)")
    print(
        f"diagnose peak memory < 2 GB: {'PASS' if diag_peak < 2e9 else 'FAIL'} "
        f"({diag_peak / 1e9:.2f} GB)"
    )


if __name__ == "__main__":
    main()
