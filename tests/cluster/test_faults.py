"""svcdoctor's own live client against the lab API server's fault mode (``lab serve
--api-fault``): each fault of issue 28's table, and what the client does about it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from svcdoctor.cli import cli
from svcdoctor.cluster import ClusterError
from svcdoctor.cluster.api import connect
from svcdoctor.cluster.reader import Unreachable, WatchGap
from svcdoctor.lab.apiserver import parse_fault
from tests.cluster.conftest import Served, serve
from tests.cluster.test_api import pod


@pytest.fixture
def faulty(tmp_path: Path) -> Iterator[Any]:
    """Start a served API server with the given fault specs (stopped after the test)."""
    running: list[Iterator[Served]] = []

    def start(*specs: str) -> Served:
        where = tmp_path / f"server-{len(running)}"
        where.mkdir()
        served = serve(where, faults=[parse_fault(s) for s in specs])
        running.append(served)
        return next(served)

    yield start
    for served in running:
        for _ in served:  # runs the generator's cleanup
            pass


def _reader(api: Served, timeout: float = 10.0) -> Any:
    return connect(kubeconfig=str(api.kubeconfig), timeout=timeout)


def test_429_with_retry_after_is_waited_for_and_retried(faulty: Any) -> None:
    api = faulty("429:0.5")  # the 1st, 3rd, 5th … request: every list meets one
    api.put(pod("api-0"), pod("api-1"))
    started = time.monotonic()
    names = {p["metadata"]["name"] for p in _reader(api).list("pods", "shop")}
    assert names == {"api-0", "api-1"}
    assert time.monotonic() - started >= 0.9  # it waited the Retry-After second


def test_5xx_on_reads_is_retried_with_backoff(faulty: Any) -> None:
    api = faulty("500:0.5")
    api.put(pod("api-0"))
    reader = _reader(api)
    for _ in range(3):
        assert reader.get("pods", "shop", "api-0") is not None


def test_a_server_that_keeps_failing_gives_one_line_with_the_attempts(faulty: Any) -> None:
    api = faulty("503:1")
    started = time.monotonic()
    with pytest.raises(ClusterError) as err:
        _reader(api).list("pods", "shop")
    assert "503" in str(err.value)
    assert "(after 6 attempts)" in str(err.value)
    assert "\n" not in str(err.value)
    assert time.monotonic() - started < 60


def test_a_slowly_sent_body_is_cut_at_the_request_timeout(faulty: Any) -> None:
    api = faulty("slow-body:20")
    for i in range(20):
        api.put(pod(f"api-{i}"))
    started = time.monotonic()
    with pytest.raises(Unreachable, match="within --request-timeout 1 s"):
        _reader(api, timeout=1.0).list("pods", "shop")
    assert time.monotonic() - started < 5


def test_a_cut_watch_is_resumed_and_sees_the_changes_after_the_cut(faulty: Any) -> None:
    api = faulty("cut-watch:0.7")
    api.put(pod("api-0"))
    gaps: list[WatchGap] = []
    seen: list[tuple[str, str]] = []

    def consume() -> None:
        until = time.time() + 4
        for event in _reader(api).watch("pods", "shop", until=until, on_gap=gaps.append):
            seen.append((event.type, event.object["metadata"]["name"]))

    thread = threading.Thread(target=consume)
    thread.start()
    for i in range(1, 4):  # one change after each cut
        time.sleep(1.0)
        api.put(pod(f"api-{i}"))
    thread.join(timeout=20)
    assert not thread.is_alive()
    assert seen == [("ADDED", f"api-{i}") for i in range(4)]
    assert not [g for g in gaps if g.relisted]  # resumed from its version: nothing lost


def test_an_expired_version_relists_and_reports_the_gap(faulty: Any) -> None:
    api = faulty("cut-watch:0.5", "gone-watch")
    api.put(pod("api-0"))
    gaps: list[WatchGap] = []
    seen: list[tuple[str, str]] = []

    def consume() -> None:
        until = time.time() + 3
        for event in _reader(api).watch("pods", "shop", until=until, on_gap=gaps.append):
            seen.append((event.type, event.object["metadata"]["name"]))

    thread = threading.Thread(target=consume)
    thread.start()
    time.sleep(0.3)
    api.put(pod("api-1"))
    time.sleep(0.2)
    api.put(pod("api-2"))
    # changes the watch does not see (another namespace) move the newest version past the
    # watch's own: resumed after the cut, it is too old (410), as after etcd compaction
    for i in range(5):
        api.put(pod(f"other-{i}", namespace="other"))
    thread.join(timeout=20)
    assert not thread.is_alive()
    assert {name for _, name in seen} == {"api-0", "api-1", "api-2"}
    assert any(g.relisted for g in gaps)
    assert "re-listed: the changes in it are lost" in next(g for g in gaps if g.relisted).text()


def test_collect_when_the_server_is_lost_mid_watch(faulty: Any, tmp_path: Path) -> None:
    from tests.cluster.test_collect import _fixture_objects

    api = faulty("loss-after:1.5")
    for obj in _fixture_objects():
        api.put(obj)
    out = tmp_path / "bundle"
    args = ["collect", "--kubeconfig", str(api.kubeconfig), "-n", "shop", "api", "--out"]
    started = time.monotonic()
    done = CliRunner().invoke(cli, [*args, str(out), "--watch", "4", "-o", "json"])
    assert done.exit_code == 3, done.output
    assert time.monotonic() - started < 30
    result = json.loads(done.output)
    assert result["complete"] is False
    assert any("cannot reach the API server" in m for m in result["missing"])


@pytest.mark.parametrize("spec", ["429:0.3", "503:0.3"])
def test_scan_holds_under_throttling_and_errors(faulty: Any, spec: str) -> None:
    from tests.cluster.test_collect import _fixture_objects

    api = faulty(spec)
    for obj in _fixture_objects():
        api.put(obj)
    args = ["scan", "--kubeconfig", str(api.kubeconfig), "-n", "shop", "-o", "json"]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code in (0, 1), done.output  # findings or none, never an error
    assert json.loads(done.output)["summary"]["services"] >= 1


def test_the_loss_fault_is_armed_from_the_start(faulty: Any) -> None:
    api = faulty("loss-after:0.5")
    time.sleep(1.0)
    assert api.server.lost
    with pytest.raises(Unreachable, match="cannot reach"):
        _reader(api, timeout=2.0).version()
