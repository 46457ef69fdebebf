"""Benchmark: ``svcdoctor diagnose --prometheus`` over a week of a 2,000-node cluster,
aggregates pushed down to Prometheus against the same diagnosis from raw samples.

The history (``svcdoctor.simulate.metrics``): 100 rolling updates of a 6-replica
Deployment behind an Istio-meshed Service (``istio_requests_total`` with
``destination_pod``), one every 6,100 s, so the week holds 606 pods; 200 requests/s, no
preStop hook (the endpoint-removal race: the expected verdict is ``race``). What a real
cluster of that size keeps, as its exporters write it:

* request and kube-state-metrics series scraped every 30 s;
* per-node series scraped every 120 s (large clusters scrape node targets at 1-2 min to
  keep their Prometheus small): kube-proxy's network-programming histogram (12 buckets
  of its 80, +Inf, _count, _sum) and node-exporter's four conntrack series, for each of
  the 2,000 nodes: 38,000 series, 191 M samples. At a 60 s node scrape the raw pulls
  double and the pushed-down ones do not change.

The OpenMetrics text (~22 GB) is generated, backfilled with ``promtool tsdb
create-blocks-from openmetrics --max-block-duration=168h`` and deleted; the blocks are
cached under ``benchmarks/.cache/<hash of the parameters and the simulator's source>``
(minutes the first time, reused after; the output says which). A Prometheus 2.x serves
a hard-linked copy of them from a temporary directory and is stopped after (also on
Ctrl-C). Timed, each in its own process (peak RSS from ``wait4``), over the whole range:

* pushed: ``diagnose_prometheus`` through ``PromClient``, as ``svcdoctor diagnose
  --prometheus URL --start … --end …`` runs it (the aggregation runs in Prometheus);
* raw: the same analysis through ``RawSource``, which pulls the raw samples of every
  selector the queries read and evaluates the same queries client-side with numpy.

Goals: pushed under 30 s, at least 10x fewer bytes than raw, the same verdicts. Prints
PASS/FAIL per goal and exits 1 when one fails.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / "benchmarks" / ".cache"
VERSION = "1"  # bump when the layout of the cache changes


@dataclass(frozen=True, slots=True)
class Scale:
    """The simulated history's parameters (they name its cache directory)."""

    nodes: int = 2_000
    replicas: int = 6
    rollouts: int = 100
    every: float = 6_100.0  # 99 x 6,100 s + a 600 s window: 7 days
    window: float = 600.0
    rate: float = 200.0
    scrape: float = 30.0
    node_scrape: float = 120.0
    seed: int = 1

    def key(self) -> str:
        sources = [
            ROOT / "src/svcdoctor/simulate" / name
            for name in ("metrics.py", "engine.py", "params.py", "routes.py", "bundle.py")
        ]
        digest = hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode())
        digest.update(VERSION.encode())
        for path in sources:
            digest.update(path.read_bytes())
        return digest.hexdigest()[:16]


TEXT_BYTES_PER_SAMPLE = 116  # measured: 22.3 GB for 193 M samples


def samples(scale: Scale) -> float:
    """About how many samples the history holds: the node series' dominate."""
    span = (scale.rollouts - 1) * scale.every + scale.window
    return scale.nodes * 19 * span / scale.node_scrape


