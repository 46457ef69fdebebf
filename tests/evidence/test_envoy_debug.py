"""Envoy debug dumps and pretty-printed JSON pasted into ``diagnose -`` (issue 29, "shapes
people paste"). The debug lines are copied from public threads, each cited."""

from __future__ import annotations

import io
import json

import polars as pl
import pytest

from svcdoctor.diagnose import diagnose
from svcdoctor.evidence.stdin import read_with_stdin
from svcdoctor.model import Cause, Verdict

# envoyproxy/envoy#8639 (Envoy 1.12, its own log format; the grep line numbers removed):
# the stream was sent on a pooled connection the upstream closed at that moment
POOLED = """\
[2019-10-14 10:56:06.963][285][debug][pool] [external/envoy/source/common/http/http1/conn_pool.cc:97] [C304210] using existing connection
[2019-10-14 10:56:06.963][285][debug][router] [external/envoy/source/common/router/router.cc:1210] [C523430][S7230925655636222372] pool ready
[2019-10-14 10:56:06.963][285][debug][http2] [external/envoy/source/common/http/http2/codec_impl.cc:567] [C523432] stream closed: 0
[2019-10-14 10:56:06.963][285][debug][connection] [external/envoy/source/common/network/connection_impl.cc:518] [C304210] remote close
[2019-10-14 10:56:06.963][285][debug][connection] [external/envoy/source/common/network/connection_impl.cc:188] [C304210] closing socket: 0
[2019-10-14 10:56:06.963][285][debug][client] [external/envoy/source/common/http/codec_client.cc:82] [C304210] disconnect. resetting 1 pending requests
[2019-10-14 10:56:06.963][285][debug][client] [external/envoy/source/common/http/codec_client.cc:105] [C304210] request reset
[2019-10-14 10:56:06.963][285][debug][router] [external/envoy/source/common/router/router.cc:671] [C523430][S7230925655636222372] upstream reset: reset reason connection termination
"""  # noqa: E501 - log lines as Envoy writes them

# envoyproxy/envoy#7925: the router's line and the local reply of the same stream
LOCAL_REPLY = """\
[2019-08-14 20:57:18.672][15][debug][client] [source/common/http/codec_client.cc:82] [C1] disconnect. resetting 1 pending requests
[2019-08-14 20:57:18.673][15][debug][client] [source/common/http/codec_client.cc:105] [C1] request reset
[2019-08-14 20:57:18.673][15][debug][pool] [source/common/http/http2/conn_pool.cc:233] [C1] destroying stream: 0 remaining
[2019-08-14 20:57:18.673][15][debug][router] [source/common/router/router.cc:868] [C0][S3890394461460335529] upstream reset: reset reason connection termination
[2019-08-14 20:57:18.673][15][debug][http] [source/common/http/conn_manager_impl.cc:1167] [C0][S3890394461460335529] Sending local reply with details upstream_reset_before_response_started{connection termination}
"""  # noqa: E501

# istio-proxy's format: jinsu.me, "When your istio proxy containers terminate before your
# application containers gracefully shutdown, try configuring EXIT_ON_ZERO_ACTIVE_CONNECTIONS"
# (2023-02-04), with the header lines that follow it
ISTIO = (
    "2023-02-04T18:37:09.388954Z\tdebug\tenvoy client\t[C5640] disconnect. resetting 1 "
    "pending requests\n"
    "2023-02-04T18:37:09.389042Z\tdebug\tenvoy client\t[C5640] request reset\n"
    "2023-02-04T18:37:09.389129Z\tdebug\tenvoy router\t[C5639][S7201092609648127836] "
    "upstream reset: reset reason: connection termination, transport failure reason:\n"
    "2023-02-04T18:37:09.390558Z\tdebug\tenvoy http\t[C5639][S7201092609648127836] Sending "
    "local reply with details upstream_reset_before_response_started{connection_termination}\n"
    "2023-02-04T18:37:09.390809Z\tdebug\tenvoy http\t[C5639][S7201092609648127836] encoding "
    "headers via codec (end_stream=true):\n"
    "':status', '503'\n"
    "'content-length', '95'\n"
)
# istio-proxy with the source location, Tags and thread (llm-d-incubation/llm-d-infra#26)
TAGGED = (
    "2025-07-16T21:25:18.290438Z\tdebug\tenvoy pool external/envoy/source/common/conn_pool/"
    'conn_pool_base.cc:282\t[Tags: "ConnectionId":"17"] destroying stream: 0 active '
    "remaining, readyForStream true, currentUnusedCapacity 536870911\tthread=19\n"
    "2025-07-16T21:25:18.290486Z\tdebug\tenvoy router external/envoy/source/common/router/"
    'router.cc:1445\t[Tags: "ConnectionId":"0","StreamId":"10883210309538317510"] upstream '
    "reset: reset reason: connection termination, transport failure reason: \tthread=19\n"
)


