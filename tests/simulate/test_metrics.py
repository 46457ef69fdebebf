"""Simulated history as OpenMetrics: the counts agree with the simulated requests, the
text is what promtool backfills, and a real Prometheus serving the blocks answers with
the simulation's numbers."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from svcdoctor.simulate import ParamError, SimParams, simulate_run
from svcdoctor.simulate.bundle import EPOCH
from svcdoctor.simulate.engine import BAD, CONNTRACK, OK
from svcdoctor.simulate.metrics import MetricsPlan, MetricsTruth, Source, write_openmetrics
from tests.prometheus_server import (
    PROMTOOL,
    PrometheusFactory,
    prometheus_with,  # noqa: F401 (the fixture)
    requires_prometheus,
)

# small and quick: 20 nodes, 6 pods, 100 requests/s, a 2-minute window per rollout
P = SimParams(
    nodes=20, replicas=6, rate=100.0, duration=120.0, rollout_at=20.0, max_surge=2,
    max_unavailable=1,
)  # fmt: skip
HOUR = 3600.0
LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+) (\d+(?:\.\d+)?)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"')

Key = tuple[str, frozenset[tuple[str, str]]]


def parse(path: Path) -> dict[Key, list[tuple[float, float]]]:
    """Every series' (time, value) samples; fails on a line out of the format, a family
    declared twice or interleaved with another, or a series' time not increasing."""
    series: dict[Key, list[tuple[float, float]]] = defaultdict(list)
    families: list[str] = []
    lines = path.read_text().splitlines()
    assert lines[-1] == "# EOF"
    for line in lines[:-1]:
        if line.startswith("# TYPE "):
            name = line.split()[2]
            assert name not in families, f"family {name} declared twice"
            families.append(name)
            continue
        if line.startswith("#"):
            continue
        m = LINE.match(line)
        assert m, line
        name, labels, value, ts = m.groups()
        assert name.startswith(families[-1]), f"{name} outside its family {families[-1]}"
        key = (name, frozenset(LABEL.findall(labels)))
        samples = series[key]
        assert not samples or float(ts) > samples[-1][0], f"time not increasing: {line}"
        samples.append((float(ts), float(value)))
    return series


def last(series: dict[Key, list[tuple[float, float]]], name: str, **match: str) -> float:
    """Sum of the last values of the series of ``name`` whose labels include ``match``
    (a value starting with ``!`` excludes)."""
    total = 0.0
    for (n, labels), samples in series.items():
        lab = dict(labels)
        ok = all(
            lab.get(k) != v[1:] if v.startswith("!") else lab.get(k) == v for k, v in match.items()
        )
        if n == name and ok:
            total += samples[-1][1]
    return total


def history(
    tmp_path: Path, p: SimParams = P, seed: int = 1, **plan: Any
) -> tuple[Path, MetricsTruth]:
    """Write the history of ``plan`` to a file; the file and what it holds."""
    out = tmp_path / "history.om"
    return out, write_openmetrics(out, p, seed, MetricsPlan(**plan))


def failures(run_mechanism: np.ndarray) -> int:
    return int((run_mechanism != OK).sum())


def test_nginx_counts_are_the_simulated_requests(tmp_path: Path) -> None:
    out, truth = history(tmp_path, rollouts=3, every=HOUR)
    s = parse(out)
    name = "nginx_ingress_controller_requests"
    assert last(s, name) == truth.requests
    assert last(s, name, status="!200") == truth.failed == sum(w.failed for w in truth.windows)
    # the windows are the engine's runs (seeds 1, 2, 3), placed an hour apart
    first = simulate_run(P, 1)
    assert truth.windows[0].failed == failures(first.traffic.mechanism) > 0
    assert truth.windows[0].requests == len(first.traffic.ts)
    assert [w.start for w in truth.windows] == [EPOCH, EPOCH + HOUR, EPOCH + 2 * HOUR]
    assert truth.end == EPOCH + 2 * HOUR + P.duration
    # between rollouts: the rate's traffic, no failure (healthy pods, no full table)
    between = truth.requests - sum(w.requests for w in truth.windows)
    assert between == pytest.approx(P.rate * (2 * HOUR - 2 * P.duration), rel=0.01)
    for (n, _), samples in s.items():
        values = [v for _, v in samples]
        if n == name:
            assert values[0] == 0
            assert values == sorted(values)
        assert all(EPOCH <= t <= truth.end and (t - EPOCH) % 15 == 0 for t, _ in samples)


