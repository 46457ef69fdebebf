"""Per-line signatures (issue 29): a paste of a few lines gets "possible" with the line
quoted and what to collect next; never "likely" from signatures alone; ``UPE`` is no
reuse; kernel lines without request logs are infra whatever their clock; the paste corpus
names no wrong cause."""

from __future__ import annotations

from pathlib import Path

import pytest

from svcdoctor.diagnose import diagnose
from svcdoctor.diagnose.signatures import TABLE, timeout_at
from svcdoctor.evidence import read_evidence
from svcdoctor.model import Cause, Verdict
from svcdoctor.model.diagnosis import Diagnosis
from tests.pastes import run_all

# Istio's default text format (istio/istio#45802, #49660): a pooled upstream connection the
# backend had closed
UC = (
    '[2024-03-01T10:00:{s:02d}.123Z] "GET /api HTTP/1.1" 503 UC '
    'upstream_reset_before_response_started{{connection_termination}} - "-" 0 95 {ms} - '
    '"-" "curl/7.68" "abc{s}" "api:8080" "10.0.0.5:8080" '
    "outbound|8080||api.default.svc.cluster.local 10.0.1.2:45678 10.96.0.10:8080 "
    "10.0.1.2:40000 - default"
)
# the same shape with UPE (istio/istio#40104: "502 UPE upstream_reset_before_response_started
# {protocol_error}")
UPE = UC.replace("503 UC", "502 UPE").replace("connection_termination", "protocol_error")
# AWS ALB, connection refused or reset by the target (all three times -1,
# repost.aws/knowledge-center/elb-alb-troubleshoot-502-errors)
ALB_RST = (
    "http 2022-04-15T16:52:50.757968Z app/my-loadbalancer/50dc6c495c0c9188 "
    "192.168.131.39:2817 10.0.0.1:80 -1 -1 -1 502 - 94 326 "
    '"GET http://example.com:80 HTTP/1.1" "curl/7.51.0" - - '
    "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/my-targets/"
    '73e2d6bc24d8a067 "Root=1-58337262-36d228ad5d99923122bbe354"'
)
# kubernetes/kubernetes#18604 (boot-relative) and #71261 (dmesg -T)
BOOT = "[1454500.910215] nf_conntrack: table full, dropping packet\n" * 3
WALL = "[Tue Nov 20 22:30:27 2018] nf_conntrack: table full, dropping packet\n" * 3


def _diagnose(tmp_path: Path, name: str, text: str) -> Diagnosis:
    path = tmp_path / name
    path.write_text(text)
    return diagnose(read_evidence([str(path)]))


def test_one_uc_line_is_possible_reuse_with_the_line_quoted(tmp_path: Path) -> None:
    d = _diagnose(tmp_path, "envoy.log", UC.format(s=1, ms=0) + "\n")
    reuse = d.cause(Cause.REUSE)
    assert d.primary is reuse
    assert reuse.verdict is Verdict.POSSIBLE
    quoted = [e for e in reuse.evidence if "connection_termination" in e and "«" in e]
    assert quoted, reuse.evidence
    assert any("keep-alive" in c for c in reuse.collect)
    # the cause it leaves open is said, with no score of its own
    assert d.cause(Cause.RACE).verdict is Verdict.UNLIKELY
    assert any("open" in e for e in d.cause(Cause.RACE).evidence)


def test_signatures_never_make_a_cause_likely(tmp_path: Path) -> None:
    text = "".join(UC.format(s=s, ms=0) + "\n" for s in range(40))
    d = _diagnose(tmp_path, "envoy.log", text)
    assert d.cause(Cause.REUSE).verdict is Verdict.POSSIBLE
    assert all(a.verdict is not Verdict.LIKELY for a in d.causes)


def test_upe_is_not_reuse(tmp_path: Path) -> None:
    d = _diagnose(tmp_path, "envoy.log", UPE.format(s=1, ms=0) + "\n")
    assert d.primary is None
    assert any("UPE" in w or "protocol" in w for w in d.summary.warnings), d.summary.warnings
    assert any("not connection reuse" in w for w in d.summary.warnings)


def test_a_failure_at_a_round_timeout_is_the_timeout_not_reuse(tmp_path: Path) -> None:
    # istio/istio#51619: 503 UC after 120001 ms from a slow backend
    d = _diagnose(tmp_path, "envoy.log", UC.format(s=1, ms=120001) + "\n")
    assert d.primary is not None
    assert d.primary.cause is Cause.BACKEND
    assert any("120 s" in e for e in d.primary.evidence)


def test_alb_rst_shape_stays_open_between_race_and_reuse(tmp_path: Path) -> None:
    d = _diagnose(tmp_path, "alb.log", ALB_RST + "\n")
    race, reuse = d.cause(Cause.RACE), d.cause(Cause.REUSE)
    assert race.verdict is Verdict.POSSIBLE
    assert reuse.verdict is Verdict.POSSIBLE
    assert race.score == reuse.score


@pytest.mark.parametrize("text", [BOOT, WALL], ids=["dmesg", "dmesg-T"])
def test_kernel_lines_alone_are_infra_whatever_their_clock(tmp_path: Path, text: str) -> None:
    d = _diagnose(tmp_path, "dmesg.log", text)
    infra = d.cause(Cause.INFRA)
    assert d.primary is infra
    assert infra.verdict is Verdict.POSSIBLE
    assert not any("cannot be lined up" in e for e in infra.evidence)


@pytest.mark.parametrize(
    ("seconds", "at"),
    [(30.0, 30.0), (60.0, 60.0), (120.001, 120.0), (30.075, 30.0), (5.004, 5.0)],
)
def test_round_timeouts(seconds: float, at: float) -> None:
    assert timeout_at(seconds) == at


@pytest.mark.parametrize("seconds", [0.2, 4.9, 29.0, 31.0, 61.0, 119.0])
def test_not_round_timeouts(seconds: float) -> None:
    assert timeout_at(seconds) is None


def test_every_signature_cites_its_source() -> None:
    assert all(s.source.startswith("https://") for s in TABLE)
    assert {c for s in TABLE for c in s.causes} == set(Cause)


def test_paste_corpus_names_no_wrong_cause() -> None:
    results = run_all()
    wrong = [r.line() for r in results if r.score == "wrong"]
    assert not wrong, wrong
    assert sum(r.score == "right" for r in results) >= 15, [r.line() for r in results]