def read(text: str) -> pl.DataFrame:
    evidence = read_with_stdin(["-"], io.BytesIO(text.encode()))
    return evidence.requests


@pytest.mark.parametrize(
    ("text", "ts", "reused"),
    [
        (POOLED, "2019-10-14T10:56:06.963", True),
        # as posted there: grep -C's line numbers before each line
        (
            "".join(f"{3236824 + i}-{line}\n" for i, line in enumerate(POOLED.splitlines())),
            "2019-10-14T10:56:06.963",
            True,
        ),
        (LOCAL_REPLY, "2019-08-14T20:57:18.673", None),
        (ISTIO, "2023-02-04T18:37:09.389129", None),
        (ISTIO.replace("\t", " "), "2023-02-04T18:37:09.389129", None),  # tabs lost in a paste
        (TAGGED, "2025-07-16T21:25:18.290486", None),
    ],
)
def test_each_reset_is_one_failure_of_the_error_log(
    text: str, ts: str, reused: bool | None
) -> None:
    rows = read(text)
    assert rows.height == 1, rows
    row = rows.row(0, named=True)
    assert row["role"] == "error_log"
    assert row["outcome"] == "eof"
    assert abs(row["ts"] - _epoch(ts)) < 1e-3
    detail = str(row["detail"])
    assert detail.startswith("upstream_reset_before_response_started{connection_termination}")
    assert ("on a reused pooled connection" in detail) is bool(reused)


def _epoch(text: str) -> float:
    from datetime import UTC, datetime

    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_a_reset_on_a_pooled_connection_is_possible_reuse_never_likely() -> None:
    d = diagnose(read_with_stdin(["-"], io.BytesIO(POOLED.encode())))
    assert d.primary is not None
    assert d.primary.cause is Cause.REUSE
    assert d.primary.verdict is Verdict.POSSIBLE
    assert any("envoy reused connection closed" in e for e in d.primary.evidence)


def test_debug_lines_without_a_reset_are_still_answered_in_one_line() -> None:
    from svcdoctor.evidence.reader import EvidenceError

    head = "\n".join(POOLED.splitlines()[:3]) + "\n"
    with pytest.raises(EvidenceError, match=r"3 Envoy debug lines; collect next"):
        read_with_stdin(["-"], io.BytesIO(head.encode()))


# an Envoy JSON access-log record as ``jq .`` prints it, and records as a JSON array
# (the field names of Envoy's JSON access log, proxylogs.ENVOY_JSON_FIELDS; the values of
# istio/istio#45802's 503 UC)
RECORD = {
    "start_time": "2023-06-28T08:39:43.873Z",
    "response_code": 503,
    "response_flags": "UC",
    "response_code_details": "upstream_reset_before_response_started{connection_termination}",
    "upstream_host": "10.244.1.17:8080",
    "upstream_local_address": "10.244.2.5:41234",
    "duration": 1,
}


def test_a_pretty_printed_json_record_is_one_record() -> None:
    rows = read(json.dumps(RECORD, indent=2) + "\n")
    assert rows.height == 1
    assert rows.item(0, "outcome") == "eof"
    assert rows.item(0, "backend") == "10.244.1.17:8080"


def test_a_pretty_printed_json_array_is_its_records() -> None:
    ok = {**RECORD, "response_code": 200, "response_flags": "-", "response_code_details": "-"}
    records = [{**ok, "start_time": f"2023-06-28T08:39:4{i}.000Z"} for i in range(3)]
    rows = read(json.dumps([*records, RECORD], indent=4) + "\n")
    assert rows.height == 4
    assert rows.get_column("outcome").to_list().count("eof") == 1
    # one pooled upstream connection: the failure was on a reused one
    assert rows.get_column("conn").n_unique() == 1


def test_a_paste_that_mixes_access_and_debug_lines_reads_both() -> None:
    access = "\n".join(json.dumps({**RECORD, "response_code": 200}) for _ in range(1))
    rows = read(access + "\n" + POOLED)
    assert sorted(rows.get_column("role").to_list()) == ["error_log", "request"]
