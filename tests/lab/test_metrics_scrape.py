"""A real Prometheus scrapes a lab rollout served by ``lab serve`` (its ``/metrics``: the
node proxies' or load generator's ingress-nginx counters, kube-state-metrics from the served
objects, kube-proxy's programming latency), and ``svcdoctor diagnose --prometheus`` reads
the scraped history: the race scenario names the race.

The serve runs in a thread of the test process (its ``ServeInfo`` names the endpoints);
Prometheus scrapes every second. Two serves (module fixtures) feed the tests; each takes
about 75 s."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from svcdoctor.diagnose.metrics_race import WINDOW_GRID
from svcdoctor.lab.cleanup import leftovers, pod_processes
from svcdoctor.lab.kernel import available
from svcdoctor.lab.metrics import PROGRAMMING, RequestFlavour, scrape_config
from svcdoctor.lab.scenarios import SCENARIOS
from svcdoctor.lab.serve import ServeInfo, ServeResult, serve
from tests.prometheus_server import (
    PROMTOOL,
    PrometheusFactory,
    PromServer,
    requires_prometheus,
    scraped,
)

pytestmark = [pytest.mark.lab, requires_prometheus]
KERNEL_MISSING = available()
SVCDOCTOR = str(Path(sys.executable).with_name("svcdoctor"))
SCRAPE = 1.0  # seconds between scrapes
ROLLOUT_AT = 20.0  # seconds of baseline the store holds before the rollout
DURATION = 70.0  # the serve: baseline, a rollout of four pods, a quiet tail (the placement
# test of the deletions needs a range well beyond its 30 s window)


@dataclass
class Served:
    """One lab serve in a thread, scraped by a real Prometheus."""

    info: ServeInfo | None = None
    result: ServeResult | None = None
    error: BaseException | None = None
    started: float = 0.0
    ended: float = 0.0
    announced: threading.Event = field(default_factory=threading.Event)


def _serve_scraped(
    prom: PrometheusFactory,
    scenario: str,
    datapath: str,
    tmp: Path,
    flavours: tuple[RequestFlavour, ...] = (RequestFlavour.NGINX,),
) -> tuple[Served, PromServer]:
    served = Served(started=time.time())

    def announce(info: ServeInfo) -> None:
        served.info = info
        served.announced.set()

    def run() -> None:
        try:
            served.result = asyncio.run(
                serve(
                    SCENARIOS[scenario],
                    datapath,
                    tmp / "kubeconfig",
                    DURATION,
                    ROLLOUT_AT,
                    seed=3,
                    announce=announce,
                    request_metrics=flavours,
                    truth=tmp / "truth.json",
                )
            )
        except BaseException as exc:  # reported by the test, not lost in the thread
            served.error = exc
        finally:
            served.ended = time.time()
            served.announced.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert served.announced.wait(120), "the lab did not start serving within 120 s"
    try:
        assert served.info is not None, served.error
        config = scrape_config(served.info.metrics, SCRAPE)
        server = prom.scraping(config)
    finally:
        thread.join(DURATION + 120)
    assert not thread.is_alive(), "the serve did not end"
    assert served.error is None, served.error
    return served, server


def _no_strays(lab: int) -> None:
    """No pod process of the lab process ``lab`` (its pods name it as their parent; other
    labs on the machine are not ours to judge, as in test_drain.py) and no namespace of a
    run that ended."""
    procs = pod_processes().items()
    assert [p for p, (run, named, _) in procs if run.startswith("svcd") and named == lab] == []
    assert leftovers().namespaces == ()


def _value(url: str, promql: str) -> float:
    got = scraped(url, promql)
    assert got, f"no result for {promql}"
    return float(got[0]["value"][1])


@dataclass(frozen=True)
class Scraped:
    scenario: str
    served: Served
    url: str
    truth: Path  # the serve's ground truth (each deleted pod's timeline), written at its end


def _scraped(
    scenario: str, datapath: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Scraped]:
    if datapath == "kernel" and KERNEL_MISSING:
        pytest.skip(KERNEL_MISSING)
    prom = PrometheusFactory(tmp_path_factory.mktemp(f"prometheus-{scenario}-{datapath}"))
    try:
        tmp = tmp_path_factory.mktemp(f"{scenario}-{datapath}")
        served, server = _serve_scraped(prom, scenario, datapath, tmp)
        _no_strays(os.getpid())  # the serve ran in a thread of this process
        yield Scraped(scenario, served, server.url, tmp / "truth.json")
    finally:
        prom.stop_all()


@pytest.fixture(scope="module")
def race(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    """The race scenario served and scraped on the kernel datapath (its counters come from
    the load generator; the fixed run below scrapes the userspace proxies' own)."""
    yield from _scraped("race", "kernel", tmp_path_factory)


@pytest.fixture(scope="module")
def fixed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    """The fixed variant (preStop sleep, graceful shutdown), on the userspace datapath."""
    yield from _scraped("race-fixed", "userspace", tmp_path_factory)


def test_the_store_holds_the_labs_requests_and_lifecycle(race: Scraped) -> None:
    _check_store(race)


def test_the_store_holds_the_fixed_labs_requests_and_lifecycle(fixed: Scraped) -> None:
    _check_store(fixed)


def _check_store(lab: Scraped) -> None:
    """The scraped series hold the lab's own counts: every request the clients made (but
    the last moment's), exactly its failures, every deletion, the owners."""
    result = lab.served.result
    assert result is not None
    assert result.rolled_out
    url = lab.url
    window = f"[{DURATION + 60:g}s]"
    total = _value(url, f"sum(max_over_time(nginx_ingress_controller_requests{window}))")
    failed = _value(
        url,
        f'sum(max_over_time(nginx_ingress_controller_requests{{status=~"5.."}}{window}))'
        " or vector(0)",  # no failure: no 5xx series at all, as with ingress-nginx
    )
    # the last scrape is at most a scrape interval (and a moment) before the lab stopped
    rate = SCENARIOS["race"].load.rate
    assert result.requests - 3 * rate * SCRAPE <= total <= result.requests
    # the failures came with the rollout, long before the end; the fix has none
    assert failed == result.failed
    assert (failed > 0) == (lab.scenario == "race")
    replicas = SCENARIOS[lab.scenario].replicas
    assert _value(url, f"count(count_over_time(kube_pod_deletion_timestamp{window}))") == replicas
    owners = scraped(
        url,
        'count by (owner_name) (max_over_time(kube_pod_owner{namespace="lab",'
        f'owner_kind="ReplicaSet"}}{window}))',
    )
    assert {o["metric"]["owner_name"] for o in owners} == {"api-7f6d5c4b3", "api-5b4c3d2e1"}
    sets = scraped(
        url, f"max by (replicaset, owner_name) (max_over_time(kube_replicaset_owner{window}))"
    )
    assert {(o["metric"]["replicaset"], o["metric"]["owner_name"]) for o in sets} == {
        ("api-7f6d5c4b3", "api"),
        ("api-5b4c3d2e1", "api"),
    }
    assert _value(url, f"sum(max_over_time({PROGRAMMING}_count{window}))") > 0


def _diagnosis(lab: Scraped) -> dict[str, Any]:
    """``svcdoctor diagnose --prometheus`` of the Service over the serve, as a user runs it.
    The default step is at least 15 s (a common scrape interval); one rollout of four pods
    in a minute, scraped every second, needs ``--step 1s``."""
    served = lab.served
    done = subprocess.run(
        [
            SVCDOCTOR,
            "diagnose",
            "--prometheus",
            lab.url,
            "--service",
            "lab/api",
            "--start",
            f"{served.started:.3f}",
            "--end",
            f"{served.ended:.3f}",
            "--step",
            f"{SCRAPE:g}s",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_diagnose_prometheus_names_the_race(race: Scraped) -> None:
    report = _diagnosis(race)
    causes = {c["cause"]: c for c in report["causes"]}
    assert report["primary_cause"] == "race", causes["race"]["evidence"]
    # one rollout of four pods in a 70 s range: the placement test of four deletions among
    # 31 s windows has little room, so 'possible' is as strong as it may honestly get
    assert causes["race"]["verdict"] in ("likely", "possible"), causes["race"]["evidence"]
    details = causes["race"]["details"]
    assert details.get("window_seconds") is not None, details
    # the window fitted after each deletion, as kube-state-metrics floors it to the second,
    # to failures counted per scrape step: the true one (how long the last node kept routing
    # to a pod after it stopped accepting, as the lab lived it, slower on a loaded machine),
    # give or take a step, plus up to the deletions' second
    truth = json.loads(race.truth.read_text())["race_window_seconds"]
    assert truth > 0
    assert truth - SCRAPE <= details["window_seconds"] <= truth + 1.0 + SCRAPE + WINDOW_GRID
    assert len(report["rollouts"]) == 1


def test_diagnose_prometheus_names_nothing_when_fixed(fixed: Scraped) -> None:
    report = _diagnosis(fixed)
    assert report["summary"]["errors"] == 0
    assert report["summary"]["deletions"] == SCENARIOS["race-fixed"].replicas
    assert report["primary_cause"] is None, [c["evidence"] for c in report["causes"]]


def test_lab_serve_announces_its_metrics_and_writes_a_scrape_config(tmp_path: Path) -> None:
    """``lab serve --prometheus-config``: the endpoints in the first JSON line, each one
    answering /metrics, and a configuration promtool accepts that scrapes them all."""
    config = tmp_path / "prometheus.yml"
    command = [SVCDOCTOR, "lab", "serve", "--scenario", "race", "--datapath", "userspace"]
    command += ["--for", "20", "--kubeconfig-out", str(tmp_path / "kubeconfig")]
    command += ["--format", "json", "--prometheus-config", str(config)]
    command += ["--scrape-interval", "5s"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        announced = json.loads(proc.stdout.readline())
        targets = announced["metrics"]
        assert {t["job"] for t in targets} == {"kube-state-metrics", "node"}
        nodes = {t["node"] for t in targets if t["job"] == "node"}
        assert nodes == {f"node-{n}" for n in range(SCENARIOS["race"].nodes)}
        for t in targets:
            with urllib.request.urlopen(t["url"], timeout=10) as answer:
                assert answer.status == 200
                assert answer.read().startswith(b"# HELP ")
        text = config.read_text()
        assert "scrape_interval: 5s" in text
        assert all(t["url"].split("//")[1].split("/")[0] in text for t in targets)
        checked = subprocess.run(
            [str(PROMTOOL), "check", "config", str(config)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert checked.returncode == 0, checked.stdout + checked.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    _no_strays(proc.pid)
