"""The Prometheus client against a real Prometheus serving backfilled OpenMetrics, and a
real aiohttp server for what Prometheus itself will not do (auth, slow or foreign answers)."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

httpx2 = pytest.importorskip("httpx2", reason="the live extra (httpx2) is not installed")

from svcdoctor.evidence.prometheus import (  # noqa: E402
    MAX_POINTS,
    PromClient,
    PrometheusAuthError,
    PrometheusError,
    PrometheusQueryError,
    PrometheusUnreachable,
    PrometheusURLError,
    chunks,
)
from svcdoctor.model.series import Series  # noqa: E402
from tests.prometheus_server import (  # noqa: E402
    PrometheusFactory,
    http_server,
    prometheus_with,  # noqa: F401 (the fixture)
    write_openmetrics,
)

T0 = 1_700_000_000  # 2023-11-14T22:13:20Z
SCRAPE = 15
DAY = 86_400
PODS = ("api-1", "api-2", "api-3")


def _history(path: Path, days: int = 2) -> Path:
    """Three pods' request counters (pod i grows by i+1 per scrape; api-3 also fails) over
    ``days`` days, and a gauge that exists only on the last day."""
    n = days * DAY // SCRAPE + 1
    requests = []
    for i, pod in enumerate(PODS):
        ok = [(T0 + k * SCRAPE, float(k * (i + 1))) for k in range(n)]
        requests.append(({"service": "api", "pod": pod, "status": "200"}, ok))
    bad = [(T0 + k * SCRAPE, float(k // 10)) for k in range(n)]
    requests.append(({"service": "api", "pod": "api-3", "status": "502"}, bad))
    last_day = [(T0 + k * SCRAPE, 1000.0 + k % 7) for k in range((days - 1) * DAY // SCRAPE, n)]
    return write_openmetrics(
        path,
        {
            "http_requests": requests,
            "node_nf_conntrack_entries": [({"instance": "node-1"}, last_day)],
        },
        {"http_requests": "counter", "node_nf_conntrack_entries": "gauge"},
    )


@pytest.fixture
def history_url(prometheus_with: PrometheusFactory, tmp_path: Path) -> str:  # noqa: F811
    return prometheus_with(_history(tmp_path / "history.om"))


# -- chunking, pure -----------------------------------------------------------------------


@given(
    start=st.integers(-(10**12), 10**13),
    points=st.integers(1, 50_000),
    step=st.integers(1, 10**7),
    extra=st.integers(0, 10**7),
    max_points=st.integers(1, MAX_POINTS),
)
def test_chunks_cover_the_grid_exactly_once(
    start: int, points: int, step: int, extra: int, max_points: int
) -> None:
    end = start + (points - 1) * step + extra % step
    runs = list(chunks(start, end, step, max_points))
    grid = [t for first, last in runs for t in range(first, last + 1, step)]
    assert grid == list(range(start, end + 1, step))
    assert all((last - first) // step + 1 <= max_points for first, last in runs)
    assert len(runs) == -(-points // max_points)


def test_client_has_the_shape_the_analysis_needs() -> None:
    """diagnose.metrics takes a MetricsSource Protocol (it may not import the readers):
    every method of it exists on PromClient with the same parameters."""
    metrics = pytest.importorskip("svcdoctor.diagnose.metrics")
    protocol = metrics.MetricsSource
    wanted = [n for n in vars(protocol) if not n.startswith("_")]
    assert wanted
    for name in wanted:
        theirs = inspect.signature(getattr(protocol, name)).parameters
        ours = inspect.signature(getattr(PromClient, name)).parameters
        assert list(theirs) == list(ours)[: len(theirs)], name


# -- against a real Prometheus ------------------------------------------------------------


def test_range_query_returns_the_backfilled_samples(history_url: str) -> None:
    with PromClient(history_url) as client:
        got = client.query_range('http_requests_total{status="200"}', T0, T0 + 3600, SCRAPE)
    assert [s.labels["pod"] for s in got] == list(PODS)
    for i, s in enumerate(got):
        assert dict(s.labels) == {
            "__name__": "http_requests_total",
            "service": "api",
            "pod": PODS[i],
            "status": "200",
        }
        assert np.array_equal(s.t, T0 + SCRAPE * np.arange(3600 // SCRAPE + 1))
        assert np.array_equal(s.v, (i + 1) * np.arange(3600 // SCRAPE + 1, dtype=float))


def test_a_range_over_the_point_limit_is_chunked_and_identical(history_url: str) -> None:
    start, end = T0, T0 + 2 * DAY  # 11,521 points per series at 15 s: over 11,000
    query = "sum by (pod) (increase(http_requests_total[1m]))"
    with PromClient(history_url) as client:
        fine = client.query_range(query, start, end, SCRAPE)
        assert client.requests == 2  # one request would be refused (checked below)
        coarse = client.query_range(query, start, end, 2 * SCRAPE)
        assert client.requests == 3
    one = httpx2.post(
        f"{history_url}/api/v1/query_range",
        data={"query": query, "start": start, "end": end, "step": SCRAPE},
    )
    assert one.status_code == 400
    assert "exceeded maximum resolution" in one.json()["error"]
    # increase() needs two samples: no value at the first time, one at every later one
    assert [len(s) for s in fine] == [2 * DAY // SCRAPE] * 3
    assert all(np.array_equal(s.t, T0 + SCRAPE * np.arange(1, len(s) + 1)) for s in fine)
    assert [s.labels for s in fine] == [s.labels for s in coarse]
    for f, c in zip(fine, coarse, strict=True):
        # the coarse grid is every other time of the fine one: the same values there
        common, fi, ci = np.intersect1d(f.t, c.t, return_indices=True)
        assert len(common) == len(c) == DAY // SCRAPE
        assert np.array_equal(f.v[fi], c.v[ci])
    # api-1 grows by 1 per scrape: 4 per minute once the window is full, seam or not
    assert np.all(fine[0].v[3:] == 4.0)
    # smaller chunks, same answer, more requests
    with PromClient(history_url, max_points=997) as small:
        assert small.query_range(query, start, end, SCRAPE) == fine
        assert small.requests == -(-(2 * DAY // SCRAPE + 1) // 997)


def test_a_chunk_refused_for_too_many_samples_is_halved(
    prometheus_with: PrometheusFactory,  # noqa: F811
    tmp_path: Path,
) -> None:
    url = prometheus_with(
        _history(tmp_path / "h.om", days=1), extra_args=["--query.max-samples=700"]
    )
    query = "http_requests_total"  # 4 series: 400 points at a time is too many
    with PromClient(url) as client:
        got = client.query_range(query, T0, T0 + 6000, SCRAPE)
        assert client.requests > 1
    assert len(got) == 4
    assert all(len(s) == 6000 // SCRAPE + 1 for s in got)
    assert np.array_equal(got[0].v, np.arange(401, dtype=float))
    with PromClient(url, max_points=100) as fits:  # 400 samples per request: allowed
        assert fits.query_range(query, T0, T0 + 6000, SCRAPE) == got


def test_instant_query_discovery_and_label_names(history_url: str) -> None:
    with PromClient(history_url) as client:
        total = client.query('sum(http_requests_total{status="200"})', T0 + 3600)
        assert len(total) == 1
        assert dict(total[0].labels) == {}
        assert total[0].t.tolist() == [T0 + 3600]
        assert total[0].v.tolist() == [240.0 * 6]
        scalar = client.query("scalar(vector(3))", T0)
        assert scalar == [Series({}, [T0], [3.0])]
        both = {"http_requests_total", "node_nf_conntrack_entries"}
        assert client.series_names(T0, T0 + 2 * DAY) == both
        # the gauge exists only on the second day: not in a range that ends on the first
        # (Prometheus answers at block granularity: promtool writes 2-hour blocks)
        assert client.series_names(T0, T0 + 6 * 3600) == {"http_requests_total"}
        assert client.series_names(T0, T0 + 2 * DAY, ['{instance="node-1"}']) == {
            "node_nf_conntrack_entries"
        }
        assert client.series_names(T0 - 30 * DAY, T0 - 29 * DAY) == set()
        assert client.label_names(T0, T0 + 2 * DAY, ["http_requests_total"]) == {
            "__name__",
            "pod",
            "service",
            "status",
        }
        assert client.query_range("nonexistent_metric", T0, T0 + 600, SCRAPE) == []


def test_bytes_pulled_counts_every_answer_and_aggregates_pull_less(history_url: str) -> None:
    with PromClient(history_url) as raw, PromClient(history_url) as pushed:
        raw.query_range("http_requests_total", T0, T0 + DAY, SCRAPE)
        pushed.query_range("sum(increase(http_requests_total[1h]))", T0, T0 + DAY, 3600)
        assert raw.bytes_pulled > 0
        assert pushed.bytes_pulled > 0
        assert raw.bytes_pulled > 20 * pushed.bytes_pulled
        before = pushed.bytes_pulled
        pushed.series_names(T0, T0 + DAY)
        assert pushed.bytes_pulled > before
        # on the wire the server compresses what it sends; decoded is the JSON itself
        assert raw.bytes_decoded > raw.bytes_pulled > 0
        assert pushed.requests == 2


def test_a_structured_query_is_sent_as_its_promql(history_url: str) -> None:
    """``diagnose``'s Query records render themselves; the client sends the text."""
    from svcdoctor.diagnose.metrics_history import Agg, Fn, Query, Selector

    query = Query(Agg.SUM, Fn.GROWTH, Selector("http_requests_total"), 3600.0, ("status",))
    with PromClient(history_url) as client:
        assert client.query_range(query, T0, T0 + DAY, 3600) == client.query_range(
            query.promql, T0, T0 + DAY, 3600
        )
        assert client.query(query, T0 + DAY) == client.query(query.promql, T0 + DAY)


