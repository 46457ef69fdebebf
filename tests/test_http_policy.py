"""The request policy against a real HTTP server on loopback: what is retried and how long
it waits, what is not, and the deadline over the whole answer."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx2 as httpx
import pytest

from svcdoctor import http_policy
from svcdoctor.http_policy import ATTEMPTS, DeadlineExceeded, Policy, retry_after, send
from tests.prometheus_server import http_server

web = pytest.importorskip("aiohttp.web", reason="aiohttp (the live extra) is missing")


class Script:
    """Answers the requests to one path in turn from a list of (status, headers)."""

    def __init__(self, *answers: tuple[int, dict[str, str]]) -> None:
        self.answers = list(answers)
        self.seen: list[float] = []

    async def handle(self, request: Any) -> Any:
        self.seen.append(time.monotonic())
        status, headers = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if status == 0:  # the connection cut before an answer
            request.transport.close()
            await asyncio.sleep(0.1)
        return web.Response(status=status or 200, headers=headers, text=f"answer {status}")


def _send(base: str, method: str = "GET", **kw: Any) -> httpx.Response:
    with httpx.Client(base_url=base, timeout=5.0) as client:
        return send(client, client.build_request(method, "/x"), deadline=5.0, **kw)


def test_a_429_is_retried_after_the_seconds_retry_after_asks_for() -> None:
    script = Script((429, {"Retry-After": "1"}), (200, {}))
    with http_server(script.handle) as base:
        response = _send(base)
    assert response.status_code == 200
    assert response.text == "answer 200"
    assert response.extensions[ATTEMPTS] == 2
    assert script.seen[1] - script.seen[0] >= 0.95


def test_5xx_and_a_reset_are_retried_for_reads_with_backoff() -> None:
    script = Script((500, {}), (0, {}), (503, {}), (200, {}))
    with http_server(script.handle) as base:
        assert _send(base).status_code == 200
    assert len(script.seen) == 4


def test_retries_are_bounded_and_the_last_answer_says_how_many() -> None:
    script = Script((503, {}))
    with http_server(script.handle) as base:
        response = _send(base, policy=Policy(attempts=3, first_wait=0.01, max_wait=0.02))
    assert response.status_code == 503
    assert len(script.seen) == 3
    assert http_policy.attempts_text(response) == " (after 3 attempts)"


def test_writes_are_not_retried_blindly_but_a_429_is() -> None:
    failing = Script((500, {}), (200, {}))
    with http_server(failing.handle) as base:
        assert _send(base, "PATCH").status_code == 500
    assert len(failing.seen) == 1  # the server may have acted: not sent again
    throttled = Script((429, {"Retry-After": "0"}), (201, {}))
    with http_server(throttled.handle) as base:
        assert _send(base, "POST").status_code == 201  # rejected before it ran: sent again
    assert len(throttled.seen) == 2


def test_a_retry_after_longer_than_the_policy_waits_is_not_waited_for() -> None:
    script = Script((429, {"Retry-After": "120"}), (200, {}))
    started = time.monotonic()
    with http_server(script.handle) as base:
        response = _send(base)
    assert response.status_code == 429
    assert time.monotonic() - started < 5


def test_a_slowly_sent_body_is_cut_at_the_deadline() -> None:
    async def dribble(request: Any) -> Any:
        response = web.StreamResponse()
        await response.prepare(request)
        for _ in range(100):  # 1 byte every 0.1 s: each read is quick, the whole is not
            await response.write(b"x")
            await asyncio.sleep(0.1)
        return response

    with http_server(dribble) as base, httpx.Client(base_url=base, timeout=5.0) as client:
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded, match=r"within 1 s"):
            send(client, client.build_request("GET", "/x"), deadline=1.0)
        assert time.monotonic() - started < 3


def test_a_stream_is_handed_back_open_without_a_deadline() -> None:
    async def dribble(request: Any) -> Any:
        response = web.StreamResponse()
        await response.prepare(request)
        for i in range(5):
            await response.write(f"{i}\n".encode())
            await asyncio.sleep(0.3)
        return response

    with http_server(dribble) as base, httpx.Client(base_url=base, timeout=5.0) as client:
        response = send(client, client.build_request("GET", "/x"), deadline=None, stream=True)
        assert list(response.iter_lines()) == ["0", "1", "2", "3", "4"]
        response.close()


@pytest.mark.parametrize(
    ("header", "seconds"),
    [("3", 3.0), ("0", 0.0), ("-2", 0.0), ("soon", None), ("", None)],
)
def test_retry_after_reads_seconds(header: str, seconds: float | None) -> None:
    response = httpx.Response(429, headers={"Retry-After": header} if header else {})
    assert retry_after(response) == seconds


def test_retry_after_reads_an_http_date() -> None:
    when = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    found = retry_after(httpx.Response(503, headers={"Retry-After": when}))
    assert found is not None
    assert 25 <= found <= 31
