"""Connection identity per hop (issue 29): a proxy's pooled upstream connection is keyed on
its own side of that connection, and one failure on it after a long idle gap is a
keep-alive mismatch, with the gap quoted."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from svcdoctor.diagnose import diagnose
from svcdoctor.evidence import read_evidence
from svcdoctor.model import Cause, Verdict
from svcdoctor.model.diagnosis import ReuseDetails

# Istio's default text access log (istio/istio#45802 shape; fields as in tests/realshapes.py
# istio_lines): the client app opens a new connection to its sidecar for each request
# (downstream remote ports 51000, 51002, …) while the sidecar reuses one pooled connection to
# the pod (upstream local address 10.244.1.5:43210). The last request comes 65 s after the
# third: the pod had closed the idle connection, the sidecar reused it, 503 UC.
ISTIO = [
    (
        "2026-12-02T10:00:00.100Z",
        '200 - via_upstream - "-" 0 612 12 11',
        "a1",
        "51000",
    ),
    (
        "2026-12-02T10:00:00.400Z",
        '200 - via_upstream - "-" 0 612 9 8',
        "a2",
        "51002",
    ),
    (
        "2026-12-02T10:00:05.000Z",
        '200 - via_upstream - "-" 0 612 10 9',
        "a3",
        "51004",
    ),
    (
        "2026-12-02T10:01:10.010Z",
        '503 UC upstream_reset_before_response_started{connection_termination} - "-" 0 95 1 -',
        "a4",
        "51006",
    ),
]


def istio_lines() -> str:
    return "".join(
        f'[{start}] "GET /api/items HTTP/1.1" {middle} "-" "python-requests/2.31.0" '
        f'"{rid}" "api.default.svc.cluster.local:8080" "10.244.2.7:8080" '
        "outbound|8080||api.default.svc.cluster.local 10.244.1.5:43210 10.96.0.10:8080 "
        f"10.244.1.5:{port} - default\n"
        for start, middle, rid, port in ISTIO
    )


def envoy_json_lines() -> str:
    out = []
    for start, middle, _, port in ISTIO:
        code, flags = middle.split()[:2]
        out.append(
            json.dumps(
                {
                    "start_time": start,
                    "response_code": int(code),
                    "response_flags": flags,
                    "response_code_details": middle.split()[2],
                    "upstream_host": "10.244.2.7:8080",
                    "upstream_cluster": "outbound|8080||api.default.svc.cluster.local",
                    "upstream_local_address": "10.244.1.5:43210",
                    "downstream_remote_address": f"10.244.1.5:{port}",
                    "duration": int(middle.split()[-2]),
                }
            )
        )
    return "\n".join(out) + "\n"


def _reuse(tmp_path: Path, name: str, text: str) -> tuple[Verdict, tuple[str, ...], ReuseDetails]:
    path = tmp_path / name
    path.write_text(text)
    d = diagnose(read_evidence([str(path)]))
    reuse = d.cause(Cause.REUSE)
    assert isinstance(reuse.details, ReuseDetails)
    return reuse.verdict, reuse.evidence, reuse.details


def test_istio_uc_after_65_s_idle_on_the_pooled_upstream_connection_is_reuse(
    tmp_path: Path,
) -> None:
    verdict, evidence, details = _reuse(tmp_path, "istio-proxy.log", istio_lines())
    assert verdict is Verdict.POSSIBLE, evidence
    assert not any("no sign of connection reuse" in e for e in evidence)
    # measured on the sidecar → pod connection: the only failure is on a reused one
    assert details.reused_failure_share == 1.0
    stale = details.stale_connections
    assert stale is not None
    assert stale.failures == 1
    (first,) = stale.examples
    assert first.conn.startswith("10.244.1.5:43210")
    assert 64.9 < first.idle_seconds < 65.1
    assert first.requests_before == 3
    assert any("idle 65 s" in e for e in evidence), evidence


def test_envoy_json_keys_on_upstream_local_address_too(tmp_path: Path) -> None:
    verdict, evidence, details = _reuse(tmp_path, "envoy.json", envoy_json_lines())
    assert verdict is Verdict.POSSIBLE, evidence
    assert details.stale_connections is not None
    assert any("idle 65 s" in e for e in evidence), evidence


def test_a_uc_right_after_a_busy_spell_is_no_idle_mismatch(tmp_path: Path) -> None:
    busy = istio_lines().replace("2026-12-02T10:01:10.010Z", "2026-12-02T10:00:05.600Z")
    _, evidence, details = _reuse(tmp_path, "istio-proxy.log", busy)
    assert details.stale_connections is None
    # the UC line's signature may name idle timeouts as a possibility; no gap is claimed
    assert not any("idle" in e for e in evidence if " read as " not in e)


def test_no_reuse_claim_from_a_single_request(tmp_path: Path) -> None:
    one = "".join(istio_lines().splitlines(keepends=True)[-1:])
    _, evidence, _ = _reuse(tmp_path, "istio-proxy.log", one)
    assert not any("opened a new connection" in e for e in evidence)


def test_alb_undispatched_502s_after_idle_gaps_are_possible_reuse_not_no_cause(
    tmp_path: Path,
) -> None:
    """A Node.js 5 s keep-alive behind an ALB (60 s idle): the ``-1 -1 -1 502 -`` entries
    stay open between refused and closed-idle, and the idle gaps before them, away from any
    deletion, make it reuse (was "no cause": they were read as refused connections)."""
    from tests.diagnose.alb_keepalive import alb_keepalive_log

    verdict, evidence, details = _reuse(tmp_path, "alb.log", alb_keepalive_log(7, 40, 90.0))
    assert verdict is Verdict.POSSIBLE, evidence
    assert details.stale_connections is not None
    assert any("the AWS ALB → 10.0.3." in e for e in evidence), evidence


def test_alb_undispatched_502_is_neither_refused_nor_closed_by_itself(tmp_path: Path) -> None:
    from svcdoctor.evidence.cloudlb import UNDISPATCHED
    from tests.diagnose.alb_keepalive import alb_keepalive_log

    path = tmp_path / "alb.log"
    path.write_text(alb_keepalive_log(7, 40, 90.0))
    rows = read_evidence([str(path)]).requests.filter(pl.col("status") == 502)
    assert set(rows.get_column("outcome").cast(pl.Utf8).to_list()) == {"error"}
    assert set(rows.get_column("detail").cast(pl.Utf8).to_list()) == {UNDISPATCHED}