def test_a_bad_query_is_one_line_with_prometheus_text(history_url: str) -> None:
    with PromClient(history_url) as client, pytest.raises(PrometheusQueryError) as err:
        client.query_range("sum(rate(http_requests_total[5m])", T0, T0 + 600, SCRAPE)
    assert err.value.status == 400
    assert err.value.error_type == "bad_data"
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"Prometheus at {history_url} answered 400 (bad_data)")
    assert "parse error" in message
    assert "unclosed left parenthesis" in message
    assert err.value.exit_code == 2


def test_a_stopped_server_is_unreachable(
    prometheus_with: PrometheusFactory,  # noqa: F811
) -> None:
    server = prometheus_with.start(None)
    with PromClient(server.url, timeout=5) as client:
        assert client.series_names(T0, T0 + 60) == set()
        server.stop()
        with pytest.raises(PrometheusUnreachable, match="cannot reach Prometheus at") as err:
            client.query("up", T0)
    assert "\n" not in str(err.value)
    assert server.url in str(err.value)


# -- what a proxy in front of Prometheus does ---------------------------------------------


def _matrix(labels: dict[str, str], points: list[tuple[float, str]]) -> dict[str, Any]:
    return {
        "status": "success",
        "warnings": ["partial response"],
        "data": {"resultType": "matrix", "result": [{"metric": labels, "values": points}]},
    }


