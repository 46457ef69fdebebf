"""Counting (issue 29): one request's retries count once, the retry sentence says what
became of the request, and a duration at a round timeout is named as a timeout."""

from __future__ import annotations

from pathlib import Path

from svcdoctor.diagnose import diagnose
from svcdoctor.diagnose.rank import failed_requests
from svcdoctor.evidence import read_evidence
from svcdoctor.model import Diagnosis
from svcdoctor.report.diagnosis import headline

# ingress-nginx error log (the shapes of tests/fixtures/evidence): request *1427 was tried on
# two upstreams (proxy_next_upstream "error timeout"), both failed; *1430 failed once.
ERRORS = """\
2026/12/02 10:00:01 [error] 33#33: *1427 connect() failed (111: Connection refused) while \
connecting to upstream, client: 10.0.0.6, server: api.example.com, request: "GET /api/items \
HTTP/1.1", upstream: "http://10.244.1.7:8080/api/items", host: "api.example.com"
2026/12/02 10:00:01 [error] 33#33: *1427 upstream prematurely closed connection while reading \
response header from upstream, client: 10.0.0.6, server: api.example.com, request: "GET \
/api/items HTTP/1.1", upstream: "http://10.244.2.9:8080/api/items", host: "api.example.com"
2026/12/02 10:00:07 [error] 33#33: *1430 connect() failed (111: Connection refused) while \
connecting to upstream, client: 10.0.0.8, server: api.example.com, request: "GET /api/cart \
HTTP/1.1", upstream: "http://10.244.1.7:8080/api/cart", host: "api.example.com"
"""


def _access(second: int, status: str, addrs: str, times: str, statuses: str, took: str) -> str:
    """An ingress-nginx ``upstreaminfo`` line (tests/factory.py nginx_access_lines)."""
    lengths = ", ".join("0" for _ in addrs.split(", "))
    return (
        f'10.0.0.{6 + second % 3} - - [02/Dec/2026:10:00:{second:02d} +0000] "GET /api/items '
        f'HTTP/1.1" {status} 150 "-" "curl/8.5.0" 87 {took} [default-api-80] [] {addrs} '
        f"{lengths} {times} {statuses} {second:032x}\n"
    )


def _ok(second: int) -> str:
    return _access(second, "200", "10.244.1.7:8080", "0.004", "200", "0.004")


def _run(tmp_path: Path, name: str, text: str) -> Diagnosis:
    path = tmp_path / name
    path.write_text(text)
    return diagnose(read_evidence([str(path)]))


def test_two_error_lines_of_one_request_count_once(tmp_path: Path) -> None:
    d = _run(tmp_path, "error.log", ERRORS)
    assert d.summary.error_log_failures == 2  # *1427 and *1430; was 3
    assert d.summary.masked_by_retries == 1  # *1427's first try, retried by nginx
    hosts = {h.host for h in d.summary.error_log_hosts}
    assert hosts == {"10.244.1.7", "10.244.2.9"}


def test_a_request_whose_every_try_failed_counts_once_and_says_so(tmp_path: Path) -> None:
    both = _access(
        5, "502", "10.244.1.7:8080, 10.244.2.9:8080", "0.002, 0.001", "502, 502", "0.004"
    )
    d = _run(tmp_path, "access.log", "".join(_ok(s) for s in range(5)) + both)
    s = d.summary
    assert (s.errors, s.masked_by_retries, s.masked_unrecovered, s.masked_recovered) == (1, 1, 1, 0)
    line = headline(d)
    assert "every retry failed too" in line
    assert "where the retry succeeded" not in line
    assert failed_requests(s) == 1  # what the ranking weighs: one request, not two


def test_a_retry_that_succeeded_is_hidden_from_the_client(tmp_path: Path) -> None:
    saved = _access(
        5, "200", "10.244.1.7:8080, 10.244.2.9:8080", "0.002, 0.001", "502, 200", "0.004"
    )
    d = _run(tmp_path, "access.log", "".join(_ok(s) for s in range(5)) + saved)
    s = d.summary
    assert (s.errors, s.masked_by_retries, s.masked_recovered, s.masked_unrecovered) == (0, 1, 1, 0)
    assert "the retry succeeded" in headline(d)


def test_a_duration_at_a_round_timeout_is_named(tmp_path: Path) -> None:
    cut = _access(9, "502", "10.244.1.7:8080", "120.001", "502", "120.001")
    d = _run(tmp_path, "access.log", "".join(_ok(s) for s in range(5)) + cut)
    (timeout,) = d.summary.round_timeouts
    assert (timeout.seconds, timeout.failures) == (120.0, 1)
    assert "a 120 s timeout fired" in headline(d)
    slow = _access(9, "502", "10.244.1.7:8080", "118.500", "502", "118.500")
    assert (
        _run(tmp_path, "slow.log", "".join(_ok(s) for s in range(5)) + slow).summary.round_timeouts
        == ()
    )