def generate(scale: Scale, folder: Path) -> dict[str, Any]:
    """Simulate, write OpenMetrics, backfill with promtool into ``folder/data``; return
    what the history holds (the simulator's truth) with the times taken."""
    from svcdoctor.simulate.metrics import MetricsPlan, Source, write_openmetrics
    from svcdoctor.simulate.params import SimParams

    promtool = shutil.which("promtool")
    if promtool is None:
        raise SystemExit("needs promtool on PATH (Debian: apt-get install prometheus)")
    p = SimParams(
        nodes=scale.nodes,
        replicas=scale.replicas,
        rate=scale.rate,
        duration=scale.window,
    ).validate()
    plan = MetricsPlan(
        rollouts=scale.rollouts,
        every=scale.every,
        source=Source.ISTIO,
        pod_label=True,
        scrape=scale.scrape,
        node_scrape=scale.node_scrape,
    )
    folder.mkdir(parents=True, exist_ok=True)
    need = TEXT_BYTES_PER_SAMPLE * samples(scale) * 1.1
    if shutil.disk_usage(folder).free < need:
        raise SystemExit(
            f"the OpenMetrics text needs about {need / 1e9:.0f} GB free in {folder} "
            "(deleted after the backfill): give --cache elsewhere"
        )
    text = folder / "history.om"
    data = folder / "data.partial"
    shutil.rmtree(data, ignore_errors=True)
    try:
        t0 = time.perf_counter()
        truth = write_openmetrics(text, p, scale.seed, plan)
        t1 = time.perf_counter()
        size = text.stat().st_size
        subprocess.run(
            [
                promtool,
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                "-q",
                "--max-block-duration=168h",
                str(text),
                str(data),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            timeout=3600,
        )
        t2 = time.perf_counter()
    finally:
        text.unlink(missing_ok=True)
    data.rename(folder / "data")
    return {
        "start": truth.start,
        "end": truth.end,
        "requests": truth.requests,
        "failed": truth.failed,
        "pods": len({*truth.deleted_pods}) + scale.replicas,
        "series": truth.series,
        "samples": truth.samples,
        "text_bytes": size,
        "simulate_seconds": round(t1 - t0, 1),
        "backfill_seconds": round(t2 - t1, 1),
    }


def prepared(scale: Scale, cache: Path = CACHE) -> tuple[Path, dict[str, Any], bool]:
    """The cached blocks of ``scale`` (made when missing): their folder, the truth, and
    whether they were cached already."""
    folder = cache / scale.key()
    done = folder / "history.json"
    if done.exists() and (folder / "data").is_dir():
        return folder / "data", json.loads(done.read_text()), True
    shutil.rmtree(folder, ignore_errors=True)
    truth = generate(scale, folder)
    done.write_text(json.dumps({"scale": asdict(scale), **truth}, indent=1))
    return folder / "data", truth, False


@contextmanager
def serving(data: Path) -> Iterator[str]:
    """A Prometheus on 127.0.0.1 serving a hard-linked copy of the blocks in ``data`` from a
    temporary directory (it may compact or write there); stopped on exit, Ctrl-C or
    SIGTERM. Yields its URL."""
    sys.path.insert(0, str(ROOT))
    from tests.prometheus_server import start_prometheus

    with tempfile.TemporaryDirectory(prefix="svcdoctor-prom-") as tmp:
        copy = Path(tmp) / "data"
        shutil.copytree(data, copy, copy_function=os.link)
        server = start_prometheus(copy, extra_args=["--log.level=warn"])

        def stop(signum: int, frame: FrameType | None) -> None:
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGTERM, stop)
        try:
            yield server.url
        finally:
            server.stop()
            signal.signal(signal.SIGTERM, previous)


CHILD = """
import json, sys, time
from svcdoctor.evidence.prometheus import PromClient
from svcdoctor.evidence.prometheus_raw import RawSource
from svcdoctor.diagnose.metrics import diagnose_prometheus
from svcdoctor.diagnose.stats import preload
from svcdoctor.report.diagnosis import diagnosis_to_dict
with PromClient({url!r}, timeout=600) as client:
    t = time.perf_counter()
    preload()  # as svcdoctor diagnose does
    source = RawSource(client) if {raw!r} else client
    d = diagnose_prometheus(source, None, {start!r}, {end!r})
    wall = time.perf_counter() - t
    print(json.dumps({{"wall": wall, "bytes": client.bytes_pulled,
                      "decoded": client.bytes_decoded, "requests": client.requests,
                      "diagnosis": diagnosis_to_dict(d)}}, default=str))
"""


@dataclass(frozen=True, slots=True)
class Run:
    """One diagnosis in its own process."""

    wall: float
    bytes: int
    decoded: int
    requests: int
    peak: int  # the process's peak RSS, bytes
    diagnosis: dict[str, Any]

    @property
    def verdicts(self) -> dict[str, str]:
        return {c["cause"]: c["verdict"] for c in self.diagnosis.get("causes", [])}