def test_headers_are_sent_and_auth_failures_are_one_line() -> None:
    web = pytest.importorskip("aiohttp.web")
    seen: list[tuple[str, str]] = []

    async def handler(request: Any) -> Any:
        seen.append((request.path, request.headers.get("Authorization", "")))
        if request.headers.get("Authorization") == "Bearer good":
            form = await request.post()
            assert form["query"] == "up"
            return web.json_response(_matrix({"job": "x"}, [(T0, "1"), (T0 + 15, "NaN")]))
        if request.headers.get("Authorization"):
            return web.Response(status=403, text="forbidden: wrong tenant\n")
        return web.Response(status=401, text="<html>\n<b>login</b>\n</html>")

    with http_server(handler) as base:
        url = f"{base}/prom/"  # a path prefix, as Thanos, Mimir or a proxy may need
        with PromClient(url, {"Authorization": "Bearer good"}) as client:
            got = client.query_range("up", T0, T0 + 15, 15)
            assert client.warnings == ["partial response"]
        assert got[0].labels == {"job": "x"}
        assert got[0].t.tolist() == [T0, T0 + 15]
        assert got[0].v[0] == 1.0
        assert np.isnan(got[0].v[1])
        assert seen[-1] == ("/prom/api/v1/query_range", "Bearer good")
        with PromClient(url) as client, pytest.raises(PrometheusAuthError) as err:
            client.query("up", T0)
        assert "401 Unauthorized" in str(err.value)
        assert "--header" in str(err.value)
        assert "\n" not in str(err.value)
        bad = PromClient(url, {"Authorization": "Bearer bad"})
        with bad, pytest.raises(PrometheusAuthError, match="403 Forbidden: forbidden: wrong"):
            bad.series_names(T0, T0 + 1)


