"""Benchmark: how often ``diagnose`` names the right cause on real-shaped evidence.

Generates bundles with ``tests/realshapes.py`` (``--seeds`` x every class x every format it
is written in, 300 to ``--max-requests`` requests each, in the line shapes real tools
write: ingress-nginx access/error/controller logs, Istio/Envoy text and JSON, AWS ALB,
GCP load-balancer logs, kernel logs, ``conntrack -S``, kubectl JSON, canonical CSV), runs
``read_evidence`` + ``diagnose`` on each (``--jobs`` processes) and prints the confusion
matrix (rows: truth; columns: the primary cause named, ``none`` = no cause), the accuracy
per class and in total, the time taken and, with ``--misses``, every misdiagnosis with
its bundle parameters. Goal (issue 15): >= 95 % right, no cause on healthy traffic, both
causes found in mixed bundles.

Then the paste corpus (issue 29, ``benchmarks/paste_corpus``, scored by ``tests/pastes.py``):
log lines posted in public issue threads and docs, each with the cause its thread confirmed
(``index.json`` cites every source). A paste is right when the strongest cause named is the
confirmed one alone ("possible" counts), open when it ties with another cause, wrong when
another cause is named above it (or any cause where the truth is none), unread when no
reader knows its lines. ``--pastes`` runs the corpus alone.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.pastes import run_all as run_pastes  # noqa: E402 - after the path is set
from tests.pastes import summary as paste_summary  # noqa: E402
from tests.realshapes import (  # noqa: E402
    Result,
    Spec,
    confusion,
    per_class,
    plan,
    run_one,
)


def _run(job: tuple[Spec, str]) -> Result:
    spec, folder = job
    return run_one(spec, Path(folder))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--first-seed", type=int, default=101)
    parser.add_argument("--max-requests", type=int, default=300_000)
    parser.add_argument("--jobs", type=int, default=None, help="processes (default: CPUs)")
    parser.add_argument("--misses", action="store_true", help="list every misdiagnosis")
    parser.add_argument("--pastes", action="store_true", help="only the paste corpus")
    args = parser.parse_args()
    if not args.pastes:
        generated(args)
    pasted = run_pastes()
    print("\npaste corpus (real lines from public threads, benchmarks/paste_corpus):")
    for r in pasted:
        print(" ", r.line())
    print(paste_summary(pasted))


def generated(args: argparse.Namespace) -> None:
    """The generated bundles' figures (issue 15)."""
    specs = plan(args.seeds, args.max_requests, args.first_seed)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="svcdoctor-accuracy-") as tmp:
        jobs = [(s, str(Path(tmp) / f"{i:04d}")) for i, s in enumerate(specs)]
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(_run, jobs, chunksize=1))
    elapsed = time.perf_counter() - started
    print(
        f"diagnose accuracy: {len(results)} bundles ({args.seeds} seeds x classes x formats, "
        f"<= {args.max_requests:,} requests each) in {elapsed:.0f} s"
    )
    print(confusion(results))
    print("\nper class (generator class):")
    print(per_class(results))
    healthy = [r for r in results if not r.truth.causes]
    named = sum(r.primary is not None for r in healthy)
    mixed = [r for r in results if r.truth.spec.cls == "mixed"]
    both = sum({"race", "backend"} <= r.found for r in mixed)
    right = sum(r.right for r in results) / max(len(results), 1)
    verdict = "PASS" if right >= 0.95 else "FAIL"
    print(f"\nright primary cause >= 95 %: {verdict} ({100 * right:.1f} %)")
    print(f"no cause on healthy traffic: {'PASS' if not named else 'FAIL'} ({named} named)")
    verdict = "PASS" if both == len(mixed) else "FAIL"
    print(f"both causes in mixed bundles: {verdict} ({both}/{len(mixed)})")
    if args.misses:
        print("\nmisdiagnoses:")
        for r in results:
            if not r.right:
                print(" ", r.describe())


if __name__ == "__main__":
    main()