def diagnose(url: str, start: float, end: float, raw: bool) -> Run:
    """``diagnose_prometheus`` over the range in a fresh interpreter (peak RSS: wait4)."""
    code = CHILD.format(url=url, raw=raw, start=start, end=end)
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    out = child.stdout.read()
    _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"the {'raw' if raw else 'pushed'} diagnosis failed")
    got = json.loads(out)
    return Run(
        got["wall"],
        got["bytes"],
        got["decoded"],
        got["requests"],
        usage.ru_maxrss * 1024,
        got["diagnosis"],
    )


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = Scale()
    parser.add_argument("--nodes", type=int, default=default.nodes)
    parser.add_argument("--rollouts", type=int, default=default.rollouts)
    parser.add_argument("--every", type=float, default=default.every)
    parser.add_argument("--node-scrape", type=float, default=default.node_scrape)
    parser.add_argument("--cache", type=Path, default=CACHE, help="where the blocks are kept")
    parser.add_argument("--prepare-only", action="store_true", help="make the cache, stop")
    args = parser.parse_args()
    if not (shutil.which("prometheus") and shutil.which("promtool")):
        raise SystemExit(
            "needs prometheus and promtool on PATH (Debian: apt-get install prometheus)"
        )
    scale = Scale(
        nodes=args.nodes, rollouts=args.rollouts, every=args.every, node_scrape=args.node_scrape
    )
    t = time.perf_counter()
    data, truth, cached = prepared(scale, args.cache)
    print(
        f"history: {scale.nodes:,} nodes, {truth['pods']:,} pods, {scale.rollouts} rollouts over "
        f"{(truth['end'] - truth['start']) / 86_400:.2f} days; {truth['series']:,} series, "
        f"{truth['samples'] / 1e6:,.0f} M samples; {truth['requests']:,} requests, "
        f"{truth['failed']:,} failed"
    )
    if cached:
        print(f"blocks: cached in {data.parent} (delete it to rebuild)")
    else:
        print(
            f"blocks: built in {time.perf_counter() - t:.0f} s (simulate + write "
            f"{truth['text_bytes'] / 1e9:.1f} GB of OpenMetrics {truth['simulate_seconds']:.0f} "
            f"s, promtool {truth['backfill_seconds']:.0f} s), cached in {data.parent}"
        )
    if args.prepare_only:
        return
    start, end = float(truth["start"]), float(truth["end"])
    with serving(data) as url:
        pushed = diagnose(url, start, end, raw=False)
        raw = diagnose(url, start, end, raw=True)
    days = (end - start) / 86_400
    print(f"{f'diagnose --prometheus, {days:.1f} d':<30}{'pushed down':>14}{'raw samples':>14}")
    rows = [
        ("wall time, s", f"{pushed.wall:.1f}", f"{raw.wall:.1f}"),
        ("HTTP requests", f"{pushed.requests:,}", f"{raw.requests:,}"),
        ("MB pulled (gzip, on the wire)", _mb(pushed.bytes), _mb(raw.bytes)),
        ("MB of JSON decoded", _mb(pushed.decoded), _mb(raw.decoded)),
        ("peak RSS, MB", _mb(pushed.peak), _mb(raw.peak)),
        (
            "primary cause",
            str(pushed.diagnosis["primary_cause"]),
            str(raw.diagnosis["primary_cause"]),
        ),
    ]
    for cause in pushed.verdicts:
        rows.append((f"  {cause}", pushed.verdicts[cause], raw.verdicts.get(cause, "-")))
    for name, a, b in rows:
        print(f"{name:<30}{a:>14}{b:>14}")
    ratio = raw.bytes / max(pushed.bytes, 1)
    same = (
        pushed.diagnosis["primary_cause"] == raw.diagnosis["primary_cause"]
        and pushed.verdicts == raw.verdicts
    )
    identical = json.dumps(pushed.diagnosis, sort_keys=True) == json.dumps(
        raw.diagnosis, sort_keys=True
    )
    goals = [
        ("pushed-down diagnosis < 30 s", pushed.wall < 30, f"{pushed.wall:.1f} s"),
        (
            ">= 10x fewer bytes than raw pulls",
            ratio >= 10,
            f"{ratio:,.0f}x on the wire, {raw.decoded / max(pushed.decoded, 1):,.0f}x decoded",
        ),
        (
            "the same verdict",
            same,
            "identical JSON" if identical else "verdicts equal, details differ" if same else "",
        ),
    ]
    for name, ok, detail in goals:
        print(f"{name}: {'PASS' if ok else 'FAIL'} ({detail})")
    if not all(ok for _, ok, _ in goals):
        sys.exit(1)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