def test_lifecycle_series_follow_the_pods(tmp_path: Path) -> None:
    p = replace(P, prestop=20.0, shutdown="graceful", grace=45.0)
    out, truth = history(tmp_path, p, rollouts=2, every=HOUR)
    s = parse(out)
    run = simulate_run(p, 1)
    deleted = {
        f"api-7f6d5c4b3-{j:03d}": EPOCH + float(run.pods.deleted[j]) for j in range(p.replicas)
    }
    seen = {
        dict(labels)["pod"]: samples[0][1]
        for (n, labels), samples in s.items()
        if n == "kube_pod_deletion_timestamp" and "7f6d5c4b3" in dict(labels)["pod"]
    }
    # preStop keeps every deleted pod's object through at least one scrape; the value is
    # metadata.deletionTimestamp, the end of the grace period (as kube-state-metrics has it)
    assert seen == {pod: pytest.approx(t + p.grace, abs=0.5) for pod, t in deleted.items()}
    assert len(truth.deleted_pods) == 2 * p.replicas
    owners = {dict(labels)["owner_name"] for (n, labels) in s if n == "kube_pod_owner"}
    assert len(owners) == 3
    assert {"api-7f6d5c4b3", "api-5b4c3d2e1"} <= owners
    ready = {
        dict(labels)["pod"]: samples
        for (n, labels), samples in s.items()
        if n == "kube_pod_status_ready" and dict(labels)["condition"] == "true"
    }
    new = "api-5b4c3d2e1-000"
    became = min(t for t, v in ready[new] if v == 1)
    assert 0 <= became - (EPOCH + float(run.pods.ready[p.replicas])) < 15
    # every kube-proxy observed every endpoint change of the first window
    count = last(s, "kubeproxy_network_programming_duration_seconds_count")
    changes = 2 * 2 * p.replicas  # per rollout: each new pod's Ready, each old pod's deletion
    assert count == p.nodes * changes
    inf = last(s, "kubeproxy_network_programming_duration_seconds_bucket", le="+Inf")
    assert inf == count


def test_fixed_race_fails_nothing_and_the_race_fails_only_in_rollouts(tmp_path: Path) -> None:
    _, fixed = history(
        tmp_path, replace(P, prestop=10.0, shutdown="graceful", grace=45.0), rollouts=2, every=HOUR
    )
    assert fixed.failed == 0
    assert fixed.requests > 0
    _, racy = history(tmp_path, rollouts=2, every=HOUR)
    assert racy.failed == sum(w.failed for w in racy.windows) > 0


def test_istio_bad_pod_has_its_own_failures(tmp_path: Path) -> None:
    p = replace(P, rollout=False, bad_backends=1)
    out, truth = history(tmp_path, p, source=Source.ISTIO, pod_label=True)
    s = parse(out)
    run = simulate_run(p, 1)
    (bad,) = truth.bad_pods
    name = "istio_requests_total"
    assert last(s, name, destination_pod=bad, response_code="503") == int(
        (run.traffic.mechanism == BAD).sum()
    )
    assert last(s, name, destination_pod=bad, response_code="200") == 0
    assert last(s, name, response_code="!200") == truth.failed == failures(run.traffic.mechanism)
    for (n, labels), _ in s.items():
        if n == name:
            assert dict(labels)["reporter"] == "source"
            assert dict(labels)["destination_workload"] == "api"


def test_conntrack_pressure_on_one_node(tmp_path: Path) -> None:
    # 4 clients on 3 nodes: node-0000 carries two (50 new connections/s x 120 s TIME_WAIT =
    # 6,000 entries against a 5,000 limit), the others 3,000 each
    p = replace(P, nodes=3, clients=4, conntrack_max=5000)
    out, truth = history(tmp_path, p, rollouts=2, every=HOUR)
    s = parse(out)
    assert set(truth.conntrack_drops) == {"node-0000"}
    drops = last(s, "node_nf_conntrack_stat_drop", node="node-0000")
    assert drops == truth.conntrack_drops["node-0000"]
    assert drops == pytest.approx((1 - 5000 / 6000) * 50 * (HOUR + P.duration), rel=0.1)
    run = simulate_run(p, 1)
    assert truth.windows[0].failed >= int((run.traffic.mechanism == CONNTRACK).sum())
    assert last(s, "node_nf_conntrack_entries", node="node-0000") == 5000
    assert last(s, "node_nf_conntrack_entries", node="node-0001") == 3000
    assert last(s, "node_nf_conntrack_stat_drop", node="node-0001") == 0
    assert last(s, "nginx_ingress_controller_requests", status="504") >= drops


def test_keepalive_mismatch_fails_idle_connections_outside_rollouts(tmp_path: Path) -> None:
    # 20 clients, 5 requests/s each on one kept-alive connection; the server closes
    # connections idle for 1 s: about e^-5 = 0.7 % of requests find theirs closed
    p = replace(P, connection="keepalive", clients=20, shutdown="graceful", prestop=10.0)
    out, truth = history(tmp_path, p, rollouts=2, every=HOUR, source=Source.ISTIO, idle_timeout=1.0)
    uc = truth.by_label["503 UC"]
    assert uc == pytest.approx(truth.requests * math.exp(-5), rel=0.2)
    assert sum(w.failed for w in truth.windows) < uc / 10  # mostly between rollouts
    s = parse(out)
    assert last(s, "istio_requests_total", response_flags="UC") == uc
    _, none = history(tmp_path, p, rollouts=2, every=HOUR, source=Source.ISTIO)
    assert none.failed == 0


