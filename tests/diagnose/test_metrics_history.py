"""``diagnose --prometheus``'s structured queries: their PromQL, and the same series from
raw samples evaluated client-side (``RawSource``) as from the store's own evaluation, on
the simulator's history backfilled into a real Prometheus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from svcdoctor.diagnose.metrics import diagnose_prometheus
from svcdoctor.diagnose.metrics_history import (
    Agg,
    Fn,
    Grid,
    Query,
    RequestSource,
    Selector,
    _growth,
    _per_bin,
    counted,
    fetch,
    parse_service,
)
from svcdoctor.evidence.prometheus import PromClient
from svcdoctor.evidence.prometheus_raw import RawSource, _merge, _quantile
from svcdoctor.model.series import Series
from svcdoctor.report.diagnosis import diagnosis_to_dict
from tests.prometheus_server import prometheus_with  # noqa: F401  (the fixture)

SEL = Selector("x_total", ('a="b"',))


def test_queries_render_as_promql() -> None:
    assert Selector("up").promql == "up"
    assert SEL.having('c=~"d|e"').promql == 'x_total{a="b",c=~"d|e"}'
    assert Query(Agg.SUM, Fn.GROWTH, SEL, 15.0).promql == f"sum({counted(SEL.promql, 15.0)})"
    assert (
        Query(Agg.COUNT, Fn.SEEN, SEL, 300.0, ("pod", "ns")).promql
        == 'count by (pod, ns) (count_over_time(x_total{a="b"}[300s]))'
    )
    assert (
        Query(Agg.MAX, Fn.STAMP, SEL, by=("pod",)).promql
        == 'max by (pod) (timestamp(x_total{a="b"}))'
    )
    assert (
        Query(Agg.MAX, Fn.MAX, Selector("e"), 0.5, ("instance",), per=Selector("l")).promql
        == "max by (instance) (max_over_time(e[500ms]) / max_over_time(l[500ms]))"
    )
    # 14 days: %g would write 1.2096e+06, which PromQL does not read
    q = Query(Agg.SUM, Fn.GROWTH, Selector("h_bucket"), 14 * 86_400.0, ("le",), quantile=0.99)
    assert q.promql.startswith("histogram_quantile(0.99, sum by (le) (")
    assert "offset 1209600s" in q.promql


def test_merge_spans() -> None:
    assert _merge([(5, 9), (0, 3), (4, 4), (20, 30), (25, 26)]) == [(0, 9), (20, 30)]
    assert _merge([]) == []


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ([0, 0, 0, 0], float("nan")),  # no observations
        ([10, 10, 10, 10], 0.99 * 1.0),  # all in the first bucket: interpolated from 0
        ([0, 0, 100, 100], 2.0 + 3.0 * 0.99),  # in (2, 5]
        ([0, 0, 0, 100], 5.0),  # in +Inf: the highest finite bound
        ([50, 40, 100, 100], 2.0 + 3.0 * (99 - 50) / 50),  # made monotonic first
    ],
)
def test_histogram_quantile_as_prometheus(counts: list[float], expected: float) -> None:
    bounds = np.array([1.0, 2.0, 5.0, np.inf])
    got = _quantile(0.99, bounds, np.array(counts, dtype=np.float64))
    assert got == pytest.approx(expected, nan_ok=True)


# --- against a real Prometheus -----------------------------------------------------------------


class Recorder:
    """A MetricsSource that passes every query to ``client`` and keeps it with its answer."""

    def __init__(self, client: PromClient) -> None:
        self.client = client
        self.calls: list[tuple[Query, float, float, float, list[Series]]] = []

    def series_names(self, start: float, end: float) -> set[str]:
        return self.client.series_names(start, end)

    def query_range(self, query: Query, start: float, end: float, step: float) -> list[Series]:
        got = self.client.query_range(query, start, end, step)
        self.calls.append((query, start, end, step, got))
        return got


def _history(tmp: Path, **params: Any) -> tuple[Path, Any]:
    from svcdoctor.simulate.metrics import MetricsPlan, Source, write_openmetrics
    from svcdoctor.simulate.params import SimParams

    kw: dict[str, Any] = {"nodes": 20, "replicas": 6, "rate": 100.0, "duration": 300.0}
    p = SimParams(**{**kw, **params}).validate()
    plan = MetricsPlan(
        rollouts=3, every=900.0, source=Source.ISTIO, pod_label=True, node_scrape=30.0
    ).validate(p)
    path = tmp / "history.om"
    return path, write_openmetrics(path, p, 1, plan)


def _same(a: list[Series], b: list[Series]) -> bool:
    return len(a) == len(b) and all(
        dict(x.labels) == dict(y.labels)
        and np.array_equal(x.t, y.t)
        and np.allclose(x.v, y.v, rtol=1e-12, equal_nan=True)
        for x, y in zip(a, b, strict=True)
    )


@pytest.mark.parametrize(
    "params",
    [
        pytest.param({}, id="race"),
        pytest.param(
            {"conntrack_max": 2000, "node_conn_rate": 20.0, "prestop": 10.0},
            id="conntrack-pressure",
        ),
    ],
)
def test_raw_samples_give_what_the_store_computes(
    prometheus_with: Any,  # noqa: F811
    tmp_path: Path,
    params: dict[str, Any],
) -> None:
    """Every query of a diagnosis, evaluated from raw samples, gives the series Prometheus
    gives (labels, times and values), and so the same diagnosis; the raw pulls move more."""
    path, truth = _history(tmp_path, **params)
    url = prometheus_with(path)
    with PromClient(url) as client:
        recorder = Recorder(client)
        pushed = diagnose_prometheus(recorder, None, truth.start, truth.end)
    kinds = {q.fn for q, *_ in recorder.calls}
    assert kinds == set(Fn)  # every function the analysis uses is compared
    with PromClient(url) as client:
        raw = RawSource(client, chunk=600.0)
        for query, start, end, step, want in recorder.calls:
            assert _same(raw.query_range(query, start, end, step), want), query.promql
    with PromClient(url) as client:
        from_raw = diagnose_prometheus(RawSource(client), None, truth.start, truth.end)
        raw_bytes = client.bytes_decoded
    assert json.dumps(diagnosis_to_dict(from_raw), sort_keys=True) == json.dumps(
        diagnosis_to_dict(pushed), sort_keys=True
    )
    assert raw_bytes > 2 * recorder.client.bytes_decoded


def test_per_step_node_counts_ask_only_the_nodes_that_moved(
    prometheus_with: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The conntrack drops per step, asked of the nodes whose counters moved, equal the
    sum over every node; the fill per step is exact where a table is nearly full."""
    # five clients on the first five nodes: their tables overflow, the others stay empty
    path, truth = _history(tmp_path, clients=5, conntrack_max=2000, prestop=10.0)
    assert sorted(truth.conntrack_drops) == [f"node-000{i}" for i in range(5)]
    url = prometheus_with(path)
    with PromClient(url) as client:
        grid = Grid(truth.start, truth.end, 15.0)
        found = client.series_names(truth.start, truth.end)
        ref = parse_service("sim/api", RequestSource.ISTIO)
        h = fetch(client, ref, grid, found)
        assert h.conntrack is not None
        every = _per_bin(client, grid, _growth(Selector("node_nf_conntrack_stat_drop"), 15.0))
        assert np.array_equal(h.conntrack.drop, every)
        assert h.conntrack.drop.sum() == sum(truth.conntrack_drops.values())
        assert sum(n.drop for n in h.conntrack.nodes) == sum(truth.conntrack_drops.values())
        fill = _per_bin(
            client,
            grid,
            Query(
                Agg.MAX,
                Fn.MAX,
                Selector("node_nf_conntrack_entries"),
                15.0,
                per=Selector("node_nf_conntrack_entries_limit"),
            ),
        )
        assert h.conntrack.fill is not None
        high = fill >= 0.5
        assert high.any()
        assert np.array_equal(h.conntrack.fill[high], fill[high])
        assert {n.node: n.fill for n in h.conntrack.nodes}["node-0019:9100"] == 0.0


def test_node_scrape_is_a_multiple_of_the_scrape() -> None:
    """The simulator's node series (what the benchmark's week keeps at 120 s)."""
    from svcdoctor.simulate.metrics import MetricsPlan
    from svcdoctor.simulate.params import ParamError, SimParams

    p = SimParams(nodes=20, replicas=6, duration=300.0).validate()
    assert MetricsPlan(scrape=30.0, node_scrape=120.0).validate(p).node_every == 4
    assert MetricsPlan(scrape=30.0).node_every == 1
    for bad in (45.0, 15.0, float("nan")):
        with pytest.raises(ParamError, match="multiple of the scrape"):
            MetricsPlan(scrape=30.0, node_scrape=bad).validate(p)