def test_foreign_and_failing_answers_are_one_line_errors() -> None:
    web = pytest.importorskip("aiohttp.web")

    async def handler(request: Any) -> Any:
        if request.path.startswith("/html/"):
            return web.Response(text="<html><body>Grafana login</body></html>")
        if request.path.startswith("/down/"):
            return web.Response(status=502, text="Bad Gateway\nupstream down\n")
        if request.path.startswith("/bad/"):
            matrix = {"resultType": "matrix", "result": [{"metric": {}, "values": [["x", "1"]]}]}
            return web.json_response({"status": "success", "data": matrix})
        if request.path.startswith("/slow/"):
            await asyncio.sleep(3)
        return web.json_response({"status": "success", "data": ["a", "b"]})

    with http_server(handler) as base:
        with PromClient(f"{base}/html") as client, pytest.raises(PrometheusQueryError) as err:
            client.query("up", T0)
        assert "is it a Prometheus query API?" in str(err.value)
        with PromClient(f"{base}/down") as client, pytest.raises(PrometheusQueryError) as err:
            client.query_range("up", T0, T0 + 60, 15)
        assert err.value.status == 502
        assert not err.value.too_large
        assert str(err.value).endswith(
            "answered 502 to up: Bad Gateway upstream down (after 6 attempts)"
        )
        slow = PromClient(f"{base}/slow", timeout=0.5)
        with slow, pytest.raises(PrometheusUnreachable, match=r"did not answer within 0\.5 s"):
            slow.series_names(T0, T0 + 60)
        bad = PromClient(f"{base}/bad")
        with bad, pytest.raises(PrometheusQueryError, match="malformed samples"):
            bad.query_range("up", T0, T0 + 60, 15)
        with PromClient(f"{base}/ok") as client:
            assert client.label_names(T0, T0 + 60) == {"a", "b"}


@pytest.mark.parametrize(
    "url",
    ["localhost:9090", "ftp://prometheus:9090", "http://", "http://host:port/", "http://h/?q=1"],
)
def test_bad_urls_are_refused_before_any_request(url: str) -> None:
    with pytest.raises(PrometheusURLError, match="bad Prometheus URL"):
        PromClient(url)


def test_headers_must_be_ascii() -> None:
    with pytest.raises(PrometheusError, match="'X-Tenant': HTTP headers must be ASCII text"):
        PromClient("http://127.0.0.1:9", {"X-Tenant": "équipe"})


def test_bad_ranges_are_refused() -> None:
    with PromClient("http://127.0.0.1:9") as client:
        with pytest.raises(PrometheusError, match="before it starts"):
            client.query_range("up", T0 + 10, T0, 15)
        with pytest.raises(PrometheusError, match="at least 1 ms"):
            client.query_range("up", T0, T0 + 10, 0)
        with pytest.raises(PrometheusError, match="finite"):
            client.query("up", float("nan"))
        assert client.requests == 0


def test_series_are_read_only_and_compare_by_value() -> None:
    given = np.array([1.0, np.nan])
    s = Series({"a": "1"}, [T0, T0 + 15], given)
    assert s == Series({"a": "1"}, np.array([T0, T0 + 15]), [1.0, float("nan")])
    assert s != Series({"a": "2"}, [T0, T0 + 15], given)
    assert len(s) == 2
    assert s.key() == (("a", "1"),)
    assert given.flags.writeable  # the caller's array is left as it was
    with pytest.raises(ValueError, match="read-only"):
        s.v[0] = 2.0
    with pytest.raises(TypeError):
        s.labels["a"] = "2"  # type: ignore[index]
    with pytest.raises(ValueError, match="differ in shape"):
        Series({}, [T0], [1.0, 2.0])