def test_bad_plans_are_refused_in_one_line() -> None:
    for plan, words in (
        (MetricsPlan(every=10.0, rollouts=2), "overlap"),
        (MetricsPlan(pod_label=True), "istio"),
        (MetricsPlan(idle_timeout=1.0), "kept-alive"),
        (MetricsPlan(scrape=0.5), "scrape"),
    ):
        with pytest.raises(ParamError, match=words):
            plan.validate(P)
    with pytest.raises(ParamError, match="drop --no-rollout"):
        MetricsPlan(rollouts=2).validate(replace(P, rollout=False))
    with pytest.raises(ParamError, match="does not finish"):
        write_openmetrics(Path("/dev/null"), replace(P, rollout_at=110.0), 1, MetricsPlan(2, HOUR))


def _query(url: str, promql: str, at: float) -> list[dict[str, object]]:
    q = urllib.parse.urlencode({"query": promql, "time": f"{at:.3f}"})
    with urllib.request.urlopen(f"{url}/api/v1/query?{q}", timeout=30) as r:
        body = json.load(r)
    assert body["status"] == "success", body
    result: list[dict[str, object]] = body["data"]["result"]
    return result


def _value(url: str, promql: str, at: float) -> float:
    result = _query(url, promql, at)
    assert len(result) == 1, (promql, result)
    value = result[0]["value"]
    assert isinstance(value, list)
    return float(value[1])


@requires_prometheus
def test_prometheus_serves_the_simulated_counts(
    tmp_path: Path,
    prometheus_with: PrometheusFactory,  # noqa: F811
) -> None:
    p = replace(P, bad_backends=0)
    out, truth = history(tmp_path, p, rollouts=3, every=6 * HOUR)
    url = prometheus_with(out)
    end = truth.end
    failed = 'nginx_ingress_controller_requests{status!="200"}'
    assert _value(url, f"sum({failed})", end) == truth.failed
    assert _value(url, "sum(nginx_ingress_controller_requests)", end) == truth.requests
    # increase() over the whole history: Prometheus extrapolates at the edges only
    span = int(end - truth.start)
    assert _value(url, f"sum(increase({failed}[{span + 15}s]))", end) == pytest.approx(
        truth.failed, rel=0.02
    )
    # each rollout's failures: the counter's growth over its window
    before = 0.0
    for w in truth.windows:
        after = _value(url, f"sum({failed})", w.start + P.duration)
        assert after - before == w.failed
        before = after
    # kube-proxy's programming latency: a quantile over every node
    q = _value(
        url,
        "histogram_quantile(0.5, sum by (le) (rate("
        f"kubeproxy_network_programming_duration_seconds_bucket[{span + 15}s])))",
        end,
    )
    assert 0 < q < 10
    # four ReplicaSets (three rollouts), each owning the pods of one generation
    owners = f"count by (owner_name) (last_over_time(kube_pod_owner[{span + 15}s]))"
    assert sorted(float(r["value"][1]) for r in _query(url, owners, end)) == [6.0] * 4  # type: ignore[index]


@pytest.mark.skipif(PROMTOOL is None, reason="needs promtool (Debian: apt-get install prometheus)")
def test_cli_writes_what_promtool_backfills(tmp_path: Path) -> None:
    out = tmp_path / "cli.om"
    args = [
        sys.executable, "-m", "svcdoctor", "simulate", "--nodes", "10", "--replicas", "4",
        "--rate", "50", "--duration", "90", "--runs", "1", "--format", "json",
        "--emit-metrics", str(out), "--rollouts", "2", "--every", "30m",
        "--metrics-source", "istio", "--metrics-pod-label",
    ]  # fmt: skip
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    s = parse(out)
    pods = {dict(labels).get("destination_pod") for (n, labels) in s if n == "istio_requests_total"}
    assert len(pods) >= 8  # two rollouts of 4 pods, each pod its own series
    blocks = subprocess.run(
        [str(PROMTOOL), "tsdb", "create-blocks-from", "openmetrics", str(out), str(tmp_path / "b")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert blocks.returncode == 0, blocks.stderr
    bad = subprocess.run(
        [*args[:-9], "--rollouts", "2"], capture_output=True, text=True, timeout=300, check=False
    )
    assert bad.returncode == 2
    assert "--emit-metrics" in bad.stderr
